// The tracker's scheduling core, driven by a hand-moved clock: no sockets, no sleeps.
#include "crosstune/tracker/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace crosstune::tracker {
namespace {

using Kind = Action::Kind;
using namespace std::chrono_literals;

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : now_(TimePoint{} + 1000h) {
    options_.make_token = [this] { return "tok" + std::to_string(++tokens_); };
    options_.startup_grace = 0ms;
  }

  Scheduler& S() {
    if (!s_) {
      s_ = std::make_unique<Scheduler>(options_, now_);
      s_->unix_ms = [this] { return unix_base_ + (now_ - (TimePoint{} + 1000h)) / 1ms; };
    }
    return *s_;
  }

  // Registers a server on connection `conn` at 10.0.0.<conn>:9090.
  std::string AddDevice(uint64_t conn, const std::string& key = "rpi4",
                        std::map<std::string, std::string> tags = {}, std::string token = "") {
    msg::Register reg;
    reg.key = key;
    reg.tags = std::move(tags);
    reg.info.arch = "aarch64";
    reg.info.cores = 4;
    reg.info.memory_bytes = 4ull << 30;
    reg.info.cpu_features = {"neon"};
    reg.lease_token = std::move(token);
    std::string addr = "10.0.0." + std::to_string(conn) + ":9090";
    auto r = S().RegisterDevice(now_, conn, reg, addr);
    conns_.insert(conn);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return addr;
  }

  msg::DeviceRequest Req(int32_t priority = 0, std::string key = "rpi4") {
    msg::DeviceRequest r;
    r.key = std::move(key);
    r.priority = priority;
    r.holder = "p" + std::to_string(priority);
    return r;
  }

  // Drains actions; acknowledges every token push as the server would, and keeps the rest.
  std::vector<Action> Run() {
    std::vector<Action> all;
    for (int round = 0; round < 10; ++round) {
      auto actions = S().TakeActions();
      if (actions.empty()) break;
      for (auto& a : actions) {
        if (a.kind == Kind::kPushToken && !a.token.empty() && ack_) {
          S().TokenAcked(now_, a.conn, a.token);
        }
        all.push_back(std::move(a));
      }
    }
    log_.insert(log_.end(), all.begin(), all.end());
    return all;
  }

  static std::vector<Action> OfKind(const std::vector<Action>& actions, Kind kind) {
    std::vector<Action> out;
    for (const auto& a : actions) {
      if (a.kind == kind) out.push_back(a);
    }
    return out;
  }

  // The grants in `actions`, as the client connection ids that received them.
  static std::vector<uint64_t> GrantedConns(const std::vector<Action>& actions) {
    std::vector<uint64_t> out;
    for (const auto& a : OfKind(actions, Kind::kGrant)) out.push_back(a.conn);
    return out;
  }

  // Moves the clock; every registered server heartbeats on the way unless `silent`.
  void Advance(Ms d, bool silent = false) {
    while (d > 0ms) {
      Ms step = std::min<Ms>(d, 1s);
      now_ += step;
      d -= step;
      if (!silent) {
        for (uint64_t c : conns_) S().Heartbeat(now_, c, {});
      }
      S().Tick(now_);
    }
  }

  // The device's entry in a fresh snapshot; a device that is not there fails the test (and
  // yields an entry whose state is "absent", which no expectation accepts by accident).
  const Snapshot::DeviceView& View(const std::string& name) {
    snap_ = S().Snap(now_);
    for (const auto& d : snap_.devices) {
      if (d.name == name) return d;
    }
    ADD_FAILURE() << "device " << name << " is not in the snapshot";
    static Snapshot::DeviceView none = [] {
      Snapshot::DeviceView v;
      v.state = "absent";
      return v;
    }();
    return none;
  }

  SchedulerOptions options_;
  TimePoint now_;
  int64_t unix_base_ = 1'700'000'000'000;
  int tokens_ = 0;
  bool ack_ = true;
  std::set<uint64_t> conns_;
  std::unique_ptr<Scheduler> s_;
  std::vector<Action> log_;
  Snapshot snap_;
};

