#include "crosstune/tuner/tune.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "crosstune/json_reader.h"
#include "crosstune/tuner/farm_records.h"
#include "crosstune/tuner/loser_cutoff.h"

namespace crosstune::tuner {

namespace {
using Clock = std::chrono::steady_clock;
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double Since(Clock::time_point t0) { return Seconds(Clock::now() - t0); }

TrialResult ToTrial(uint64_t index, const Record& r) {
  TrialResult t;
  t.index = index;
  t.ok = r.ok() && r.mean > 0;
  t.cost = t.ok ? r.mean : std::numeric_limits<double>::infinity();
  t.at_least = t.ok && r.stopped_early;
  return t;
}

// Measured points of other tasks of the same template, as features for the cost model.
std::vector<TransferSample> ReadTransfer(const Task& task, const std::vector<std::string>& logs,
                                         std::vector<std::string>* warnings) {
  std::vector<TransferSample> out;
  std::unordered_map<std::string, int> groups;
  std::unordered_map<std::string, std::unique_ptr<Task>> tasks;
  const std::string own = task.id().Key() + "|" + task.target().ToString();
  for (const auto& path : logs) {
    auto log = ReadLog(path);
    if (!log.ok()) continue;
    for (const auto& r : log->records) {
      if (r.task.template_name != task.id().template_name) continue;
      std::string key = r.task.Key() + "|" + r.target;
      if (key == own) continue;
      auto it = tasks.find(key);
      if (it == tasks.end()) {
        std::unique_ptr<Task> other;
        if (auto target = builder::ParseTarget(r.target); target.ok()) {
          if (auto t = MakeTask(r.task.template_name, r.task.shape, *target, {r.task.threads});
              t.ok()) {
            other = std::move(t).value();
          }
        }
        it = tasks.emplace(key, std::move(other)).first;
        groups.emplace(key, static_cast<int>(groups.size()) + 1);
      }
      if (!it->second) continue;
      auto config = it->second->space().FromJson(r.config_values);
      if (!config.ok()) continue;
      TransferSample s;
      s.features = it->second->Features(*config);
      s.ok = r.ok() && r.mean > 0;
      s.cost = s.ok ? r.mean : std::numeric_limits<double>::infinity();
      s.group = groups[key];
      out.push_back(std::move(s));
    }
  }
  if (!out.empty() && warnings) {
    warnings->push_back("transfer: " + std::to_string(out.size()) + " records of " +
                        std::to_string(groups.size()) + " other " + task.id().template_name +
                        " task(s) warm-start the cost model");
  }
  return out;
}

}  // namespace

namespace {

struct FailureCount {
  TrialError kind = TrialError::kOk;
  int count = 0;
  std::string first_message;
};

std::optional<FailureCount> CountFailures(const std::vector<Record>& records) {
  if (records.empty()) return std::nullopt;
  std::map<TrialError, int> count;
  std::map<TrialError, std::string> first_message;
  for (const auto& r : records) {
    if (r.ok()) return std::nullopt;
    if (count[r.error]++ == 0) first_message[r.error] = r.message;
  }
  auto top = std::max_element(count.begin(), count.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; });
  return FailureCount{top->first, top->second, first_message[top->first]};
}

}  // namespace

std::optional<TrialError> CommonestFailure(const std::vector<Record>& records) {
  auto f = CountFailures(records);
  if (!f) return std::nullopt;
  return f->kind;
}

Status AllFailedStatus(const std::vector<Record>& records) {
  auto f = CountFailures(records);
  if (!f) return Status::Ok();
  return Status(ErrorCode::kInternal,
                "all " + std::to_string(records.size()) +
                    " trials failed; commonest: " + std::string(TrialErrorName(f->kind)) + " (" +
                    std::to_string(f->count) + "): " + f->first_message);
}

int ChooseBatch(int batch, int devices) {
  if (batch > 0) return batch;
  devices = std::max(devices, 1);
  const int want = std::max(kDefaultBatch, 2 * devices);
  return (want + devices - 1) / devices * devices;
}

int RampBatch(int full, int planned) {
  const int64_t cap = std::max<int64_t>(kDefaultBatch, static_cast<int64_t>(planned));
  int b = full;
  while (b > cap && (b + 1) / 2 >= kDefaultBatch) b = (b + 1) / 2;
  return b;
}

void PlanningTime::Add(const PlanningTime& other) {
  proposed += other.proposed;
  refit_s += other.refit_s;
  propose_s += other.propose_s;
  waited_s += other.waited_s;
}

// A pin's value (a knob's choice) as text, at most.
constexpr size_t kMaxPinBytes = 64 << 10;

