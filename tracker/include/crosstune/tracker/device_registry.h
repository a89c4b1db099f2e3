// The devices the tracker knows: live registrations by name, by connection and by key, and each
// device's health (failure counts, quarantine, drain), which outlives its registration.
//
// Idle devices are offered in a fixed order: least recently freed first (spreads wear and leaves a
// just-released board a moment), then in registration order, never in memory-address order.
//
// Thread-safety: none (see scheduler.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "crosstune/tracker/outbox.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

struct Device {
  std::string name, key, address;
  std::map<std::string, std::string> tags;
  msg::DeviceInfo info;
  uint64_t conn = 0;
  uint64_t order = 0;  // registration order (set once, when the name first registers)
  Protocol protocol = Protocol::kCrosstune;
  bool offered = true;    // TVM: has a match key nobody was handed; crosstune: always
  std::string server_id;  // msg::Register::server_id of the live registration
  TimePoint registered_at, last_heartbeat, free_since, busy_since;
  std::string lease_token;  // the lease on this device, "" when free
  double busy_seconds = 0;
  uint64_t sessions = 0;
};

struct Health {
  int consecutive_failures = 0;
  uint64_t infra_failures = 0;
  bool quarantined = false;
  bool draining = false;
  bool self_check_pending = false;
  TimePoint next_self_check;
};

class DeviceRegistry {
 public:
  struct ByOrder {
    bool operator()(const Device* a, const Device* b) const { return a->order < b->order; }
  };
  using DeviceSet = std::set<Device*, ByOrder>;

  Device* ByConn(uint64_t conn);
  Device* ByName(const std::string& name);
  const std::map<std::string, Device>& all() const { return devices_; }
  std::map<std::string, Device>& all() { return devices_; }

  // The device `name`, created (with the next registration order) when unknown; `fresh` says
  // which. Files it under `key` and `conn`, out of its previous key and connection.
  Device& Register(const std::string& name, const std::string& key, uint64_t conn, bool& fresh);
  void ForgetConn(uint64_t conn) { device_by_conn_.erase(conn); }
  void Remove(const std::string& name);

  // Sets the device's lease ("" frees it), keeping the idle lists in step.
  void SetLeaseToken(Device& d, const std::string& token);
  // The key's devices in registration order (an empty set for an unknown key).
  const DeviceSet& OfKey(const std::string& key) const;
  // The key's grantable devices in offer order (see above).
  std::vector<Device*> Free(const std::string& key);
  // Free of a lease, offered, healthy, not drained, not reserved.
  bool Grantable(const Device& d) const;

  // --- health ---
  Health& health(const std::string& name) { return health_[name]; }
  const Health* FindHealth(const std::string& name) const;
  std::map<std::string, Health>& healths() { return health_; }
  const std::map<std::string, Health>& healths() const { return health_; }
  // One more session outcome: a failure counts towards quarantine after `quarantine_after` in a
  // row (the self-check is due `self_check_interval` later), a success resets the count.
  void CountFailure(TimePoint now, const std::string& name, bool failure, int quarantine_after,
                    Ms self_check_interval);

  // --- restored leases ---
  // A device whose restored lease's server has not re-registered with the token yet.
  void Reserve(const std::string& name) { reserved_.insert(name); }
  void Unreserve(const std::string& name) { reserved_.erase(name); }
  bool Reserved(const std::string& name) const { return reserved_.count(name) > 0; }

 private:
  uint64_t next_order_ = 1;
  std::map<std::string, Device> devices_;  // by name
  std::map<uint64_t, std::string> device_by_conn_;
  std::map<std::string, DeviceSet> by_key_;       // the devices_ of each key
  std::map<std::string, DeviceSet> idle_by_key_;  // ... of those, the ones with no lease
  std::map<std::string, Health> health_;          // by device name; outlives registrations
  std::set<std::string> reserved_;
};

}  // namespace crosstune::tracker
