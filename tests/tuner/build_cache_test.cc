// `crosstune tune --build-cache` end to end, with the real builder, compiler and a local server:
// a second run builds nothing, a config or target not built before misses, a damaged entry is
// rebuilt with a warning, and two runs sharing the directory at once leave it whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"

extern char** environ;

namespace crosstune::tuner {
namespace {

namespace fs = std::filesystem;

// NOLINTNEXTLINE(bugprone-exception-escape): a test helper; nlohmann::json may throw on copy.
struct CliRun {
  int rc = -1;
  nlohmann::json report;  // the --json object (null when stdout was not one)
  std::string out, err;
};

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Starts `crosstune ARGS...` with stdout and stderr in files under dir; Wait() ends it.
class Cli {
 public:
  Cli(const std::vector<std::string>& args, const fs::path& dir, const std::string& name)
      : out_(dir / (name + ".out")), err_(dir / (name + ".err")) {
    std::vector<std::string> argv = {CT_CLI_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargs;
    for (auto& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (posix_spawn(&pid_, cargs[0], &actions, nullptr, cargs.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  CliRun Wait() {
    CliRun r;
    int status = 0;
    if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_ && WIFEXITED(status)) {
      r.rc = WEXITSTATUS(status);
    }
    r.out = ReadText(out_);
    r.err = ReadText(err_);
    r.report = nlohmann::json::parse(r.out, nullptr, false);
    if (r.report.is_discarded()) r.report = nullptr;
    return r;
  }

 private:
  fs::path out_, err_;
  pid_t pid_ = -1;
};

class TuneBuildCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crosstune-tune-cache-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    cache_ = (dir_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A short, deterministic run (random tuner, fixed seed) into its own log.
  std::vector<std::string> Args(const std::string& log, const std::string& seed = "5",
                                const std::string& target = "auto") const {
    return {"tune",     "matmul", "--shape",         "24,24,24", "--tuner", "random",
            "--seed",   seed,     "--trials",        "8",        "--batch", "4",
            "--repeat", "1",      "--min-repeat-ms", "0",        "--quiet", "--json",
            "--target", target,   "--build-cache",   cache_,     "--log",   (dir_ / log).string()};
  }
  CliRun Tune(const std::vector<std::string>& args, const std::string& name) {
    CliRun r = Cli(args, dir_, name).Wait();
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(r.report.is_object()) << r.out << r.err;
    return r;
  }
  // build_cached of each built record of a log, by config.
  std::map<uint64_t, bool> Cached(const std::string& log) const {
    std::map<uint64_t, bool> out;
    auto contents = ReadLog((dir_ / log).string());
    EXPECT_TRUE(contents.ok());
    if (!contents.ok()) return out;
    for (const Record& r : contents->records) {
      EXPECT_TRUE(r.ok()) << r.message;  // a cached build measures as right as a fresh one
      if (r.build_cached) out[r.config_index] = *r.build_cached;
    }
    return out;
  }
  // Every file of the cache and its bytes.
  std::map<std::string, std::string> CacheFiles() const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(cache_)) {
      if (e.is_regular_file()) out[e.path().string()] = ReadText(e.path());
    }
    return out;
  }

  fs::path dir_;
  std::string cache_;
};

TEST_F(TuneBuildCacheTest, ASecondRunBuildsNothingAndOnlyNewConfigsOrTargetsMiss) {
  const CliRun first = Tune(Args("first.jsonl"), "first");
  ASSERT_TRUE(first.report.is_object());
  const nlohmann::json& c1 = first.report["build_cache"];
  const int builds = c1["builds"].get<int>();
  EXPECT_EQ(builds, first.report["measured"].get<int>());
  EXPECT_GE(builds, 4);
  EXPECT_EQ(c1["hits"].get<int>(), 0);
  EXPECT_EQ(c1["entries"].get<int>(), builds);
  EXPECT_EQ(c1["dir"], cache_);
  const std::map<uint64_t, bool> built = Cached("first.jsonl");
  EXPECT_EQ(built.size(), static_cast<size_t>(builds));
  for (const auto& [config, cached] : built) EXPECT_FALSE(cached) << config;
  const auto files = CacheFiles();

  // The same run into a fresh log: every build is a hit, and the cache is left as it was.
  const CliRun second = Tune(Args("second.jsonl"), "second");
  ASSERT_TRUE(second.report.is_object());
  const nlohmann::json& c2 = second.report["build_cache"];
  EXPECT_EQ(c2["builds"].get<int>(), builds);
  EXPECT_EQ(c2["hits"].get<int>(), second.report["measured"].get<int>());
  EXPECT_EQ(c2["hit_rate"].get<double>(), 1.0);
  const std::map<uint64_t, bool> again = Cached("second.jsonl");
  EXPECT_EQ(again.size(), built.size());
  for (const auto& [config, cached] : again) {
    EXPECT_TRUE(built.count(config)) << config;
    EXPECT_TRUE(cached) << config;
  }
  EXPECT_TRUE(CacheFiles() == files) << "the second run changed the cache";

  // Another seed: other configs, of which only those built before hit.
  const CliRun other = Tune(Args("other.jsonl", "11"), "other");
  int expected_hits = 0;
  for (const auto& [config, cached] : Cached("other.jsonl")) {
    EXPECT_EQ(cached, built.count(config) == 1) << config;
    expected_hits += cached;
  }
  EXPECT_EQ(other.report["build_cache"]["hits"].get<int>(), expected_hits);
  EXPECT_LT(expected_hits, other.report["build_cache"]["builds"].get<int>());

  // Another CPU with the same features: the generated sources are the same (checked here), so
  // only the target in the key tells the builds apart; they all miss.
  const std::string target = first.report["target"].get<std::string>();
  const size_t cpu_at = target.find("-mcpu=");
  ASSERT_NE(cpu_at, std::string::npos) << target;
  const size_t cpu_end = target.find(' ', cpu_at);
  const std::string cpu = target.substr(cpu_at + 6, cpu_end - cpu_at - 6);
  std::string retargeted = target;
  retargeted.replace(cpu_at + 6, cpu.size(), cpu == "x86-64-v2" ? "x86-64" : "x86-64-v2");
  auto task_a = MakeTask("matmul", {24, 24, 24}, *builder::ParseTarget(target));
  auto task_b = MakeTask("matmul", {24, 24, 24}, *builder::ParseTarget(retargeted));
  ASSERT_TRUE(task_a.ok() && task_b.ok());
  for (const auto& [config, cached] : built) {
    ASSERT_EQ((*task_a)->Generate((*task_a)->space().Get(config)),
              (*task_b)->Generate((*task_b)->space().Get(config)))
        << "config " << config << " generates other code for " << retargeted;
  }
  const CliRun retarget = Tune(Args("retarget.jsonl", "5", retargeted), "retarget");
  EXPECT_EQ(retarget.report["target"], retargeted);
  EXPECT_EQ(retarget.report["build_cache"]["hits"].get<int>(), 0);
  EXPECT_EQ(retarget.report["build_cache"]["builds"].get<int>(), builds);
  for (const auto& [config, cached] : Cached("retarget.jsonl")) EXPECT_FALSE(cached) << config;
}

TEST_F(TuneBuildCacheTest, DamagedEntriesAreRebuiltWithAWarning) {
  const CliRun first = Tune(Args("first.jsonl"), "first");
  ASSERT_TRUE(first.report.is_object());
  const int builds = first.report["build_cache"]["builds"].get<int>();
  // One entry truncated, the others with one byte changed in the middle.
  int n = 0;
  for (const auto& [path, bytes] : CacheFiles()) {
    std::string damaged = n++ == 0 ? bytes.substr(0, bytes.size() / 3) : bytes;
    if (n > 1) damaged[bytes.size() / 2] ^= 0x20;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
  }
  ASSERT_EQ(n, builds);
  const CliRun second = Tune(Args("second.jsonl"), "second");
  EXPECT_EQ(second.report["build_cache"]["hits"].get<int>(), 0);
  for (const auto& [config, cached] : Cached("second.jsonl")) EXPECT_FALSE(cached) << config;
  EXPECT_NE(second.err.find("warning: build cache: " + cache_), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("SHA-256 of the entry does not match; rebuilt"), std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("not a whole cache entry"), std::string::npos) << second.err;
  // The rebuilds replaced them: a third run hits them all, with no warning.
  const CliRun third = Tune(Args("third.jsonl"), "third");
  EXPECT_EQ(third.report["build_cache"]["hits"].get<int>(), builds);
  EXPECT_EQ(third.err.find("build cache"), std::string::npos) << third.err;
}

TEST_F(TuneBuildCacheTest, TwoRunsSharingTheCacheAtOnceLeaveItWhole) {
  // Two tuners (two processes, as two hosts of a farm would be) with the same configs.
  Cli a(Args("a.jsonl"), dir_, "a");
  Cli b(Args("b.jsonl"), dir_, "b");
  const CliRun ra = a.Wait();
  const CliRun rb = b.Wait();
  ASSERT_EQ(ra.rc, 0) << ra.err;
  ASSERT_EQ(rb.rc, 0) << rb.err;
  EXPECT_EQ(ra.err.find("build cache"), std::string::npos) << ra.err;
  EXPECT_EQ(rb.err.find("build cache"), std::string::npos) << rb.err;
  const int builds = ra.report["build_cache"]["builds"].get<int>();
  // Whatever order they wrote in, each config has one whole entry and no temporary is left.
  const auto files = CacheFiles();
  EXPECT_EQ(static_cast<int>(files.size()), builds);
  for (const auto& [path, bytes] : files) {
    EXPECT_EQ(path.find(".tmp-"), std::string::npos) << path;
  }
  const CliRun third = Tune(Args("third.jsonl"), "third");
  EXPECT_EQ(third.report["build_cache"]["hits"].get<int>(), builds);
  EXPECT_EQ(third.err.find("build cache"), std::string::npos) << third.err;
}

TEST_F(TuneBuildCacheTest, BadCacheOptionsAreRefusedByName) {
  const std::string file = (dir_ / "a-file").string();
  std::ofstream(file) << "x";
  std::vector<std::string> args = Args("x.jsonl");
  args[args.size() - 3] = file;  // --build-cache FILE
  CliRun r = Cli(args, dir_, "file").Wait();
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("build cache " + file + ": "), std::string::npos) << r.err;

  args = Args("x.jsonl");
  args.insert(args.end(), {"--build-cache-max-mb", "-5"});
  r = Cli(args, dir_, "negative").Wait();
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("build cache budget -5 MB"), std::string::npos) << r.err;

  r = Cli({"tune", "matmul", "--shape", "8,8,8", "--build-cache-max-mb", "10"}, dir_, "alone")
          .Wait();
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--build-cache-max-mb needs --build-cache"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace crosstune::tuner
