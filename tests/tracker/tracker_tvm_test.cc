// The TVM compatibility port of the real crosstune-tracker (the binary, on port 0) under hostile
// TVM peers. TVM's protocol has no authentication, so everything behind the port is bounded:
// JSON depth, connections, queued replies, the addresses the tracker probes, and every violation
// is logged. Each test ends by checking that the tracker still serves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <fstream>

#include "farm.h"

namespace crosstune::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int32_t kTrackerMagic = 0x2F271;

std::string Le32(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A TVM peer as TVM's own Python code is one: a blocking loopback socket, the magic, then
// [int32 length][JSON] messages each way.
class TvmPeer {
 public:
  // Connects from `source` (any 127.0.0.0/8 address serves as another peer address).
  explicit TvmPeer(uint16_t port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      Close();
    }
  }
  ~TvmPeer() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  uint16_t local_port() const {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
  }

  // Sends the magic; the tracker's answer: the magic echoed, or -1 when it refuses the peer.
  std::optional<int32_t> Hello() {
    if (!SendBytes(Le32(kTrackerMagic))) return std::nullopt;
    std::string b(4, '\0');
    if (!ReadExactly(b.data(), 4, 10s)) return std::nullopt;
    return static_cast<int32_t>(Decode(b.data()));
  }
  bool SendBytes(const std::string& b) {
    return ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  static std::string Message(const std::string& body) {
    return Le32(static_cast<uint32_t>(body.size())) + body;
  }
  bool Send(const json& j) { return SendBytes(Message(j.dump())); }
  std::optional<json> Read(std::chrono::milliseconds timeout = 10s) {
    auto body = ReadBody(timeout);
    if (!body) return std::nullopt;
    return json::parse(*body, nullptr, false);
  }
  // The next message's body, unparsed.
  std::optional<std::string> ReadBody(std::chrono::milliseconds timeout = 10s) {
    std::string head(4, '\0');
    if (!ReadExactly(head.data(), 4, timeout)) return std::nullopt;
    std::string body(Decode(head.data()), '\0');
    if (!ReadExactly(body.data(), body.size(), timeout)) return std::nullopt;
    return body;
  }
  // Whether the tracker closes the connection (what it sent before is skipped).
  bool ClosedByTracker(std::chrono::milliseconds timeout = 10s) {
    char buf[4096];
    for (;;) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
      ssize_t k = ::recv(fd_, buf, sizeof(buf), 0);
      if (k <= 0) return true;
    }
  }

 private:
  static uint32_t Decode(const char* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
    return v;
  }
  bool ReadExactly(char* p, size_t n, std::chrono::milliseconds timeout) {
    while (n > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
      ssize_t k = ::recv(fd_, p, n, 0);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  int fd_ = -1;
};

// A listening socket on `address`, port 0, standing for a TVM server's port.
class Listener {
 public:
  explicit Listener(const char* address) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, address, &a.sin_addr);
    socklen_t len = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd_, 8) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  uint16_t port() const { return port_; }
  // Whether someone connects within `timeout`.
  bool AcceptOne(std::chrono::milliseconds timeout) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) ::close(c);
    return c >= 0;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

std::string TrackerLog(Farm& farm) {
  std::ifstream log(farm.Path("tracker.log"));
  return std::string(std::istreambuf_iterator<char>(log), {});
}
bool LogHas(Farm& farm, const std::string& text) {
  return Eventually([&] { return TrackerLog(farm).find(text) != std::string::npos; });
}

// A crosstune client still gets the summary, and a TVM peer still its PING answered.
void ExpectServesNormally(Farm& farm) {
  auto s = farm.Summary();
  ASSERT_TRUE(s.is_object()) << "the tracker no longer answers crosstune clients";
  TvmPeer p(farm.tracker_port());
  ASSERT_EQ(p.Hello(), kTrackerMagic);
  ASSERT_TRUE(p.Send({1}));
  EXPECT_EQ(p.Read(), json(0));
}

// The tracker's resident memory, from /proc.
size_t RssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// Issue 25, point 1: one unauthenticated 200 KB message nested 100,000 levels deep overflowed
// the tracker's stack (the UPDATE_INFO merge copies the value) and took the farm down.
TEST(TrackerTvmTest, SurvivesADeeplyNestedMessage) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--allow-tvm"}));
  const std::string levels(100'000, '[');
  TvmPeer p(farm.tracker_port());
  ASSERT_EQ(p.Hello(), kTrackerMagic);
  ASSERT_TRUE(p.SendBytes(TvmPeer::Message(R"([5, {"key": "server:cpu", "addr": )" + levels +
                                           std::string(levels.size(), ']') + "}]")));
  EXPECT_TRUE(p.ClosedByTracker());
  ExpectServesNormally(farm);
  EXPECT_TRUE(LogHas(farm, "JSON nested deeper than 64 levels at byte")) << TrackerLog(farm);
}

// Point 3: TVM peers whose magic was accepted stayed counted as waiting for their handshake, so
// a handful of idle TVM clients from one address locked crosstune clients out of the tracker.
TEST(TrackerTvmTest, TvmPeersDoNotHoldHandshakeSlots) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--allow-tvm", "--max-handshakes-per-peer", "4"}));
  std::vector<std::unique_ptr<TvmPeer>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<TvmPeer>(farm.tracker_port()));
    ASSERT_EQ(idle.back()->Hello(), kTrackerMagic) << "TVM peer " << i;
  }
  ExpectServesNormally(farm);
}

