#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "crosstune/builder/build_codec.h"
#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/builder/sandbox.h"
#include "crosstune/channel.h"
#include "crosstune/cpus.h"
#include "crosstune/testing/support.h"
#include "test_kernels.h"

namespace crosstune::builder {
namespace {

namespace fs = std::filesystem;

BuildRequest Request(const std::string& target, std::vector<std::string> flags = {}) {
  BuildRequest r;
  r.source = testing::kVaddSource;
  r.target = *ParseTarget(target);
  r.flags = std::move(flags);
  return r;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_dir_ = fs::temp_directory_path() / ("crosstune-pool-test-" + std::to_string(::getpid()));
    fs::remove_all(cache_dir_);
  }
  void TearDown() override { fs::remove_all(cache_dir_); }
  std::unique_ptr<Builder> Make(int workers, bool cache) {
    BuilderOptions o;
    o.workers = workers;
    if (cache) o.cache_dir = cache_dir_.string();
    auto b = Builder::Create(o);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return std::move(*b);
  }
  fs::path cache_dir_;
};

TEST_F(PoolTest, BuildManyAnswersEveryRequestInOrder) {
  auto builder = Make(2, false);
  std::vector<BuildRequest> reqs;
  for (int i = 0; i < 6; ++i)
    reqs.push_back(Request(i % 2 ? "aarch64" : "x86-64", {"-DV=" + std::to_string(i)}));
  reqs.push_back(Request("aarch64"));
  reqs.back().source = "int broken(";
  auto results = builder->BuildMany(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status.ToString();
    EXPECT_EQ(results[i].library[18], i % 2 ? static_cast<char>(183) : static_cast<char>(62));
    EXPECT_GT(results[i].build_seconds, 0);
    EXPECT_FALSE(results[i].cache_hit);
  }
  EXPECT_EQ(results[6].status.code(), ErrorCode::kBuildError);
  EXPECT_NE(results[6].diagnostics.find("kernel.c:1:"), std::string::npos);
}

TEST_F(PoolTest, CompilerCrashCostsOneWorkerNotTheCaller) {
  auto builder = Make(1, false);
  BuildRequest crash = Request("x86-64");
  crash.debug_action = BuildRequest::DebugAction::kCrash;
  BuildResult r = builder->Build(crash);
  EXPECT_EQ(r.status.code(), ErrorCode::kBuildError);
  EXPECT_NE(r.status.message().find("crashed (SIGSEGV)"), std::string::npos) << r.status.ToString();
  BuildResult after = builder->Build(Request("x86-64"));
  EXPECT_TRUE(after.ok()) << after.status.ToString();
  EXPECT_EQ(builder->stats().worker_restarts, 1u);
}

TEST_F(PoolTest, BuildPastItsTimeoutIsKilledAndTheWorkerReplaced) {
  auto builder = Make(1, false);
  BuildRequest hang = Request("x86-64");
  hang.debug_action = BuildRequest::DebugAction::kHang;
  hang.timeout = std::chrono::milliseconds(300);
  BuildResult r = builder->Build(hang);
  EXPECT_EQ(r.status.code(), ErrorCode::kTimeout);
  EXPECT_NE(r.status.message().find("timeout of 300 ms"), std::string::npos);
  EXPECT_TRUE(builder->Build(Request("x86-64")).ok());
}

TEST_F(PoolTest, AWorkerWhoseReplyCannotBeReadIsKilledNotWaitedOnForever) {
  // The worker answers with a frame too large to read and then stays alive, ignoring its closed
  // channel. The build's timeout is far away: only killing the worker lets the pool reap it.
  auto builder = Make(1, false);
  BuildRequest garbage = Request("x86-64");
  garbage.debug_action = BuildRequest::DebugAction::kGarbageThenHang;
  garbage.timeout = std::chrono::minutes(10);
  BuildResult r = builder->Build(garbage);
  EXPECT_EQ(r.status.code(), ErrorCode::kBuildError) << r.status.ToString();
  EXPECT_NE(r.status.message().find("did not exit and was killed"), std::string::npos)
      << r.status.ToString();
  EXPECT_EQ(builder->stats().worker_restarts, 1u);
  BuildResult after = builder->Build(Request("x86-64"));
  EXPECT_TRUE(after.ok()) << after.status.ToString();
}

TEST_F(PoolTest, AWorkerReplacedOnAShortLivedThreadOutlivesThatThread) {
  // The replacement for a timed-out worker is started while a BuildMany thread runs; a worker
  // tied to the thread that forked it (PR_SET_PDEATHSIG) would die when that thread returns,
  // and the next build would fail as a "compiler crash (SIGKILL)".
  auto builder = Make(1, false);
  BuildRequest hang = Request("x86-64");
  hang.debug_action = BuildRequest::DebugAction::kHang;
  hang.timeout = std::chrono::milliseconds(200);
  auto first = builder->BuildMany({hang});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].status.code(), ErrorCode::kTimeout);
  std::thread([&] {
    BuildResult r = builder->Build(hang);  // replaced again, on this thread, which then ends
    EXPECT_EQ(r.status.code(), ErrorCode::kTimeout);
    // A build answered by the replacement: it has started (and armed any parent-death signal)
    // before this thread ends.
    BuildResult ok = builder->Build(Request("x86-64"));
    EXPECT_TRUE(ok.ok()) << ok.status.ToString();
  }).join();
  BuildResult after = builder->Build(Request("x86-64"));
  EXPECT_TRUE(after.ok()) << after.status.ToString();
  EXPECT_EQ(builder->stats().worker_restarts, 2u);
}

