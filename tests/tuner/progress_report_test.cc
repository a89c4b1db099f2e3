// A tune run's progress reports through a tracker's devices: a run on more devices than a
// report may name (msg::kMaxTuneProgressLeases) still has its reports taken, shown with the
// devices of the leases it named.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "../tracker/farm.h"
#include "crosstune/tuner/device_pool.h"

namespace crosstune::tuner {
namespace {

TEST(DevicePoolTest, ARunOnMoreDevicesThanAReportMayNameStillReports) {
  const size_t kDevices = msg::kMaxTuneProgressLeases + 1;
  testing::Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  for (size_t i = 0; i < kDevices; ++i) ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_TRUE(farm.WaitRegistered(kDevices));

  client::TrackerOptions to;
  to.tracker = farm.tracker();
  to.peer_name = "pool-test";
  auto pool =
      DevicePool::FromTracker(to, "cpu", 0, std::chrono::seconds(10), "", std::chrono::seconds(30));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ((*pool)->devices().size(), kDevices) << "every free device of the key is used";

  msg::TuneProgress report;
  report.run_id = "wide-run";
  report.task = "matmul 48,48,48";
  report.trials = 3;
  report.total = 10;
  report.measured = 3;
  report.best_gflops = 1.5;
  Status sent = (*pool)->ReportProgress(report);
  ASSERT_TRUE(sent.ok()) << sent.ToString();

  auto summary = farm.Summary();
  ASSERT_EQ(summary["tune_runs"].size(), 1u) << summary.dump();
  const auto& run = summary["tune_runs"][0];
  EXPECT_EQ(run["run_id"], "wide-run");
  EXPECT_EQ(run["trials"], 3);
  // The devices shown are those of the pool's first leases.
  std::set<std::string> shown, first;
  for (const auto& d : run["devices"]) shown.insert(d.get<std::string>());
  for (size_t i = 0; i < msg::kMaxTuneProgressLeases; ++i) {
    first.insert((*pool)->devices()[i].server);
  }
  EXPECT_EQ(shown, first) << run.dump();
}

}  // namespace
}  // namespace crosstune::tuner
