// Replay: a runner that answers from a table of measured points instead of a device, so tuners
// can be compared without noise and without hardware.
//
//   auto table = ReplayTable::Load("pnpoly.json.gz");       // Kernel Tuner cache, or our log
//   ReplayOptions o{.tuner = "xgb", .batch = 8};
//   auto summary = SummariseReplay(**table, o, /*seeds=*/50);
//   std::cout << ReplaySummaryJson(*summary).dump(2);
//
// The table's space has one categorical knob per parameter (its sorted unique values) and one
// constraint, "the point is in the table": points a table lacks (a kernel's restrictions left
// them out) are not in the space, so the valid count is the table's size. A point holds a cost
// (lower is better) or a failure, which still counts as a spent trial.
//
// Thread-safety: a loaded table is immutable; replays of one table may run in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tuner/kernel_tuner_cache.h"
#include "crosstune/tuner/space.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner {

class ReplayTable {
 public:
  // Builds a table from points; every point must name the same parameters, which become the
  // knobs in `params` order (empty: the first point's, sorted). kInvalidArgument on an empty
  // table, a point with other parameters, or a point given twice.
  static Expected<std::unique_ptr<ReplayTable>> FromPoints(std::string source,
                                                           std::vector<ReplayPoint> points,
                                                           std::vector<std::string> params = {});
  // A Kernel Tuner cache file (.json, or gzip-compressed .json.gz).
  static Expected<std::unique_ptr<ReplayTable>> LoadKernelTunerCache(const std::string& path);
  // A full-space record log of ours (records.h): the records of one task (its TaskId::Key();
  // empty: the log's only or first task), keyed by config values, cost = mean seconds. A
  // config measured more than once keeps its best success.
  static Expected<std::unique_ptr<ReplayTable>> LoadRecordLog(const std::string& path,
                                                              const std::string& task = "");
  // Either kind, told apart by content (a log's first line is a record).
  static Expected<std::unique_ptr<ReplayTable>> Load(const std::string& path,
                                                     const std::string& task = "");

  const ConfigSpace& space() const { return *space_; }
  const std::string& source() const { return source_; }  // "pnpoly.json.gz", "mm.jsonl: matmul ..."
  uint64_t valid_count() const { return entries_->size(); }
  size_t ok_count() const { return ok_count_; }
  // The lowest cost; nullopt when every point failed.
  std::optional<double> best() const { return best_; }
  // Points whose cost is within `fraction` of the best (best / cost >= fraction).
  size_t CountWithin(double fraction) const;
  // The point at a space index; nullptr when the table lacks it.
  const ReplayPoint* Find(uint64_t index) const;
  // What a device would answer for a point: its cost, or a failure (ok false, cost +inf).
  TrialResult Measure(uint64_t index) const;
  // The points of `other` (the same kernel measured on another device) as results in this
  // table's space, for ReplayOptions::prior: matched by their parameters' values; points this
  // table lacks are left out (`*skipped` counts them). kInvalidArgument when the two tables name
  // other parameters.
  Expected<std::vector<TrialResult>> PriorFrom(const ReplayTable& other,
                                               size_t* skipped = nullptr) const;
  // Warnings from loading (e.g. entries skipped).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Cost-model features of a point. For a log of ours whose template and target are known, the
  // template's own features (knob values plus derived loop features, as `crosstune tune` gives
  // the model); empty otherwise, and the tuner uses the space's knob features.
  const std::function<std::vector<float>(const Config&)>& features() const { return features_; }

 private:
  ReplayTable() = default;
  // Sets features_ from the log's task (template, shape, target), or leaves a warning.
  void AttachTaskFeatures(const std::string& path, const std::vector<Record>& records,
                          const std::string& chosen);
  std::string source_;
  std::unique_ptr<ConfigSpace> space_;
  // Shared with the space's constraint, so the table may move.
  std::shared_ptr<std::unordered_map<uint64_t, ReplayPoint>> entries_;
  size_t ok_count_ = 0;
  std::optional<double> best_;
  std::vector<std::string> warnings_;
  std::shared_ptr<const Task> task_;  // the log's task, when it could be made
  std::function<std::vector<float>(const Config&)> features_;
};