TEST_F(SchedulerTest, GrantsAFreeDeviceAfterTheServerHasTheToken) {
  std::string dev = AddDevice(1);
  ack_ = false;
  S().Request(now_, 100, 7, Req());
  auto actions = Run();
  ASSERT_EQ(OfKind(actions, Kind::kPushToken).size(), 1u);
  EXPECT_EQ(OfKind(actions, Kind::kPushToken)[0].token, "tok1");
  EXPECT_TRUE(OfKind(actions, Kind::kGrant).empty()) << "client told before the server knew";
  S().TokenAcked(now_, 1, "tok1");
  actions = Run();
  auto grants = OfKind(actions, Kind::kGrant);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].conn, 100u);
  EXPECT_EQ(grants[0].request_id, 7u);
  EXPECT_EQ(grants[0].grant.address, dev);
  EXPECT_EQ(grants[0].grant.lease_token, "tok1");
  EXPECT_EQ(OfKind(actions, Kind::kLeaseStarted).size(), 1u);
}

TEST_F(SchedulerTest, GrantsHigherPriorityFirstAndFifoWithinAPriority) {
  std::string dev = AddDevice(1);
  S().Request(now_, 10, 1, Req(0));  // takes the device
  Run();
  S().Request(now_, 11, 1, Req(1));
  S().Request(now_, 12, 1, Req(5));
  S().Request(now_, 13, 1, Req(1));
  S().Request(now_, 14, 1, Req(5));
  Run();
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) {
    auto lease = View(dev);
    ASSERT_FALSE(lease.holder.empty());
    // Release whatever lease is on the device; the next one gets it.
    std::string token = "tok" + std::to_string(tokens_);
    ASSERT_TRUE(S().Release(now_, {token, 0, ""}).ok());
    auto g = GrantedConns(Run());
    ASSERT_EQ(g.size(), 1u);
    order.push_back(g[0]);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{12, 14, 11, 13}));
}

// A client asked for priority 2^31 - 1 and stayed ahead of everyone, aging included.
TEST_F(SchedulerTest, RefusesAPriorityBeyondTheBoundAndHoldsTvmRequestsToIt) {
  options_.max_priority = 100;
  options_.startup_grace = 1h;  // the TVM request waits although no TVM server has the key
  AddDevice(1);
  auto hold = Req(0);
  hold.multi_session = true;
  S().Request(now_, 10, 1, hold);
  Run();
  S().Request(now_, 11, 1, Req(INT32_MAX));
  S().Request(now_, 12, 1, Req(-101));
  auto fails = OfKind(Run(), Kind::kFail);
  ASSERT_EQ(fails.size(), 2u);
  EXPECT_EQ(fails[0].status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(fails[0].status.message(),
            "priority 2147483647 is not in -100..100 (the tracker's --max-priority)");
  EXPECT_EQ(fails[1].conn, 12u);
  S().Request(now_, 13, 1, Req(100));
  S().Request(now_, 14, 1, Req(INT32_MAX), Protocol::kTvm);
  EXPECT_TRUE(OfKind(Run(), Kind::kFail).empty());
  auto snap = S().Snap(now_);
  ASSERT_EQ(snap.keys.size(), 1u);
  ASSERT_EQ(snap.keys[0].queue.size(), 2u);
  EXPECT_EQ(snap.keys[0].queue[0].priority, 100);
  EXPECT_EQ(snap.keys[0].queue[1].priority, 100);
}

TEST_F(SchedulerTest, AgingLetsALowPriorityRequestOvertakeNewerHighOnes) {
  options_.aging_step = 10s;
  std::string dev = AddDevice(1);
  auto hold = Req(0);
  hold.multi_session = true;
  S().Request(now_, 10, 1, hold);
  Run();
  S().Request(now_, 11, 1, Req(0));  // low, waits long
  Advance(60s);                      // aged to effective priority 6
  S().Request(now_, 12, 1, Req(5));  // newer, higher base priority
  ASSERT_TRUE(S().Renew(now_, 10, {"tok1", 0}).ok());
  Run();
  ASSERT_TRUE(S().Release(now_, {"tok1", 0, ""}).ok());
  auto g = GrantedConns(Run());
  ASSERT_EQ(g, (std::vector<uint64_t>{11}));
  auto snap = S().Snap(now_);
  ASSERT_EQ(snap.keys.size(), 1u);
  ASSERT_EQ(snap.keys[0].queue.size(), 1u);
  EXPECT_EQ(snap.keys[0].queue[0].holder, "p5");
}

TEST_F(SchedulerTest, WithoutAgingStrictPriorityHolds) {
  options_.aging_step = 0ms;
  AddDevice(1);
  auto hold = Req(0);
  hold.multi_session = true;
  S().Request(now_, 10, 1, hold);
  Run();
  S().Request(now_, 11, 1, Req(0));
  Advance(60s);
  S().Request(now_, 12, 1, Req(5));
  ASSERT_TRUE(S().Renew(now_, 10, {"tok1", 0}).ok());
  Run();
  ASSERT_TRUE(S().Release(now_, {"tok1", 0, ""}).ok());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{12}));
}