// The programs of this process's children, from /proc.
std::vector<std::string> ChildPrograms() {
  std::vector<std::string> out;
  const std::string me = std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // pid (comm) state ppid ...: comm may hold spaces, so read from the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid != me) continue;
    std::error_code ec;
    out.push_back(fs::read_symlink(e.path() / "exe", ec).filename().string());
  }
  return out;
}

// A fork of this multi-threaded test process would inherit whatever locks its other threads held;
// the workers are the crosstune-build-worker program instead, started with posix_spawn.
TEST_F(PoolTest, WorkersAreTheirOwnProgramNotForksOfTheCaller) {
  ASSERT_FALSE(BuildWorkerPath().empty())
      << "no worker program: CROSSTUNE_BUILD_WORKER names the tree's (ctest sets it)";
  auto b = Make(2, false);
  ASSERT_TRUE(b->Build(Request("x86-avx2")).ok());
  std::vector<std::string> programs = ChildPrograms();
  ASSERT_EQ(programs.size(), 2u);
  for (const auto& p : programs) EXPECT_EQ(p, "crosstune-build-worker");
}

// `crosstune tune` keeps builds off the CPUs a server on this machine times kernels on: the
// workers run on the CPUs given (one worker per CPU by default), the caller keeps its own.
TEST_F(PoolTest, WorkersRunOnTheCpusGiven) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  BuilderOptions o;
  o.cpus = {allowed.back()};
  auto b = Builder::Create(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->workers(), 1);
  ASSERT_TRUE((*b)->Build(Request("x86-avx2")).ok());
  int children = 0;
  for (const auto& p : testing::ListProcesses()) {
    if (p.ppid != ::getpid()) continue;
    ++children;
    EXPECT_EQ(testing::CpusAllowedList(p.pid), std::to_string(allowed.back()));
  }
  EXPECT_EQ(children, 1);
  EXPECT_EQ(AllowedCpus(), allowed) << "the caller's own CPUs changed";
}

TEST_F(PoolTest, WorkersOnACpuTheCallerMayNotUseAreRefusedByName) {
  const std::vector<int> allowed = AllowedCpus();
  int other = 0;
  while (std::find(allowed.begin(), allowed.end(), other) != allowed.end()) ++other;
  auto b = Builder::Create({.workers = 1, .cpus = {other}});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kInvalidArgument) << b.status().ToString();
  EXPECT_NE(b.status().message().find("build workers' CPUs: CPU " + std::to_string(other) +
                                      " is not one this process may use"),
            std::string::npos)
      << b.status().ToString();
}

