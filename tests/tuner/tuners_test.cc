#include <gtest/gtest.h>

#include <set>
#include <string>

#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner {
namespace {

// A small table: a in 1..8, b in 1..6, c in {"x","y","z"}; some points are absent (a kernel's
// restrictions), some fail (a*b = 12 with c="x", ahead of the best in index order); the cost
// has one best point at a=6, b=2, c="y".
std::unique_ptr<ReplayTable> SmallTable() {
  std::vector<ReplayPoint> points;
  const char* cs[] = {"x", "y", "z"};
  for (int a = 1; a <= 8; ++a) {
    for (int b = 1; b <= 6; ++b) {
      for (int c = 0; c < 3; ++c) {
        if ((a + b) % 5 == 0) continue;  // not in the table
        ReplayPoint p;
        p.values = {{"a", a}, {"b", b}, {"c", cs[c]}};
        if (a * b == 12 && c == 0) {
          p.failure = "RuntimeFailedConfig";
        } else {
          p.ok = true;
          p.cost = 1.0 + (a - 6) * (a - 6) + 0.5 * (b - 2) * (b - 2) + (c == 1 ? 0 : 1.5);
        }
        points.push_back(std::move(p));
      }
    }
  }
  auto t = ReplayTable::FromPoints("small", std::move(points), {"a", "b", "c"});
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

class EachTunerTest : public ::testing::TestWithParam<std::string> {};

// Runs `name` over the whole table in batches of 8: every point once, none outside the table,
// the best among them, and no warning. A walk over the whole table meets the best whatever the
// order, so these tests show what a tuner proposes, not how well it searches: replay_test.cc's
// VendoredSpaceTest compares xgb with random search on a recorded space for that.
void ExhaustTable(const std::string& name, const TunerOptions& options) {
  auto table = SmallTable();
  auto tuner = MakeTuner(name, table->space(), options);
  ASSERT_TRUE(tuner.ok()) << tuner.status().message();
  std::set<uint64_t> proposed;
  double best = INFINITY;
  int batches = 0;
  while (true) {
    std::vector<uint64_t> batch = (*tuner)->NextBatch(8);
    if (batch.empty()) break;
    ASSERT_LE(batch.size(), 8u);
    std::vector<TrialResult> results;
    for (uint64_t i : batch) {
      ASSERT_TRUE(proposed.insert(i).second) << name << " proposed " << i << " twice";
      ASSERT_NE(table->Find(i), nullptr) << name << " proposed a point the table lacks";
      results.push_back(table->Measure(i));
      if (results.back().ok) best = std::min(best, results.back().cost);
    }
    (*tuner)->Update(results);
    ASSERT_LT(++batches, 1000);
  }
  EXPECT_EQ(proposed.size(), table->valid_count());
  EXPECT_EQ(best, *table->best());
  const auto warnings = (*tuner)->TakeWarnings();
  EXPECT_TRUE(warnings.empty()) << name << " " << options.objective << ": " << warnings.front();
}

TEST_P(EachTunerTest, WalkingTheWholeTableProposesEveryPointOnce) {
  ExhaustTable(GetParam(),
               {.seed = 5, .min_train = 4, .boost_rounds = 20, .population = 8, .elite = 2});
}

TEST(XgbTunerTest, EveryObjectiveProposesEachPointOnceWithoutAModelFailure) {
  for (const char* objective : {"mixed", "ndcg", "rank", "reg"}) {
    SCOPED_TRACE(objective);
    ExhaustTable("xgb", {.seed = 3, .objective = objective, .min_train = 4, .boost_rounds = 20});
  }
}

TEST_P(EachTunerTest, NeverProposesPointsMeasuredInAnEarlierRun) {
  auto table = SmallTable();
  auto tuner = MakeTuner(GetParam(), table->space(), {.seed = 2, .min_train = 4});
  ASSERT_TRUE(tuner.ok());
  // Resume: half the table was measured before.
  std::vector<TrialResult> earlier;
  std::set<uint64_t> measured;
  UniqueSampler sampler(table->space(), 9);
  for (uint64_t i = 0; i < table->valid_count() / 2; ++i) {
    uint64_t index = *sampler.Next();
    earlier.push_back(table->Measure(index));
    measured.insert(index);
  }
  (*tuner)->Update(earlier);
  uint64_t total = 0;
  while (true) {
    auto batch = (*tuner)->NextBatch(8);
    if (batch.empty()) break;
    std::vector<TrialResult> results;
    for (uint64_t i : batch) {
      ASSERT_EQ(measured.count(i), 0u) << GetParam() << " proposed " << i << " again";
      measured.insert(i);
      results.push_back(table->Measure(i));
      ++total;
    }
    (*tuner)->Update(results);
  }
  EXPECT_EQ(measured.size(), table->valid_count());
  EXPECT_EQ(total, table->valid_count() - earlier.size());
}

TEST_P(EachTunerTest, AReplayAllowedTheWholeTableReachesItsBest) {
  auto table = SmallTable();
  ReplayOptions o;
  o.tuner = GetParam();
  o.target_fraction = 1.0;
  o.tuner_options.boost_rounds = 20;
  auto summary = SummariseReplay(*table, o, 3);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->reached, 3);
  ASSERT_TRUE(summary->median.has_value());
  EXPECT_LE(*summary->median, static_cast<double>(table->valid_count()));
}

INSTANTIATE_TEST_SUITE_P(Tuners, EachTunerTest, ::testing::Values("random", "grid", "ga", "xgb"),
                         [](const auto& info) { return info.param; });

TEST(MakeTunerTest, RefusesUnknownNamesListingTheValidOnes) {
  ConfigSpace s;
  ASSERT_TRUE(s.AddCategorical("a", {1, 2}).ok());
  auto t = MakeTuner("annealing", s);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("random, grid, ga, xgb"), std::string::npos)
      << t.status().message();
}

