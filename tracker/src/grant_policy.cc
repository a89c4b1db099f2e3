#include "crosstune/tracker/grant_policy.h"

#include <algorithm>
#include <map>
#include <utility>

#include "durations.h"

namespace crosstune::tracker {
namespace {

// Today's order: priority with aging, then arrival.
class PriorityPolicy final : public GrantPolicy {
 public:
  explicit PriorityPolicy(Ms aging_step) : step_(aging_step.count()) {}

  std::string_view name() const override { return "priority"; }

  // Aging is continuous: a request gains one priority level per aging_step waited, so A goes
  // before B when prio_A*step - enqueued_A > prio_B*step - enqueued_B. Both sides age alike, so
  // the order never changes with time: a queue in this order stays in it, and only a request
  // added since needs a place (the sort below is a check when nothing was added).
  void Order(std::vector<Waiter>& queue,
             const std::function<int(const std::string&)>& /*held*/) const override {
    auto before = [this](const Waiter& a, const Waiter& b) {
      int64_t ka = Key(a), kb = Key(b);
      if (ka != kb) return ka > kb;
      return a.seq < b.seq;
    };
    if (!std::is_sorted(queue.begin(), queue.end(), before)) {
      std::sort(queue.begin(), queue.end(), before);
    }
  }

  int64_t EffectivePriority(const Waiter& w, TimePoint now) const override {
    int64_t aged = step_ > 0 ? ToMs(now - w.enqueued) / step_ : 0;
    return int64_t{w.req.priority} + aged;
  }

 private:
  int64_t Key(const Waiter& w) const {
    if (step_ == 0) return w.req.priority;
    return int64_t{w.req.priority} * step_ - ToMs(w.enqueued.time_since_epoch());
  }
  int64_t step_;
};

// Fewest devices held first: devices are shared out between holders in turn.
class FairSharePolicy final : public GrantPolicy {
 public:
  std::string_view name() const override { return "fair-share"; }

  void Order(std::vector<Waiter>& queue,
             const std::function<int(const std::string&)>& held) const override {
    // A request's share: what its holder holds now plus its holder's requests ahead of it in
    // arrival order (as if those were granted first).
    std::vector<std::pair<int64_t, size_t>> ranked;  // share, index
    ranked.reserve(queue.size());
    std::vector<size_t> by_arrival(queue.size());
    for (size_t i = 0; i < queue.size(); ++i) by_arrival[i] = i;
    std::sort(by_arrival.begin(), by_arrival.end(),
              [&](size_t a, size_t b) { return queue[a].seq < queue[b].seq; });
    std::map<std::string, int64_t> share;
    for (size_t i : by_arrival) {
      const std::string& holder = queue[i].req.holder;
      auto it = share.find(holder);
      if (it == share.end()) it = share.emplace(holder, held(holder)).first;
      ranked.emplace_back(it->second++, i);
    }
    std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      const Waiter& wa = queue[a.second];
      const Waiter& wb = queue[b.second];
      if (wa.req.priority != wb.req.priority) return wa.req.priority > wb.req.priority;
      return wa.seq < wb.seq;
    });
    std::vector<Waiter> ordered;
    ordered.reserve(queue.size());
    for (const auto& r : ranked) ordered.push_back(std::move(queue[r.second]));
    queue = std::move(ordered);
  }

  int64_t EffectivePriority(const Waiter& w, TimePoint /*now*/) const override {
    return w.req.priority;
  }
};

}  // namespace

const std::vector<std::string>& GrantPolicyNames() {
  static const std::vector<std::string> kNames = {"priority", "fair-share"};
  return kNames;
}

Expected<std::unique_ptr<GrantPolicy>> MakeGrantPolicy(std::string_view name, Ms aging_step) {
  if (name == "priority")
    return std::unique_ptr<GrantPolicy>{std::make_unique<PriorityPolicy>(aging_step)};
  if (name == "fair-share")
    return std::unique_ptr<GrantPolicy>{std::make_unique<FairSharePolicy>()};
  std::string known;
  for (const std::string& n : GrantPolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return Status(ErrorCode::kInvalidArgument,
                "unknown grant policy '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace crosstune::tracker
