#include "tvm_peers.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cstdlib>
#include <cstring>

#include "crosstune/json_reader.h"
#include "crosstune/text.h"
#include "tcp_probe.h"

namespace crosstune::tracker {
namespace asio = boost::asio;
using json = nlohmann::json;

namespace tvm {

bool IsTrackerMagic(const unsigned char first[4]) {
  int32_t v = static_cast<int32_t>(uint32_t{first[0]} | uint32_t{first[1]} << 8 |
                                   uint32_t{first[2]} << 16 | uint32_t{first[3]} << 24);
  return v == kTrackerMagic;
}

std::string EncodeInt(int32_t v) {
  auto u = static_cast<uint32_t>(v);
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((u >> (8 * i)) & 0xff);
  return out;
}

std::string EncodeMessage(const json& j) {
  std::string body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return EncodeInt(static_cast<int32_t>(body.size())) + body;
}

}  // namespace tvm

namespace {

int32_t DecodeInt(const char* p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return static_cast<int32_t>(u);
}

std::string JoinHostPort(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// A port as TVM peers send it: a number (Python) or a decimal string (C++ and Java servers).
std::optional<int> Port(const json& j) {
  long v = -1;
  if (j.is_number_integer()) {
    v = j.get<long>();
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), digit)) return {};
    v = std::stol(s);
  }
  if (v <= 0 || v > 65535) return std::nullopt;
  return static_cast<int>(v);
}

Status BadTvmMessage(const std::string& what) {
  return Status(ErrorCode::kProtocolError, "TVM tracker message: " + what);
}

asio::ip::address Unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

}  // namespace

TvmPeers::TvmPeers(asio::io_context& io, Scheduler& sched, TvmOptions options, Hooks hooks)
    : io_(io), sched_(sched), options_(std::move(options)), hooks_(std::move(hooks)) {}

TvmPeers::~TvmPeers() { *alive_ = false; }

Status TvmPeers::Init() {
  for (const std::string& n : options_.networks) {
    boost::system::error_code ec;
    if (n.find(':') != std::string::npos) {
      auto net = asio::ip::make_network_v6(n, ec);
      if (!ec) nets6_.push_back(net);
    } else {
      auto net = asio::ip::make_network_v4(n, ec);
      if (!ec) nets4_.push_back(net);
    }
    if (ec) {
      return Status(ErrorCode::kInvalidArgument,
                    "bad --tvm-network '" + n + "': expected a CIDR network such as 10.0.0.0/8");
    }
  }
  if (options_.allow_custom_addr && options_.networks.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  "--tvm-allow-custom-addr needs --tvm-network: the networks a TVM server's "
                  "custom address may be in");
  }
  return Status::Ok();
}

bool TvmPeers::InNetworks(const asio::ip::address& remote) const {
  asio::ip::address a = Unmapped(remote);
  if (a.is_v4()) {
    uint32_t ip = a.to_v4().to_uint();
    for (const auto& n : nets4_) {
      if ((ip & n.netmask().to_uint()) == n.network().to_uint()) return true;
    }
    return false;
  }
  auto ip = a.to_v6().to_bytes();
  for (const auto& n : nets6_) {
    auto net = n.network().to_bytes();
    int bits = n.prefix_length();
    bool match = true;
    for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
      uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
      if ((ip[i] & mask) != (net[i] & mask)) match = false;
    }
    if (match) return true;
  }
  return false;
}

Status TvmPeers::Admit(const asio::ip::address& remote) const {
  if (!options_.allow) {
    return Status(ErrorCode::kUnauthorized,
                  "TVM peers are off (TVM's protocol has no authentication; start the tracker "
                  "with --allow-tvm to accept them)");
  }
  if (nets4_.empty() && nets6_.empty()) return Status::Ok();
  if (InNetworks(remote)) return Status::Ok();
  return Status(ErrorCode::kUnauthorized, "TVM peer " + Unmapped(remote).to_string() +
                                              " is not in the networks of --tvm-network");
}

void TvmPeers::Opened(uint64_t conn, const asio::ip::address& remote, uint16_t remote_port) {
  Peer& p = peers_[conn];
  p.remote = Unmapped(remote).to_string();
  p.remote_port = remote_port;
}