TEST_F(SchedulerTest, CancelRemovesTheRequestAndAnswersIt) {
  AddDevice(1);
  S().Request(now_, 10, 1, Req());
  S().Request(now_, 11, 4, Req());
  S().Request(now_, 12, 1, Req());
  Run();
  ASSERT_TRUE(S().Cancel(now_, 11, 4).ok());
  auto actions = Run();
  auto fails = OfKind(actions, Kind::kFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].conn, 11u);
  EXPECT_EQ(fails[0].request_id, 4u);
  // 12 moves up from position 2 to 1 and is told.
  auto updates = OfKind(actions, Kind::kQueueUpdate);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].conn, 12u);
  EXPECT_EQ(updates[0].update.position, 1u);
  EXPECT_FALSE(S().Cancel(now_, 11, 4).ok());
  ASSERT_TRUE(S().Release(now_, {"tok1", 0, ""}).ok());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{12}));
}

TEST_F(SchedulerTest, TellsWaitingClientsTheirQueuePosition) {
  AddDevice(1);
  S().Request(now_, 10, 1, Req());
  S().Request(now_, 11, 1, Req());
  S().Request(now_, 12, 1, Req(3));
  auto updates = OfKind(Run(), Kind::kQueueUpdate);
  std::map<uint64_t, uint32_t> pos;
  for (const auto& u : updates) pos[u.conn] = u.update.position;
  EXPECT_EQ(pos[11], 2u);  // 12 came later with a higher priority and went ahead
  EXPECT_EQ(pos[12], 1u);
}

TEST_F(SchedulerTest, WaitersFarBackHearOfNewPositionsAtMostOncePerInterval) {
  options_.eager_positions = 1;
  options_.position_interval = 1s;
  AddDevice(1);
  auto hold = Req();
  hold.multi_session = true;
  S().Request(now_, 10, 1, hold);
  S().Request(now_, 11, 1, Req());
  S().Request(now_, 12, 1, Req());
  S().Request(now_, 13, 1, Req());
  Run();
  ASSERT_TRUE(S().Cancel(now_, 11, 1).ok());
  auto updates = OfKind(Run(), Kind::kQueueUpdate);
  ASSERT_EQ(updates.size(), 1u) << "only the new head is told at once";
  EXPECT_EQ(updates[0].conn, 12u);
  Advance(1s);
  updates = OfKind(Run(), Kind::kQueueUpdate);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].conn, 13u);
  EXPECT_EQ(updates[0].update.position, 2u);
}

TEST_F(SchedulerTest, LeaseExpiresUnlessRenewed) {
  std::string dev = AddDevice(1);
  auto req = Req();
  req.lease_ms = 10'000;
  req.multi_session = true;
  S().Request(now_, 10, 1, req);
  Run();
  Advance(8s);
  auto info = S().Renew(now_, 10, {"tok1", 0});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->remaining_ms, 10'000u);
  Advance(8s);  // 16 s after the grant, 8 s after the renewal: still held
  EXPECT_EQ(View(dev).state, "leased");
  Advance(3s);
  auto ended = OfKind(log_, Kind::kLeaseEnded);
  Run();
  ended = OfKind(log_, Kind::kLeaseEnded);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_NE(ended[0].outcome.find("expired"), std::string::npos);
  EXPECT_EQ(View(dev).state, "free");
  EXPECT_FALSE(S().Renew(now_, 10, {"tok1", 0}).ok()) << "an expired lease cannot be renewed";
  // The server is told to refuse the old token.
  auto pushes = OfKind(log_, Kind::kPushToken);
  EXPECT_TRUE(pushes.back().token.empty());
}

