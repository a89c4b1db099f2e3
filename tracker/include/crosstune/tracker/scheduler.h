// The tracker's brain, with no I/O and no clock of its own. Every call takes `now`; effects on the
// outside world (frames to send, rows to write) come out as Actions (outbox.h) the caller drains
// with TakeActions() and carries out. Unit tests drive it with a hand-moved clock.
//
// Its parts, one file each:
//   device_registry  devices by name, connection and key; their health; idle devices in order
//   request_queue    the per-key queues of waiting requests, timeouts, queue positions
//   grant_policy     who is granted next (priority + aging, or fair-share)
//   leases.cc        grants, acks, claims, renewals, ends; failure counting and self-checks
//   scheduler.cc     the calls below: registrations, requests, the grant round, the clock
//
// Thread-safety: none. The tracker calls it from its single io_context thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker/constraints.h"
#include "crosstune/tracker/device_registry.h"
#include "crosstune/tracker/grant_policy.h"
#include "crosstune/tracker/outbox.h"
#include "crosstune/tracker/request_queue.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

struct SchedulerOptions {
  Ms heartbeat_interval{1000};
  Ms heartbeat_timeout{5000};  // a device silent this long is dropped
  Ms claim_timeout{5000};      // a one-session grant nobody opens a session with goes back
  Ms default_queue_timeout{600'000};
  Ms default_lease{1'800'000};
  Ms max_lease{24 * 3'600'000};
  Ms aging_step{30'000};  // a waiting request gains one priority level per step
  // The grant policy by name (grant_policy.h: GrantPolicyNames); an unknown name makes the
  // constructor throw std::invalid_argument, so check it first with MakeGrantPolicy.
  std::string policy = "priority";
  // Requests may ask for a priority in -max_priority..max_priority: a crosstune client beyond
  // it is refused (InvalidArgument, naming the range), a TVM client (which cannot be told) is
  // held to the nearer end. Without a bound one client could ask for 2^31 - 1 and stay ahead of
  // every other, aging included.
  int32_t max_priority = 100;
  int quarantine_after = 3;  // infrastructure failures in a row
  Ms self_check_interval{10'000};
  Ms reattach_window{30'000};  // after a restart, holders have this long to re-attach
  Ms startup_grace{10'000};    // after a start, unmatched requests wait for servers to register
  // Queue positions: 1..this are told at every change; further back at most once per interval
  // (each grant moves everyone up, and a thousand waiters need not hear of every step).
  uint32_t eager_positions = 5;
  Ms position_interval{1000};
  std::function<std::string()> make_token;  // default: 128 random bits in hex
};

// A read-only picture for the status page, /api/summary, /metrics and `crosstune query`.
struct Snapshot {
  struct DeviceView {
    std::string name, key, address, state, holder, arch, triple, cpu;
    std::map<std::string, std::string> tags;
    Protocol protocol = Protocol::kCrosstune;
    bool draining = false, quarantined = false;
    int consecutive_failures = 0;
    uint64_t infra_failures = 0, sessions = 0;
    int64_t lease_remaining_ms = 0;
    double busy_seconds = 0, utilisation = 0;
    uint32_t cores = 0;
    // A build worker's target kinds (DeviceInfo::build_targets); empty for a device.
    std::vector<std::string> build_targets;
  };
  struct WaiterView {
    std::string holder;
    int32_t priority = 0;
    int64_t effective_priority = 0;
    int64_t waited_ms = 0;
    Protocol protocol = Protocol::kCrosstune;
  };
  struct KeyView {
    std::string key;
    std::vector<WaiterView> queue;  // in grant order
    uint64_t grants = 0;
    double wait_seconds_sum = 0;
    double wait_seconds_max = 0;
    uint64_t timeouts = 0, no_device = 0;
  };
  std::vector<DeviceView> devices;
  std::vector<KeyView> keys;
  std::vector<std::string> quarantined_offline;  // quarantined devices not registered now
  uint64_t leases_active = 0;
  double uptime_seconds = 0;
  std::string policy;  // the grant policy's name
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, TimePoint now);

  // --- servers ---
  // `address` is where clients reach the server (custom address or the one the tracker sees).
  // A second registration under the same address replaces the first (kCloseConn for the old).
  // A name taken by a device of the other protocol is refused.
  Expected<msg::RegisterReply> RegisterDevice(TimePoint now, uint64_t conn,
                                              const msg::Register& reg, const std::string& address,
                                              Protocol protocol = Protocol::kCrosstune);
  // TVM servers only: whether the server on `conn` has an offer (a match key) nobody was handed.
  // A TVM device registers without one and loses it with each grant.
  void SetOffered(TimePoint now, uint64_t conn, bool offered);
  void Heartbeat(TimePoint now, uint64_t conn, const msg::ServerHeartbeat& hb);
  void DeviceDisconnected(TimePoint now, uint64_t conn);
  void TokenAcked(TimePoint now, uint64_t conn, const std::string& token);
  Status SessionStarted(TimePoint now, uint64_t conn, const std::string& token);
  void SessionEnded(TimePoint now, uint64_t conn, const msg::SessionEnded& ended);
  void SelfCheckResult(TimePoint now, const std::string& device, const Status& result);

  // --- clients ---
  void Request(TimePoint now, uint64_t conn, uint32_t request_id, const msg::DeviceRequest& req,
               Protocol protocol = Protocol::kCrosstune);
  Status Cancel(TimePoint now, uint64_t conn, uint32_t request_id);
  Expected<msg::LeaseInfo> Renew(TimePoint now, uint64_t conn, const msg::RenewLease& renew);
  Status Release(TimePoint now, const msg::ReleaseLease& release);
  void ClientDisconnected(TimePoint now, uint64_t conn);
  // The device, key and holder of the active (granted and acked) lease `token`.
  struct ActiveLease {
    std::string device, key, holder;
  };
  Expected<ActiveLease> FindActiveLease(const std::string& token) const;

  // --- admins ---
  Status Admin(TimePoint now, const std::string& action, const std::string& device);

  // --- restart ---
  // A lease read back from the database at start; its holder must re-attach (Renew) within
  // reattach_window and its server must re-register with the same token, or it ends.
  void RestoreLease(TimePoint now, const LeaseRecord& record, int64_t now_unix_ms);

  // Expiries, timeouts, heartbeats, self-checks, aging. Call a few times a second.
  void Tick(TimePoint now);
  std::vector<Action> TakeActions() { return out_.Take(); }
  bool HasActions() const { return !out_.empty(); }

  Snapshot Snap(TimePoint now) const;
  // The wall clock for persisted expiries; tests may replace it.
  std::function<int64_t()> unix_ms;

  // Constraint matching, exposed for tests: tags first, then attributes of the device info.
  static Status ParseConstraint(const std::string& text) { return tracker::ParseConstraint(text); }
  static bool Matches(const std::map<std::string, std::string>& tags, const msg::DeviceInfo& info,
                      const std::vector<std::string>& constraints) {
    return MatchesConstraints(tags, info, constraints);
  }

 private:
  struct Lease {
    std::string token, device, key, holder;
    uint64_t client_conn = 0;  // 0: detached (restored, not re-attached yet)
    TimePoint granted_at, expires_at, claim_deadline, reattach_deadline;
    Ms lease_ms{0};
    bool multi_session = false;
    bool acked = false;            // the server has the token; the client has been told
    bool claimed = false;          // a session was opened with it
    std::optional<Waiter> waiter;  // until acked: requeued if the server never acks
    int64_t granted_unix_ms = 0;
  };
  struct KeyStats {
    uint64_t grants = 0, timeouts = 0, no_device = 0;
    double wait_sum = 0, wait_max = 0;
  };

  // --- scheduler.cc ---
  void Schedule(TimePoint now);
  void RemoveDevice(TimePoint now, Device& d, const std::string& why);
  void SendQueueUpdates(TimePoint now, bool full = true);
  // How many of `key`'s devices `holder` holds (grants not acked yet included).
  int Held(const std::string& key, const std::string& holder) const;

  // --- leases.cc ---
  void StartLease(TimePoint now, Device& d, Waiter w);
  // `infra_failure` counts towards quarantine; a `neutral` end neither counts nor resets.
  void EndLease(TimePoint now, const std::string& token, const std::string& outcome,
                bool infra_failure, bool neutral = false);
  // Drops a grant the server never confirmed: its request goes back to the queue.
  void Requeue(const std::string& token);
  void ExpireLeases(TimePoint now);
  void CountFailure(TimePoint now, const std::string& device, bool failure);
  LeaseRecord Record(TimePoint now, const Lease& l) const;
  void Push(Action a) { out_.Push(std::move(a)); }

  SchedulerOptions options_;
  TimePoint started_;
  std::unique_ptr<GrantPolicy> policy_;
  DeviceRegistry devices_;
  RequestQueue queue_;                   // orders by *policy_
  std::map<std::string, Lease> leases_;  // by token
  std::map<std::string, KeyStats> stats_;
  Outbox out_;
};

}  // namespace crosstune::tracker
