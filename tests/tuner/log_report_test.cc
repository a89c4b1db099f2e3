// What a record log says (log_report.h), which records are exported and how (export.h), the
// network-time estimate (workload.h) and the tune reports (tune.h): the library side of
// `crosstune log summary|best|plot`, `crosstune export` and `crosstune tune --json`.
#include "crosstune/tuner/log_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "crosstune/builder/target.h"
#include "crosstune/package.h"
#include "crosstune/tuner/export.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/workload.h"

namespace crosstune::tuner {
namespace {

constexpr const char* kTarget = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64";

Record Make(const std::vector<int64_t>& shape, uint64_t index, double mean,
            TrialError error = TrialError::kOk, const std::string& message = "") {
  Record r;
  r.task = TaskId{"matmul", shape, "float32"};
  r.target = kTarget;
  r.device = DeviceId{"local", "x86_64", "x86-64", ""};
  r.tuner = "xgb";
  r.run_id = "run-1";
  r.config_index = index;
  r.config_values = {{"index", index}};
  r.flops = 2.0 * shape[0] * shape[1] * shape[2];
  r.mean = error == TrialError::kOk ? mean : 0;
  r.error = error;
  r.message = message;
  return r;
}

Record InNetwork(Record r, const std::string& layer, int count) {
  r.workload = {{"name", "net"}, {"layer", layer}, {"count", count}};
  return r;
}

TEST(NetworkTimeTest, SumsCountTimesBestAndGivesEachTaskItsShare) {
  NetworkTime t = EstimateNetworkTime({{3, 0.002}, {1, 0.004}});
  EXPECT_TRUE(t.complete());
  EXPECT_DOUBLE_EQ(t.seconds, 0.010);
  ASSERT_EQ(t.shares.size(), 2u);
  EXPECT_DOUBLE_EQ(t.shares[0], 0.6);
  EXPECT_DOUBLE_EQ(t.shares[1], 0.4);
}

TEST(NetworkTimeTest, IsUnknownWhileATaskHasNoTime) {
  NetworkTime t =
      EstimateNetworkTime({{3, 0.002}, {1, TaskScheduler::kNoTime}, {2, TaskScheduler::kNoTime}});
  EXPECT_FALSE(t.complete());
  EXPECT_EQ(t.missing, 2);
  EXPECT_EQ(t.seconds, TaskScheduler::kNoTime);
  EXPECT_TRUE(t.shares.empty());
}

TEST(NetworkTimeTest, TheSchedulerEstimatesTheSameWay) {
  TaskScheduler s({{3, 1e6, "matmul"}, {1, 1e6, "matmul"}});
  EXPECT_EQ(s.NetworkSeconds(), TaskScheduler::kNoTime);
  s.Update(0, 8, 0.002);
  s.Update(1, 8, 0.004);
  EXPECT_DOUBLE_EQ(s.NetworkSeconds(), EstimateNetworkTime({{3, 0.002}, {1, 0.004}}).seconds);
}

TEST(LogSummaryTest, GroupsByTaskAndTargetWithErrorsAndTheBest) {
  std::vector<Record> records = {
      Make({64, 64, 64}, 1, 0.003),
      Make({64, 64, 64}, 2, 0, TrialError::kBuildError, "k.c:1: error: x\nmore"),
      Make({32, 32, 32}, 1, 0.001),
      Make({64, 64, 64}, 2, 0, TrialError::kBuildError, "k.c:1: error: x\nother"),
      Make({64, 64, 64}, 3, 0, TrialError::kBuildError, "k.c:9: error: y"),
      Make({64, 64, 64}, 4, 0, TrialError::kWrongAnswer, "C[0,0] = 1"),
      Make({64, 64, 64}, 5, 0.002),
  };
  records[6].device.name = "board";
  records[6].tuner = "random";
  LogSummary s = SummarizeLog(records);
  ASSERT_EQ(s.tasks.size(), 2u);
  const LogTaskSummary& t = s.tasks[0];  // first seen first
  EXPECT_EQ(t.task.Key(), "matmul 64,64,64 float32");
  EXPECT_EQ(t.target, kTarget);
  EXPECT_EQ(t.trials, 6);
  EXPECT_EQ(t.unique_configs, 5u);
  EXPECT_EQ(t.ok, 2);
  EXPECT_EQ(t.devices, (std::set<std::string>{"board", "local"}));
  EXPECT_EQ(t.tuners, (std::set<std::string>{"random", "xgb"}));
  ASSERT_EQ(t.errors.size(), 2u);
  EXPECT_EQ(t.errors[0].kind, TrialError::kBuildError);
  EXPECT_EQ(t.errors[0].count, 3);
  EXPECT_EQ(t.errors[0].commonest_message, "k.c:1: error: x");  // first lines group together
  EXPECT_EQ(t.errors[0].commonest_count, 2);
  EXPECT_EQ(t.errors[1].kind, TrialError::kWrongAnswer);
  ASSERT_TRUE(t.has_best);
  EXPECT_EQ(t.best.config_index, 5u);
  EXPECT_FALSE(t.in_network);
  EXPECT_TRUE(s.networks.empty());

  nlohmann::json j = s.ToJson();
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["trials"], 6);
  EXPECT_EQ(j[0]["unique_configs"], 5);
  EXPECT_EQ(j[0]["devices"], nlohmann::json({"board", "local"}));
  EXPECT_EQ(j[0]["errors"]["BuildError"]["count"], 3);
  EXPECT_EQ(j[0]["errors"]["BuildError"]["commonest_count"], 2);
  EXPECT_EQ(j[0]["best"]["index"], 5);
  EXPECT_EQ(j[0]["best"]["device"], "board");
  EXPECT_DOUBLE_EQ(j[0]["best"]["mean_s"].get<double>(), 0.002);
  EXPECT_FALSE(j[0].contains("workload"));
  EXPECT_FALSE(j[1].contains("errors") && !j[1]["errors"].empty());
}

TEST(LogSummaryTest, EstimatesANetworksTimeFromItsLayersBest) {
  std::vector<Record> records = {
      InNetwork(Make({64, 64, 64}, 1, 0.002), "a", 3),
      InNetwork(Make({32, 32, 32}, 1, 0.004), "b", 1),
      InNetwork(Make({64, 64, 64}, 2, 0.001), "a", 3),
  };
  LogSummary s = SummarizeLog(records);
  ASSERT_EQ(s.networks.size(), 1u);
  EXPECT_EQ(s.networks[0].name, "net");
  EXPECT_EQ(s.networks[0].tasks, 2);
  EXPECT_EQ(s.networks[0].trials, 3);
  EXPECT_EQ(s.networks[0].missing, 0);
  EXPECT_DOUBLE_EQ(s.networks[0].seconds, 3 * 0.001 + 0.004);
  ASSERT_EQ(s.tasks.size(), 2u);
  EXPECT_TRUE(s.tasks[0].in_network);
  EXPECT_EQ(s.tasks[0].layer, "a");
  EXPECT_EQ(s.tasks[0].count, 3);
  EXPECT_DOUBLE_EQ(s.tasks[0].share, 0.003 / 0.007);
  nlohmann::json j = s.ToJson();
  EXPECT_DOUBLE_EQ(j[1]["workload"]["share"].get<double>(), 0.004 / 0.007);
  EXPECT_DOUBLE_EQ(j[1]["workload"]["network_ms"].get<double>(), 7.0);
}

TEST(LogSummaryTest, ANetworkWithALayerThatNeverWorkedHasNoTime) {
  std::vector<Record> records = {
      InNetwork(Make({64, 64, 64}, 1, 0.002), "a", 3),
      InNetwork(Make({32, 32, 32}, 1, 0, TrialError::kBuildError, "no"), "b", 1),
  };
  LogSummary s = SummarizeLog(records);
  ASSERT_EQ(s.networks.size(), 1u);
  EXPECT_EQ(s.networks[0].missing, 1);
  EXPECT_LT(s.tasks[0].share, 0);
  nlohmann::json j = s.ToJson();
  EXPECT_TRUE(j[0].contains("workload"));
  EXPECT_FALSE(j[0]["workload"].contains("share"));
}

TEST(BestSoFarPlotTest, OneLinePerRunThatNeverGoesDown) {
  std::vector<Record> records = {Make({64, 64, 64}, 1, 0.004), Make({64, 64, 64}, 2, 0.002),
                                 Make({64, 64, 64}, 3, 0.008)};
  Record other = Make({64, 64, 64}, 1, 0.001);
  other.run_id = "run-<2>";
  records.push_back(other);
  auto plot = PlotBestSoFar(records);
  ASSERT_TRUE(plot.ok()) << plot.status().ToString();
  EXPECT_EQ(plot->lines, 2u);
  EXPECT_EQ(plot->max_trials, 3u);
  size_t polylines = 0;
  for (size_t at = 0; (at = plot->svg.find("<polyline", at)) != std::string::npos; ++at) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(plot->svg.find("run-_2_"), std::string::npos) << "names are escaped";
  EXPECT_EQ(plot->svg.find("run-<2>"), std::string::npos);
  // The first line's third point (a slower config) stays at the second's height.
  const size_t points = plot->svg.find("points=\"") + 8;
  const std::string line = plot->svg.substr(points, plot->svg.find('"', points) - points);
  std::vector<std::string> ys;
  for (size_t at = 0; (at = line.find(',', at)) != std::string::npos; ++at) {
    ys.push_back(line.substr(at + 1, line.find(' ', at) - at - 1));
  }
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_EQ(ys[1], ys[2]);
  EXPECT_NE(ys[0], ys[1]);
}

TEST(BestSoFarPlotTest, RefusesALogWithoutRecords) {
  auto plot = PlotBestSoFar({});
  EXPECT_EQ(plot.status().code(), ErrorCode::kInvalidArgument);
}

TEST(ExportTest, PicksTheBestRecordOfTheTaskAsked) {
  std::vector<Record> records = {Make({64, 64, 64}, 1, 0.004), Make({32, 32, 32}, 1, 0.001),
                                 Make({64, 64, 64}, 2, 0.002)};
  EXPECT_EQ(BestRecordsOf(records, "").size(), 2u);
  auto one = BestRecordsOf(records, "matmul 64,64,64 float32");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].config_index, 2u);
  EXPECT_EQ(BestRecordsOf(records, std::string("matmul 32,32,32 float32|") + kTarget).size(), 1u);
  EXPECT_TRUE(BestRecordsOf(records, "matmul 8,8,8 float32").empty());
  // Another kind of device: its own best, chosen by kind, CPU, arch or device name.
  Record pi = Make({64, 64, 64}, 3, 0.001);
  pi.device = DeviceId{"pi5-1", "aarch64", "Cortex-A76", "rpi"};
  records.push_back(pi);
  ASSERT_EQ(BestRecordsOf(records, "matmul 64,64,64 float32").size(), 2u);
  for (const std::string device : {"aarch64/Cortex-A76", "Cortex-A76", "aarch64", "pi5-1"}) {
    auto on = BestRecordsOf(records, "matmul 64,64,64 float32", device);
    ASSERT_EQ(on.size(), 1u) << device;
    EXPECT_EQ(on[0].config_index, 3u) << device;
  }
  auto here = BestRecordsOf(records, "matmul 64,64,64 float32", "x86_64/x86-64");
  ASSERT_EQ(here.size(), 1u);
  EXPECT_EQ(here[0].config_index, 2u);
  EXPECT_TRUE(BestRecordsOf(records, "", "riscv64").empty());
}

