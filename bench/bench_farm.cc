// crosstune-bench-farm: tuning on a farm of simulated boards through the real tracker, to show
// where one host stops keeping a farm busy (issue 26, part 4).
//
// A real crosstune-tracker and N crosstune-sim-device processes registered to it (port 0, real
// TCP, the real server library; their kernels answer from a recorded table after sleeping the
// recorded time, so 64 boards cost this machine almost nothing). The tuner leases every board
// through the tracker (DevicePool::FromTracker) and runs the real pipeline (Tune) on a
// ReplayTask of the same table. Builds go to a BuildService that stands for the host's local
// pool: --host-slots builds at once, each sleeping the recorded build time (or --build-seconds)
// and answering with the config's marker: the host-bound figure ("baseline"), today's behaviour.
//
// The search-quality figure is a replay (RunReplay: no devices, no pipeline): trials to 95% of
// the table's best with the batch ChooseBatch gives N devices against the batch it gives one,
// over seeds. It models the batch's effect on the tuner (a tuner that proposes B configs before
// it hears of any of them); it does not model the pipeline's one-batch lag (overlapped, the
// tuner plans batch i+1 before batch i is measured, so it hears of results a batch later than
// the replay does) nor the order in which results arrive.
//
// Prints one JSON object: {"devices", "trial_seconds", "space", "baseline": {run}, "quality":
// {...}, "cpu": ...}; a run is {"wall_s", "trials", "trials_per_s", "capacity_per_s",
// "fraction_of_capacity", "device_busy_mean", "device_busy_min", "build_queue": [[t, queued],
// ...], "planning": {...}, "batch", "best_cost", "tuner_process_cpu_s", "farm_processes_cpu_s"
// (the tracker's and boards' CPU, start-up included), ...}; with --compare-slots, "enough_slots":
// the same run with that many simulated build slots on this host, a stand-in for remote build
// workers (not yet in this build) that shows what the pipeline does when builds keep up.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/client/local_server.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/flag_checks.h"
#include "crosstune/guarded_main.h"
#include "crosstune/tuner/build_farm.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/replay_task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tune_setup.h"

namespace crosstune {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Flags {
  int devices = 8;
  int build_workers = 0;
  std::string space = CT_DEFAULT_KT_SPACE;
  std::string task;
  int trials = 0;  // 0: 16 per device (at least 64)
  int compare_slots = 0;
  double trial_seconds = 0.5;
  double build_seconds = 0;  // 0: the table's recorded build time, else kDefaultBuildSeconds
  int host_slots = 2;
  std::string tuner = "xgb";
  int batch = 0;
  int quality_seeds = 10;
  std::string tracker_bin = CT_DEFAULT_TRACKER;
  std::string device_bin = CT_DEFAULT_SIM_DEVICE;
  std::string build_worker_bin = CT_DEFAULT_SIM_BUILD_WORKER;
  std::string log_dir;
  bool quality_only = false;
};

// The figure for a 1024^3 matmul candidate (crosstune-bench-tune: 27 s for 64 builds).
constexpr double kDefaultBuildSeconds = 0.42;

// The host's local pool as the simulation sees it: `slots` builds at once, each sleeping the
// point's recorded build time (or a fixed one) and answering with the config's marker, which a
// simulated device loads. A point recorded as a compile failure fails its build.
class SimBuildService final : public builder::BuildService {
 public:
  SimBuildService(std::shared_ptr<const tuner::ReplayTable> table, int slots, double fixed_s)
      : table_(std::move(table)), slots_(slots), fixed_s_(fixed_s) {}