TEST_F(SchedulerTest, UnclaimedGrantGoesBackToThePool) {
  std::string dev = AddDevice(1);
  S().Request(now_, 10, 1, Req());  // one-session grant, nobody connects
  S().Request(now_, 11, 1, Req());
  Run();
  Advance(options_.claim_timeout - 1ms);
  EXPECT_TRUE(GrantedConns(Run()).empty());
  Advance(1ms);
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{11}));
  // This time the client opens its session in time: the grant stays.
  ASSERT_TRUE(S().SessionStarted(now_, 1, "tok2").ok());
  Advance(options_.claim_timeout * 3);
  EXPECT_EQ(View(dev).state, "in-session");
  // The session's end ends a one-session lease and frees the device at once.
  S().SessionEnded(now_, 1, {"tok2", 0, ""});
  Run();
  EXPECT_EQ(View(dev).state, "free");
}

TEST_F(SchedulerTest, MultiSessionLeaseOutlivesItsSessions) {
  std::string dev = AddDevice(1);
  auto req = Req();
  req.multi_session = true;
  S().Request(now_, 10, 1, req);
  Run();
  Advance(options_.claim_timeout * 2);  // no session yet: a hold is not "unclaimed"
  EXPECT_EQ(View(dev).state, "leased");
  ASSERT_TRUE(S().SessionStarted(now_, 1, "tok1").ok());
  S().SessionEnded(now_, 1, {"tok1", 0, ""});
  Run();
  const auto& v = View(dev);
  EXPECT_EQ(v.state, "leased");
  EXPECT_EQ(v.holder, req.holder);
}

TEST_F(SchedulerTest, ClientDisconnectReturnsTheDeviceAndDropsItsRequests) {
  std::string dev = AddDevice(1);
  auto req = Req();
  req.multi_session = true;
  S().Request(now_, 10, 1, req);
  S().Request(now_, 10, 2, req);  // queued behind its own lease
  S().Request(now_, 11, 1, req);
  Run();
  S().ClientDisconnected(now_, 10);
  auto actions = Run();
  EXPECT_EQ(GrantedConns(actions), (std::vector<uint64_t>{11}));
  auto ended = OfKind(actions, Kind::kLeaseEnded);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].outcome, "client disconnected");
}

// The client leaves between the grant's token push and the server's ack: the lease is revoked
// quietly and the device goes back to the pool. (The lease used to be erased before its device
// name was read: a use after free that ASan and fuzz_tvm_tracker caught.)
TEST_F(SchedulerTest, ClientGoneBeforeTheServerAckedRevokesTheGrantQuietly) {
  std::string dev = AddDevice(1);
  ack_ = false;
  S().Request(now_, 10, 1, Req());
  auto pushed = OfKind(Run(), Kind::kPushToken);
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(View(dev).state, "granting");
  S().ClientDisconnected(now_, 10);
  auto actions = Run();
  auto revoked = OfKind(actions, Kind::kPushToken);
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_EQ(revoked[0].conn, 1u);
  EXPECT_EQ(revoked[0].device, dev);
  EXPECT_TRUE(revoked[0].token.empty());
  EXPECT_TRUE(OfKind(actions, Kind::kGrant).empty());
  EXPECT_TRUE(OfKind(actions, Kind::kLeaseEnded).empty()) << "a lease never started";
  EXPECT_EQ(View(dev).state, "free");
  ack_ = true;
  S().Request(now_, 11, 1, Req());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{11}));
}

// A server re-registers while a grant's token is on its way to it. Without the token it requeues
// the request and a late ack of the old token starts nothing (fuzz_scheduler found that ack
// starting a second lease on the device beside the next grant's); with it, the registration
// confirms the grant.
TEST_F(SchedulerTest, ReRegistrationWithoutAnInFlightTokenRequeuesItsRequest) {
  std::string dev = AddDevice(1);
  ack_ = false;
  S().Request(now_, 10, 1, Req());
  ASSERT_EQ(OfKind(Run(), Kind::kPushToken).size(), 1u);  // tok1, not acked
  AddDevice(1);                                           // the same server, without tok1
  auto pushed = OfKind(Run(), Kind::kPushToken);
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].token, "tok2") << "the requeued request is granted again";
  S().TokenAcked(now_, 1, "tok1");  // late, stale
  auto actions = Run();
  EXPECT_TRUE(OfKind(actions, Kind::kLeaseStarted).empty()) << "a stale ack started a lease";
  EXPECT_TRUE(OfKind(actions, Kind::kGrant).empty());
  S().TokenAcked(now_, 1, "tok2");
  actions = Run();
  EXPECT_EQ(GrantedConns(actions), (std::vector<uint64_t>{10}));
  ASSERT_EQ(OfKind(actions, Kind::kLeaseStarted).size(), 1u);
  EXPECT_EQ(S().Snap(now_).leases_active, 1u);
}

