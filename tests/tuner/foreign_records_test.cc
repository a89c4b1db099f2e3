// Other tools' records read as ours (AutoTVM logs, MetaSchedule databases, Kernel Tuner caches),
// and ours written as AutoTVM's: what `crosstune records import / export --format autotvm` do.
#include "crosstune/tuner/foreign_records.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "crosstune/builder/target.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

using nlohmann::json;

// Three lines as AutoTVM 0.8 writes them (autotvm/record.py, format 0.2): two successes and a
// runtime failure (AutoTVM keeps a failure's costs as [1e9]).
const char* kAutoTvmLog =
    R"({"input": ["llvm -keys=cpu -mcpu=skylake-avx512", "dense_nopack.x86", [["TENSOR", [1, 512], "float32"], ["TENSOR", [1000, 512], "float32"], null, "float32"], {}], "config": {"index": 1234, "code_hash": null, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 8]], ["tile_k", "sp", [-1, 2]]]}, "result": [[0.000101, 0.000103], 0, 1.23, 1700000000.25], "version": 0.2, "tvm_version": "0.8.0"})"
    "\n"
    R"({"input": ["llvm -keys=cpu -mcpu=skylake-avx512", "dense_nopack.x86", [["TENSOR", [1, 512], "float32"], ["TENSOR", [1000, 512], "float32"], null, "float32"], {}], "config": {"index": 77, "code_hash": null, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 16]], ["tile_k", "sp", [-1, 4]]]}, "result": [[0.00009], 0, 1.1, 1700000001.0], "version": 0.2, "tvm_version": "0.8.0"})"
    "\n\n"
    R"({"input": ["llvm -keys=cpu -mcpu=skylake-avx512", "dense_nopack.x86", [["TENSOR", [1, 512], "float32"], ["TENSOR", [1000, 512], "float32"], null, "float32"], {}], "config": {"index": 5, "code_hash": null, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 2]], ["tile_k", "sp", [-1, 512]]]}, "result": [[1000000000.0], 4, 2.0, 1700000002.0], "version": 0.2, "tvm_version": "0.8.0"})"
    "\n";

