// TVM's tracker protocol over the real Scheduler, without sockets: messages go in through
// TvmPeers::OnInput and replies come out through its send hook, as the tracker wires them.
#include "tvm_peers.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace crosstune::tracker {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class TvmPeersTest : public ::testing::Test {
 protected:
  TvmPeersTest() : now_(TimePoint{} + 1000h) {
    SchedulerOptions so;
    so.startup_grace = 0ms;
    so.default_lease = 60s;
    sched_ = std::make_unique<Scheduler>(so, now_);
    TvmOptions o;
    o.allow = true;
    TvmPeers::Hooks hooks;
    hooks.send = [this](uint64_t conn, std::string bytes) { sent_[conn] += bytes; };
    hooks.close = [this](uint64_t conn, const std::string&) { closed_.push_back(conn); };
    hooks.drain = [this] { Drain(); };
    tvm_ = std::make_unique<TvmPeers>(io_, *sched_, o, std::move(hooks));
  }

  // What the tracker does with the scheduler's actions.
  void Drain() {
    while (sched_->HasActions()) {
      for (Action& a : sched_->TakeActions()) {
        if (tvm_conns_.count(a.conn) && tvm_->Execute(now_, a)) continue;
        if (a.kind == Action::Kind::kGrant) sent_[a.conn] += tvm_->EncodeGrant(a);
        if (a.kind == Action::Kind::kCloseConn) closed_.push_back(a.conn);
        if (a.kind == Action::Kind::kFail) failed_[a.conn] = a.status.message();
      }
    }
  }

  void Open(uint64_t conn, const std::string& ip = "10.0.0.1") {
    tvm_->Opened(conn, boost::asio::ip::make_address(ip), 40000);
    tvm_conns_.insert(conn);
  }
  Status Send(uint64_t conn, const json& msg) {
    std::string bytes = tvm::EncodeMessage(msg);
    auto used = tvm_->OnInput(now_, conn, bytes);
    Drain();
    if (!used.ok()) return used.status();
    EXPECT_EQ(*used, bytes.size());
    return Status::Ok();
  }
  // The replies sent to `conn` since the last call, decoded.
  std::vector<json> Replies(uint64_t conn) {
    std::vector<json> out;
    std::string& b = sent_[conn];
    size_t at = 0;
    while (b.size() - at >= 4) {
      uint32_t len = 0;
      for (int i = 0; i < 4; ++i) len |= uint32_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
      out.push_back(json::parse(b.substr(at + 4, len)));
      at += 4 + len;
    }
    b.clear();
    return out;
  }
  // A TVM server on `conn` at 10.0.0.1:`port` offering match key `matchkey`.
  void Server(uint64_t conn, int port, const std::string& matchkey,
              const std::string& key = "cpu") {
    Open(conn);
    ASSERT_TRUE(Send(conn, {5, {{"key", "server:" + key}, {"addr", {nullptr, port}}}}).ok());
    ASSERT_TRUE(Send(conn, {3, key, {port, matchkey}, nullptr}).ok());
    ASSERT_EQ(Replies(conn), (std::vector<json>{0, 0}));
  }

  TimePoint now_;
  boost::asio::io_context io_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<TvmPeers> tvm_;
  std::set<uint64_t> tvm_conns_;
  std::map<uint64_t, std::string> sent_;
  std::map<uint64_t, std::string> failed_;
  std::vector<uint64_t> closed_;
};

TEST_F(TvmPeersTest, GrantsTheServersHostPortAndMatchKey) {
  Server(1, 9091, "cpu:0.25");
  Open(2, "10.0.0.2");
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  EXPECT_EQ(Replies(2), (std::vector<json>{{0, {"10.0.0.1", 9091, "cpu:0.25"}}}));
  // The key is out: the server's poll no longer lists it.
  ASSERT_TRUE(Send(1, {7}).ok());
  EXPECT_EQ(Replies(1), (std::vector<json>{json::array()}));
  auto snap = sched_->Snap(now_);
  ASSERT_EQ(snap.devices.size(), 1u);
  EXPECT_EQ(snap.devices[0].protocol, Protocol::kTvm);
  EXPECT_EQ(snap.devices[0].state, "in-session");
}

