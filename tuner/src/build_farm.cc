#include "crosstune/tuner/build_farm.h"

namespace crosstune::tuner {

std::unique_ptr<BuildFarm> BuildFarm::Lease(const client::TrackerOptions& tracker,
                                            const std::string& key, const std::string& secret,
                                            builder::BuildService& local,
                                            const std::function<void(const std::string&)>& warn) {
  std::unique_ptr<BuildFarm> farm(new BuildFarm());
  // Free now only: a run does not wait for build workers, it builds here meanwhile.
  auto leases = DevicePool::FromTracker(tracker, key, 0, std::chrono::milliseconds(2'000), secret,
                                        std::chrono::milliseconds(60'000));
  if (!leases.ok()) {
    warn("no build worker of key '" + key + "' at " + tracker.tracker +
         " is free now: building on this machine only (" + leases.status().ToString() + ")");
  } else {
    farm->leases_ = std::move(leases).value();
    for (const DeviceSpec& d : farm->leases_->devices()) {
      RemoteBuilderOptions o;
      o.connect.server = d.server;
      o.connect.auth_secret = d.auth_secret;
      o.connect.lease_token = d.lease_token;
      o.connect.peer_name = tracker.peer_name;
      o.name = d.name;
      auto rb = RemoteBuilder::Connect(o);
      if (!rb.ok()) {
        warn(rb.status().message() + "; building without it");
        farm->leases_->Lost(d, rb.status());
        continue;
      }
      farm->specs_.push_back(d);
      farm->remotes_.push_back(std::move(rb).value());
    }
  }
  std::vector<BuildDispatcher::Service> services = {{"local", &local}};
  for (const auto& r : farm->remotes_) services.push_back({r->name(), r.get()});
  BuildFarm* self = farm.get();
  farm->dispatcher_ = std::make_unique<BuildDispatcher>(
      std::move(services), [self, warn](size_t i, const Status& why) {
        warn(why.message() + "; its builds go to the others");
        if (self->leases_) self->leases_->Lost(self->specs_[i - 1], why);
      });
  return farm;
}

BuildFarm::~BuildFarm() {
  dispatcher_.reset();
  remotes_.clear();
  leases_.reset();
}

nlohmann::json BuildFarm::Report() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : dispatcher_->stats()) {
    nlohmann::json j = {
        {"name", s.name}, {"slots", s.slots}, {"builds", s.builds}, {"lost", s.lost}};
    if (s.lost) j["lost_reason"] = s.lost_reason;
    out.push_back(j);
  }
  return out;
}

}  // namespace crosstune::tuner
