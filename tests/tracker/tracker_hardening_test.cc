// The tracker under hostile input and faults: strings that are not UTF-8, log injection, frames
// claiming a megabyte before the handshake, a flood of unauthenticated connections, descriptor
// exhaustion. Each test ends by checking the tracker still serves a normal client.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "crosstune/frame.h"
#include "crosstune/tracker/store.h"
#include "crosstune/wire.h"
#include "farm.h"

namespace crosstune::testing {
namespace {

using namespace std::chrono_literals;

// A blocking loopback socket that speaks raw frames, for what the client library never sends.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) Close();
  }
  ~RawPeer() { Close(); }
  bool ok() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool SendBytes(const std::string& b) {
    return ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  template <typename T>
  bool Send(Opcode op, uint32_t id, const T& payload) {
    return SendBytes(EncodeFrame(op, id, payload));
  }
  // The next frame, or an error: Disconnected when the tracker closed the connection first.
  Expected<Frame> Read(std::chrono::milliseconds timeout = 10s) {
    unsigned char header[4];
    if (!ReadExactly(reinterpret_cast<char*>(header), 4, timeout)) {
      return Status(ErrorCode::kDisconnected, "closed");
    }
    auto len = DecodeFrameLength(header);
    if (!len.ok()) return len.status();
    std::string body(*len, '\0');
    if (!ReadExactly(body.data(), body.size(), timeout)) {
      return Status(ErrorCode::kDisconnected, "closed");
    }
    return DecodeFrameBody(body.data(), body.size());
  }
  // The reply's status (kOk for a result).
  Status ReadStatus() {
    auto f = Read();
    return f.ok() ? f->AsStatus() : f.status();
  }

 private:
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

msg::Hello ClientHello(const std::string& name, PeerRole role = PeerRole::kClient) {
  msg::Hello h;
  h.role = static_cast<uint8_t>(role);
  h.peer_name = name;
  return h;
}

// A normal client still gets the summary and a device.
void ExpectServesNormally(Farm& farm) {
  auto s = farm.Summary();
  ASSERT_TRUE(s.is_object()) << "the tracker no longer answers";
  EXPECT_TRUE(s.contains("devices"));
}

std::string ReadLog(Farm& farm, const std::string& name) {
  std::ifstream log(farm.Path(name));
  return std::string(std::istreambuf_iterator<char>(log), {});
}

TEST(TrackerHardeningTest, RefusesStringsThatAreNotUtf8AndKeepsServing) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  const std::string latin1 = "B\xfcro";
  {
    RawPeer p(farm.tracker_port());
    ASSERT_TRUE(p.Send(Opcode::kHello, 1, ClientHello(latin1)));
    EXPECT_EQ(p.ReadStatus().code(), ErrorCode::kProtocolError);
  }
  auto request = [&](msg::DeviceRequest req) {
    RawPeer p(farm.tracker_port());
    EXPECT_TRUE(p.Send(Opcode::kHello, 1, ClientHello("mallory")));
    EXPECT_TRUE(p.ReadStatus().ok());
    EXPECT_TRUE(p.Send(Opcode::kRequestDevice, 2, req));
    return p.ReadStatus();
  };
  msg::DeviceRequest bad_holder;
  bad_holder.key = "cpu";
  bad_holder.holder = latin1;
  EXPECT_EQ(request(bad_holder).code(), ErrorCode::kProtocolError);
  msg::DeviceRequest bad_key;
  bad_key.key = latin1;
  EXPECT_EQ(request(bad_key).code(), ErrorCode::kProtocolError);
  {
    RawPeer p(farm.tracker_port());
    ASSERT_TRUE(p.Send(Opcode::kHello, 1, ClientHello("mallory")));
    EXPECT_TRUE(p.ReadStatus().ok());
    ASSERT_TRUE(p.Send(Opcode::kReleaseLease, 2, msg::ReleaseLease{"t", 0, latin1}));
    EXPECT_EQ(p.ReadStatus().code(), ErrorCode::kProtocolError);
  }
  {
    RawPeer p(farm.tracker_port());
    ASSERT_TRUE(p.Send(Opcode::kHello, 1, ClientHello("fake-server", PeerRole::kServer)));
    EXPECT_TRUE(p.ReadStatus().ok());
    msg::Register reg;
    reg.key = "cpu";
    reg.port = 1;
    reg.tags["room"] = latin1;
    ASSERT_TRUE(p.Send(Opcode::kRegister, 2, reg));
    EXPECT_EQ(p.ReadStatus().code(), ErrorCode::kProtocolError);
  }
  ExpectServesNormally(farm);
  EXPECT_TRUE(farm.Summary()["devices"].empty());
  // The HTTP summary too.
  auto c = farm.Client();
  ASSERT_NE(c, nullptr);
}

// A database written before strings were checked (or edited by hand) may hold any bytes: the
// restarted tracker shows them replaced and keeps serving.
TEST(TrackerHardeningTest, SurvivesAStoredHolderThatIsNotUtf8) {
  Farm farm;
  std::string db = farm.Path("tracker.sqlite");
  {
    auto store = tracker::Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    tracker::LeaseRecord l;
    l.token = "0123456789abcdef";
    l.device = "127.0.0.1:1";
    l.key = "cpu";
    l.holder = "B\xfcro";
    l.granted_unix_ms = 1'700'000'000'000;
    l.expires_unix_ms = l.granted_unix_ms + 1000;
    l.lease_ms = 1000;
    ASSERT_TRUE((*store)->LeaseStarted(l).ok());
    ASSERT_TRUE((*store)->LeaseEnded(l, "released", l.expires_unix_ms).ok());
  }
  ASSERT_TRUE(farm.StartTracker({"--db", db}));
  auto s = farm.Summary();
  ASSERT_TRUE(s.is_object()) << "the tracker died on its summary";
  EXPECT_NE(s.dump().find("B\xef\xbf\xbdro"), std::string::npos) << s.dump();
  ExpectServesNormally(farm);
}

TEST(TrackerHardeningTest, EscapesControlCharactersInLoggedNames) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  {
    RawPeer p(farm.tracker_port());
    ASSERT_TRUE(p.Send(Opcode::kHello, 1, ClientHello("x\nFORGED-LINE", PeerRole::kServer)));
    EXPECT_TRUE(p.ReadStatus().ok());
    msg::Register reg;
    reg.key = "k\nFORGED-LINE";
    reg.port = 1;
    ASSERT_TRUE(p.Send(Opcode::kRegister, 2, reg));
    EXPECT_TRUE(p.ReadStatus().ok());
  }
  ASSERT_TRUE(Eventually(
      [&] { return ReadLog(farm, "tracker.log").find("k\\nFORGED-LINE") != std::string::npos; }));
  std::string log = ReadLog(farm, "tracker.log");
  EXPECT_EQ(log.find("\nFORGED-LINE"), std::string::npos) << log;
}