// Point 3: TVM connections have limits of their own, per address and in total.
TEST(TrackerTvmTest, CapsTvmConnectionsOnTheirOwn) {
  Farm farm;
  ASSERT_TRUE(
      farm.StartTracker({"--allow-tvm", "--tvm-max-conns-per-peer", "3", "--tvm-max-conns", "4"}));
  std::vector<std::unique_ptr<TvmPeer>> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(std::make_unique<TvmPeer>(farm.tracker_port()));
    ASSERT_EQ(open.back()->Hello(), kTrackerMagic);
  }
  TvmPeer fourth(farm.tracker_port());
  EXPECT_EQ(fourth.Hello(), -1);
  EXPECT_TRUE(fourth.ClosedByTracker());
  EXPECT_TRUE(LogHas(farm, "too many TVM connections from 127.0.0.1 (3, --tvm-max-conns-per-peer)"))
      << TrackerLog(farm);

  open.push_back(std::make_unique<TvmPeer>(farm.tracker_port(), "127.0.0.2"));
  ASSERT_EQ(open.back()->Hello(), kTrackerMagic);
  TvmPeer fifth(farm.tracker_port(), "127.0.0.3");
  EXPECT_EQ(fifth.Hello(), -1);
  EXPECT_TRUE(LogHas(farm, "too many TVM connections (4, --tvm-max-conns)")) << TrackerLog(farm);

  // Crosstune clients are not counted; a closed TVM connection makes room for another.
  ASSERT_TRUE(farm.Summary().is_object());
  open.front().reset();
  EXPECT_TRUE(Eventually([&] {
    TvmPeer again(farm.tracker_port());
    return again.Hello() == kTrackerMagic;
  }));
}

