// The Scheduler's calls: registrations, requests, admin actions, the clock, and the grant round
// that hands free devices to waiting requests in the grant policy's order. Leases and health live
// in leases.cc, the parts it composes in device_registry, request_queue and grant_policy.
#include "crosstune/tracker/scheduler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <stdexcept>

#include "crosstune/crypto.h"
#include "crosstune/numbers.h"
#include "durations.h"

namespace crosstune::tracker {
namespace {

std::unique_ptr<GrantPolicy> PolicyOrThrow(const SchedulerOptions& o) {
  auto p = MakeGrantPolicy(o.policy, o.aging_step);
  if (!p.ok()) throw std::invalid_argument(p.status().message());
  return std::move(p).value();
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, TimePoint now)
    : options_(std::move(options)),
      started_(now),
      policy_(PolicyOrThrow(options_)),
      queue_(*policy_, [this](const std::string& key, const std::string& holder) {
        return Held(key, holder);
      }) {
  if (!options_.make_token) options_.make_token = [] { return RandomHex(16); };
  unix_ms = [] {
    return std::chrono::duration_cast<Ms>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
}

int Scheduler::Held(const std::string& key, const std::string& holder) const {
  int n = 0;
  for (const auto& [token, l] : leases_) n += l.key == key && l.holder == holder;
  return n;
}

// --- servers ------------------------------------------------------------------------------------

Expected<msg::RegisterReply> Scheduler::RegisterDevice(TimePoint now, uint64_t conn,
                                                       const msg::Register& reg,
                                                       const std::string& address,
                                                       Protocol protocol) {
  if (reg.key.empty()) return Status(ErrorCode::kInvalidArgument, "register: empty key");
  if (address.empty()) return Status(ErrorCode::kInvalidArgument, "register: no address");
  const std::string& name = address;
  if (Device* old = devices_.ByName(name)) {
    if (old->protocol != protocol) {
      return Status(ErrorCode::kInvalidArgument, "register: " + name + " is registered by a " +
                                                     ProtocolName(old->protocol) + " server");
    }
    // A live registration is replaced only by the same server (a reconnect the tracker has
    // not noticed yet), never by another peer claiming its address: that would end the
    // holder's lease and send the next grants' tokens to the impostor.
    if (old->conn != conn && (reg.server_id.empty() || reg.server_id != old->server_id)) {
      return Status(ErrorCode::kBusy, "register: " + name +
                                          " is registered by another live server; it may "
                                          "register once that server is gone");
    }
    if (old->conn != conn) {
      Push({.kind = Action::Kind::kCloseConn, .conn = old->conn, .device = name});
    }
  }
  bool fresh = false;
  Device& d = devices_.Register(name, reg.key, conn, fresh);
  d.address = address;
  d.tags = reg.tags;
  d.info = reg.info;
  d.server_id = reg.server_id;
  d.last_heartbeat = now;
  if (fresh) {
    d.registered_at = now;
    d.free_since = now;
    d.protocol = protocol;
    d.offered = protocol != Protocol::kTvm;
  }
  Health& h = devices_.health(name);
  if (h.quarantined) h.next_self_check = now;  // check a quarantined server again at once

  // Reconcile the server's token with the lease the tracker knows for this device.
  std::string keep;
  for (auto& [token, l] : leases_) {
    if (l.device != name) continue;
    if (!reg.lease_token.empty() && ConstantTimeEquals(token, reg.lease_token)) keep = token;
  }
  std::vector<std::string> stale, in_flight;
  for (auto& [token, l] : leases_) {
    if (l.device != name || token == keep) continue;
    (l.acked ? stale : in_flight).push_back(token);
  }
  for (const auto& t : stale) EndLease(now, t, "server restarted", false);
  // A grant whose token this server does not hold was never confirmed and never will be (a late
  // ack would start a second lease beside the next grant): its request goes back to the queue.
  for (const auto& t : in_flight) Requeue(t);
  devices_.Unreserve(name);
  devices_.SetLeaseToken(d, keep);
  // The server holds the token of a grant not confirmed yet: its registration confirms it.
  if (!keep.empty() && !leases_[keep].acked) TokenAcked(now, conn, keep);
  if (!keep.empty() && d.busy_since == TimePoint{}) d.busy_since = now;
  // A session running under the kept token claims a one-session lease the tracker restored
  // without knowing whether it was claimed.
  if (!keep.empty() && reg.session_active) leases_[keep].claimed = true;
  msg::RegisterReply reply;
  reply.device = name;
  reply.heartbeat_ms = static_cast<uint32_t>(options_.heartbeat_interval.count());
  reply.lease_token = keep;
  Schedule(now);
  return reply;
}

void Scheduler::SetOffered(TimePoint now, uint64_t conn, bool offered) {
  Device* d = devices_.ByConn(conn);
  if (!d || d->protocol != Protocol::kTvm) return;
  d->offered = offered;
  d->last_heartbeat = now;
  Schedule(now);
}

void Scheduler::Heartbeat(TimePoint now, uint64_t conn, const msg::ServerHeartbeat& hb) {
  Device* d = devices_.ByConn(conn);
  if (!d) return;
  d->last_heartbeat = now;
  // A server that lost a push (or a revocation) is told again.
  if (hb.lease_token != d->lease_token) {
    auto it = leases_.find(d->lease_token);
    if (d->lease_token.empty() || (it != leases_.end() && it->second.acked)) {
      Push({.kind = Action::Kind::kPushToken,
            .conn = conn,
            .device = d->name,
            .token = d->lease_token});
    }
  }
}

void Scheduler::RemoveDevice(TimePoint now, Device& d, const std::string& why) {
  std::string name = d.name;
  std::vector<std::string> tokens;
  for (auto& [token, l] : leases_) {
    if (l.device == name) tokens.push_back(token);
  }
  for (const auto& t : tokens) {
    Lease& l = leases_[t];
    if (!l.acked && l.waiter) {
      // The client never heard of this grant: put its request back where it was.
      Requeue(t);
      continue;
    }
    // A server that dies under a session is an infrastructure failure.
    EndLease(now, t, "device lost: " + why, l.claimed);
  }
  devices_.Remove(name);
  Schedule(now);
}

void Scheduler::DeviceDisconnected(TimePoint now, uint64_t conn) {
  Device* d = devices_.ByConn(conn);
  if (!d) {
    devices_.ForgetConn(conn);
    return;
  }
  RemoveDevice(now, *d, "registration connection closed");
}

// --- clients ------------------------------------------------------------------------------------

void Scheduler::Request(TimePoint now, uint64_t conn, uint32_t request_id,
                        const msg::DeviceRequest& req, Protocol protocol) {
  auto fail = [&](Status s) {
    Push({.kind = Action::Kind::kFail,
          .conn = conn,
          .request_id = request_id,
          .status = std::move(s)});
  };
  if (req.key.empty()) return fail(Status(ErrorCode::kInvalidArgument, "request: empty key"));
  const int32_t max_priority = options_.max_priority;
  const int32_t priority = std::clamp(req.priority, -max_priority, max_priority);
  if (priority != req.priority && protocol == Protocol::kCrosstune) {
    return fail(Status(ErrorCode::kInvalidArgument,
                       "priority " + std::to_string(req.priority) + " is not in " +
                           DescribeRange(int64_t{-max_priority}, int64_t{max_priority}) +
                           " (the tracker's --max-priority)"));
  }
  for (const auto& c : req.constraints) {
    Status s = ParseConstraint(c);
    if (!s.ok()) return fail(s);
  }
  // "Could ever match": any registered device of the key, whatever its state now.
  if (now - started_ >= options_.startup_grace) {
    int of_key = 0;
    bool any = false;
    for (const Device* d : devices_.OfKey(req.key)) {
      if (d->protocol != protocol) continue;
      of_key++;
      if (!any && MatchesConstraints(d->tags, d->info, req.constraints)) any = true;
    }
    if (!any) {
      stats_[req.key].no_device++;
      std::string kind = protocol == Protocol::kTvm ? "TVM " : "";
      std::string why = of_key == 0
                            ? "no " + kind + "device is registered with key '" + req.key + "'"
                            : "none of the " + std::to_string(of_key) + " devices with key '" +
                                  req.key + "' can ever match the constraints";
      return fail(Status(ErrorCode::kNoDevice, why));
    }
  }
  Waiter w;
  w.seq = queue_.NextSeq();
  w.conn = conn;
  w.request_id = request_id;
  w.req = req;
  w.req.priority = priority;
  w.protocol = protocol;
  w.enqueued = now;
  Ms timeout = req.queue_timeout_ms ? Ms(req.queue_timeout_ms) : options_.default_queue_timeout;
  w.deadline = now + timeout;
  queue_.Add(std::move(w));
  Schedule(now);
}

Status Scheduler::Cancel(TimePoint now, uint64_t conn, uint32_t request_id) {
  if (queue_.Remove(conn, request_id)) {
    Push({.kind = Action::Kind::kFail,
          .conn = conn,
          .request_id = request_id,
          .status = Status(ErrorCode::kBusy, "request cancelled")});
    SendQueueUpdates(now, /*full=*/false);
    return Status::Ok();
  }
  return Status(ErrorCode::kNotFound, "no queued request " + std::to_string(request_id));
}

void Scheduler::ClientDisconnected(TimePoint now, uint64_t conn) {
  queue_.RemoveConn(conn);
  std::vector<std::string> tokens;
  for (auto& [token, l] : leases_) {
    if (l.client_conn == conn) tokens.push_back(token);
  }
  for (const auto& t : tokens) {
    auto it = leases_.find(t);
    if (it == leases_.end()) continue;
    Lease& l = it->second;
    // A one-session lease whose session is running ends with that session, not with the
    // client's tracker connection (the server reports SessionEnded).
    if (!l.multi_session && l.claimed) {
      l.client_conn = 0;
      continue;
    }
    if (!l.acked) {
      std::string device = l.device;  // the lease goes first
      leases_.erase(it);
      if (Device* d = devices_.ByName(device)) {
        // Never told: revoke quietly.
        devices_.SetLeaseToken(*d, "");
        Push({.kind = Action::Kind::kPushToken, .conn = d->conn, .device = d->name});
      }
      continue;
    }
    EndLease(now, t, "client disconnected", false);
  }
  Schedule(now);
}

// --- admins -------------------------------------------------------------------------------------

Status Scheduler::Admin(TimePoint now, const std::string& action, const std::string& device) {
  Device* d = devices_.ByName(device);
  if (!d && !devices_.FindHealth(device)) {
    return Status(ErrorCode::kNotFound, "no device '" + device + "'");
  }
  Health& h = devices_.health(device);
  if (action == "drain") {
    h.draining = true;
  } else if (action == "undrain") {
    h.draining = false;
  } else if (action == "kick") {
    if (!d || d->lease_token.empty()) {
      return Status(ErrorCode::kNotFound, "device '" + device + "' holds no lease");
    }
    EndLease(now, d->lease_token, "kicked by an admin", false);
    // A TVM server takes no revocation: closing its tracker connection is all the tracker can do.
    if (d->protocol == Protocol::kTvm) {
      Push({.kind = Action::Kind::kCloseConn, .conn = d->conn, .device = d->name});
    }
  } else {
    return Status(ErrorCode::kInvalidArgument,
                  "unknown admin action '" + action + "' (drain, undrain, kick)");
  }
  Schedule(now);
  return Status::Ok();
}

// --- time ---------------------------------------------------------------------------------------

void Scheduler::Tick(TimePoint now) {
  std::vector<Device*> dead;
  for (auto& [name, d] : devices_.all()) {
    // TVM servers send no heartbeat (their health is the connection and a port probe).
    if (d.protocol == Protocol::kTvm) continue;
    if (now - d.last_heartbeat >= options_.heartbeat_timeout) dead.push_back(&d);
  }
  for (Device* d : dead) {
    Push({.kind = Action::Kind::kCloseConn, .conn = d->conn, .device = d->name});
    RemoveDevice(now, *d, "no heartbeat for " + Seconds(now - d->last_heartbeat));
  }

  ExpireLeases(now);

  for (Waiter& w : queue_.TakeExpired(now)) {
    const std::string& key = w.req.key;
    stats_[key].timeouts++;
    Push({.kind = Action::Kind::kFail,
          .conn = w.conn,
          .request_id = w.request_id,
          .status =
              Status(ErrorCode::kTimeout, "no '" + key + "' device became free within " +
                                              Seconds(now - w.enqueued) + " (queue timeout)")});
  }

  for (auto& [name, h] : devices_.healths()) {
    if (!h.quarantined || h.self_check_pending || now < h.next_self_check) continue;
    Device* d = devices_.ByName(name);
    if (!d) continue;
    h.self_check_pending = true;
    Push({.kind = Action::Kind::kSelfCheck, .conn = d->conn, .device = name});
  }
  Schedule(now);
  SendQueueUpdates(now, /*full=*/true);  // the far-back positions, and aging
}

// The grant round: each key's free devices go to its waiting requests in the policy's order,
// each request the first free device (in the registry's offer order) that it matches.
void Scheduler::Schedule(TimePoint now) {
  for (const auto& [key, waiting] : queue_.queues()) {
    if (waiting.empty()) continue;
    std::vector<Device*> free = devices_.Free(key);
    if (free.empty()) continue;
    bool any = false;
    for (Waiter& w : queue_.Arranged(key)) {
      if (free.empty()) break;
      for (auto it = free.begin(); it != free.end(); ++it) {
        if ((*it)->protocol == w.protocol &&
            MatchesConstraints((*it)->tags, (*it)->info, w.req.constraints)) {
          StartLease(now, **it, w);
          w.seq = 0;  // granted: removed below
          any = true;
          free.erase(it);
          break;
        }
      }
    }
    if (any) queue_.DropGranted(key);
  }
  SendQueueUpdates(now, /*full=*/false);
}

void Scheduler::SendQueueUpdates(TimePoint now, bool full) {
  // Unconstrained crosstune requests of a key all wait for the same devices: counted once.
  std::map<std::string, int> unconstrained_matching;
  auto note = [&](const Waiter& w) {
    const std::string& key = w.req.key;
    bool plain = w.req.constraints.empty() && w.protocol == Protocol::kCrosstune;
    auto cached = plain ? unconstrained_matching.find(key) : unconstrained_matching.end();
    int matching = 0;
    if (cached != unconstrained_matching.end()) {
      matching = cached->second;
    } else {
      for (const Device* d : devices_.OfKey(key)) {
        if (d->protocol == w.protocol && MatchesConstraints(d->tags, d->info, w.req.constraints)) {
          matching++;
        }
      }
      if (plain) unconstrained_matching[key] = matching;
    }
    return matching == 0 ? std::string("no registered device matches now; waiting for one")
                         : "waiting for one of " + std::to_string(matching) + " matching devices";
  };
  queue_.SendPositions(now, full, options_.eager_positions, options_.position_interval, note, out_);
}

// --- snapshot -----------------------------------------------------------------------------------

Snapshot Scheduler::Snap(TimePoint now) const {
  Snapshot s;
  s.uptime_seconds = ToMs(now - started_) / 1000.0;
  s.leases_active = leases_.size();
  s.policy = std::string(policy_->name());
  for (const auto& [name, d] : devices_.all()) {
    Snapshot::DeviceView v;
    v.name = name;
    v.key = d.key;
    v.address = d.address;
    v.tags = d.tags;
    v.protocol = d.protocol;
    v.arch = d.info.arch;
    v.triple = d.info.triple;
    v.cpu = d.info.cpu_model;
    v.cores = d.info.cores;
    v.build_targets = d.info.build_targets;
    v.sessions = d.sessions;
    if (const Health* h = devices_.FindHealth(name)) {
      v.draining = h->draining;
      v.quarantined = h->quarantined;
      v.consecutive_failures = h->consecutive_failures;
      v.infra_failures = h->infra_failures;
    }
    v.busy_seconds = d.busy_seconds;
    if (d.busy_since != TimePoint{}) v.busy_seconds += ToMs(now - d.busy_since) / 1000.0;
    double up = ToMs(now - d.registered_at) / 1000.0;
    v.utilisation = up > 0 ? std::min(1.0, v.busy_seconds / up) : 0;
    auto l = leases_.find(d.lease_token);
    if (l != leases_.end()) {
      v.holder = l->second.holder;
      v.lease_remaining_ms = std::max<int64_t>(0, ToMs(l->second.expires_at - now));
      v.state = !l->second.acked                                ? "granting"
                : l->second.claimed && !l->second.multi_session ? "in-session"
                                                                : "leased";
    } else if (v.quarantined) {
      v.state = "quarantined";
    } else if (v.draining) {
      v.state = "drained";
    } else {
      v.state = "free";
    }
    if (v.state == "free" && devices_.Reserved(name)) v.state = "reserved";
    // A TVM server whose match key is out (a session, or a key not used yet) until it re-offers.
    if (v.state == "free" && !d.offered) v.state = "busy";
    s.devices.push_back(std::move(v));
  }
  std::set<std::string> keys;
  for (const auto& [k, q] : queue_.queues()) keys.insert(k);
  for (const auto& [k, st] : stats_) keys.insert(k);
  for (const auto& [name, d] : devices_.all()) keys.insert(d.key);
  for (const std::string& key : keys) {
    Snapshot::KeyView kv;
    kv.key = key;
    for (const Waiter& w : queue_.InGrantOrder(key)) {
      kv.queue.push_back({w.req.holder, w.req.priority, policy_->EffectivePriority(w, now),
                          ToMs(now - w.enqueued), w.protocol});
    }
    auto st = stats_.find(key);
    if (st != stats_.end()) {
      kv.grants = st->second.grants;
      kv.wait_seconds_sum = st->second.wait_sum;
      kv.wait_seconds_max = st->second.wait_max;
      kv.timeouts = st->second.timeouts;
      kv.no_device = st->second.no_device;
    }
    s.keys.push_back(std::move(kv));
  }
  for (const auto& [name, h] : devices_.healths()) {
    if (h.quarantined && !devices_.all().count(name)) s.quarantined_offline.push_back(name);
  }
  return s;
}

}  // namespace crosstune::tracker
