// Search strategies over a ConfigSpace: random, grid, ga (genetic) and xgb (XGBoost cost model).
//
//   auto tuner = MakeTuner("xgb", space, {.seed = 1});
//   while (want_more) {
//     std::vector<uint64_t> batch = (*tuner)->NextBatch(8);   // valid, never proposed before
//     if (batch.empty()) break;                               // the space is used up
//     ... measure ...
//     (*tuner)->Update(results);
//   }
//
// Costs are seconds (or any lower-is-better number); a failed trial has cost +infinity and ok
// false. Update() also takes results of earlier runs (resume), whose points are then never
// proposed again.
//
// Thread-safety: a Tuner is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tuner/space.h"

namespace crosstune::tuner {

struct TrialResult {
  uint64_t index = 0;
  double cost = std::numeric_limits<double>::infinity();
  bool ok = false;
  // cost is a lower bound: the device stopped timing it early, as clearly slower than the best
  // (Record::stopped_early). Never the best; its score (best / cost) is the most it can be.
  bool at_least = false;
};

// A measured point of another task of the same template (another shape or device), for the xgb
// tuner's transfer learning. `group` tells tasks apart (ranking is within a group).
struct TransferSample {
  std::vector<float> features;
  double cost = 0;
  bool ok = false;
  int group = 0;
};

// How well a prior (Tuner::AddPrior) foretells this device: Kendall's tau between the prior's
// costs and this device's over the points both have (ties left out, a failure slowest), and its
// z-score against a prior that knows nothing (tau / its standard deviation for `compared` points).
struct PriorTrust {
  size_t points = 0;    // the prior's points in this space
  size_t compared = 0;  // of those, measured here too
  double tau = 0;
  double z = 0;
  // Judged (enough points compared) and believed: the prior trains the model and proposes.
  bool judged = false;
  bool trusted = true;  // before it is judged, the prior is believed
};

struct TunerOptions {
  uint64_t seed = 1;
  // Features of a point for the cost model; default: the space's knob features. Must give one
  // length for every point of the space.
  std::function<std::vector<float>(const Config&)> features;

  // --- xgb ---
  // "ndcg" (rank:ndcg; the model learns what sets the best point apart), "rank" (rank:pairwise;
  // it learns the whole order), "reg" (reg:squarederror), or "mixed": one ndcg and one pairwise
  // model, each planning half of every batch. Neither alone does well on both recorded spaces:
  // trials to 95% of the best, median / p90 over 200 seeds (crosstune replay, batch 8):
  //            pnpoly (Kernel Tuner)   matmul 512^3 (ours)
  //   ndcg     27 / 73                 38 / 93
  //   rank     60 / 498                27.5 / 67
  //   mixed    33.5 / 89               29 / 63
  //   random   86.5 / 271              107.5 / 357
  std::string objective = "mixed";
  int plan_size = 64;       // candidates planned by simulated annealing per refit
  double epsilon = 0.05;    // share of each batch drawn at random
  bool diversity = true;    // keep the planned batch spread over the space
  int sa_iterations = 150;  // annealing steps per plan
  int sa_walkers = 128;     // parallel annealing chains
  int min_train = 8;        // successful samples before the model is used
  int boost_rounds = 60;

  // --- ga ---
  int population = 24;
  int elite = 4;
  double mutation = 0.1;
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  virtual std::string name() const = 0;
  // Up to `n` valid points never proposed or measured before; fewer, possibly none, when the
  // space is used up.
  virtual std::vector<uint64_t> NextBatch(int n) = 0;
  // Results of measured points (from this run or an earlier one).
  virtual void Update(const std::vector<TrialResult>& results) = 0;
  // Brings the model up to date with every result and transfer sample so far (the xgb tuner
  // refits its cost models), work the next NextBatch() would otherwise start with; a caller calls
  // it to time the refit apart from the proposal. Optional; a failure shows in the next
  // NextBatch(). Default: nothing to do.
  virtual void Refit() {}
  // Measured points of related tasks (transfer learning); ignored by tuners without a model.
  virtual void AddTransfer(const std::vector<TransferSample>& samples) { (void)samples; }
  // Warm start: points of this same space measured on another device (the farm's records of the
  // nearest device kind, `replay --warm-from`). The xgb tuner proposes the prior's best points
  // first and trains its cost model on the prior for as long as the prior foretells this
  // device's measurements (prior_trust()); the other tuners ignore it. Points outside the space
  // are skipped.
  virtual void AddPrior(const std::vector<TrialResult>& prior) { (void)prior; }
  // How far the prior is trusted now; nullopt without one (or for a tuner that ignores it).
  virtual std::optional<PriorTrust> prior_trust() const { return std::nullopt; }
  // Warnings since the last call (e.g. "cost model failed: ...; random batch"); the caller
  // prints them. A model failure never ends a run.
  virtual std::vector<std::string> TakeWarnings() { return {}; }
};

// "random", "grid", "ga" or "xgb"; kInvalidArgument for other names (listing the valid ones).
Expected<std::unique_ptr<Tuner>> MakeTuner(const std::string& name, const ConfigSpace& space,
                                           const TunerOptions& options = {});
const std::vector<std::string>& TunerNames();

}  // namespace crosstune::tuner
