// xgb: AutoTVM-style model-guided search. After every batch of results the cost model is trained
// again on everything measured (failures ranked lowest) plus the transfer samples of related
// tasks; simulated annealing over the space's neighbourhoods then plans the best unmeasured
// points by the model's score; the batch takes the plan's best, spread by a diversity filter,
// with an epsilon share of random points. Until the model has enough successes to learn from,
// batches are random. Any cost-model failure turns that one batch random with a warning.
//
// The "mixed" objective (the default) keeps two models, rank:ndcg and rank:pairwise, each with
// its own plan, and fills half of every batch from each (see TunerOptions::objective).
//
// A prior (AddPrior: the same space measured on another device) is believed until it can be
// judged: the first batch is mostly the prior's best points (spread by the diversity filter, as
// a plan is), and the rest
// as without one (random at first), so that the judgement compares fast and slow points. From
// then on every batch judges it again (PriorTrust: Kendall's tau between the prior's costs and
// this device's): a prior that foretells this device (z >= 1) trains the model as one more
// ranking group and gives a quarter of each batch (half when z >= 2) to its next best points; one
// that does not is left out, and the search goes on as a cold start would.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "crosstune/tuner/tuner.h"
#include "registry.h"
#include "search_common.h"
#include "xgb_model.h"

namespace crosstune::tuner::internal {
namespace {

// Weight of a knob value that the batch does not yet hold, against a score scaled to [0, 1].
constexpr double kDiversityWeight = 0.3;
// Points that both the prior and this device measured before the prior is judged.
constexpr size_t kJudgeAfter = 4;
// The z-scores above which a prior is trusted, and trusted with half of each batch.
constexpr double kTrustZ = 1.0;
constexpr double kTrustMoreZ = 2.0;
// The prior's best points that its share of a batch is chosen from, per slot.
constexpr int kPriorPool = 3;
// Points compared at most (the latest), so a judgement stays cheap in a long run.
constexpr size_t kJudgeAtMost = 512;

// Kendall's tau (ties in either ranking count for neither side) between the prior's costs and
// this device's, with its z-score against an unrelated prior.
PriorTrust Judge(const std::vector<std::pair<double, double>>& pairs, size_t points) {
  PriorTrust t;
  t.points = points;
  t.compared = pairs.size();
  if (pairs.size() < kJudgeAfter) return t;
  const size_t n = pairs.size();
  int64_t concordant = 0, discordant = 0;
  auto sign = [](double a, double b) { return a < b ? -1 : (b < a ? 1 : 0); };
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const int a = sign(pairs[i].first, pairs[j].first);
      const int b = sign(pairs[i].second, pairs[j].second);
      if (a == 0 || b == 0) continue;
      (a == b ? concordant : discordant)++;
    }
  }
  const double dn = static_cast<double>(n);
  t.tau = static_cast<double>(concordant - discordant) / (dn * (dn - 1) / 2);
  t.z = t.tau / std::sqrt(2 * (2 * dn + 5) / (9 * dn * (dn - 1)));
  t.judged = true;
  t.trusted = t.z >= kTrustZ;
  return t;
}

class XgbTuner final : public Tuner {
 public:
  XgbTuner(const ConfigSpace& space, const TunerOptions& options)
      : space_(space),
        options_(options),
        sampler_(space, options.seed ^ 0x5851f42d4c957f2dULL),
        rng_(options.seed) {
    std::vector<std::string> objectives = {options.objective};
    if (options.objective == "mixed") objectives = {"ndcg", "rank"};
    for (const std::string& o : objectives) {
      members_.push_back(std::make_unique<Member>(
          o,
          CostModelOptions{
              .objective = o, .rounds = std::max(1, options.boost_rounds), .seed = options.seed}));
    }
    options_.plan_size = std::max(options_.plan_size, 1);
    options_.sa_walkers = std::max(options_.sa_walkers, 1);
    options_.min_train = std::max(options_.min_train, 1);
  }
  std::string name() const override { return "xgb"; }