std::string TempDir() {
  auto d = std::filesystem::temp_directory_path() /
           ("crosstune-foreign-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

std::string Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

TEST(AutoTvmRecords, ReadAsOursWithTheLineKept) {
  const LogContents log = ParseAutoTvmLog(kAutoTvmLog, "t.log", {});
  ASSERT_EQ(log.records.size(), 3u);
  const Record& r = log.records[0];
  EXPECT_EQ(r.task.Key(), "autotvm:dense_nopack.x86 1,512,1000,512 float32");
  EXPECT_EQ(r.target, "llvm -keys=cpu -mcpu=skylake-avx512");
  EXPECT_EQ(DeviceKind(r), "llvm/skylake-avx512") << "made from the target: the log does not say";
  EXPECT_EQ(r.config_index, 1234u);
  EXPECT_EQ(r.config_values, json::parse(R"({"tile_y":[-1,1],"tile_x":[-1,8],"tile_k":[-1,2]})"));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.costs, (std::vector<double>{0.000101, 0.000103}));
  EXPECT_DOUBLE_EQ(r.mean, 0.000102);
  EXPECT_DOUBLE_EQ(r.run_s, 1.23);
  EXPECT_EQ(r.timestamp, "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(r.tool, "AutoTVM (TVM 0.8.0)");
  // A failure: AutoTVM's error number, named, and no time.
  const Record& failed = log.records[2];
  EXPECT_EQ(failed.error, TrialError::kRuntimeError);
  EXPECT_EQ(failed.mean, 0);
  EXPECT_TRUE(failed.costs.empty());
  EXPECT_EQ(failed.message, "AutoTVM error 4 (RUNTIME_DEVICE)");
  // One warning: the device kind was made up, and says how to name it.
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_NE(log.warnings[0].find("filed under device kind llvm/skylake-avx512 (--device-kind"),
            std::string::npos)
      << log.warnings[0];

  // Exported in AutoTVM's format, each line is the one it came from.
  size_t start = 0;
  for (const Record& rec : log.records) {
    std::string line;
    do {
      const size_t nl = std::string_view(kAutoTvmLog).find('\n', start);
      line = std::string(kAutoTvmLog + start, nl - start);
      start = nl + 1;
    } while (line.empty());
    EXPECT_EQ(ToAutoTvmJson(rec), json::parse(line));
    // And through our own log line (the farm keeps records so).
    auto back = Record::FromJson(rec.ToJson());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(ToAutoTvmJson(*back), json::parse(line));
  }
}

TEST(AutoTvmRecords, NamedDeviceKindAndBadLinesSkippedWithTheirLineNumber) {
  const std::string text =
      std::string(kAutoTvmLog) + "not json\n" +
      R"({"i": ["llvm", "dense", [], {}, [], {}], "r": [[1], 0, 1, 1], "v": 0.1})" + "\n" +
      R"({"input": ["llvm", "dense", []], "config": {"index": -1, "entity": []}, "result": [[1], 0]})" +
      "\n";
  const LogContents log = ParseAutoTvmLog(text, "t.log", {.device_kind = "x86_64/Intel Xeon"});
  ASSERT_EQ(log.records.size(), 3u);
  EXPECT_EQ(DeviceKind(log.records[0]), "x86_64/Intel Xeon");
  ASSERT_EQ(log.warnings.size(), 3u) << "three bad lines, and no guessed kind to warn of";
  EXPECT_EQ(log.warnings[0].rfind("t.log:5: not JSON", 0), 0u) << log.warnings[0];
  EXPECT_NE(log.warnings[1].find("t.log:6: not an AutoTVM record (AutoTVM's log format 0.1"),
            std::string::npos)
      << log.warnings[1];
  EXPECT_NE(log.warnings[2].find("t.log:7: not an AutoTVM record (config index -1)"),
            std::string::npos)
      << log.warnings[2];
}

TEST(AutoTvmRecords, OursWrittenInAutoTvmsForm) {
  Record r;
  r.task = TaskId{"matmul", {64, 32, 16}, "float32", 2};
  r.target = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3";
  r.config_index = 42;
  r.config_values = {{"mr", 4}, {"order", {"ir", "jr"}}};
  r.costs = {0.002, 0.004};
  r.mean = 0.003;
  r.build_s = 0.5;
  r.run_s = 0.25;
  r.timestamp = "2026-12-07T03:00:00.123Z";
  json j = ToAutoTvmJson(r);
  EXPECT_EQ(j["input"], json::parse(R"(["llvm -mtriple=x86_64-linux-gnu -mcpu=znver3",
      "crosstune.matmul", [[64,32,16], "float32", 2], {}])"));
  EXPECT_EQ(j["config"], json::parse(R"({"index": 42, "code_hash": null,
      "entity": [["mr", "ot", 4], ["order", "ot", ["ir", "jr"]]]})"));
  EXPECT_EQ(j["result"], json::parse("[[0.002, 0.004], 0, 0.75, 1796612400.0]"));
  EXPECT_EQ(j["version"], 0.2);
  // Read back as AutoTVM's: the same task, config and times.
  const LogContents back = ParseAutoTvmLog(j.dump(), "x", {.device_kind = "x86_64/z"});
  ASSERT_EQ(back.records.size(), 1u);
  EXPECT_EQ(back.records[0].config_values, r.config_values);
  EXPECT_EQ(back.records[0].costs, r.costs);

  r.error = TrialError::kBuildError;
  r.costs.clear();
  r.mean = 0;
  j = ToAutoTvmJson(r);
  EXPECT_EQ(j["result"][0], json::parse("[1e9]")) << "AutoTVM's mark of a failure";
  EXPECT_EQ(j["result"][1], 2) << "COMPILE_HOST";
}

// A database as TVM 0.27's JSONDatabase writes it (tests/tvm/tvm_records_test.py makes one with
// TVM itself): one workload (its module's bytes shortened here), two records, one a failure.
const char* kWorkloads = R"(["11028133904401107389","E0cAAAAAAAB7Cn0K"])"
                         "\n";
const char* kTuningRecords =
    R"([0,[[[["GetSBlock",[],["C","main"],["b0"]],["GetLoops",["b0"],[],["l1","l2","l3"]],["Split",["l1","None",4],[1,0],["l4","l5"]]],[]],[0.004,0.0044],{"keys":["cpu"],"kind":"llvm","mcpu":"znver3","num-cores":2,"tag":""},[["TENSOR","float32",[64,32]],["TENSOR","float32",[32,48]],["TENSOR","float32",[64,48]]]]])"
    "\n"
    R"([0,[[[["GetSBlock",[],["C","main"],["b0"]]],[]],[1e10],{"keys":["cpu"],"kind":"llvm","mcpu":"znver3","num-cores":2,"tag":""},[["TENSOR","float32",[64,32]],["TENSOR","float32",[32,48]],["TENSOR","float32",[64,48]]]]])"
    "\n"
    R"([3,[[],[0.1],{"kind":"llvm"},[]]])"
    "\n";

TEST(MetaScheduleRecords, ReadAsOursPerWorkload) {
  auto log = ParseMetaScheduleDatabase(kTuningRecords, kWorkloads, "db", {});
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->records.size(), 2u);
  const Record& r = log->records[0];
  EXPECT_EQ(r.task.Key(), "metaschedule:11028133904401107389 64,32,32,48,64,48 float32");
  EXPECT_EQ(r.target, "llvm -mcpu=znver3 -num-cores=2");
  EXPECT_EQ(DeviceKind(r), "llvm/znver3");
  EXPECT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r.mean, 0.0042);
  EXPECT_EQ(r.config_values["trace"][0][2][0], "Split");
  EXPECT_EQ(r.source["workload"], "11028133904401107389");
  EXPECT_NE(r.config_index, log->records[1].config_index) << "two traces, two configs";
  EXPECT_EQ(log->records[1].error, TrialError::kRuntimeError) << "1e10 s: MetaSchedule's failure";
  // The record of workload 3 (the file has one) is skipped, named; then the guessed kind.
  ASSERT_EQ(log->warnings.size(), 2u);
  EXPECT_NE(log->warnings[0].find("db:3: not a MetaSchedule tuning record (workload 3 of 1)"),
            std::string::npos)
      << log->warnings[0];

  auto bad = ParseMetaScheduleDatabase(kTuningRecords, "{}\n", "db", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("workload line 1"), std::string::npos);
}

