// grid: every valid point in index order (first knob fastest), for full-space logs.
#include <memory>
#include <unordered_set>

#include "crosstune/tuner/tuner.h"
#include "registry.h"

namespace crosstune::tuner::internal {
namespace {

class GridTuner final : public Tuner {
 public:
  explicit GridTuner(const ConfigSpace& space) : space_(space) {}
  std::string name() const override { return "grid"; }

  std::vector<uint64_t> NextBatch(int n) override {
    std::vector<uint64_t> batch;
    while (static_cast<int>(batch.size()) < n && next_ < space_.size()) {
      uint64_t index = next_++;
      if (measured_.count(index) || !space_.IsValid(space_.Get(index))) continue;
      batch.push_back(index);
    }
    return batch;
  }

  void Update(const std::vector<TrialResult>& results) override {
    // Only points ahead of the cursor can come up again (an earlier run's records).
    for (const TrialResult& r : results) {
      if (r.index >= next_) measured_.insert(r.index);
    }
  }

 private:
  const ConfigSpace& space_;
  uint64_t next_ = 0;
  std::unordered_set<uint64_t> measured_;
};

}  // namespace

std::unique_ptr<Tuner> MakeGridTuner(const ConfigSpace& space, const TunerOptions&) {
  return std::make_unique<GridTuner>(space);
}

}  // namespace crosstune::tuner::internal
