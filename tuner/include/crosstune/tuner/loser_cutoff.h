// When a device may stop timing a candidate (TuneOptions::stop_losers): after a round, once even
// the candidate's fastest round is slower than the best config this device has timed by more than
// the rounds' noise allows. The time evaluator then stops on the device (msg::TimeRequest's
// stop_above_s) and the record says stopped_early: its mean is a lower bound on its time.
//
//   margin      1 + max(0.10, 4 x the median coefficient of variation of the rounds of the
//               measurements timed in full so far): a candidate within 10% of the best is always
//               timed in full, and a noisy device gets a wider margin (a first round 4 of its
//               standard deviations slow is what it takes to stop a config that is not slower).
//               At 0.25 the xgb tuner's candidates were stopped less often: 19 of 48 against
//               29-31, and 1.34x fewer device-seconds per trial against 1.42-1.57x (matmul
//               512^3, Intel Xeon VM, 2026-12-06)
//   stop above  best mean x margin, once kMinFull measurements were timed in full (until then
//               the noise is unknown: nothing stops)
//
// Thread-compatible: the tuner holds its batch lock around each call.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

namespace crosstune::tuner {

class LoserCutoff {
 public:
  static constexpr size_t kMinFull = 3;
  static constexpr double kMinMargin = 0.10;
  static constexpr double kNoiseFactor = 4.0;

  // A measurement timed for every round (one that stopped early is not: its mean is a bound and
  // its rounds are fewer). Measurements of one round show no noise; their mean still counts.
  void AddFull(const std::vector<double>& costs);
  // Per-call seconds above which a round ends the timing; 0: never (too few measurements yet).
  double StopAbove() const;
  // The current margin over the best (1 + kMinMargin at least).
  double Margin() const;
  double best() const { return best_; }

 private:
  double best_ = std::numeric_limits<double>::infinity();
  size_t full_ = 0;
  std::vector<double> spreads_;  // each full measurement's coefficient of variation
};

}  // namespace crosstune::tuner