Expected<nlohmann::json> ParsePins(const std::vector<std::string>& pins) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& pin : pins) {
    const size_t eq = pin.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status(ErrorCode::kInvalidArgument, "pin '" + pin + "': expected KNOB=VALUE");
    }
    const std::string knob = pin.substr(0, eq), text = pin.substr(eq + 1);
    if (out.contains(knob)) {
      return Status(ErrorCode::kInvalidArgument, "pin: knob '" + knob + "' is pinned twice");
    }
    // JSON where it parses (8, "x", [1, 2]), else the text as a string; a list or an object that
    // does not parse is a mistake, named (bounded: ParseJson, as everything from outside).
    auto value = ParseJson(text, {.max_bytes = kMaxPinBytes});
    if (!value.ok() && !text.empty() && (text[0] == '[' || text[0] == '{')) {
      return Status(ErrorCode::kInvalidArgument, "pin '" + knob + "': " + value.status().message());
    }
    out[knob] = value.ok() ? std::move(value).value() : nlohmann::json(text);
  }
  return out;
}

// What a search keeps between runs (TuneJob): the space it searches, the task's records, the
// tuner with its cost model, the log writer and, once a run needed it, the reference data.
struct TuneJob::State {
  State(const Task& t, builder::BuildService& b, TuneOptions o)
      : task(t), builder(b), options(std::move(o)) {}
  const Task& task;
  builder::BuildService& builder;
  TuneOptions options;
  ConfigSpace pinned;
  const ConfigSpace* space = nullptr;
  std::string target;
  std::vector<Record> task_records;
  std::unordered_set<uint64_t> done;
  int stale = 0;
  std::vector<std::string> log_warnings;
  std::unique_ptr<RecordWriter> writer;
  std::unique_ptr<Tuner> tuner;
  // Measured, not yet given to the tuner (Update): overlapped, the last batch's results wait for
  // the next proposal, which may be the next Run's.
  std::vector<TrialResult> unheard;
  std::optional<ReferenceData> reference;
  std::unordered_map<std::string, int> transfer_groups;  // other task key -> group
  int runs = 0;
  void Warn(const std::string& w) const {
    if (options.on_warning) options.on_warning(w);
  }
};

TuneJob::TuneJob(std::unique_ptr<State> state) : s_(std::move(state)) {}
TuneJob::~TuneJob() = default;

int TuneJob::trials_in_log() const { return static_cast<int>(s_->task_records.size()); }

Expected<std::unique_ptr<TuneJob>> TuneJob::Open(const Task& task, builder::BuildService& builder,
                                                 const TuneOptions& options) {
  auto st = std::make_unique<State>(task, builder, options);
  State& s = *st;
  // The space the tuner searches: the task's, less what the pins exclude (same numbering).
  if (!options.pins.empty()) {  // null and {} hold nothing
    if (!options.pins.is_object()) {
      return Status(ErrorCode::kInvalidArgument, "pins must be a JSON object {\"knob\": value}");
    }
    s.pinned = task.space();
    for (const auto& [knob, value] : options.pins.items()) {
      CT_RETURN_IF_ERROR(s.pinned.Pin(knob, value));
    }
  }
  s.space = s.pinned.knobs().empty() ? &task.space() : &s.pinned;
  const ConfigSpace& space = *s.space;
  s.target = task.target().ToString();

  // --- Resume: what the log already holds for this task and target.
  std::vector<TrialResult> resumed;
  if (!options.log_path.empty()) {
    auto log = ReadLog(options.log_path);
    if (log.ok()) {
      for (const auto& w : log->warnings) s.Warn(w);
      s.log_warnings = log->warnings;
      for (const auto& r : log->records) {
        if (!(r.task == task.id()) || r.target != s.target) continue;
        // Measured on code the template no longer generates for this config: not this config.
        if (!MadeByThisGenerator(task, r)) {
          ++s.stale;
          continue;
        }
        // Match on the knob values, so a log stays usable if the index order ever changes.
        auto c = space.FromJson(r.config_values);
        uint64_t index = c.ok() ? c->index() : r.config_index;
        if (!s.done.insert(index).second) continue;
        s.task_records.push_back(r);
        resumed.push_back(ToTrial(index, r));
      }
    } else if (log.status().code() != ErrorCode::kNotFound) {
      return log.status();
    }
  }
  if (s.stale > 0) {
    s.Warn(std::to_string(s.stale) + " record(s) of " + task.id().Key() + " in " +
           options.log_path +
           " measured code the template now generates differently (another generator): not "
           "resumed, their configs are measured again");
  }

  if (!options.log_path.empty()) {
    CT_ASSIGN_OR_RETURN(s.writer, RecordWriter::Open(options.log_path));
  }

  TunerOptions topt = options.tuner_options;
  if (!topt.features) topt.features = [&task](const Config& c) { return task.Features(c); };
  CT_ASSIGN_OR_RETURN(s.tuner, options.make_tuner ? options.make_tuner(space, topt)
                                                  : MakeTuner(options.tuner, space, topt));
  if (!resumed.empty()) s.tuner->Update(resumed);
  if (!options.transfer_logs.empty()) {
    std::vector<std::string> notes;
    auto samples = ReadTransfer(task, options.transfer_logs, &notes);
    for (const auto& n : notes) s.Warn(n);
    if (!samples.empty()) s.tuner->AddTransfer(samples);
  }
  return std::unique_ptr<TuneJob>(new TuneJob(std::move(st)));
}