TEST_F(PoolTest, RepeatedBuildComesFromTheCache) {
  auto builder = Make(1, true);
  BuildResult first = builder->Build(Request("aarch64"));
  ASSERT_TRUE(first.ok()) << first.status.ToString();
  EXPECT_FALSE(first.cache_hit);
  BuildResult second = builder->Build(Request("aarch64"));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.library, first.library);
  EXPECT_EQ(second.functions.size(), 2u);
  EXPECT_EQ(second.cache_key, first.cache_key);
  // Another flag, target or source is another key.
  EXPECT_FALSE(builder->Build(Request("aarch64", {"-DX=1"})).cache_hit);
  EXPECT_FALSE(builder->Build(Request("cortex-a72")).cache_hit);
  EXPECT_EQ(builder->stats().cache_hits, 1u);
  // A new builder on the same directory hits too.
  auto again = Make(1, true);
  EXPECT_TRUE(again->Build(Request("aarch64")).cache_hit);
}

TEST_F(PoolTest, FailedBuildsAreNotCached) {
  auto builder = Make(1, true);
  BuildRequest bad = Request("x86-64");
  bad.source = "#error nope\n";
  EXPECT_FALSE(builder->Build(bad).ok());
  BuildResult again = builder->Build(bad);
  EXPECT_FALSE(again.ok());
  EXPECT_FALSE(again.cache_hit);
}

TEST(BuildCacheKeyTest, DependsOnEveryInput) {
  BuildRequest a = Request("aarch64");
  BuildRequest b = a;
  EXPECT_EQ(BuildCacheKey(a), BuildCacheKey(b));
  b.flags = {"-O2"};
  EXPECT_NE(BuildCacheKey(a), BuildCacheKey(b));
  b = a;
  b.source += " ";
  EXPECT_NE(BuildCacheKey(a), BuildCacheKey(b));
  b = a;
  b.name = "other";
  EXPECT_NE(BuildCacheKey(a), BuildCacheKey(b));
}

// A generated source (a template's parameters) is as untrusted as a client's: the pool's workers
// are boxed (sandbox.h), so the assembler's .incbin reaches no file outside the build's folder.
TEST_F(PoolTest, AnIncbinOfAHostFileFailsInsideTheWorkers) {
  if (LandlockAbi() == 0) GTEST_SKIP() << "this kernel has no Landlock";
  testing::TempDir dir("crosstune-secret");
  const std::string secret = "tracker_token_5ec12e7";
  const std::string path = testing::WriteFile(dir.path() + "/token", secret + "\n");
  BuildRequest r = Request("x86-avx2");
  r.source = std::string(testing::kVaddSource) + "__asm__(\".section .rodata\\n.incbin \\\"" +
             path + "\\\"\\n.previous\");\n";
  auto b = Make(1, false);
  BuildResult result = b->Build(r);
  EXPECT_EQ(result.library.find(secret), std::string::npos) << "the file's bytes came back";
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status.code(), ErrorCode::kBuildError);
  EXPECT_NE(result.status.message().find(path), std::string::npos) << result.status.message();
  // The worker goes on building.
  EXPECT_TRUE(b->Build(Request("x86-avx2")).ok());
  EXPECT_EQ(b->stats().worker_restarts, 0u);
}

// NVRTC reads its builtins library at the first compile, from the toolchain's folder the box
// allows; an #include of a host file is refused by the box (NVRTC has no file system hook).
TEST_F(PoolTest, CudaBuildsWorkInsideTheWorkersAndReachNoHostFile) {
  if (!HasNvrtc()) GTEST_SKIP() << "built without NVRTC";
  if (LandlockAbi() == 0) GTEST_SKIP() << "this kernel has no Landlock";
  auto b = Make(1, false);
  BuildRequest r = Request("cuda -arch=sm_80");
  r.source = testing::kCudaVaddSource;
  BuildResult built = b->Build(r);
  EXPECT_TRUE(built.ok()) << built.status.ToString();
  EXPECT_FALSE(built.library.empty());

  testing::TempDir dir("crosstune-secret");
  const std::string secret = "tracker_token_5ec12e7";
  const std::string path = testing::WriteFile(dir.path() + "/token", secret + "\n");
  r.source = "#include \"" + path + "\"\n" + std::string(testing::kCudaVaddSource);
  BuildResult included = b->Build(r);
  EXPECT_FALSE(included.ok());
  EXPECT_EQ(included.status.message().find(secret), std::string::npos) << included.status.message();
  EXPECT_EQ(b->stats().worker_restarts, 0u);
}

// --- where the worker program is, and its handshake ---------------------------------------------

