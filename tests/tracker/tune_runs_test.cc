#include "crosstune/tracker/tune_runs.h"

#include <gtest/gtest.h>

#include <iterator>
#include <limits>

namespace crosstune::tracker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = TuneRuns::Clock;

msg::TuneProgress Report(uint32_t trials, double best) {
  msg::TuneProgress p;
  p.run_id = "run-1";
  p.lease_tokens = {"tok"};
  p.task = "matmul 48,48,48 llvm -mtriple=aarch64-linux-gnu";
  p.trials = trials;
  p.total = 16;
  p.measured = trials;
  p.best_gflops = best;
  p.rate = 2.5;
  return p;
}

TEST(TuneRunsTest, KeepsTheBestSoFarCurveOfARun) {
  TuneRuns runs;
  auto t0 = Clock::now();
  ASSERT_TRUE(runs.Update(t0, 1000, "alice", "rpi4", {"10.0.0.7:9090"}, Report(1, 0.1)).ok());
  ASSERT_TRUE(
      runs.Update(t0 + seconds(1), 2000, "alice", "rpi4", {"10.0.0.7:9090"}, Report(5, 0.3)).ok());
  // A worse batch keeps the best so far.
  ASSERT_TRUE(
      runs.Update(t0 + seconds(2), 3000, "alice", "rpi4", {"10.0.0.7:9090"}, Report(9, 0.2)).ok());
  auto j = runs.ToJson(t0 + seconds(2));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["holder"], "alice");
  EXPECT_EQ(j[0]["devices"][0], "10.0.0.7:9090");
  EXPECT_EQ(j[0]["best_gflops"], 0.3);
  EXPECT_EQ(j[0]["curve"].dump(), "[[1,0.1],[5,0.3],[9,0.3]]");
  EXPECT_FALSE(j[0]["finished"].get<bool>());
}

TEST(TuneRunsTest, SaysARunsWarmStartAndEarlyStops) {
  TuneRuns runs;
  auto t0 = Clock::now();
  auto r = Report(4, 0.1);
  r.warm_from = "aarch64/cortex-a72";
  r.stopped_early = 2;
  ASSERT_TRUE(runs.Update(t0, 1000, "alice", "rpi4", {"10.0.0.7:9090"}, r).ok());
  auto j = runs.ToJson(t0);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["warm_from"], "aarch64/cortex-a72");
  EXPECT_EQ(j[0]["stopped_early"], 2);
  r.warm_from = std::string(10240, 'x');
  EXPECT_EQ(ValidateTuneProgress(r).code(), ErrorCode::kInvalidArgument);
}

TEST(TuneRunsTest, RefusesMoreThanOneReportASecondButTakesTheLast) {
  TuneRuns runs;
  auto t0 = Clock::now();
  // A burst of kReportBurst is taken, the next one refused.
  for (int i = 0; i < static_cast<int>(TuneRuns::kReportBurst); ++i) {
    ASSERT_TRUE(runs.Update(t0 + milliseconds(10 * i), 0, "a", "k", {"d"}, Report(1 + i, 1)).ok())
        << i;
  }
  Status s = runs.Update(t0 + milliseconds(200), 0, "a", "k", {"d"}, Report(5, 1));
  EXPECT_EQ(s.code(), ErrorCode::kBusy) << s.ToString();
  // Two a second for a while: the credit runs out, and every other one is refused.
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    auto at = t0 + milliseconds(1000 + 500 * i);
    if (runs.Update(at, 0, "a", "k", {"d"}, Report(6 + i, 1)).code() == ErrorCode::kBusy) {
      ++refused;
    }
  }
  EXPECT_GE(refused, 8);
  auto last = Report(30, 2);
  last.finished = true;
  ASSERT_TRUE(runs.Update(t0 + milliseconds(11000), 0, "a", "k", {"d"}, last).ok());
  auto j = runs.ToJson(t0);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_TRUE(j[0]["finished"].get<bool>());
  EXPECT_EQ(j[0]["trials"], 30);
}