void TuneJob::AddTransfer(const Task& other, const std::vector<Record>& records) {
  State& s = *s_;
  if (other.id().template_name != s.task.id().template_name || &other == &s.task) return;
  const std::string key = other.id().Key() + "|" + other.target().ToString();
  // Groups after those ReadTransfer numbered (1..): one per other task, kept across calls.
  auto [it, added] =
      s.transfer_groups.emplace(key, 1000 + static_cast<int>(s.transfer_groups.size()));
  (void)added;
  std::vector<TransferSample> samples;
  for (const auto& r : records) {
    if (!(r.task == other.id()) || r.target != other.target().ToString()) continue;
    auto config = other.space().FromJson(r.config_values);
    if (!config.ok()) continue;
    TransferSample t;
    t.features = other.Features(*config);
    t.ok = r.ok() && r.mean > 0;
    t.cost = t.ok ? r.mean : std::numeric_limits<double>::infinity();
    t.group = it->second;
    samples.push_back(std::move(t));
  }
  if (!samples.empty()) s.tuner->AddTransfer(samples);
}

// One Run() of a job: the devices it opened, the pipeline of batches and the summary and progress
// it fills. Run() is its plan: OpenDevices, StartPipeline (the first batch), then Step for each
// batch (propose, build, measure, record, the stop rules) and Finish.
//
// Thread-safety: the calling thread owns it. While a batch runs, its device threads (MeasureOn)
// change only the batch's queue and, under the queue's `mu`, alive_, lost_,
// progress_.devices_busy, sum_.device_busy_s and the job's log; they read the runners, task, space,
// options and tuner name, which nothing changes then. Overlapped, a planning step runs beside them
// (PlanAndBuildAsync): it alone touches the tuner, planned_set_ and planned_ until the calling
// thread takes its result from building_.
class TuneJob::RunLoop {
 public:
  RunLoop(State& state, int trials, bool include_default);
  // The log already holds `trials` configs of the task: nothing to measure.
  bool Done() const { return progress_.done >= options_.trials; }
  // Connects and starts the devices; an error when none could be used.
  Status OpenDevices(const std::vector<DeviceSpec>& devices);
  // The farm's records of the task on the devices' kind since the last pull, as resumed records
  // (options.farm; a pull that fails is a warning).
  void PullFarm();
  void WarmFromFarm();
  // Plans the first batch (the devices wait for it) and starts its build.
  void StartPipeline();
  // Measures one batch and records it: true while the run goes on, false when nothing was left
  // to measure or a stop rule ended the run; an error when every device was lost.
  Expected<bool> Step();
  // The summary over every record of the task; AllFailedStatus's error when every one failed.
  Expected<TuneSummary> Finish();

 private:
  // One planning step's proposals, its tuner's warnings and its time.
  struct Plan {
    std::vector<uint64_t> indices;
    std::vector<std::string> warnings;
    PlanningTime time;
    Clock::time_point start, end;
  };
  // A batch ready to measure and, overlapped, the plan that chose it.
  struct Prepared {
    std::vector<Candidate> batch;
    std::optional<Plan> plan;
  };
  // The stop rules, read before a batch runs: either one plans nothing after it.
  struct Stops {
    bool requested = false;  // options.stop
    bool early = false;      // options.early_stop trials without a better config
    bool any() const { return requested || early; }
  };
  using Finished = std::vector<std::pair<Record, TrialResult>>;
  // What a batch's device threads share with the calling thread, all under `mu`.
  struct BatchQueue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<const Candidate*> queue;
    int in_flight = 0;
    Finished finished;
    std::vector<std::string> device_warnings;  // said by the calling thread
  };

  Plan Propose(const std::vector<TrialResult>& heard, int n);
  void Account(const Plan& p, double waited_s);
  int BatchNow() const;
  std::future<Prepared> BuildAsync(std::vector<uint64_t> indices);
  std::future<Prepared> PlanAndBuildAsync(std::vector<TrialResult> heard, int n);
  static std::future<Prepared> NothingMore();
  Stops CheckStops() const;
  // Of `batch`, the candidates the farm grants this run (options.farm): the others are left to
  // the run that claimed them or the record the farm has.
  std::vector<Candidate> ClaimFromFarm(std::vector<Candidate> batch);
  // This batch's records, and any an earlier push left, to the farm.
  void PushToFarm(const Finished& finished);
  Finished Measure(const std::vector<Candidate>& batch, int next_n);
  void MeasureOn(size_t d, BatchQueue& q);
  Record MakeRecord(const DeviceRunner& runner, const Measurement& m,
                    const std::string& generator) const;
  void ReportWhileMeasuring(BatchQueue& q);
  void RecordBatch(Finished finished, const std::vector<Candidate>& batch);
  void ReportBatchEnd();
  Expected<bool> Ended(const Stops& stops);
  void Warn(const std::string& w) const { s_.Warn(w); }

  State& s_;
  const Task& task_;
  const ConfigSpace& space_;
  Tuner* tuner_;
  TuneOptions options_;  // the job's, with this run's trials and include_default
  const Clock::time_point t_start_;
  TuneSummary sum_;
  TuneProgress progress_;
  std::vector<std::unique_ptr<DeviceRunner>> runners_;
  msg::DeviceInfo limits_;  // the first device's, for the builds
  // Which devices still measure. While a batch's device threads run, only under its `mu` (a
  // vector<bool> packs its elements into shared words: a thread's write to its own element is a
  // write to its neighbours' too).
  std::vector<bool> alive_;
  // Each device's loser cutoff (options_.stop_losers): its best and its rounds' noise. While a
  // batch's device threads run, only under its `mu`.
  std::vector<LoserCutoff> cutoffs_;
  Status lost_;             // the last device lost (mu)
  std::string tuner_name_;  // for records, while the tuner plans beside them
  // Everything measured, in the pipeline, or put in by us (the default config): a tuner that
  // proposes one of these again (it hears of results a batch late) is not measured twice.
  std::unordered_set<uint64_t> planned_set_;
  int planned_ = 0;  // trials measured or in the pipeline
  bool pipeline_started_ = false;
  bool farm_warned_ = false;  // one warning for a farm that stopped answering
  double best_mean_ = std::numeric_limits<double>::infinity();
  int since_best_ = 0;
  Clock::time_point batch_end_;  // when the devices finished the last batch
  // The next batch, planned and built beside this one. Last: destroyed first, its build waited
  // for before what the build reads goes.
  std::future<Prepared> building_;
};

