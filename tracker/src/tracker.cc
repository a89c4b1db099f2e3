#include "crosstune/tracker/tracker.h"

#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <map>

#include "crosstune/crypto.h"
#include "crosstune/frame.h"
#include "crosstune/handshake.h"
#include "crosstune/text.h"
#include "crosstune/tracker/status_page.h"
#include "crosstune/tracker/store.h"
#include "crosstune/tracker/tune_runs.h"
#include "crosstune/tracker_messages.h"
#include "tcp_probe.h"
#include "tvm_peers.h"

namespace crosstune::tracker {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

// Output queued for one connection: at kPauseReadingBytes the tracker stops reading (and
// handling) what the peer sends until the peer has read some of it, so a peer that sends requests
// and never reads the replies cannot make the tracker queue more; past kMaxQueuedBytes (only
// what the tracker pushes on its own could get there) the connection is closed.
constexpr size_t kPauseReadingBytes = 256 << 10;
constexpr size_t kMaxQueuedBytes = 8 << 20;

std::string HostPort(const asio::ip::address& a, uint16_t port) {
  std::string h = a.to_string();
  if (a.is_v6()) h = "[" + h + "]";
  return h + ":" + std::to_string(port);
}

// A connection: framed reads one after another, a queue of writes with one in flight.
struct Conn : std::enable_shared_from_this<Conn> {
  enum class Stage { kHello, kAuth, kReady, kClosed };
  Conn(tcp::socket s, uint64_t i) : socket(std::move(s)), id(i) {}

  tcp::socket socket;
  uint64_t id;
  Stage stage = Stage::kHello;
  bool pre_auth_counted = false;  // counted in Impl::pre_auth_* until the handshake completes
  bool tvm_counted = false;       // counted in Impl::tvm_* while open
  PeerRole role = PeerRole::kClient;
  bool is_device = false;
  bool tvm = false;  // speaks TVM's tracker protocol (TvmPeers), not ours
  std::string peer_name, nonce, session_id;
  asio::ip::address remote;
  std::vector<char> in;  // received bytes; [in_begin, in_end) not handled yet
  size_t in_begin = 0, in_end = 0;
  std::deque<std::string> out;
  size_t out_bytes = 0;      // in `out`, the write in flight included
  bool read_paused = false;  // no read in flight: `out` must drain first (kPauseReadingBytes)
  bool writing = false;
  bool close_after_write = false;
  SteadyClock::time_point read_deadline = SteadyClock::time_point::max();
  SteadyClock::time_point write_started;
  uint32_t next_request_id = 1;
  // Replies to requests the tracker sent this peer (SetLease, SelfCheck).
  std::map<uint32_t, std::function<void(const Frame&)>> pending;
};

// One HTTP/1.1 connection to the status page; its lifetime follows its pending I/O.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  using Handler =
      std::function<http::response<http::string_body>(const http::request<http::string_body>&)>;
  HttpSession(tcp::socket s, Handler h) : stream_(std::move(s)), handler_(std::move(h)) {}

  void Read() {
    req_ = {};
    stream_.expires_after(std::chrono::seconds(15));
    http::async_read(stream_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Shut();
                       self->Respond();
                     });
  }

 private:
  void Respond() {
    auto res = std::make_shared<http::response<http::string_body>>(handler_(req_));
    // Here, so that no answer goes without them: the page, the API, errors and 404s alike.
    for (const auto& [name, value] : HttpSecurityHeaders()) res->set(name, value);
    res->keep_alive(req_.keep_alive());
    res->prepare_payload();
    stream_.expires_after(std::chrono::seconds(15));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || res->need_eof()) return self->Shut();
                        self->Read();
                      });
  }
  void Shut() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  Handler handler_;
};

}  // namespace

