#include "crosstune/tracker/scheduler.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include "crosstune/crypto.h"
#include "crosstune/numbers.h"

namespace crosstune::tracker {
namespace {

int64_t ToMs(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<Ms>(d).count();
}

std::string Seconds(std::chrono::steady_clock::duration d) {
  return std::to_string(ToMs(d) / 1000) + " s";
}

// Splits "name<op>value"; op is one of = != >= <=, or the whole text is "+feature".
struct Constraint {
  std::string name, op, value;
};

std::optional<Constraint> Split(const std::string& text) {
  if (text.size() > 1 && text[0] == '+') return Constraint{"feature", "+", text.substr(1)};
  for (const char* op : {"!=", ">=", "<=", "="}) {
    size_t at = text.find(op);
    if (at != std::string::npos && at > 0) {
      std::string value = text.substr(at + std::string_view(op).size());
      if (value.empty()) return std::nullopt;
      return Constraint{text.substr(0, at), op, value};
    }
  }
  return std::nullopt;
}

std::optional<double> Number(const std::string& s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // "nan" and "inf" parse, but nan compares false both ways, so "cores>=nan" would match
  // every device: only finite numbers are numbers here.
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::string> Attribute(const std::map<std::string, std::string>& tags,
                                     const msg::DeviceInfo& info, const std::string& name) {
  if (auto it = tags.find(name); it != tags.end()) return it->second;
  if (name == "arch") return info.arch;
  if (name == "triple") return info.triple;
  if (name == "cpu") return info.cpu_model;
  if (name == "cores") return std::to_string(info.cores);
  if (name == "memory_mb") return std::to_string(info.memory_bytes >> 20);
  if (name == "gpus") return std::to_string(info.gpus.size());
  if (name == "gpu_arch") return info.gpus.empty() ? std::string() : info.gpus.front().arch;
  if (name == "os") return info.os;
  if (name == "version") return info.version;
  return std::nullopt;
}

}  // namespace

const char* ProtocolName(Protocol p) { return p == Protocol::kTvm ? "tvm" : "crosstune"; }

Scheduler::Scheduler(SchedulerOptions options, TimePoint now)
    : options_(std::move(options)), started_(now) {
  if (!options_.make_token) options_.make_token = [] { return RandomHex(16); };
  unix_ms = [] {
    return std::chrono::duration_cast<Ms>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
}

Status Scheduler::ParseConstraint(const std::string& text) {
  auto c = Split(text);
  if (!c) {
    return Status(
        ErrorCode::kInvalidArgument,
        "bad constraint '" + text +
            "': expected name=value, name!=value, name>=number, name<=number or +feature");
  }
  if ((c->op == ">=" || c->op == "<=") && !Number(c->value)) {
    return Status(ErrorCode::kInvalidArgument,
                  "bad constraint '" + text + "': " + c->op + " needs a number");
  }
  return Status::Ok();
}

bool Scheduler::Matches(const std::map<std::string, std::string>& tags, const msg::DeviceInfo& info,
                        const std::vector<std::string>& constraints) {
  for (const std::string& text : constraints) {
    auto c = Split(text);
    if (!c) return false;
    if (c->op == "+") {
      const auto& f = info.cpu_features;
      if (std::find(f.begin(), f.end(), c->value) == f.end() && !tags.count(c->value)) {
        return false;
      }
      continue;
    }
    auto value = Attribute(tags, info, c->name);
    if (c->op == "=") {
      if (!value || *value != c->value) return false;
    } else if (c->op == "!=") {
      if (value && *value == c->value) return false;
    } else {
      if (!value) return false;
      auto have = Number(*value);
      auto want = Number(c->value);
      if (!have || !want) return false;
      if (c->op == ">=" ? *have < *want : *have > *want) return false;
    }
  }
  return true;
}

Scheduler::Device* Scheduler::DeviceByConn(uint64_t conn) {
  auto it = device_by_conn_.find(conn);
  return it == device_by_conn_.end() ? nullptr : DeviceByName(it->second);
}

Scheduler::Device* Scheduler::DeviceByName(const std::string& name) {
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : &it->second;
}

void Scheduler::SetLeaseToken(Device& d, const std::string& token) {
  d.lease_token = token;
  if (token.empty()) {
    idle_by_key_[d.key].insert(&d);
  } else {
    idle_by_key_[d.key].erase(&d);
  }
}

bool Scheduler::Grantable(const Device& d) const {
  if (!d.lease_token.empty() || !d.offered) return false;
  auto h = health_.find(d.name);
  if (h != health_.end() && (h->second.quarantined || h->second.draining)) return false;
  // A restored lease whose server has not re-registered with its token yet holds the device.
  return reserved_.empty() || !reserved_.count(d.name);
}

int64_t Scheduler::EffectivePriority(const Waiter& w, TimePoint now) const {
  int64_t aged =
      options_.aging_step.count() > 0 ? ToMs(now - w.enqueued) / options_.aging_step.count() : 0;
  return int64_t{w.req.priority} + aged;
}

// Aging is continuous: a request gains one priority level per aging_step waited, so A goes
// before B when prio_A*step - enqueued_A > prio_B*step - enqueued_B. Both sides age alike, so
// the order never changes with time and each queue stays sorted as it is built.
bool Scheduler::Before(const Waiter& a, const Waiter& b) const {
  int64_t step = options_.aging_step.count();
  int64_t ka =
      int64_t{a.req.priority} * step - (step > 0 ? ToMs(a.enqueued.time_since_epoch()) : 0);
  int64_t kb =
      int64_t{b.req.priority} * step - (step > 0 ? ToMs(b.enqueued.time_since_epoch()) : 0);
  if (step == 0) {
    ka = a.req.priority;
    kb = b.req.priority;
  }
  if (ka != kb) return ka > kb;
  return a.seq < b.seq;
}

void Scheduler::Enqueue(Waiter w) {
  auto& q = queues_[w.req.key];
  auto at = std::upper_bound(q.begin(), q.end(), w,
                             [this](const Waiter& a, const Waiter& b) { return Before(a, b); });
  dirty_.insert(w.req.key);
  if (w.last_position == 0) unannounced_[w.req.key]++;
  q.insert(at, std::move(w));
}

// --- servers ------------------------------------------------------------------------------------

Expected<msg::RegisterReply> Scheduler::RegisterDevice(TimePoint now, uint64_t conn,
                                                       const msg::Register& reg,
                                                       const std::string& address,
                                                       Protocol protocol) {
  if (reg.key.empty()) return Status(ErrorCode::kInvalidArgument, "register: empty key");
  if (address.empty()) return Status(ErrorCode::kInvalidArgument, "register: no address");
  const std::string& name = address;
  if (Device* old = DeviceByName(name)) {
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
      device_by_conn_.erase(old->conn);
    }
  }
  Device& d = devices_[name];
  bool fresh = d.name.empty();
  if (!fresh && d.key != reg.key) {
    by_key_[d.key].erase(&d);
    idle_by_key_[d.key].erase(&d);
  }
  by_key_[reg.key].insert(&d);
  d.name = name;
  d.key = reg.key;
  d.address = address;
  d.tags = reg.tags;
  d.info = reg.info;
  d.conn = conn;
  d.server_id = reg.server_id;
  d.last_heartbeat = now;
  if (fresh) {
    d.registered_at = now;
    d.free_since = now;
    d.protocol = protocol;
    d.offered = protocol != Protocol::kTvm;
  }
  device_by_conn_[conn] = name;
  Health& h = health_[name];
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
  for (const auto& t : in_flight) {
    auto it = leases_.find(t);
    std::optional<Waiter> w = std::move(it->second.waiter);
    leases_.erase(it);
    if (w) Enqueue(std::move(*w));
  }
  reserved_.erase(name);
  SetLeaseToken(d, keep);
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
  Device* d = DeviceByConn(conn);
  if (!d || d->protocol != Protocol::kTvm) return;
  d->offered = offered;
  d->last_heartbeat = now;
  Schedule(now);
}

void Scheduler::Heartbeat(TimePoint now, uint64_t conn, const msg::ServerHeartbeat& hb) {
  Device* d = DeviceByConn(conn);
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
      Waiter w = *l.waiter;
      Enqueue(std::move(w));
      leases_.erase(t);
      continue;
    }
    // A server that dies under a session is an infrastructure failure.
    EndLease(now, t, "device lost: " + why, l.claimed);
  }
  device_by_conn_.erase(d.conn);
  by_key_[d.key].erase(&d);
  idle_by_key_[d.key].erase(&d);
  devices_.erase(name);
  Schedule(now);
}