TEST_F(TvmPeersTest, AWaitingRequestIsGrantedWhenTheServerOffersAFreshKey) {
  Server(1, 9091, "cpu:0.25");
  Open(2);
  Open(3);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  ASSERT_TRUE(Send(3, {4, "cpu", "", 1}).ok());
  EXPECT_EQ(Replies(2).size(), 1u);
  EXPECT_TRUE(Replies(3).empty());  // waits: the only server's key is out
  ASSERT_TRUE(Send(1, {3, "cpu", {9091, "cpu:0.5"}, nullptr}).ok());
  EXPECT_EQ(Replies(3), (std::vector<json>{{0, {"10.0.0.1", 9091, "cpu:0.5"}}}));
}

TEST_F(TvmPeersTest, ALeaseThatRunsOutNeverHandsOutTheSameKeyTwice) {
  Server(1, 9091, "cpu:0.25");
  Open(2);
  Open(3);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  ASSERT_TRUE(Send(3, {4, "cpu", "", 1}).ok());
  EXPECT_EQ(Replies(2).size(), 1u);
  now_ += 61s;  // past the lease (not the queue timeout): the lease ends, but the server's key is
                // still out
  sched_->Tick(now_);
  Drain();
  EXPECT_TRUE(Replies(3).empty());
  EXPECT_EQ(sched_->Snap(now_).devices.at(0).state, "busy");
  ASSERT_TRUE(Send(1, {3, "cpu", {9091, "cpu:0.5"}, nullptr}).ok());
  EXPECT_EQ(Replies(3), (std::vector<json>{{0, {"10.0.0.1", 9091, "cpu:0.5"}}}));
}

TEST_F(TvmPeersTest, HigherPriorityIsServedFirst) {
  Server(1, 9091, "cpu:1");
  Open(2);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());  // takes the server
  Open(3);
  Open(4);
  ASSERT_TRUE(Send(3, {4, "cpu", "", 1}).ok());
  ASSERT_TRUE(Send(4, {4, "cpu", "", 7}).ok());
  ASSERT_TRUE(Send(1, {3, "cpu", {9091, "cpu:2"}, nullptr}).ok());
  EXPECT_TRUE(Replies(3).empty());
  EXPECT_EQ(Replies(4).size(), 1u);
}

TEST_F(TvmPeersTest, AClientThatClosesLeavesTheQueue) {
  Server(1, 9091, "cpu:1");
  Open(2);
  Open(3);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  ASSERT_TRUE(Send(3, {4, "cpu", "", 1}).ok());
  ASSERT_EQ(sched_->Snap(now_).keys[0].queue.size(), 1u);
  tvm_->Closed(now_, 3, "test");
  Drain();
  EXPECT_TRUE(sched_->Snap(now_).keys[0].queue.empty());
}

TEST_F(TvmPeersTest, NeverMixesTvmAndCrosstuneDevices) {
  msg::Register reg;
  reg.key = "cpu";
  ASSERT_TRUE(sched_->RegisterDevice(now_, 50, reg, "10.0.0.9:9090").ok());
  Open(2);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  auto r = Replies(2);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0], -1);
  EXPECT_EQ(r[0][1], "no TVM device is registered with key 'cpu'");

  Server(1, 9091, "cpu:1", "tvmonly");
  msg::DeviceRequest req;
  req.key = "tvmonly";
  sched_->Request(now_, 60, 1, req);
  Drain();
  EXPECT_EQ(failed_[60], "no device is registered with key 'tvmonly'");
  // A TVM server cannot take over a crosstune device's name.
  Open(3, "10.0.0.9");
  EXPECT_FALSE(Send(3, {3, "cpu", {9090, "cpu:1"}, nullptr}).ok());
}

