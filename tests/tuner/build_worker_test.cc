// crosstune-build-worker serving builds over loopback, a second "host" on this machine: the same
// package bytes as the local pool for the same candidates, a crashing compile that ends only its
// own session, a wrong secret refused by name while the worker goes on serving, and a worker that
// registers with a real tracker under its build key and is leased like a device.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../tracker/farm.h"
#include "crosstune/build_job.h"
#include "crosstune/builder/build_codec.h"
#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/builder/sandbox.h"
#include "crosstune/client/session.h"
#include "crosstune/crypto.h"
#include "crosstune/handshake.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/remote_builder.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

using testing::Farm;

std::vector<std::string> WorkerArgv(std::vector<std::string> extra,
                                    const std::string& host = "127.0.0.1") {
  std::vector<std::string> argv = {
      CT_BUILD_WORKER_BIN, "--host", host, "--port", "0", "--cores", "2", "--exit-with-parent"};
  // A kernel without Landlock: the worker refuses to start without this (tested below).
  if (builder::LandlockAbi() == 0) argv.emplace_back("--allow-unconfined-builds");
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// A handshaken connection to a worker, for requests a RemoteBuilder would never send.
Channel RawSession(const ServerProcess& worker, Deadline deadline) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(Channel::ParseHostPort(worker.address(), &host, &port).ok());
  auto ch = Channel::Connect(host, port, deadline);
  EXPECT_TRUE(ch.ok()) << ch.status().ToString();
  if (!ch.ok()) return Channel();
  EXPECT_TRUE(ClientHandshake(*ch, msg::Hello{}, "", deadline).ok());
  return std::move(ch).value();
}

// The worker's own description of this machine, and a target for it.
struct Machine {
  msg::DeviceInfo info;
  builder::Target target;
};
Machine Describe(const std::string& address, const std::string& secret = "") {
  client::ConnectOptions co;
  co.server = address;
  co.auth_secret = secret;
  auto session = client::Session::Connect(co);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  auto info = (*session)->Info();
  EXPECT_TRUE(info.ok());
  (void)(*session)->Close();
  auto target = builder::TargetFromDevice(*info);
  EXPECT_TRUE(target.ok());
  return {*info, *target};
}

std::unique_ptr<RemoteBuilder> ConnectWorker(const std::string& address,
                                             const std::string& secret = "") {
  RemoteBuilderOptions o;
  o.connect.server = address;
  o.connect.auth_secret = secret;
  auto rb = RemoteBuilder::Connect(o);
  EXPECT_TRUE(rb.ok()) << rb.status().ToString();
  return rb.ok() ? std::move(rb).value() : nullptr;
}

TEST(BuildWorker, BuildsTheSamePackageBytesAsTheLocalPool) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  Machine m = Describe(worker.address());
  EXPECT_EQ(m.info.cores, 2u) << "Info names the builds it runs at once";
  EXPECT_FALSE(m.info.build_targets.empty());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->slots(), 2);
  auto local = builder::Builder::Create({.workers = 1});
  ASSERT_TRUE(local.ok());

  auto task = MakeTask("matmul", {48, 48, 48}, m.target);
  ASSERT_TRUE(task.ok());
  std::vector<uint64_t> indices;
  for (uint64_t i = 0; i < 6; ++i) indices.push_back(i * 7 % (*task)->space().size());
  MeasureOptions mo;
  auto here = BuildCandidates(**local, **task, indices, m.info, mo);
  auto there = BuildCandidates(*remote, **task, indices, m.info, mo);
  ASSERT_EQ(here.size(), there.size());
  int built = 0;
  for (size_t i = 0; i < here.size(); ++i) {
    EXPECT_EQ(here[i].error, there[i].error) << there[i].message;
    if (here[i].error != TrialError::kOk) continue;
    ++built;
    EXPECT_FALSE(there[i].library.empty());
    EXPECT_TRUE(here[i].library == there[i].library)
        << "candidate " << indices[i] << ": " << here[i].library.size() << " bytes here, "
        << there[i].library.size() << " there";
  }
  EXPECT_GT(built, 0);

  // And the packages written from the two results, byte for byte.
  builder::BuildRequest req;
  req.source = (*task)->Generate((*task)->space().Get(indices[0]));
  req.target = m.target;
  req.name = "matmul_0";
  builder::BuildResult a = (*local)->Build(req);
  builder::BuildResult b = remote->Build(req);
  ASSERT_TRUE(a.ok()) << a.status.ToString();
  ASSERT_TRUE(b.ok()) << b.status.ToString();
  Farm dir;  // a scratch directory
  ASSERT_TRUE(builder::WriteBuildPackage(req, a, dir.Path("here.ctpkg")).ok());
  ASSERT_TRUE(builder::WriteBuildPackage(req, b, dir.Path("there.ctpkg")).ok());
  const std::string here_pkg = testing::ReadFile(dir.Path("here.ctpkg"));
  EXPECT_FALSE(here_pkg.empty());
  EXPECT_TRUE(here_pkg == testing::ReadFile(dir.Path("there.ctpkg")));
  EXPECT_FALSE(remote->lost());
}