void Scheduler::DeviceDisconnected(TimePoint now, uint64_t conn) {
  Device* d = DeviceByConn(conn);
  if (!d) {
    device_by_conn_.erase(conn);
    return;
  }
  RemoveDevice(now, *d, "registration connection closed");
}

void Scheduler::TokenAcked(TimePoint now, uint64_t conn, const std::string& token) {
  Device* d = DeviceByConn(conn);
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
  Device* d = DeviceByConn(conn);
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
  Device* d = DeviceByConn(conn);
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

void Scheduler::SelfCheckResult(TimePoint now, const std::string& device, const Status& result) {
  Health& h = health_[device];
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
  Health& h = health_[device];
  if (!failure) {
    h.consecutive_failures = 0;
    return;
  }
  h.infra_failures++;
  if (++h.consecutive_failures >= options_.quarantine_after && !h.quarantined) {
    h.quarantined = true;
    h.next_self_check = now + options_.self_check_interval;
  }
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
    for (const Device* d : KeyDevices(req.key)) {
      if (d->protocol != protocol) continue;
      of_key++;
      if (!any && Matches(d->tags, d->info, req.constraints)) any = true;
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
  w.seq = next_seq_++;
  w.conn = conn;
  w.request_id = request_id;
  w.req = req;
  w.req.priority = priority;
  w.protocol = protocol;
  w.enqueued = now;
  Ms timeout = req.queue_timeout_ms ? Ms(req.queue_timeout_ms) : options_.default_queue_timeout;
  w.deadline = now + timeout;
  Enqueue(std::move(w));
  Schedule(now);
}

Status Scheduler::Cancel(TimePoint now, uint64_t conn, uint32_t request_id) {
  for (auto& [key, q] : queues_) {
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->conn == conn && it->request_id == request_id) {
        Push({.kind = Action::Kind::kFail,
              .conn = conn,
              .request_id = request_id,
              .status = Status(ErrorCode::kBusy, "request cancelled")});
        q.erase(it);
        dirty_.insert(key);
        SendQueueUpdates(now, /*full=*/false);
        return Status::Ok();
      }
    }
  }
  return Status(ErrorCode::kNotFound, "no queued request " + std::to_string(request_id));
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
  if (Device* d = DeviceByName(l.device)) info.address = d->address;
  info.remaining_ms = static_cast<uint64_t>(len.count());
  return info;
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

void Scheduler::ClientDisconnected(TimePoint now, uint64_t conn) {
  for (auto& [key, q] : queues_) {
    if (std::erase_if(q, [&](const Waiter& w) { return w.conn == conn; }) > 0) dirty_.insert(key);
  }
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
      if (Device* d = DeviceByName(device)) {
        // Never told: revoke quietly.
        SetLeaseToken(*d, "");
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
  Device* d = DeviceByName(device);
  if (!d && !health_.count(device)) {
    return Status(ErrorCode::kNotFound, "no device '" + device + "'");
  }
  Health& h = health_[device];
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

// --- restart ------------------------------------------------------------------------------------

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
  reserved_.insert(r.device);
  leases_[r.token] = std::move(l);
}

// --- time ---------------------------------------------------------------------------------------

void Scheduler::Tick(TimePoint now) {
  std::vector<Device*> dead;
  for (auto& [name, d] : devices_) {
    // TVM servers send no heartbeat (their health is the connection and a port probe).
    if (d.protocol == Protocol::kTvm) continue;
    if (now - d.last_heartbeat >= options_.heartbeat_timeout) dead.push_back(&d);
  }
  for (Device* d : dead) {
    Push({.kind = Action::Kind::kCloseConn, .conn = d->conn, .device = d->name});
    RemoveDevice(now, *d, "no heartbeat for " + Seconds(now - d->last_heartbeat));
  }

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
    Lease l = std::move(leases_[token]);
    leases_.erase(token);
    if (l.waiter) Enqueue(std::move(*l.waiter));
    if (Device* d = DeviceByName(l.device)) {
      SetLeaseToken(*d, "");
      Push({.kind = Action::Kind::kPushToken, .conn = d->conn, .device = d->name});
      CountFailure(now, d->name, true);
    }
  }

  for (auto& [key, q] : queues_) {
    for (auto it = q.begin(); it != q.end();) {
      if (now >= it->deadline) {
        stats_[key].timeouts++;
        Push({.kind = Action::Kind::kFail,
              .conn = it->conn,
              .request_id = it->request_id,
              .status = Status(ErrorCode::kTimeout, "no '" + key + "' device became free within " +
                                                        Seconds(now - it->enqueued) +
                                                        " (queue timeout)")});
        it = q.erase(it);
      } else {
        ++it;
      }
    }
  }

  for (auto& [name, h] : health_) {
    if (!h.quarantined || h.self_check_pending || now < h.next_self_check) continue;
    Device* d = DeviceByName(name);
    if (!d) continue;
    h.self_check_pending = true;
    Push({.kind = Action::Kind::kSelfCheck, .conn = d->conn, .device = name});
  }
  Schedule(now);
  SendQueueUpdates(now, /*full=*/true);  // the far-back positions, and aging
}

void Scheduler::Schedule(TimePoint now) {
  for (auto& [key, q] : queues_) {
    if (q.empty()) continue;
    std::vector<Device*> free;
    for (Device* d : idle_by_key_[key]) {
      if (Grantable(*d)) free.push_back(d);
    }
    if (free.empty()) continue;
    // Least recently used first spreads wear and leaves just-released boards a moment.
    std::sort(free.begin(), free.end(),
              [](const Device* a, const Device* b) { return a->free_since < b->free_since; });
    bool any = false;
    for (Waiter& w : q) {
      if (free.empty()) break;
      for (auto it = free.begin(); it != free.end(); ++it) {
        if ((*it)->protocol == w.protocol && Matches((*it)->tags, (*it)->info, w.req.constraints)) {
          StartLease(now, **it, w);
          w.seq = 0;  // granted: removed below
          any = true;
          free.erase(it);
          break;
        }
      }
    }
    if (any) {
      std::erase_if(q, [](const Waiter& w) { return w.seq == 0; });
      dirty_.insert(key);
    }
  }
  SendQueueUpdates(now, /*full=*/false);
}

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
  SetLeaseToken(d, l.token);
  if (d.protocol == Protocol::kTvm) d.offered = false;  // its match key is handed out
  d.busy_since = now;
  Push({.kind = Action::Kind::kPushToken,
        .conn = d.conn,
        .device = d.name,
        .token = l.token,
        .holder = l.holder});
  leases_[l.token] = std::move(l);
}

