// One tuning run's setup, the same for `crosstune tune`, Python's tune() and crosstune-bench-tune:
// from where to measure (a tracker's devices of a key, servers given by address, or a
// crosstune-server started on this machine), the target, the kernel's threads and the build
// options, it opens the devices, resolves the target, shares this machine's CPUs between a local
// server and the builds, decides whether builds overlap the timing and how the run is timed,
// leases the farm's build workers and reports the run's progress to the tracker. The front ends
// turn their flags or arguments into TuneSetupOptions and print or return what it gives back.
//
//   TuneSetupOptions o;
//   o.tune.trials = 64;                         // the search, as Tune() takes it
//   auto setup = TuneSetup::Open(o);            // devices, target, CPUs, builds
//   auto task = MakeTask("matmul", shape, (*setup)->target(), {o.threads});
//   auto summary = (*setup)->Tune(**task);
//   nlohmann::json report = TuneReport(**task, (*setup)->options(), *summary);
//   (*setup)->AddToReport(&report);             // overlap, cpus, build_cache, build_workers
//
// Thread-safety: one thread owns a TuneSetup: the one that opened it. When the CPUs are split,
// Open() pins that thread (and so the threads it starts later: the tuner's device threads and
// its cost model) to the build CPUs, and the destructor gives it back the CPUs it had.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/target.h"
#include "crosstune/timing.h"
#include "crosstune/tuner/build_farm.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/farm_records.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"