// Our own caches (scripts/log-to-kernel-tuner.py) give back our task, target and knob values:
// every record's values are a config of the matmul template's space.
TEST(KernelTunerRecords, OurCacheGivesBackConfigsOfTheTemplate) {
  const std::string path = std::string(CT_TUNER_TEST_DATA) + "/matmul-256-xeon-2t.json";
  auto file = ReadRecordsFile(path, {});
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->format, RecordsFormat::kKernelTuner);
  ASSERT_EQ(file->log.records.size(), 264u);
  EXPECT_TRUE(file->log.warnings.empty());
  const Record& r = file->log.records[0];
  EXPECT_EQ(r.task.Key(), "matmul 256,256,256 float32 threads=2");
  EXPECT_EQ(DeviceKind(r), "x86_64/Intel(R) Xeon(R) Processor");
  auto target = builder::ParseTarget(r.target);
  ASSERT_TRUE(target.ok()) << target.status().message();
  auto task = MakeTask("matmul", r.task.shape, *target, {.threads = r.task.threads});
  ASSERT_TRUE(task.ok()) << task.status().message();
  const Record* best = nullptr;
  for (const Record& rec : file->log.records) {
    auto c = (*task)->space().FromJson(rec.config_values);
    ASSERT_TRUE(c.ok()) << rec.config_values.dump() << ": " << c.status().message();
    ASSERT_TRUE(rec.ok());
    ASSERT_FALSE(rec.costs.empty());
    if (!best || rec.mean < best->mean) best = &rec;
  }
  EXPECT_NEAR(best->mean, 0.1385e-3, 0.00005e-3) << "the README's best";
  EXPECT_EQ(best->costs.size(), 3u) << "its three rounds";
}

// A list-valued knob that varies is a string of its items joined by '-' in our caches ("3-96"):
// read back, it is the list again; a record the device stopped timing early stays a lower bound.
TEST(KernelTunerRecords, OurCachesListValuesAndLowerBoundsComeBack) {
  const std::string dir = TempDir();
  const std::string path = Write(dir + "/mm.json", R"({
    "device_name": "AMD EPYC", "kernel_name": "matmul", "problem_size": [64, 64, 64],
    "tune_params_keys": ["tile_m"], "objective": "time",
    "crosstune": {"task": "matmul [64, 64, 64]", "arch": "x86_64",
                  "target": "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3",
                  "fixed": {"order": ["ir", "jr"], "mr": 4}},
    "cache": {
      "3-96": {"tile_m": "3-96", "time": 0.5, "times": [0.5]},
      "6-96": {"tile_m": "6-96", "time": 0.9, "times": [0.9], "stopped_early": true}}})");
  auto file = ReadRecordsFile(path, {});
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->log.records.size(), 2u);
  EXPECT_EQ(file->log.records[0].config_values,
            json::parse(R"({"order": ["ir", "jr"], "mr": 4, "tile_m": [3, 96]})"));
  EXPECT_EQ(DeviceKind(file->log.records[0]), "x86_64/AMD EPYC");
  EXPECT_FALSE(file->log.records[0].stopped_early);
  EXPECT_TRUE(file->log.records[1].stopped_early);
  EXPECT_EQ(BestRecords(file->log.records).size(), 1u);
  EXPECT_EQ(BestRecords(file->log.records)[0].config_values["tile_m"], json::parse("[3, 96]"));
}

