// The Scheduler's leases and the health they report: a grant's token pushed to its server, the
// server's ack (then the client hears of it), the session that claims it, renewals and every way a
// lease ends; and the failure counts that quarantine a device until its self-check passes.
#include <algorithm>

#include "crosstune/tracker/scheduler.h"
#include "durations.h"

namespace crosstune::tracker {

void Scheduler::StartLease(TimePoint now, Device& d, Waiter w) {
  Lease l;
  l.token = options_.make_token();
  l.device = d.name;
  l.key = d.key;
  l.holder = w.req.holder;
  l.client_conn = w.conn;
  l.granted_at = now;
  l.lease_ms =
      w.req.lease_ms ? std::min(Ms(w.req.lease_ms), options_.max_lease) : options_.default_lease;
  l.expires_at = now + l.lease_ms;
  l.claim_deadline = now + options_.claim_timeout;  // for the server's ack, then the claim
  l.reattach_deadline = TimePoint::max();
  l.multi_session = w.req.multi_session;
  l.granted_unix_ms = unix_ms();
  l.waiter = std::move(w);
  devices_.SetLeaseToken(d, l.token);
  if (d.protocol == Protocol::kTvm) d.offered = false;  // its match key is handed out
  d.busy_since = now;
  Push({.kind = Action::Kind::kPushToken,
        .conn = d.conn,
        .device = d.name,
        .token = l.token,
        .holder = l.holder});
  leases_[l.token] = std::move(l);
}

void Scheduler::TokenAcked(TimePoint now, uint64_t conn, const std::string& token) {
  Device* d = devices_.ByConn(conn);
  auto it = leases_.find(token);
  // Only the token the device carries now: a late ack of one it was given before is stale.
  if (!d || it == leases_.end() || it->second.device != d->name || it->second.acked ||
      d->lease_token != token) {
    return;
  }
  Lease& l = it->second;
  l.acked = true;
  l.claim_deadline = now + options_.claim_timeout;
  Waiter w = std::move(*l.waiter);
  l.waiter.reset();
  KeyStats& ks = stats_[l.key];
  double waited = ToMs(now - w.enqueued) / 1000.0;
  ks.grants++;
  ks.wait_sum += waited;
  ks.wait_max = std::max(ks.wait_max, waited);
  // Persisted before the client hears of it: a tracker killed in between must still know the
  // lease when it restarts.
  Push({.kind = Action::Kind::kLeaseStarted,
        .device = d->name,
        .token = token,
        .lease = Record(now, l)});
  Action a{.kind = Action::Kind::kGrant,
           .conn = w.conn,
           .request_id = w.request_id,
           .device = d->name,
           .token = token};
  a.grant.device = d->name;
  a.grant.address = d->address;
  a.grant.lease_token = token;
  a.grant.lease_ms = static_cast<uint32_t>(l.lease_ms.count());
  a.grant.key = l.key;
  Push(std::move(a));
}

Status Scheduler::SessionStarted(TimePoint /*now*/, uint64_t conn, const std::string& token) {
  Device* d = devices_.ByConn(conn);
  if (!d) return Status(ErrorCode::kNotFound, "not a registered device");
  auto it = leases_.find(token);
  if (it == leases_.end() || it->second.device != d->name) {
    return Status(ErrorCode::kUnauthorized, "lease is not current on " + d->name);
  }
  it->second.claimed = true;
  d->sessions++;
  return Status::Ok();
}

void Scheduler::SessionEnded(TimePoint now, uint64_t conn, const msg::SessionEnded& ended) {
  Device* d = devices_.ByConn(conn);
  if (!d) return;
  auto outcome = static_cast<msg::Outcome>(ended.outcome);
  bool infra = outcome == msg::Outcome::kInfraFailure;
  auto it = leases_.find(ended.lease_token);
  if (it != leases_.end() && it->second.device == d->name && !it->second.multi_session) {
    std::string what = infra                                 ? "server failure"
                       : outcome == msg::Outcome::kUserError ? "session ended with an error"
                                                             : "session ended";
    if (!ended.message.empty()) what += ": " + ended.message;
    EndLease(now, ended.lease_token, what, infra, outcome == msg::Outcome::kUserError);
  } else if (outcome != msg::Outcome::kUserError) {
    CountFailure(now, d->name, infra);
  }
  Schedule(now);
}

Expected<msg::LeaseInfo> Scheduler::Renew(TimePoint now, uint64_t conn,
                                          const msg::RenewLease& renew) {
  auto it = leases_.find(renew.lease_token);
  if (it == leases_.end() || !it->second.acked) {
    return Status(ErrorCode::kNotFound, "lease is not active (expired, released or kicked)");
  }
  Lease& l = it->second;
  Ms len = renew.lease_ms ? std::min(Ms(renew.lease_ms), options_.max_lease) : l.lease_ms;
  l.expires_at = now + len;
  l.client_conn = conn;  // re-attaches a restored lease
  l.reattach_deadline = TimePoint::max();
  Push({.kind = Action::Kind::kLeaseRenewed,
        .device = l.device,
        .token = l.token,
        .lease = Record(now, l)});
  msg::LeaseInfo info;
  info.device = l.device;
  if (Device* d = devices_.ByName(l.device)) info.address = d->address;
  info.remaining_ms = static_cast<uint64_t>(len.count());
  return info;
}

Expected<Scheduler::ActiveLease> Scheduler::FindActiveLease(const std::string& token) const {
  auto it = leases_.find(token);
  if (it == leases_.end() || !it->second.acked) {
    return Status(ErrorCode::kNotFound, "lease is not active (expired, released or kicked)");
  }
  return ActiveLease{it->second.device, it->second.key, it->second.holder};
}

Status Scheduler::Release(TimePoint now, const msg::ReleaseLease& release) {
  auto it = leases_.find(release.lease_token);
  if (it == leases_.end()) return Status(ErrorCode::kNotFound, "lease is not active");
  auto outcome = static_cast<msg::Outcome>(release.outcome);
  bool infra = outcome == msg::Outcome::kUnreachable || outcome == msg::Outcome::kInfraFailure;
  std::string what = outcome == msg::Outcome::kUnreachable ? "client could not reach the device"
                     : infra                               ? "client reported a server failure"
                                                           : "released";
  if (!release.message.empty()) what += ": " + release.message;
  EndLease(now, release.lease_token, what, infra);
  Schedule(now);
  return Status::Ok();
}

void Scheduler::RestoreLease(TimePoint now, const LeaseRecord& r, int64_t now_unix_ms) {
  int64_t remaining = r.expires_unix_ms - now_unix_ms;
  if (remaining <= 0) {
    Action a{.kind = Action::Kind::kLeaseEnded,
             .device = r.device,
             .token = r.token,
             .outcome = "expired while the tracker was down",
             .lease = r};
    Push(std::move(a));
    return;
  }
  Lease l;
  l.token = r.token;
  l.device = r.device;
  l.key = r.key;
  l.holder = r.holder;
  l.granted_at = now - Ms(std::max<int64_t>(0, now_unix_ms - r.granted_unix_ms));
  l.expires_at = now + Ms(remaining);
  l.reattach_deadline = now + options_.reattach_window;
  l.lease_ms = Ms(r.lease_ms);
  l.multi_session = r.multi_session;
  l.acked = true;
  // Whether a one-session grant was claimed is not stored: it counts as claimed only when its
  // server re-registers with a session running under it (RegisterDevice). Otherwise it goes
  // back to the pool once the holder had the re-attach window to open its session, instead
  // of blocking the device for the whole lease.
  l.claimed = false;
  l.claim_deadline = l.multi_session ? TimePoint::max() : l.reattach_deadline;
  l.granted_unix_ms = r.granted_unix_ms;
  devices_.Reserve(r.device);
  leases_[r.token] = std::move(l);
}

void Scheduler::EndLease(TimePoint now, const std::string& token, const std::string& outcome,
                         bool infra_failure, bool neutral) {
  auto it = leases_.find(token);
  if (it == leases_.end()) return;
  Lease l = std::move(it->second);
  leases_.erase(it);
  if (devices_.Reserved(l.device)) {
    bool other = false;
    for (const auto& [t, rest] : leases_) other |= rest.device == l.device;
    if (!other) devices_.Unreserve(l.device);
  }
  if (Device* d = devices_.ByName(l.device); d && d->lease_token == token) {
    devices_.SetLeaseToken(*d, "");
    if (d->busy_since != TimePoint{}) d->busy_seconds += ToMs(now - d->busy_since) / 1000.0;
    d->busy_since = TimePoint{};
    d->free_since = now;
    Push({.kind = Action::Kind::kPushToken, .conn = d->conn, .device = d->name});
  }
  if (l.acked) {
    Push({.kind = Action::Kind::kLeaseEnded,
          .device = l.device,
          .token = token,
          .outcome = outcome,
          .lease = Record(now, l)});
  }
  // Only sessions that happened (or were attempted) say something about the device's health.
  // A user's kernel failing says nothing about the device either way.
  if (!neutral && (l.claimed || infra_failure)) CountFailure(now, l.device, infra_failure);
}

void Scheduler::Requeue(const std::string& token) {
  auto it = leases_.find(token);
  if (it == leases_.end()) return;
  std::optional<Waiter> w = std::move(it->second.waiter);
  leases_.erase(it);
  if (w) queue_.Add(std::move(*w));
}

void Scheduler::ExpireLeases(TimePoint now) {
  std::vector<std::pair<std::string, std::string>> ending;  // token, outcome
  std::vector<std::string> unacked;
  for (auto& [token, l] : leases_) {
    if (!l.acked) {
      if (now >= l.claim_deadline) unacked.push_back(token);
    } else if (now >= l.expires_at) {
      ending.emplace_back(token, "expired (not renewed)");
    } else if (!l.multi_session && !l.claimed && now >= l.claim_deadline) {
      ending.emplace_back(token, "unclaimed: no session within " + Seconds(options_.claim_timeout));
    } else if (l.client_conn == 0 && (!l.claimed || l.multi_session) &&
               now >= l.reattach_deadline) {
      ending.emplace_back(token, "holder did not re-attach after a tracker restart");
    }
  }
  for (const auto& [token, outcome] : ending) EndLease(now, token, outcome, false);
  for (const auto& token : unacked) {
    // The server never confirmed the token: requeue the request, revoke, try elsewhere.
    std::string device = leases_[token].device;
    Requeue(token);
    if (Device* d = devices_.ByName(device)) {
      devices_.SetLeaseToken(*d, "");
      Push({.kind = Action::Kind::kPushToken, .conn = d->conn, .device = d->name});
      CountFailure(now, d->name, true);
    }
  }
}

// --- health -------------------------------------------------------------------------------------

void Scheduler::SelfCheckResult(TimePoint now, const std::string& device, const Status& result) {
  Health& h = devices_.health(device);
  h.self_check_pending = false;
  if (!h.quarantined) return;
  if (result.ok()) {
    h.quarantined = false;
    h.consecutive_failures = 0;
    Schedule(now);
  } else {
    h.next_self_check = now + options_.self_check_interval;
  }
}

void Scheduler::CountFailure(TimePoint now, const std::string& device, bool failure) {
  devices_.CountFailure(now, device, failure, options_.quarantine_after,
                        options_.self_check_interval);
}

LeaseRecord Scheduler::Record(TimePoint now, const Lease& l) const {
  LeaseRecord r;
  r.token = l.token;
  r.device = l.device;
  r.key = l.key;
  r.holder = l.holder;
  r.granted_unix_ms = l.granted_unix_ms;
  r.expires_unix_ms = unix_ms() + std::max<int64_t>(0, ToMs(l.expires_at - now));
  r.lease_ms = static_cast<uint32_t>(l.lease_ms.count());
  r.multi_session = l.multi_session;
  return r;
}

}  // namespace crosstune::tracker