TEST(BuildWorker, ACrashingOrHangingCompileEndsOnlyItsSessionAndTheWorkerGoesOnServing) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  Machine m = Describe(worker.address());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  builder::BuildRequest crash;
  crash.source = "int x;";
  crash.target = m.target;
  crash.object_only = true;
  crash.debug_action = builder::BuildRequest::DebugAction::kCrash;
  builder::BuildResult r = remote->Build(crash);
  EXPECT_EQ(r.status.code(), ErrorCode::kBuildError) << r.status.ToString();
  EXPECT_NE(r.status.message().find("SIGSEGV"), std::string::npos) << r.status.message();
  EXPECT_FALSE(remote->lost()) << "a crash is the build's, not a lost worker";

  builder::BuildRequest hang = crash;
  hang.debug_action = builder::BuildRequest::DebugAction::kHang;
  hang.timeout = std::chrono::milliseconds(300);
  builder::BuildResult late = remote->Build(hang);
  EXPECT_EQ(late.status.code(), ErrorCode::kTimeout) << late.status.ToString();
  EXPECT_FALSE(remote->lost()) << "a build past its limit is the build's, not a lost worker";

  builder::BuildRequest fine = crash;
  fine.debug_action = builder::BuildRequest::DebugAction::kNone;
  builder::BuildResult ok = remote->Build(fine);
  EXPECT_TRUE(ok.ok()) << ok.status.ToString();
  EXPECT_FALSE(ok.library.empty());
}

TEST(BuildWorker, AWrongSecretIsRefusedByNameAndTheWorkerGoesOnServing) {
  Farm dir;  // a scratch directory
  const std::string secret_file = dir.WriteFile("secret", "right-secret\n");
  ServerProcess worker;
  ASSERT_TRUE(
      worker.Start(WorkerArgv({"--auth-token-file", secret_file}), std::chrono::seconds(30)).ok());
  RemoteBuilderOptions o;
  o.connect.server = worker.address();
  o.connect.auth_secret = "wrong-secret";
  auto refused = RemoteBuilder::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnauthorized) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find(worker.address()), std::string::npos)
      << "names the worker: " << refused.status().message();
  o.connect.auth_secret.clear();
  EXPECT_EQ(RemoteBuilder::Connect(o).status().code(), ErrorCode::kUnauthorized);

  Machine m = Describe(worker.address(), "right-secret");
  auto remote = ConnectWorker(worker.address(), "right-secret");
  ASSERT_TRUE(remote);
  builder::BuildRequest req;
  req.source = "int x;";
  req.target = m.target;
  req.object_only = true;
  EXPECT_TRUE(remote->Build(req).ok());
}

TEST(BuildWorker, RefusesBadRequestsByNameAndGoesOnServing) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(Channel::ParseHostPort(worker.address(), &host, &port).ok());
  const Deadline soon = DeadlineIn(std::chrono::seconds(10));
  auto ch = Channel::Connect(host, port, soon);
  ASSERT_TRUE(ch.ok());
  ASSERT_TRUE(ClientHandshake(*ch, msg::Hello{}, "", soon).ok());

  // Bytes that are not a build request (their hash right): a named error, the session goes on.
  auto garbage = CallBuildJob(*ch, "not msgpack \xc1", 1000, soon);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), ErrorCode::kProtocolError) << garbage.status().ToString();
  EXPECT_NE(garbage.status().message().find("build request"), std::string::npos);
  // A device's request: refused here, the session goes on.
  auto listing = ch->Call<msg::Empty>(Opcode::kListFiles, msg::Empty{}, soon);
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), ErrorCode::kProtocolError) << listing.status().ToString();
  EXPECT_TRUE(ch->Call<msg::Empty>(Opcode::kPing, msg::Empty{}, soon).ok());

  // A request announced past the limit: refused before a byte is read (the session then ends).
  msg::BuildJob huge{Limits::kMaxBuildJobBytes + 1, Sha256Hex(""), 0};
  auto refused = ch->Call<msg::BuildJobReply>(Opcode::kBuild, huge, soon);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kLimitExceeded) << refused.status().ToString();

  // The worker goes on serving.
  Machine m = Describe(worker.address());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  builder::BuildRequest req;
  req.source = "int x;";
  req.target = m.target;
  req.object_only = true;
  EXPECT_TRUE(remote->Build(req).ok());
}