TEST(KernelTunerRecords, AnyOtherCacheIsItsKernelsTask) {
  const std::string dir = TempDir();
  const std::string path = Write(dir + "/pnpoly.json", R"({
    "device_name": "NVIDIA A100-PCIE-40GB", "kernel_name": "cn_pnpoly", "problem_size": 20000000,
    "tune_params_keys": ["block_size_x", "tile_size"], "objective": "time",
    "cache": {
      "32,1": {"block_size_x": 32, "tile_size": 1, "time": 2.5, "times": [2.4, 2.6],
               "compile_time": 120.0, "timestamp": "2023-05-01 10:00:00"},
      "64,1": {"block_size_x": 64, "tile_size": 1, "time": "RuntimeFailedConfig"},
      "64,2": {"block_size_x": 64, "tile_size": 2, "time": 1.25})");
  auto file = ReadRecordsFile(path, {});
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->format, RecordsFormat::kKernelTuner) << "read up to its last whole entry";
  ASSERT_EQ(file->log.records.size(), 3u);
  const Record& r = file->log.records[0];
  EXPECT_EQ(r.task.Key(), "kernel_tuner:cn_pnpoly 20000000 unknown");
  EXPECT_EQ(r.target, "kernel_tuner");
  EXPECT_EQ(DeviceKind(r), "unknown/NVIDIA A100-PCIE-40GB");
  EXPECT_EQ(r.costs, (std::vector<double>{2.4e-3, 2.6e-3}));
  EXPECT_DOUBLE_EQ(r.mean, 2.5e-3);
  EXPECT_DOUBLE_EQ(r.build_s, 0.12);
  EXPECT_EQ(r.timestamp, "2023-05-01 10:00:00");
  EXPECT_EQ(file->log.records[1].error, TrialError::kRuntimeError);
  EXPECT_EQ(file->log.records[2].costs, (std::vector<double>{1.25e-3}));
  ASSERT_EQ(file->log.warnings.size(), 2u) << "the target and the device kind were made up";

  auto named =
      ReadRecordsFile(path, {.device_kind = "sm_80/NVIDIA A100", .target = "cuda -arch=sm_80"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(DeviceKind(named->log.records[0]), "sm_80/NVIDIA A100");
  EXPECT_EQ(named->log.records[0].target, "cuda -arch=sm_80");
  EXPECT_TRUE(named->log.warnings.empty());
}

TEST(RecordsFiles, FormatFoundFromTheContentAndAnythingElseRefusedByName) {
  const std::string dir = TempDir();
  auto autotvm = ReadRecordsFile(Write(dir + "/a.log", kAutoTvmLog), {});
  ASSERT_TRUE(autotvm.ok()) << autotvm.status().message();
  EXPECT_EQ(autotvm->format, RecordsFormat::kAutoTvm);
  EXPECT_EQ(autotvm->log.records.size(), 3u);

  std::filesystem::create_directories(dir + "/ms");
  Write(dir + "/ms/database_workload.json", kWorkloads);
  Write(dir + "/ms/database_tuning_record.json", kTuningRecords);
  for (const std::string& p : {dir + "/ms", dir + "/ms/database_tuning_record.json"}) {
    auto ms = ReadRecordsFile(p, {});
    ASSERT_TRUE(ms.ok()) << p << ": " << ms.status().message();
    EXPECT_EQ(ms->format, RecordsFormat::kMetaSchedule) << p;
    EXPECT_EQ(ms->log.records.size(), 2u) << p;
  }
  // A record file named as JSONDatabase's arguments allow: its workload file by the same name.
  Write(dir + "/ms/resnet_tuning_record.json", kTuningRecords);
  auto missing = ReadRecordsFile(dir + "/ms/resnet_tuning_record.json", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("needs its workload file beside it"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("resnet_workload.json"), std::string::npos)
      << missing.status().message();

  Record ours;
  ours.tool = "crosstune test";
  ours.task = TaskId{"matmul", {8, 8, 8}, "float32"};
  ours.target = "llvm";
  ours.device = DeviceId{"local", "x86_64", "cpu", ""};
  ours.costs = {1e-3};
  ours.mean = 1e-3;
  auto log = ReadRecordsFile(Write(dir + "/ours.jsonl", ours.ToJson().dump() + "\n"), {});
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->format, RecordsFormat::kCrosstune);
  ASSERT_EQ(log->log.records.size(), 1u);
  EXPECT_TRUE(log->log.records[0] == ours);

  auto junk = ReadRecordsFile(Write(dir + "/junk.txt", "hello\n"), {});
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(junk.status().message().find(dir + "/junk.txt: not a file of tuning records"),
            std::string::npos)
      << junk.status().message();
  // A format named where the content is another's: that format's error, naming the file.
  auto forced = ReadRecordsFile(dir + "/a.log", {.format = RecordsFormat::kKernelTuner});
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.status().message().find("not a Kernel Tuner cache file"), std::string::npos)
      << forced.status().message();
  EXPECT_FALSE(ReadRecordsFile(dir + "/none.log", {}).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crosstune::tuner