struct Tracker::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, TrackerOptions o)
      : io(io),
        options(std::move(o)),
        sched(options.scheduler, SteadyClock::now()),
        acceptor(io),
        http_acceptor(io),
        tick_timer(io),
        backoff_timer(io),
        http_backoff_timer(io) {
    TvmPeers::Hooks hooks;
    hooks.send = [this](uint64_t id, std::string bytes) {
      if (auto c = ConnById(id)) Send(c, std::move(bytes));
    };
    hooks.close = [this](uint64_t id, const std::string& why) {
      if (auto c = ConnById(id)) Close(c, why);
    };
    hooks.drain = [this] { Drain(); };
    tvm = std::make_unique<TvmPeers>(io, sched, options.tvm, std::move(hooks));
  }

  asio::io_context& io;
  TrackerOptions options;
  Scheduler sched;
  TuneRuns tune_runs;  // what tune runs report (status page, /metrics)
  UsageHistory usage;  // each device's utilisation over the last hour
  std::unique_ptr<Store> store;
  std::unique_ptr<TvmPeers> tvm;
  tcp::acceptor acceptor;
  tcp::acceptor http_acceptor;
  asio::steady_timer tick_timer;
  // One backoff timer per listener: a shared one let each listener's wait cancel the other's,
  // and the cancelled listener never accepted again.
  asio::steady_timer backoff_timer;
  asio::steady_timer http_backoff_timer;
  std::map<uint64_t, std::shared_ptr<Conn>> conns;
  // Connections that have not completed their handshake, in total and per peer address.
  size_t pre_auth_total = 0;
  std::map<asio::ip::address, size_t> pre_auth_by_peer;
  // Open TVM connections (TvmOptions::max_conns*), in total and per peer address.
  size_t tvm_total = 0;
  std::map<asio::ip::address, size_t> tvm_by_peer;
  uint64_t next_conn_id = 1;
  bool stopped = false;
  bool batch_open = false;  // a store transaction is open (see OpenBatch)
  std::vector<std::pair<uint64_t, std::string>> held_grants;  // conn id, encoded grant

  // --- listeners --------------------------------------------------------------------------------

  Status Listen(tcp::acceptor& a, uint16_t port) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options.host, ec);
    if (ec) return Status(ErrorCode::kInvalidArgument, "bad --host '" + options.host + "'");
    tcp::endpoint ep(addr, port);
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status(ErrorCode::kIoError,
                    "cannot listen on " + HostPort(addr, port) + ": " + ec.message());
    }
    return Status::Ok();
  }

  // Takes over an inherited listening socket (TrackerOptions::listen_fd).
  Status Adopt(tcp::acceptor& a, int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return Status(ErrorCode::kInvalidArgument, "--listen-fd " + std::to_string(fd) +
                                                     ": not a socket: " + std::strerror(errno));
    }
    boost::system::error_code ec;
    a.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      return Status(ErrorCode::kInvalidArgument,
                    "--listen-fd " + std::to_string(fd) + ": " + ec.message());
    }
    return Status::Ok();
  }

  void Accept() {
    acceptor.async_accept([self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
      if (self->stopped) return;
      if (ec) {
        // Out of descriptors and the like: back off instead of spinning.
        spdlog::warn("tracker: protocol accept: {}", ec.message());
        self->backoff_timer.expires_after(std::chrono::milliseconds(100));
        self->backoff_timer.async_wait([self](boost::system::error_code e) {
          if (!e) self->Accept();
        });
        return;
      }
      boost::system::error_code ignored;
      s.set_option(tcp::no_delay(true), ignored);
      s.set_option(asio::socket_base::keep_alive(true), ignored);
      auto c = std::make_shared<Conn>(std::move(s), self->next_conn_id++);
      c->remote = c->socket.remote_endpoint(ignored).address();
      self->conns[c->id] = c;
      if (self->AdmitPreAuth(c)) self->StartRead(c);
      self->Accept();
    });
  }

  void AcceptHttp() {
    http_acceptor.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
          if (self->stopped) return;
          if (!ec) {
            std::weak_ptr<Impl> weak = self;
            std::make_shared<HttpSession>(std::move(s), [weak](const auto& req) {
              if (auto me = weak.lock()) return me->HandleHttp(req);
              return http::response<http::string_body>(http::status::service_unavailable, 11);
            })->Read();
            self->AcceptHttp();
          } else {
            spdlog::warn("tracker: http accept: {}", ec.message());
            self->http_backoff_timer.expires_after(std::chrono::milliseconds(100));
            self->http_backoff_timer.async_wait([self](boost::system::error_code e) {
              if (!e) self->AcceptHttp();
            });
          }
        });
  }

  // Counts a new connection against the unauthenticated limits, or refuses it (Busy) when the
  // tracker already holds too many, in total or from this peer address.
  bool AdmitPreAuth(const std::shared_ptr<Conn>& c) {
    size_t& from_peer = pre_auth_by_peer[c->remote];
    if (pre_auth_total >= options.max_pre_auth_conns ||
        from_peer >= options.max_pre_auth_conns_per_peer) {
      if (from_peer == 0) pre_auth_by_peer.erase(c->remote);
      spdlog::debug("tracker: refused {}: too many connections before their handshake",
                    c->remote.to_string());
      SendError(c, 0, Status(ErrorCode::kBusy, "too many connections waiting for their handshake"));
      c->close_after_write = true;
      c->read_deadline = SteadyClock::now() + options.write_timeout;
      return false;
    }
    ++from_peer;
    ++pre_auth_total;
    c->pre_auth_counted = true;
    return true;
  }
  void LeavePreAuth(Conn& c) {
    if (!c.pre_auth_counted) return;
    c.pre_auth_counted = false;
    --pre_auth_total;
    auto it = pre_auth_by_peer.find(c.remote);
    if (it != pre_auth_by_peer.end() && --it->second == 0) pre_auth_by_peer.erase(it);
  }

  // Counts a connection that sent TVM's magic against the TVM limits, or says why not.
  Status AdmitTvm(Conn& c) {
    size_t& from_peer = tvm_by_peer[c.remote];
    Status s;
    if (tvm_total >= options.tvm.max_conns) {
      s = Status(ErrorCode::kBusy,
                 "too many TVM connections (" + std::to_string(tvm_total) + ", --tvm-max-conns)");
    } else if (from_peer >= options.tvm.max_conns_per_peer) {
      s = Status(ErrorCode::kBusy, "too many TVM connections from " + c.remote.to_string() + " (" +
                                       std::to_string(from_peer) + ", --tvm-max-conns-per-peer)");
    }
    if (!s.ok()) {
      if (from_peer == 0) tvm_by_peer.erase(c.remote);
      return s;
    }
    ++from_peer;
    ++tvm_total;
    c.tvm_counted = true;
    return Status::Ok();
  }
  void LeaveTvm(Conn& c) {
    if (!c.tvm_counted) return;
    c.tvm_counted = false;
    --tvm_total;
    auto it = tvm_by_peer.find(c.remote);
    if (it != tvm_by_peer.end() && --it->second == 0) tvm_by_peer.erase(it);
  }

  void Tick() {
    tick_timer.expires_after(options.tick);
    tick_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      self->Sweep();
      self->Tick();
    });
  }

  // Deadlines of every connection, then the scheduler's own clock work.
  void Sweep() {
    auto now = SteadyClock::now();
    std::vector<std::shared_ptr<Conn>> late;
    for (auto& [id, c] : conns) {
      if (now >= c->read_deadline ||
          (c->writing && now - c->write_started >= options.write_timeout)) {
        late.push_back(c);
      }
    }
    for (auto& c : late) Close(c, "deadline passed");
    tvm->Tick(now);
    sched.Tick(now);
    tune_runs.Expire(now);
    usage.Sample(now, BusySeconds(sched.Snap(now)));
    Drain();
  }

  // --- frames -----------------------------------------------------------------------------------

  Ms ReadTimeout(const Conn& c) const {
    // TVM peers are silent while they wait for a grant or serve a session (hours, for a tuner).
    if (c.tvm) return std::chrono::hours(24 * 365);
    if (c.stage != Conn::Stage::kReady) return options.handshake_timeout;
    if (c.is_device) return options.scheduler.heartbeat_timeout + Ms(1000);
    return options.client_idle_timeout;
  }

  // Reads whatever the socket has into the connection's buffer and handles every whole frame in
  // it: one recv for many small frames. A frame's length is checked before room is made for it.
  void StartRead(const std::shared_ptr<Conn>& c) {
    c->read_deadline = SteadyClock::now() + ReadTimeout(*c);
    // Small to start (a thousand idle servers cost little), doubled when a burst needs it.
    if (c->in.size() - c->in_end < 512) {
      // Move the unread bytes to the front; grow only when that is not enough. (The buffer starts
      // empty: memmove from its null data() is undefined even for no bytes.)
      if (c->in_begin > 0) {
        std::memmove(c->in.data(), c->in.data() + c->in_begin, c->in_end - c->in_begin);
        c->in_end -= c->in_begin;
        c->in_begin = 0;
      }
      if (c->in.size() - c->in_end < 512) c->in.resize(std::max<size_t>(c->in.size() * 2, 2048));
    }
    c->socket.async_read_some(
        asio::buffer(c->in.data() + c->in_end, c->in.size() - c->in_end),
        [self = shared_from_this(), c](boost::system::error_code ec, size_t n) {
          if (c->stage == Conn::Stage::kClosed) return;
          if (ec) return self->Close(c, ec.message());
          c->in_end += n;
          if (c->tvm) QuickAck(*c);
          self->Pump(c);
        });
  }

  static bool Backlogged(const Conn& c) { return c.out_bytes >= kPauseReadingBytes; }

  // Handles what the connection's buffer holds, then reads more, unless the peer has first to
  // read what is queued for it: then reading pauses until Write drains the queue.
  void Pump(const std::shared_ptr<Conn>& c) {
    // One failing handler ends its connection, never the tracker.
    try {
      HandleInput(c);
      Drain();
    } catch (const std::exception& e) {
      spdlog::error("tracker: internal error on a connection from {} ({}): {}",
                    c->remote.to_string(), EscapeForLog(c->peer_name), e.what());
      Close(c, "internal error");
      return;
    }
    if (c->stage == Conn::Stage::kClosed || c->close_after_write) return;
    if (Backlogged(*c)) {
      c->read_paused = true;
      return;
    }
    StartRead(c);
  }

  // TVM's client sends a message's length and body in two writes without TCP_NODELAY, so its
  // body waits (Nagle) for the ack of the length, which a delayed ack holds back for tens of ms.
  // Acking at once after each read keeps a request from waiting on that.
  static void QuickAck(Conn& c) {
    int one = 1;
    ::setsockopt(c.socket.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
  }

  // A connection whose first four bytes are TVM's tracker magic is handed to TvmPeers.
  bool StartTvm(const std::shared_ptr<Conn>& c) {
    Status s = tvm->Admit(c->remote);
    if (s.ok()) s = AdmitTvm(*c);
    boost::system::error_code ignored;
    uint16_t port = c->socket.remote_endpoint(ignored).port();
    c->peer_name = "tvm@" + HostPort(c->remote, port);
    if (!s.ok()) {
      spdlog::warn("tracker: refused {}: {}", c->peer_name, s.message());
      Send(c, tvm::EncodeInt(tvm::kFail));  // TVM peers report "not RPC Tracker"
      c->close_after_write = true;
      return false;
    }
    // The magic is TVM's whole handshake: the connection no longer counts as waiting for one
    // (a queue of idle TVM clients would otherwise lock crosstune peers out).
    LeavePreAuth(*c);
    c->tvm = true;
    c->stage = Conn::Stage::kReady;
    c->in_begin += 4;
    tvm->Opened(c->id, c->remote, port);
    QuickAck(*c);
    Send(c, tvm::EncodeInt(tvm::kTrackerMagic));
    return true;
  }

  // One message at a time, so that a backlog of replies stops the handling of further requests.
  void HandleTvmInput(const std::shared_ptr<Conn>& c) {
    while (c->stage != Conn::Stage::kClosed && !Backlogged(*c)) {
      auto used =
          tvm->OnInput(SteadyClock::now(), c->id,
                       std::string_view(c->in.data() + c->in_begin, c->in_end - c->in_begin), 1);
      if (!used.ok()) {
        // A protocol violation: said in the log, since TVM's protocol has no way to tell the peer.
        spdlog::warn("tracker: closed {}: {}", EscapeForLog(c->peer_name),
                     EscapeForLog(used.status().message()));
        return Close(c, used.status().message());
      }
      if (*used == 0) return;
      c->in_begin += *used;
    }
  }

  void HandleInput(const std::shared_ptr<Conn>& c) {
    if (c->stage == Conn::Stage::kHello && c->in_end - c->in_begin >= 4 &&
        tvm::IsTrackerMagic(reinterpret_cast<unsigned char*>(c->in.data() + c->in_begin))) {
      if (!StartTvm(c)) return;
    }
    if (c->tvm) return HandleTvmInput(c);
    while (c->stage != Conn::Stage::kClosed && !c->close_after_write && !Backlogged(*c)) {
      size_t have = c->in_end - c->in_begin;
      if (have < 4) return;
      // Before the handshake only small frames are read: a peer that has proved nothing must
      // not make the tracker allocate a megabyte.
      uint32_t max_frame = c->stage == Conn::Stage::kReady ? Limits::kMaxFrameBytes
                                                           : Limits::kMaxHandshakeFrameBytes;
      auto len = DecodeFrameLength(reinterpret_cast<unsigned char*>(c->in.data() + c->in_begin),
                                   max_frame);
      if (!len.ok()) {
        SendError(c, 0, len.status());
        c->close_after_write = true;
        return;
      }
      if (have < 4 + size_t{*len}) {
        if (c->in.size() - c->in_begin < 4 + size_t{*len}) c->in.resize(c->in_begin + 4 + *len);
        return;
      }
      auto f = DecodeFrameBody(c->in.data() + c->in_begin + 4, *len);
      c->in_begin += 4 + *len;
      if (!f.ok()) {
        SendError(c, 0, f.status());
        c->close_after_write = true;
        return;
      }
      OnFrame(c, *f);
    }
  }

  void Send(const std::shared_ptr<Conn>& c, std::string bytes) {
    if (c->stage == Conn::Stage::kClosed) return;
    if (c->out_bytes + bytes.size() > kMaxQueuedBytes) {
      // Not closed here: callers (TvmPeers among them) may still hold the connection's state.
      if (!c->close_after_write) {
        spdlog::warn("tracker: closing {}: it does not read what it is sent ({} bytes queued)",
                     EscapeForLog(c->peer_name), c->out_bytes);
        c->close_after_write = true;
        asio::post(io, [self = shared_from_this(), c] {
          self->Close(c, "does not read what it is sent");
        });
      }
      return;
    }
    c->out_bytes += bytes.size();
    c->out.push_back(std::move(bytes));
    if (!c->writing) Write(c);
  }
  template <typename T>
  void Reply(const std::shared_ptr<Conn>& c, uint32_t id, const T& payload) {
    Send(c, EncodeFrame(Opcode::kResult, id, payload));
  }
  void SendError(const std::shared_ptr<Conn>& c, uint32_t id, const Status& s) {
    Send(c, EncodeError(id, s));
  }
  // A request from the tracker to the peer; `on_reply` sees the reply frame, or a kError frame
  // made up here when the connection goes first (never called after Stop).
  template <typename T>
  void Ask(const std::shared_ptr<Conn>& c, Opcode op, const T& payload,
           std::function<void(const Frame&)> on_reply) {
    uint32_t id = c->next_request_id++;
    c->pending[id] = std::move(on_reply);
    Send(c, EncodeFrame(op, id, payload));
  }

  void Write(const std::shared_ptr<Conn>& c) {
    c->writing = true;
    c->write_started = SteadyClock::now();
    asio::async_write(c->socket, asio::buffer(c->out.front()),
                      [self = shared_from_this(), c](boost::system::error_code ec, size_t) {
                        if (c->stage == Conn::Stage::kClosed) return;
                        if (ec) return self->Close(c, ec.message());
                        c->out_bytes -= c->out.front().size();
                        c->out.pop_front();
                        if (c->read_paused && !Backlogged(*c)) {
                          c->read_paused = false;
                          self->Pump(c);  // the requests left in the buffer, then reads on
                          if (c->stage == Conn::Stage::kClosed) return;
                        }
                        if (!c->out.empty()) return self->Write(c);
                        c->writing = false;
                        if (c->close_after_write) self->Close(c, "closed after error");
                      });
  }

  void Close(const std::shared_ptr<Conn>& c, const std::string& why) {
    if (c->stage == Conn::Stage::kClosed) return;
    bool was_ready = c->stage == Conn::Stage::kReady;
    LeavePreAuth(*c);
    LeaveTvm(*c);
    c->stage = Conn::Stage::kClosed;
    boost::system::error_code ignored;
    c->socket.shutdown(tcp::socket::shutdown_both, ignored);
    c->socket.close(ignored);
    conns.erase(c->id);
    auto pending = std::move(c->pending);
    c->pending.clear();
    if (stopped) return;
    auto now = SteadyClock::now();
    if (c->tvm) {
      tvm->Closed(now, c->id, why);
    } else if (c->is_device) {
      spdlog::info("tracker: server {} disconnected: {}", EscapeForLog(c->peer_name), why);
      sched.DeviceDisconnected(now, c->id);
    } else if (was_ready) {
      sched.ClientDisconnected(now, c->id);
    }
    for (auto& [id, cb] : pending) {
      std::string bytes = EncodeError(id, Status(ErrorCode::kDisconnected, "peer went away"));
      auto lost = DecodeFrameBody(bytes.data() + 4, bytes.size() - 4);
      if (lost.ok()) cb(*lost);
    }
    Drain();
  }

  void OnFrame(const std::shared_ptr<Conn>& c, const Frame& f) {
    switch (c->stage) {
      case Conn::Stage::kHello:
        return OnHello(c, f);
      case Conn::Stage::kAuth:
        return OnAuth(c, f);
      case Conn::Stage::kReady:
        break;
      case Conn::Stage::kClosed:
        return;
    }
    if (f.op == Opcode::kResult || f.op == Opcode::kError) {
      auto it = c->pending.find(f.request_id);
      if (it == c->pending.end()) return;  // a reply nobody waits for any more
      auto cb = std::move(it->second);
      c->pending.erase(it);
      cb(f);
      return;
    }
    Dispatch(c, f);
  }

  void Refuse(const std::shared_ptr<Conn>& c, uint32_t id, const Status& s) {
    spdlog::info("tracker: refused {} ({}): {}", c->remote.to_string(), EscapeForLog(c->peer_name),
                 EscapeForLog(s.ToString()));
    SendError(c, id, s);
    c->close_after_write = true;
  }

  // The checks are common/handshake.h's, shared with crosstune-server.
  void OnHello(const std::shared_ptr<Conn>& c, const Frame& f) {
    auto hello = CheckHello(f);
    if (!hello.ok()) return Refuse(c, f.request_id, hello.status());
    c->role = static_cast<PeerRole>(hello->role);
    c->peer_name = hello->peer_name.empty() ? c->remote.to_string() : hello->peer_name;
    c->session_id = RandomHex(16);
    msg::HelloReply reply = MakeHelloReply(c->session_id, !SecretFor(*c).empty());
    c->nonce = reply.nonce;
    c->stage = reply.auth_required ? Conn::Stage::kAuth : Conn::Stage::kReady;
    if (c->stage == Conn::Stage::kReady) LeavePreAuth(*c);
    Reply(c, f.request_id, reply);
  }

  // Servers prove themselves with the server secret when the tracker has one; everyone else
  // (and servers otherwise) with the client secret.
  const std::string& SecretFor(const Conn& c) const {
    bool server = c.role == PeerRole::kServer;
    return server && !options.server_secret.empty() ? options.server_secret : options.auth_secret;
  }

  void OnAuth(const std::shared_ptr<Conn>& c, const Frame& f) {
    if (Status s = CheckAuth(f, SecretFor(*c), c->nonce); !s.ok()) {
      return Refuse(c, f.request_id, s);
    }
    c->stage = Conn::Stage::kReady;
    LeavePreAuth(*c);
    Reply(c, f.request_id, msg::Empty{});
  }

  template <typename T, typename Fn>
  void With(const std::shared_ptr<Conn>& c, const Frame& f, Fn fn) {
    auto m = f.As<T>();
    if (!m.ok()) return SendError(c, f.request_id, m.status());
    fn(*m);
  }

  void Dispatch(const std::shared_ptr<Conn>& c, const Frame& f) {
    auto now = SteadyClock::now();
    switch (f.op) {
      case Opcode::kRegister:
        return With<msg::Register>(c, f, [&](const msg::Register& reg) {
          if (c->role != PeerRole::kServer) {
            return SendError(c, f.request_id,
                             Status(ErrorCode::kInvalidArgument, "only servers register"));
          }
          std::string address;
          if (!reg.custom_addr.empty()) {
            bool has_port = reg.custom_addr.back() != ']' &&
                            reg.custom_addr.find(':') != std::string::npos &&
                            (reg.custom_addr[0] == '[' ||
                             reg.custom_addr.find(':') == reg.custom_addr.rfind(':'));
            address = has_port ? reg.custom_addr : reg.custom_addr + ":" + std::to_string(reg.port);
          } else {
            auto ip = c->remote;
            if (ip.is_v6() && ip.to_v6().is_v4_mapped()) {
              ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
            }
            address = HostPort(ip, reg.port);
          }
          auto r = sched.RegisterDevice(now, c->id, reg, address);
          if (!r.ok()) return SendError(c, f.request_id, r.status());
          c->is_device = true;
          c->peer_name = r->device;
          spdlog::info("tracker: registered {} key={} arch={}", EscapeForLog(r->device),
                       EscapeForLog(reg.key), EscapeForLog(reg.info.arch));
          Reply(c, f.request_id, *r);
        });
      case Opcode::kHeartbeat:
        if (c->is_device) {
          return With<msg::ServerHeartbeat>(c, f, [&](const msg::ServerHeartbeat& hb) {
            sched.Heartbeat(now, c->id, hb);
            Reply(c, f.request_id, msg::Empty{});
          });
        }
        return Reply(c, f.request_id, msg::Empty{});
      case Opcode::kCheckLease:
        return With<msg::LeaseRef>(c, f, [&](const msg::LeaseRef& ref) {
          Status s = sched.SessionStarted(now, c->id, ref.lease_token);
          if (!s.ok()) return SendError(c, f.request_id, s);
          Reply(c, f.request_id, msg::Empty{});
        });
      case Opcode::kSessionEnded:
        return With<msg::SessionEnded>(c, f, [&](const msg::SessionEnded& e) {
          sched.SessionEnded(now, c->id, e);
          Reply(c, f.request_id, msg::Empty{});
        });
      case Opcode::kRequestDevice:
        return With<msg::DeviceRequest>(c, f, [&](msg::DeviceRequest req) {
          if (req.holder.empty()) req.holder = c->peer_name;
          sched.Request(now, c->id, f.request_id, req);
        });
      case Opcode::kCancelRequest:
        return With<msg::CancelRequest>(c, f, [&](const msg::CancelRequest& r) {
          Status s = sched.Cancel(now, c->id, r.request_id);
          if (!s.ok()) return SendError(c, f.request_id, s);
          Reply(c, f.request_id, msg::Empty{});
        });
      case Opcode::kRenewLease:
        return With<msg::RenewLease>(c, f, [&](const msg::RenewLease& r) {
          auto info = sched.Renew(now, c->id, r);
          if (!info.ok()) return SendError(c, f.request_id, info.status());
          Reply(c, f.request_id, *info);
        });
      case Opcode::kReleaseLease:
        return With<msg::ReleaseLease>(c, f, [&](const msg::ReleaseLease& r) {
          Status s = sched.Release(now, r);
          if (!s.ok()) return SendError(c, f.request_id, s);
          Reply(c, f.request_id, msg::Empty{});
        });
      case Opcode::kTuneProgress:
        return With<msg::TuneProgress>(c, f, [&](const msg::TuneProgress& p) {
          Status s = TakeTuneProgress(now, *c, p);
          if (!s.ok()) return SendError(c, f.request_id, s);
          Reply(c, f.request_id, msg::Empty{});
        });
      case Opcode::kQuery:
        return Reply(c, f.request_id, msg::QueryReply{DumpJson(Summary())});
      case Opcode::kAdmin:
        return With<msg::AdminRequest>(c, f, [&](const msg::AdminRequest& a) {
          if (options.admin_secret.empty()) {
            return SendError(c, f.request_id,
                             Status(ErrorCode::kUnauthorized,
                                    "admin operations are off: the tracker has no "
                                    "--admin-token-file"));
          }
          std::string want = HmacSha256Hex(options.admin_secret,
                                           c->session_id + "\n" + a.action + "\n" + a.device);
          if (!ConstantTimeEquals(a.proof, want)) {
            spdlog::warn("tracker: refused admin {} {} from {}: wrong admin token",
                         EscapeForLog(a.action), EscapeForLog(a.device),
                         EscapeForLog(c->peer_name));
            return SendError(c, f.request_id,
                             Status(ErrorCode::kUnauthorized, "wrong admin token"));
          }
          Status s = sched.Admin(now, a.action, a.device);
          if (!s.ok()) return SendError(c, f.request_id, s);
          spdlog::info("tracker: admin {} {} by {}", EscapeForLog(a.action), EscapeForLog(a.device),
                       EscapeForLog(c->peer_name));
          Reply(c, f.request_id, msg::Empty{});
        });
      default:
        return SendError(c, f.request_id,
                         Status(ErrorCode::kProtocolError,
                                "the tracker does not serve " + std::string(OpcodeName(f.op))));
    }
  }

  // --- actions ----------------------------------------------------------------------------------

  std::shared_ptr<Conn> ConnById(uint64_t id) {
    auto it = conns.find(id);
    return it == conns.end() ? nullptr : it->second;
  }

  void Drain() {
    while (sched.HasActions()) {
      for (Action& a : sched.TakeActions()) Execute(a);
    }
  }

  void Execute(Action& a) {
    using K = Action::Kind;
    auto c = ConnById(a.conn);
    if (c && c->tvm && tvm->Execute(SteadyClock::now(), a)) return;
    int64_t unix_now = sched.unix_ms();
    switch (a.kind) {
      case K::kPushToken: {
        if (!c) return;
        uint64_t cid = c->id;
        std::string token = a.token;
        Ask(c, Opcode::kGrant, msg::SetLease{a.token, a.holder},
            [this, cid, token](const Frame& f) {
              if (f.op == Opcode::kResult && !token.empty()) {
                sched.TokenAcked(SteadyClock::now(), cid, token);
              }
            });
        return;
      }
      case K::kGrant:
        // Told only once the lease is committed (CommitBatch), so a tracker killed in between
        // still knows the lease when it restarts.
        if (c) {
          std::string bytes =
              c->tvm ? tvm->EncodeGrant(a) : EncodeFrame(Opcode::kResult, a.request_id, a.grant);
          if (batch_open) {
            held_grants.emplace_back(c->id, std::move(bytes));
          } else {
            Send(c, std::move(bytes));
          }
        }
        spdlog::info("tracker: granted {} to {}", EscapeForLog(a.device),
                     c ? EscapeForLog(c->peer_name) : "(gone)");
        return;
      case K::kQueueUpdate:
        if (c) Send(c, EncodeFrame(Opcode::kQueueUpdate, a.request_id, a.update));
        return;
      case K::kFail:
        if (c) SendError(c, a.request_id, a.status);
        return;
      case K::kSelfCheck:
        return SelfCheck(c, a.device);
      case K::kCloseConn:
        if (c) Close(c, "replaced or timed out");
        return;
      case K::kLeaseStarted:
        OpenBatch();
        if (Status s = store->LeaseStarted(a.lease); !s.ok()) spdlog::warn("{}", s.ToString());
        return;
      case K::kLeaseRenewed:
        OpenBatch();
        if (Status s = store->LeaseRenewed(a.lease); !s.ok()) spdlog::warn("{}", s.ToString());
        return;
      case K::kLeaseEnded:
        OpenBatch();
        spdlog::info("tracker: lease on {} by {} ended: {}", EscapeForLog(a.device),
                     EscapeForLog(a.lease.holder), EscapeForLog(a.outcome));
        if (Status s = store->LeaseEnded(a.lease, a.outcome, unix_now); !s.ok()) {
          spdlog::warn("{}", s.ToString());
        }
        return;
    }
  }

  // Group commit: the database writes of every event handled before the io_context gets back to
  // this posted handler share one transaction; the grants they carry are held until it commits.
  void OpenBatch() {
    if (batch_open) return;
    if (Status s = store->Begin(); !s.ok()) {
      spdlog::warn("{}", s.ToString());
      return;
    }
    batch_open = true;
    asio::post(io, [self = shared_from_this()] { self->CommitBatch(); });
  }

  void CommitBatch() {
    if (!batch_open) return;
    batch_open = false;
    if (Status s = store->Commit(); !s.ok()) spdlog::warn("{}", s.ToString());
    auto grants = std::move(held_grants);
    held_grants.clear();
    for (auto& [id, bytes] : grants) {
      if (auto c = ConnById(id)) Send(c, std::move(bytes));
    }
  }

  // Self-check of a quarantined device: the server checks itself (SelfCheck over its
  // registration connection), then the tracker checks that the address clients are given
  // answers a Hello.
  void SelfCheck(const std::shared_ptr<Conn>& c, const std::string& device) {
    auto done = [this, device](Status s) {
      spdlog::info("tracker: self-check of {}: {}", EscapeForLog(device),
                   s.ok() ? "passed" : EscapeForLog(s.ToString()));
      sched.SelfCheckResult(SteadyClock::now(), device, s);
      Drain();
    };
    if (!c) return done(Status(ErrorCode::kDisconnected, "not connected"));
    Ask(c, Opcode::kAdmin, msg::SelfCheck{}, [this, device, done](const Frame& f) {
      Status s = f.AsStatus();
      if (!s.ok()) return done(s);
      Probe(device, done);
    });
  }

  // Any well-formed frame back (even a refusal) proves a live crosstune server.
  void Probe(const std::string& address, std::function<void(Status)> done) {
    msg::Hello hello;
    hello.role = static_cast<uint8_t>(PeerRole::kTracker);
    hello.peer_name = "tracker self-check";
    ProbeTcp(
        io, address, EncodeFrame(Opcode::kHello, 1, hello), options.probe_timeout,
        [](const std::array<unsigned char, 4>& header) {
          auto len = DecodeFrameLength(header.data());
          return len.ok() ? Status::Ok() : len.status();
        },
        std::move(done));
  }

  // --- views ------------------------------------------------------------------------------------

  // Each device's leased seconds since it registered, by name (what UsageHistory samples).
  static std::map<std::string, double> BusySeconds(const Snapshot& snap) {
    std::map<std::string, double> busy;
    for (const auto& d : snap.devices) busy[d.name] = d.busy_seconds;
    return busy;
  }

  // Strings reach the summary from the wire and from the database (which may hold rows older
  // than the wire's UTF-8 check): bytes that are not UTF-8 are shown as U+FFFD, never thrown.
  static std::string DumpJson(const nlohmann::json& j, int indent = -1) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  nlohmann::json Summary() {
    std::vector<HistoryRow> history;
    if (auto h = store->RecentHistory(20); h.ok()) history = std::move(*h);
    auto now = SteadyClock::now();
    auto snap = sched.Snap(now);
    nlohmann::json j = SummaryJson(snap, history);
    j["tune_runs"] = tune_runs.ToJson(now);
    j["usage"] = usage.ToJson(now, BusySeconds(snap));
    return j;
  }

  // A tune run's report: bounded, and only on leases that are active (their tokens are their
  // holders' secrets); the run is shown with those leases' devices.
  Status TakeTuneProgress(SteadyClock::time_point now, const Conn& c, const msg::TuneProgress& p) {
    CT_RETURN_IF_ERROR(ValidateTuneProgress(p));
    std::vector<std::string> devices;
    std::string key, holder;
    for (const auto& token : p.lease_tokens) {
      auto lease = sched.FindActiveLease(token);
      if (!lease.ok())
        return Status(ErrorCode::kUnauthorized, "tune progress: a lease of the run is not active");
      devices.push_back(lease->device);
      if (key.empty()) key = lease->key;
      if (holder.empty()) holder = lease->holder;
    }
    if (holder.empty()) holder = c.peer_name;
    return tune_runs.Update(now, sched.unix_ms(), holder, key, devices, p);
  }

  http::response<http::string_body> HandleHttp(const http::request<http::string_body>& req) {
    try {
      return ServeHttp(req);
    } catch (const std::exception& e) {
      spdlog::error("tracker: internal error serving {}: {}",
                    EscapeForLog(std::string(req.target())), e.what());
      http::response<http::string_body> res(http::status::internal_server_error, req.version());
      res.set(http::field::content_type, "text/plain");
      res.body() = "internal error\n";
      return res;
    }
  }

  http::response<http::string_body> ServeHttp(const http::request<http::string_body>& req) {
    http::response<http::string_body> res(http::status::ok, req.version());
    res.set(http::field::server, "crosstune-tracker");
    std::string target(req.target());
    if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.body() = "GET only\n";
    } else if (target == "/" || target == "/index.html") {
      res.set(http::field::content_type, "text/html; charset=utf-8");
      res.body() = std::string(StatusPageHtml());
    } else if (target == "/api/summary") {
      res.set(http::field::content_type, "application/json");
      res.body() = DumpJson(Summary(), 1);
    } else if (target == "/metrics") {
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.body() = MetricsText(sched.Snap(SteadyClock::now()));
      tune_runs.AppendMetrics(&res.body());
    } else {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain");
      res.body() = "not found: / /api/summary /metrics\n";
    }
    return res;
  }
};

