// The task scheduler on simulated tuning curves. (The built-in networks' task sets are checked in
// tests/model/passes_test.cc.)
#include "crosstune/tuner/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

// A simulated task: its best time after t trials falls from `start` towards `floor` as
// floor + (start - floor) / (1 + t / 8).
struct Curve {
  double start, floor;
  double At(int t) const { return floor + (start - floor) / (1.0 + t / 8.0); }
};

std::vector<int> Simulate(const std::vector<SchedulerTask>& tasks, const std::vector<Curve>& curves,
                          int budget, int round, TaskScheduler* out = nullptr) {
  TaskScheduler s(tasks);
  std::vector<int> trials(tasks.size(), 0);
  int spent = 0;
  while (spent < budget) {
    int i = s.Next();
    EXPECT_GE(i, 0);
    if (i < 0) break;
    trials[i] += round;
    spent += round;
    s.Update(i, trials[i], curves[i].At(trials[i]));
  }
  if (out) *out = s;
  return trials;
}

TEST(TaskSchedulerTest, GivesMoreTrialsToTheLayersThatDominateTheNetworksTime) {
  // Same template, same speed per FLOP: task 0 occurs 6 times and is 10x the work of task 2.
  std::vector<SchedulerTask> tasks = {{6, 1e9, "conv2d"}, {1, 1e9, "conv2d"}, {1, 1e8, "conv2d"}};
  std::vector<Curve> curves = {{0.10, 0.02}, {0.10, 0.02}, {0.01, 0.002}};
  TaskScheduler s(tasks);
  auto trials = Simulate(tasks, curves, 400, 8, &s);
  EXPECT_EQ(std::accumulate(trials.begin(), trials.end(), 0), 400);
  EXPECT_GT(trials[0], trials[1]) << trials[0] << " " << trials[1] << " " << trials[2];
  EXPECT_GT(trials[1], trials[2]) << trials[0] << " " << trials[1] << " " << trials[2];
  EXPECT_GE(trials[2], 8);  // every task got its warm-up round
  // The network time is the sum of count x best.
  double want = 6 * curves[0].At(trials[0]) + curves[1].At(trials[1]) + curves[2].At(trials[2]);
  EXPECT_NEAR(s.NetworkSeconds(), want, 1e-12);
}

TEST(TaskSchedulerTest, AllocationBeatsAnEvenSplitOnTheEstimatedNetworkTime) {
  std::vector<SchedulerTask> tasks;
  std::vector<Curve> curves;
  for (int i = 0; i < 6; ++i) {
    double work = 1e8 * (1 + 3 * (i % 3));
    tasks.push_back({static_cast<double>(1 + (i * 5) % 4), work, "conv2d"});
    curves.push_back({work / 5e9, work / 8e10});
  }
  auto trials = Simulate(tasks, curves, 480, 8);
  double scheduled = 0, even = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    scheduled += tasks[i].weight * curves[i].At(trials[i]);
    even += tasks[i].weight * curves[i].At(480 / 6);
  }
  EXPECT_LT(scheduled, even);
}

TEST(TaskSchedulerTest, TasksWithoutAWorkingConfigGoFirstThenGiveUp) {
  TaskScheduler s({{1, 1e9, "a"}, {1, 1e9, "a"}});
  EXPECT_EQ(s.Next(), 0);
  s.Update(0, 8, 0.01);
  EXPECT_EQ(s.Next(), 1);
  s.Update(1, 8, TaskScheduler::kNoTime);  // every trial failed
  EXPECT_EQ(s.Next(), 1);
  EXPECT_EQ(s.NetworkSeconds(), TaskScheduler::kNoTime);
  s.Update(1, 16, TaskScheduler::kNoTime);
  s.Update(1, 24, TaskScheduler::kNoTime);  // three failed rounds: left alone
  EXPECT_EQ(s.Next(), 0);
  TaskScheduler all_failed({{1, 1e9, "a"}});
  for (int r = 1; r <= 3; ++r) all_failed.Update(0, 8 * r, TaskScheduler::kNoTime);
  EXPECT_EQ(all_failed.Next(), -1);
}

}  // namespace
}  // namespace crosstune::tuner

namespace crosstune::tuner {
namespace {

TEST(ParseShapeTest, ReadsCommaSeparatedIntegersAndNamesBadText) {
  auto ok = ParseShape("1,64,56,56,64,3,3,1,1");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<int64_t>{1, 64, 56, 56, 64, 3, 3, 1, 1}));
  for (const char* bad : {"", "512,,512", "512,x", "512,512,", "1.5"}) {
    auto r = ParseShape(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("'" + std::string(bad) + "'"), std::string::npos);
  }
}

}  // namespace
}  // namespace crosstune::tuner