void Scheduler::EndLease(TimePoint now, const std::string& token, const std::string& outcome,
                         bool infra_failure, bool neutral) {
  auto it = leases_.find(token);
  if (it == leases_.end()) return;
  Lease l = std::move(it->second);
  leases_.erase(it);
  if (reserved_.count(l.device)) {
    bool other = false;
    for (const auto& [t, rest] : leases_) other |= rest.device == l.device;
    if (!other) reserved_.erase(l.device);
  }
  if (Device* d = DeviceByName(l.device); d && d->lease_token == token) {
    SetLeaseToken(*d, "");
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

void Scheduler::SendQueueUpdates(TimePoint now, bool full) {
  for (auto& [key, q] : queues_) {
    if (q.empty()) continue;
    // Between ticks only the front of a queue that changed is looked at (and new waiters,
    // which mark it dirty); the tick's full pass tells everyone else.
    bool dirty = dirty_.count(key) > 0;
    if (!full && !dirty) continue;
    int& unannounced = unannounced_[key];
    size_t limit =
        full || unannounced > 0 ? q.size() : std::min<size_t>(q.size(), options_.eager_positions);
    uint32_t pos = 0;
    std::optional<int> unconstrained_matching;
    for (size_t i = 0; i < limit; ++i) {
      Waiter* w = &q[i];
      ++pos;
      if (w->last_position == pos) continue;
      if (w->last_position != 0 && pos > options_.eager_positions &&
          now - w->last_update < options_.position_interval) {
        continue;
      }
      w->last_position = pos;
      w->last_update = now;
      Action a{.kind = Action::Kind::kQueueUpdate, .conn = w->conn, .request_id = w->request_id};
      a.update.position = pos;
      a.update.queue_length = static_cast<uint32_t>(q.size());
      a.update.waited_ms = static_cast<uint64_t>(ToMs(now - w->enqueued));
      int matching = 0;
      bool plain = w->req.constraints.empty() && w->protocol == Protocol::kCrosstune;
      if (plain && unconstrained_matching) {
        matching = *unconstrained_matching;
      } else {
        for (const Device* d : KeyDevices(key)) {
          if (d->protocol == w->protocol && Matches(d->tags, d->info, w->req.constraints)) {
            matching++;
          }
        }
        if (plain) unconstrained_matching = matching;
      }
      a.update.note = matching == 0
                          ? "no registered device matches now; waiting for one"
                          : "waiting for one of " + std::to_string(matching) + " matching devices";
      Push(std::move(a));
    }
    if (limit == q.size()) unannounced = 0;  // everyone has heard at least once
  }
  dirty_.clear();
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

std::vector<Action> Scheduler::TakeActions() {
  std::vector<Action> out;
  out.swap(actions_);
  return out;
}

// --- snapshot -----------------------------------------------------------------------------------

Snapshot Scheduler::Snap(TimePoint now) const {
  Snapshot s;
  s.uptime_seconds = ToMs(now - started_) / 1000.0;
  s.leases_active = leases_.size();
  for (const auto& [name, d] : devices_) {
    Snapshot::DeviceView v;
    v.name = name;
    v.key = d.key;
    v.address = d.address;
    v.tags = d.tags;
    v.protocol = d.protocol;
    v.arch = d.info.arch;
    v.triple = d.info.triple;
    v.cpu = d.info.cpu_model;
    v.sessions = d.sessions;
    auto h = health_.find(name);
    if (h != health_.end()) {
      v.draining = h->second.draining;
      v.quarantined = h->second.quarantined;
      v.consecutive_failures = h->second.consecutive_failures;
      v.infra_failures = h->second.infra_failures;
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
    if (v.state == "free" && reserved_.count(name)) v.state = "reserved";
    // A TVM server whose match key is out (a session, or a key not used yet) until it re-offers.
    if (v.state == "free" && !d.offered) v.state = "busy";
    s.devices.push_back(std::move(v));
  }
  std::set<std::string> keys;
  for (const auto& [k, q] : queues_) keys.insert(k);
  for (const auto& [k, st] : stats_) keys.insert(k);
  for (const auto& [name, d] : devices_) keys.insert(d.key);
  for (const std::string& key : keys) {
    Snapshot::KeyView kv;
    kv.key = key;
    auto q = queues_.find(key);
    if (q != queues_.end()) {
      for (const Waiter* w = q->second.data(); w != q->second.data() + q->second.size(); ++w) {
        kv.queue.push_back({w->req.holder, w->req.priority, EffectivePriority(*w, now),
                            ToMs(now - w->enqueued), w->protocol});
      }
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
  for (const auto& [name, h] : health_) {
    if (h.quarantined && !devices_.count(name)) s.quarantined_offline.push_back(name);
  }
  return s;
}

}  // namespace crosstune::tracker