TuneJob::RunLoop::RunLoop(State& state, int trials, bool include_default)
    : s_(state),
      task_(state.task),
      space_(*state.space),
      tuner_(state.tuner.get()),
      options_(state.options),
      t_start_(Clock::now()) {
  options_.trials = trials;
  options_.include_default = include_default;
  sum_.stale = s_.stale;
  sum_.log_warnings = s_.log_warnings;
  sum_.resumed = static_cast<int>(s_.task_records.size());
  ++s_.runs;
  progress_.total = options_.trials;
  progress_.done = static_cast<int>(s_.done.size());
  for (const auto& r : s_.task_records)
    progress_.best_gflops = std::max(progress_.best_gflops, r.gflops());
}

Expected<TuneSummary> TuneJob::RunLoop::Finish() {
  if (options_.farm) {
    PushToFarm({});
    sum_.farm_unsent = static_cast<int>(options_.farm->pending());
    if (!sum_.warm_kind.empty() && tuner_->prior_trust()) {
      // The judgement of the prior with the last batch too (no plan is in flight now; xgb, the
      // tuner that takes a prior, hears a result twice as once, so the next Run may tell it
      // again).
      if (!s_.unheard.empty()) tuner_->Update(s_.unheard);
      sum_.warm_trust = tuner_->prior_trust();
    }
  }
  const std::vector<Record>& task_records = s_.task_records;
  sum_.trials_in_log = static_cast<int>(task_records.size());
  sum_.wall_s = Since(t_start_);
  for (const auto& r : task_records) {
    if (!r.ok()) sum_.errors[r.error]++;
  }
  // The fastest of the devices' bests (BestRecords keeps one per device kind).
  for (const auto& b : BestRecords(task_records)) {
    if (!sum_.has_best || b.mean < sum_.best.mean) sum_.best = b;
    sum_.has_best = true;
  }
  const uint64_t default_index = task_.DefaultConfig().index();
  for (const auto& r : task_records) {
    auto c = space_.FromJson(r.config_values);
    if ((c.ok() ? c->index() : r.config_index) == default_index) {
      sum_.has_default = true;
      sum_.default_record = r;
    }
  }
  CT_RETURN_IF_ERROR(AllFailedStatus(task_records));
  return sum_;
}

// --- Devices. Connected first: a task whose tensors a device cannot hold is refused there,
// before the host allocates the inputs and computes the reference (once per job).
Status TuneJob::RunLoop::OpenDevices(const std::vector<DeviceSpec>& devices) {
  std::string open_errors;
  Status too_big;
  auto drop = [&](const DeviceSpec& spec, const Status& why) {
    open_errors += (open_errors.empty() ? "" : "; ") + spec.name + ": " + why.ToString();
    Warn("device " + spec.name + " could not be used: " + why.ToString());
    if (why.code() == ErrorCode::kLimitExceeded) too_big = why;
    if (options_.on_device_lost) options_.on_device_lost(spec, why);
  };
  for (const auto& spec : devices) {
    auto r = DeviceRunner::Connect(spec, task_, options_.measure);
    if (r.ok()) {
      runners_.push_back(std::move(r).value());
    } else {
      drop(spec, r.status());
    }
  }
  if (!runners_.empty()) {
    if (!s_.reference) s_.reference = ReferenceData::Make(task_, options_.measure.input_seed);
    std::vector<std::unique_ptr<DeviceRunner>> started;
    for (auto& r : runners_) {
      if (Status st = r->Start(*s_.reference); st.ok()) {
        started.push_back(std::move(r));
      } else {
        drop(r->spec(), st);
      }
    }
    runners_ = std::move(started);
  }
  if (runners_.empty()) {
    // The one device is too small for the task: that is the error, with the size and limit.
    if (!too_big.ok() && devices.size() == 1) return too_big;
    return Status(ErrorCode::kNoDevice, "no device could be opened (" + open_errors + ")");
  }
  sum_.devices = static_cast<int>(runners_.size());
  limits_ = runners_.front()->info();
  alive_.assign(runners_.size(), true);
  cutoffs_.assign(runners_.size(), LoserCutoff{});
  return Status::Ok();
}

