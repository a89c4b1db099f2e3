// One tuning run of one task: the search loop over the measure pipeline.
//
//   builder -> batch i+1 compiles while the devices measure batch i
//   tuner   -> proposes batch i+1 from every result up to batch i-1 (the model lags one batch);
//              overlapped (TuneOptions::overlap), it hears of batch i-1 (Update, the xgb refit)
//              and proposes while the devices measure batch i, so they never wait for it unless
//              planning outlasts the batch; taking turns, it plans between two batches
//   devices -> each pulls candidates from the batch's queue; a lost device's candidate goes back
//              to the queue for another; the caller hears of it (on_device_lost) to return leases
//
// Resume: records of the same task and target already in the log are read first; their configs
// are never measured again, the tuner starts from them, and `trials` counts them, so a second run
// with the same log measures only the difference. Records are appended (one write each) as
// results arrive.
//
// Thread-safety: Tune() blocks its caller; the callbacks run on the calling thread, except
// on_device_lost, which runs on the lost device's thread: devices lost at the same time call it
// at the same time (each with its own DeviceSpec and Status).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/timing.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tuner.h"
#include "crosstune/tuner/workload.h"

namespace crosstune::tuner {

class FarmLink;  // farm_records.h

struct TuneProgress {
  int done = 0;                      // trials of this task in the log, this run's included
  int total = 0;                     // the run's goal
  int measured = 0;                  // by this run
  std::map<TrialError, int> errors;  // this run's failures by kind
  double best_gflops = 0;
  int devices = 0;  // still serving
  int devices_busy = 0;
  double elapsed_s = 0;
  double rate = 0;  // trials per second in this run
  bool batch_end = false;
  int stopped_early = 0;  // this run's trials stopped early as clear losers (stop_losers)
  std::string warm_from;  // the device kind whose farm records the tuner started from
};

// The batch when TuneOptions::batch is 0, with few devices.
constexpr int kDefaultBatch = 8;

// The batch a run uses: `batch` when it is above 0, else at least kDefaultBatch and twice the
// devices, rounded up to a whole number of candidates per device, so every device has work in
// every batch and a batch's tail (devices idle while the last candidates run) is a small share.
int ChooseBatch(int batch, int devices);

// The batch to plan next when ChooseBatch chose `full` (no batch was given) and `planned` trials
// of the task are measured or in the pipeline: `full` halved (rounding up) while it is above
// `planned` and its half is still kDefaultBatch or more. A run on many devices therefore starts
// as a run on one would (8, 8, 16, 32, ... up to `full`: no batch larger than what came before
// it), so the cost model has results to learn from before a large batch is proposed. Replayed
// with the pipeline's one-batch lag (crosstune-bench-farm's "quality", xgb, 50 seeds, median
// trials to 95% of the best against a batch of 8): a fixed batch of 128 needed 1.62x on the
// pnpoly space and 1.50x on the tests' matmul space, the ramp 1.10x and 1.00x. A batch under
// 2 x kDefaultBatch is never ramped; a resumed run ramps from what it resumes.
int RampBatch(int full, int planned);

struct TuneOptions {
  std::string tuner = "xgb";
  int trials = 100;    // total for the task in the log
  int batch = 0;       // configs per batch; 0: ChooseBatch's, from the devices opened
  int early_stop = 0;  // stop after this many trials without a better config; 0: never
  // The device stops timing a candidate after a round once it is clearly slower than the best
  // its device has timed (LoserCutoff in tune.cc; Record::stopped_early).
  bool stop_losers = true;
  // Build the next batch, and let the tuner plan it, while the devices measure this one (the
  // default). Off: one after the other, nothing beside a timed kernel (servers on this machine's
  // CPUs), the baseline that crosstune-bench-tune compares against.
  bool overlap = true;
  // Measure the template's default (untuned) config first, so the gain from tuning is visible
  // in the same run. It counts as a trial.
  bool include_default = true;
  std::string log_path;  // empty: no records kept
  std::string run_id;
  MeasureOptions measure;
  TunerOptions tuner_options;
  // Logs with records of other tasks of the same template, for the cost model's warm start.
  std::vector<std::string> transfer_logs;
  // The farm's records (tune --records tracker; farm_records.h), or none. Once the devices are
  // open, what the farm has of the task on their kind is resumed from as the log is, and again
  // after each batch (other runs' records); each batch's configs are claimed before they are
  // timed, and one another run holds or the farm has is not timed here; each batch's records go
  // to the farm after it. Not owned.
  FarmLink* farm = nullptr;
  // Written into every record (Record::workload) when the task is part of a network.
  nlohmann::json workload;
  // Knobs held at one value each ({"knob": value, ...}, values as records show them): only the
  // other knobs are searched. The default config is measured only when it agrees with them.
  nlohmann::json pins = nlohmann::json::object();
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT): end after the current batch
  std::function<void(const TuneProgress&)> on_progress;  // after each measurement and batch
  // Each record of this run as it is measured (after it is appended to the log), before the
  // on_progress call that counts it; on the calling thread.
  std::function<void(const Record&)> on_record;
  std::function<void(const std::string&)> on_warning;
  std::function<void(const DeviceSpec&, const Status&)> on_device_lost;
  // Makes the tuner instead of MakeTuner(tuner, space, options) (tests: a tuner that watches
  // when it is called). The space and options are those MakeTuner would get.
  std::function<Expected<std::unique_ptr<Tuner>>(const ConfigSpace&, const TunerOptions&)>
      make_tuner;
};

