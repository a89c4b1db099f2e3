// ga: a genetic search. The population is the best `population` points measured so far; each
// child takes one parent from the `elite` best and one drawn in proportion to its score, takes
// each knob from either parent, and mutates each knob with probability `mutation`. A child that
// is invalid or was proposed before is bred again; after many tries a random point stands in, so
// the search never proposes a point twice and never stalls.
#include <algorithm>
#include <memory>
#include <unordered_set>

#include "crosstune/tuner/tuner.h"
#include "registry.h"
#include "search_common.h"

namespace crosstune::tuner::internal {
namespace {

constexpr int kBreedTries = 64;

class GaTuner final : public Tuner {
 public:
  GaTuner(const ConfigSpace& space, const TunerOptions& options)
      : space_(space),
        options_(options),
        sampler_(space, options.seed ^ 0x9e3779b97f4a7c15ULL),
        rng_(options.seed) {
    options_.population = std::max(options_.population, 2);
    options_.elite = std::clamp(options_.elite, 1, options_.population);
  }
  std::string name() const override { return "ga"; }

  std::vector<uint64_t> NextBatch(int n) override {
    std::vector<uint64_t> batch;
    std::vector<Parent> pool = Population();
    while (static_cast<int>(batch.size()) < n) {
      std::optional<uint64_t> child;
      if (pool.size() >= 2) child = Breed(pool);
      if (!child) child = RandomUnproposed();
      if (!child) break;  // the space is used up
      proposed_.insert(*child);
      sampler_.Exclude(*child);
      batch.push_back(*child);
    }
    return batch;
  }

  void Update(const std::vector<TrialResult>& results) override {
    for (const TrialResult& r : history_.Add(results)) {
      proposed_.insert(r.index);
      sampler_.Exclude(r.index);
    }
  }

 private:
  struct Parent {
    uint64_t index;
    double score;
  };

  // The best `population` measured points (successes first); empty until a population's worth
  // of points has been measured, so the first generation is random.
  std::vector<Parent> Population() const {
    const auto& results = history_.results();
    if (static_cast<int>(results.size()) < options_.population) return {};
    std::vector<Parent> all;
    all.reserve(results.size());
    for (const TrialResult& r : results) all.push_back({r.index, history_.Score(r)});
    size_t keep = std::min<size_t>(options_.population, all.size());
    std::partial_sort(all.begin(), all.begin() + keep, all.end(),
                      [](const Parent& a, const Parent& b) { return a.score > b.score; });
    all.resize(keep);
    return all;
  }

  std::optional<uint64_t> Breed(const std::vector<Parent>& pool) {
    std::vector<double> weights;
    for (const Parent& p : pool) weights.push_back(p.score + 1e-3);  // failures may still breed
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    size_t elite = std::min<size_t>(options_.elite, pool.size());
    std::uniform_real_distribution<double> unit(0, 1);
    const auto& knobs = space_.knobs();
    for (int t = 0; t < kBreedTries; ++t) {
      size_t a = std::uniform_int_distribution<size_t>(0, elite - 1)(rng_);
      size_t b = pick(rng_);
      if (a == b) b = (b + 1) % pool.size();
      Config pa = space_.Get(pool[a].index), pb = space_.Get(pool[b].index);
      std::vector<uint32_t> genes(knobs.size());
      for (size_t k = 0; k < knobs.size(); ++k) {
        genes[k] = unit(rng_) < 0.5 ? pa.choices()[k] : pb.choices()[k];
        if (knobs[k].size() > 1 && unit(rng_) < options_.mutation) {
          uint32_t n = static_cast<uint32_t>(knobs[k].size());
          genes[k] = (genes[k] + std::uniform_int_distribution<uint32_t>(1, n - 1)(rng_)) % n;
        }
      }
      Expected<uint64_t> index = space_.IndexOf(genes);
      if (!index.ok() || proposed_.count(*index)) continue;
      if (!space_.IsValid(space_.Get(*index))) continue;
      return *index;
    }
    return std::nullopt;
  }

  std::optional<uint64_t> RandomUnproposed() {
    while (std::optional<uint64_t> next = sampler_.Next()) {
      if (!proposed_.count(*next)) return next;
    }
    return std::nullopt;
  }

  const ConfigSpace& space_;
  TunerOptions options_;
  UniqueSampler sampler_;
  std::mt19937_64 rng_;
  History history_;
  std::unordered_set<uint64_t> proposed_;  // proposed or measured: never proposed again
};

}  // namespace

std::unique_ptr<Tuner> MakeGaTuner(const ConfigSpace& space, const TunerOptions& options) {
  return std::make_unique<GaTuner>(space, options);
}

}  // namespace crosstune::tuner::internal