void TuneJob::RunLoop::PullFarm() {
  if (!options_.farm) return;
  if (sum_.farm_kind.empty()) sum_.farm_kind = DeviceKind(runners_.front()->id());
  auto got = options_.farm->Pull(task_.id().Key(), s_.target, sum_.farm_kind);
  if (!got.ok()) {
    if (!std::exchange(farm_warned_, true)) {
      Warn("the farm's records: " + got.status().ToString() + "; the run goes on without them");
    }
    return;
  }
  for (const auto& w : got->warnings) Warn(w);
  for (const Record& r : got->records) {
    if (!(r.task == task_.id()) || r.target != s_.target || !MadeByThisGenerator(task_, r))
      continue;
    auto c = space_.FromJson(r.config_values);
    const uint64_t index = c.ok() ? c->index() : r.config_index;
    if (!s_.done.insert(index).second) continue;
    // Another run's: resumed as a log's record is (this run's own come back from the farm too,
    // and are already done).
    s_.task_records.push_back(r);
    s_.unheard.push_back(ToTrial(index, r));
    ++sum_.farm_resumed;
    if (pipeline_started_ && planned_set_.insert(index).second) ++planned_;
    if (r.ok() && r.mean > 0 && !r.stopped_early) best_mean_ = std::min(best_mean_, r.mean);
    progress_.best_gflops = std::max(progress_.best_gflops, r.gflops());
  }
  progress_.done = static_cast<int>(s_.done.size());
  // Before the first batch only: the tuner is this thread's alone then.
  if (!pipeline_started_ && s_.done.empty()) WarmFromFarm();
}

// Nothing of the task measured on this kind, here or in the farm: the tuner starts from the
// nearest kind's records (Tuner::AddPrior), whatever generator made them (another build of the
// same config is still the same config).
void TuneJob::RunLoop::WarmFromFarm() {
  auto got = options_.farm->Nearest(task_.id().Key(), s_.target, sum_.farm_kind);
  if (!got.ok()) {
    if (!std::exchange(farm_warned_, true)) {
      Warn("the farm's records: " + got.status().ToString() + "; the run goes on without them");
    }
    return;
  }
  for (const auto& w : got->warnings) Warn(w);
  std::vector<TrialResult> prior;
  // Records of another target (another CPU's features) are of the same template: their configs
  // are matched by value, and the tuner judges how well they predict this device.
  const std::string& target = got->target.empty() ? s_.target : got->target;
  for (const Record& r : got->records) {
    if (!(r.task == task_.id()) || r.target != target) continue;
    auto c = space_.FromJson(r.config_values);
    if (c.ok()) prior.push_back(ToTrial(c->index(), r));
  }
  if (prior.empty()) return;
  tuner_->AddPrior(prior);
  sum_.warm_kind = got->device_kind;
  if (target != s_.target) sum_.warm_target = target;
  sum_.warm_records = static_cast<int>(prior.size());
  progress_.warm_from = got->device_kind;
}

std::vector<Candidate> TuneJob::RunLoop::ClaimFromFarm(std::vector<Candidate> batch) {
  if (!options_.farm || batch.empty()) return batch;
  std::vector<uint64_t> configs;
  std::vector<std::string> generators;
  for (const Candidate& c : batch) {
    configs.push_back(c.index);
    generators.push_back(GeneratorHash(task_, space_.Get(c.index)));
  }
  auto reply =
      options_.farm->Claim(task_.id().Key(), s_.target, sum_.farm_kind, configs, generators);
  if (!reply.ok()) {
    if (!std::exchange(farm_warned_, true)) {
      Warn("the farm's records: " + reply.status().ToString() +
           "; this run times its configs without claiming them");
    }
    return batch;
  }
  const std::unordered_set<uint64_t> granted(reply->granted.begin(), reply->granted.end());
  std::vector<Candidate> mine;
  for (Candidate& c : batch) {
    if (granted.count(c.index)) {
      mine.push_back(std::move(c));
    } else {
      ++sum_.farm_elsewhere;
    }
  }
  return mine;
}

void TuneJob::RunLoop::PushToFarm(const Finished& finished) {
  if (!options_.farm) return;
  std::vector<Record> records;
  records.reserve(finished.size());
  for (const auto& f : finished) records.push_back(f.first);
  if (Status st = options_.farm->Push(records); !st.ok()) {
    Warn("the farm's records: " + std::to_string(options_.farm->pending()) +
         " record(s) not sent yet (" + st.ToString() + "); they go with the next batch's");
  }
}

