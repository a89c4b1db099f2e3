// A connection on the tracker's port, whichever protocol it speaks: reads into its buffer and the
// handling of what arrived, the write queue with one write in flight and its backpressure (reading
// pauses while replies queue unread), and closing, which tells the Scheduler (or TvmPeers) and
// fails the requests the tracker had sent the peer.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstring>

#include "crosstune/text.h"
#include "tracker_impl.h"

namespace crosstune::tracker {

Ms Tracker::Impl::ReadTimeout(const Conn& c) const {
  // TVM peers are silent while they wait for a grant or serve a session (hours, for a tuner).
  if (c.tvm) return std::chrono::hours(24 * 365);
  if (c.stage != Conn::Stage::kReady) return options.handshake_timeout;
  if (c.is_device) return options.scheduler.heartbeat_timeout + Ms(1000);
  return options.client_idle_timeout;
}

void Tracker::Impl::StartRead(const std::shared_ptr<Conn>& c) {
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
  c->socket.async_read_some(asio::buffer(c->in.data() + c->in_end, c->in.size() - c->in_end),
                            [self = shared_from_this(), c](boost::system::error_code ec, size_t n) {
                              if (c->stage == Conn::Stage::kClosed) return;
                              if (ec) return self->Close(c, ec.message());
                              c->in_end += n;
                              if (c->tvm) QuickAck(*c);
                              self->Pump(c);
                            });
}

void Tracker::Impl::Pump(const std::shared_ptr<Conn>& c) {
  // One failing handler ends its connection, never the tracker.
  try {
    HandleInput(c);
    Drain();
  } catch (const std::exception& e) {
    spdlog::error("tracker: internal error on a connection from {} ({}): {}", c->remote.to_string(),
                  EscapeForLog(c->peer_name), e.what());
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

void Tracker::Impl::Send(const std::shared_ptr<Conn>& c, std::string bytes) {
  if (c->stage == Conn::Stage::kClosed) return;
  if (c->out_bytes + bytes.size() > kMaxQueuedBytes) {
    // Not closed here: callers (TvmPeers among them) may still hold the connection's state.
    if (!c->close_after_write) {
      spdlog::warn("tracker: closing {}: it does not read what it is sent ({} bytes queued)",
                   EscapeForLog(c->peer_name), c->out_bytes);
      c->close_after_write = true;
      asio::post(
          io, [self = shared_from_this(), c] { self->Close(c, "does not read what it is sent"); });
    }
    return;
  }
  c->out_bytes += bytes.size();
  c->out.push_back(std::move(bytes));
  if (!c->writing) Write(c);
}

void Tracker::Impl::Write(const std::shared_ptr<Conn>& c) {
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

void Tracker::Impl::Close(const std::shared_ptr<Conn>& c, const std::string& why) {
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

std::shared_ptr<Conn> Tracker::Impl::ConnById(uint64_t id) {
  auto it = conns.find(id);
  return it == conns.end() ? nullptr : it->second;
}

}  // namespace crosstune::tracker