TEST(BuildWorker, RegistersUnderItsBuildKeyAndIsLeasedLikeADevice) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  ServerProcess worker;
  ASSERT_TRUE(worker
                  .Start(WorkerArgv({"--tracker", farm.tracker(), "--key", "builders"}),
                         std::chrono::seconds(30), farm.Path("worker.log"))
                  .ok());
  ASSERT_TRUE(farm.WaitRegistered(1));
  nlohmann::json summary = farm.Summary();
  ASSERT_EQ(summary["devices"].size(), 1u);
  const nlohmann::json& d = summary["devices"][0];
  EXPECT_EQ(d["key"], "builders");
  EXPECT_EQ(d["state"], "free");
  EXPECT_EQ(d["tags"]["role"], "build-worker") << d.dump(2);
  EXPECT_EQ(d["cores"], 2) << "the builds it runs at once";
  ASSERT_TRUE(d["build_targets"].is_array()) << d.dump(2);
  EXPECT_NE(std::find(d["build_targets"].begin(), d["build_targets"].end(), "cpu"),
            d["build_targets"].end())
      << d.dump(2);

  // Without the lease token the worker refuses (it serves only its lease holder).
  RemoteBuilderOptions o;
  o.connect.server = worker.address();
  EXPECT_FALSE(RemoteBuilder::Connect(o).ok());

  client::TrackerOptions to;
  to.tracker = farm.tracker();
  to.peer_name = "build-worker-test";
  auto pool = DevicePool::FromTracker(to, "builders", 0, std::chrono::seconds(10), "",
                                      std::chrono::seconds(30));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ((*pool)->devices().size(), 1u);
  o.connect.lease_token = (*pool)->devices()[0].lease_token;
  auto remote = RemoteBuilder::Connect(o);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ((*remote)->slots(), 2);
  builder::BuildRequest req;
  req.source = "int x;";
  req.target = *builder::ParseTarget("llvm -mtriple=x86_64-linux-gnu");
  req.object_only = true;
  builder::BuildResult r = (*remote)->Build(req);
  EXPECT_TRUE(r.ok()) << r.status.ToString();
}

// The worker's own secret, which a client's source must never bring back.
constexpr const char* kToken = "tracker_token_5ec12e7";

TEST(BuildWorkerBox, ASourceOrLinkInputNamingTheWorkersFilesBringsBackNoByteOfThem) {
  Farm dir;  // a scratch directory
  const std::string token_file = dir.WriteFile("servers.secret", std::string(kToken) + "\n");
  ServerProcess worker;
  const std::string cache_dir = dir.Path("cache");
  ASSERT_TRUE(worker
                  .Start(WorkerArgv({"--auth-token-file", token_file, "--cache-dir", cache_dir}),
                         std::chrono::seconds(30), dir.Path("worker.log"))
                  .ok());
  Machine m = Describe(worker.address(), kToken);
  auto remote = ConnectWorker(worker.address(), kToken);
  ASSERT_TRUE(remote);
  auto expect_nothing_leaked = [&](const builder::BuildResult& r, const std::string& what) {
    EXPECT_FALSE(r.ok()) << what;
    for (const std::string* text : {&r.library, &r.diagnostics, &r.status.message()}) {
      EXPECT_EQ(text->find(kToken), std::string::npos) << what << " brought back: " << *text;
    }
  };
  builder::BuildRequest req;
  req.target = m.target;
  req.object_only = true;
  if (builder::LandlockAbi() > 0) {  // the assembler's reads are stopped by the box alone
    req.source =
        "__asm__(\".section .rodata\\n.incbin \\\"" + token_file + "\\\"\\n.previous\");\n";
    expect_nothing_leaked(remote->Build(req), ".incbin");
  }
  req.source = "#include \"" + token_file + "\"\n";
  builder::BuildResult included = remote->Build(req);
  expect_nothing_leaked(included, "#include");
  EXPECT_NE(included.status.message().find("file not found"), std::string::npos)
      << included.status.message();

  builder::BuildRequest link;
  link.target = m.target;
  link.source = "int x;\n";
  link.link_objects = {"INPUT(" + token_file + ")\n"};
  builder::BuildResult script = remote->Build(link);
  expect_nothing_leaked(script, "a linker script");
  EXPECT_NE(script.status.message().find("link input 1 is not an ELF object"), std::string::npos)
      << script.status.message();

  // The worker goes on building, into its cache (inside the box too).
  req.source = "int x;\n";
  builder::BuildResult fine = remote->Build(req);
  EXPECT_TRUE(fine.ok()) << fine.status.ToString();
  EXPECT_TRUE(std::filesystem::exists(cache_dir) && !std::filesystem::is_empty(cache_dir))
      << "the build was stored";
  EXPECT_FALSE(remote->lost());
}

