// `crosstune tune` end to end: a run killed by SIGKILL loses no finished record, and the next run
// with the same --log measures only what is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "crosstune/cpus.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/records.h"

extern char** environ;

namespace crosstune::tuner {
namespace {

size_t CountLines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += !line.empty();
  return n;
}

// Runs the CLI to completion and returns its stdout; `rc` gets the exit status.
std::string RunCli(const std::string& args, int* rc) {
  std::string cmd = std::string(CT_CLI_BIN) + " " + args + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");  // NOLINT(cert-env33-c): the test builds the command
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = p ? ::pclose(p) : -1;
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(TuneResume, ASigkilledRunLosesNoRecordAndTheNextMeasuresOnlyTheRest) {
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("crosstune-resume-" + std::to_string(::getpid()) + ".jsonl"))
                              .string();
  std::filesystem::remove(log);
  const std::string common =
      "tune matmul --shape 40,40,40 --tuner random --trials 20 --batch 4 "
      "--repeat 1 --min-repeat-ms 0 --quiet --log " +
      log;

  std::vector<std::string> argv = {
      CT_CLI_BIN, "tune",    "matmul",  "--shape", "40,40,40", "--tuner", "random",
      "--trials", "20",      "--batch", "4",       "--repeat", "1",       "--min-repeat-ms",
      "0",        "--quiet", "--log",   log};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ), 0);
  // Wait for some records, then kill it mid-run.
  (void)crosstune::testing::Eventually([&] { return CountLines(log) >= 6; },
                                       std::chrono::seconds(120));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";

  auto first = ReadLog(log);
  ASSERT_TRUE(first.ok());
  // At most the line being written when it died is torn; everything else is whole.
  EXPECT_LE(first->warnings.size(), 1u);
  const size_t killed_at = first->records.size();
  EXPECT_GE(killed_at, 6u);
  EXPECT_LT(killed_at, 20u);

  int rc = 0;
  std::string out = RunCli(common + " --json", &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["resumed"].get<size_t>(), killed_at);
  EXPECT_EQ(j["measured"].get<size_t>(), 20 - killed_at);
  EXPECT_EQ(j["trials_in_log"].get<int>(), 20);

  auto second = ReadLog(log);
  ASSERT_TRUE(second.ok());
  std::set<uint64_t> configs;
  for (const auto& r : second->records) {
    EXPECT_TRUE(configs.insert(r.config_index).second) << "measured twice: " << r.config_index;
  }
  EXPECT_EQ(configs.size(), 20u);

  // Nothing left to do: a third run measures nothing.
  out = RunCli(common + " --json", &rc);
  ASSERT_EQ(rc, 0) << out;
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["measured"].get<int>(), 0);
  EXPECT_EQ(CountLines(log), 20u + (first->warnings.empty() ? 0u : 1u));
  std::filesystem::remove(log);
}

// A record says which code it measured (a hash of the generated source): records made before
// the template's code generation changed are not resumed as those configs, and are counted.
TEST(TuneResume, RecordsOfAnotherGeneratorAreNotResumed) {
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("crosstune-generator-" + std::to_string(::getpid()) + ".jsonl"))
                              .string();
  std::filesystem::remove(log);
  const std::string common =
      "tune matmul --shape 24,24,24 --tuner random --trials 6 --batch 3 --repeat 1 "
      "--min-repeat-ms 0 --quiet --json --log " +
      log;
  int rc = 0;
  std::string out = RunCli(common, &rc);
  ASSERT_EQ(rc, 0) << out;
  auto first = ReadLog(log);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->records.size(), 6u);
  // Two records as an older generator would have left them.
  std::string text;
  for (size_t i = 0; i < first->records.size(); ++i) {
    Record r = first->records[i];
    EXPECT_EQ(r.generator.size(), 16u) << "record " << i << " names the code it measured";
    if (i < 2) r.generator = "0000000000000000";
    text += r.ToJson().dump() + "\n";
  }
  {
    std::ofstream rewrite(log, std::ios::trunc);
    rewrite << text;
  }
  out = RunCli(common, &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["stale"].get<int>(), 2);
  EXPECT_EQ(j["resumed"].get<int>(), 4);
  EXPECT_EQ(j["measured"].get<int>(), 2);
  EXPECT_EQ(j["trials_in_log"].get<int>(), 6);
  std::filesystem::remove(log);
}

// Without a device, `crosstune tune` starts a server here: it gets the kernel's CPUs to itself and
// the builds the others, and then builds overlap the timing. --no-overlap: take turns, unpinned.
TEST(TuneOnThisMachine, TheServerGetsTheKernelsCpusAndBuildsOverlapOnTheRest) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU here: builds and runs take turns, unpinned";
  const testing::TempDir dir;
  const std::string common =
      "tune matmul --shape 16,16,16 --tuner random --trials 3 --batch 3 --repeat 1 "
      "--min-repeat-ms 0 --quiet --json --log " +
      dir.path() + "/";
  int rc = 0;
  std::string out = RunCli(common + "pinned.jsonl", &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["overlap"], true) << out;
  ASSERT_TRUE(j.contains("cpus")) << out;
  EXPECT_EQ(j["cpus"]["kernel"], std::to_string(allowed.back())) << out;
  auto build = ParseCpuList(j["cpus"]["build"].get<std::string>());
  ASSERT_TRUE(build.ok()) << out;
  EXPECT_FALSE(build->empty());
  for (int c : *build) EXPECT_NE(c, allowed.back()) << out;
  out = RunCli(common + "turns.jsonl --no-overlap", &rc);
  ASSERT_EQ(rc, 0) << out;
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["overlap"], false) << out;
  EXPECT_FALSE(j.contains("cpus")) << out;
}

TEST(TunePins, AreRefusedWithAWorkloadAndWhenMalformedBeforeAnythingRuns) {
  // A workload's tasks have different knobs; a pin without '=' names no value. Neither may start a
  // server or write a log.
  const testing::TempDir dir;
  const std::string log = dir.path() + "/never.jsonl";
  auto workload = testing::RunCommand(std::string(CT_CLI_BIN) +
                                      " tune --workload resnet50 --pin unroll_k=4 --log " + log);
  EXPECT_EQ(workload.exit_code, 1);
  EXPECT_NE(
      workload.err.find("--pin holds a knob of one template; it does not apply to --workload"),
      std::string::npos)
      << workload.err;
  auto malformed = testing::RunCommand(std::string(CT_CLI_BIN) +
                                       " tune matmul --shape 8,8,8 --pin unroll_k --log " + log);
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.err.find("pin 'unroll_k': expected KNOB=VALUE"), std::string::npos)
      << malformed.err;
  EXPECT_EQ(malformed.err.find("connected"), std::string::npos) << "a server was started";
  EXPECT_FALSE(std::filesystem::exists(log));
}

}  // namespace
}  // namespace crosstune::tuner