TEST(TrackerHardeningTest, RefusesAnEmptyHello) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  RawPeer p(farm.tracker_port());
  ASSERT_TRUE(p.Send(Opcode::kHello, 1, std::vector<int>{}));
  EXPECT_EQ(p.ReadStatus().code(), ErrorCode::kProtocolError);
}

TEST(TrackerHardeningTest, RefusesALargeFrameBeforeTheHandshake) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  RawPeer p(farm.tracker_port());
  ASSERT_TRUE(p.SendBytes(std::string("\x00\x00\x10\x00", 4)));  // claims 1 MiB
  Status s = p.ReadStatus();
  EXPECT_EQ(s.code(), ErrorCode::kLimitExceeded) << s.ToString();
  ExpectServesNormally(farm);
}

TEST(TrackerHardeningTest, LimitsConnectionsWaitingForTheirHandshake) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({"--max-handshakes-per-peer", "4"}));
  std::vector<std::unique_ptr<RawPeer>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawPeer>(farm.tracker_port()));
    ASSERT_TRUE(idle.back()->ok());
  }
  // The tracker may not have accepted all four yet: the fifth is refused once it has.
  Status s;
  ASSERT_TRUE(Eventually([&] {
    RawPeer extra(farm.tracker_port());
    auto f = extra.Read(1s);
    s = f.ok() ? f->AsStatus() : f.status();
    return s.code() == ErrorCode::kBusy;
  })) << s.ToString();
  EXPECT_NE(s.message().find("handshake"), std::string::npos) << s.ToString();
  // One completes its handshake: room for another, which completes its own.
  ASSERT_TRUE(idle[0]->Send(Opcode::kHello, 1, ClientHello("late")));
  ASSERT_TRUE(idle[0]->ReadStatus().ok());
  EXPECT_TRUE(Eventually([&] {
    RawPeer next(farm.tracker_port());
    return next.Send(Opcode::kHello, 1, ClientHello("next")) && next.ReadStatus().ok();
  }));
}