// One planning step: the tuner hears of `heard` and, asked for n > 0 configs, refits and
// proposes up to n new ones. One step at a time, on the calling thread or (overlapped) beside
// the device threads, which never touch the tuner, planned_set_ or planned_; its warnings are
// said on the calling thread (Account).
TuneJob::RunLoop::Plan TuneJob::RunLoop::Propose(const std::vector<TrialResult>& heard, int n) {
  Plan p;
  p.start = Clock::now();
  if (!heard.empty()) tuner_->Update(heard);
  if (n > 0) tuner_->Refit();
  const auto refitted = Clock::now();
  for (int round = 0; round < 4 && static_cast<int>(p.indices.size()) < n; ++round) {
    auto batch = tuner_->NextBatch(n - static_cast<int>(p.indices.size()));
    if (batch.empty()) break;
    for (uint64_t i : batch) {
      if (planned_set_.insert(i).second) p.indices.push_back(i);
    }
  }
  p.warnings = tuner_->TakeWarnings();
  p.end = Clock::now();
  p.time.proposed = static_cast<int>(p.indices.size());
  p.time.refit_s = Seconds(refitted - p.start);
  p.time.propose_s = Seconds(p.end - refitted);
  planned_ += p.time.proposed;
  return p;
}

// A plan's time into the summary, `waited_s` of it while no device measured.
void TuneJob::RunLoop::Account(const Plan& p, double waited_s) {
  for (const auto& w : p.warnings) Warn(w);
  PlanningTime t = p.time;
  t.waited_s = std::clamp(waited_s, 0.0, t.seconds());
  sum_.planning.Add(t);
}

// The next batch's size: the given batch, or ChooseBatch's reached by RampBatch.
int TuneJob::RunLoop::BatchNow() const {
  return options_.batch > 0 ? sum_.batch : RampBatch(sum_.batch, planned_);
}

std::future<TuneJob::RunLoop::Prepared> TuneJob::RunLoop::BuildAsync(
    std::vector<uint64_t> indices) {
  return std::async(std::launch::async, [this, indices = std::move(indices)] {
    return Prepared{BuildCandidates(s_.builder, task_, indices, limits_, options_.measure), {}};
  });
}

// Overlapped: plan beside the devices, then build what it proposed.
std::future<TuneJob::RunLoop::Prepared> TuneJob::RunLoop::PlanAndBuildAsync(
    std::vector<TrialResult> heard, int n) {
  return std::async(std::launch::async, [this, heard = std::move(heard), n] {
    Prepared out;
    out.plan = Propose(heard, n);
    out.batch = BuildCandidates(s_.builder, task_, out.plan->indices, limits_, options_.measure);
    return out;
  });
}

std::future<TuneJob::RunLoop::Prepared> TuneJob::RunLoop::NothingMore() {
  return std::async(std::launch::deferred, [] { return Prepared{}; });
}

// The first batch: the default config (when asked for and valid) and the tuner's first plan,
// which the devices wait for. Then batch i+1 builds while batch i runs (Step).
void TuneJob::RunLoop::StartPipeline() {
  sum_.batch = ChooseBatch(options_.batch, static_cast<int>(runners_.size()));
  tuner_name_ = tuner_->name();
  planned_set_.insert(s_.done.begin(), s_.done.end());
  planned_ = progress_.done;
  pipeline_started_ = true;
  const uint64_t default_index = task_.DefaultConfig().index();
  std::vector<uint64_t> first;
  if (options_.include_default && space_.IsValid(space_.Get(default_index)) &&
      planned_set_.insert(default_index).second) {
    first.push_back(default_index);
  }
  const int put_in = static_cast<int>(first.size());  // the default config, when measured
  Plan p = Propose(std::exchange(s_.unheard, {}),
                   std::min(BatchNow(), options_.trials - planned_) - put_in);
  Account(p, p.time.seconds());
  // (One by one: GCC 12 takes a range insert here for an overflow, -Wstringop-overflow.)
  for (uint64_t i : p.indices) first.push_back(i);
  planned_ += put_in;
  building_ = BuildAsync(std::move(first));
  for (const auto& r : s_.task_records) {
    if (r.ok() && r.mean > 0 && !r.stopped_early) best_mean_ = std::min(best_mean_, r.mean);
  }
  batch_end_ = Clock::now();
}

Expected<bool> TuneJob::RunLoop::Step() {
  Prepared prepared = building_.get();
  if (prepared.plan) {
    // Planned beside the last batch: the devices waited for what outlasted it.
    const Plan& p = *prepared.plan;
    Account(p, Seconds(p.end - std::max(p.start, batch_end_)));
  }
  const std::vector<Candidate> built = std::move(prepared.batch);
  if (built.empty()) return false;
  for (const auto& c : built) {
    if (!c.cache_warning.empty()) Warn(c.cache_warning);
  }
  // What the farm leaves this run to time (all of it without one).
  const std::vector<Candidate> batch = ClaimFromFarm(built);
  const Stops stops = CheckStops();
  const int next_n = stops.any() ? 0 : std::min(BatchNow(), options_.trials - planned_);
  // Taking turns: the next batch is planned now, before this one runs, and built after it.
  std::vector<uint64_t> after_run;
  if (!options_.overlap && next_n > 0) {
    Plan p = Propose(std::exchange(s_.unheard, {}), next_n);
    Account(p, p.time.seconds());
    after_run = std::move(p.indices);
  }
  Finished finished = Measure(batch, next_n);
  batch_end_ = Clock::now();
  if (!options_.overlap) {
    building_ = next_n > 0 ? BuildAsync(std::move(after_run)) : NothingMore();
  }
  PushToFarm(finished);
  RecordBatch(std::move(finished), built);
  PullFarm();
  ReportBatchEnd();
  CT_ASSIGN_OR_RETURN(const bool ended, Ended(stops));
  return !ended;
}

