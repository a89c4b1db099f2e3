// The loser cutoff (loser_cutoff.h).
#include "crosstune/tuner/loser_cutoff.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace crosstune::tuner {

void LoserCutoff::AddFull(const std::vector<double>& costs) {
  if (costs.empty()) return;
  const double n = static_cast<double>(costs.size());
  const double mean = std::accumulate(costs.begin(), costs.end(), 0.0) / n;
  if (!(mean > 0) || !std::isfinite(mean)) return;
  best_ = std::min(best_, mean);
  ++full_;
  if (costs.size() < 2) return;
  double ss = 0;
  for (double c : costs) ss += (c - mean) * (c - mean);
  spreads_.push_back(std::sqrt(ss / (n - 1)) / mean);
}

double LoserCutoff::Margin() const {
  double noise = 0;
  if (!spreads_.empty()) {
    std::vector<double> s = spreads_;
    const size_t mid = s.size() / 2;
    std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid), s.end());
    noise = s[mid];
    if (s.size() % 2 == 0) {
      const double below =
          *std::max_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid));
      noise = (noise + below) / 2;
    }
  }
  return 1 + std::max(kMinMargin, kNoiseFactor * noise);
}

double LoserCutoff::StopAbove() const {
  if (full_ < kMinFull || spreads_.empty() || !std::isfinite(best_)) return 0;
  return best_ * Margin();
}

}  // namespace crosstune::tuner