Tracker::Tracker(asio::io_context& io, TrackerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

Tracker::~Tracker() {
  // Destructors must not throw: a failure while stopping (no memory for the connection list) is
  // logged, and the members' own destructors close what is left.
  try {
    Stop();
  } catch (const std::exception& e) {
    spdlog::error("tracker: error while stopping: {}", e.what());
  }
}

Status Tracker::Start() {
  Impl& m = *impl_;
  CT_RETURN_IF_ERROR(m.tvm->Init());
  CT_ASSIGN_OR_RETURN(m.store, Store::Open(m.options.db_path));
  CT_ASSIGN_OR_RETURN(auto leases, m.store->ActiveLeases());
  auto now = SteadyClock::now();
  for (const auto& l : leases) {
    spdlog::info("tracker: restored lease on {} held by {}", l.device, l.holder);
    m.sched.RestoreLease(now, l, m.sched.unix_ms());
  }
  if (m.options.listen_fd >= 0) {
    CT_RETURN_IF_ERROR(m.Adopt(m.acceptor, m.options.listen_fd));
  } else {
    CT_RETURN_IF_ERROR(m.Listen(m.acceptor, m.options.port));
  }
  if (m.options.http_port >= 0) {
    CT_RETURN_IF_ERROR(m.Listen(m.http_acceptor, static_cast<uint16_t>(m.options.http_port)));
    m.AcceptHttp();
  }
  m.Accept();
  m.Tick();
  m.Drain();
  return Status::Ok();
}

void Tracker::Stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.CommitBatch();
  m.stopped = true;
  boost::system::error_code ignored;
  m.acceptor.close(ignored);
  m.http_acceptor.close(ignored);
  m.tick_timer.cancel();
  m.backoff_timer.cancel();
  m.http_backoff_timer.cancel();
  auto conns = m.conns;
  for (auto& [id, c] : conns) m.Close(c, "tracker stopping");
}

uint16_t Tracker::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

uint16_t Tracker::http_port() const {
  if (!impl_->http_acceptor.is_open()) return 0;
  boost::system::error_code ec;
  auto ep = impl_->http_acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

}  // namespace crosstune::tracker