TEST_F(SchedulerTest, ReRegistrationWithAnInFlightTokenConfirmsTheGrant) {
  std::string dev = AddDevice(1);
  ack_ = false;
  S().Request(now_, 10, 1, Req());
  ASSERT_EQ(OfKind(Run(), Kind::kPushToken).size(), 1u);
  AddDevice(1, "rpi4", {}, "tok1");  // it got tok1 before its connection dropped
  auto actions = Run();
  EXPECT_EQ(GrantedConns(actions), (std::vector<uint64_t>{10}));
  EXPECT_TRUE(OfKind(actions, Kind::kPushToken).empty());
  EXPECT_EQ(View(dev).holder, "p0");
}

TEST_F(SchedulerTest, QueueTimeoutFailsTheRequest) {
  AddDevice(1);
  S().Request(now_, 10, 1, Req());
  auto req = Req();
  req.queue_timeout_ms = 2000;
  S().Request(now_, 11, 9, req);
  Run();
  Advance(2s);
  auto fails = OfKind(Run(), Kind::kFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].conn, 11u);
  EXPECT_EQ(fails[0].status.code(), ErrorCode::kTimeout);
}

TEST_F(SchedulerTest, ReportsARequestNoRegisteredDeviceCouldEverMatch) {
  AddDevice(1, "rpi4", {{"soc", "bcm2711"}});
  auto req = Req();
  req.constraints = {"soc=bcm2712"};
  S().Request(now_, 10, 1, req);
  auto fails = OfKind(Run(), Kind::kFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].status.code(), ErrorCode::kNoDevice);
  S().Request(now_, 10, 2, Req(0, "jetson"));
  fails = OfKind(Run(), Kind::kFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_NE(fails[0].status.message().find("no device is registered"), std::string::npos);
  // A busy but matching device is not "impossible": the request waits.
  req.constraints = {"soc=bcm2711", "memory_mb>=2048", "+neon", "arch!=x86_64"};
  S().Request(now_, 10, 3, req);
  S().Request(now_, 10, 4, req);
  auto actions = Run();
  EXPECT_TRUE(OfKind(actions, Kind::kFail).empty());
  EXPECT_EQ(OfKind(actions, Kind::kGrant).size(), 1u);
  EXPECT_EQ(OfKind(actions, Kind::kQueueUpdate).size(), 1u);
}

TEST_F(SchedulerTest, ImpossibleRequestsWaitDuringTheStartupGrace) {
  options_.startup_grace = 10s;
  S().Request(now_, 10, 1, Req());
  EXPECT_TRUE(OfKind(Run(), Kind::kFail).empty());
  AddDevice(1);
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{10}));
}

TEST_F(SchedulerTest, RejectsMalformedConstraints) {
  AddDevice(1);
  auto req = Req();
  req.constraints = {"memory_mb>=lots"};
  S().Request(now_, 10, 1, req);
  auto fails = OfKind(Run(), Kind::kFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].status.code(), ErrorCode::kInvalidArgument);
}

TEST_F(SchedulerTest, RejectsConstraintsOnNumbersThatAreNotFinite) {
  AddDevice(1);
  for (const char* c : {"cores>=nan", "cores<=inf", "memory_mb>=-nan"}) {
    auto req = Req();
    req.constraints = {c};
    S().Request(now_, 10, 1, req);
    auto fails = OfKind(Run(), Kind::kFail);
    ASSERT_EQ(fails.size(), 1u) << c;
    EXPECT_EQ(fails[0].status.code(), ErrorCode::kInvalidArgument) << c;
  }
}

TEST_F(SchedulerTest, MatchesTagsAndAttributes) {
  msg::DeviceInfo info;
  info.arch = "x86_64";
  info.cores = 16;
  info.cpu_features = {"avx2", "avx512f"};
  std::map<std::string, std::string> tags{{"rack", "b"}};
  EXPECT_TRUE(Scheduler::Matches(tags, info, {"rack=b", "cores>=8", "+avx512f"}));
  EXPECT_FALSE(Scheduler::Matches(tags, info, {"cores<=8"}));
  EXPECT_FALSE(Scheduler::Matches(tags, info, {"+sve"}));
  EXPECT_FALSE(Scheduler::Matches(tags, info, {"rack!=b"}));
  EXPECT_FALSE(Scheduler::Matches(tags, info, {"gpu_arch=sm_90"}));
}