Expected<size_t> TvmPeers::OnInput(TimePoint now, uint64_t conn, std::string_view data,
                                   size_t max_messages) {
  auto it = peers_.find(conn);
  if (it == peers_.end()) return Status(ErrorCode::kInternal, "not a TVM connection");
  size_t used = 0;
  for (size_t handled = 0; handled < max_messages && data.size() - used >= 4; ++handled) {
    int32_t len = DecodeInt(data.data() + used);
    if (len <= 0 || len > tvm::kMaxMessageBytes) {
      return BadTvmMessage("length " + std::to_string(len) + " out of range (1.." +
                           std::to_string(tvm::kMaxMessageBytes) + ")");
    }
    if (data.size() - used - 4 < static_cast<size_t>(len)) break;
    // Bounded: nothing nested deeper than kMaxJsonDepth is built (copying such a value, as the
    // UPDATE_INFO merge does, would recurse once per level). Strings must be UTF-8.
    auto msg = ParseJson(data.substr(used + 4, len), {.max_bytes = tvm::kMaxMessageBytes});
    used += 4 + static_cast<size_t>(len);
    if (!msg.ok()) return BadTvmMessage(msg.status().message());
    CT_RETURN_IF_ERROR(Handle(now, conn, it->second, *msg));
  }
  return used;
}

Status TvmPeers::Handle(TimePoint now, uint64_t conn, Peer& p, const json& msg) {
  if (!msg.is_array() || msg.empty() || !msg[0].is_number_integer()) {
    return BadTvmMessage("expected [code, ...]");
  }
  // Range first: get<int>() would cut 2^32 + 1 down to 1, a valid code.
  const json& code = msg[0];
  if (code.is_number_unsigned() ? code.get<uint64_t>() > 255
                                : code.get<int64_t>() < -1 || code.get<int64_t>() > 255) {
    return BadTvmMessage("unknown code " + JsonExcerpt(code));
  }
  switch (code.get<int>()) {
    case tvm::kPing:
      Reply(conn, tvm::kSuccess);
      return Status::Ok();
    case tvm::kStop:
      // TVM's tracker stops when given its random stop key; this one is stopped by its owner.
      Reply(conn, tvm::kFail);
      return Status::Ok();
    case tvm::kPut:
      return Put(now, conn, p, msg);
    case tvm::kRequest: {
      if (msg.size() < 2 || !msg[1].is_string() || msg[1].get_ref<const std::string&>().empty()) {
        return BadTvmMessage("REQUEST needs a key");
      }
      msg::DeviceRequest req;
      req.key = msg[1].get<std::string>();
      if (msg.size() > 2 && msg[2].is_string()) req.holder = msg[2].get<std::string>();
      if (req.holder.empty()) req.holder = "tvm@" + JoinHostPort(p.remote, p.remote_port);
      if (msg.size() > 3 && msg[3].is_number()) {
        req.priority = static_cast<int32_t>(std::clamp(msg[3].get<double>(), -1e6, 1e6));
      }
      req.queue_timeout_ms = static_cast<uint32_t>(options_.request_timeout.count());
      sched_.Request(now, conn, p.next_request_id++, req, Protocol::kTvm);
      return Status::Ok();  // answered by the grant, or by a failure
    }
    case tvm::kUpdateInfo: {
      if (msg.size() < 2 || !msg[1].is_object())
        return BadTvmMessage("UPDATE_INFO needs an object");
      // Copies are safe: the message came through ParseJson (64 levels at most, 1 MiB).
      json info = msg[1];
      if (info.contains("addr") && info["addr"].is_array() && !info["addr"].empty() &&
          info["addr"][0].is_null()) {
        info["addr"][0] = p.remote;  // null: the address the tracker sees
      }
      // Updates merge, so a peer sending new keys each time would grow it without end.
      json merged = p.info;
      merged.update(info);
      const size_t size = merged.dump(-1, ' ', false, json::error_handler_t::replace).size();
      if (size > tvm::kMaxInfoBytes) {
        return BadTvmMessage("UPDATE_INFO: the merged info would take " + std::to_string(size) +
                             " bytes (at most " + std::to_string(tvm::kMaxInfoBytes) + ")");
      }
      p.info = std::move(merged);
      p.info_bytes = size;
      Reply(conn, tvm::kSuccess);
      return Status::Ok();
    }
    case tvm::kSummary:
      Reply(conn, json::array({tvm::kSuccess, Summary(now)}));
      return Status::Ok();
    case tvm::kGetPendingMatchKeys: {
      json keys = json::array();
      if (!p.device.empty() && !p.handed_out) keys.push_back(p.matchkey);
      if (p.handed_out) p.polls_since_grant++;
      Reply(conn, keys);
      return Status::Ok();
    }
    default:
      return BadTvmMessage("unknown code " + std::to_string(code.get<int>()));
  }
}

