// Tuning records: round trip, torn lines, resume bookkeeping.
#include "crosstune/tuner/records.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace crosstune::tuner {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("crosstune-records-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

Record Sample(uint64_t index, double mean, TrialError error = TrialError::kOk) {
  Record r;
  r.task = TaskId{"matmul", {64, 64, 64}, "float32"};
  r.target = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64";
  r.device = DeviceId{"local", "x86_64", "cpu", ""};
  r.tuner = "xgb";
  r.config_index = index;
  r.config_values = {{"mr", 4}, {"order", {"jr", "ir"}}};
  r.flops = 2.0 * 64 * 64 * 64;
  r.costs = {mean, mean};
  r.mean = mean;
  r.error = error;
  r.message = error == TrialError::kOk ? "" : "kernel.c:3: error: \xff bad byte";
  r.timestamp = UtcTimestamp();
  return r;
}

TEST(Records, RoundTripKeepsEveryField) {
  // Every field away from its default, so a field the writer or the reader drops shows.
  Record r = Sample(12, 0.5e-3, TrialError::kBuildError);
  r.tool = "crosstune 0.0-test";
  r.run_id = "run-7";
  r.task.threads = 4;
  r.device.key = "x86-farm";
  r.build_s = 1.25;
  r.run_s = 0.0625;
  r.generator = "0123456789abcdef";
  r.build_cached = true;
  r.workload = {{"name", "resnet50"}, {"layer", "layer1.0.conv2"}, {"count", 3}};
  r.source = {{"format", "autotvm"}, {"line", {{"version", 0.2}}}};
  r.device.cores = 96;
  r.device.memory_bytes = uint64_t{384} << 30;
  r.device.features = "0123456789abcdef";
  auto back = Record::FromJson(nlohmann::json::parse(
      r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // The one change on the way: the byte that is not UTF-8 becomes U+FFFD.
  Record expected = r;
  expected.message = "kernel.c:3: error: \xef\xbf\xbd bad byte";
  EXPECT_TRUE(*back == expected) << "read back: " << back->ToJson().dump() << "\n"
                                 << "written:   " << expected.ToJson().dump();
}

// Found by fuzz_records: a float where an integer belongs was converted as it came, undefined
// behaviour past the integer's range (1e70) and a silent truncation within it (1.5 -> 1).
TEST(Records, IntegerFieldsRefuseFloatsAndOutOfRangeValues) {
  const nlohmann::json good = Sample(12, 0.5e-3).ToJson();
  ASSERT_TRUE(Record::FromJson(good).ok());
  auto refused = [&](const nlohmann::json::json_pointer& field, const nlohmann::json& value) {
    nlohmann::json j = good;
    j[field] = value;
    auto r = Record::FromJson(j);
    EXPECT_FALSE(r.ok()) << field.to_string() << " = " << value.dump();
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    }
  };
  using P = nlohmann::json::json_pointer;
  refused(P("/config/index"), 1.5);
  refused(P("/config/index"), 2.44444e+70);
  refused(P("/config/index"), -1);
  refused(P("/task/shape/0"), 64.0);
  refused(P("/task/shape/1"), 1e300);
  refused(P("/task/threads"), 2.5);
  refused(P("/task/threads"), 9223372036854775807LL);
  refused(P("/v"), 1.0);
  refused(P("/v"), 18446744073709551615ULL);
}

// build_cached: written when a build happened, absent in logs from before it (and for configs
// refused before any build); anything but true or false is refused by name.
TEST(Records, BuildCachedIsOptionalAndBoolean) {
  Record r = Sample(3, 1e-3);
  EXPECT_FALSE(r.ToJson().contains("build_cached"));
  auto old = Record::FromJson(r.ToJson());
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->build_cached.has_value());
  r.build_cached = false;
  EXPECT_EQ(r.ToJson()["build_cached"], false);
  auto back = Record::FromJson(r.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->build_cached, std::optional<bool>(false));
  nlohmann::json j = r.ToJson();
  j["build_cached"] = "yes";
  auto bad = Record::FromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("build_cached"), std::string::npos)
      << bad.status().message();
}