TEST_F(SchedulerTest, DropsADeviceWhoseHeartbeatStops) {
  std::string dev = AddDevice(1);
  AddDevice(2);
  conns_ = {2};
  Advance(5s);  // device 1 silent for 5 s
  auto closes = OfKind(Run(), Kind::kCloseConn);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(closes[0].conn, 1u);
  EXPECT_EQ(S().Snap(now_).devices.size(), 1u);
}

TEST_F(SchedulerTest, LostDeviceUnderAGrantNotYetConfirmedRequeuesTheRequest) {
  AddDevice(1);
  ack_ = false;
  S().Request(now_, 10, 1, Req());
  Run();
  S().DeviceDisconnected(now_, 1);
  ack_ = true;
  Run();
  AddDevice(2);
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{10}));
}

TEST_F(SchedulerTest, QuarantinesAFlakyDeviceAndReadmitsItAfterASelfCheck) {
  options_.quarantine_after = 3;
  std::string dev = AddDevice(1);
  for (int i = 0; i < 3; ++i) {
    S().Request(now_, 10, i, Req());
    auto g = OfKind(Run(), Kind::kGrant);
    ASSERT_EQ(g.size(), 1u) << "round " << i;
    ASSERT_TRUE(
        S().Release(now_, {g[0].grant.lease_token, uint8_t(msg::Outcome::kUnreachable), "refused"})
            .ok());
    Run();
  }
  EXPECT_EQ(View(dev).state, "quarantined");
  S().Request(now_, 10, 9, Req());
  EXPECT_TRUE(GrantedConns(Run()).empty()) << "a quarantined device is never granted";
  Advance(options_.self_check_interval);
  auto checks = OfKind(Run(), Kind::kSelfCheck);
  ASSERT_EQ(checks.size(), 1u);
  S().SelfCheckResult(now_, dev, Status(ErrorCode::kDisconnected, "no answer"));
  Run();
  EXPECT_EQ(View(dev).state, "quarantined");
  Advance(options_.self_check_interval);
  ASSERT_EQ(OfKind(Run(), Kind::kSelfCheck).size(), 1u);
  S().SelfCheckResult(now_, dev, Status::Ok());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{10}));
}

TEST_F(SchedulerTest, SuccessBetweenFailuresResetsTheCount) {
  options_.quarantine_after = 2;
  std::string dev = AddDevice(1);
  auto cycle = [&](msg::Outcome outcome) {
    S().Request(now_, 10, 1, Req());
    auto g = OfKind(Run(), Kind::kGrant);
    ASSERT_EQ(g.size(), 1u);
    ASSERT_TRUE(S().SessionStarted(now_, 1, g[0].grant.lease_token).ok());
    S().SessionEnded(now_, 1, {g[0].grant.lease_token, uint8_t(outcome), ""});
    Run();
  };
  cycle(msg::Outcome::kInfraFailure);
  cycle(msg::Outcome::kOk);
  cycle(msg::Outcome::kInfraFailure);
  cycle(msg::Outcome::kUserError);  // the user's kernel crashing says nothing about the board
  EXPECT_EQ(View(dev).state, "free");
  cycle(msg::Outcome::kInfraFailure);
  EXPECT_EQ(View(dev).state, "quarantined");
}

TEST_F(SchedulerTest, DrainKeepsTheCurrentLeaseButGrantsNoMore) {
  std::string dev = AddDevice(1);
  S().Request(now_, 10, 1, Req());
  Run();
  ASSERT_TRUE(S().Admin(now_, "drain", dev).ok());
  S().Request(now_, 11, 1, Req());
  Run();
  EXPECT_EQ(View(dev).holder, "p0");
  ASSERT_TRUE(S().Release(now_, {"tok1", 0, ""}).ok());
  EXPECT_TRUE(GrantedConns(Run()).empty());
  EXPECT_EQ(View(dev).state, "drained");
  ASSERT_TRUE(S().Admin(now_, "undrain", dev).ok());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{11}));
}

