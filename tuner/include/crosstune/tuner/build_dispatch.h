// Spreads a tuning run's builds over several build services: the local pool (builder.h Builder)
// and any number of others, usually RemoteBuilders on the farm's build workers.
//
// Each build goes to the service whose (builds in flight) / slots() is lowest at that moment, so
// a worker with twice the cores takes twice the builds and a slow one takes fewer. A build that
// comes back kDisconnected from a service other than the first (the local pool, which is never
// given up) marks that service lost and runs again on another: a lost worker loses no candidate.
// It counts the builds each service answered, for reports.
//
// Thread-safety: Build and BuildMany may be called from any number of threads at once; stats()
// too. The services must outlive the dispatcher and be safe to call from several threads.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/status.h"

namespace crosstune::tuner {

class BuildDispatcher : public builder::BuildService {
 public:
  struct Service {
    std::string name;  // "local", a worker's tracker name or address
    builder::BuildService* service = nullptr;
  };
  // `services[0]` is the local pool: never given up, and where the last builds go when every
  // other service is lost. `on_lost` (may be empty) hears each service lost, once, with why (e.g.
  // to give its lease back); it runs on the thread whose build found out.
  explicit BuildDispatcher(std::vector<Service> services,
                           std::function<void(size_t index, const Status& why)> on_lost = {});

  builder::BuildResult Build(const builder::BuildRequest& request) override;
  // Runs up to the sum of the services' slots at once; results[i] answers requests[i].
  std::vector<builder::BuildResult> BuildMany(
      const std::vector<builder::BuildRequest>& requests) override;
  // The slots of the services not lost.
  int slots() const override;

  struct ServiceStats {
    std::string name;
    int slots = 0;
    uint64_t builds = 0;  // builds it answered (a lost service's lost ones are not counted)
    bool lost = false;
    std::string lost_reason;
  };
  std::vector<ServiceStats> stats() const;
  // Builds that ran again elsewhere after their service was lost.
  uint64_t rerun_builds() const;

 private:
  // The service with the lowest load not lost; counts the build in flight there.
  size_t Pick();

  std::vector<Service> services_;
  std::function<void(size_t, const Status&)> on_lost_;
  mutable std::mutex mu_;
  std::vector<int> in_flight_;
  std::vector<ServiceStats> stats_;
  uint64_t rerun_ = 0;
};

}  // namespace crosstune::tuner