// stopped_early: written only when true (a lower bound, not a measurement); such a record is never
// a best; anything but true or false is refused by name.
TEST(Records, StoppedEarlyIsWrittenWhenTrueAndNeverTheBest) {
  Record r = Sample(3, 1e-3);
  EXPECT_FALSE(r.ToJson().contains("stopped_early"));
  Record slow = Sample(4, 5e-3);
  slow.stopped_early = true;
  EXPECT_EQ(slow.ToJson()["stopped_early"], true);
  auto back = Record::FromJson(slow.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->stopped_early);
  EXPECT_EQ(back->ToJson(), slow.ToJson());
  // A lower bound below the measured best (it cannot happen in a run; a hand-made log) is still
  // not the best.
  Record bound = Sample(5, 1e-4);
  bound.stopped_early = true;
  const std::vector<Record> best = BestRecords({r, slow, bound});
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].config_index, r.config_index);
  nlohmann::json j = slow.ToJson();
  j["stopped_early"] = 1;
  auto bad = Record::FromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stopped_early"), std::string::npos)
      << bad.status().message();
}

TEST(Records, EveryErrorNameParsesBack) {
  for (TrialError e : {TrialError::kOk, TrialError::kInvalidConfig, TrialError::kBuildError,
                       TrialError::kBuildTimeout, TrialError::kLoadError, TrialError::kRemoteCrash,
                       TrialError::kRunTimeout, TrialError::kRuntimeError, TrialError::kWrongAnswer,
                       TrialError::kDeviceLost}) {
    auto parsed = ParseTrialError(TrialErrorName(e));
    ASSERT_TRUE(parsed.has_value()) << TrialErrorName(e);
    EXPECT_EQ(*parsed, e);
  }
  EXPECT_FALSE(ParseTrialError("Nonsense").has_value());
}

TEST(Records, ATornLastLineIsSkippedWithAWarningAndTheNextRecordStartsAFreshLine) {
  std::string path = TempPath("torn.jsonl");
  std::filesystem::remove(path);
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Sample(1, 1e-3)).ok());
    ASSERT_TRUE((*w)->Append(Sample(2, 2e-3)).ok());
  }
  // A kill in the middle of a write leaves half a line.
  std::string half = Sample(3, 3e-3).ToJson().dump().substr(0, 40);
  std::ofstream(path, std::ios::app) << half;
  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->records.size(), 2u);
  ASSERT_EQ(log->warnings.size(), 1u);
  EXPECT_NE(log->warnings[0].find(":3:"), std::string::npos) << log->warnings[0];

  // Appending after the torn line: the new record is whole and readable.
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Sample(4, 4e-3)).ok());
  }
  log = ReadLog(path);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->records.size(), 3u);
  EXPECT_EQ(log->records.back().config_index, 4u);
  std::filesystem::remove(path);
}

TEST(Records, BestPicksTheLowestMeanPerTaskAndTarget) {
  std::vector<Record> rs = {Sample(1, 3e-3), Sample(2, 1e-3),
                            Sample(3, 0, TrialError::kWrongAnswer), Sample(4, 2e-3)};
  Record other = Sample(5, 9e-3);
  other.task.shape = {32, 32, 32};
  rs.push_back(other);
  auto best = BestRecords(rs);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].config_index, 2u);
  EXPECT_EQ(best[1].config_index, 5u);
}

// Devices of one tracker key can differ: one best per kind of device (arch + CPU), so the config
// fastest on one kind is not what the other kind gets.
TEST(Records, BestIsPerKindOfDevice) {
  Record a = Sample(1, 2e-3), b = Sample(2, 1e-3), a2 = Sample(3, 1.5e-3);
  a.device = DeviceId{"pi4-1", "aarch64", "Cortex-A72", "rpi"};
  a2.device = DeviceId{"pi4-2", "aarch64", "Cortex-A72", "rpi"};
  b.device = DeviceId{"pi5-1", "aarch64", "Cortex-A76", "rpi"};
  auto best = BestRecords({a, b, a2});
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].config_index, 3u);
  EXPECT_EQ(DeviceKind(best[0]), "aarch64/Cortex-A72");
  EXPECT_EQ(best[1].config_index, 2u);
  EXPECT_EQ(DeviceKind(best[1]), "aarch64/Cortex-A76");
}

