// Where the devices are: what decides whether `crosstune tune` builds while it times.
#include "crosstune/tuner/device_pool.h"

#include <gtest/gtest.h>

namespace crosstune::tuner {
namespace {

std::vector<DeviceSpec> Servers(const std::vector<std::string>& addresses) {
  std::vector<DeviceSpec> out;
  for (const auto& a : addresses) out.push_back({.name = a, .server = a});
  return out;
}

TEST(AllOnThisMachine, LoopbackServersAreHereAnyOtherHostIsNot) {
  EXPECT_TRUE(AllOnThisMachine(Servers({"127.0.0.1:9090"})));
  EXPECT_TRUE(AllOnThisMachine(Servers({"127.0.0.2:9090", "localhost:1", "[::1]:9091"})));
  EXPECT_FALSE(AllOnThisMachine(Servers({"127.0.0.1:9090", "10.0.0.7:9090"})));
  EXPECT_FALSE(AllOnThisMachine(Servers({"board:9090"})));
  EXPECT_FALSE(AllOnThisMachine(Servers({"128.0.0.1:9090"})));
  EXPECT_FALSE(AllOnThisMachine(Servers({"not an address"})));
  EXPECT_FALSE(AllOnThisMachine({}));
}

// The timed kernel gets the last CPUs, the builds the rest less the kernel CPUs' SMT siblings.
TEST(SplitLocalCpus, KernelGetsItsThreadsCpusAndBuildsWhatSharesNoCoreWithThem) {
  auto alone = [](int cpu) { return std::vector<int>{cpu}; };
  LocalCpuSplit two = SplitLocalCpus(1, {0, 1}, alone);
  EXPECT_EQ(two.kernel, std::vector<int>{1});
  EXPECT_EQ(two.build, std::vector<int>{0});
  LocalCpuSplit gaps = SplitLocalCpus(2, {2, 5, 6, 9}, alone);
  EXPECT_EQ(gaps.kernel, (std::vector<int>{6, 9}));
  EXPECT_EQ(gaps.build, (std::vector<int>{2, 5}));
  // 4 cores with 2 threads each, numbered as Linux does (cpu N and N+4 share a core).
  auto smt = [](int cpu) { return std::vector<int>{cpu % 4, cpu % 4 + 4}; };
  LocalCpuSplit shared = SplitLocalCpus(1, {0, 1, 2, 3, 4, 5, 6, 7}, smt);
  EXPECT_EQ(shared.kernel, std::vector<int>{7});
  EXPECT_EQ(shared.build, (std::vector<int>{0, 1, 2, 4, 5, 6}));
  // One core with two threads: nothing is left for builds, so they take turns with the kernel.
  LocalCpuSplit one_core = SplitLocalCpus(1, {0, 1}, [](int) { return std::vector<int>{0, 1}; });
  EXPECT_EQ(one_core.kernel, std::vector<int>{1});
  EXPECT_TRUE(one_core.build.empty());
  // No CPU beyond the kernel's threads: nothing is pinned.
  LocalCpuSplit full = SplitLocalCpus(2, {0, 1}, alone);
  EXPECT_TRUE(full.kernel.empty());
  EXPECT_TRUE(full.build.empty());
  EXPECT_TRUE(SplitLocalCpus(1, {3}, alone).build.empty());
}

}  // namespace
}  // namespace crosstune::tuner
