#include "crosstune/tuner/tune_setup.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

#include "crosstune/builder/build_cache.h"
#include "crosstune/cpus.h"
#include "crosstune/tuner/records.h"

namespace crosstune::tuner {

namespace {

Status Invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The builder's options for the setup's workers, CPUs and build cache (checked here).
Expected<builder::BuilderOptions> BuilderOptionsFor(const TuneSetupOptions& o,
                                                    const std::vector<int>& cpus) {
  builder::BuilderOptions bo;
  bo.workers = o.workers;
  bo.cpus = cpus;
  if (o.workers < 0) return Invalid("workers " + std::to_string(o.workers) + ": give 0 or more");
  if (o.build_cache.empty()) return bo;
  if (!(o.build_cache_max_mb >= 0) || o.build_cache_max_mb > 1e9) {
    return Invalid("build cache budget " + Number(o.build_cache_max_mb) +
                   " MB: give 0 (unbounded) or a size in MB");
  }
  std::error_code ec;
  std::filesystem::create_directories(o.build_cache, ec);
  if (ec || !std::filesystem::is_directory(o.build_cache)) {
    return Invalid("build cache " + o.build_cache + ": " +
                   (ec ? ec.message() : std::string("not a directory")));
  }
  bo.cache_dir = o.build_cache;
  bo.cache_max_bytes = static_cast<uint64_t>(o.build_cache_max_mb * 1024 * 1024);
  return bo;
}

Status CheckDevices(const TuneSetupOptions& o) {
  const TuneDevices& d = o.devices;
  if (d.tracker.empty() != d.key.empty()) {
    return Invalid(d.tracker.empty() ? "a device key (" + d.key + ") needs a tracker"
                                     : "a tracker (" + d.tracker + ") needs a device key");
  }
  if (!o.build_key.empty() && d.tracker.empty()) {
    return Invalid("a build key (" + o.build_key + ") needs a tracker");
  }
  if (o.records == "tracker" && d.tracker.empty()) {
    return Invalid("the farm's records of a tracker (records \"tracker\") need a tracker");
  }
  if (o.threads < 1) return Invalid("threads " + std::to_string(o.threads) + ": give 1 or more");
  if (d.max_devices < 0) {
    return Invalid("max devices " + std::to_string(d.max_devices) + ": give 0 (all) or more");
  }
  return Status::Ok();
}

std::string NewRunId() {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08" PRIx32, static_cast<uint32_t>(std::random_device{}()));
  return UtcTimestamp() + "-" + suffix;
}

}  // namespace

Expected<std::unique_ptr<TuneSetup>> TuneSetup::Open(TuneSetupOptions options) {
  CT_RETURN_IF_ERROR(CheckDevices(options));
  std::unique_ptr<TuneSetup> s(new TuneSetup());
  s->options_ = std::move(options);
  TuneSetupOptions& o = s->options_;
  const TuneDevices& d = o.devices;
  const bool local = d.local();
  // With no device given the timed kernel and the builds share this machine: the server started
  // here runs on CPUs of its own and the build workers (and this thread) on the others, so the
  // builds overlap the timing without slowing it (a compile on the kernel's core slowed it up to
  // 2x, measured). With no CPU to spare they take turns.
  if (local && o.split_local_cpus && o.overlap.value_or(true)) {
    s->split_ = SplitLocalCpus(o.threads);
  }
  const bool pinned = s->pinned();

  // Workers are forked: the builder comes before any thread of the run's (server output, lease
  // renewal).
  if (o.local_builds == nullptr) {
    CT_ASSIGN_OR_RETURN(builder::BuilderOptions bo,
                        BuilderOptionsFor(o, pinned ? s->split_.build : std::vector<int>{}));
    CT_ASSIGN_OR_RETURN(s->builder_, builder::Builder::Create(bo));
  }

  // The tracker, for the devices and the farm's build workers.
  client::TrackerOptions to;
  to.tracker = d.tracker;
  to.auth_secret = d.auth_secret;
  to.peer_name = d.peer_name;
  CT_RETURN_IF_ERROR(s->OpenDevices(to));

  // The farm's build workers, when asked for: builds go to them and to the local pool.
  if (!o.build_key.empty()) {
    builder::BuildService& local_builds =
        o.local_builds != nullptr ? *o.local_builds : *s->builder_;
    const TuneSetup* self = s.get();
    s->farm_ = BuildFarm::Lease(to, o.build_key, d.auth_secret, local_builds,
                                [self](const std::string& w) { self->Warn(w); });
  }
  // The farm's records: the devices' tracker's, or another's.
  if (!o.records.empty()) {
    client::TrackerOptions ro = to;
    if (o.records != "tracker") ro.tracker = o.records;
    auto tracker = client::TrackerClient::Connect(ro);
    if (!tracker.ok()) {
      return Status(tracker.status().code(),
                    "the farm's records (" + ro.tracker + "): " + tracker.status().message());
    }
    s->records_tracker_ = std::move(tracker).value();
  }
  CT_ASSIGN_OR_RETURN(s->target_, ResolveTarget(o.target, s->pool_->devices().front()));
  s->CompleteTuneOptions();
  return s;
}

// The devices: a tracker's free devices of the key, given servers, or a server started here.
Status TuneSetup::OpenDevices(const client::TrackerOptions& to) {
  const TuneDevices& d = options_.devices;
  const bool pinned = this->pinned();
  if (!d.tracker.empty()) {
    CT_ASSIGN_OR_RETURN(
        pool_, DevicePool::FromTracker(to, d.key, d.max_devices, d.wait, d.auth_secret, d.timeout));
  } else if (!d.servers.empty()) {
    pool_ = DevicePool::FromServers(d.servers, d.auth_secret, d.timeout);
  } else {
    client::LocalServerOptions server;
    server.binary = d.server_binary;
    if (pinned) server.args = {"--cpus", FormatCpuList(split_.kernel)};
    CT_ASSIGN_OR_RETURN(pool_, DevicePool::StartLocal(d.timeout, server));
    if (pinned) {
      // This thread too: the cost model and the reference runs stay off the kernel's CPUs.
      caller_cpus_ = AllowedCpus();
      CT_RETURN_IF_ERROR(PinToCpus(split_.build));
    }
  }
  if (pool_->devices().empty()) return Status(ErrorCode::kNotFound, "no device to tune on");
  return Status::Ok();
}

// The run's TuneOptions from the setup and the devices opened: overlap, timing, run id, the log
// as a transfer source, and the pool told of every device lost.
void TuneSetup::CompleteTuneOptions() {
  TuneSetupOptions& o = options_;
  const bool local = o.devices.local();
  const bool pinned = this->pinned();
  TuneOptions& t = o.tune;
  // A batch smaller than the devices leaves some idle in every batch: kept, as asked, but said.
  const int device_count = static_cast<int>(pool_->devices().size());
  if (t.batch > 0 && t.batch < device_count) {
    Warn("batch " + std::to_string(t.batch) + " is smaller than the " +
         std::to_string(device_count) + " devices: " + std::to_string(device_count - t.batch) +
         " of them idle in every batch (leave the batch unset for " +
         std::to_string(ChooseBatch(0, device_count)) + ")");
  }
  // Builds beside the timed kernels when those run elsewhere or on CPUs of their own; servers
  // given on this machine (loopback) share CPUs with the builds we cannot steer: take turns.
  t.overlap = o.overlap ? *o.overlap : (local ? pinned : !AllOnThisMachine(pool_->devices()));
  t.measure.timing = o.timing ? *o.timing : (o.network ? NetworkTiming() : MeasureOptions{}.timing);
  if (t.run_id.empty()) t.run_id = NewRunId();
  if (records_tracker_) {
    farm_link_ = std::make_unique<FarmLink>(*records_tracker_, t.run_id);
    t.farm = farm_link_.get();
  }
  if (!t.log_path.empty() && std::find(t.transfer_logs.begin(), t.transfer_logs.end(),
                                       t.log_path) == t.transfer_logs.end()) {
    t.transfer_logs.push_back(t.log_path);
  }
  DevicePool* pool = pool_.get();
  auto lost = std::move(t.on_device_lost);
  t.on_device_lost = [pool, lost](const DeviceSpec& device, const Status& why) {
    pool->Lost(device, why);
    if (lost) lost(device, why);
  };
}

TuneSetup::~TuneSetup() {
  farm_.reset();
  pool_.reset();
  builder_.reset();
  if (!caller_cpus_.empty()) RestoreCpus(caller_cpus_).ok();  // best effort: the run is over
}

builder::BuildService& TuneSetup::builds() {
  if (farm_) return farm_->service();
  if (options_.local_builds != nullptr) return *options_.local_builds;
  return *builder_;
}

std::string TuneSetup::CpuSplitText() const {
  if (!pinned()) return "";
  return "timing on CPU " + FormatCpuList(split_.kernel) + ", building on CPU " +
         FormatCpuList(split_.build);
}

void TuneSetup::Warn(const std::string& text) const {
  if (options_.tune.on_warning) options_.tune.on_warning(text);
}

Expected<TuneSummary> TuneSetup::Tune(const Task& task) {
  TuneOptions o = options_.tune;
  const std::string label = task.id().Key();
  TuneProgress last;
  // The tracker's status page shows the run while it holds leases.
  auto report = [&](const TuneProgress& p, bool finished) {
    msg::TuneProgress r;
    r.run_id = o.run_id;
    r.task = label;
    r.trials = static_cast<uint32_t>(std::max(0, p.done));
    r.total = static_cast<uint32_t>(std::max(0, p.total));
    r.measured = static_cast<uint32_t>(std::max(0, p.measured));
    r.best_gflops = p.best_gflops;
    r.rate = p.rate;
    r.finished = finished;
    r.stopped_early = static_cast<uint32_t>(std::max(0, p.stopped_early));
    r.warm_from = p.warm_from;
    for (const auto& [kind, n] : p.errors) {
      r.errors[std::string(TrialErrorName(kind))] = static_cast<uint32_t>(n);
    }
    Status st = pool_->ReportProgress(std::move(r));
    if (!st.ok() && !report_warned_) {
      report_warned_ = true;
      Warn("progress report to the tracker: " + st.message());
    }
  };
  auto user = std::move(o.on_progress);
  o.on_progress = [&](const TuneProgress& p) {
    last = p;
    report(p, false);
    if (user) user(p);
  };
  auto result = tuner::Tune(task, devices(), builds(), o);
  if (result.ok()) {
    last.done = result->trials_in_log;
    last.measured = result->measured;
    if (result->has_best) last.best_gflops = std::max(last.best_gflops, result->best.gflops());
  }
  report(last, true);
  return result;
}

WorkloadTuneOptions TuneSetup::WorkloadOptions(const std::string& name, int round) const {
  WorkloadTuneOptions wo;
  wo.name = name;
  wo.trials = options_.tune.trials;
  wo.round = round;
  wo.threads = options_.threads;
  wo.tune = options_.tune;
  return wo;
}

Expected<WorkloadSummary> TuneSetup::TuneWorkload(const std::vector<WorkloadLayer>& layers,
                                                  const WorkloadTuneOptions& options) {
  return tuner::TuneWorkload(layers, target_, devices(), builds(), options);
}

void TuneSetup::AddToReport(nlohmann::json* report) const {
  nlohmann::json& j = *report;
  j["overlap"] = options_.tune.overlap;
  if (pinned()) {
    j["cpus"] = {{"kernel", FormatCpuList(split_.kernel)}, {"build", FormatCpuList(split_.build)}};
  }
  if (!options_.build_cache.empty() && options_.local_builds == nullptr) {
    const builder::BuildCacheUsage u = builder::ReadBuildCacheUsage(options_.build_cache);
    nlohmann::json& c = j["build_cache"];
    c["dir"] = options_.build_cache;
    c["entries"] = u.entries;
    c["bytes"] = u.bytes;
    c["max_bytes"] = static_cast<uint64_t>(options_.build_cache_max_mb * 1024 * 1024);
  }
  if (farm_) j["build_workers"] = farm_->Report();
}

}  // namespace crosstune::tuner