  builder::BuildResult Build(const builder::BuildRequest& request) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++queued_;
      cv_.wait(lock, [&] { return running_ < slots_; });
      --queued_;
      ++running_;
    }
    builder::BuildResult r = BuildNow(request);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    cv_.notify_one();
    return r;
  }

  std::vector<builder::BuildResult> BuildMany(
      const std::vector<builder::BuildRequest>& requests) override {
    std::vector<builder::BuildResult> out(requests.size());
    // One thread per request: they queue for the slots as the pool's requests queue for its
    // workers (the waiting ones sleep).
    std::vector<std::thread> threads;
    threads.reserve(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      threads.emplace_back([&, i] { out[i] = Build(requests[i]); });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  int slots() const override { return slots_; }
  // Builds waiting for a slot, and builds running.
  int queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_;
  }
  int running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }

 private:
  builder::BuildResult BuildNow(const builder::BuildRequest& request) const {
    builder::BuildResult r;
    auto index = tuner::FindSimMarker(request.source);
    const tuner::ReplayPoint* p = index ? table_->Find(*index) : nullptr;
    if (!p) {
      r.status = Status(ErrorCode::kInvalidArgument,
                        request.source_name + ": not a replay task's source (no marker)");
      return r;
    }
    double s = fixed_s_ > 0 ? fixed_s_ : p->build_s.value_or(kDefaultBuildSeconds);
    auto t0 = Clock::now();
    std::this_thread::sleep_until(
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)));
    r.build_seconds = Since(t0);
    if (!p->ok && (p->failure == "CompilationFailedConfig" || p->failure == "BuildError")) {
      r.status = Status(ErrorCode::kBuildError, "recorded build failure: " + p->failure);
      return r;
    }
    r.library = tuner::SimMarker(*index);
    return r;
  }

  std::shared_ptr<const tuner::ReplayTable> table_;
  const int slots_;
  const double fixed_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int queued_ = 0;
  int running_ = 0;
};

// Counts the builds handed to a build service and not yet answered, one request at a time (each
// on its own thread, as a batch's BuildMany hands them over at once), so the queue can be
// sampled whatever the service is: queued = outstanding less the service's slots.
class QueueGauge final : public builder::BuildService {
 public:
  explicit QueueGauge(builder::BuildService& inner) : inner_(inner) {}
  builder::BuildResult Build(const builder::BuildRequest& request) override {
    ++outstanding_;
    builder::BuildResult r = inner_.Build(request);
    --outstanding_;
    return r;
  }
  std::vector<builder::BuildResult> BuildMany(
      const std::vector<builder::BuildRequest>& requests) override {
    std::vector<builder::BuildResult> out(requests.size());
    std::vector<std::thread> threads;
    threads.reserve(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      threads.emplace_back([&, i] { out[i] = Build(requests[i]); });
    }
    for (auto& t : threads) t.join();
    return out;
  }
  int slots() const override { return inner_.slots(); }
  int queued() const { return std::max(0, outstanding_.load() - inner_.slots()); }

 private:
  builder::BuildService& inner_;
  std::atomic<int> outstanding_{0};
};

// CPU seconds (user + system) of this process, or of its children reaped so far.
double CpuSeconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// The first port on a program's "listening on 127.0.0.1:PORT" line.
Expected<std::string> ListeningAddress(const client::LocalServer& p) {
  if (p.port() == 0) return Status(ErrorCode::kInternal, "no port in: " + p.listening_line());
  return p.address();
}

// The simulated farm: a tracker and N boards, all real processes, gone with this object.
struct SimFarm {
  client::LocalServer tracker;
  std::vector<std::unique_ptr<client::LocalServer>> boards;
  std::string tracker_addr;