TuneJob::RunLoop::Stops TuneJob::RunLoop::CheckStops() const {
  Stops stops;
  stops.requested = options_.stop && options_.stop->load();
  stops.early = options_.early_stop > 0 && since_best_ >= options_.early_stop;
  return stops;
}

// Devices pull candidates; a lost device's candidate goes back for another.
TuneJob::RunLoop::Finished TuneJob::RunLoop::Measure(const std::vector<Candidate>& batch,
                                                     int next_n) {
  BatchQueue q;
  for (const auto& c : batch) q.queue.push_back(&c);
  std::vector<std::thread> threads;
  std::vector<size_t> measuring;  // read before the first thread starts
  for (size_t d = 0; d < runners_.size(); ++d) {
    if (alive_[d]) measuring.push_back(d);
  }
  for (size_t d : measuring) threads.emplace_back([this, d, &q] { MeasureOn(d, q); });
  // Overlapped: while the devices measure, the tuner hears of the batch before this one and
  // plans the next, which then builds; its plan knows what it would know taking turns.
  if (options_.overlap) {
    building_ =
        next_n > 0 ? PlanAndBuildAsync(std::exchange(s_.unheard, {}), next_n) : NothingMore();
  }
  ReportWhileMeasuring(q);
  for (auto& t : threads) t.join();
  for (const auto& w : q.device_warnings) Warn(w);  // none left, as the loop ends: to be sure
  return std::move(q.finished);
}

// Device d's thread: measures candidates from the queue until it is empty and nothing is in
// flight (another device may give one back), or until the device is lost.
void TuneJob::RunLoop::MeasureOn(size_t d, BatchQueue& q) {
  DeviceRunner& runner = *runners_[d];
  std::unique_lock<std::mutex> lock(q.mu);
  for (;;) {
    q.cv.wait(lock, [&] { return !q.queue.empty() || q.in_flight == 0; });
    if (q.queue.empty()) return;
    const Candidate* c = q.queue.front();
    q.queue.pop_front();
    ++q.in_flight;
    ++progress_.devices_busy;
    const double stop_above = options_.stop_losers ? cutoffs_[d].StopAbove() : 0;
    lock.unlock();
    auto t0 = Clock::now();
    Measurement m = runner.Measure(*c, stop_above);
    double busy = Since(t0);
    // Outside the lock: it generates the config's source again to hash it.
    const std::string generator = GeneratorHash(task_, space_.Get(m.index));
    lock.lock();
    --q.in_flight;
    --progress_.devices_busy;
    sum_.device_busy_s += busy;
    if (m.error == TrialError::kOk && !m.stopped_early) cutoffs_[d].AddFull(m.costs);
    sum_.stopped_early += m.stopped_early;
    progress_.stopped_early = sum_.stopped_early;
    if (m.error == TrialError::kDeviceLost) {
      q.queue.push_front(c);
      alive_[d] = false;
      // lost_ is shared (mu): the callback gets this device's own copy, as another device
      // thread may set lost_ while it runs.
      const Status why(ErrorCode::kDisconnected, m.message);
      lost_ = why;
      q.cv.notify_all();
      lock.unlock();
      if (options_.on_device_lost) options_.on_device_lost(runner.spec(), why);
      return;
    }
    Record r = MakeRecord(runner, m, generator);
    if (s_.writer) {
      // Said by the calling thread (the progress loop), as every warning is.
      if (Status st = s_.writer->Append(r); !st.ok()) q.device_warnings.push_back(st.ToString());
    }
    q.finished.emplace_back(r, ToTrial(m.index, r));
    q.cv.notify_all();
  }
}

Record TuneJob::RunLoop::MakeRecord(const DeviceRunner& runner, const Measurement& m,
                                    const std::string& generator) const {
  Record r;
  r.tool = "";
  r.run_id = options_.run_id;
  r.tuner = tuner_name_;
  r.task = task_.id();
  r.target = s_.target;
  r.device = runner.id();
  r.config_index = m.index;
  r.config_values = space_.Get(m.index).ToJson();
  r.generator = generator;
  r.flops = task_.flops();
  r.costs = m.costs;
  r.mean = m.mean;
  r.error = m.error;
  r.message = m.message;
  r.build_s = m.build_s;
  r.run_s = m.run_s;
  r.build_cached = m.build_cached;
  r.stopped_early = m.stopped_early;
  r.timestamp = UtcTimestamp();
  r.workload = options_.workload;
  return r;
}

