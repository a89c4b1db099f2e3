// The grant-policy seam on its own: each policy orders a queue of waiting requests, given what
// each holder holds. No scheduler, no clock but the requests' enqueue times.
#include "crosstune/tracker/grant_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace crosstune::tracker {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint{} + 1000h;

Waiter W(uint64_t seq, const std::string& holder, int32_t priority = 0, TimePoint at = kT0) {
  Waiter w;
  w.seq = seq;
  w.req.key = "rpi4";
  w.req.holder = holder;
  w.req.priority = priority;
  w.enqueued = at;
  return w;
}

std::vector<uint64_t> Seqs(const std::vector<Waiter>& q) {
  std::vector<uint64_t> out;
  for (const auto& w : q) out.push_back(w.seq);
  return out;
}

std::vector<uint64_t> Ordered(const GrantPolicy& p, std::vector<Waiter> q,
                              const std::map<std::string, int>& held = {}) {
  p.Order(q, [&](const std::string& holder) {
    auto it = held.find(holder);
    return it == held.end() ? 0 : it->second;
  });
  return Seqs(q);
}

std::unique_ptr<GrantPolicy> Make(const std::string& name, Ms aging = 10s) {
  auto p = MakeGrantPolicy(name, aging);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

TEST(GrantPolicyTest, PriorityGoesByPriorityThenArrival) {
  auto p = Make("priority");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name(), "priority");
  EXPECT_EQ(Ordered(*p, {W(1, "a", 1), W(2, "b", 5), W(3, "c", 1), W(4, "d", 5)}),
            (std::vector<uint64_t>{2, 4, 1, 3}));
}

TEST(GrantPolicyTest, PriorityAgesOneLevelPerStep) {
  auto p = Make("priority", 10s);
  ASSERT_TRUE(p);
  // Waiting 60 s more is worth 6 levels: priority 0 from then goes before 5 from now.
  Waiter old = W(1, "a", 0, kT0);
  Waiter fresh = W(2, "b", 5, kT0 + 60s);
  EXPECT_EQ(Ordered(*p, {fresh, old}), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(p->EffectivePriority(old, kT0 + 60s), 6);
  // Without aging the base priority decides.
  auto strict = Make("priority", 0ms);
  ASSERT_TRUE(strict);
  EXPECT_EQ(Ordered(*strict, {old, fresh}), (std::vector<uint64_t>{2, 1}));
}

TEST(GrantPolicyTest, FairShareGoesToTheHolderWithFewestDevicesFirst) {
  auto p = Make("fair-share");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name(), "fair-share");
  // a holds 2, c holds 1, b none. A holder's earlier waiting request counts as held:
  // shares a#1:2, b#2:0, a#3:3, c#4:1, b#5:1.
  std::vector<Waiter> q = {W(1, "a"), W(2, "b"), W(3, "a"), W(4, "c"), W(5, "b")};
  EXPECT_EQ(Ordered(*p, q, {{"a", 2}, {"c", 1}}), (std::vector<uint64_t>{2, 4, 5, 1, 3}));
  // Holding nothing, the holders take turns in arrival order.
  EXPECT_EQ(Ordered(*p, q), (std::vector<uint64_t>{1, 2, 4, 3, 5}));
}

TEST(GrantPolicyTest, FairShareBreaksEqualSharesByPriorityThenArrival) {
  auto p = Make("fair-share");
  ASSERT_TRUE(p);
  EXPECT_EQ(Ordered(*p, {W(1, "a", 0), W(2, "b", 3), W(3, "c", 0)}),
            (std::vector<uint64_t>{2, 1, 3}));
  // Priority does not beat a smaller share.
  EXPECT_EQ(Ordered(*p, {W(1, "a", 9), W(2, "b", 0)}, {{"a", 1}}), (std::vector<uint64_t>{2, 1}));
}

TEST(GrantPolicyTest, OrderDoesNotDependOnTheOrderRequestsAreGivenIn) {
  for (const char* name : {"priority", "fair-share"}) {
    auto p = Make(name);
    ASSERT_TRUE(p);
    std::vector<Waiter> q = {W(1, "a", 1), W(2, "b", 0, kT0 + 5s), W(3, "a", 1), W(4, "c", 2),
                             W(5, "b", 0)};
    std::map<std::string, int> held = {{"a", 1}};
    std::vector<uint64_t> first = Ordered(*p, q, held);
    std::sort(q.begin(), q.end(), [](const Waiter& x, const Waiter& y) { return x.seq < y.seq; });
    do {
      EXPECT_EQ(Ordered(*p, q, held), first) << name;
    } while (std::next_permutation(q.begin(), q.end(),
                                   [](const Waiter& x, const Waiter& y) { return x.seq < y.seq; }));
  }
}

TEST(GrantPolicyTest, UnknownPolicyIsRefusedNamingTheKnownOnes) {
  auto p = MakeGrantPolicy("lottery", 10s);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "unknown grant policy 'lottery' (known: priority, fair-share)");
}

}  // namespace
}  // namespace crosstune::tracker
