// Connections on the tracker's port that speak TVM's tracker protocol: the magic that hands a
// connection to TvmPeers (tvm_peers.h, which maps TVM servers and clients onto the Scheduler),
// the limits on open TVM connections, and their input, one message at a time.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <string_view>

#include "crosstune/text.h"
#include "tracker_impl.h"

namespace crosstune::tracker {

Status Tracker::Impl::AdmitTvm(Conn& c) {
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

void Tracker::Impl::LeaveTvm(Conn& c) {
  if (!c.tvm_counted) return;
  c.tvm_counted = false;
  --tvm_total;
  auto it = tvm_by_peer.find(c.remote);
  if (it != tvm_by_peer.end() && --it->second == 0) tvm_by_peer.erase(it);
}

// TVM's client sends a message's length and body in two writes without TCP_NODELAY, so its
// body waits (Nagle) for the ack of the length, which a delayed ack holds back for tens of ms.
// Acking at once after each read keeps a request from waiting on that.
void Tracker::Impl::QuickAck(Conn& c) {
  int one = 1;
  ::setsockopt(c.socket.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

bool Tracker::Impl::StartTvm(const std::shared_ptr<Conn>& c) {
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

void Tracker::Impl::HandleTvmInput(const std::shared_ptr<Conn>& c) {
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

}  // namespace crosstune::tracker