TEST(TrackerHardeningTest, BothListenersAcceptAgainAfterDescriptorExhaustion) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  // Few descriptors for the tracker; then more idle connections on both ports than it can take.
  rlimit low{64, 64};
  ASSERT_EQ(::prlimit(farm.tracker_pid(), RLIMIT_NOFILE, &low, nullptr), 0);
  std::vector<std::unique_ptr<RawPeer>> flood;
  for (int i = 0; i < 80; ++i) {
    flood.push_back(std::make_unique<RawPeer>(farm.tracker_port()));
    flood.push_back(std::make_unique<RawPeer>(farm.http_port()));
  }
  // Both accept loops have met the limit (each logs it)...
  ASSERT_TRUE(Eventually([&] {
    std::string log = ReadLog(farm, "tracker.log");
    return log.find("protocol accept:") != std::string::npos &&
           log.find("http accept:") != std::string::npos;
  })) << ReadLog(farm, "tracker.log");
  // ... and once the flood is gone, both serve again.
  flood.clear();
  EXPECT_TRUE(Eventually([&] { return farm.Summary().is_object(); }));
  EXPECT_TRUE(Eventually([&] {
    RawPeer p(farm.http_port());
    p.SendBytes("GET /api/summary HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    auto f = p.Read(2s);  // not a frame: only whether any bytes come back
    return f.status().code() != ErrorCode::kDisconnected;
  }));
}

TEST(TrackerHardeningTest, AnotherPeerCannotTakeOverALiveRegistration) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  int s = farm.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm.WaitRegistered(1));
  auto holder = farm.Client("holder");
  ASSERT_NE(holder, nullptr);
  auto grant = holder->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();

  RawPeer fake(farm.tracker_port());
  ASSERT_TRUE(fake.Send(Opcode::kHello, 1, ClientHello("cpu", PeerRole::kServer)));
  ASSERT_TRUE(fake.ReadStatus().ok());
  msg::Register reg;
  reg.key = "cpu";
  reg.custom_addr = farm.server_addr(s);
  reg.server_id = "impostor";
  ASSERT_TRUE(fake.Send(Opcode::kRegister, 2, reg));
  Status refused = fake.ReadStatus();
  EXPECT_EQ(refused.code(), ErrorCode::kBusy) << refused.ToString();

  // The real server and the holder's lease are untouched.
  auto d = farm.Device(farm.server_addr(s));
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["holder"], "holder") << d.dump();
  EXPECT_TRUE(holder->Renew(grant->lease_token).ok());
}