// Progress while the batch runs, from the calling thread: the device threads' warnings, and each
// record (on_record) and a progress report as they finish, until the batch is over or no device
// is left.
void TuneJob::RunLoop::ReportWhileMeasuring(BatchQueue& q) {
  std::unique_lock<std::mutex> lock(q.mu);
  size_t reported = 0;
  for (;;) {
    bool over = q.queue.empty() && q.in_flight == 0;
    if (!over) {
      bool any_alive = std::find(alive_.begin(), alive_.end(), true) != alive_.end();
      over = !any_alive;
    }
    if (!q.device_warnings.empty()) {
      std::vector<std::string> said = std::exchange(q.device_warnings, {});
      lock.unlock();
      for (const auto& w : said) Warn(w);
      lock.lock();
      continue;
    }
    if (q.finished.size() != reported && (options_.on_progress || options_.on_record)) {
      std::vector<Record> fresh;
      for (size_t i = reported; i < q.finished.size(); ++i) {
        const Record& r = q.finished[i].first;
        progress_.best_gflops = std::max(progress_.best_gflops, r.gflops());
        if (!r.ok()) progress_.errors[r.error]++;
        if (options_.on_record) fresh.push_back(r);
      }
      progress_.measured = sum_.measured + static_cast<int>(q.finished.size());
      progress_.done = static_cast<int>(s_.done.size()) + static_cast<int>(q.finished.size());
      progress_.devices = static_cast<int>(std::count(alive_.begin(), alive_.end(), true));
      progress_.elapsed_s = Since(t_start_);
      progress_.rate = progress_.elapsed_s > 0 ? progress_.measured / progress_.elapsed_s : 0;
      progress_.batch_end = false;
      reported = q.finished.size();
      TuneProgress snapshot = progress_;  // device threads update devices_busy
      lock.unlock();
      for (const Record& r : fresh) options_.on_record(r);
      if (options_.on_progress) options_.on_progress(snapshot);
      lock.lock();
      continue;
    }
    if (over) break;
    q.cv.wait_for(lock, std::chrono::milliseconds(250));
  }
}

// A measured batch into the job: its records, the configs done, the tuner's next news, and how
// long since the best config improved (the early stop).
void TuneJob::RunLoop::RecordBatch(Finished finished, const std::vector<Candidate>& batch) {
  for (auto& [r, t] : finished) {
    if (r.build_cached) {
      ++sum_.builds;
      sum_.build_cache_hits += *r.build_cached;
    }
    s_.done.insert(t.index);
    s_.unheard.push_back(t);  // the next plan's news
    if (t.ok && !t.at_least && t.cost < best_mean_) {
      best_mean_ = t.cost;
      since_best_ = 0;
    } else {
      ++since_best_;
    }
    s_.task_records.push_back(std::move(r));
  }
  sum_.measured += static_cast<int>(finished.size());
  for (const auto& c : batch) sum_.build_s += c.build_s;
}

void TuneJob::RunLoop::ReportBatchEnd() {
  progress_.measured = sum_.measured;
  progress_.done = static_cast<int>(s_.done.size());
  progress_.devices = static_cast<int>(std::count(alive_.begin(), alive_.end(), true));
  progress_.elapsed_s = Since(t_start_);
  progress_.rate = progress_.elapsed_s > 0 ? progress_.measured / progress_.elapsed_s : 0;
  progress_.batch_end = true;
  if (options_.on_progress) options_.on_progress(progress_);
}

// The stop rules after a batch: no device left is an error; a stop request or the early stop
// (read before the batch ran) ends the run. Either way the batch being built is waited for.
Expected<bool> TuneJob::RunLoop::Ended(const Stops& stops) {
  if (progress_.devices == 0) {
    building_.wait();
    return Status(ErrorCode::kDisconnected, "every device was lost (" + lost_.message() + "); " +
                                                std::to_string(sum_.measured) +
                                                " trials measured this run, records kept");
  }
  if (stops.requested) {
    sum_.stopped = true;
    building_.wait();
    return true;
  }
  if (stops.early) {
    sum_.early_stopped = true;
    building_.wait();
    return true;
  }
  return false;
}

Expected<TuneSummary> TuneJob::Run(const std::vector<DeviceSpec>& devices, int trials,
                                   bool include_default) {
  RunLoop run(*s_, trials, include_default);
  if (run.Done()) return run.Finish();
  CT_RETURN_IF_ERROR(run.OpenDevices(devices));
  run.PullFarm();
  if (run.Done()) return run.Finish();
  run.StartPipeline();
  for (;;) {
    CT_ASSIGN_OR_RETURN(const bool more, run.Step());
    if (!more) break;
  }
  return run.Finish();
}

Expected<TuneSummary> Tune(const Task& task, const std::vector<DeviceSpec>& devices,
                           builder::BuildService& builder, const TuneOptions& options) {
  CT_ASSIGN_OR_RETURN(std::unique_ptr<TuneJob> job, TuneJob::Open(task, builder, options));
  return job->Run(devices, options.trials, options.include_default);
}

}  // namespace crosstune::tuner