  std::vector<uint64_t> NextBatch(int n) override {
    std::vector<uint64_t> batch;
    if (n <= 0) return batch;
    TakeFromPrior(PriorShare(n), &batch);
    const int rest = n - static_cast<int>(batch.size());
    if (rest > 0 && ModelWanted()) {
      Status s = dirty_ ? FitMembers() : Status::Ok();
      if (s.ok()) {
        dirty_ = false;
        std::vector<int> slots = Slots(rest);
        for (size_t m = 0; m < members_.size() && s.ok(); ++m) {
          if (slots[m] == 0) continue;
          Expected<std::vector<Candidate>> plan = Plan(*members_[m]);
          if (!plan.ok()) {
            s = plan.status();
            break;
          }
          Pick(*plan, static_cast<int>(batch.size()) + slots[m], &batch);
        }
      }
      if (!s.ok()) Warn("cost model failed: " + s.message() + "; random batch");
    }
    while (static_cast<int>(batch.size()) < n) {
      std::optional<uint64_t> next = RandomUnproposed();
      if (!next) break;
      Propose(*next, &batch);
    }
    return batch;
  }

  void Update(const std::vector<TrialResult>& results) override {
    bool judge = false;
    for (const TrialResult& r : history_.Add(results)) {
      proposed_.insert(r.index);
      sampler_.Exclude(r.index);
      dirty_ = true;
      judge = judge || prior_cost_.count(r.index);
    }
    if (judge) JudgePrior();
  }

  // NextBatch refits when Refit could not (the model failed): it warns there.
  void Refit() override {
    if (dirty_ && ModelWanted() && FitMembers().ok()) dirty_ = false;
  }

  void AddTransfer(const std::vector<TransferSample>& samples) override {
    transfer_.insert(transfer_.end(), samples.begin(), samples.end());
    for (const TransferSample& t : samples) transfer_ok_ += t.ok ? 1 : 0;
    if (!samples.empty()) dirty_ = true;
  }

  void AddPrior(const std::vector<TrialResult>& prior) override {
    for (const TrialResult& p : prior) {
      if (p.index >= space_.size() || !space_.IsValid(space_.Get(p.index))) continue;
      const bool usable = History::Usable(p);
      if (!prior_cost_.emplace(p.index, usable ? p.cost : INFINITY).second) continue;
      if (usable) prior_best_ = std::min(prior_best_, p.cost);
    }
    // Best first; a lower bound (a loser stopped early) sorts by it, behind the measured.
    prior_order_.clear();
    for (const auto& [index, cost] : prior_cost_) {
      if (std::isfinite(cost)) prior_order_.push_back(index);
    }
    std::sort(prior_order_.begin(), prior_order_.end(), [&](uint64_t a, uint64_t b) {
      const double ca = prior_cost_[a], cb = prior_cost_[b];
      return ca < cb || (ca == cb && a < b);
    });
    JudgePrior();
    dirty_ = true;
  }

  std::optional<PriorTrust> prior_trust() const override {
    if (prior_cost_.empty()) return std::nullopt;
    return trust_;
  }

  std::vector<std::string> TakeWarnings() override { return std::exchange(warnings_, {}); }

 private:
  struct Candidate {
    uint64_t index;
    float score;
    uint64_t tie;  // random order among equal scores
  };
  struct Member {
    Member(std::string o, CostModelOptions mo) : objective(std::move(o)), model(std::move(mo)) {}
    std::string objective;
    CostModel model;
    std::vector<Candidate> last_plan;
  };

  bool ModelWanted() const {
    return static_cast<int>(history_.ok_count()) >= options_.min_train ||
           transfer_ok_ >= static_cast<size_t>(options_.min_train) ||
           (PriorInModel() && prior_order_.size() >= static_cast<size_t>(options_.min_train));
  }

  // The prior trains the model once it is judged and trusted (before that it only proposes).
  bool PriorInModel() const { return trust_.judged && trust_.trusted; }

  // Points of an n-point batch that the prior's best fill: most of the first batch before it is
  // judged (the rest as without a prior, to judge it by), then a quarter or half while trusted.
  int PriorShare(int n) const {
    if (prior_order_.empty() || !trust_.trusted) return 0;
    if (!trust_.judged) return n - n / 4;
    return trust_.z >= kTrustMoreZ ? std::max(1, n / 2) : std::max(1, n / 4);
  }

  // The prior's best unproposed points, spread by the diversity filter as a plan is: its top
  // often holds near-twins (one knob apart) that all win or all lose here.
  void TakeFromPrior(int share, std::vector<uint64_t>* batch) {
    if (share <= 0) return;
    std::vector<Candidate> pool;
    for (uint64_t index : prior_order_) {
      if (pool.size() >= static_cast<size_t>(kPriorPool * share)) break;
      if (proposed_.count(index)) continue;
      pool.push_back({index, static_cast<float>(prior_best_ / prior_cost_.at(index)), 0});
    }
    Pick(pool, static_cast<int>(batch->size()) + share, batch, /*epsilon=*/0);
  }

