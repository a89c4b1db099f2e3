// `crosstune tune --tracker T --key K --build-key B` against a real tracker, crosstune-server and
// crosstune-build-worker on loopback: the build worker takes builds beside the local pool, and
// when it is SIGKILLed during the run every trial still lands in the log, none lost or failed.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "../tracker/farm.h"
#include "crosstune/tuner/records.h"

namespace crosstune::tuner {
namespace {

using testing::Farm;

int LinesIn(const std::string& path) {
  std::string text = testing::ReadFile(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(TuneBuildFarm, AWorkerKilledMidRunLosesNoTrial) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ServerProcess worker;
  ASSERT_TRUE(worker
                  .Start({CT_BUILD_WORKER_BIN, "--host", "127.0.0.1", "--port", "0", "--cores", "2",
                          "--exit-with-parent", "--tracker", farm.tracker(), "--key", "builders"},
                         std::chrono::seconds(30), farm.Path("worker.log"))
                  .ok());
  ASSERT_TRUE(farm.WaitRegistered(2));

  const int trials = 64;
  const std::string log = farm.Path("tune.jsonl");
  const std::string command =
      std::string(CT_CLI_BIN) + " tune matmul --shape 16,16,16 --tuner random --trials " +
      std::to_string(trials) +
      " --batch 8 --repeat 1 --min-repeat-ms 0 --target auto --quiet --json --tracker " +
      farm.tracker() + " --key cpu --build-key builders --log " + log;
  testing::CommandResult run;
  std::thread tune([&] { run = testing::RunCommand(command); });
  // The first batch measured: the worker has built some of it. Then it dies, sessions and all.
  const bool started =
      testing::Eventually([&] { return LinesIn(log) >= 8; }, std::chrono::milliseconds(120'000));
  worker.Kill(SIGKILL);
  tune.join();
  ASSERT_TRUE(started) << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("lost"), std::string::npos) << "the loss is said: " << run.err;

  auto records = ReadLog(log);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  std::set<uint64_t> configs;
  for (const auto& r : records->records) {
    EXPECT_TRUE(configs.insert(r.config_index).second) << "measured twice: " << r.config_index;
    EXPECT_EQ(r.error, TrialError::kOk) << TrialErrorName(r.error) << ": " << r.message;
  }
  EXPECT_EQ(static_cast<int>(configs.size()), trials) << "every trial is in the log";

  nlohmann::json report = nlohmann::json::parse(run.out);
  ASSERT_TRUE(report.contains("build_workers")) << run.out;
  const nlohmann::json& services = report["build_workers"];
  ASSERT_EQ(services.size(), 2u) << services.dump(2);
  EXPECT_EQ(services[0]["name"], "local");
  EXPECT_GT(services[0]["builds"].get<int>(), 0);
  EXPECT_GT(services[1]["builds"].get<int>(), 0) << "the worker built before it died";
  EXPECT_TRUE(services[1]["lost"].get<bool>()) << services.dump(2);
}

TEST(TuneBuildFarm, NoFreeBuildWorkerIsAWarningAndTheLocalPoolBuilds) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_TRUE(farm.WaitRegistered(1));
  const std::string log = farm.Path("tune.jsonl");
  auto run = testing::RunCommand(
      std::string(CT_CLI_BIN) +
      " tune matmul --shape 16,16,16 --tuner random --trials 8 --repeat 1 --min-repeat-ms 0 "
      "--target auto --quiet --json --tracker " +
      farm.tracker() + " --key cpu --build-key builders --log " + log);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("no build worker of key 'builders'"), std::string::npos) << run.err;
  nlohmann::json report = nlohmann::json::parse(run.out);
  ASSERT_EQ(report["build_workers"].size(), 1u);
  EXPECT_GT(report["build_workers"][0]["builds"].get<int>(), 0);
}

}  // namespace
}  // namespace crosstune::tuner
