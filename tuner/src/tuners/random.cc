// random: valid points drawn uniformly without replacement (the baseline every tuner must beat).
#include <memory>

#include "crosstune/tuner/tuner.h"
#include "registry.h"

namespace crosstune::tuner::internal {
namespace {

class RandomTuner final : public Tuner {
 public:
  RandomTuner(const ConfigSpace& space, const TunerOptions& options)
      : sampler_(space, options.seed) {}
  std::string name() const override { return "random"; }

  std::vector<uint64_t> NextBatch(int n) override {
    std::vector<uint64_t> batch;
    while (static_cast<int>(batch.size()) < n) {
      std::optional<uint64_t> next = sampler_.Next();
      if (!next) break;
      batch.push_back(*next);
    }
    return batch;
  }

  void Update(const std::vector<TrialResult>& results) override {
    // Points of an earlier run are never drawn again; our own draws are already marked.
    for (const TrialResult& r : results) sampler_.Exclude(r.index);
  }

 private:
  UniqueSampler sampler_;
};

}  // namespace

std::unique_ptr<Tuner> MakeRandomTuner(const ConfigSpace& space, const TunerOptions& options) {
  return std::make_unique<RandomTuner>(space, options);
}

}  // namespace crosstune::tuner::internal