  void JudgePrior() {
    if (prior_cost_.empty()) return;
    std::vector<std::pair<double, double>> pairs;
    const auto& results = history_.results();
    for (size_t i = results.size(); i-- > 0 && pairs.size() < kJudgeAtMost;) {
      const TrialResult& r = results[i];
      auto it = prior_cost_.find(r.index);
      if (it == prior_cost_.end()) continue;
      pairs.emplace_back(it->second, History::Usable(r) ? r.cost : INFINITY);
    }
    const bool before = PriorInModel();
    trust_ = Judge(pairs, prior_cost_.size());
    if (PriorInModel() != before) dirty_ = true;
  }

  std::vector<float> FeaturesOf(uint64_t index) const {
    Config c = space_.Get(index);
    return options_.features ? options_.features(c) : space_.Features(c);
  }

  // Appends `f` to the row-major `x`; every row must have the first row's length.
  static Status AppendRow(const std::vector<float>& f, size_t* cols, std::vector<float>* x) {
    if (*cols == 0) *cols = f.size();
    if (f.size() != *cols || f.empty()) {
      return Status(ErrorCode::kInvalidArgument,
                    "inconsistent feature length: " + std::to_string(f.size()) + ", expected " +
                        std::to_string(*cols));
    }
    x->insert(x->end(), f.begin(), f.end());
    return Status::Ok();
  }

  Status FitMembers() {
    for (auto& m : members_) CT_RETURN_IF_ERROR(Fit(*m));
    return Status::Ok();
  }

  // Each member's share of an n-point batch: even, the remainder going to the members in turn
  // from one batch to the next (so a batch of one alternates).
  std::vector<int> Slots(int n) {
    const size_t k = members_.size();
    std::vector<int> slots(k, n / static_cast<int>(k));
    for (int r = 0; r < n % static_cast<int>(k); ++r) slots[(turn_ + r) % k]++;
    turn_ = (turn_ + 1) % k;
    return slots;
  }

  Status Fit(Member& m) {
    TrainingSet data;
    // A trusted prior: one ranking group, labels relative to its best.
    if (PriorInModel()) {
      unsigned count = 0;
      for (uint64_t index : prior_order_) {
        CT_RETURN_IF_ERROR(AppendRow(FeatureCached(index), &data.cols, &data.x));
        data.labels.push_back(Label(m.objective, prior_best_ / prior_cost_.at(index)));
        ++count;
      }
      if (count) data.groups.push_back(count);
    }
    // Transfer samples first, one ranking group per task, labels relative to the group's best.
    std::vector<int> group_ids;
    for (const TransferSample& t : transfer_) {
      if (std::find(group_ids.begin(), group_ids.end(), t.group) == group_ids.end()) {
        group_ids.push_back(t.group);
      }
    }
    for (int g : group_ids) {
      double best = INFINITY;
      unsigned count = 0;
      for (const TransferSample& t : transfer_) {
        if (t.group == g && t.ok && t.cost > 0) best = std::min(best, t.cost);
      }
      for (const TransferSample& t : transfer_) {
        if (t.group != g) continue;
        CT_RETURN_IF_ERROR(AppendRow(t.features, &data.cols, &data.x));
        bool usable = t.ok && t.cost > 0 && std::isfinite(best);
        data.labels.push_back(Label(m.objective, usable ? best / t.cost : 0.0));
        ++count;
      }
      data.groups.push_back(count);
    }
    // This task's own results: successes by best / cost, failures 0 (the lowest score), so the
    // model learns where points fail as well as where they are fast.
    unsigned own = 0;
    for (const TrialResult& r : history_.results()) {
      CT_RETURN_IF_ERROR(AppendRow(FeatureCached(r.index), &data.cols, &data.x));
      data.labels.push_back(Label(m.objective, history_.Score(r)));
      ++own;
    }
    if (own) data.groups.push_back(own);
    return m.model.Fit(data);
  }

