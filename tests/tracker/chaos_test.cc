// Chaos on a loopback farm (the real tracker and servers as processes): a server killed with
// SIGKILL in the middle of a call, an upload and a tensor copy, and a client killed while it holds
// a lease. Each time the client mid-operation gets a named error instead of hanging, the session
// processes go with their server, the tracker ends the lease and drops the device, nothing is
// granted twice, and a normal session on the farm works afterwards.
//
// (A tracker killed with leases held and requests queued, and a descriptor flood, are in
// tracker_integration_test.cc and tracker_hardening_test.cc.)
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "farm.h"

extern char** environ;

namespace crosstune::testing {
namespace {

using namespace std::chrono_literals;

// What a user does with a device: upload the kernels, load them, call one.
Status NormalSession(const std::string& server, const std::string& token) {
  CT_ASSIGN_OR_RETURN(auto s, LeasedSession(server, token, 30s));
  CT_RETURN_IF_ERROR(s->Upload(CT_TEST_KERNELS, "k.so").status());
  CT_ASSIGN_OR_RETURN(auto m, s->LoadModule("k.so"));
  CT_RETURN_IF_ERROR(m.Call("busy_us", {client::CallArg::Int(1000)}).status());
  return s->Close();
}

// /proc/<pid>/stat: user CPU ticks.
struct ProcStat {
  long utime = 0;
};
ProcStat ReadStat(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ProcStat st;
  size_t close = text.rfind(')');
  if (close == std::string::npos) return st;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  // Fields after the command: state(3) ... utime(14).
  for (int i = 3; i <= 14 && rest >> field; ++i) {
    if (i == 14) st.utime = std::strtol(field.c_str(), nullptr, 10);
  }
  return st;
}

// The largest file under `dir` (the server's work dir: session workspaces are below it).
uintmax_t LargestFile(const std::string& dir) {
  uintmax_t best = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code sec;
    if (it->is_regular_file(sec)) best = std::max(best, it->file_size(sec));
  }
  return best;
}

enum class Phase { kCall, kUpload, kCopy };

std::string PhaseName(const ::testing::TestParamInfo<Phase>& info) {
  switch (info.param) {
    case Phase::kCall:
      return "MidCall";
    case Phase::kUpload:
      return "MidUpload";
    case Phase::kCopy:
      return "MidCopy";
  }
  return "Unknown";
}

class ServerKilledTest : public ::testing::TestWithParam<Phase> {};

TEST_P(ServerKilledTest, ClientGetsANamedErrorTheLeaseEndsAndTheFarmServesOn) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  int victim = farm.StartServer("cpu", {"--work-dir", farm.Path("victim"), "--call-timeout", "60"});
  int other = farm.StartServer("cpu");
  ASSERT_GE(victim, 0);
  ASSERT_GE(other, 0);
  ASSERT_TRUE(farm.WaitRegistered(2));
  std::string victim_addr = farm.server_addr(victim);
  std::string other_addr = farm.server_addr(other);

  // Hold both servers, and work on the victim.
  auto c = farm.Client("holder");
  auto g1 = c->RequestDevice(Hold("cpu"));
  auto g2 = c->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(g1.ok() && g2.ok());
  const msg::Grant& mine = g1->address == victim_addr ? *g1 : *g2;
  const msg::Grant& spare = g1->address == victim_addr ? *g2 : *g1;
  ASSERT_EQ(mine.address, victim_addr);
  auto session = LeasedSession(mine.address, mine.lease_token, 30s);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  client::Session& s = **session;