TEST(GridTunerTest, WalksValidPointsInIndexOrder) {
  auto table = SmallTable();
  auto tuner = MakeTuner("grid", table->space());
  ASSERT_TRUE(tuner.ok());
  std::vector<uint64_t> expected;
  for (uint64_t i = 0; i < table->space().size() && expected.size() < 10; ++i) {
    if (table->Find(i)) expected.push_back(i);
  }
  auto first = (*tuner)->NextBatch(6), second = (*tuner)->NextBatch(4);
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, expected);
}

TEST(XgbTunerTest, FallsBackToRandomWhenTheFeaturesBreakTheModel) {
  auto table = SmallTable();
  TunerOptions o;
  o.seed = 4;
  o.min_train = 4;
  // A broken feature function: its length depends on the point.
  o.features = [](const Config& c) { return std::vector<float>(1 + c.index() % 3, 1.0f); };
  auto tuner = MakeTuner("xgb", table->space(), o);
  ASSERT_TRUE(tuner.ok());
  std::set<uint64_t> proposed;
  std::vector<std::string> warnings;
  for (int b = 0; b < 6; ++b) {
    auto batch = (*tuner)->NextBatch(8);
    ASSERT_EQ(batch.size(), 8u) << "the run must go on with random batches";
    std::vector<TrialResult> results;
    for (uint64_t i : batch) {
      EXPECT_TRUE(proposed.insert(i).second);
      results.push_back(table->Measure(i));
    }
    (*tuner)->Update(results);
    for (auto& w : (*tuner)->TakeWarnings()) warnings.push_back(w);
  }
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.front().find("cost model failed"), std::string::npos) << warnings.front();
  EXPECT_NE(warnings.front().find("feature length"), std::string::npos) << warnings.front();
  EXPECT_NE(warnings.front().find("random batch"), std::string::npos) << warnings.front();
}

TEST(XgbTunerTest, TransferSamplesWarmStartTheModel) {
  auto table = SmallTable();
  const ConfigSpace& space = table->space();
  // Another task of the template: the same landscape, costs twice as high.
  std::vector<TransferSample> samples;
  for (uint64_t i = 0; i < space.size(); ++i) {
    const ReplayPoint* p = table->Find(i);
    if (!p) continue;
    samples.push_back({space.Features(space.Get(i)), p->ok ? 2 * p->cost : 0, p->ok, 7});
  }
  auto tuner = MakeTuner("xgb", space, {.seed = 1, .epsilon = 0});
  ASSERT_TRUE(tuner.ok());
  (*tuner)->AddTransfer(samples);
  auto batch = (*tuner)->NextBatch(8);
  double best_in_batch = INFINITY;
  for (uint64_t i : batch) {
    TrialResult r = table->Measure(i);
    if (r.ok) best_in_batch = std::min(best_in_batch, r.cost);
  }
  // A random first batch would hold the best point with probability 8/valid_count.
  EXPECT_EQ(best_in_batch, *table->best());
  EXPECT_TRUE((*tuner)->TakeWarnings().empty());
}