  static constexpr const char* kBuildKey = "sim-builders";
  Status Start(const Flags& f, const std::string& key, int build_workers) {
    CT_RETURN_IF_ERROR(tracker.Start({f.tracker_bin, "--host", "127.0.0.1", "--port", "0",
                                      "--startup-grace-s", "0", "--reattach-s", "0"},
                                     std::chrono::seconds(30), Log(f, "tracker.log")));
    CT_ASSIGN_OR_RETURN(tracker_addr, ListeningAddress(tracker));
    for (int i = 0; i < f.devices; ++i) {
      auto b = std::make_unique<client::LocalServer>();
      std::vector<std::string> argv = {f.device_bin,
                                       "--host",
                                       "127.0.0.1",
                                       "--port",
                                       "0",
                                       "--tracker",
                                       tracker_addr,
                                       "--key",
                                       key,
                                       "--space",
                                       f.space,
                                       "--trial-seconds",
                                       std::to_string(f.trial_seconds),
                                       "--exit-with-parent"};
      if (!f.task.empty()) argv.insert(argv.end(), {"--task", f.task});
      CT_RETURN_IF_ERROR(b->Start(argv, std::chrono::seconds(30), Log(f, "boards.log")));
      boards.push_back(std::move(b));
    }
    for (int i = 0; i < build_workers; ++i) {
      auto w = std::make_unique<client::LocalServer>();
      std::vector<std::string> argv = {f.build_worker_bin,
                                       "--host",
                                       "127.0.0.1",
                                       "--port",
                                       "0",
                                       "--tracker",
                                       tracker_addr,
                                       "--key",
                                       kBuildKey,
                                       "--space",
                                       f.space,
                                       "--cores",
                                       "1",
                                       "--exit-with-parent"};
      if (!f.task.empty()) argv.insert(argv.end(), {"--task", f.task});
      if (f.build_seconds > 0) {
        argv.insert(argv.end(), {"--build-seconds", std::to_string(f.build_seconds)});
      }
      CT_RETURN_IF_ERROR(w->Start(argv, std::chrono::seconds(30), Log(f, "build-workers.log")));
      boards.push_back(std::move(w));
    }
    // Every board registered before the pool asks: it takes only those granted at once.
    client::TrackerOptions to;
    to.tracker = tracker_addr;
    to.peer_name = "bench-farm";
    auto deadline = Clock::now() + std::chrono::seconds(60);
    for (;;) {
      auto c = client::TrackerClient::Connect(to);
      if (c.ok()) {
        auto q = (*c)->Query();
        if (q.ok()) {
          auto j = nlohmann::json::parse(*q, nullptr, false);
          if (j.is_object() && j["devices"].size() >= static_cast<size_t>(f.devices) +
                                                          static_cast<size_t>(build_workers)) {
            break;
          }
        }
      }
      if (Clock::now() > deadline) {
        return Status(ErrorCode::kTimeout,
                      "the boards and build workers did not all register in 60 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Status::Ok();
  }

  static std::string Log(const Flags& f, const std::string& name) {
    return f.log_dir.empty() ? "/dev/null" : f.log_dir + "/" + name;
  }
};

// One tuning run on the farm with `builds`; the run's figures.
Expected<nlohmann::json> RunOnFarm(const Flags& f, std::shared_ptr<const tuner::ReplayTable> table,
                                   SimBuildService& local, int build_workers) {
  SimFarm farm;
  CT_RETURN_IF_ERROR(farm.Start(f, "sim", build_workers));
  // The run set up as `crosstune tune --tracker T --key sim [--build-key B]` sets up its run
  // (tune_setup.h), with the simulated builds as the local pool.
  tuner::TuneSetupOptions so;
  so.devices.tracker = farm.tracker_addr;
  so.devices.key = "sim";
  so.devices.max_devices = f.devices;
  so.devices.wait = std::chrono::seconds(30);
  so.devices.timeout = std::chrono::seconds(60);
  so.devices.peer_name = "bench-farm";
  so.local_builds = &local;
  if (build_workers > 0) so.build_key = SimFarm::kBuildKey;
  // The boards are simulated on this machine but use no CPU to speak of: builds overlap them as
  // they would real boards elsewhere.
  so.overlap = true;
  // A trial's calls: the checked call, the time evaluator's warm-up and one round of one call
  // (crosstune-sim-device's --calls-per-trial default).
  so.timing = TimingOptions{.number = 1, .repeat = 1, .min_repeat_ms = 0};
  tuner::TuneOptions& o = so.tune;
  o.tuner = f.tuner;
  o.trials = f.trials > 0 ? f.trials : std::max(64, 16 * f.devices);
  o.batch = f.batch;
  o.include_default = false;
  std::map<std::string, double> busy;  // device -> seconds of its trials
  o.on_record = [&](const tuner::Record& r) { busy[r.device.name] += r.run_s; };
  std::vector<std::string> warnings;
  o.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  CT_ASSIGN_OR_RETURN(auto setup, tuner::TuneSetup::Open(std::move(so)));
  const tuner::BuildFarm* build_farm = setup->farm();
  if (build_workers > 0 && build_farm->workers() != static_cast<size_t>(build_workers)) {
    return Status(ErrorCode::kInternal, "leased " + std::to_string(build_farm->workers()) + " of " +
                                            std::to_string(build_workers) + " build workers" +
                                            (warnings.empty() ? "" : ": " + warnings.front()));
  }
  if (setup->devices().size() != static_cast<size_t>(f.devices)) {
    return Status(ErrorCode::kInternal, "leased " + std::to_string(setup->devices().size()) +
                                            " of " + std::to_string(f.devices) + " boards");
  }
  QueueGauge builds(setup->builds());
  auto task = tuner::ReplayTask::Make(table, setup->target());

  // The build queue over time, sampled beside the run.
  std::atomic<bool> done{false};
  nlohmann::json queue = nlohmann::json::array();
  int max_queued = 0;
  const auto t0 = Clock::now();
  std::thread sampler([&] {
    while (!done.load()) {
      int q = builds.queued();
      max_queued = std::max(max_queued, q);
      queue.push_back({std::round(Since(t0) * 100) / 100, q});
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  // Tune() itself rather than setup->Tune(): its builds go through the queue gauge.
  auto summary = tuner::Tune(*task, setup->devices(), builds, setup->options());
  const double tuner_cpu = CpuSeconds(RUSAGE_SELF) - cpu0;
  done = true;
  sampler.join();
  if (!summary.ok()) return summary.status();

  const double wall = summary->wall_s;
  const double capacity = f.devices / f.trial_seconds;
  double busy_min = wall, busy_sum = 0;
  for (const auto& d : setup->devices()) {
    double b = busy.count(d.name) ? busy[d.name] : 0;
    busy_min = std::min(busy_min, b);
    busy_sum += b;
  }
  nlohmann::json planning = {
      {"proposed", summary->planning.proposed},
      {"refit_s", summary->planning.refit_s},
      {"propose_s", summary->planning.propose_s},
      {"seconds", summary->planning.seconds()},
      {"ms_per_proposal", summary->planning.ms_per_proposal()},
      {"waited_s", summary->planning.waited_s},
      {"wall_fraction", wall > 0 ? summary->planning.seconds() / wall : 0},
  };
  int errors = 0;
  for (const auto& [kind, n] : summary->errors) errors += n;
  return nlohmann::json{
      {"devices", f.devices},
      {"build_slots", builds.slots()},
      {"wall_s", wall},
      {"trials", summary->measured},
      {"errors", errors},
      {"trials_per_s", wall > 0 ? summary->measured / wall : 0},
      {"capacity_per_s", capacity},
      {"fraction_of_capacity", wall > 0 ? summary->measured / wall / capacity : 0},
      {"device_busy_mean", wall > 0 ? busy_sum / f.devices / wall : 0},
      {"device_busy_min", wall > 0 ? busy_min / wall : 0},
      {"device_busy_fraction_tuner", summary->device_busy_fraction()},
      {"build_s_sum", summary->build_s},
      {"build_queue_max", max_queued},
      {"build_queue", queue},
      {"planning", planning},
      {"batch", summary->batch},
      {"best_cost", summary->has_best ? summary->best.mean : 0},
      // This process during Tune(): the tuner's planning, its device threads' RPCs, the
      // simulated builds' threads (sleeping), over the run's wall time.
      {"tuner_process_cpu_s", tuner_cpu},
      {"tuner_process_cpu_fraction", wall > 0 ? tuner_cpu / wall : 0},
      {"build_services", build_farm ? build_farm->Report() : nlohmann::json(nullptr)},
      {"warnings", warnings},
  };
}

// Trials to the target with the batches N devices get against one device's, over seeds, as the
// pipeline makes them: lagging one batch (overlapped), and ramped when no batch is given.
nlohmann::json Quality(const Flags& f, const tuner::ReplayTable& table) {
  nlohmann::json out = {
      {"what",
       "replay (RunReplay): trials to 95% of the table's best with the batches Tune() makes for "
       "N devices vs 1 device (ChooseBatch, ramped by RampBatch when no --batch is given), the "
       "tuner hearing of each batch one batch late as in the overlapped pipeline; it does not "
       "model the order results arrive in within a batch, nor failures of devices"},
      {"tuner", f.tuner},
      {"seeds", f.quality_seeds},
      {"table_best", table.best().value_or(0)},
      {"within_target", table.CountWithin(0.95)}};
  struct Case {
    const char* name;
    int devices;
    bool ramp;
  };
  const bool ramp = f.batch == 0;
  std::map<std::string, std::optional<double>> medians;
  for (const Case& c : {Case{"one_device", 1, ramp}, Case{"n_devices", f.devices, ramp},
                        Case{"n_devices_unramped", f.devices, false}}) {
    tuner::ReplayOptions o;
    o.tuner = f.tuner;
    o.batch = tuner::ChooseBatch(f.batch, c.devices);
    o.ramp = c.ramp;
    o.lag = true;
    auto s = tuner::SummariseReplay(table, o, f.quality_seeds);
    if (!s.ok()) {
      out[c.name] = {{"error", s.status().message()}};
      continue;
    }
    out[c.name] = tuner::ReplaySummaryJson(*s, /*with_runs=*/true);
    out[c.name]["ramp"] = c.ramp;
    out[c.name]["lag"] = true;
    medians[c.name] = s->median;
  }
  auto ratio = [&](const std::string& n) -> nlohmann::json {
    const auto& one = medians["one_device"];
    const auto& m = medians[n];
    if (!one || !m || *one <= 0) return nullptr;
    return *m / *one;
  };
  out["n_over_one_median"] = ratio("n_devices");
  out["n_unramped_over_one_median"] = ratio("n_devices_unramped");
  out["meets_target"] =
      out["n_over_one_median"].is_number() && out["n_over_one_median"].get<double>() <= 1.2;
  return out;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "";
}

int Main(int argc, char** argv) {
  CLI::App app{"crosstune-bench-farm: tuning on simulated boards through the real tracker"};
  Flags f;
  app.add_option("--devices", f.devices, "simulated boards")
      ->capture_default_str()
      ->check(IntegerIn<int>(1, 1024));
  app.add_option("--build-workers", f.build_workers,
                 "simulated build workers (crosstune-sim-build-worker) beside the host's pool: "
                 "a second run, \"farm\" (0: none)")
      ->capture_default_str()
      ->check(IntegerIn<int>(0, 1024));
  app.add_option("--space", f.space, "the recorded table: a Kernel Tuner cache or one of our logs")
      ->capture_default_str();
  app.add_option("--task", f.task, "the log's task (default: its first)");
  app.add_option("--trials", f.trials, "trials of a run (0: 16 per board, at least 64)")
      ->capture_default_str()
      ->check(IntegerIn<int>(0, 1'000'000));
  app.add_option("--trial-seconds", f.trial_seconds, "seconds a trial keeps a board busy")
      ->capture_default_str()
      ->check(SecondsIn(0.001, 3600));
  app.add_option("--build-seconds", f.build_seconds,
                 "seconds every build takes (0: the table's recorded build time, else 0.42)")
      ->capture_default_str()
      ->check(SecondsIn(0, 3600));
  app.add_option("--host-slots", f.host_slots, "builds the host's local pool runs at once")
      ->capture_default_str()
      ->check(IntegerIn<int>(1, 1024));
  app.add_option("--compare-slots", f.compare_slots,
                 "also run with this many simulated build slots on this host (0: no), to show "
                 "what the pipeline does when builds keep up")
      ->capture_default_str()
      ->check(IntegerIn<int>(0, 1024));
  app.add_option("--tuner", f.tuner, "random, ga, xgb")->capture_default_str();
  app.add_option("--batch", f.batch, "configs per batch (0: ChooseBatch's for the boards)")
      ->capture_default_str()
      ->check(IntegerIn<int>(0, 100'000));
  app.add_option("--quality-seeds", f.quality_seeds,
                 "seeds of the search-quality replay (0: skip it)")
      ->capture_default_str()
      ->check(IntegerIn<int>(0, 10'000));
  app.add_option("--tracker-bin", f.tracker_bin, "crosstune-tracker")->capture_default_str();
  app.add_option("--device-bin", f.device_bin, "crosstune-sim-device")->capture_default_str();
  app.add_option("--build-worker-bin", f.build_worker_bin, "crosstune-sim-build-worker")
      ->capture_default_str();
  app.add_option("--log-dir", f.log_dir, "keep the tracker's and boards' logs here");
  app.add_flag("--quality-only", f.quality_only, "only the search-quality replay (no farm)");
  CLI11_PARSE(app, argc, argv);

  auto loaded = tuner::ReplayTable::Load(f.space, f.task);
  if (!loaded.ok()) {
    std::fprintf(stderr, "crosstune-bench-farm: error: %s\n", loaded.status().message().c_str());
    return 1;
  }
  std::shared_ptr<const tuner::ReplayTable> table = std::move(loaded).value();

  nlohmann::json out = {
      {"devices", f.devices},
      {"build_workers", f.build_workers},
      {"trial_seconds", f.trial_seconds},
      {"space", table->source()},
      {"table_best", table->best().value_or(0)},
      {"tuner", f.tuner},
      {"cpu", CpuModel()},
      {"host_cpus", static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN))},
  };
  int rc = 0;
  if (!f.quality_only) {
    SimBuildService local(table, f.host_slots, f.build_seconds);
    const double children0 = CpuSeconds(RUSAGE_CHILDREN);
    auto run = RunOnFarm(f, table, local, 0);
    if (run.ok()) {
      out["baseline"] = *run;
      out["baseline"]["farm_processes_cpu_s"] = CpuSeconds(RUSAGE_CHILDREN) - children0;
      out["baseline"]["what"] = "the host's local pool only (" + std::to_string(f.host_slots) +
                                " build slots): today's behaviour";
    } else {
      out["baseline"] = {{"error", run.status().ToString()}};
      rc = 1;
    }
  }
  if (!f.quality_only && f.build_workers > 0) {
    SimBuildService local(table, f.host_slots, f.build_seconds);
    const double children0 = CpuSeconds(RUSAGE_CHILDREN);
    auto run = RunOnFarm(f, table, local, f.build_workers);
    if (run.ok()) {
      out["farm"] = *run;
      out["farm"]["farm_processes_cpu_s"] = CpuSeconds(RUSAGE_CHILDREN) - children0;
      out["farm"]["what"] = std::to_string(f.build_workers) +
                            " simulated build workers (crosstune-sim-build-worker, 1 core each, "
                            "leased through the tracker) beside the host's pool";
    } else {
      out["farm"] = {{"error", run.status().ToString()}};
      rc = 1;
    }
  }
  if (!f.quality_only && f.compare_slots > 0) {
    SimBuildService slots(table, f.compare_slots, f.build_seconds);
    const double children0 = CpuSeconds(RUSAGE_CHILDREN);
    auto run = RunOnFarm(f, table, slots, 0);
    if (run.ok()) {
      out["enough_slots"] = *run;
      out["enough_slots"]["farm_processes_cpu_s"] = CpuSeconds(RUSAGE_CHILDREN) - children0;
      out["enough_slots"]["what"] =
          std::to_string(f.compare_slots) +
          " simulated build slots on this host: no remote build worker, a stand-in for enough of "
          "them";
    } else {
      out["enough_slots"] = {{"error", run.status().ToString()}};
      rc = 1;
    }
  }
  if (f.quality_seeds > 0) out["quality"] = Quality(f, *table);
  std::printf("%s\n", out.dump(2).c_str());
  return rc;
}

}  // namespace
}  // namespace crosstune

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-farm",
                                [&] { return crosstune::Main(argc, argv); });
}