TEST_F(SchedulerTest, KickEndsTheLeaseAndRevokesTheToken) {
  std::string dev = AddDevice(1);
  S().Request(now_, 10, 1, Req());
  Run();
  ASSERT_TRUE(S().Admin(now_, "kick", dev).ok());
  auto actions = Run();
  auto pushes = OfKind(actions, Kind::kPushToken);
  ASSERT_FALSE(pushes.empty());
  EXPECT_TRUE(pushes.back().token.empty());
  EXPECT_EQ(OfKind(actions, Kind::kLeaseEnded)[0].outcome, "kicked by an admin");
  EXPECT_FALSE(S().Admin(now_, "kick", dev).ok());
  EXPECT_FALSE(S().Admin(now_, "reboot", dev).ok());
  EXPECT_FALSE(S().Admin(now_, "drain", "nosuch:1").ok());
}

TEST_F(SchedulerTest, RestoredLeaseIsNotHandedToSomeoneElse) {
  LeaseRecord r{"old-token",       "10.0.0.1:9090",      "rpi4",  "ci",
                unix_base_ - 1000, unix_base_ + 600'000, 600'000, true};
  S().RestoreLease(now_, r, unix_base_);
  AddDevice(1, "rpi4", {}, "old-token");  // the server still holds the token
  S().Request(now_, 20, 1, Req());
  auto actions = Run();
  EXPECT_TRUE(GrantedConns(actions).empty());
  EXPECT_EQ(View("10.0.0.1:9090").state, "leased");
  // The holder re-attaches with its token; the lease goes on.
  auto info = S().Renew(now_, 30, {"old-token", 0});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->address, "10.0.0.1:9090");
  Advance(options_.reattach_window * 2);
  EXPECT_EQ(View("10.0.0.1:9090").holder, "ci");
  // Released: the waiting request gets the device.
  ASSERT_TRUE(S().Release(now_, {"old-token", 0, ""}).ok());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{20}));
}

TEST_F(SchedulerTest, RestoredLeaseEndsWhenItsHolderDoesNotReattach) {
  LeaseRecord r{"old-token", "10.0.0.1:9090",      "rpi4",  "ci",
                unix_base_,  unix_base_ + 600'000, 600'000, true};
  S().RestoreLease(now_, r, unix_base_);
  AddDevice(1, "rpi4", {}, "old-token");
  S().Request(now_, 20, 1, Req());
  Run();
  Advance(options_.reattach_window);
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{20}));
}

TEST_F(SchedulerTest, RestoredLeaseEndsWhenTheServerLostItsToken) {
  LeaseRecord r{"old-token", "10.0.0.1:9090",      "rpi4",  "ci",
                unix_base_,  unix_base_ + 600'000, 600'000, true};
  S().RestoreLease(now_, r, unix_base_);
  AddDevice(1, "rpi4", {}, "");  // the server restarted too
  S().Request(now_, 20, 1, Req());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{20}));
  EXPECT_FALSE(S().Renew(now_, 30, {"old-token", 0}).ok());
}

TEST_F(SchedulerTest, RestoredOneSessionGrantNobodyClaimedGoesBackToThePool) {
  // A `crosstune run` grant (multi_session false) of 30 minutes, not yet claimed at the restart.
  LeaseRecord r{"old-token", "10.0.0.1:9090",        "rpi4",    "ci",
                unix_base_,  unix_base_ + 1'800'000, 1'800'000, false};
  S().RestoreLease(now_, r, unix_base_);
  AddDevice(1, "rpi4", {}, "old-token");  // the server holds the token; no session runs
  S().Request(now_, 20, 1, Req());
  EXPECT_TRUE(GrantedConns(Run()).empty());
  Advance(options_.reattach_window);
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{20}));
}

TEST_F(SchedulerTest, RestoredOneSessionGrantWithItsSessionRunningIsKept) {
  LeaseRecord r{"old-token", "10.0.0.1:9090",        "rpi4",    "ci",
                unix_base_,  unix_base_ + 1'800'000, 1'800'000, false};
  S().RestoreLease(now_, r, unix_base_);
  msg::Register reg;
  reg.key = "rpi4";
  reg.lease_token = "old-token";
  reg.session_active = true;
  ASSERT_TRUE(S().RegisterDevice(now_, 1, reg, "10.0.0.1:9090").ok());
  conns_.insert(1);
  S().Request(now_, 20, 1, Req());
  Run();
  Advance(options_.reattach_window * 2);
  EXPECT_TRUE(GrantedConns(Run()).empty());
  EXPECT_EQ(View("10.0.0.1:9090").holder, "ci");
}