  // The training label of a point whose score (best / cost, 0 for a failure) is `score`. For the
  // regression and pairwise objectives, the score itself. For ndcg, whose relevance grades are
  // integers, 1 for the group's best point and 0 for the rest: the model learns what sets the
  // best point apart, and the plan looks for more points like it. (Graded relevance, 0..3 by
  // distance to the best, did worse on pnpoly: median 41.5, p90 325 against 28 / 65.)
  static float Label(const std::string& objective, double score) {
    if (objective != "ndcg") return static_cast<float>(score);
    return score >= 1.0 - 1e-12 ? 1.f : 0.f;
  }

  const std::vector<float>& FeatureCached(uint64_t index) {
    auto it = features_.find(index);
    if (it == features_.end()) it = features_.emplace(index, FeaturesOf(index)).first;
    return it->second;
  }

  // Scores the points in `indices` that have no score yet.
  Status Score(const Member& m, const std::vector<uint64_t>& indices,
               std::unordered_map<uint64_t, float>* scores) const {
    std::vector<uint64_t> todo;
    std::unordered_set<uint64_t> queued;
    std::vector<float> x;
    for (uint64_t i : indices) {
      if (scores->count(i) || !queued.insert(i).second) continue;
      todo.push_back(i);
      std::vector<float> f = FeaturesOf(i);
      x.insert(x.end(), f.begin(), f.end());
    }
    if (todo.empty()) return Status::Ok();
    CT_ASSIGN_OR_RETURN(std::vector<float> s, m.model.Predict(x, todo.size()));
    for (size_t k = 0; k < todo.size(); ++k) (*scores)[todo[k]] = s[k];
    return Status::Ok();
  }

  // Simulated annealing: walkers start at the last plan's points, the best measured points and
  // random points; each step moves every walker to a random valid neighbour, accepted when the
  // model scores it higher, or with probability exp(gain / T) as T cools to 0. The plan is the
  // best `plan_size` unproposed points any walker scored.
  Expected<std::vector<Candidate>> Plan(Member& m) {
    std::unordered_map<uint64_t, float> scores;
    std::vector<uint64_t> walkers;
    const size_t want = static_cast<size_t>(options_.sa_walkers);
    for (const Candidate& c : m.last_plan) {
      if (walkers.size() >= want / 2) break;
      if (!proposed_.count(c.index)) walkers.push_back(c.index);
    }
    std::vector<TrialResult> best = history_.results();
    std::sort(best.begin(), best.end(), [&](const TrialResult& a, const TrialResult& b) {
      return history_.Score(a) > history_.Score(b);
    });
    for (size_t i = 0; i < best.size() && walkers.size() < want * 3 / 4; ++i) {
      if (history_.Score(best[i]) > 0) walkers.push_back(best[i].index);
    }
    for (int tries = 0; walkers.size() < want && tries < options_.sa_walkers * 8; ++tries) {
      uint64_t i = space_.RandomIndex(rng_);
      if (space_.IsValid(space_.Get(i))) walkers.push_back(i);
    }
    if (walkers.empty()) return std::vector<Candidate>{};
    CT_RETURN_IF_ERROR(Score(m, walkers, &scores));

    // The temperature starts at the spread of the walkers' scores, whatever the model's scale.
    double mean = 0, var = 0;
    for (uint64_t w : walkers) mean += scores[w];
    mean /= walkers.size();
    for (uint64_t w : walkers) var += (scores[w] - mean) * (scores[w] - mean);
    const double t0 = std::max(std::sqrt(var / walkers.size()), 1e-6);

    std::uniform_real_distribution<double> unit(0, 1);
    std::vector<uint64_t> moves(walkers.size());
    int stale = 0;
    for (int step = 0; step < options_.sa_iterations && stale < 8; ++step) {
      const double temp = t0 * (1.0 - static_cast<double>(step) / options_.sa_iterations);
      for (size_t w = 0; w < walkers.size(); ++w) {
        std::optional<uint64_t> next = space_.Neighbour(space_.Get(walkers[w]), rng_);
        moves[w] = next ? *next : walkers[w];
      }
      size_t before = scores.size();
      CT_RETURN_IF_ERROR(Score(m, moves, &scores));
      stale = scores.size() == before ? stale + 1 : 0;
      for (size_t w = 0; w < walkers.size(); ++w) {
        double gain = scores[moves[w]] - scores[walkers[w]];
        if (gain >= 0 || (temp > 0 && unit(rng_) < std::exp(gain / temp))) walkers[w] = moves[w];
      }
    }

    // Trees score whole boxes of the space alike: ties are broken at random, never by index
    // (which would favour the first knob's low values).
    std::vector<Candidate> plan;
    for (const auto& [index, score] : scores) {
      if (!proposed_.count(index)) plan.push_back({index, score, rng_()});
    }
    size_t keep = std::min<size_t>(plan.size(), options_.plan_size);
    std::partial_sort(plan.begin(), plan.begin() + keep, plan.end(),
                      [](const Candidate& a, const Candidate& b) {
                        return a.score > b.score || (a.score == b.score && a.tie < b.tie);
                      });
    plan.resize(keep);
    m.last_plan = plan;
    return plan;
  }

