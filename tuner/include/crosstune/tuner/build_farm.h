// A tuning run's builds spread over the farm: every build worker of a build key that a tracker
// can grant now (crosstune-build-worker, each on a multi-session lease like a device's), plus the
// local pool, behind one BuildDispatcher. A worker lost during the run gives its lease back as
// unreachable and its builds run elsewhere; the leases end with the BuildFarm.
//
//   auto farm = BuildFarm::Lease(tracker, "builders", secret, *local_pool, warn);
//   Tune(task, devices, farm->service(), options);
//   report["build_workers"] = farm->Report();
//
// Thread-safety: service() is a BuildService (any threads); the rest for the owner's thread.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/tuner/build_dispatch.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/remote_builder.h"

namespace crosstune::tuner {

class BuildFarm {
 public:
  // Leases every build worker of `key` free now and connects to each (`secret` answers the
  // workers' HMAC challenge; the lease token alone is enough when they trust the tracker). None
  // free, or one that does not answer, is a `warn`ing, not an error: the local pool builds then.
  static std::unique_ptr<BuildFarm> Lease(const client::TrackerOptions& tracker,
                                          const std::string& key, const std::string& secret,
                                          builder::BuildService& local,
                                          const std::function<void(const std::string&)>& warn);
  ~BuildFarm();  // closes the workers' sessions, then gives the leases back

  builder::BuildService& service() { return *dispatcher_; }
  // The workers in use (the local pool not counted).
  size_t workers() const { return remotes_.size(); }
  // One object per service, the local pool first: name, slots, builds, lost (and why).
  nlohmann::json Report() const;

 private:
  BuildFarm() = default;
  std::unique_ptr<DevicePool> leases_;
  std::vector<DeviceSpec> specs_;  // remotes_[i]'s lease
  std::vector<std::unique_ptr<RemoteBuilder>> remotes_;
  std::unique_ptr<BuildDispatcher> dispatcher_;
};

}  // namespace crosstune::tuner