// What a server reports, as the kind of device a kernel for the target runs on: the CPU for a
// CPU target, the first GPU for a CUDA one (its CPU when it reports none); the same device the
// measure pipeline writes into records (DeviceIdOf), so a compile for a device finds them.
TEST(Records, DeviceKindOfADeviceIsWhatItsKernelsRunOn) {
  msg::DeviceInfo info;
  info.arch = "x86_64";
  info.triple = "x86_64-linux-gnu";
  info.cpu_model = "AMD EPYC 9R14";
  auto cpu = builder::ParseTarget("llvm -mtriple=x86_64-linux-gnu");
  auto cuda = builder::ParseTarget("cuda -arch=sm_90");
  ASSERT_TRUE(cpu.ok() && cuda.ok());
  EXPECT_EQ(DeviceKind(info, *cpu), "x86_64/AMD EPYC 9R14");
  EXPECT_EQ(DeviceKind(info, *cuda), "x86_64/AMD EPYC 9R14") << "no GPU reported";
  msg::GpuInfo gpu;
  gpu.arch = "sm_90";
  gpu.name = "NVIDIA H100";
  info.gpus.push_back(gpu);
  EXPECT_EQ(DeviceKind(info, *cpu), "x86_64/AMD EPYC 9R14");
  EXPECT_EQ(DeviceKind(info, *cuda), "sm_90/NVIDIA H100");
  const DeviceId id = DeviceIdOf(info, *cuda, "gpu-1", "h100");
  EXPECT_EQ(id, (DeviceId{"gpu-1", "sm_90", "NVIDIA H100", "h100"}));
  Record r = Sample(1, 1e-3);
  r.device = id;
  EXPECT_EQ(DeviceKind(r), DeviceKind(info, *cuda));
}

// The rest of the fingerprint: the cores, memory and CPU features of what the kernel runs on (a
// GPU's multiprocessors and memory for a CUDA target), kept in the record and read back.
TEST(Records, DeviceFingerprintIsThatOfWhatTheKernelsRunOn) {
  msg::DeviceInfo info;
  info.arch = "x86_64";
  info.cpu_model = "AMD EPYC";
  info.cores = 2;
  info.memory_bytes = uint64_t{24} << 30;
  info.cpu_features = {"fma", "avx2", "avx"};
  msg::GpuInfo gpu;
  gpu.arch = "sm_90";
  gpu.name = "NVIDIA H100";
  gpu.multiprocessors = 132;
  gpu.memory_bytes = uint64_t{80} << 30;
  gpu.driver = "13.0";
  info.gpus.push_back(gpu);
  auto cpu = builder::ParseTarget("llvm -mtriple=x86_64-linux-gnu");
  auto cuda = builder::ParseTarget("cuda -arch=sm_90");
  ASSERT_TRUE(cpu.ok() && cuda.ok());
  const DeviceId host = DeviceIdOf(info, *cpu);
  EXPECT_EQ(host.cores, 2u);
  EXPECT_EQ(host.memory_bytes, uint64_t{24} << 30);
  ASSERT_EQ(host.features.size(), 16u);
  // The features' order, and a name given twice, do not change it; another feature does.
  msg::DeviceInfo same = info;
  same.cpu_features = {"avx", "avx2", "fma", "avx"};
  EXPECT_EQ(DeviceIdOf(same, *cpu).features, host.features);
  same.cpu_features.push_back("avx512f");
  EXPECT_NE(DeviceIdOf(same, *cpu).features, host.features);
  EXPECT_EQ(FingerprintText(host), "2 cores, 24.0 GiB, features " + host.features);

  const DeviceId card = DeviceIdOf(info, *cuda);
  EXPECT_EQ(card.cores, 132u);
  EXPECT_EQ(card.memory_bytes, uint64_t{80} << 30);
  EXPECT_EQ(card.features, "");
  EXPECT_EQ(card.driver, "13.0");
  EXPECT_EQ(FingerprintText(card), "132 cores, 80.0 GiB, driver 13.0");
  auto card_back = Record::FromJson([&] {
    Record g = Sample(2, 1e-3);
    g.device = card;
    return g.ToJson();
  }());
  ASSERT_TRUE(card_back.ok());
  EXPECT_EQ(card_back->device, card);

  Record r = Sample(1, 1e-3);
  r.device = host;
  auto back = Record::FromJson(r.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->device, host);
  // A log from before the fingerprint reads as one that does not know it.
  auto old = r.ToJson();
  old["device"].erase("cores");
  old["device"].erase("memory_bytes");
  old["device"].erase("features");
  back = Record::FromJson(old);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(FingerprintText(back->device), "");
  old["device"]["cores"] = -1;
  EXPECT_FALSE(Record::FromJson(old).ok()) << "a negative core count";
}