TEST_F(SchedulerTest, RestoredLeaseAlreadyExpiredIsClosedInHistory) {
  LeaseRecord r{"old-token",         "10.0.0.1:9090", "rpi4",  "ci",
                unix_base_ - 10'000, unix_base_ - 1,  600'000, true};
  S().RestoreLease(now_, r, unix_base_);
  auto ended = OfKind(Run(), Kind::kLeaseEnded);
  ASSERT_EQ(ended.size(), 1u);
  AddDevice(1);
  S().Request(now_, 20, 1, Req());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{20}));
}

TEST_F(SchedulerTest, SnapshotCountsWaitTimeAndUtilisation) {
  std::string dev = AddDevice(1);
  S().Request(now_, 10, 1, Req());
  S().Request(now_, 11, 1, Req());
  Run();
  Advance(4s);
  S().Heartbeat(now_, 1, {false, "tok1"});
  ASSERT_TRUE(S().Release(now_, {"tok1", 0, ""}).ok());
  Run();
  auto snap = S().Snap(now_);
  ASSERT_EQ(snap.keys.size(), 1u);
  EXPECT_EQ(snap.keys[0].grants, 2u);
  EXPECT_DOUBLE_EQ(snap.keys[0].wait_seconds_max, 4.0);
  ASSERT_EQ(snap.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(snap.devices[0].busy_seconds, 4.0);
  EXPECT_DOUBLE_EQ(snap.devices[0].utilisation, 1.0);
}

// Idle devices are offered least recently freed first, then in registration order, whatever
// their addresses in memory: devices 5 and 6 register where 1 and 3 were freed.
TEST_F(SchedulerTest, IdleDevicesAreOfferedInRegistrationOrder) {
  for (uint64_t c : {1, 2, 3, 4}) AddDevice(c);
  S().DeviceDisconnected(now_, 1);
  S().DeviceDisconnected(now_, 3);
  conns_.erase(1);
  conns_.erase(3);
  AddDevice(5);
  AddDevice(6);
  Run();
  std::vector<std::string> granted;
  for (uint32_t id = 1; id <= 4; ++id) {
    auto r = Req();
    r.multi_session = true;
    S().Request(now_, 100 + id, id, r);
    for (const auto& g : OfKind(Run(), Kind::kGrant)) granted.push_back(g.grant.device);
  }
  EXPECT_EQ(granted, (std::vector<std::string>{"10.0.0.2:9090", "10.0.0.4:9090", "10.0.0.5:9090",
                                               "10.0.0.6:9090"}));
}

// Holder a holds both devices and waits for a third; b then asks for one. When a device comes
// back, the priority policy grants in arrival order (a), fair-share to the holder with fewer (b).
class GrantPolicySchedulerTest : public SchedulerTest,
                                 public ::testing::WithParamInterface<const char*> {};

TEST_P(GrantPolicySchedulerTest, FreedDeviceGoesAsThePolicySays) {
  options_.policy = GetParam();
  AddDevice(1);
  AddDevice(2);
  auto as = [&](const std::string& holder) {
    auto r = Req();
    r.holder = holder;
    r.multi_session = true;
    return r;
  };
  S().Request(now_, 10, 1, as("a"));
  S().Request(now_, 10, 2, as("a"));
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{10, 10}));
  S().Request(now_, 10, 3, as("a"));
  S().Request(now_, 20, 1, as("b"));
  Run();
  auto snap = S().Snap(now_);
  EXPECT_EQ(snap.policy, GetParam());
  ASSERT_EQ(snap.keys.size(), 1u);
  ASSERT_EQ(snap.keys[0].queue.size(), 2u);
  bool fair = std::string(GetParam()) == "fair-share";
  EXPECT_EQ(snap.keys[0].queue[0].holder, fair ? "b" : "a");
  ASSERT_TRUE(S().Release(now_, {"tok1", 0, ""}).ok());
  EXPECT_EQ(GrantedConns(Run()), (std::vector<uint64_t>{fair ? 20u : 10u}));
}

INSTANTIATE_TEST_SUITE_P(Policies, GrantPolicySchedulerTest,
                         ::testing::Values("priority", "fair-share"));

TEST_F(SchedulerTest, UnknownPolicyIsRefusedAtConstruction) {
  options_.policy = "lottery";
  EXPECT_THROW(S(), std::invalid_argument);
}

}  // namespace
}  // namespace crosstune::tracker
