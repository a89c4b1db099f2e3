// The tracker's brain: devices, per-key queues, leases and health, with no I/O and no clock of its
// own. Every call takes `now`; effects on the outside world (frames to send, rows to write) come
// out as Actions the caller drains with TakeActions() and carries out. Unit tests drive it with a
// hand-moved clock.
//
// Thread-safety: none. The tracker calls it from its single io_context thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

using TimePoint = std::chrono::steady_clock::time_point;
using Ms = std::chrono::milliseconds;

// The protocol a device's server and a request's client speak. A device is granted only to
// requests of its own protocol: a crosstune client cannot open a session on a TVM RPC server,
// nor the other way round. Both share the per-key queues (priority, aging, timeouts).
enum class Protocol { kCrosstune, kTvm };
const char* ProtocolName(Protocol p);

struct SchedulerOptions {
  Ms heartbeat_interval{1000};
  Ms heartbeat_timeout{5000};  // a device silent this long is dropped
  Ms claim_timeout{5000};      // a one-session grant nobody opens a session with goes back
  Ms default_queue_timeout{600'000};
  Ms default_lease{1'800'000};
  Ms max_lease{24 * 3'600'000};
  Ms aging_step{30'000};  // a waiting request gains one priority level per step
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

// What the caller must do. Fields not named for a kind are empty.
struct Action {
  enum class Kind {
    kPushToken,     // send SetLease{token} to the server on `conn` (device `device`)
    kGrant,         // answer request `request_id` on client `conn` with `grant`
    kQueueUpdate,   // send `update` for request `request_id` to client `conn`
    kFail,          // answer request `request_id` on client `conn` with `status`
    kSelfCheck,     // probe device `device` (server on `conn`), report SelfCheckResult
    kCloseConn,     // close connection `conn` (a replaced or timed-out registration)
    kLeaseStarted,  // persist `lease`
    kLeaseRenewed,  // persist the new expiry of `lease`
    kLeaseEnded,    // history row for `lease` with `outcome`; remove it from active leases
  };
  Kind kind;
  uint64_t conn = 0;
  uint32_t request_id = 0;
  std::string device;
  std::string token;
  std::string holder;
  msg::Grant grant;
  msg::QueueUpdate update;
  Status status;
  std::string outcome;
  struct LeaseRecord {
    std::string token, device, key, holder;
    int64_t granted_unix_ms = 0, expires_unix_ms = 0;
    uint32_t lease_ms = 0;
    bool multi_session = false;
  } lease;
};
using LeaseRecord = Action::LeaseRecord;

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

  // --- admins ---
  Status Admin(TimePoint now, const std::string& action, const std::string& device);

  // --- restart ---
  // A lease read back from the database at start; its holder must re-attach (Renew) within
  // reattach_window and its server must re-register with the same token, or it ends.
  void RestoreLease(TimePoint now, const LeaseRecord& record, int64_t now_unix_ms);

  // Expiries, timeouts, heartbeats, self-checks, aging. Call a few times a second.
  void Tick(TimePoint now);
  std::vector<Action> TakeActions();
  bool HasActions() const { return !actions_.empty(); }

  Snapshot Snap(TimePoint now) const;
  // The wall clock for persisted expiries; tests may replace it.
  std::function<int64_t()> unix_ms;

  // Constraint matching, exposed for tests: tags first, then attributes of the device info.
  static Status ParseConstraint(const std::string& text);
  static bool Matches(const std::map<std::string, std::string>& tags, const msg::DeviceInfo& info,
                      const std::vector<std::string>& constraints);

 private:
  struct Device {
    std::string name, key, address;
    std::map<std::string, std::string> tags;
    msg::DeviceInfo info;
    uint64_t conn = 0;
    Protocol protocol = Protocol::kCrosstune;
    bool offered = true;    // TVM: has a match key nobody was handed; crosstune: always
    std::string server_id;  // msg::Register::server_id of the live registration
    TimePoint registered_at, last_heartbeat, free_since, busy_since;
    std::string lease_token;  // the lease on this device, "" when free
    double busy_seconds = 0;
    uint64_t sessions = 0;
  };
  std::set<Device*>& KeyDevices(const std::string& key) { return by_key_[key]; }
  struct Health {
    int consecutive_failures = 0;
    uint64_t infra_failures = 0;
    bool quarantined = false;
    bool draining = false;
    bool self_check_pending = false;
    TimePoint next_self_check;
  };
  struct Waiter {
    uint64_t seq = 0;
    uint64_t conn = 0;
    uint32_t request_id = 0;
    msg::DeviceRequest req;
    Protocol protocol = Protocol::kCrosstune;
    TimePoint enqueued, deadline;
    uint32_t last_position = 0;
    TimePoint last_update;  // when the client was last told its position
  };
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

  Device* DeviceByConn(uint64_t conn);
  Device* DeviceByName(const std::string& name);
  bool Grantable(const Device& d) const;
  void SetLeaseToken(Device& d, const std::string& token);  // keeps idle_by_key_ in step
  int64_t EffectivePriority(const Waiter& w, TimePoint now) const;
  void Schedule(TimePoint now);
  void StartLease(TimePoint now, Device& d, Waiter w);
  // `infra_failure` counts towards quarantine; a `neutral` end neither counts nor resets.
  void EndLease(TimePoint now, const std::string& token, const std::string& outcome,
                bool infra_failure, bool neutral = false);
  void CountFailure(TimePoint now, const std::string& device, bool failure);
  void RemoveDevice(TimePoint now, Device& d, const std::string& why);
  void SendQueueUpdates(TimePoint now, bool full = true);
  bool Before(const Waiter& a, const Waiter& b) const;  // grant order
  void Enqueue(Waiter w);
  LeaseRecord Record(TimePoint now, const Lease& l) const;
  void Push(Action a) { actions_.push_back(std::move(a)); }

  SchedulerOptions options_;
  TimePoint started_;
  uint64_t next_seq_ = 1;
  std::map<std::string, Device> devices_;  // by name
  std::map<uint64_t, std::string> device_by_conn_;
  std::map<std::string, std::set<Device*>> by_key_;       // the devices_ of each key
  std::map<std::string, std::set<Device*>> idle_by_key_;  // ... of those, the ones with no lease
  std::map<std::string, Health> health_;                  // by device name; outlives registrations
  std::map<std::string, std::vector<Waiter>> queues_;     // by key, in grant order (Before)
  std::set<std::string> dirty_;  // keys whose queue changed since the last position updates
  std::map<std::string, int> unannounced_;  // waiters per key never told their position
  std::map<std::string, Lease> leases_;     // by token
  std::set<std::string> reserved_;          // devices of restored leases not re-confirmed yet
  std::map<std::string, KeyStats> stats_;
  std::vector<Action> actions_;
};

}  // namespace crosstune::tracker