TEST_F(TvmPeersTest, SummaryListsTvmServersAndQueuesAsTvmsTrackerDoes) {
  Server(1, 9091, "cpu:1");
  ASSERT_TRUE(Send(1, {6}).ok());
  auto r = Replies(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0], 0);
  EXPECT_EQ(r[0][1]["queue_info"], (json{{"cpu", {{"free", 1}, {"pending", 0}}}}));
  EXPECT_EQ(r[0][1]["server_info"],
            (json::array({{{"key", "server:cpu"}, {"addr", {"10.0.0.1", 9091}}}})));
}

TEST_F(TvmPeersTest, AcceptsAPortSentAsAString) {
  Open(1);
  ASSERT_TRUE(Send(1, {3, "cpu", {"9091", "cpu:1"}, nullptr}).ok());
  EXPECT_EQ(sched_->Snap(now_).devices.at(0).name, "10.0.0.1:9091");
}

// A PUT names the address the tracker then probes on a timer: any host:port would make the
// tracker a port scanner for whoever asks (the device's presence tells whether it answered).
TEST_F(TvmPeersTest, RegistersOnlyTheServersOwnAddressByDefault) {
  Open(1);  // from 10.0.0.1
  Status s = Send(1, {3, "cpu", {9091, "cpu:1"}, "10.9.9.9"});
  EXPECT_EQ(s.code(), ErrorCode::kProtocolError);
  EXPECT_NE(s.message().find("custom_addr '10.9.9.9' is not the address the server connects "
                             "from (10.0.0.1)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--tvm-allow-custom-addr"), std::string::npos);
  EXPECT_TRUE(sched_->Snap(now_).devices.empty());
  Open(2);
  EXPECT_FALSE(Send(2, {3, "cpu", {9091, "cpu:1"}, "board7.lab"}).ok());
  // Its own address, spelled out, is what a missing one means.
  Open(3);
  ASSERT_TRUE(Send(3, {3, "cpu", {9091, "cpu:1"}, "10.0.0.1"}).ok());
  EXPECT_EQ(sched_->Snap(now_).devices.at(0).name, "10.0.0.1:9091");
}

TEST(TvmCustomAddrTest, OtherAddressesOnlyWhenAllowedAndWithinTheNetworks) {
  boost::asio::io_context io;
  Scheduler sched(SchedulerOptions{}, TimePoint{});
  TvmOptions o;
  o.allow = true;
  o.allow_custom_addr = true;
  Status no_networks = TvmPeers(io, sched, o, {}).Init();
  EXPECT_NE(no_networks.message().find("--tvm-allow-custom-addr needs --tvm-network"),
            std::string::npos)
      << no_networks.ToString();

  o.networks = {"10.0.0.0/16"};
  TvmPeers::Hooks hooks;
  hooks.send = [](uint64_t, std::string) {};
  hooks.drain = [] {};
  TvmPeers peers(io, sched, o, hooks);
  ASSERT_TRUE(peers.Init().ok());
  auto put = [&](uint64_t conn, const json& custom_addr) {
    peers.Opened(conn, boost::asio::ip::make_address("10.0.0.1"), 40000);
    std::string bytes = tvm::EncodeMessage({3, "cpu", {9091, "cpu:1"}, custom_addr});
    return peers.OnInput(TimePoint{}, conn, bytes).status();
  };
  EXPECT_TRUE(put(1, "10.0.7.7").ok());
  EXPECT_NE(put(2, "10.1.0.1").message().find("is not within --tvm-network"), std::string::npos);
  EXPECT_NE(put(3, "board7.lab").message().find("is not an IP address"), std::string::npos);
  auto snap = sched.Snap(TimePoint{});
  ASSERT_EQ(snap.devices.size(), 1u);
  EXPECT_EQ(snap.devices[0].name, "10.0.7.7:9091");
}