// Time the tuner spent planning: hearing of results (Update and the cost model's refit) and
// proposing configs (NextBatch), and how much of it no measurement ran beside (the devices
// waited for it, or the run's wall time did).
struct PlanningTime {
  int proposed = 0;      // configs the tuner proposed (the default config is not one)
  double refit_s = 0;    // Update() and Refit()
  double propose_s = 0;  // NextBatch()
  double waited_s = 0;   // of refit_s + propose_s, while no device measured
  double seconds() const { return refit_s + propose_s; }
  double ms_per_proposal() const { return proposed > 0 ? seconds() * 1e3 / proposed : 0; }
  void Add(const PlanningTime& other);
};

struct TuneSummary {
  int trials_in_log = 0;  // for this task, after the run
  int resumed = 0;        // records that were already there
  int stale = 0;     // records of the task made by another generator (MadeByThisGenerator): skipped
  int measured = 0;  // by this run
  std::map<TrialError, int> errors;  // over every record of the task
  bool has_best = false;
  Record best;
  bool has_default = false;  // the default config's record (this run's or the log's)
  Record default_record;
  double wall_s = 0;
  double device_busy_s = 0;  // summed over devices: time spent measuring
  int stopped_early = 0;     // this run's trials the device stopped timing early (stop_losers)
  double build_s = 0;        // summed build time of this run
  int builds = 0;            // this run's measured trials that reached the builder
  int build_cache_hits = 0;  // of those, the builds that came from the build cache
  int devices = 0;
  int batch = 0;  // configs per batch (ChooseBatch's)
  // With TuneOptions::farm: the device kind whose records were shared, the farm's records taken
  // in (of other runs: not measured here), the configs left to other runs (claimed or measured
  // by them when this run would have timed them), and this run's records not sent (the tracker
  // away).
  std::string farm_kind;
  int farm_resumed = 0;
  int farm_elsewhere = 0;
  int farm_unsent = 0;
  // Warm start (with TuneOptions::farm, when the farm had nothing of the task on this kind): the
  // nearest kind whose records the tuner started from, how many, and how far the tuner trusted
  // them at the end (Tuner::prior_trust); `warm_target` the target they were built for where it
  // is another than the run's (no kind had records of the task for the run's own).
  std::string warm_kind;
  std::string warm_target;
  int warm_records = 0;
  std::optional<PriorTrust> warm_trust;
  PlanningTime planning;
  bool stopped = false;  // by options.stop
  bool early_stopped = false;
  std::vector<std::string> log_warnings;
  // device_busy_s over the wall time of every device: how busy the run kept them (0..1).
  double device_busy_fraction() const;
};

// Reads "knob=value" pins (--pin) into TuneOptions::pins. The value is JSON when it parses as
// JSON (4, ["ir","jr"], true), else a string. kInvalidArgument for a pin without '=' or a knob
// pinned twice; the knob and value themselves are checked against the space by Tune().
Expected<nlohmann::json> ParsePins(const std::vector<std::string>& pins);

// Runs the search. Errors: no device could be opened; every device was lost; every trial of the
// task failed (the message names the commonest error kind and its text, e.g. "all 64 trials
// failed; commonest: BuildError (64): matmul_3.c:7: error: ..."). The records are kept either way.
Expected<TuneSummary> Tune(const Task& task, const std::vector<DeviceSpec>& devices,
                           builder::BuildService& builder, const TuneOptions& options);

// A task's search kept open between runs, as a network's tuning gives each task many short
// rounds: the tuner with its cost model (the genetic tuner's population), the task's records, the
// log writer and the reference data stay from one run to the next; devices are opened for each
// run and closed after it, so no lease is held between rounds. Tune() is Open() and one Run().
//
// Thread-safety: one thread at a time, as Tune().
class TuneJob {
 public:
  // Reads what the log holds for the task (resume), makes the tuner and reads the transfer logs
  // (options.transfer_logs) once. options.trials and include_default are Run()'s arguments.
  static Expected<std::unique_ptr<TuneJob>> Open(const Task& task, builder::BuildService& builder,
                                                 const TuneOptions& options);
  ~TuneJob();
  TuneJob(const TuneJob&) = delete;
  TuneJob& operator=(const TuneJob&) = delete;
  // Searches until `trials` configs of the task are in the log, as Tune() does. The summary's
  // measured, build_s, device_busy_s, planning and wall_s are this run's; the rest cover every
  // record of the task. Overlapped, the tuner hears of the run's last batch at the next Run's
  // first proposal (so a single Tune() never pays for a refit nothing uses).
  Expected<TuneSummary> Run(const std::vector<DeviceSpec>& devices, int trials,
                            bool include_default);
  // Records of `other` (another task of the same template) as transfer samples for the cost
  // model: what a network's other tasks measured since this job opened. Others are ignored.
  void AddTransfer(const Task& other, const std::vector<Record>& records);
  int trials_in_log() const;