TEST(XgbTunerTest, TransferSamplesOfAnotherLengthWarnAndDoNotEndTheRun) {
  auto table = SmallTable();
  auto tuner = MakeTuner("xgb", table->space(), {.seed = 1, .min_train = 2});
  ASSERT_TRUE(tuner.ok());
  std::vector<TransferSample> samples;
  for (int i = 0; i < 10; ++i) samples.push_back({{1.f, 2.f}, 1.0 + i, true, 0});
  (*tuner)->AddTransfer(samples);
  auto batch = (*tuner)->NextBatch(8);
  EXPECT_EQ(batch.size(), 8u);
  auto warnings = (*tuner)->TakeWarnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.front().find("feature length"), std::string::npos) << warnings.front();
}

TEST(ReplayTest, CountsTrialsToTargetIncludingFailures) {
  auto table = SmallTable();
  // grid is deterministic: the target's trial number is its place among the valid points.
  uint64_t place = 0, best_place = 0;
  for (uint64_t i = 0; i < table->space().size(); ++i) {
    const ReplayPoint* p = table->Find(i);
    if (!p) continue;
    ++place;
    if (p->ok && p->cost == *table->best()) best_place = place;
  }
  ReplayOptions o;
  o.tuner = "grid";
  o.batch = 5;
  o.target_fraction = 1.0;
  auto run = RunReplay(*table, o);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->reached);
  EXPECT_EQ(run->trials_to_target, best_place);
  EXPECT_GT(run->failed, 0u);
  auto summary = SummariseReplay(*table, o, 4);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(*summary->median, static_cast<double>(best_place));
  EXPECT_EQ(*summary->p90, static_cast<double>(best_place));
  EXPECT_EQ(*summary->mean, static_cast<double>(best_place));
  auto j = ReplaySummaryJson(*summary);
  EXPECT_EQ(j["valid_count"], table->valid_count());
  EXPECT_EQ(j["space_size"], 8 * 6 * 3);
  // A budget short of the target: no seed reaches it and the statistics say so.
  o.max_trials = best_place - 1;
  summary = SummariseReplay(*table, o, 2);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->reached, 0);
  EXPECT_FALSE(summary->median.has_value());
  EXPECT_TRUE(ReplaySummaryJson(*summary)["median"].is_null());
}

TEST(ParsePinsTest, ReadsJsonValuesAndBareStrings) {
  auto pins = ParsePins({"unroll_k=4", R"(order=["ir","jr"])", "flag=true", "mode=fast", "x=1.5"});
  ASSERT_TRUE(pins.ok()) << pins.status().ToString();
  EXPECT_EQ(*pins, nlohmann::json::parse(
                       R"({"unroll_k":4,"order":["ir","jr"],"flag":true,"mode":"fast","x":1.5})"));
  EXPECT_EQ(ParsePins({})->size(), 0u);
  for (const char* bad : {"unroll_k", "=4"}) {
    auto p = ParsePins({bad});
    EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find("expected KNOB=VALUE"), std::string::npos);
  }
  auto twice = ParsePins({"a=1", "a=2"});
  EXPECT_NE(twice.status().message().find("'a' is pinned twice"), std::string::npos);
}

// `tune --pin` with a value nested 100,000 levels deep: the old reader took it, and the pin's
// error text dumped it whole (a stack overflow). A list that does not parse is now named, too.
TEST(ParsePinsTest, RefusesDeeplyNestedAndMalformedLists) {
  const std::string levels(100'000, '[');
  auto huge = ParsePins({"order=" + levels + std::string(levels.size(), ']')});
  EXPECT_EQ(huge.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(huge.status().message(),
            "pin 'order': JSON text of 200000 bytes is over the limit of 65536");
  auto deep = ParsePins({"order=" + levels.substr(0, 1000) + std::string(1000, ']')});
  EXPECT_EQ(deep.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(deep.status().message(), "pin 'order': JSON nested deeper than 64 levels at byte 65");
  auto open = ParsePins({"order=[\"ir\","});
  EXPECT_NE(open.status().message().find("pin 'order': not JSON: syntax error"), std::string::npos)
      << open.status().message();
}

}  // namespace
}  // namespace crosstune::tuner