// 2^32 + 1 was cut down to 1 (PING) and answered.
TEST_F(TvmPeersTest, RefusesMessageCodesPastTheirRange) {
  Open(1);
  for (const char* body : {"[4294967297]", "[-4294967295]", "[18446744073709551615]", "[256]"}) {
    const std::string bytes = tvm::EncodeInt(static_cast<int32_t>(std::strlen(body))) + body;
    Status s = tvm_->OnInput(now_, 1, bytes).status();
    EXPECT_EQ(s.code(), ErrorCode::kProtocolError) << body;
    const std::string code(body + 1, std::strlen(body) - 2);
    EXPECT_NE(s.message().find("unknown code " + code), std::string::npos) << s.message();
  }
  EXPECT_TRUE(Replies(1).empty());
}

// Forty servers, each with an info near its 64 KiB limit: one SUMMARY would take 2.6 MB.
TEST_F(TvmPeersTest, BoundsTheSummary) {
  const std::string filler(60'000, 'x');
  for (uint64_t conn = 1; conn <= 40; ++conn) {
    Open(conn);
    ASSERT_TRUE(
        Send(conn, {5, {{"key", "server:cpu"}, {"addr", {nullptr, 9000 + conn}}, {"note", filler}}})
            .ok());
  }
  Open(99);
  ASSERT_TRUE(Send(99, {6}).ok());
  const size_t reply_bytes = sent_[99].size();
  auto r = Replies(99);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_LE(reply_bytes, tvm::kMaxSummaryBytes + 4);
  EXPECT_GE(r[0][1]["server_info"].size(), 10u);
  EXPECT_LT(r[0][1]["server_info"].size(), 40u);
}

TEST_F(TvmPeersTest, RefusesBadMessagesWithANamedError) {
  Open(1);
  auto feed = [&](const std::string& bytes) { return tvm_->OnInput(now_, 1, bytes).status(); };
  auto len = [](int32_t v) { return tvm::EncodeInt(v); };
  EXPECT_EQ(feed(len(0)).code(), ErrorCode::kProtocolError);
  EXPECT_NE(feed(len((1 << 20) + 1)).message().find("out of range"), std::string::npos);
  EXPECT_NE(feed(len(3) + "[1,").message().find("not JSON: syntax error at byte 4"),
            std::string::npos);
  EXPECT_NE(feed(len(5) + "[\"\xff\"]").message().find("ill-formed UTF-8"), std::string::npos);
  EXPECT_NE(feed(len(4) + "[99]").message().find("unknown code 99"), std::string::npos);
  EXPECT_NE(feed(len(3) + "[3]").message().find("expected [3, key"), std::string::npos);
  EXPECT_NE(feed(tvm::EncodeMessage({3, "cpu", {0, "cpu:1"}, nullptr})).message().find("bad port"),
            std::string::npos);
}

// One 200 KB message nested 100,000 levels deep, under the 1 MiB message limit: the old handler
// copied the value (the UPDATE_INFO merge) or dumped it (a PUT's bad port) and overflowed the
// tracker's stack, taking the farm down. Each case runs in a forked child first (gtest's
// death-test machinery), so such a crash fails this test only.
TEST_F(TvmPeersTest, RefusesDeeplyNestedMessagesWithANamedError) {
  const std::string levels(100'000, '[');
  const std::string deep = levels + std::string(levels.size(), ']');
  uint64_t conn = 1;
  for (const std::string& body : {R"([5, {"key": "server:cpu", "addr": )" + deep + "}]",
                                  R"([3, "cpu", [)" + deep + R"(, "m"]])"}) {
    ASSERT_LT(body.size(), size_t{tvm::kMaxMessageBytes});
    const std::string bytes = tvm::EncodeInt(static_cast<int32_t>(body.size())) + body;
    Open(conn);
    EXPECT_EXIT(
        {
          (void)tvm_->OnInput(now_, conn, bytes);
          std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
    Status s = tvm_->OnInput(now_, conn, bytes).status();
    EXPECT_EQ(s.code(), ErrorCode::kProtocolError) << s.ToString();
    EXPECT_NE(s.message().find("JSON nested deeper than 64 levels at byte"), std::string::npos)
        << s.message();
    ++conn;
  }
}

TEST_F(TvmPeersTest, RefusesInfoThatGrowsPastItsLimit) {
  Server(1, 9091, "cpu:1");
  // Each update is well under the message limit, and new keys merge into the info.
  const std::string filler(4096, 'x');
  Status s;
  int sent = 0;
  for (; sent < 64 && s.ok(); ++sent) {
    s = Send(1, {5, {{"k" + std::to_string(sent), filler}}});
  }
  EXPECT_EQ(s.code(), ErrorCode::kProtocolError) << "accepted " << sent << " updates";
  EXPECT_NE(s.message().find("UPDATE_INFO: the merged info would take"), std::string::npos)
      << s.message();
  EXPECT_LE(sent, 17);
}

TEST_F(TvmPeersTest, WaitsForTheRestOfASplitMessage) {
  Open(1);
  std::string bytes = tvm::EncodeMessage({1});
  auto first = tvm_->OnInput(now_, 1, std::string_view(bytes).substr(0, 5));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 0u);
  auto all = tvm_->OnInput(now_, 1, bytes);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, bytes.size());
  EXPECT_EQ(Replies(1), (std::vector<json>{0}));
}

TEST_F(TvmPeersTest, ADrainedTvmServerIsNotGrantedUntilUndrained) {
  Server(1, 9091, "cpu:1");
  ASSERT_TRUE(sched_->Admin(now_, "drain", "10.0.0.1:9091").ok());
  Open(2);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  EXPECT_TRUE(Replies(2).empty());
  ASSERT_TRUE(sched_->Admin(now_, "undrain", "10.0.0.1:9091").ok());
  Drain();
  EXPECT_EQ(Replies(2), (std::vector<json>{{0, {"10.0.0.1", 9091, "cpu:1"}}}));
}

TEST_F(TvmPeersTest, KickClosesTheTvmServersTrackerConnection) {
  Server(1, 9091, "cpu:1");
  Open(2);
  ASSERT_TRUE(Send(2, {4, "cpu", "", 1}).ok());
  ASSERT_TRUE(sched_->Admin(now_, "kick", "10.0.0.1:9091").ok());
  Drain();
  EXPECT_EQ(closed_, (std::vector<uint64_t>{1}));
}

TEST(TvmAdmitTest, RefusesTvmPeersUnlessAllowedAndInTheNetworks) {
  boost::asio::io_context io;
  Scheduler sched(SchedulerOptions{}, TimePoint{});
  auto local = boost::asio::ip::make_address("127.0.0.1");
  TvmPeers off(io, sched, TvmOptions{}, {});
  EXPECT_NE(off.Admit(local).message().find("--allow-tvm"), std::string::npos);

  TvmOptions o;
  o.allow = true;
  o.networks = {"10.0.0.0/8", "fd00::/8"};
  TvmPeers limited(io, sched, o, {});
  ASSERT_TRUE(limited.Init().ok());
  EXPECT_FALSE(limited.Admit(local).ok());
  EXPECT_TRUE(limited.Admit(boost::asio::ip::make_address("10.1.2.3")).ok());
  EXPECT_TRUE(limited.Admit(boost::asio::ip::make_address("::ffff:10.1.2.3")).ok());
  EXPECT_TRUE(limited.Admit(boost::asio::ip::make_address("fd12::1")).ok());
  EXPECT_FALSE(limited.Admit(boost::asio::ip::make_address("fe80::1")).ok());

  o.networks = {"10.0.0.0/33"};
  EXPECT_FALSE(TvmPeers(io, sched, o, {}).Init().ok());
}

// TvmPeers with real port probes over loopback, on the real clock: the tracker as it runs, less
// its sockets to the peers.
class TvmProbeTest : public ::testing::Test {
 protected:
  void Start(bool allow_custom_addr, const std::string& network) {
    SchedulerOptions so;
    so.startup_grace = 0ms;
    sched_ = std::make_unique<Scheduler>(so, Now());
    TvmOptions o;
    o.allow = true;
    o.allow_custom_addr = allow_custom_addr;
    o.networks = {network};
    o.probe_interval = 1ms;
    o.probe_timeout = 5s;
    o.probe_failures = 2;
    TvmPeers::Hooks hooks;
    hooks.send = [this](uint64_t conn, std::string bytes) { sent_[conn] += bytes; };
    hooks.close = [this](uint64_t conn, const std::string&) { closed_.insert(conn); };
    hooks.drain = [this] { Drain(); };
    tvm_ = std::make_unique<TvmPeers>(io_, *sched_, o, std::move(hooks));
    ASSERT_TRUE(tvm_->Init().ok());
  }
  static TimePoint Now() { return std::chrono::steady_clock::now(); }
  void Drain() {
    while (sched_->HasActions()) {
      for (Action& a : sched_->TakeActions()) {
        if (tvm_->Execute(Now(), a)) continue;
        if (a.kind == Action::Kind::kGrant) sent_[a.conn] += tvm_->EncodeGrant(a);
        if (a.kind == Action::Kind::kCloseConn) closed_.insert(a.conn);
      }
    }
  }
  // What the tracker does with the peer's message; a refusal closes the connection.
  void Send(uint64_t conn, const json& msg) {
    if (closed_.count(conn)) return;
    std::string bytes = tvm::EncodeMessage(msg);
    auto used = tvm_->OnInput(Now(), conn, bytes);
    Drain();
    if (!used.ok()) closed_.insert(conn);
  }
  // One round of port probes, each run to its end.
  void ProbeRound() {
    tvm_->Tick(Now() + 1h);
    io_.restart();
    io_.run();
  }
  std::vector<std::string> Devices() {
    std::vector<std::string> names;
    for (const auto& d : sched_->Snap(Now()).devices) names.push_back(d.name);
    return names;
  }
  // A loopback port nothing listens on (bound, then closed).
  uint16_t ClosedPort() {
    boost::asio::ip::tcp::acceptor a(io_, {boost::asio::ip::make_address("127.0.0.1"), 0});
    uint16_t port = a.local_endpoint().port();
    a.close();
    return port;
  }

  boost::asio::io_context io_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<TvmPeers> tvm_;
  std::map<uint64_t, std::string> sent_;
  std::set<uint64_t> closed_;
};

// A PUT names a port the tracker then probes: if what the peer sees (replies, its connection
// closed) told whether the probes passed, any peer could scan the ports of the hosts it may
// name. Two peers naming a listening and a dead port see the same bytes, whatever the policy.
TEST_F(TvmProbeTest, APutIsAnsweredTheSameWhetherOrNotItsPortListens) {
  struct Policy {
    bool allow_custom_addr;
    std::string network;
    bool accepted;
  };
  for (const Policy& policy :
       {Policy{true, "127.0.0.0/8", true}, Policy{false, "127.0.0.0/8", false},
        Policy{true, "10.0.0.0/8", false}}) {
    SCOPED_TRACE(std::string(policy.allow_custom_addr ? "custom addresses in " : "no custom ") +
                 policy.network);
    sent_.clear();
    closed_.clear();
    Start(policy.allow_custom_addr, policy.network);
    boost::asio::ip::tcp::acceptor listening(io_, {boost::asio::ip::make_address("127.0.0.1"), 0});
    const uint16_t live = listening.local_endpoint().port(), dead = ClosedPort();
    // Both from 10.0.0.1, naming 127.0.0.1 as custom_addr.
    tvm_->Opened(1, boost::asio::ip::make_address("10.0.0.1"), 40001);
    tvm_->Opened(2, boost::asio::ip::make_address("10.0.0.1"), 40002);
    for (auto [conn, port] : {std::pair<uint64_t, uint16_t>{1, live}, {2, dead}}) {
      Send(conn, {5, {{"key", "server:cpu"}, {"addr", {nullptr, port}}}});
      Send(conn, {3, "cpu", {port, "cpu:1"}, "127.0.0.1"});
    }
    // The server polls for its key every 2 s, past the probes that fail for the dead port.
    for (int round = 0; round < 4; ++round) {
      ProbeRound();
      for (uint64_t conn : {uint64_t{1}, uint64_t{2}}) Send(conn, {7});
    }
    for (uint64_t conn : {uint64_t{1}, uint64_t{2}}) {
      Send(conn, {3, "cpu", {conn == 1 ? live : dead, "cpu:2"}, "127.0.0.1"});
      Send(conn, {7});
      Send(conn, {1});
    }
    EXPECT_EQ(sent_[1], sent_[2]);
    EXPECT_EQ(closed_.count(1), closed_.count(2));
    EXPECT_EQ(closed_.count(1), policy.accepted ? 0u : 1u);
    if (policy.accepted) {
      // Which is not to say the tracker hands out the dead one: it is out of the pool.
      EXPECT_EQ(Devices(), std::vector<std::string>{"127.0.0.1:" + std::to_string(live)});
      // A third peer claiming either address is refused alike, the dead one out of the pool
      // or not.
      tvm_->Opened(3, boost::asio::ip::make_address("10.0.0.1"), 40003);
      tvm_->Opened(4, boost::asio::ip::make_address("10.0.0.1"), 40004);
      Send(3, {3, "cpu", {live, "cpu:3"}, "127.0.0.1"});
      Send(4, {3, "cpu", {dead, "cpu:3"}, "127.0.0.1"});
      EXPECT_EQ(sent_[3], sent_[4]);
      EXPECT_EQ(closed_.count(3), 1u);
      EXPECT_EQ(closed_.count(4), 1u);
    }
  }
}

// Out of the pool for a port that stopped answering, a TVM server comes back once it answers
// again, and is granted.
TEST_F(TvmProbeTest, AServerWhosePortFailsItsProbesIsOutOfThePoolUntilOnePasses) {
  Start(false, "127.0.0.0/8");
  const uint16_t port = ClosedPort();
  const std::string device = "127.0.0.1:" + std::to_string(port);
  tvm_->Opened(1, boost::asio::ip::make_address("127.0.0.1"), 40001);
  Send(1, {3, "cpu", {port, "cpu:1"}, nullptr});
  EXPECT_EQ(Devices(), std::vector<std::string>{device});
  ProbeRound();
  EXPECT_EQ(Devices(), std::vector<std::string>{device});  // one failure is not enough
  ProbeRound();
  EXPECT_TRUE(Devices().empty());
  boost::asio::ip::tcp::acceptor back(io_);
  back.open(boost::asio::ip::tcp::v4());
  back.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true));
  back.bind({boost::asio::ip::make_address("127.0.0.1"), port});
  back.listen();
  ProbeRound();
  EXPECT_EQ(Devices(), std::vector<std::string>{device});
  tvm_->Opened(2, boost::asio::ip::make_address("127.0.0.1"), 40002);
  sent_[2].clear();
  Send(2, {4, "cpu", "client", 0});
  EXPECT_EQ(sent_[2], tvm::EncodeMessage({0, {"127.0.0.1", port, "cpu:1"}}));
  EXPECT_TRUE(closed_.empty());
}

}  // namespace
}  // namespace crosstune::tracker