// A tuner sends once a second by its own clock, each report after the last one's answer; a
// busy tracker may take one late and the next on time, a few ms apart. None is refused.
TEST(TuneRunsTest, TakesEveryReportOfARunThatSendsOnceASecondHoweverLateTheyArrive) {
  TuneRuns runs;
  auto t0 = Clock::now();
  // Sent at 0, 1, 2, ... s; report i arrives late by delay[i] (at most until the next is sent).
  const int delay_ms[] = {0, 950, 0, 990, 0, 0, 999, 0, 700, 20, 999, 1, 998, 0};
  const int reports = static_cast<int>(std::size(delay_ms));
  for (int i = 0; i < reports; ++i) {
    const int arrives_ms = 1000 * i + delay_ms[i];
    // Report i carries i + 1 trials and a new best, so each taken report adds a curve point.
    Status s = runs.Update(t0 + milliseconds(arrives_ms), arrives_ms, "a", "k", {"d"},
                           Report(i + 1, i + 1));
    EXPECT_TRUE(s.ok()) << "report " << i << ": " << s.ToString();
  }
  // Read the run back: it holds the last report's trials, still running, and the curve has one
  // point per report, in order (a report answered Ok but dropped would leave a gap).
  auto j = runs.ToJson(t0 + milliseconds(1000 * reports));
  ASSERT_EQ(j.size(), 1u) << j.dump();
  EXPECT_EQ(j[0]["trials"], reports) << j.dump();
  EXPECT_EQ(j[0]["best_gflops"], reports) << j.dump();
  EXPECT_EQ(j[0]["started_unix_ms"], 0) << j.dump();
  EXPECT_EQ(j[0]["updated_unix_ms"], 1000 * (reports - 1) + delay_ms[reports - 1]) << j.dump();
  EXPECT_FALSE(j[0]["finished"].get<bool>());
  ASSERT_EQ(j[0]["curve"].size(), static_cast<size_t>(reports)) << j[0]["curve"].dump();
  for (int i = 0; i < reports; ++i) {
    EXPECT_EQ(j[0]["curve"][i][0], i + 1) << j[0]["curve"].dump();
  }
}

TEST(TuneRunsTest, ARunIdIsItsRunsOwn) {
  TuneRuns runs;
  auto t0 = Clock::now();
  ASSERT_TRUE(runs.Update(t0, 0, "alice", "k", {"d1"}, Report(1, 1)).ok());
  // Someone else's report under the same run id, on a lease of their own: refused.
  auto other = Report(9, 99);
  other.lease_tokens = {"bobs-token"};
  Status s = runs.Update(t0 + seconds(2), 0, "bob", "k", {"d2"}, other);
  EXPECT_EQ(s.code(), ErrorCode::kUnauthorized) << s.ToString();
  // The run itself, with one lease more (a device added): taken.
  auto more = Report(2, 2);
  more.lease_tokens = {"tok", "tok2"};
  ASSERT_TRUE(runs.Update(t0 + seconds(4), 0, "alice", "k", {"d1", "d3"}, more).ok());
  auto j = runs.ToJson(t0);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["holder"], "alice");
  EXPECT_EQ(j[0]["best_gflops"], 2);
}

TEST(TuneRunsTest, ARunThatFallsSilentIsFinished) {
  TuneRuns runs;
  auto t0 = Clock::now();
  ASSERT_TRUE(runs.Update(t0, 0, "a", "k", {"d"}, Report(1, 1)).ok());
  runs.Expire(t0 + seconds(30));
  EXPECT_FALSE(runs.ToJson(t0)[0]["finished"].get<bool>());
  runs.Expire(t0 + TuneRuns::kSilentAfter);
  EXPECT_TRUE(runs.ToJson(t0)[0]["finished"].get<bool>());
}

TEST(TuneRunsTest, ALongCurveStaysBounded) {
  TuneRuns runs;
  auto t = Clock::now();
  for (uint32_t i = 1; i <= 2000; ++i) {
    t += seconds(1);
    ASSERT_TRUE(runs.Update(t, 0, "a", "k", {"d"}, Report(i, i)).ok());
  }
  auto curve = runs.ToJson(t)[0]["curve"];
  EXPECT_LE(curve.size(), TuneRuns::kMaxCurvePoints);
  EXPECT_EQ(curve.back()[0], 2000);  // the newest point stays
}

