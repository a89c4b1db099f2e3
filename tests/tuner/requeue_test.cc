// Tuning on a tracker's devices: every free device of the key measures; when one is killed in
// the middle of a run, its candidates go to the other device, nothing is measured twice or lost,
// and its lease goes back to the tracker.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "../tracker/farm.h"
#include "crosstune/builder/builder.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"

namespace crosstune::tuner {
namespace {

// SIGKILL to a process and to every process it started (a server's session children), so the
// device is really gone and not served on by an orphan.
void KillTree(pid_t pid) {
  std::vector<pid_t> children;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    std::istringstream fields(line.substr(close + 1));
    if ((fields >> state >> ppid) && ppid == pid) {
      children.push_back(std::stoi(name));
    }
  }
  ::kill(pid, SIGKILL);
  for (pid_t c : children) ::kill(c, SIGKILL);
}

TEST(TuneRequeue, AKilledDeviceHandsItsCandidatesToTheOtherAndReturnsItsLease) {
  auto b = builder::Builder::Create({.workers = 2});
  ASSERT_TRUE(b.ok());
  testing::Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_TRUE(farm.WaitRegistered(2));

  client::TrackerOptions to;
  to.tracker = farm.tracker();
  to.peer_name = "tuner-test";
  auto pool =
      DevicePool::FromTracker(to, "cpu", 0, std::chrono::seconds(10), "", std::chrono::seconds(30));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ((*pool)->devices().size(), 2u) << "every free device of the key is used";

  const std::string log = farm.Path("tune.jsonl");
  client::ConnectOptions co;
  co.server = (*pool)->devices()[0].server;
  co.lease_token = (*pool)->devices()[0].lease_token;
  auto session = client::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto info = (*session)->Info();
  ASSERT_TRUE(info.ok());
  (*session)->Close().ok();
  auto target = builder::TargetFromDevice(*info);
  ASSERT_TRUE(target.ok());
  auto task = MakeTask("matmul", {48, 48, 48}, *target);
  ASSERT_TRUE(task.ok());

  // The first server of the farm is the victim, whichever pool slot it holds.
  const std::string victim_addr = farm.server_addr(0);
  std::string victim_name;
  for (const auto& d : (*pool)->devices()) {
    if (d.server == victim_addr) victim_name = d.name;
  }
  ASSERT_FALSE(victim_name.empty());

  std::atomic<bool> killed{false};
  std::string killed_at;  // UtcTimestamp() just after the kill (on_progress runs on this thread)
  std::atomic<int> lost{0};
  TuneOptions options;
  options.tuner = "random";
  options.trials = 32;
  options.batch = 8;
  options.log_path = log;
  options.measure.timing.repeat = 1;
  options.measure.timing.min_repeat_ms = 20;
  options.on_progress = [&](const TuneProgress& p) {
    if (p.measured >= 3 && !killed.exchange(true)) {
      KillTree(farm.server(0).pid());
      killed_at = UtcTimestamp();
    }
  };
  options.on_device_lost = [&](const DeviceSpec& d, const Status& why) {
    EXPECT_EQ(d.name, victim_name);
    ++lost;
    (*pool)->Lost(d, why);
  };
  auto result = Tune(**task, (*pool)->devices(), **b, options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(killed.load());
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(result->measured, 32);

  auto records = ReadLog(log);
  ASSERT_TRUE(records.ok());
  std::set<uint64_t> configs;
  // The survivor's records finished after the kill (timestamps are when a measurement ended;
  // ISO 8601 in UTC compares as text): the work the survivor took on once the victim was gone.
  int on_survivor_after_kill = 0;
  for (const auto& r : records->records) {
    EXPECT_TRUE(configs.insert(r.config_index).second) << "measured twice: " << r.config_index;
    EXPECT_EQ(r.error, TrialError::kOk) << TrialErrorName(r.error) << ": " << r.message;
    on_survivor_after_kill += r.device.name != victim_name && r.timestamp > killed_at;
  }
  EXPECT_EQ(configs.size(), 32u);
  EXPECT_GT(on_survivor_after_kill, 0) << "killed at " << killed_at;

  // The lost device's lease has ended (given back by the pool as unreachable, or ended by the
  // tracker when the server's registration dropped, whichever came first); the survivor's is
  // still held until the pool is gone.
  EXPECT_TRUE(testing::Eventually([&] {
    auto s = farm.Summary();
    if (!s.is_object() || s["leases_active"] != 1) return false;
    for (const auto& h : s["history"]) {
      if (h["device"] == victim_name && h["end_unix_ms"].get<int64_t>() > 0) return true;
    }
    return false;
  })) << farm.Summary().dump(2);
  pool->reset();
  EXPECT_TRUE(testing::Eventually([&] {
    auto s = farm.Summary();
    return s.is_object() && s["leases_active"] == 0;
  })) << "the pool gives its leases back when it goes";
}

}  // namespace
}  // namespace crosstune::tuner