TEST(TrackerHardeningTest, ClientsCannotRegisterWhenServersHaveTheirOwnSecret) {
  Farm farm;
  std::string client_file = farm.WriteFile("client-secret", "client-secret\n");
  std::string server_file = farm.WriteFile("server-secret", "server-secret\n");
  ASSERT_TRUE(
      farm.StartTracker({"--auth-token-file", client_file, "--server-token-file", server_file}));
  ASSERT_GE(farm.StartServer("cpu", {"--tracker-token-file", server_file}), 0);
  ASSERT_TRUE(farm.WaitRegistered(1, "client-secret"));
  // A client knows the client secret only: as a server it is refused.
  RawPeer p(farm.tracker_port());
  ASSERT_TRUE(p.Send(Opcode::kHello, 1, ClientHello("cpu", PeerRole::kServer)));
  auto hello = p.Read();
  ASSERT_TRUE(hello.ok());
  auto reply = hello->As<msg::HelloReply>();
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(reply->auth_required);
  ASSERT_TRUE(p.Send(Opcode::kAuth, 2, msg::Auth{HmacSha256Hex("client-secret", reply->nonce)}));
  EXPECT_EQ(p.ReadStatus().code(), ErrorCode::kUnauthorized);
  // Clients still get in with theirs.
  EXPECT_TRUE(farm.Summary("client-secret").is_object());
}

TEST(TrackerHardeningTest, QueuedRequestSurvivesATrackerRestart) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker({}, /*held_port=*/true));
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_TRUE(farm.WaitRegistered(1));
  auto first = farm.Client("first");
  ASSERT_TRUE(first->RequestDevice(Hold("cpu")).ok());
  // A second client waits in the queue...
  auto second = farm.Client("second");
  ASSERT_NE(second, nullptr);
  std::atomic<bool> queued{false};
  Expected<msg::Grant> grant = Status(ErrorCode::kInternal, "not run");
  std::thread waiter([&] {
    client::LeaseRequest r = Hold("cpu");
    r.wait = 60s;
    r.on_queue_update = [&](const msg::QueueUpdate&) { queued = true; };
    grant = second->RequestDevice(r);
  });
  ASSERT_TRUE(Eventually([&] { return queued.load(); }));
  // ... when the tracker is killed and comes back on the same ports (its leases were in memory,
  // so the device is free after the restart).
  uint16_t port = farm.tracker_port();
  farm.KillTracker();
  // (A start-up grace, as by default, so the request waits for the server to re-register.)
  ASSERT_TRUE(farm.StartTracker({"--startup-grace-s", "10"}, /*held_port=*/true));
  ASSERT_EQ(farm.tracker_port(), port);
  waiter.join();
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_FALSE(grant->lease_token.empty());
}

TEST(TrackerHardeningTest, ListensOnLoopbackByDefault) {
  Farm farm;
  ServerProcess tracker;
  ASSERT_TRUE(
      tracker
          .Start({TrackerBin(), "--port", "0"}, std::chrono::seconds(10), farm.Path("default.log"))
          .ok());
  EXPECT_NE(tracker.listening_line().find("listening on 127.0.0.1:"), std::string::npos);
}

// Every numeric flag has a range, checked on its text before any cast: --http-port 70000 used
// to listen on 70000 mod 65536, -1 turned HTTP off without a word, negative probe and wait times
// were taken.
TEST(TrackerHardeningTest, RefusesFlagValuesOutsideTheirRangeNamingTheRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--http-port 70000", "--http-port: 70000 is not in 0..65535"},
      {"--http-port -1", "--http-port: -1 is not in 0..65535"},
      {"--port 70000", "--port: 70000 is not in 0..65535"},
      {"--tvm-probe-s -5", "--tvm-probe-s: -5 is not in 1..86400"},
      {"--tvm-wait-s -1", "--tvm-wait-s: -1 is not in 0..604800"},
      {"--max-handshakes 0", "--max-handshakes: 0 is not in 1..1048576"},
      {"--heartbeat-ms nan", "--heartbeat-ms: 'nan' is not an integer in 10..3600000"},
      {"--log-level loud", "--log-level"},
  };
  for (const auto& [flags, want] : cases) {
    // `timeout`: a tracker that took the value would serve until killed.
    auto r = RunCommand("timeout 20 " + TrackerBin() + " --port 0 " + flags);
    EXPECT_NE(r.exit_code, 0) << flags << " was accepted";
    EXPECT_NE(r.exit_code, 124) << flags << " was accepted";
    EXPECT_NE(r.err.find(want), std::string::npos) << flags << ": " << r.err;
  }
}

}  // namespace
}  // namespace crosstune::testing
