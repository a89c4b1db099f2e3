// The crosstune protocol on the tracker's port (tracker_messages.h lists the exchanges): the
// listener and its limit on connections that have not completed their handshake, the frames cut
// from a connection's input, the handshake (Hello, then the HMAC challenge where a secret is set)
// and the requests of servers and clients, each handed to the Scheduler.
#include <spdlog/spdlog.h>

#include "crosstune/crypto.h"
#include "crosstune/handshake.h"
#include "crosstune/text.h"
#include "tracker_impl.h"

namespace crosstune::tracker {

// --- the listener -------------------------------------------------------------------------------

void Tracker::Impl::Accept() {
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

bool Tracker::Impl::AdmitPreAuth(const std::shared_ptr<Conn>& c) {
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

void Tracker::Impl::LeavePreAuth(Conn& c) {
  if (!c.pre_auth_counted) return;
  c.pre_auth_counted = false;
  --pre_auth_total;
  auto it = pre_auth_by_peer.find(c.remote);
  if (it != pre_auth_by_peer.end() && --it->second == 0) pre_auth_by_peer.erase(it);
}

// --- frames -------------------------------------------------------------------------------------

void Tracker::Impl::HandleInput(const std::shared_ptr<Conn>& c) {
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
    uint32_t max_frame =
        c->stage == Conn::Stage::kReady ? Limits::kMaxFrameBytes : Limits::kMaxHandshakeFrameBytes;
    auto len =
        DecodeFrameLength(reinterpret_cast<unsigned char*>(c->in.data() + c->in_begin), max_frame);
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

void Tracker::Impl::OnFrame(const std::shared_ptr<Conn>& c, const Frame& f) {
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

// --- the handshake ------------------------------------------------------------------------------

void Tracker::Impl::Refuse(const std::shared_ptr<Conn>& c, uint32_t id, const Status& s) {
  spdlog::info("tracker: refused {} ({}): {}", c->remote.to_string(), EscapeForLog(c->peer_name),
               EscapeForLog(s.ToString()));
  SendError(c, id, s);
  c->close_after_write = true;
}

void Tracker::Impl::OnHello(const std::shared_ptr<Conn>& c, const Frame& f) {
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

const std::string& Tracker::Impl::SecretFor(const Conn& c) const {
  bool server = c.role == PeerRole::kServer;
  return server && !options.server_secret.empty() ? options.server_secret : options.auth_secret;
}

void Tracker::Impl::OnAuth(const std::shared_ptr<Conn>& c, const Frame& f) {
  if (Status s = CheckAuth(f, SecretFor(*c), c->nonce); !s.ok()) {
    return Refuse(c, f.request_id, s);
  }
  c->stage = Conn::Stage::kReady;
  LeavePreAuth(*c);
  Reply(c, f.request_id, msg::Empty{});
}

// --- requests -----------------------------------------------------------------------------------

void Tracker::Impl::Dispatch(const std::shared_ptr<Conn>& c, const Frame& f) {
  auto now = SteadyClock::now();
  switch (f.op) {
    case Opcode::kRegister:
      return With<msg::Register>(c, f,
                                 [&](const msg::Register& reg) { OnRegister(now, c, f, reg); });
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
    case Opcode::kRecordsPut:
      return With<msg::RecordsPut>(
          c, f, [&](const msg::RecordsPut& put) { OnRecordsPut(now, c, f, put); });
    case Opcode::kRecordsQuery:
      return With<msg::RecordsQuery>(c, f,
                                     [&](const msg::RecordsQuery& q) { OnRecordsQuery(c, f, q); });
    case Opcode::kRecordsClaim:
      return With<msg::RecordsClaim>(
          c, f, [&](const msg::RecordsClaim& claim) { OnRecordsClaim(now, c, f, claim); });
    case Opcode::kRecordsList:
      return With<msg::RecordsList>(c, f,
                                    [&](const msg::RecordsList& l) { OnRecordsList(c, f, l); });
    case Opcode::kQuery:
      return Reply(c, f.request_id, msg::QueryReply{DumpJson(Summary())});
    case Opcode::kAdmin:
      return With<msg::AdminRequest>(c, f,
                                     [&](const msg::AdminRequest& a) { OnAdmin(now, c, f, a); });
    default:
      return SendError(c, f.request_id,
                       Status(ErrorCode::kProtocolError,
                              "the tracker does not serve " + std::string(OpcodeName(f.op))));
  }
}

void Tracker::Impl::OnRegister(SteadyClock::time_point now, const std::shared_ptr<Conn>& c,
                               const Frame& f, const msg::Register& reg) {
  if (c->role != PeerRole::kServer) {
    return SendError(c, f.request_id, Status(ErrorCode::kInvalidArgument, "only servers register"));
  }
  std::string address;
  if (!reg.custom_addr.empty()) {
    bool has_port =
        reg.custom_addr.back() != ']' && reg.custom_addr.find(':') != std::string::npos &&
        (reg.custom_addr[0] == '[' || reg.custom_addr.find(':') == reg.custom_addr.rfind(':'));
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
}

void Tracker::Impl::OnAdmin(SteadyClock::time_point now, const std::shared_ptr<Conn>& c,
                            const Frame& f, const msg::AdminRequest& a) {
  if (options.admin_secret.empty()) {
    return SendError(c, f.request_id,
                     Status(ErrorCode::kUnauthorized,
                            "admin operations are off: the tracker has no "
                            "--admin-token-file"));
  }
  std::string want =
      HmacSha256Hex(options.admin_secret, c->session_id + "\n" + a.action + "\n" + a.device);
  if (!ConstantTimeEquals(a.proof, want)) {
    spdlog::warn("tracker: refused admin {} {} from {}: wrong admin token", EscapeForLog(a.action),
                 EscapeForLog(a.device), EscapeForLog(c->peer_name));
    return SendError(c, f.request_id, Status(ErrorCode::kUnauthorized, "wrong admin token"));
  }
  Status s = sched.Admin(now, a.action, a.device);
  if (!s.ok()) return SendError(c, f.request_id, s);
  spdlog::info("tracker: admin {} {} by {}", EscapeForLog(a.action), EscapeForLog(a.device),
               EscapeForLog(c->peer_name));
  Reply(c, f.request_id, msg::Empty{});
}

Status Tracker::Impl::TakeTuneProgress(SteadyClock::time_point now, const Conn& c,
                                       const msg::TuneProgress& p) {
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

}  // namespace crosstune::tracker