Status TvmPeers::Put(TimePoint now, uint64_t conn, Peer& p, const json& msg) {
  if (msg.size() < 3 || !msg[1].is_string() || msg[1].get_ref<const std::string&>().empty() ||
      !msg[2].is_array() || msg[2].size() != 2 || !msg[2][1].is_string()) {
    return BadTvmMessage("expected [3, key, [port, matchkey], custom_addr]");
  }
  auto port = Port(msg[2][0]);
  if (!port) return BadTvmMessage("PUT: bad port " + JsonExcerpt(msg[2][0]));
  std::string key = msg[1].get<std::string>();
  CT_ASSIGN_OR_RETURN(std::string host, PutHost(p, msg));
  std::string address = JoinHostPort(host, *port);

  if (!p.device.empty() && (p.device != address || p.key != key)) {
    // The same connection offers another address or key: a different device.
    Release(now, conn, p);
    p.lease_token.clear();
  }
  if (p.device.empty()) {
    // Another peer's claim refuses the address whether or not that device is in the pool now:
    // the answer must not tell whether the port passed its probes.
    if (auto claim = conn_by_device_.find(address);
        claim != conn_by_device_.end() && claim->second != conn) {
      return Status(ErrorCode::kBusy, "register: " + address +
                                          " is registered by another live server; it may "
                                          "register once that server is gone");
    }
    conn_by_device_[address] = conn;
    p.device = address;
    p.key = key;
    p.failed_probes = 0;
    p.next_probe = now + options_.probe_interval;
    if (Status joined = JoinPool(now, conn, p, /*offer=*/false); !joined.ok()) {
      Release(now, conn, p);
      return joined;
    }
    spdlog::info("tracker: registered TVM server {} key={} (unauthenticated)",
                 EscapeForLog(p.device), EscapeForLog(key));
  } else if (!p.lease_token.empty()) {
    // A fresh key: the session the last one was handed out for is over, or it went unused.
    msg::SessionEnded ended;
    ended.lease_token = p.lease_token;
    ended.outcome = static_cast<uint8_t>(msg::Outcome::kOk);
    // TVM's server polls every 2 s while idle and gives up on a key after 4 polls.
    if (p.polls_since_grant >= 4) ended.message = "no client used the TVM match key";
    p.lease_token.clear();
    sched_.SessionEnded(now, conn, ended);
  }
  p.matchkey = msg[2][1].get<std::string>();
  p.handed_out = false;
  p.polls_since_grant = 0;
  // The same answer whether or not the device is in the pool now: out of it (its port failed
  // the probes), it stays out until a probe passes, and the peer is not told.
  Reply(conn, tvm::kSuccess);
  if (p.in_pool) sched_.SetOffered(now, conn, true);
  return Status::Ok();
}

Status TvmPeers::JoinPool(TimePoint now, uint64_t conn, Peer& p, bool offer) {
  msg::Register reg;
  reg.key = p.key;
  reg.port = static_cast<uint16_t>(SplitHostPort(p.device).second);
  reg.tags = {{"protocol", "tvm"}};
  reg.info.version = "tvm";
  auto r = sched_.RegisterDevice(now, conn, reg, p.device, Protocol::kTvm);
  if (!r.ok()) return r.status();
  p.in_pool = true;
  if (offer) sched_.SetOffered(now, conn, true);
  return Status::Ok();
}

void TvmPeers::LeavePool(TimePoint now, uint64_t conn, Peer& p) {
  if (!p.in_pool) return;
  p.in_pool = false;
  sched_.DeviceDisconnected(now, conn);
}

void TvmPeers::Release(TimePoint now, uint64_t conn, Peer& p) {
  LeavePool(now, conn, p);
  if (auto d = conn_by_device_.find(p.device); d != conn_by_device_.end() && d->second == conn) {
    conn_by_device_.erase(d);
  }
  p.device.clear();
}