TEST(TuneRunsTest, ValidationRefusesUnboundedOrBrokenReports) {
  EXPECT_TRUE(ValidateTuneProgress(Report(1, 1)).ok());
  auto long_task = Report(1, 1);
  long_task.task = std::string(1000, 'x');
  EXPECT_EQ(ValidateTuneProgress(long_task).code(), ErrorCode::kInvalidArgument);
  auto nan = Report(1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(ValidateTuneProgress(nan).code(), ErrorCode::kInvalidArgument);
  auto kinds = Report(1, 1);
  for (int i = 0; i < 40; ++i) kinds.errors["Kind" + std::to_string(i)] = 1;
  EXPECT_EQ(ValidateTuneProgress(kinds).code(), ErrorCode::kInvalidArgument);
  auto latin1 = Report(1, 1);
  latin1.run_id = "caf\xe9";
  EXPECT_EQ(ValidateTuneProgress(latin1).code(), ErrorCode::kInvalidArgument);
  auto no_lease = Report(1, 1);
  no_lease.lease_tokens.clear();
  EXPECT_EQ(ValidateTuneProgress(no_lease).code(), ErrorCode::kInvalidArgument);
}

TEST(TuneRunsTest, MetricsCarryTheSameCountsWithEscapedLabels) {
  TuneRuns runs;
  auto r = Report(7, 1.5);
  r.task = "mat\"mul";
  r.errors["WrongAnswer"] = 2;
  ASSERT_TRUE(runs.Update(Clock::now(), 0, "a", "k", {"d"}, r).ok());
  std::string m;
  runs.AppendMetrics(&m);
  EXPECT_NE(m.find("crosstune_tune_runs_running 1\n"), std::string::npos) << m;
  EXPECT_NE(
      m.find("crosstune_tune_trials{run=\"run-1\",task=\"mat\\\"mul\",key=\"k\",devices=\"d\"} 7"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("kind=\"WrongAnswer\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("crosstune_tune_best_gflops{"), std::string::npos) << m;
}

TEST(UsageHistoryTest, RecordsEachDevicesShareOfEveryBucket) {
  UsageHistory h;
  auto t = Clock::now();
  h.Sample(t, {{"a", 0.0}, {"b", 100.0}});
  h.Sample(t + seconds(10), {{"a", 5.0}, {"b", 100.0}});  // within the bucket: nothing closes
  EXPECT_TRUE(h.ToJson()["devices"].empty() || h.ToJson()["devices"]["a"].empty());
  h.Sample(t + UsageHistory::kBucket, {{"a", 15.0}, {"b", 100.0}});
  auto j = h.ToJson();
  EXPECT_EQ(j["bucket_seconds"], UsageHistory::kBucket.count());
  EXPECT_DOUBLE_EQ(j["devices"]["a"][0].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["devices"]["b"][0].get<double>(), 0.0);
  for (int i = 2; i < 200; ++i)
    h.Sample(t + UsageHistory::kBucket * i, {{"a", 15.0}, {"b", 100.0}});
  EXPECT_EQ(h.ToJson()["devices"]["a"].size(), UsageHistory::kBuckets);
}

// The page shows a farm started seconds ago: the open bucket is each device's last entry.
TEST(UsageHistoryTest, TheOpenBucketShowsEachDevicesShareSoFar) {
  UsageHistory h;
  auto t = Clock::now();
  h.Sample(t, {{"a", 0.0}});
  h.Sample(t + seconds(10), {{"a", 8.0}});  // a tick within the bucket closes nothing
  auto j = h.ToJson(t + seconds(10), {{"a", 8.0}, {"new", 2.0}});
  ASSERT_EQ(j["devices"]["a"].size(), 1u) << j.dump();
  EXPECT_DOUBLE_EQ(j["devices"]["a"][0].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["devices"]["new"][0].get<double>(), 0.2);  // registered since: all its count
  EXPECT_DOUBLE_EQ(j["open_bucket_seconds"].get<double>(), 10.0);
  // Once the bucket closes it is the closed one, and the next one opens after it.
  h.Sample(t + UsageHistory::kBucket, {{"a", 15.0}});
  j = h.ToJson(t + UsageHistory::kBucket + seconds(5), {{"a", 20.0}});
  ASSERT_EQ(j["devices"]["a"].size(), 2u) << j.dump();
  EXPECT_DOUBLE_EQ(j["devices"]["a"][0].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["devices"]["a"][1].get<double>(), 1.0);
  // Under a second open: nothing added.
  EXPECT_EQ(h.ToJson(t + UsageHistory::kBucket, {{"a", 15.0}})["devices"]["a"].size(), 1u);
}

TEST(UsageHistoryTest, ADeviceBusyInItsFirstBucketShowsIt) {
  // A device that registers after the tracker's first sample and is leased 12 s of its first
  // bucket (a short tune run), and one whose count restarts (re-registered) at 6 s.
  UsageHistory h;
  auto t = Clock::now();
  h.Sample(t, {{"old", 50.0}});
  h.Sample(t + UsageHistory::kBucket, {{"new", 12.0}, {"old", 6.0}});
  auto j = h.ToJson();
  EXPECT_DOUBLE_EQ(j["devices"]["new"][0].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(j["devices"]["old"][0].get<double>(), 0.2);
}

}  // namespace
}  // namespace crosstune::tracker
