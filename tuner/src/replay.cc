#include "crosstune/tuner/replay.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <unordered_set>

#include "crosstune/json_reader.h"
#include "crosstune/tuner/input_file.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/tune.h"

namespace crosstune::tuner {

Expected<std::string> ReadMaybeGz(const std::string& path, size_t limit, bool head_only) {
  CT_RETURN_IF_ERROR(CheckInputFile(path));
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status(ErrorCode::kNotFound, path + ": cannot open");
  std::string out;
  std::vector<char> buf(1 << 16);
  int n;
  while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
    const size_t room = limit - out.size();
    if (static_cast<size_t>(n) > room) {
      gzclose(f);
      if (head_only) return out.append(buf.data(), room);
      return Status(ErrorCode::kLimitExceeded, path + ": expands to more than " +
                                                   std::to_string(limit) +
                                                   " bytes, the limit for a file of records");
    }
    out.append(buf.data(), static_cast<size_t>(n));
  }
  int err = 0;
  std::string why = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0) return Status(ErrorCode::kIoError, path + ": cannot read: " + why);
  return out;
}

namespace {

// Linear interpolation between order statistics (numpy's default); +inf stays +inf.
double Percentile(std::vector<double> sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::infinity();
  double pos = q * (sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - lo;
  if (frac == 0) return sorted[lo];
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

// --- Tables -------------------------------------------------------------------------------------

Expected<std::unique_ptr<ReplayTable>> ReplayTable::FromPoints(std::string source,
                                                               std::vector<ReplayPoint> points,
                                                               std::vector<std::string> params) {
  if (points.empty()) {
    return Status(ErrorCode::kInvalidArgument, source + ": the table has no points");
  }
  CT_ASSIGN_OR_RETURN(PointSpace made, MakePointSpace(source, points, std::move(params)));
  std::unique_ptr<ReplayTable> table(new ReplayTable());
  table->source_ = std::move(source);
  table->space_ = std::move(made.space);
  table->entries_ = std::make_shared<std::unordered_map<uint64_t, ReplayPoint>>();
  auto& entries = *table->entries_;
  for (size_t i = 0; i < points.size(); ++i) {
    ReplayPoint& p = points[i];
    uint64_t index = made.indices[i];
    if (p.ok && !(std::isfinite(p.cost) && p.cost >= 0)) {
      return Status(ErrorCode::kInvalidArgument, table->source_ + ": point " +
                                                     JsonExcerpt(p.values) + " has cost " +
                                                     std::to_string(p.cost));
    }
    if (p.ok) {
      ++table->ok_count_;
      if (!table->best_ || p.cost < *table->best_) table->best_ = p.cost;
    }
    std::string shown = JsonExcerpt(p.values, 200);
    if (!entries.emplace(index, std::move(p)).second) {
      return Status(ErrorCode::kInvalidArgument,
                    table->source_ + ": point " + shown + " is in the table twice");
    }
  }
  // Points the table lacks are not in the space.
  auto held = table->entries_;
  table->space_->AddConstraint("in the table",
                               [held](const Config& c) { return held->count(c.index()) != 0; });
  return table;
}

Expected<std::unique_ptr<ReplayTable>> ReplayTable::LoadKernelTunerCache(const std::string& path) {
  CT_ASSIGN_OR_RETURN(std::string text, ReadMaybeGz(path, kMaxCacheBytes));
  std::string name = path.substr(path.find_last_of('/') + 1);
  CT_ASSIGN_OR_RETURN(KernelTunerCache cache, ParseKernelTunerCache(std::move(text), path));
  return FromPoints(name, std::move(cache.points), cache.params);
}

Expected<std::unique_ptr<ReplayTable>> ReplayTable::LoadRecordLog(const std::string& path,
                                                                  const std::string& task) {
  CT_ASSIGN_OR_RETURN(LogContents log, ReadLog(path));
  std::vector<std::string> tasks;
  for (const Record& r : log.records) {
    std::string key = r.task.Key();
    if (std::find(tasks.begin(), tasks.end(), key) == tasks.end()) tasks.push_back(key);
  }
  if (tasks.empty()) return Status(ErrorCode::kInvalidArgument, path + ": no records");
  std::string chosen = task.empty() ? tasks.front() : task;
  if (std::find(tasks.begin(), tasks.end(), chosen) == tasks.end()) {
    std::string list;
    for (const auto& t : tasks) list += (list.empty() ? "" : "; ") + t;
    return Status(ErrorCode::kNotFound, path + ": no task '" + chosen + "' (tasks: " + list + ")");
  }
  // One point per config: its best success, or its first failure.
  std::map<std::string, ReplayPoint> by_config;
  std::vector<std::string> order;
  for (const Record& r : log.records) {
    if (r.task.Key() != chosen) continue;
    std::string key = r.config_values.dump();
    auto [it, fresh] = by_config.try_emplace(key);
    ReplayPoint& p = it->second;
    if (fresh) {
      order.push_back(key);
      p.values = r.config_values;
    }
    if (r.ok() && r.mean > 0) {
      if (!p.ok || r.mean < p.cost) {
        // The trial that gave the cost gives the recorded times too.
        p.cost = r.mean;
        p.kernel_s = r.mean;
        p.build_s = r.build_s;
        p.run_s = r.run_s;
      }
      p.ok = true;
      p.failure.clear();
    } else if (!p.ok && p.failure.empty()) {
      p.failure = std::string(r.ok() ? "NoTime" : TrialErrorName(r.error));
      p.build_s = r.build_s;
      p.run_s = r.run_s;
    }
  }
  std::vector<ReplayPoint> points;
  for (const auto& key : order) points.push_back(std::move(by_config[key]));
  std::vector<std::string> params;
  if (!points.empty() && points.front().values.is_object()) {
    for (const auto& [name, v] : points.front().values.items()) params.push_back(name);
  }
  std::string name = path.substr(path.find_last_of('/') + 1);
  CT_ASSIGN_OR_RETURN(auto table, FromPoints(name + ": " + chosen, std::move(points), params));
  table->warnings_ = std::move(log.warnings);
  table->AttachTaskFeatures(path, log.records, chosen);
  if (task.empty() && tasks.size() > 1) {
    table->warnings_.push_back(path + ": holds " + std::to_string(tasks.size()) +
                               " tasks; replaying the first, '" + chosen +
                               "' (choose with --task)");
  }
  return table;
}

void ReplayTable::AttachTaskFeatures(const std::string& path, const std::vector<Record>& records,
                                     const std::string& chosen) {
  // The first record of the task names its template, shape and target; a task made from them
  // gives the same features a live tuning run gives its model.
  auto it = std::find_if(records.begin(), records.end(),
                         [&](const Record& r) { return r.task.Key() == chosen; });
  if (it == records.end()) return;
  auto target = builder::ParseTarget(it->target);
  if (!target.ok()) {
    warnings_.push_back(path + ": target '" + it->target + "' unreadable (" +
                        target.status().message() + "); the cost model sees knob values only");
    return;
  }
  auto made = MakeTask(it->task.template_name, it->task.shape, *target, {it->task.threads});
  if (!made.ok()) {
    warnings_.push_back(path + ": no template task for '" + chosen + "' (" +
                        made.status().message() + "); the cost model sees knob values only");
    return;
  }
  std::shared_ptr<const Task> task = std::move(made).value();
  // Every point of the table must map onto the task's space, or the features would not all have
  // one length.
  for (const auto& [index, p] : *entries_) {
    if (!task->space().FromJson(p.values).ok()) {
      warnings_.push_back(path +
                          ": a config is not in the template's space; the cost model sees "
                          "knob values only");
      return;
    }
  }
  task_ = task;
  features_ = [task](const Config& c) {
    auto mapped = task->space().FromJson(c.ToJson());
    // A point outside the table (a neighbour walk's step) may lie outside the template's space:
    // it gets zeros of the same length.
    if (!mapped.ok()) return std::vector<float>(task->Features(task->DefaultConfig()).size(), 0.0f);
    return task->Features(*mapped);
  };
}

Expected<std::unique_ptr<ReplayTable>> ReplayTable::Load(const std::string& path,
                                                         const std::string& task) {
  // A record log is JSON lines; its first line is a record on its own (and a log may be larger
  // than a cache may be: only its first line is read here).
  CT_ASSIGN_OR_RETURN(std::string head, ReadMaybeGz(path, kMaxRecordBytes + 1, true));
  std::string first = head.substr(0, head.find('\n'));
  auto j = ParseJson(first, {.max_bytes = kMaxRecordBytes});
  if (j.ok() && j->is_object() && j->contains("task") && j->contains("config")) {
    return LoadRecordLog(path, task);
  }
  if (!task.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  path + ": --task applies to record logs, this is a Kernel Tuner cache file");
  }
  return LoadKernelTunerCache(path);
}

size_t ReplayTable::CountWithin(double fraction) const {
  if (!best_) return 0;
  size_t n = 0;
  for (const auto& [index, p] : *entries_) n += (p.ok && *best_ / p.cost >= fraction) ? 1 : 0;
  return n;
}

Expected<std::vector<TrialResult>> ReplayTable::PriorFrom(const ReplayTable& other,
                                                          size_t* skipped) const {
  std::vector<std::string> mine, theirs;
  for (const Knob& k : space_->knobs()) mine.push_back(k.name);
  for (const Knob& k : other.space().knobs()) theirs.push_back(k.name);
  std::sort(mine.begin(), mine.end());
  std::sort(theirs.begin(), theirs.end());
  if (mine != theirs) {
    auto list = [](const std::vector<std::string>& v) {
      std::string out;
      for (const auto& n : v) out += (out.empty() ? "" : ", ") + n;
      return out;
    };
    return Status(ErrorCode::kInvalidArgument, other.source() + " names the parameters " +
                                                   list(theirs) + ", " + source_ + " names " +
                                                   list(mine) + ": not the same kernel's space");
  }
  std::vector<TrialResult> out;
  size_t left_out = 0;
  for (const auto& [index, point] : *other.entries_) {
    Expected<Config> c = space_->FromJson(point.values);
    if (!c.ok() || !entries_->count(c->index())) {
      ++left_out;
      continue;
    }
    TrialResult r;
    r.index = c->index();
    r.ok = point.ok;
    r.cost = point.ok ? point.cost : std::numeric_limits<double>::infinity();
    out.push_back(r);
  }
  // The same order whatever the hash map's.
  std::sort(out.begin(), out.end(),
            [](const TrialResult& a, const TrialResult& b) { return a.index < b.index; });
  if (skipped) *skipped = left_out;
  return out;
}

namespace {

// Whether tuner `name` uses a prior at all (Tuner::prior_trust says so once it has one).
bool TakesPrior(const std::string& name, const ConfigSpace& space,
                const std::vector<TrialResult>& prior) {
  auto tuner = MakeTuner(name, space);
  if (!tuner.ok()) return false;
  (*tuner)->AddPrior(prior);
  return (*tuner)->prior_trust().has_value();
}

}  // namespace

Expected<nlohmann::json> CompareTuners(const ReplayComparison& c) {
  const auto& names = TunerNames();
  for (const std::string& t : c.tuners) {
    if (std::find(names.begin(), names.end(), t) == names.end()) {
      std::string valid;
      for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
      return Status(ErrorCode::kInvalidArgument,
                    "unknown tuner '" + t + "' (tuners: " + valid + ")");
    }
  }
  CT_ASSIGN_OR_RETURN(std::unique_ptr<ReplayTable> table, ReplayTable::Load(c.space, c.task));
  if (!table->best()) {
    return Status(ErrorCode::kInvalidArgument,
                  c.space + ": every point of the table failed; nothing to find");
  }
  nlohmann::json out = {
      {"space", table->source()},
      {"space_size", table->space().size()},
      {"valid_count", table->valid_count()},
      {"ok_count", table->ok_count()},
      {"best", *table->best()},
      {"within_target", table->CountWithin(c.target_fraction)},
      {"target_fraction", c.target_fraction},
      {"batch", c.batch},
      {"seeds", c.seeds},
      {"tuners", nlohmann::json::object()},
      {"warnings", table->warnings()},
  };
  std::vector<TrialResult> prior;
  if (!c.warm_from.empty()) {
    CT_ASSIGN_OR_RETURN(std::unique_ptr<ReplayTable> other, ReplayTable::Load(c.warm_from));
    size_t skipped = 0;
    CT_ASSIGN_OR_RETURN(prior, table->PriorFrom(*other, &skipped));
    if (prior.empty()) {
      return Status(ErrorCode::kInvalidArgument,
                    c.warm_from + ": none of its points is in " + c.space);
    }
    for (const std::string& w : other->warnings())
      out["warnings"].push_back(c.warm_from + ": " + w);
    out["warm_from"] = {
        {"space", other->source()}, {"points", prior.size()}, {"not_in_space", skipped}};
    out["warm"] = nlohmann::json::object();
  }
  for (const std::string& t : c.tuners) {
    for (const bool warm : {false, true}) {
      if (warm && prior.empty()) continue;
      if (warm && !TakesPrior(t, table->space(), prior)) {
        // Its warm run would be its cold run again.
        out["warm"][t] = {{"tuner", t}, {"ignores_prior", true}};
        continue;
      }
      ReplayOptions o;
      o.tuner = t;
      o.batch = c.batch;
      o.max_trials = c.max_trials;
      o.target_fraction = c.target_fraction;
      o.tuner_options.objective = c.objective;
      if (warm) o.prior = prior;
      CT_ASSIGN_OR_RETURN(ReplaySummary s, SummariseReplay(*table, o, c.seeds));
      out[warm ? "warm" : "tuners"][t] = ReplaySummaryJson(s, c.with_runs);
    }
  }
  return out;
}

std::vector<TrialResult> ShufflePrior(std::vector<TrialResult> prior, uint64_t seed) {
  std::vector<double> costs;
  for (const TrialResult& r : prior) {
    if (r.ok) costs.push_back(r.cost);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(costs.begin(), costs.end(), rng);
  size_t next = 0;
  for (TrialResult& r : prior) {
    if (r.ok) r.cost = costs[next++];
  }
  return prior;
}

const ReplayPoint* ReplayTable::Find(uint64_t index) const {
  auto it = entries_->find(index);
  return it == entries_->end() ? nullptr : &it->second;
}

TrialResult ReplayTable::Measure(uint64_t index) const {
  TrialResult r;
  r.index = index;
  if (const ReplayPoint* p = Find(index); p && p->ok) {
    r.ok = true;
    r.cost = p->cost;
  }
  return r;
}

// --- Replays ------------------------------------------------------------------------------------

Expected<ReplayRun> RunReplay(const ReplayTable& table, const ReplayOptions& options) {
  if (options.batch < 1) return Status(ErrorCode::kInvalidArgument, "batch must be at least 1");
  if (!(options.target_fraction > 0 && options.target_fraction <= 1)) {
    return Status(ErrorCode::kInvalidArgument, "the target fraction must be in (0, 1]");
  }
  TunerOptions topts = options.tuner_options;
  topts.seed = options.seed;
  if (!topts.features && table.features()) topts.features = table.features();
  CT_ASSIGN_OR_RETURN(std::unique_ptr<Tuner> tuner,
                      options.make_tuner ? options.make_tuner(table.space(), topts)
                                         : MakeTuner(options.tuner, table.space(), topts));
  if (!options.prior.empty()) {
    tuner->AddPrior(options.shuffle_prior ? ShufflePrior(options.prior, options.seed)
                                          : options.prior);
  }
  const uint64_t max_trials = options.max_trials == 0
                                  ? table.valid_count()
                                  : std::min(options.max_trials, table.valid_count());
  const std::optional<double> best = table.best();
  ReplayRun run;
  run.seed = options.seed;
  std::unordered_set<uint64_t> proposed;
  double best_found = std::numeric_limits<double>::infinity();
  std::vector<TrialResult> unheard;  // with `lag`: the last batch, told after the next is chosen
  while (run.trials < max_trials && !run.reached) {
    const int size =
        options.ramp ? RampBatch(options.batch, static_cast<int>(run.trials)) : options.batch;
    int n = static_cast<int>(std::min<uint64_t>(size, max_trials - run.trials));
    std::vector<uint64_t> batch = tuner->NextBatch(n);
    for (std::string& w : tuner->TakeWarnings()) run.warnings.push_back(std::move(w));
    if (batch.empty()) break;
    if (static_cast<int>(batch.size()) > n) {
      return Status(ErrorCode::kInternal, "tuner " + options.tuner + " proposed " +
                                              std::to_string(batch.size()) + " points for " +
                                              std::to_string(n));
    }
    std::vector<TrialResult> results;
    for (uint64_t index : batch) {
      if (!proposed.insert(index).second) {
        return Status(ErrorCode::kInternal, "tuner " + options.tuner + " proposed point " +
                                                std::to_string(index) + " twice");
      }
      if (!table.Find(index)) {
        return Status(ErrorCode::kInvalidArgument, "tuner " + options.tuner + " proposed point " +
                                                       std::to_string(index) +
                                                       ", which the table lacks");
      }
      TrialResult r = table.Measure(index);
      ++run.trials;
      if (!r.ok) ++run.failed;
      if (r.ok) {
        best_found = std::min(best_found, r.cost);
        if (!run.reached && best && *best / r.cost >= options.target_fraction) {
          run.reached = true;
          run.trials_to_target = run.trials;
        }
      }
      results.push_back(r);
    }
    if (options.lag) {
      tuner->Update(unheard);
      unheard = std::move(results);
    } else {
      tuner->Update(results);
    }
  }
  for (std::string& w : tuner->TakeWarnings()) run.warnings.push_back(std::move(w));
  run.best_cost = std::isfinite(best_found) ? best_found : 0;
  run.prior = tuner->prior_trust();
  return run;
}

Expected<ReplaySummary> SummariseReplay(const ReplayTable& table, ReplayOptions options, int seeds,
                                        uint64_t first_seed) {
  if (seeds < 1) return Status(ErrorCode::kInvalidArgument, "seeds must be at least 1");
  auto start = std::chrono::steady_clock::now();
  ReplaySummary s;
  s.tuner = options.tuner;
  s.source = table.source();
  s.space_size = table.space().size();
  s.valid_count = table.valid_count();
  s.ok_count = table.ok_count();
  s.best = table.best().value_or(0);
  s.within_target = table.CountWithin(options.target_fraction);
  s.batch = options.batch;
  s.max_trials = options.max_trials == 0 ? table.valid_count()
                                         : std::min(options.max_trials, table.valid_count());
  s.target_fraction = options.target_fraction;
  s.seeds = seeds;
  std::vector<double> trials;
  s.prior_points = options.prior.size();
  for (int k = 0; k < seeds; ++k) {
    options.seed = first_seed + static_cast<uint64_t>(k);
    CT_ASSIGN_OR_RETURN(ReplayRun run, RunReplay(table, options));
    if (run.reached) ++s.reached;
    if (run.prior) ++s.prior_taken;
    if (run.prior && run.prior->trusted) ++s.prior_trusted;
    trials.push_back(run.reached ? static_cast<double>(run.trials_to_target)
                                 : std::numeric_limits<double>::infinity());
    s.warnings += run.warnings.size();
    if (s.first_warning.empty() && !run.warnings.empty()) s.first_warning = run.warnings.front();
    s.runs.push_back(std::move(run));
  }
  std::sort(trials.begin(), trials.end());
  auto finite = [](double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; };
  s.median = finite(Percentile(trials, 0.5));
  s.p90 = finite(Percentile(trials, 0.9));
  if (s.reached == seeds) {
    double sum = 0;
    for (double t : trials) sum += t;
    s.mean = sum / seeds;
  }
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

nlohmann::json ReplaySummaryJson(const ReplaySummary& s, bool with_runs) {
  auto opt = [](const std::optional<double>& v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json j = {
      {"tuner", s.tuner},
      {"seeds", s.seeds},
      {"reached", s.reached},
      {"median", opt(s.median)},
      {"p90", opt(s.p90)},
      {"mean", opt(s.mean)},
      {"space", s.source},
      {"space_size", s.space_size},
      {"valid_count", s.valid_count},
      {"ok_count", s.ok_count},
      {"best", s.best},
      {"within_target", s.within_target},
      {"target_fraction", s.target_fraction},
      {"batch", s.batch},
      {"max_trials", s.max_trials},
      {"wall_s", s.wall_s},
      {"warnings", s.warnings},
  };
  if (!s.first_warning.empty()) j["first_warning"] = s.first_warning;
  if (s.prior_points) {
    j["prior"] = {{"points", s.prior_points},
                  {"taken_by_runs", s.prior_taken},
                  {"trusted_at_end", s.prior_trusted}};
  }
  if (with_runs) {
    nlohmann::json runs = nlohmann::json::array();
    for (const ReplayRun& r : s.runs) {
      runs.push_back(r.reached ? nlohmann::json(r.trials_to_target) : nlohmann::json(nullptr));
    }
    j["trials_to_target"] = runs;
  }
  return j;
}

}  // namespace crosstune::tuner