TEST(BuildWorkerBox, ARequestPastTheWorkersSizeLimitIsRefusedBeforeItIsRead) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({"--max-build-mb", "1"}), std::chrono::seconds(30)).ok());
  const Deadline soon = DeadlineIn(std::chrono::seconds(10));
  Channel ch = RawSession(worker, soon);
  msg::BuildJob big{(uint64_t{1} << 20) + 1, Sha256Hex(""), 0};
  auto refused = ch.Call<msg::BuildJobReply>(Opcode::kBuild, big, soon);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kLimitExceeded) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--max-build-mb"), std::string::npos)
      << refused.status().message();

  // Up to the limit is read, and the worker goes on serving.
  Machine m = Describe(worker.address());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  builder::BuildRequest req;
  req.source = "int x;\n/*" + std::string(512 << 10, ' ') + "*/\n";
  req.target = m.target;
  req.object_only = true;
  builder::BuildResult r = remote->Build(req);
  EXPECT_TRUE(r.ok()) << r.status.ToString();
}

TEST(BuildWorkerBox, ByDefaultARequestClaimingAGibibyteIsRefusedBeforeItIsRead) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  const Deadline soon = DeadlineIn(std::chrono::seconds(10));
  Channel ch = RawSession(worker, soon);
  msg::BuildJob big{Limits::kMaxBuildJobBytes, Sha256Hex(""), 0};
  auto refused = ch.Call<msg::BuildJobReply>(Opcode::kBuild, big, soon);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kLimitExceeded) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("268435456"), std::string::npos)
      << "the default limit is 256 MiB: " << refused.status().message();
}

TEST(BuildWorkerBox, EachSessionProcessHasItsMemoryBound) {
  if (kSanitized) GTEST_SKIP() << "sanitizer builds leave the address space unbounded";
  ServerProcess worker;
  ASSERT_TRUE(
      worker.Start(WorkerArgv({"--session-memory-mb", "3000"}), std::chrono::seconds(30)).ok());
  Machine m = Describe(worker.address());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  builder::BuildRequest req;
  req.source = "int x;\n";
  req.target = m.target;
  req.object_only = true;
  ASSERT_TRUE(remote->Build(req).ok());
  if (builder::HasNvrtc()) {  // NVRTC under the bound (and in the box) too
    builder::BuildRequest cuda;
    cuda.source =
        "// crosstune: kernel k(t) grid=1 block=1\n"
        "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n";
    cuda.target = *builder::ParseTarget("cuda -arch=sm_80");
    builder::BuildResult r = remote->Build(cuda);
    EXPECT_TRUE(r.ok()) << r.status.ToString();
  }
  std::vector<testing::ProcessInfo> sessions = testing::SessionProcesses(worker.pid());
  ASSERT_FALSE(sessions.empty());
  int bounded = 0;
  for (const auto& p : sessions) {
    std::ifstream limits("/proc/" + std::to_string(p.pid) + "/limits");
    for (std::string line; std::getline(limits, line);) {
      if (line.rfind("Max address space", 0) == 0 &&
          line.find(std::to_string(uint64_t{3000} << 20)) != std::string::npos) {
        ++bounded;
      }
    }
  }
  EXPECT_GE(bounded, 1) << "the session that built has RLIMIT_AS at 3000 MiB";
}

