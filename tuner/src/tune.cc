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

Expected<TuneSummary> TuneJob::Run(const std::vector<DeviceSpec>& devices, int trials,
                                   bool include_default) {
  State& s = *s_;
  const Task& task = s.task;
  const ConfigSpace& space = *s.space;
  const std::string& target = s.target;
  Tuner* tuner = s.tuner.get();
  builder::BuildService& builder = s.builder;
  std::vector<Record>& task_records = s.task_records;
  std::unordered_set<uint64_t>& done = s.done;
  TuneOptions options = s.options;
  options.trials = trials;
  options.include_default = include_default;
  auto warn = [&](const std::string& w) { s.Warn(w); };
  const auto t_start = Clock::now();
  TuneSummary sum;
  sum.stale = s.stale;
  sum.log_warnings = s.log_warnings;
  sum.resumed = static_cast<int>(task_records.size());
  ++s.runs;

  TuneProgress progress;
  progress.total = options.trials;
  progress.done = static_cast<int>(done.size());
  for (const auto& r : task_records)
    progress.best_gflops = std::max(progress.best_gflops, r.gflops());

  auto finish = [&]() -> Expected<TuneSummary> {
    sum.trials_in_log = static_cast<int>(task_records.size());
    sum.wall_s = Since(t_start);
    for (const auto& r : task_records) {
      if (!r.ok()) sum.errors[r.error]++;
    }
    // The fastest of the devices' bests (BestRecords keeps one per device kind).
    for (const auto& b : BestRecords(task_records)) {
      if (!sum.has_best || b.mean < sum.best.mean) sum.best = b;
      sum.has_best = true;
    }
    const uint64_t default_index = task.DefaultConfig().index();
    for (const auto& r : task_records) {
      auto c = space.FromJson(r.config_values);
      if ((c.ok() ? c->index() : r.config_index) == default_index) {
        sum.has_default = true;
        sum.default_record = r;
      }
    }
    CT_RETURN_IF_ERROR(AllFailedStatus(task_records));
    return sum;
  };
  if (progress.done >= options.trials) return finish();

  // --- Devices. Connected first: a task whose tensors a device cannot hold is refused there,
  // before the host allocates the inputs and computes the reference (once per job).
  std::vector<std::unique_ptr<DeviceRunner>> runners;
  std::string open_errors;
  Status too_big;
  auto drop = [&](const DeviceSpec& spec, const Status& why) {
    open_errors += (open_errors.empty() ? "" : "; ") + spec.name + ": " + why.ToString();
    warn("device " + spec.name + " could not be used: " + why.ToString());
    if (why.code() == ErrorCode::kLimitExceeded) too_big = why;
    if (options.on_device_lost) options.on_device_lost(spec, why);
  };
  for (const auto& spec : devices) {
    auto r = DeviceRunner::Connect(spec, task, options.measure);
    if (r.ok()) {
      runners.push_back(std::move(r).value());
    } else {
      drop(spec, r.status());
    }
  }
  if (!runners.empty()) {
    if (!s.reference) s.reference = ReferenceData::Make(task, options.measure.input_seed);
    std::vector<std::unique_ptr<DeviceRunner>> started;
    for (auto& r : runners) {
      if (Status st = r->Start(*s.reference); st.ok()) {
        started.push_back(std::move(r));
      } else {
        drop(r->spec(), st);
      }
    }
    runners = std::move(started);
  }
  if (runners.empty()) {
    // The one device is too small for the task: that is the error, with the size and limit.
    if (!too_big.ok() && devices.size() == 1) return too_big;
    return Status(ErrorCode::kNoDevice, "no device could be opened (" + open_errors + ")");
  }
  sum.devices = static_cast<int>(runners.size());
  const msg::DeviceInfo limits = runners.front()->info();
  // Which devices still measure. While a batch's device threads run, only under its `mu` (a
  // vector<bool> packs its elements into shared words: a thread's write to its own element is a
  // write to its neighbours' too).
  std::vector<bool> alive(runners.size(), true);

  // --- The loop: build batch i+1 while batch i runs.
  sum.batch = ChooseBatch(options.batch, static_cast<int>(runners.size()));
  const std::string tuner_name = tuner->name();  // for records, while the tuner plans beside them
  // Everything measured, in the pipeline, or put in by us (the default config): a tuner that
  // proposes one of these again (it hears of results a batch late) is not measured twice.
  std::unordered_set<uint64_t> planned_set(done.begin(), done.end());
  int planned = progress.done;  // trials measured or in the pipeline
  // One planning step: the tuner hears of `heard` and, asked for n > 0 configs, refits and
  // proposes up to n new ones. One step at a time, on this thread or (overlapped) beside the
  // device threads, which never touch the tuner, planned_set or planned; its warnings are said
  // on this thread (account).
  struct Plan {
    std::vector<uint64_t> indices;
    std::vector<std::string> warnings;
    PlanningTime time;
    Clock::time_point start, end;
  };
  auto plan = [&](const std::vector<TrialResult>& heard, int n) {
    Plan p;
    p.start = Clock::now();
    if (!heard.empty()) tuner->Update(heard);
    if (n > 0) tuner->Refit();
    const auto refitted = Clock::now();
    for (int round = 0; round < 4 && static_cast<int>(p.indices.size()) < n; ++round) {
      auto batch = tuner->NextBatch(n - static_cast<int>(p.indices.size()));
      if (batch.empty()) break;
      for (uint64_t i : batch) {
        if (planned_set.insert(i).second) p.indices.push_back(i);
      }
    }
    p.warnings = tuner->TakeWarnings();
    p.end = Clock::now();
    p.time.proposed = static_cast<int>(p.indices.size());
    p.time.refit_s = Seconds(refitted - p.start);
    p.time.propose_s = Seconds(p.end - refitted);
    planned += p.time.proposed;
    return p;
  };
  // A plan's time into the summary, `waited_s` of it while no device measured.
  auto account = [&](const Plan& p, double waited_s) {
    for (const auto& w : p.warnings) warn(w);
    PlanningTime t = p.time;
    t.waited_s = std::clamp(waited_s, 0.0, t.seconds());
    sum.planning.Add(t);
  };
  // A batch ready to measure and, overlapped, the plan that chose it.
  struct Prepared {
    std::vector<Candidate> batch;
    std::optional<Plan> plan;
  };
  auto build_async = [&](std::vector<uint64_t> indices) {
    return std::async(std::launch::async, [&, indices = std::move(indices)] {
      return Prepared{BuildCandidates(builder, task, indices, limits, options.measure), {}};
    });
  };
  // Overlapped: plan beside the devices, then build what it proposed.
  auto plan_and_build_async = [&](std::vector<TrialResult> heard, int n) {
    return std::async(std::launch::async, [&, heard = std::move(heard), n] {
      Prepared out;
      out.plan = plan(heard, n);
      out.batch = BuildCandidates(builder, task, out.plan->indices, limits, options.measure);
      return out;
    });
  };
  auto nothing_more = [] { return std::async(std::launch::deferred, [] { return Prepared{}; }); };
  const uint64_t default_index = task.DefaultConfig().index();
  std::vector<uint64_t> first;
  if (options.include_default && space.IsValid(space.Get(default_index)) &&
      planned_set.insert(default_index).second) {
    first.push_back(default_index);
  }
  const int put_in = static_cast<int>(first.size());  // the default config, when measured
  // The next batch's size: the given batch, or ChooseBatch's reached by RampBatch.
  auto batch_now = [&] { return options.batch > 0 ? sum.batch : RampBatch(sum.batch, planned); };
  {  // The first batch: the devices wait for its plan.
    Plan p = plan(std::exchange(s.unheard, {}),
                  std::min(batch_now(), options.trials - planned) - put_in);
    account(p, p.time.seconds());
    first.insert(first.end(), p.indices.begin(), p.indices.end());
  }
  planned += put_in;
  std::future<Prepared> building = build_async(std::move(first));
  double best_mean = std::numeric_limits<double>::infinity();
  for (const auto& r : task_records) {
    if (r.ok() && r.mean > 0) best_mean = std::min(best_mean, r.mean);
  }
  int since_best = 0;
  Status lost;
  Clock::time_point batch_end = Clock::now();  // when the devices finished the last batch

  for (;;) {
    Prepared prepared = building.get();
    if (prepared.plan) {
      // Planned beside the last batch: the devices waited for what outlasted it.
      const Plan& p = *prepared.plan;
      account(p, Seconds(p.end - std::max(p.start, batch_end)));
    }
    const std::vector<Candidate> batch = std::move(prepared.batch);
    if (batch.empty()) break;
    for (const auto& c : batch) {
      if (!c.cache_warning.empty()) warn(c.cache_warning);
    }
    bool stop_now = options.stop && options.stop->load();
    bool early = options.early_stop > 0 && since_best >= options.early_stop;
    const int next_n = stop_now || early ? 0 : std::min(batch_now(), options.trials - planned);
    // Taking turns: the next batch is planned now, before this one runs, and built after it.
    std::vector<uint64_t> after_run;
    if (!options.overlap && next_n > 0) {
      Plan p = plan(std::exchange(s.unheard, {}), next_n);
      account(p, p.time.seconds());
      after_run = std::move(p.indices);
    }

    // Devices pull candidates; a lost device's candidate goes back for another.
    std::mutex mu;
    std::condition_variable cv;
    std::deque<const Candidate*> queue;
    for (const auto& c : batch) queue.push_back(&c);
    int in_flight = 0;
    std::vector<std::pair<Record, TrialResult>> finished;
    std::vector<std::string> device_warnings;  // the device threads' (mu), said by this thread
    std::vector<std::thread> threads;
    std::vector<size_t> measuring;  // read before the first thread starts
    for (size_t d = 0; d < runners.size(); ++d) {
      if (alive[d]) measuring.push_back(d);
    }
    for (size_t d : measuring) {
      threads.emplace_back([&, d] {
        DeviceRunner& runner = *runners[d];
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
          cv.wait(lock, [&] { return !queue.empty() || in_flight == 0; });
          if (queue.empty()) return;
          const Candidate* c = queue.front();
          queue.pop_front();
          ++in_flight;
          ++progress.devices_busy;
          lock.unlock();
          auto t0 = Clock::now();
          Measurement m = runner.Measure(*c);
          double busy = Since(t0);
          // Outside the lock: it generates the config's source again to hash it.
          const std::string generator = GeneratorHash(task, space.Get(m.index));
          lock.lock();
          --in_flight;
          --progress.devices_busy;
          sum.device_busy_s += busy;
          if (m.error == TrialError::kDeviceLost) {
            queue.push_front(c);
            alive[d] = false;
            // `lost` is shared (mu): the callback gets this device's own copy, as another device
            // thread may set `lost` while it runs.
            const Status why(ErrorCode::kDisconnected, m.message);
            lost = why;
            cv.notify_all();
            lock.unlock();
            if (options.on_device_lost) options.on_device_lost(runner.spec(), why);
            return;
          }
          Record r;
          r.tool = "";
          r.run_id = options.run_id;
          r.tuner = tuner_name;
          r.task = task.id();
          r.target = target;
          r.device = runner.id();
          r.config_index = m.index;
          r.config_values = space.Get(m.index).ToJson();
          r.generator = generator;
          r.flops = task.flops();
          r.costs = m.costs;
          r.mean = m.mean;
          r.error = m.error;
          r.message = m.message;
          r.build_s = m.build_s;
          r.run_s = m.run_s;
          r.build_cached = m.build_cached;
          r.timestamp = UtcTimestamp();
          r.workload = options.workload;
          if (s.writer) {
            // Said by the calling thread (the progress loop), as every warning is.
            if (Status st = s.writer->Append(r); !st.ok()) device_warnings.push_back(st.ToString());
          }
          finished.emplace_back(r, ToTrial(m.index, r));
          cv.notify_all();
        }
      });
    }
    // Overlapped: while the devices measure, the tuner hears of the batch before this one and
    // plans the next, which then builds; its plan knows what it would know taking turns.
    if (options.overlap) {
      building =
          next_n > 0 ? plan_and_build_async(std::exchange(s.unheard, {}), next_n) : nothing_more();
    }
    // Progress while the batch runs, from this thread.
    {
      std::unique_lock<std::mutex> lock(mu);
      size_t reported = 0;
      for (;;) {
        bool over = queue.empty() && in_flight == 0;
        if (!over) {
          bool any_alive = std::find(alive.begin(), alive.end(), true) != alive.end();
          over = !any_alive;
        }
        if (!device_warnings.empty()) {
          std::vector<std::string> said = std::exchange(device_warnings, {});
          lock.unlock();
          for (const auto& w : said) warn(w);
          lock.lock();
          continue;
        }
        if (finished.size() != reported && (options.on_progress || options.on_record)) {
          std::vector<Record> fresh;
          for (size_t i = reported; i < finished.size(); ++i) {
            const Record& r = finished[i].first;
            progress.best_gflops = std::max(progress.best_gflops, r.gflops());
            if (!r.ok()) progress.errors[r.error]++;
            if (options.on_record) fresh.push_back(r);
          }
          progress.measured = sum.measured + static_cast<int>(finished.size());
          progress.done = static_cast<int>(done.size()) + static_cast<int>(finished.size());
          progress.devices = static_cast<int>(std::count(alive.begin(), alive.end(), true));
          progress.elapsed_s = Since(t_start);
          progress.rate = progress.elapsed_s > 0 ? progress.measured / progress.elapsed_s : 0;
          progress.batch_end = false;
          reported = finished.size();
          TuneProgress snapshot = progress;  // device threads update devices_busy
          lock.unlock();
          for (const Record& r : fresh) options.on_record(r);
          if (options.on_progress) options.on_progress(snapshot);
          lock.lock();
          continue;
        }
        if (over) break;
        cv.wait_for(lock, std::chrono::milliseconds(250));
      }
    }
    for (auto& t : threads) t.join();
    for (const auto& w : device_warnings) warn(w);  // none left, as the loop ends: to be sure
    batch_end = Clock::now();
    if (!options.overlap) {
      building = next_n > 0 ? build_async(std::move(after_run)) : nothing_more();
    }

    for (auto& [r, t] : finished) {
      if (r.build_cached) {
        ++sum.builds;
        sum.build_cache_hits += *r.build_cached;
      }
      done.insert(t.index);
      s.unheard.push_back(t);  // the next plan's news
      if (t.ok && t.cost < best_mean) {
        best_mean = t.cost;
        since_best = 0;
      } else {
        ++since_best;
      }
      task_records.push_back(std::move(r));
    }
    sum.measured += static_cast<int>(finished.size());
    for (const auto& c : batch) sum.build_s += c.build_s;

    progress.measured = sum.measured;
    progress.done = static_cast<int>(done.size());
    progress.devices = static_cast<int>(std::count(alive.begin(), alive.end(), true));
    progress.elapsed_s = Since(t_start);
    progress.rate = progress.elapsed_s > 0 ? progress.measured / progress.elapsed_s : 0;
    progress.batch_end = true;
    if (options.on_progress) options.on_progress(progress);

    if (progress.devices == 0) {
      building.wait();
      return Status(ErrorCode::kDisconnected, "every device was lost (" + lost.message() + "); " +
                                                  std::to_string(sum.measured) +
                                                  " trials measured this run, records kept");
    }
    if (stop_now) {
      sum.stopped = true;
      building.wait();
      break;
    }
    if (early) {
      sum.early_stopped = true;
      building.wait();
      break;
    }
  }
  return finish();
}

Expected<TuneSummary> Tune(const Task& task, const std::vector<DeviceSpec>& devices,
                           builder::BuildService& builder, const TuneOptions& options) {
  CT_ASSIGN_OR_RETURN(std::unique_ptr<TuneJob> job, TuneJob::Open(task, builder, options));
  return job->Run(devices, options.trials, options.include_default);
}

}  // namespace crosstune::tuner