// Sets an environment variable (nullptr: removes it) for a scope; the old value comes back after.
// Set before a Builder is made, so no thread of the pool reads the environment meanwhile.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    had_ = ::getenv(name) != nullptr;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_.c_str(), old_.c_str(), 1) : ::unsetenv(name_.c_str()); }

 private:
  std::string name_, old_;
  bool had_ = false;
};

std::string ThisVersion() {
  return "crosstune " + std::string(kCrosstuneVersion) + " (protocol " +
         std::to_string(kProtocolMajor) + "." + std::to_string(kProtocolMinor) + ")";
}

#define CT_EXPECT_HAS(text, part)                            \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "no '" << (part) << "' in: " << (text)

// The build tree's worker runs only where it is named (the tests' CTest environment does):
// a program of the build tree run by hand must not start it in place of the installed one.
TEST(BuildWorkerPathTest, TheBuildTreesWorkerIsUsedOnlyWhereNamed) {
  {
    ScopedEnv named("CROSSTUNE_BUILD_WORKER", CT_BUILD_WORKER_BIN);
    EXPECT_EQ(BuildWorkerPath(), CT_BUILD_WORKER_BIN);
  }
  ScopedEnv unset("CROSSTUNE_BUILD_WORKER", nullptr);
  EXPECT_NE(BuildWorkerPath(), CT_BUILD_WORKER_BIN);
}

// An installed program runs the worker of its own install tree, wherever that tree is.
TEST(BuildWorkerPathTest, AnInstalledProgramFindsTheWorkerOfItsOwnInstallTree) {
  if (fs::path(CT_INSTALL_BINDIR).is_absolute() || fs::path(CT_INSTALL_LIBEXECDIR).is_absolute()) {
    GTEST_SKIP() << "bin and libexec are configured as absolute folders: no install tree to move";
  }
  testing::TempDir prefix("crosstune-installed");
  const fs::path program = fs::path(prefix.path()) / CT_INSTALL_BINDIR / "crosstune";
  const fs::path worker =
      fs::path(prefix.path()) / CT_INSTALL_LIBEXECDIR / "crosstune" / "crosstune-build-worker";
  EXPECT_NE(InstalledBuildWorkerPath(program.string()), worker.string()) << "not installed yet";
  fs::create_directories(worker.parent_path());
  fs::copy_file(CT_BUILD_WORKER_BIN, worker);
  EXPECT_EQ(InstalledBuildWorkerPath(program.string()), worker.string());
}

// The test worker stating this release and protocol serves builds: what the tests below change
// is only the version it states.
TEST_F(PoolTest, AWorkerStatingThisVersionServes) {
  auto b = Builder::Create({.workers = 1, .worker_program = CT_TEST_WORKER_BIN});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  BuildResult r = (*b)->Build(Request("x86-64"));
  EXPECT_TRUE(r.ok()) << r.status.ToString();
}

TEST_F(PoolTest, AWorkerOfAnotherProtocolIsRefusedByNameWithBothVersions) {
  const std::string minor = std::to_string(kProtocolMinor + 1);
  ScopedEnv states("CT_TEST_WORKER_MINOR", minor.c_str());
  auto b = Builder::Create({.workers = 2, .worker_program = CT_TEST_WORKER_BIN});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kVersionMismatch) << b.status().ToString();
  CT_EXPECT_HAS(b.status().message(),
                "build worker " + std::string(CT_TEST_WORKER_BIN) + " is crosstune");
  CT_EXPECT_HAS(b.status().message(), "(protocol " + std::to_string(kProtocolMajor) + "." + minor +
                                          "); this is " + ThisVersion());
}

TEST_F(PoolTest, AWorkerOfAnotherReleaseIsRefusedByName) {
  ScopedEnv states("CT_TEST_WORKER_RELEASE", "0.0.1");
  auto b = Builder::Create({.workers = 1, .worker_program = CT_TEST_WORKER_BIN});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kVersionMismatch) << b.status().ToString();
  CT_EXPECT_HAS(b.status().message(),
                "build worker " + std::string(CT_TEST_WORKER_BIN) + " is crosstune 0.0.1");
  CT_EXPECT_HAS(b.status().message(), "this is " + ThisVersion());
}

