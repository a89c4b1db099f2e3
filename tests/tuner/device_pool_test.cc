// Where the devices are: what decides whether `crosstune tune` builds while it times.
#include "crosstune/tuner/device_pool.h"

#include <gtest/gtest.h>

namespace crosstune::tuner {
namespace {

std::vector<DeviceSpec> Servers(const std::vector<std::string>& addresses) {
  std::vector<DeviceSpec> out;
  for (const auto& a : addresses) out.push_back({a, a});
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

}  // namespace
}  // namespace crosstune::tuner
