// Pieces the search strategies share: the record of what was measured, and the score that turns
// a cost into "how good" (higher is better, 0 for a failure).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner::internal {

// Every point measured so far (this run or an earlier one) with its cost; the best cost.
class History {
 public:
  // Returns the results that were new (a point measured twice keeps its first result).
  std::vector<TrialResult> Add(const std::vector<TrialResult>& results) {
    std::vector<TrialResult> fresh;
    for (const TrialResult& r : results) {
      if (!seen_.emplace(r.index, order_.size()).second) continue;
      order_.push_back(r);
      if (Usable(r)) {
        ++ok_count_;
        if (!r.at_least) best_ = std::min(best_, r.cost);
      }
      fresh.push_back(r);
    }
    return fresh;
  }
  bool Measured(uint64_t index) const { return seen_.count(index) != 0; }
  const std::vector<TrialResult>& results() const { return order_; }
  size_t ok_count() const { return ok_count_; }
  double best() const { return best_; }
  // best / cost in (0, 1] for a success, 0 for a failure (higher is better); for a cost that is a
  // lower bound (at_least), the most its score can be.
  double Score(const TrialResult& r) const {
    if (!Usable(r) || !std::isfinite(best_)) return 0;
    return best_ / r.cost;
  }
  static bool Usable(const TrialResult& r) { return r.ok && std::isfinite(r.cost) && r.cost > 0; }

 private:
  std::unordered_map<uint64_t, size_t> seen_;
  std::vector<TrialResult> order_;
  size_t ok_count_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
};

}  // namespace crosstune::tuner::internal