  // Fills `out` up to `n` points from the plan: each slot is random with probability epsilon;
  // otherwise the plan's point with the best rank-normalised score plus, when the diversity
  // filter is on, a bonus for each knob value this plan's picks do not hold yet.
  void Pick(const std::vector<Candidate>& plan, int n, std::vector<uint64_t>* out) {
    Pick(plan, n, out, options_.epsilon);
  }
  void Pick(const std::vector<Candidate>& plan, int n, std::vector<uint64_t>* out, double epsilon) {
    std::vector<uint64_t>& batch = *out;
    std::vector<bool> taken(plan.size(), false);
    std::vector<std::unordered_set<uint32_t>> held(space_.knobs().size());
    std::uniform_real_distribution<double> unit(0, 1);
    const double knobs = std::max<size_t>(1, space_.knobs().size());
    // Scores scaled to [0, 1] over the plan, so equal scores stay equal.
    float lo = plan.empty() ? 0.f : plan.back().score, hi = plan.empty() ? 0.f : plan.front().score;
    const double span = hi > lo ? hi - lo : 1.0;
    while (static_cast<int>(batch.size()) < n) {
      if (epsilon > 0 && unit(rng_) < epsilon) {
        std::optional<uint64_t> r = RandomUnproposed();
        if (r) {
          Propose(*r, &batch);
          continue;
        }
      }
      double best_gain = -1;
      size_t best = plan.size();
      for (size_t i = 0; i < plan.size(); ++i) {
        if (taken[i] || proposed_.count(plan[i].index)) continue;
        double gain = (plan[i].score - lo) / span;
        if (options_.diversity) {
          const Config point = space_.Get(plan[i].index);  // owns the choices read below
          const auto& choices = point.choices();
          int fresh = 0;
          for (size_t k = 0; k < choices.size(); ++k) fresh += held[k].count(choices[k]) ? 0 : 1;
          gain += kDiversityWeight * fresh / knobs;
        }
        if (gain > best_gain) {
          best_gain = gain;
          best = i;
        }
      }
      if (best == plan.size()) break;  // the plan is used up; the caller fills in at random
      taken[best] = true;
      const Config point = space_.Get(plan[best].index);
      const auto& choices = point.choices();
      for (size_t k = 0; k < choices.size(); ++k) held[k].insert(choices[k]);
      Propose(plan[best].index, &batch);
    }
  }

  void Propose(uint64_t index, std::vector<uint64_t>* batch) {
    proposed_.insert(index);
    sampler_.Exclude(index);
    batch->push_back(index);
  }

  std::optional<uint64_t> RandomUnproposed() {
    while (std::optional<uint64_t> next = sampler_.Next()) {
      if (!proposed_.count(*next)) return next;
    }
    return std::nullopt;
  }

  void Warn(std::string what) {
    if (warnings_.size() < 100) warnings_.push_back(std::move(what));
  }

  const ConfigSpace& space_;
  TunerOptions options_;
  UniqueSampler sampler_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<Member>> members_;
  size_t turn_ = 0;  // the member that takes the next batch's remainder slot
  History history_;
  std::unordered_set<uint64_t> proposed_;
  std::unordered_map<uint64_t, std::vector<float>> features_;  // of measured and prior points
  std::vector<TransferSample> transfer_;
  size_t transfer_ok_ = 0;
  std::unordered_map<uint64_t, double> prior_cost_;  // +inf: failed there
  std::vector<uint64_t> prior_order_;                // its successes, best first
  double prior_best_ = INFINITY;
  PriorTrust trust_;
  bool dirty_ = false;
  std::vector<std::string> warnings_;
};

}  // namespace

std::unique_ptr<Tuner> MakeXgbTuner(const ConfigSpace& space, const TunerOptions& options) {
  return std::make_unique<XgbTuner>(space, options);
}

}  // namespace crosstune::tuner::internal
