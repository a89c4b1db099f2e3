// tuner::TuneSetup, the setup `crosstune tune`, Python's tune() and crosstune-bench-tune share,
// against real components: the crosstune-server it starts on this machine, one given by
// address, the real builder and its cache.
#include "crosstune/tuner/tune_setup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "crosstune/cpus.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"

namespace crosstune::tuner {
namespace {

TuneSetupOptions Local() {
  TuneSetupOptions o;
  o.devices.server_binary = CT_SERVER_BIN;
  return o;
}

// The CPUs of this process's children (the local server the setup started).
std::vector<std::string> ChildrensCpus() {
  std::vector<std::string> out;
  for (const auto& p : testing::ListProcesses()) {
    if (p.ppid == ::getpid()) out.push_back(testing::CpusAllowedList(p.pid));
  }
  return out;
}

TEST(TuneSetup, StartsTheLocalServerOnTheKernelsCpusAndThisThreadOnTheOthersThenGivesThemBack) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU here: builds and runs take turns, unpinned";
  auto setup = TuneSetup::Open(Local());
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  const TuneSetup& s = **setup;
  ASSERT_TRUE(s.pinned());
  EXPECT_EQ(s.cpus().kernel, std::vector<int>{allowed.back()});
  EXPECT_EQ(std::count(s.cpus().build.begin(), s.cpus().build.end(), allowed.back()), 0);
  EXPECT_EQ(AllowedCpus(), s.cpus().build);  // this thread, and what it starts
  const std::vector<std::string> children = ChildrensCpus();
  EXPECT_NE(std::find(children.begin(), children.end(), FormatCpuList(s.cpus().kernel)),
            children.end())
      << "no child process on the kernel's CPUs";
  EXPECT_EQ(s.CpuSplitText(), "timing on CPU " + FormatCpuList(s.cpus().kernel) +
                                  ", building on CPU " + FormatCpuList(s.cpus().build));
  EXPECT_TRUE(s.options().overlap);
  EXPECT_EQ(s.options().measure.timing, MeasureOptions{}.timing);  // the tuner's, for a template
  EXPECT_FALSE(s.options().run_id.empty());
  EXPECT_EQ(s.devices().size(), 1u);
  setup->reset();
  EXPECT_EQ(AllowedCpus(), allowed);
}

TEST(TuneSetup, RefusedOverlapLeavesTheCpusShared) {
  TuneSetupOptions o = Local();
  o.overlap = false;
  auto setup = TuneSetup::Open(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_FALSE((*setup)->pinned());
  EXPECT_FALSE((*setup)->options().overlap);
  EXPECT_EQ((*setup)->CpuSplitText(), "");
}

TEST(TuneSetup, TakesTurnsWithServersOnThisMachineTimesANetworkColdAndSaysWhenDevicesIdle) {
  ServerProcess server;
  ASSERT_TRUE(server.Start({.binary = CT_SERVER_BIN}).ok());
  const testing::TempDir dir;
  TuneSetupOptions o;
  o.devices.servers = {server.address(), server.address()};
  o.network = true;
  o.tune.log_path = dir.path() + "/net.jsonl";
  o.tune.batch = 1;
  std::vector<std::string> warnings;
  o.tune.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  auto setup = TuneSetup::Open(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_FALSE((*setup)->pinned());
  EXPECT_FALSE((*setup)->options().overlap);  // loopback servers: their CPUs are the builds'
  EXPECT_EQ((*setup)->options().measure.timing, NetworkTiming());
  EXPECT_EQ((*setup)->options().transfer_logs, std::vector<std::string>{o.tune.log_path});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("batch 1 is smaller than the 2 devices"), std::string::npos)
      << warnings[0];
  // Given, the overlap and the timing are the caller's.
  o.overlap = true;
  o.timing = TimingOptions{.number = 2, .repeat = 7};
  setup = TuneSetup::Open(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_TRUE((*setup)->options().overlap);
  EXPECT_EQ((*setup)->options().measure.timing, *o.timing);
}

TEST(TuneSetup, TunesATaskAndReportsTheOverlapCpusAndBuildCache) {
  const testing::TempDir dir;
  TuneSetupOptions o = Local();
  o.build_cache = dir.path() + "/cache";
  o.build_cache_max_mb = 8;
  o.timing = TimingOptions{.number = 1, .repeat = 1};
  o.tune.tuner = "random";
  o.tune.trials = 3;
  o.tune.batch = 3;
  int progress = 0;
  o.tune.on_progress = [&](const TuneProgress&) { ++progress; };
  auto setup = TuneSetup::Open(o);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  auto task = MakeTask("matmul", {16, 16, 16}, (*setup)->target());
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  auto summary = (*setup)->Tune(**task);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->measured, 3);
  EXPECT_GT(progress, 0);
  nlohmann::json report = TuneReport(**task, (*setup)->options(), *summary);
  (*setup)->AddToReport(&report);
  EXPECT_EQ(report["overlap"], (*setup)->pinned());
  EXPECT_EQ(report.contains("cpus"), (*setup)->pinned());
  EXPECT_EQ(report["build_cache"]["dir"], o.build_cache);
  EXPECT_GT(report["build_cache"]["entries"].get<int>(), 0);
  EXPECT_EQ(report["build_cache"]["max_bytes"].get<uint64_t>(), 8u * 1024 * 1024);
  EXPECT_FALSE(report.contains("build_workers"));
}

TEST(TuneSetup, RefusesBadOptionsByNameBeforeStartingAnything) {
  const testing::TempDir dir;
  auto refused = [](TuneSetupOptions o) {
    auto s = TuneSetup::Open(std::move(o));
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.status().message();
  };
  TuneSetupOptions o = Local();
  o.devices.tracker = "127.0.0.1:1";
  EXPECT_EQ(refused(o), "a tracker (127.0.0.1:1) needs a device key");
  o = Local();
  o.devices.key = "cpu";
  EXPECT_EQ(refused(o), "a device key (cpu) needs a tracker");
  o = Local();
  o.build_key = "builders";
  EXPECT_EQ(refused(o), "a build key (builders) needs a tracker");
  o = Local();
  o.threads = 0;
  EXPECT_EQ(refused(o), "threads 0: give 1 or more");
  o = Local();
  o.build_cache = dir.path() + "/c";
  o.build_cache_max_mb = -5;
  EXPECT_EQ(refused(o), "build cache budget -5 MB: give 0 (unbounded) or a size in MB");
  o.build_cache = testing::WriteFile(dir.path() + "/file", "");
  o.build_cache_max_mb = 1;
  EXPECT_NE(refused(o).find("build cache " + o.build_cache + ": "), std::string::npos);
  EXPECT_TRUE(ChildrensCpus().empty()) << "a server was started";
}

}  // namespace
}  // namespace crosstune::tuner