namespace crosstune::tuner {

// Where a run measures: a tracker's devices of a key, servers given by address, or (neither) a
// crosstune-server started on this machine for the run.
struct TuneDevices {
  std::vector<std::string> servers;           // crosstune-servers, "host:port"
  std::string tracker;                        // "host:port"; with `key`
  std::string key;                            // every free device of the key measures in parallel
  int max_devices = 0;                        // of the key; 0: every free one
  std::chrono::milliseconds wait{600'000};    // for the tracker's first device
  std::chrono::milliseconds timeout{60'000};  // for each reply of a device
  std::string auth_secret;    // answers the servers', the tracker's and the build workers' HMAC
  std::string server_binary;  // the local server's; empty: client::FindServerBinary()
  std::string peer_name;      // the lease holder the tracker shows; empty: user@host

  bool local() const { return servers.empty() && tracker.empty() && key.empty(); }
};

struct TuneSetupOptions {
  TuneDevices devices;
  // A target string or preset, "auto" (the first device's CPU) or "cuda" (its GPU).
  std::string target = "auto";
  // The kernel's threads: part of the task, and the CPUs a local server gets to itself.
  int threads = 1;
  // The run tunes a network's tasks (a workload or a model's): timed cold unless `timing` is given.
  bool network = false;

  // Builds: local build workers (0: one per CPU they may use), an optional build cache shared by
  // runs (builder/build_cache.h) and its budget, and the farm's build workers of `build_key`
  // (registered with devices.tracker) beside the local ones.
  int workers = 0;
  std::string build_cache;           // a directory, created when absent; empty: no cache
  double build_cache_max_mb = 1024;  // past it the least recently used entries go; 0: no limit
  std::string build_key;
  // Builds elsewhere than in a Builder of the setup's own (bench-farm's simulated builds): then
  // `workers` and the build cache do not apply. Not owned; must outlive the setup.
  builder::BuildService* local_builds = nullptr;

  // Build the next batch while the devices time this one. Unset: yes for devices on other
  // machines, and for the local server when CPUs are left beside the kernel's (it then gets its
  // CPUs to itself); no for servers given on this machine (their CPUs cannot be steered).
  std::optional<bool> overlap;
  // With a local server and overlap not refused, split the CPUs as above. Off: the server and the
  // builds share every CPU (crosstune-bench-tune's unpinned baseline; no front end offers it).
  bool split_local_cpus = true;
  // How each config is timed. Unset: the tuner's default (MeasureOptions) for one task, and
  // NetworkTiming() for a network's tasks.
  std::optional<TimingOptions> timing;

  // The farm's tuning records (TuneOptions::farm): "" none, "tracker" the devices' tracker's,
  // or another tracker's "host:port" (the devices' auth secret answers it).
  std::string records;
  // The search (tuner, trials, batch, early_stop, include_default, log_path, run_id, the
  // measure's check and limits, tuner_options, transfer_logs, pins, stop and the callbacks), as
  // Tune() takes it. Its overlap and measure.timing are decided by the fields above.
  TuneOptions tune;
};

class TuneSetup {
 public:
  // Checks the options, then: the builder (its workers forked before any thread of the run's),
  // the devices, the CPU split and pinning, the farm's build workers, the target. Errors, by
  // name: a tracker without a key or the reverse, a build key without a tracker, a bad build
  // cache directory or budget, no device, a target that does not parse or a device that does not
  // answer. The farm's warnings (no free build worker) and a batch smaller than the devices go to
  // options.tune.on_warning.
  static Expected<std::unique_ptr<TuneSetup>> Open(TuneSetupOptions options);
  ~TuneSetup();
  TuneSetup(const TuneSetup&) = delete;
  TuneSetup& operator=(const TuneSetup&) = delete;

  DevicePool& pool() { return *pool_; }
  const std::vector<DeviceSpec>& devices() const { return pool_->devices(); }
  const builder::Target& target() const { return target_; }
  // Where the run's builds go: the farm's dispatcher (its workers and the local pool), else the
  // local pool.
  builder::BuildService& builds();
  const BuildFarm* farm() const { return farm_.get(); }
  // The local server's CPUs and the builds' (and this thread's); both empty when not split.
  const LocalCpuSplit& cpus() const { return split_; }
  bool pinned() const { return !split_.build.empty(); }
  // "timing on CPU 3, building on CPU 0-2", or "" when the CPUs are not split.
  std::string CpuSplitText() const;
  const TuneSetupOptions& setup_options() const { return options_; }
  // The search's options with the setup's decisions: overlap, timing, a run id when none was
  // given, the log as a transfer log of its own, a lost device's lease given back.
  const TuneOptions& options() const { return options_.tune; }

  // Tune(task, devices(), builds(), options()), reporting its progress to the tracker (at most
  // once a second, and when it ends) beside options().on_progress. A tracker that refuses the
  // reports is one warning (options().on_warning); the run goes on.
  Expected<TuneSummary> Tune(const Task& task);
  // A network's tasks under one budget: options() for each round, its trials the network's.
  WorkloadTuneOptions WorkloadOptions(const std::string& name, int round) const;
  Expected<WorkloadSummary> TuneWorkload(const std::vector<WorkloadLayer>& layers,
                                         const WorkloadTuneOptions& options);

  // What the setup adds to a run's report (TuneReport, WorkloadReport): "overlap"; "cpus"
  // {"kernel", "build"} when split; "build_cache" {"dir", "entries", "bytes", "max_bytes"} beside
  // the report's hits when a cache is used; "build_workers" (BuildFarm::Report) with a farm.
  void AddToReport(nlohmann::json* report) const;

 private:
  TuneSetup() = default;
  // Open's steps: the device pool, then the run's TuneOptions completed from the setup.
  Status OpenDevices(const client::TrackerOptions& to);
  void CompleteTuneOptions();
  void Warn(const std::string& text) const;

  TuneSetupOptions options_;
  LocalCpuSplit split_;
  std::vector<int> caller_cpus_;  // this thread's CPUs before Open pinned it
  // Destroyed in reverse: the farm's sessions and leases, the devices, then the build workers.
  std::unique_ptr<builder::Builder> builder_;
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<BuildFarm> farm_;
  // The farm's records: their tracker connection and the run's link (options_.tune.farm).
  std::unique_ptr<client::TrackerClient> records_tracker_;
  std::unique_ptr<FarmLink> farm_link_;
  builder::Target target_;
  bool report_warned_ = false;
};

}  // namespace crosstune::tuner