Expected<std::string> TvmPeers::PutHost(const Peer& p, const json& msg) const {
  if (msg.size() <= 3 || msg[3].is_null()) return p.remote;
  if (!msg[3].is_string()) return BadTvmMessage("PUT: custom_addr is not a string");
  const std::string& custom = msg[3].get_ref<const std::string&>();
  if (custom.empty()) return p.remote;
  boost::system::error_code ec;
  asio::ip::address a = asio::ip::make_address(custom, ec);
  if (!ec && Unmapped(a).to_string() == p.remote) return p.remote;
  // Another address: the tracker would probe it for this peer. (Quoted raw but cut: the message
  // is escaped where it is logged.)
  const std::string quoted = "'" + custom.substr(0, 80) + (custom.size() > 80 ? "...'" : "'");
  if (!options_.allow_custom_addr) {
    return BadTvmMessage("PUT: custom_addr " + quoted +
                         " is not the address the server connects from (" + p.remote +
                         "); the tracker probes and hands out only that one unless started with "
                         "--tvm-allow-custom-addr");
  }
  if (ec) return BadTvmMessage("PUT: custom_addr " + quoted + " is not an IP address");
  if (!InNetworks(a))
    return BadTvmMessage("PUT: custom_addr " + quoted + " is not within --tvm-network");
  return Unmapped(a).to_string();
}

void TvmPeers::Closed(TimePoint now, uint64_t conn, const std::string& why) {
  auto it = peers_.find(conn);
  if (it == peers_.end()) return;
  Peer p = std::move(it->second);
  peers_.erase(it);
  if (!p.device.empty()) {
    spdlog::info("tracker: TVM server {} disconnected: {}", EscapeForLog(p.device),
                 EscapeForLog(why));
    Release(now, conn, p);
  }
  sched_.ClientDisconnected(now, conn);  // its queued requests leave the queue
}

bool TvmPeers::Execute(TimePoint now, const Action& a) {
  using K = Action::Kind;
  auto it = peers_.find(a.conn);
  if (it == peers_.end()) return false;
  Peer& p = it->second;
  switch (a.kind) {
    case K::kPushToken:
      if (a.token.empty()) {
        p.lease_token.clear();  // the lease ended; the key stays out until the server re-PUTs
        return true;
      }
      // The match key is the server's only token, and it is handed out with the grant: the
      // lease is confirmed at once, and claimed, since TVM never says when a client connects.
      p.lease_token = a.token;
      p.lease_matchkey = p.matchkey;
      p.handed_out = true;
      p.polls_since_grant = 0;
      sched_.TokenAcked(now, a.conn, a.token);
      (void)sched_.SessionStarted(now, a.conn, a.token);
      return true;
    case K::kQueueUpdate:
      return true;  // TVM clients wait silently
    case K::kFail:
      Reply(a.conn, json::array({tvm::kFail, a.status.message()}));
      return true;
    case K::kSelfCheck: {
      std::weak_ptr<bool> alive = alive_;
      std::string device = a.device;
      Probe(device, [this, alive, device](Status s) {
        if (alive.expired() || !*alive.lock()) return;
        spdlog::info("tracker: port probe of quarantined TVM server {}: {}", EscapeForLog(device),
                     s.ok() ? "passed" : EscapeForLog(s.ToString()));
        sched_.SelfCheckResult(std::chrono::steady_clock::now(), device, s);
        hooks_.drain();
      });
      return true;
    }
    default:
      return false;
  }
}

std::string TvmPeers::EncodeGrant(const Action& a) const {
  auto [host, port] = SplitHostPort(a.grant.address);
  std::string matchkey;
  if (auto d = conn_by_device_.find(a.device); d != conn_by_device_.end()) {
    if (auto p = peers_.find(d->second); p != peers_.end()) matchkey = p->second.lease_matchkey;
  }
  return tvm::EncodeMessage(json::array({tvm::kSuccess, json::array({host, port, matchkey})}));
}

