// The tracker's lease bookkeeping: the Scheduler's actions carried out (lease tokens pushed to
// servers, grants sent only once their lease is committed, queue updates, failures, closes), the
// lease rows written to the store in group commits, the leases restored at start, and the
// self-check of a quarantined device. The leases themselves are the Scheduler's (leases.cc).
#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/post.hpp>

#include "crosstune/text.h"
#include "tcp_probe.h"
#include "tracker_impl.h"

namespace crosstune::tracker {

Status Tracker::Impl::RestoreLeases() {
  CT_ASSIGN_OR_RETURN(auto leases, store->ActiveLeases());
  auto now = SteadyClock::now();
  for (const auto& l : leases) {
    spdlog::info("tracker: restored lease on {} held by {}", l.device, l.holder);
    sched.RestoreLease(now, l, sched.unix_ms());
  }
  return Status::Ok();
}

void Tracker::Impl::Drain() {
  while (sched.HasActions()) {
    for (Action& a : sched.TakeActions()) Execute(a);
  }
}

void Tracker::Impl::Execute(Action& a) {
  using K = Action::Kind;
  auto c = ConnById(a.conn);
  if (c && c->tvm && tvm->Execute(SteadyClock::now(), a)) return;
  int64_t unix_now = sched.unix_ms();
  switch (a.kind) {
    case K::kPushToken: {
      if (!c) return;
      uint64_t cid = c->id;
      std::string token = a.token;
      Ask(c, Opcode::kGrant, msg::SetLease{a.token, a.holder}, [this, cid, token](const Frame& f) {
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

void Tracker::Impl::OpenBatch() {
  if (batch_open) return;
  if (Status s = store->Begin(); !s.ok()) {
    spdlog::warn("{}", s.ToString());
    return;
  }
  batch_open = true;
  asio::post(io, [self = shared_from_this()] { self->CommitBatch(); });
}

void Tracker::Impl::CommitBatch() {
  if (!batch_open) return;
  batch_open = false;
  if (Status s = store->Commit(); !s.ok()) spdlog::warn("{}", s.ToString());
  auto grants = std::move(held_grants);
  held_grants.clear();
  for (auto& [id, bytes] : grants) {
    if (auto c = ConnById(id)) Send(c, std::move(bytes));
  }
}

void Tracker::Impl::SelfCheck(const std::shared_ptr<Conn>& c, const std::string& device) {
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

void Tracker::Impl::Probe(const std::string& address, std::function<void(Status)> done) {
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

}  // namespace crosstune::tracker