// A line nested 100,000 levels deep in `v`, `workload`, `config.index` or a `task.shape` element
// (200 KB, under the line limit): the old reader parsed it, then overflowed the stack copying the
// workload or quoting the value in its error text (log summary, best, export, replay and tune
// --log all read logs this way). Each is now a warning naming the depth, and the good lines stay.
// Run in a forked child first (gtest's death-test machinery), so such a crash fails this test.
TEST(Records, SkipsDeeplyNestedLinesWithAWarning) {
  const std::string levels(100'000, '[');
  const std::string deep = levels + std::string(levels.size(), ']');
  nlohmann::json good = Sample(1, 1e-3).ToJson();
  const std::string text = good.dump();
  auto with = [&](const std::string& field, const std::string& value) {
    std::string line = text;
    const std::string needle = "\"" + field + "\":";
    size_t at = line.find(needle) + needle.size();
    size_t end = at;
    if (line[at] == '{' || line[at] == '[') {
      for (int depth = 0; end == at || depth > 0; ++end) {
        depth += line[end] == '{' || line[end] == '['   ? 1
                 : line[end] == '}' || line[end] == ']' ? -1
                                                        : 0;
      }
    } else {
      end = line.find_first_of(",}", at);
    }
    return line.substr(0, at) + value + line.substr(end);
  };
  std::string path = TempPath("deep.jsonl");
  {
    std::ofstream out(path);
    out << text << "\n"
        << with("v", deep) << "\n"
        << text.substr(0, text.size() - 1) << ",\"workload\":{\"w\":" << deep << "}}\n"
        << with("index", deep) << "\n"
        << with("shape", "[64," + deep + "]") << "\n"
        << text << "\n";
  }
  EXPECT_EXIT(
      {
        (void)ReadLog(path);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->records.size(), 2u);
  ASSERT_EQ(log->warnings.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(log->warnings[i].find(":" + std::to_string(i + 2) +
                                    ": skipped a line: JSON nested deeper than 64 levels"),
              std::string::npos)
        << log->warnings[i];
  }
  std::filesystem::remove(path);
}

// A log that is not a file is an error at once: /dev/zero used to be read (4 GB and more) into one
// line, and a directory read as an empty log.
TEST(Records, ALogThatIsNotAFileIsAnErrorBeforeAnythingIsRead) {
  const std::string dir = TempPath("dir.jsonl");
  std::filesystem::create_directories(dir);
  auto d = ReadLog(dir);
  std::filesystem::remove(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), dir + ": is a directory");
  auto zero = ReadLog("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(zero.status().message(), "/dev/zero: not a regular file or a pipe");
}

// A line over the limit is passed over in bounded memory, named in a warning, and the records
// around it are read.
TEST(Records, SkipsALineLongerThanTheLimitAndReadsTheRest) {
  const std::string path = TempPath("long-line.jsonl");
  {
    std::ofstream out(path, std::ios::binary);
    out << Sample(1, 1e-3).ToJson().dump() << "\n"
        << std::string(kMaxRecordBytes + 70'000, 'x') << "\n"
        << Sample(2, 2e-3).ToJson().dump() << "\n"
        << std::string(3 * kMaxRecordBytes, 'y');  // and a last line without its newline
  }
  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->records.size(), 2u);
  EXPECT_EQ(log->records[1].config_index, 2u);
  ASSERT_EQ(log->warnings.size(), 2u);
  EXPECT_EQ(log->warnings[0], path +
                                  ":2: skipped a line longer than 1048576 bytes (the limit for "
                                  "one record)");
  EXPECT_NE(log->warnings[1].find(":4: skipped a line longer than"), std::string::npos)
      << log->warnings[1];
  std::filesystem::remove(path);
}

// A warning says what is wrong in words, without nlohmann's "[json.exception.type_error.302]".
TEST(Records, WarningsDoNotQuoteTheJsonLibrarysExceptionText) {
  const std::string path = TempPath("wrong-type.jsonl");
  nlohmann::json bad = Sample(1, 1e-3).ToJson();
  bad["error"] = 5;
  nlohmann::json no_config = Sample(2, 1e-3).ToJson();
  no_config.erase("config");
  std::ofstream(path) << bad.dump() << "\n" << no_config.dump() << "\n";
  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->warnings.size(), 2u);
  EXPECT_EQ(log->warnings[0], path + ":1: not a record (type must be string, but is number)");
  EXPECT_EQ(log->warnings[1], path + ":2: not a record (key 'config' not found)");
  std::filesystem::remove(path);
}

TEST(Records, AMissingLogIsNotFound) {
  auto log = ReadLog(TempPath("absent.jsonl"));
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace crosstune::tuner
