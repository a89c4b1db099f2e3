// The ResNet-50 task set against the network written out layer by layer, and the task
// scheduler on simulated tuning curves.
#include "crosstune/tuner/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

// ResNet-50 (torchvision's definition: stride on each stage's first 3x3), batch 1, 224x224:
// every convolution in network order as N,C,H,W,K,R,S,stride,pad[,residual], then the
// classifier. Written out by hand, not generated, so the workload is checked against it.
std::vector<std::pair<std::string, std::vector<int64_t>>> ResNet50ByHand() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> l;
  auto conv = [&](std::vector<int64_t> s) { l.push_back({"conv2d", std::move(s)}); };
  conv({1, 3, 224, 224, 64, 7, 7, 2, 3});
  // layer1: 56x56, 3 blocks 64 -> 256
  conv({1, 64, 56, 56, 64, 1, 1, 1, 0});
  conv({1, 64, 56, 56, 64, 3, 3, 1, 1});
  conv({1, 64, 56, 56, 256, 1, 1, 1, 0, 1});
  conv({1, 64, 56, 56, 256, 1, 1, 1, 0});  // projection shortcut
  for (int b = 0; b < 2; ++b) {
    conv({1, 256, 56, 56, 64, 1, 1, 1, 0});
    conv({1, 64, 56, 56, 64, 3, 3, 1, 1});
    conv({1, 64, 56, 56, 256, 1, 1, 1, 0, 1});
  }
  // layer2: 56 -> 28, 4 blocks 128 -> 512
  conv({1, 256, 56, 56, 128, 1, 1, 1, 0});
  conv({1, 128, 56, 56, 128, 3, 3, 2, 1});
  conv({1, 128, 28, 28, 512, 1, 1, 1, 0, 1});
  conv({1, 256, 56, 56, 512, 1, 1, 2, 0});
  for (int b = 0; b < 3; ++b) {
    conv({1, 512, 28, 28, 128, 1, 1, 1, 0});
    conv({1, 128, 28, 28, 128, 3, 3, 1, 1});
    conv({1, 128, 28, 28, 512, 1, 1, 1, 0, 1});
  }
  // layer3: 28 -> 14, 6 blocks 256 -> 1024
  conv({1, 512, 28, 28, 256, 1, 1, 1, 0});
  conv({1, 256, 28, 28, 256, 3, 3, 2, 1});
  conv({1, 256, 14, 14, 1024, 1, 1, 1, 0, 1});
  conv({1, 512, 28, 28, 1024, 1, 1, 2, 0});
  for (int b = 0; b < 5; ++b) {
    conv({1, 1024, 14, 14, 256, 1, 1, 1, 0});
    conv({1, 256, 14, 14, 256, 3, 3, 1, 1});
    conv({1, 256, 14, 14, 1024, 1, 1, 1, 0, 1});
  }
  // layer4: 14 -> 7, 3 blocks 512 -> 2048
  conv({1, 1024, 14, 14, 512, 1, 1, 1, 0});
  conv({1, 512, 14, 14, 512, 3, 3, 2, 1});
  conv({1, 512, 7, 7, 2048, 1, 1, 1, 0, 1});
  conv({1, 1024, 14, 14, 2048, 1, 1, 2, 0});
  for (int b = 0; b < 2; ++b) {
    conv({1, 2048, 7, 7, 512, 1, 1, 1, 0});
    conv({1, 512, 7, 7, 512, 3, 3, 1, 1});
    conv({1, 512, 7, 7, 2048, 1, 1, 1, 0, 1});
  }
  l.push_back({"dense", {1, 2048, 1000}});
  return l;
}

TEST(WorkloadTest, ResNet50HasTheNetworksDistinctLayersAndCounts) {
  auto layers = MakeWorkload("resnet50");
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  std::map<std::pair<std::string, std::vector<int64_t>>, int> want;
  for (const auto& [tmpl, shape] : ResNet50ByHand()) ++want[{tmpl, shape}];
  std::map<std::pair<std::string, std::vector<int64_t>>, int> got;
  int convs = 0;
  for (const auto& l : *layers) {
    EXPECT_EQ(got.count({l.template_name, l.shape}), 0u) << l.name << " listed twice";
    got[{l.template_name, l.shape}] = l.count;
    if (l.template_name == "conv2d") convs += l.count;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(convs, 53);
  EXPECT_EQ(layers->size(), want.size());
  // Names say where each layer first occurs.
  EXPECT_EQ(layers->front().name, "conv1");
  EXPECT_EQ(layers->back().name, "fc");
  bool found = false;
  for (const auto& l : *layers) {
    if (l.shape == std::vector<int64_t>{1, 128, 56, 56, 128, 3, 3, 2, 1}) {
      EXPECT_EQ(l.name, "layer2.0.conv2");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(WorkloadTest, AnUnknownWorkloadNamesTheKnownOnes) {
  auto w = MakeWorkload("vgg16");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("resnet50"), std::string::npos);
}

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