struct ReplayOptions {
  std::string tuner = "random";
  uint64_t seed = 1;
  int batch = 8;
  uint64_t max_trials = 0;        // 0: the table's size (every seed then reaches the target)
  double target_fraction = 0.95;  // a point with best / cost >= this is "found"
  // As Tune() with no batch given: batches grow to `batch` by RampBatch (tune.h).
  bool ramp = false;
  // As Tune()'s overlapped pipeline: the tuner hears of each batch only after it has proposed
  // the next (it proposes batch i+1 from the results up to batch i-1).
  bool lag = false;
  TunerOptions tuner_options;  // its seed is replaced by `seed`; empty features: the table's
  // Warm start: the same space measured on another device (ReplayTable::PriorFrom), given to the
  // tuner (Tuner::AddPrior) before its first batch.
  std::vector<TrialResult> prior;
  // Each seed deals the prior's costs out again at random first (ShufflePrior with the seed): a
  // prior that knows nothing of the device, another one per seed.
  bool shuffle_prior = false;
  // Makes the tuner instead of MakeTuner(tuner, space, options) (tests: one that watches its
  // calls), as TuneOptions::make_tuner.
  std::function<Expected<std::unique_ptr<Tuner>>(const ConfigSpace&, const TunerOptions&)>
      make_tuner;
};

struct ReplayRun {
  uint64_t seed = 0;
  bool reached = false;
  uint64_t trials_to_target = 0;  // when reached: the trial (1-based) that first hit the target
  uint64_t trials = 0;            // unique points proposed in all
  uint64_t failed = 0;            // of those, failures
  double best_cost = 0;           // the best cost found (0 when none)
  std::vector<std::string> warnings;
  std::optional<PriorTrust> prior;  // with a prior: how far the tuner trusted it at the end
};

// One tuner, one seed: batches of `batch` proposals answered from the table, until the target
// is reached, `max_trials` points are spent or the tuner runs dry. Trials count unique points
// proposed, failed ones included. kInvalidArgument for an unknown tuner or a point the table
// lacks (a tuner bug: every proposal must be valid).
Expected<ReplayRun> RunReplay(const ReplayTable& table, const ReplayOptions& options);

struct ReplaySummary {
  std::string tuner;
  std::string source;
  uint64_t space_size = 0;
  uint64_t valid_count = 0;
  size_t ok_count = 0;
  double best = 0;
  size_t within_target = 0;  // points that meet the target
  int batch = 0;
  uint64_t max_trials = 0;
  double target_fraction = 0;
  int seeds = 0;
  int reached = 0;
  // Over all seeds, a seed that missed the target counting as infinitely many trials: nullopt
  // when that many seeds missed it.
  std::optional<double> median, p90, mean;
  std::vector<ReplayRun> runs;  // one per seed, in order
  double wall_s = 0;
  // With a prior: its points, the seeds whose tuner took it (a tuner without a model ignores
  // it) and those whose tuner trusted it at the end.
  size_t prior_points = 0;
  int prior_taken = 0;
  int prior_trusted = 0;
  size_t warnings = 0;
  std::string first_warning;
};

// RunReplay for seeds 1..`seeds` (from `first_seed`), summarised.
Expected<ReplaySummary> SummariseReplay(const ReplayTable& table, ReplayOptions options, int seeds,
                                        uint64_t first_seed = 1);

// What `crosstune replay` and crosstune.replay() compare: tuners on one table, each cold and,
// with `warm_from`, warm-started from the same kernel's table measured on another device.
struct ReplayComparison {
  std::string space;  // a log of ours or a Kernel Tuner cache (ReplayTable::Load)
  std::string task;   // the log's task (empty: its only or first)
  std::vector<std::string> tuners = {"random", "ga", "xgb"};
  int seeds = 50;
  int batch = 8;
  uint64_t max_trials = 0;
  double target_fraction = 0.95;
  std::string objective = "mixed";  // xgb's (TunerOptions::objective)
  std::string warm_from;            // the other device's table; empty: cold only
  bool with_runs = false;           // every seed's trials to the target
};
// {"space", "space_size", "valid_count", "ok_count", "best", "within_target", "target_fraction",
//  "batch", "seeds", "tuners": {NAME: ReplaySummaryJson}, "warnings": [loading's]} and, with
// warm_from, "warm_from": {"space", "points", "not_in_space"} and "warm": {NAME: ...}, where a
// tuner that ignores a prior is {"tuner", "ignores_prior": true}, not replayed again.
// kInvalidArgument for an unknown tuner, a table whose every point failed, or a warm_from table
// of another kernel or with no point in this space; a file's own errors as ReplayTable::Load.
Expected<nlohmann::json> CompareTuners(const ReplayComparison& c);

// `prior` with its costs dealt out again at random among its points (failures stay failures):
// a prior that knows nothing of the device, for showing that a wrong one does no harm.
std::vector<TrialResult> ShufflePrior(std::vector<TrialResult> prior, uint64_t seed);

// {"tuner":..., "median":..., "p90":..., "mean":..., "reached":..., "seeds":..., "space_size":...,
//  "valid_count":..., "best":..., ...}; `with_runs` adds every seed's trials to target.
nlohmann::json ReplaySummaryJson(const ReplaySummary& summary, bool with_runs = false);

}  // namespace crosstune::tuner