 private:
  struct State;
  class RunLoop;  // one Run(): its devices, its batches and its summary (tune.cc)
  explicit TuneJob(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

// The run as `crosstune tune --json` prints it: the task, target, tuner and log, the counts and
// errors by kind, the wall time and how busy the devices were, the batch, the tuner's planning
// time ("planning": {"proposed", "refit_s", "propose_s", "seconds", "ms_per_proposal",
// "wall_fraction", "waited_s"}), the build cache's hits ("build_cache": {"builds", "hits",
// "hit_rate"}), with the farm's records "farm": {"device_kind", "resumed", "elsewhere",
// "unsent"}, the default config's and the best record's figures.
nlohmann::json TuneReport(const Task& task, const TuneOptions& options, const TuneSummary& summary);

// "all N trials failed; commonest: KIND (count): message" for a task's records, or Ok when one
// succeeded.
Status AllFailedStatus(const std::vector<Record>& task_records);
// The kind AllFailedStatus names: the commonest failure of records that all failed (the first
// in TrialError order on a tie); nullopt when one succeeded or there are none.
std::optional<TrialError> CommonestFailure(const std::vector<Record>& task_records);

// --- A network: its tasks under one budget ------------------------------------------------------

// How a network's tasks are timed unless the user says otherwise (`crosstune tune --model` and
// `--workload`, Python's tune() of a model or workload): cold, the CPU caches flushed before each
// of 5 single calls. In a network each layer finds the caches as the layer before left them, its
// own weights out of them (ResNet-50's late 3x3 layers hold 2.4-9.4 MB); a layer repeated warm
// picks configs that only win with their weights cached. Measured (README, bench-model): the
// 3x3 layers of 7x7 pixels ran 16% faster in the network tuned cold, though 14% slower alone.
inline TimingOptions NetworkTiming() {
  return TimingOptions{.number = 1, .repeat = 5, .min_repeat_ms = 0, .flush_cache = true};
}

struct WorkloadTuneOptions {
  std::string name;   // the workload's name, for records ("resnet50")
  int trials = 2000;  // for the whole network in the log, earlier runs' included
  int round = 16;     // trials per round for the task the scheduler picks
  int threads = 1;    // every task's threads
  SchedulerOptions scheduler;
  // For each round's Tune(): tuner, batch, measure, log_path (required), stop, callbacks. Its
  // trials, include_default, transfer_logs and workload are set per round.
  TuneOptions tune;
  // After each round: the task that ran, and the scheduler's state.
  std::function<void(size_t task, const TaskScheduler&)> on_round;
};

struct WorkloadTaskResult {
  WorkloadLayer layer;
  TaskId id;
  int trials = 0;
  double best_seconds = TaskScheduler::kNoTime;
  double share = 0;  // of the estimated network time
  bool has_best = false;
  Record best;
  std::string error;  // why it has no time, if it has none
  int rounds = 0;     // of this run that the scheduler gave the task
  int opened = 0;     // times its search was opened (TuneJob): 1 for every task that ran
};

struct WorkloadSummary {
  std::vector<WorkloadTaskResult> tasks;
  double network_seconds = TaskScheduler::kNoTime;          // sum of count x best
  double untuned_network_seconds = TaskScheduler::kNoTime;  // the same with default configs
  int trials_in_log = 0;
  int measured = 0;  // by this run
  int builds = 0;    // by this run, and of them the build cache's hits (TuneSummary's)
  int build_cache_hits = 0;
  int batch = 0;          // the largest batch of a round
  PlanningTime planning;  // summed over the rounds
  double wall_s = 0;
  bool stopped = false;
};

// Tunes a network's layers as tasks under one budget: resumes every task's trials from the log,
// then gives rounds to the task the scheduler picks until the budget is spent. Tasks of one
// template warm-start each other's cost model from the same log. Errors: a layer's template
// cannot make its task (the message names it); no device. A task whose every trial fails is
// reported in its result, not as an error.
Expected<WorkloadSummary> TuneWorkload(const std::vector<WorkloadLayer>& layers,
                                       const builder::Target& target,
                                       const std::vector<DeviceSpec>& devices,
                                       builder::BuildService& builder,
                                       const WorkloadTuneOptions& options);

// A network's run as `crosstune tune --workload --json` prints it: per task its layer, trials,
// best time (ms, null when none), share and GFLOP/s; the estimated network times tuned and
// untuned (null while a task has none); the batch and the planning time summed over the rounds.
nlohmann::json WorkloadReport(const WorkloadTuneOptions& options, const builder::Target& target,
                              const WorkloadSummary& summary);

}  // namespace crosstune::tuner