// Point 4: one connection that sent 300 SUMMARY requests and never read took the tracker from
// 135 MB to 392 MB. Now the tracker stops reading from a peer whose replies queue up, and goes on
// once the peer reads: every request is still answered, in order.
TEST(TrackerTvmTest, StopsReadingFromAPeerThatDoesNotReadItsReplies) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--allow-tvm"}));
  // A server whose info makes each SUMMARY reply about 60 KB.
  TvmPeer server(farm.tracker_port());
  ASSERT_EQ(server.Hello(), kTrackerMagic);
  ASSERT_TRUE(server.Send(
      {5, {{"key", "server:cpu"}, {"addr", {nullptr, 9}}, {"note", std::string(60'000, 'x')}}}));
  ASSERT_EQ(server.Read(), json(0));
  ASSERT_TRUE(farm.Summary().is_object());
  const size_t rss_before = RssBytes(farm.tracker_pid());
  ASSERT_GT(rss_before, 0u);

  constexpr int kRequests = 2000;  // 120 MB of replies, were they all queued
  TvmPeer greedy(farm.tracker_port());
  ASSERT_EQ(greedy.Hello(), kTrackerMagic);
  std::string requests;
  for (int i = 0; i < kRequests; ++i) requests += TvmPeer::Message("[6]");
  ASSERT_TRUE(greedy.SendBytes(requests));  // 14 KB: all of it in the tracker's socket at once
  // Round trips through the tracker's event loop, after which it has read what it was going to.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(farm.Summary().is_object());
  const size_t rss_after = RssBytes(farm.tracker_pid());
  EXPECT_LT(rss_after, rss_before + (24u << 20))
      << "the tracker grew from " << rss_before << " to " << rss_after << " bytes";
  ExpectServesNormally(farm);

  // Every reply is a success ([0, summary]): the first and the last are parsed, the rest only
  // checked for that opening (parsing all 120 MB made the test 47 s long under ASan, not 10).
  int answered = 0;
  while (answered < kRequests) {
    auto body = greedy.ReadBody();
    if (!body || body->rfind("[0,", 0) != 0) break;
    if (answered == 0 || answered == kRequests - 1) {
      const json r = json::parse(*body, nullptr, false);
      if (!r.is_array() || r.size() != 2 || r[0] != 0) break;
    }
    ++answered;
  }
  EXPECT_EQ(answered, kRequests);
}

// Point 5: a TVM server's key and custom address reached the log unescaped (forged lines).
TEST(TrackerTvmTest, EscapesTvmNamesInTheLog) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--allow-tvm"}));
  TvmPeer server(farm.tracker_port());
  ASSERT_EQ(server.Hello(), kTrackerMagic);
  ASSERT_TRUE(server.Send({3, "k\nFORGED-KEY", {9, "k:1"}, nullptr}));
  EXPECT_EQ(server.Read(), json(0));
  TvmPeer other(farm.tracker_port());
  ASSERT_EQ(other.Hello(), kTrackerMagic);
  ASSERT_TRUE(other.Send({3, "cpu", {9, "cpu:1"}, "127.0.0.1\nFORGED-ADDR"}));
  EXPECT_TRUE(other.ClosedByTracker());
  ASSERT_TRUE(LogHas(farm, "k\\nFORGED-KEY")) << TrackerLog(farm);
  ASSERT_TRUE(LogHas(farm, "127.0.0.1\\nFORGED-ADDR")) << TrackerLog(farm);
  const std::string log = TrackerLog(farm);
  EXPECT_EQ(log.find("\nFORGED-"), std::string::npos) << log;
}

// Point 6: a PUT named any host:port and the tracker probed it on a timer, a port-scan oracle.
// It registers the server's own address only, unless --tvm-allow-custom-addr lets other IP
// addresses within --tvm-network in.
TEST(TrackerTvmTest, ProbesOnlyTheServersOwnAddressUnlessAllowed) {
  {
    Farm farm;
    ASSERT_TRUE(farm.StartTracker({"--allow-tvm"}));
    TvmPeer p(farm.tracker_port());
    ASSERT_EQ(p.Hello(), kTrackerMagic);
    ASSERT_TRUE(p.Send({3, "cpu", {22, "cpu:1"}, "127.0.0.2"}));
    EXPECT_TRUE(p.ClosedByTracker());
    EXPECT_TRUE(LogHas(farm, "custom_addr '127.0.0.2' is not the address the server connects from"))
        << TrackerLog(farm);
    auto s = farm.Summary();
    ASSERT_TRUE(s.is_object());
    EXPECT_TRUE(s["devices"].empty()) << s.dump();
  }
  // Allowed within the networks: the other address is registered and probed.
  Listener board("127.0.0.2");
  ASSERT_NE(board.port(), 0);
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--allow-tvm", "--tvm-allow-custom-addr", "--tvm-network",
                                 "127.0.0.0/8", "--tvm-probe-s", "1"}));
  TvmPeer p(farm.tracker_port());
  ASSERT_EQ(p.Hello(), kTrackerMagic);
  ASSERT_TRUE(p.Send({3, "cpu", {board.port(), "cpu:1"}, "127.0.0.2"}));
  EXPECT_EQ(p.Read(), json(0));
  EXPECT_TRUE(board.AcceptOne(20s)) << "the tracker never probed 127.0.0.2";
  TvmPeer outside(farm.tracker_port());
  ASSERT_EQ(outside.Hello(), kTrackerMagic);
  ASSERT_TRUE(outside.Send({3, "cpu", {22, "cpu:2"}, "10.1.2.3"}));
  EXPECT_TRUE(outside.ClosedByTracker());
  EXPECT_TRUE(LogHas(farm, "custom_addr '10.1.2.3' is not within --tvm-network"))
      << TrackerLog(farm);
  ExpectServesNormally(farm);
}

// Point 7: protocol violations closed the connection and left nothing in the log; a message
// code past 2^32 was cut down to a valid one (2^32 + 1 answered as a PING).
TEST(TrackerTvmTest, LogsEveryProtocolViolation) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--allow-tvm"}));
  TvmPeer big(farm.tracker_port());
  ASSERT_EQ(big.Hello(), kTrackerMagic);
  const std::string filler(40'000, 'x');
  ASSERT_TRUE(big.Send({5, {{"a", filler}}}));
  EXPECT_EQ(big.Read(), json(0));
  ASSERT_TRUE(big.Send({5, {{"b", filler}}}));
  EXPECT_TRUE(big.ClosedByTracker());
  EXPECT_TRUE(LogHas(farm, "closed tvm@127.0.0.1:" + std::to_string(big.local_port()) +
                               ": TVM tracker message: UPDATE_INFO: the merged info would take"))
      << TrackerLog(farm);

  TvmPeer wide(farm.tracker_port());
  ASSERT_EQ(wide.Hello(), kTrackerMagic);
  ASSERT_TRUE(wide.SendBytes(TvmPeer::Message("[4294967297]")));
  EXPECT_TRUE(wide.ClosedByTracker());
  EXPECT_TRUE(LogHas(farm, "TVM tracker message: unknown code 4294967297")) << TrackerLog(farm);
  ExpectServesNormally(farm);
}

}  // namespace
}  // namespace crosstune::testing