// Records that measured code their template now generates differently are not exported (nor
// compiled): a record without a hash (an older log) is kept.
TEST(ExportTest, SkipsRecordsOfAnotherGenerator) {
  auto target = builder::ParseTarget(kTarget);
  ASSERT_TRUE(target.ok());
  auto task = MakeTask("matmul", {64, 64, 64}, *target);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const Config c = (*task)->DefaultConfig();
  auto record = [&](const std::string& generator) {
    Record r = Make({64, 64, 64}, c.index(), 0.001);
    r.config_values = c.ToJson();
    r.generator = generator;
    return r;
  };
  const std::string now = GeneratorHash(**task, c);
  ASSERT_EQ(now.size(), 16u);
  EXPECT_TRUE(MadeByThisGenerator(**task, record(now)));
  EXPECT_TRUE(MadeByThisGenerator(**task, record("")));
  EXPECT_FALSE(MadeByThisGenerator(**task, record("0123456789abcdef")));
  int stale = -1;
  auto kept = WithoutStaleRecords({record(now), record("0123456789abcdef"), record("")}, &stale);
  EXPECT_EQ(stale, 1);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].generator, now);
  EXPECT_EQ(kept[1].generator, "");
}

TEST(ExportTest, BuildsTheRecordsConfigIntoAPackageThatKeepsTheTuning) {
  auto target = builder::ParseTarget(kTarget);
  ASSERT_TRUE(target.ok());
  auto task = MakeTask("matmul", {16, 16, 16}, *target);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const Config config = (*task)->DefaultConfig();
  Record r = Make({16, 16, 16}, config.index(), 1e-6);
  r.config_values = config.ToJson();
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("crosstune-export-" + std::to_string(::getpid()) + ".ctpkg"))
                              .string();
  auto exported = ExportRecord(r, out, "mm.jsonl");
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->function, "matmul");
  ASSERT_EQ(exported->manifest.functions.size(), 1u);
  EXPECT_EQ(exported->manifest.functions[0].name, "matmul");
  const nlohmann::json tuning = nlohmann::json::parse(exported->manifest.tuning);
  EXPECT_EQ(tuning["config"]["index"], config.index());
  EXPECT_EQ(tuning["log"], "mm.jsonl");
  EXPECT_EQ(tuning["record"]["config"]["index"], config.index());
  EXPECT_TRUE(std::filesystem::exists(out));
  std::filesystem::remove(out);

  r.config_values["mr"] = 7;  // not one of the knob's values
  auto refused = ExportRecord(r, out, "mm.jsonl");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'mr'"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(TuneReportTest, SaysWhatTheRunDidAsJson) {
  auto target = builder::ParseTarget(kTarget);
  ASSERT_TRUE(target.ok());
  auto task = MakeTask("matmul", {64, 64, 64}, *target);
  ASSERT_TRUE(task.ok());
  TuneOptions options;
  options.log_path = "mm.jsonl";
  TuneSummary s;
  s.trials_in_log = 10;
  s.measured = 4;
  s.resumed = 6;
  s.errors[TrialError::kBuildError] = 2;
  s.wall_s = 10;
  s.device_busy_s = 10;
  s.devices = 2;
  s.has_best = true;
  s.best = Make({64, 64, 64}, 7, 0.001);
  s.batch = 9;
  s.planning = {.proposed = 8, .refit_s = 0.5, .propose_s = 1.5, .waited_s = 0.25};
  nlohmann::json j = TuneReport(**task, options, s);
  EXPECT_EQ(j["task"]["template"], "matmul");
  EXPECT_EQ(j["target"], (*task)->target().ToString());
  EXPECT_EQ(j["tuner"], "xgb");
  EXPECT_EQ(j["errors"]["BuildError"], 2);
  EXPECT_DOUBLE_EQ(j["device_busy_fraction"].get<double>(), 0.5);
  EXPECT_EQ(j["best"]["index"], 7);
  EXPECT_FALSE(j.contains("default"));
  EXPECT_EQ(j["log"], "mm.jsonl");
  EXPECT_EQ(j["batch"], 9);
  const nlohmann::json& p = j["planning"];
  EXPECT_EQ(p["proposed"], 8);
  EXPECT_DOUBLE_EQ(p["refit_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(p["propose_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(p["seconds"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(p["ms_per_proposal"].get<double>(), 250);
  EXPECT_DOUBLE_EQ(p["wall_fraction"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(p["waited_s"].get<double>(), 0.25);
}

TEST(TuneReportTest, AWorkloadWithoutATimeReportsNull) {
  auto target = builder::ParseTarget(kTarget);
  ASSERT_TRUE(target.ok());
  WorkloadTuneOptions options;
  options.name = "net";
  options.tune.log_path = "net.jsonl";
  WorkloadSummary s;
  s.tasks.resize(1);
  s.tasks[0].layer = {"a", "matmul", {64, 64, 64}, 3};
  nlohmann::json j = WorkloadReport(options, *target, s);
  EXPECT_EQ(j["workload"], "net");
  EXPECT_TRUE(j["network_ms"].is_null());
  EXPECT_TRUE(j["tasks"][0]["best_ms"].is_null());
  EXPECT_EQ(j["tasks"][0]["count"], 3);
  EXPECT_EQ(j["log"], "net.jsonl");
  // Nothing proposed: no cost per proposal.
  EXPECT_EQ(j["planning"]["proposed"], 0);
  EXPECT_TRUE(j["planning"]["ms_per_proposal"].is_null());
}

TEST(TuneReportTest, AWorkloadsPlanningIsItsRoundsSummed) {
  PlanningTime sum;
  sum.Add({.proposed = 15, .refit_s = 0.25, .propose_s = 0.5, .waited_s = 0.25});
  sum.Add({.proposed = 16, .refit_s = 0.5, .propose_s = 0.75, .waited_s = 0});
  EXPECT_EQ(sum.proposed, 31);
  EXPECT_DOUBLE_EQ(sum.refit_s, 0.75);
  EXPECT_DOUBLE_EQ(sum.propose_s, 1.25);
  EXPECT_DOUBLE_EQ(sum.seconds(), 2.0);
  EXPECT_DOUBLE_EQ(sum.waited_s, 0.25);
  EXPECT_DOUBLE_EQ(sum.ms_per_proposal(), 2000.0 / 31);
}

}  // namespace
}  // namespace crosstune::tuner