// A program that answers no handshake (a worker from before it, or no worker at all) is refused
// by name too, saying how it ended.
TEST_F(PoolTest, AProgramThatAnswersNoHandshakeIsRefusedByName) {
  auto b = Builder::Create({.workers = 1, .worker_program = "/bin/true"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kVersionMismatch) << b.status().ToString();
  CT_EXPECT_HAS(b.status().message(),
                "build worker /bin/true did not answer the handshake of " + ThisVersion());
  CT_EXPECT_HAS(b.status().message(), "it exited with status 0");
}

// The worker program is upgraded under a running pool (its file replaced by another release's):
// the replacement for a crashed worker is refused by name, the build it was started for fails
// with that, and the pool goes on with its other worker. When no worker is left, every build
// fails at once with the refusal; none waits.
TEST_F(PoolTest, AReplacementOfAnotherVersionIsRefusedAndThePoolServesOn) {
  testing::TempDir dir("crosstune-upgrade");
  const fs::path program = fs::path(dir.path()) / "crosstune-build-worker";
  fs::create_symlink(CT_BUILD_WORKER_BIN, program);
  const std::string minor = std::to_string(kProtocolMinor + 1);
  ScopedEnv states("CT_TEST_WORKER_MINOR", minor.c_str());  // read by the test worker only
  auto made = Builder::Create({.workers = 2, .worker_program = program.string()});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Builder& b = **made;
  ASSERT_TRUE(b.Build(Request("x86-64")).ok());

  fs::remove(program);
  fs::create_symlink(CT_TEST_WORKER_BIN, program);  // the "upgrade"
  BuildRequest crash = Request("x86-64");
  crash.debug_action = BuildRequest::DebugAction::kCrash;
  EXPECT_EQ(b.Build(crash).status.code(), ErrorCode::kBuildError);  // its replacement: the new one
  BuildResult refused = b.Build(Request("x86-64"));
  EXPECT_EQ(refused.status.code(), ErrorCode::kVersionMismatch) << refused.status.ToString();
  CT_EXPECT_HAS(refused.status.message(), "build worker " + program.string() + " is crosstune");
  CT_EXPECT_HAS(refused.status.message(), "." + minor + "); this is " + ThisVersion());
  EXPECT_EQ(b.stats().workers_refused, 1u);

  std::vector<BuildRequest> more(4, Request("x86-64"));
  for (const BuildResult& r : b.BuildMany(more)) EXPECT_TRUE(r.ok()) << r.status.ToString();

  EXPECT_EQ(b.Build(crash).status.code(), ErrorCode::kBuildError);  // the last worker goes too
  for (int i = 0; i < 3; ++i) {
    BuildResult none_left = b.Build(Request("x86-64"));
    EXPECT_EQ(none_left.status.code(), ErrorCode::kVersionMismatch) << none_left.status.ToString();
  }
  EXPECT_EQ(b.stats().workers_refused, 2u);
}

// A pool from before the handshake sends a build first: the worker answers it with an error
// naming its own version (that pool reports the build's error), and ends.
TEST(BuildWorkerHandshakeTest, AWorkerTellsAPoolWithoutTheHandshakeItsVersion) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 3);
  char* argv[] = {const_cast<char*>(CT_BUILD_WORKER_BIN), nullptr};
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, CT_BUILD_WORKER_BIN, &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(sv[1]);
  Channel ch(sv[0]);
  ch.set_utf8_strings(false);
  auto reply =
      ch.Call<msg::Empty>(Opcode::kCall, msg::Empty{}, DeadlineIn(std::chrono::seconds(30)));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), ErrorCode::kVersionMismatch) << reply.status().ToString();
  CT_EXPECT_HAS(reply.status().message(), "crosstune-build-worker of " + ThisVersion() +
                                              " got a build before the pool's handshake");
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 2) << wstatus;
}

TEST(BuildCodecTest, AnUnknownTargetKindIsRefusedByNameWhenDecoded) {
  BuildRequest r;
  r.source = "int x;";
  r.target.kind = static_cast<TargetKind>(7);
  auto decoded = DecodeBuildRequest(EncodeBuildRequest(r));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("target kind 7"), std::string::npos)
      << decoded.status().message();
  r.target.kind = TargetKind::kCuda;
  EXPECT_TRUE(DecodeBuildRequest(EncodeBuildRequest(r)).ok());
}

}  // namespace
}  // namespace crosstune::builder
