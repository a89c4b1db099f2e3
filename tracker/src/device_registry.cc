#include "crosstune/tracker/device_registry.h"

#include <algorithm>

namespace crosstune::tracker {

const char* ProtocolName(Protocol p) { return p == Protocol::kTvm ? "tvm" : "crosstune"; }

Device* DeviceRegistry::ByConn(uint64_t conn) {
  auto it = device_by_conn_.find(conn);
  return it == device_by_conn_.end() ? nullptr : ByName(it->second);
}

Device* DeviceRegistry::ByName(const std::string& name) {
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : &it->second;
}

Device& DeviceRegistry::Register(const std::string& name, const std::string& key, uint64_t conn,
                                 bool& fresh) {
  Device& d = devices_[name];
  fresh = d.name.empty();
  if (fresh) {
    d.name = name;
    d.order = next_order_++;
  } else if (d.key != key) {
    by_key_[d.key].erase(&d);
    idle_by_key_[d.key].erase(&d);
  }
  if (!fresh && d.conn != conn) device_by_conn_.erase(d.conn);
  d.key = key;
  d.conn = conn;
  by_key_[key].insert(&d);
  device_by_conn_[conn] = name;
  return d;
}

void DeviceRegistry::Remove(const std::string& name) {
  Device* d = ByName(name);
  if (!d) return;
  device_by_conn_.erase(d->conn);
  by_key_[d->key].erase(d);
  idle_by_key_[d->key].erase(d);
  devices_.erase(name);
}

void DeviceRegistry::SetLeaseToken(Device& d, const std::string& token) {
  d.lease_token = token;
  if (token.empty()) {
    idle_by_key_[d.key].insert(&d);
  } else {
    idle_by_key_[d.key].erase(&d);
  }
}

const DeviceRegistry::DeviceSet& DeviceRegistry::OfKey(const std::string& key) const {
  static const DeviceSet kNone;
  auto it = by_key_.find(key);
  return it == by_key_.end() ? kNone : it->second;
}

std::vector<Device*> DeviceRegistry::Free(const std::string& key) {
  std::vector<Device*> free;
  auto it = idle_by_key_.find(key);
  if (it == idle_by_key_.end()) return free;
  for (Device* d : it->second) {  // registration order
    if (Grantable(*d)) free.push_back(d);
  }
  // Least recently freed first; a stable sort keeps registration order among equals.
  std::stable_sort(free.begin(), free.end(),
                   [](const Device* a, const Device* b) { return a->free_since < b->free_since; });
  return free;
}

bool DeviceRegistry::Grantable(const Device& d) const {
  if (!d.lease_token.empty() || !d.offered) return false;
  auto h = health_.find(d.name);
  if (h != health_.end() && (h->second.quarantined || h->second.draining)) return false;
  // A restored lease whose server has not re-registered with its token yet holds the device.
  return reserved_.empty() || !reserved_.count(d.name);
}

const Health* DeviceRegistry::FindHealth(const std::string& name) const {
  auto it = health_.find(name);
  return it == health_.end() ? nullptr : &it->second;
}

void DeviceRegistry::CountFailure(TimePoint now, const std::string& name, bool failure,
                                  int quarantine_after, Ms self_check_interval) {
  Health& h = health_[name];
  if (!failure) {
    h.consecutive_failures = 0;
    return;
  }
  h.infra_failures++;
  if (++h.consecutive_failures >= quarantine_after && !h.quarantined) {
    h.quarantined = true;
    h.next_self_check = now + self_check_interval;
  }
}

}  // namespace crosstune::tracker