json TvmPeers::Summary(TimePoint now) const {
  Snapshot snap = sched_.Snap(now);
  std::map<std::string, std::pair<int, int>> queues;  // key -> free, pending
  for (const auto& d : snap.devices) {
    if (d.protocol != Protocol::kTvm) continue;
    queues[d.key].first += d.state == "free" ? 1 : 0;
  }
  for (const auto& k : snap.keys) {
    bool tvm_waiter = std::any_of(k.queue.begin(), k.queue.end(),
                                  [](const auto& w) { return w.protocol == Protocol::kTvm; });
    if (tvm_waiter || queues.count(k.key)) {
      // A TVM request waits behind every request of its key, whatever its protocol.
      queues[k.key].second = static_cast<int>(k.queue.size());
    }
  }
  // Bounded: a reply holds about kMaxSummaryBytes at most, however many keys and servers (each
  // info up to kMaxInfoBytes) there are; what does not fit is left out.
  size_t budget = tvm::kMaxSummaryBytes;
  json queue_info = json::object();
  for (const auto& [key, fp] : queues) {
    const size_t entry = key.size() + 48;  // "key":{"free":N,"pending":N}, escapes aside
    if (entry > budget) break;
    budget -= entry;
    queue_info[key] = {{"free", fp.first}, {"pending", fp.second}};
  }
  json server_info = json::array();
  for (const auto& [conn, p] : peers_) {
    auto k = p.info.find("key");
    if (k != p.info.end() && k->is_string() && k->get<std::string>().rfind("server", 0) == 0) {
      if (p.info_bytes + 1 > budget) continue;
      budget -= p.info_bytes + 1;
      server_info.push_back(p.info);
    }
  }
  return {{"queue_info", queue_info}, {"server_info", server_info}};
}

void TvmPeers::Tick(TimePoint now) {
  std::weak_ptr<bool> alive = alive_;
  for (auto& [conn, p] : peers_) {
    // Only an idle server is probed: one in a session does not accept until it ends.
    if (p.device.empty() || p.handed_out || p.probing || now < p.next_probe) continue;
    p.probing = true;
    uint64_t id = conn;
    std::string device = p.device;
    Probe(device, [this, alive, id, device](Status s) {
      if (alive.expired() || !*alive.lock()) return;
      ProbeDone(id, device, s);
    });
  }
}

void TvmPeers::ProbeDone(uint64_t conn, const std::string& device, const Status& s) {
  auto it = peers_.find(conn);
  if (it == peers_.end() || it->second.device != device) return;
  Peer& p = it->second;
  const TimePoint now = std::chrono::steady_clock::now();
  p.probing = false;
  p.next_probe = now + options_.probe_interval;
  if (s.ok()) {
    spdlog::debug("tracker: TVM server {}: probe passed", EscapeForLog(device));
    p.failed_probes = 0;
    if (p.in_pool) return;
    // Offered again unless its key is out (a grant made before it left, not yet re-PUT).
    Status joined = JoinPool(now, conn, p, /*offer=*/!p.handed_out);
    if (joined.ok()) {
      spdlog::info("tracker: TVM server {}: its port accepts connections again; back in the pool",
                   EscapeForLog(device));
    } else {
      spdlog::warn("tracker: TVM server {}: its port accepts connections again, but: {}",
                   EscapeForLog(device), EscapeForLog(joined.message()));
    }
    hooks_.drain();
    return;
  }
  spdlog::warn("tracker: TVM server {}: port probe failed: {}", EscapeForLog(device),
               EscapeForLog(s.message()));
  if (++p.failed_probes >= options_.probe_failures && p.in_pool) {
    // Out of the pool, but its connection stays open and its replies stay the same: closing it
    // would tell the peer whether the port it named listens.
    spdlog::warn(
        "tracker: TVM server {}: its port does not accept connections ({}); out of the "
        "pool until a probe passes",
        EscapeForLog(device), EscapeForLog(s.message()));
    LeavePool(now, conn, p);
    hooks_.drain();
  }
}

// Connects to the server's port and sends four bytes that are not TVM's RPC magic: TVM's
// servers close such a connection and go on waiting, with no session and no change to their
// tracker connection (an empty connection would make TVM's Python server drop its tracker
// link and register again).
void TvmPeers::Probe(const std::string& address, std::function<void(Status)> done) {
  ProbeTcp(io_, address, tvm::EncodeInt(0), options_.probe_timeout, nullptr, std::move(done));
}

}  // namespace crosstune::tracker