TEST(BuildWorkerBox, AnUnknownTargetKindIsRefusedByNameAndTheSessionGoesOn) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  const Deadline soon = DeadlineIn(std::chrono::seconds(20));
  Channel ch = RawSession(worker, soon);
  builder::BuildRequest req;
  req.source = "int x;\n";
  req.target.kind = static_cast<builder::TargetKind>(7);
  auto refused = CallBuildJob(ch, builder::EncodeBuildRequest(req), 10'000, soon);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("target kind 7"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(ch.Call<msg::Empty>(Opcode::kPing, msg::Empty{}, soon).ok());
}

TEST(BuildWorkerBox, RefusesToListenBeyondLoopbackWithoutASecretUnlessToldInsecure) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  ServerProcess refused;
  ASSERT_FALSE(
      refused.Start(WorkerArgv({}, "0.0.0.0"), std::chrono::seconds(30), farm.Path("refused.log"))
          .ok());
  const std::string log = testing::ReadFile(farm.Path("refused.log"));
  EXPECT_NE(log.find("refusing to listen on 0.0.0.0 without --auth-token-file"), std::string::npos)
      << log;

  ServerProcess worker;
  ASSERT_TRUE(worker
                  .Start(WorkerArgv({"--insecure-allow-any-client", "--tracker", farm.tracker(),
                                     "--key", "builders"},
                                    "0.0.0.0"),
                         std::chrono::seconds(30), farm.Path("worker.log"))
                  .ok());
  ASSERT_TRUE(farm.WaitRegistered(1));
  nlohmann::json summary = farm.Summary();
  ASSERT_EQ(summary["devices"].size(), 1u);
  EXPECT_EQ(summary["devices"][0]["tags"]["insecure"], "any-client") << summary.dump(2);
  const std::string worker_log = testing::ReadFile(farm.Path("worker.log"));
  EXPECT_NE(worker_log.find("WARNING: listening on 0.0.0.0 without --auth-token-file"),
            std::string::npos)
      << worker_log;
}

// Runs the worker with `args` in a child whose kernel seems to have no Landlock (a seccomp filter
// answers its probe with ENOSYS), stderr to `log`. Returns the first line it prints on stdout, or
// "exit N" when it exits first; a worker still running is then ended.
std::string RunWithoutLandlock(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  std::vector<std::string> owned = WorkerArgv(args);
  owned.erase(std::remove(owned.begin(), owned.end(), "--allow-unconfined-builds"), owned.end());
  if (std::find(args.begin(), args.end(), "--allow-unconfined-builds") != args.end()) {
    owned.emplace_back("--allow-unconfined-builds");
  }
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return "no pipe";
  const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err, 2);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      ::_exit(120);
    }
    ::execv(argv[0], argv.data());
    ::_exit(121);
  }
  ::close(out[1]);
  ::close(err);
  std::string line;
  char c = 0;
  pollfd p{out[0], POLLIN, 0};
  while (::poll(&p, 1, 30'000) == 1 && ::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  int status = 0;
  if (line.empty()) {
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "signalled";
  }
  ::kill(pid, SIGTERM);
  ::waitpid(pid, &status, 0);
  return line;
}

TEST(BuildWorkerBox, WithoutLandlockTheWorkerRefusesToStartUnlessToldToBuildUnconfined) {
  Farm dir;  // a scratch directory
  EXPECT_EQ(RunWithoutLandlock({}, dir.Path("refused.log")), "exit 1");
  const std::string log = testing::ReadFile(dir.Path("refused.log"));
  EXPECT_NE(log.find("no Landlock"), std::string::npos) << log;
  EXPECT_NE(log.find("--allow-unconfined-builds"), std::string::npos) << log;

  const std::string line =
      RunWithoutLandlock({"--allow-unconfined-builds"}, dir.Path("unconfined.log"));
  EXPECT_NE(line.find("listening on 127.0.0.1:"), std::string::npos) << line;
  const std::string warned = testing::ReadFile(dir.Path("unconfined.log"));
  EXPECT_NE(warned.find("WARNING: this kernel has no Landlock"), std::string::npos) << warned;
}

}  // namespace
}  // namespace crosstune::tuner
