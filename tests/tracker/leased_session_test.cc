// client::OpenLeasedSession against a real tracker and servers: the session a tracker grant opens,
// the lease it holds, and a device whose address does not answer.
#include <gtest/gtest.h>

#include "farm.h"

namespace crosstune::testing {
namespace {

using namespace std::chrono_literals;

class LeasedSessionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(farm_.StartTracker()); }
  client::TrackerOptions Tracker() const {
    client::TrackerOptions o;
    o.tracker = farm_.tracker();
    o.peer_name = "leased-test";
    return o;
  }
  client::LeaseRequest Request(std::chrono::milliseconds wait = 10s) const {
    client::LeaseRequest r;
    r.key = "cpu";
    r.wait = wait;
    r.hold = 30s;
    return r;
  }
  Farm farm_;
};

TEST_F(LeasedSessionTest, OpensASessionOnTheGrantAndEndsTheLeaseWithIt) {
  int s = farm_.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto leased = client::OpenLeasedSession(Tracker(), Request(), client::ConnectOptions{});
  ASSERT_TRUE(leased.ok()) << leased.status().ToString();
  EXPECT_EQ(leased->grant.address, farm_.server_addr(s));
  EXPECT_EQ(leased->session->server(), farm_.server_addr(s));
  EXPECT_TRUE(leased->session->Ping().ok());
  EXPECT_EQ(farm_.Device(farm_.server_addr(s))["holder"], "leased-test");
  // While it is held, another request waits in vain.
  auto other = client::OpenLeasedSession(Tracker(), Request(300ms), client::ConnectOptions{});
  EXPECT_EQ(other.status().code(), ErrorCode::kTimeout) << other.status().ToString();
  // Session and tracker connection closed: the device is free for the next request.
  leased->session.reset();
  leased->tracker.reset();
  auto next = client::OpenLeasedSession(Tracker(), Request(), client::ConnectOptions{});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
}

TEST_F(LeasedSessionTest, ReportsAnUnreachableDeviceAndNamesIt) {
  ClosedPort nowhere;
  ASSERT_GE(farm_.StartServer("cpu", {"--custom-addr", nowhere.address()}), 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  client::ConnectOptions co;
  co.connect_timeout = 2s;
  auto leased = client::OpenLeasedSession(Tracker(), Request(3s), co);
  ASSERT_FALSE(leased.ok());
  // Three grants of the one device, each released as unreachable: it is quarantined.
  EXPECT_EQ(leased.status().code(), ErrorCode::kDisconnected) << leased.status().ToString();
  EXPECT_NE(leased.status().message().find(nowhere.address()), std::string::npos);
  EXPECT_NE(leased.status().message().find("from tracker " + farm_.tracker()), std::string::npos);
  auto dev = farm_.Device(nowhere.address());
  EXPECT_EQ(dev["infra_failures"], 3) << dev.dump();
  EXPECT_EQ(dev["state"], "quarantined");
}

}  // namespace
}  // namespace crosstune::testing