  client::RemoteModule module;
  client::RemoteTensor tensor;
  std::string big = farm.Path("big.bin");
  constexpr uint64_t kBytes = 1ull << 30;
  std::unique_ptr<char, decltype(&std::free)> host(nullptr, &std::free);
  if (GetParam() == Phase::kCall) {
    ASSERT_TRUE(s.Upload(CT_TEST_KERNELS, "k.so").ok());
    auto m = s.LoadModule("k.so");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    module = *m;
  } else if (GetParam() == Phase::kUpload) {
    // 2 GiB of zeros (sparse here; the server writes them out): far more than arrives before
    // the kill.
    std::ofstream(big).close();
    std::filesystem::resize_file(big, 2 * kBytes);
  } else {
    auto t = s.AllocTensor({static_cast<int64_t>(kBytes / 4)}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tensor = *t;
    host.reset(static_cast<char*>(std::calloc(kBytes, 1)));
    ASSERT_NE(host, nullptr);
  }
  std::vector<ProcessInfo> sessions;
  ASSERT_TRUE(Eventually(
      [&] { return (sessions = SessionProcesses(farm.server(victim).pid())).size() == 1; }));
  int session_pid = sessions[0].pid;

  Status result;
  std::atomic<uint64_t> copied{0};
  std::atomic<bool> done{false};
  std::thread op([&] {
    switch (GetParam()) {
      case Phase::kCall:
        result = module.Call("spin", {}, /*timeout_ms=*/60'000).status();
        break;
      case Phase::kUpload:
        result = s.Upload(big, "big.bin").status();
        break;
      case Phase::kCopy:
        // In 8 MiB pieces, so that the test can tell it is under way.
        for (uint64_t at = 0; at < kBytes && result.ok(); at += 8u << 20) {
          result = tensor.CopyFrom(host.get() + at, at, 8u << 20);
          copied = at + (8u << 20);
        }
        break;
    }
    done = true;
  });
  // Under way: the kernel burns CPU, the upload's file grows, the tensor's pieces arrive.
  bool under_way = Eventually([&] {
    switch (GetParam()) {
      case Phase::kCall:
        return ReadStat(session_pid).utime >= 5;
      case Phase::kUpload:
        return LargestFile(farm.Path("victim")) >= (16u << 20);
      case Phase::kCopy:
        return copied.load() >= (16u << 20);
    }
    return false;
  });
  EXPECT_TRUE(under_way);
  EXPECT_FALSE(done.load()) << "the operation ended before the server was killed";
  farm.server(victim).Kill(SIGKILL);

  // The client's operation ends with a named error (it does not wait out a timeout).
  op.join();
  EXPECT_EQ(result.code(), ErrorCode::kDisconnected) << result.ToString();
  // The session process went with its server.
  EXPECT_TRUE(Eventually([&] { return Process(session_pid).pid == 0; }))
      << "session process " << session_pid << " outlived its server";
  // The tracker drops the device and ends the lease on it; the other lease is untouched.
  EXPECT_TRUE(Eventually([&] { return farm.Device(victim_addr).is_null(); }))
      << farm.Summary().dump();
  auto renewed = c->Renew(mine.lease_token);
  // Ended, not merely unreachable: the tracker no longer knows the lease.
  EXPECT_EQ(renewed.status().code(), ErrorCode::kNotFound) << renewed.status().ToString();
  EXPECT_TRUE(c->Renew(spare.lease_token).ok());

  // Nothing is granted twice: with the other server held, a request finds no device; released,
  // it is granted the other server, and a normal session works there.
  auto someone = farm.Client("someone");
  client::LeaseRequest brief = Hold("cpu");
  brief.wait = 1500ms;
  auto none = someone->RequestDevice(brief);
  EXPECT_EQ(none.status().code(), ErrorCode::kTimeout)
      << (none.ok() ? "granted " + none->address + " twice" : none.status().ToString());
  ASSERT_TRUE(c->Release(spare.lease_token).ok());
  auto g = someone->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->address, other_addr);
  Status normal = NormalSession(g->address, g->lease_token);
  EXPECT_TRUE(normal.ok()) << normal.ToString();
  ASSERT_TRUE(someone->Release(g->lease_token).ok());

  // The killed server restarts on its work dir (sweeping the dead session's workspace) and
  // serves a normal session.
  int back = farm.StartServer("cpu", {"--work-dir", farm.Path("victim")});
  ASSERT_GE(back, 0);
  ASSERT_TRUE(farm.WaitRegistered(2));
  EXPECT_LT(LargestFile(farm.Path("victim")), 16u << 20) << "the dead session's upload was kept";
  auto g3 = someone->RequestDevice(Hold("cpu"));
  auto g4 = someone->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(g3.ok() && g4.ok());
  const msg::Grant& restarted = g3->address == farm.server_addr(back) ? *g3 : *g4;
  ASSERT_EQ(restarted.address, farm.server_addr(back));
  normal = NormalSession(restarted.address, restarted.lease_token);
  EXPECT_TRUE(normal.ok()) << normal.ToString();
}

INSTANTIATE_TEST_SUITE_P(Chaos, ServerKilledTest,
                         ::testing::Values(Phase::kCall, Phase::kUpload, Phase::kCopy), PhaseName);

// A holder killed with SIGKILL: its tracker connection closes, so its lease ends at once (well
// within the lease's time to live), the device is free again, and the next holder's session works.
TEST(ChaosTest, AClientKilledWhileHoldingALeaseGivesItBack) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  int s = farm.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm.WaitRegistered(1));
  std::string addr = farm.server_addr(s);
  // `crosstune lease` holds the device while its command runs.
  std::vector<std::string> args = {
      CROSSTUNE_CLI_BIN, "lease", "--tracker", farm.tracker(), "--key", "cpu", "--",
      "sleep",           "600"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: the sleep goes with it below
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, args[0].c_str(), nullptr, &attr, argv.data(), environ), 0);
  posix_spawnattr_destroy(&attr);
  ASSERT_TRUE(Eventually([&] {
    auto d = farm.Device(addr);
    return d.is_object() && d["state"] == "leased" && !d["holder"].get<std::string>().empty();
  })) << farm.Summary().dump();
  int64_t ttl_ms = farm.Device(addr)["lease_remaining_ms"].get<int64_t>();
  EXPECT_GT(ttl_ms, 10'000);

  ::kill(-pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  // Free again long before the lease would have run out (it has half an hour).
  EXPECT_TRUE(Eventually(
      [&] {
        auto d = farm.Device(addr);
        return d.is_object() && d["state"] == "free";
      },
      std::chrono::milliseconds(std::min<int64_t>(ttl_ms / 2, 30'000))))
      << farm.Summary().dump();
  auto c = farm.Client("next");
  auto g = c->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Status normal = NormalSession(g->address, g->lease_token);
  EXPECT_TRUE(normal.ok()) << normal.ToString();
}

}  // namespace
}  // namespace crosstune::testing
