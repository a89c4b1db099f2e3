// The depthwise_conv2d template: shapes and their errors (unit), and generated code for odd and
// MobileNet-like shapes and many configs on a local crosstune-server against the reference
// (integration).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crosstune/tuner/task.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

TEST(DepthwiseConv2dTaskTest, RefusesWrongShapesWithTheUsage) {
  auto target = builder::ParseTarget("aarch64");
  ASSERT_TRUE(target.ok());
  for (std::vector<int64_t> bad : {std::vector<int64_t>{1, 32, 112, 112, 3, 3, 1},
                                   {1, 32, 112, 112, 3, 3, 1, 1, 0},
                                   {1, 0, 112, 112, 3, 3, 1, 1},
                                   {1, 32, 112, 112, 3, 3, 0, 1},
                                   {1, 8, 2, 2, 5, 5, 1, 1}}) {
    auto task = MakeTask("depthwise_conv2d", bad, *target);
    ASSERT_FALSE(task.ok());
    EXPECT_NE(task.status().message().find("depthwise_conv2d takes --shape N,C,H,W,R,S,stride,pad"),
              std::string::npos)
        << task.status().message();
  }
  auto ok = MakeTask("depthwise_conv2d", {1, 32, 112, 112, 3, 3, 2, 1}, *target);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->args()[3].shape, (std::vector<int64_t>{1, 32, 56, 56}));
  EXPECT_EQ((*ok)->args()[1].shape, (std::vector<int64_t>{32, 1, 3, 3}));
  EXPECT_DOUBLE_EQ((*ok)->flops(), 2.0 * 32 * 56 * 56 * 9);
  EXPECT_TRUE((*ok)->space().IsValid((*ok)->DefaultConfig()));
}

// Under ASan only the split, scratch and two-thread cases run (the asan test preset's exclude): the
// shapes of the others change the generated kernels, which the builder's clang compiles at run
// time uninstrumented, not the host code.
class DepthwiseOnServerTest : public testing::TemplateOnServerTest {};

TEST_F(DepthwiseOnServerTest, OddShapesMatchTheReference) {
  CheckTemplate("depthwise_conv2d", {1, 3, 13, 11, 3, 3, 2, 1}, 4);
  CheckTemplate("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 4);
  CheckTemplate("depthwise_conv2d", {1, 4, 10, 7, 5, 5, 3, 2}, 4);
  CheckTemplate("depthwise_conv2d", {1, 2, 6, 6, 1, 1, 1, 0}, 2);
  // Stride 2 over rows wide enough for pairs of vectors, with odd, no and even padding.
  CheckTemplate("depthwise_conv2d", {1, 3, 9, 45, 3, 3, 2, 1}, 2);
  CheckTemplate("depthwise_conv2d", {1, 2, 7, 70, 3, 3, 2, 0}, 2);
  CheckTemplate("depthwise_conv2d", {1, 2, 8, 67, 5, 5, 2, 2}, 2);
}

// Non-negative inputs, so no output is 0 after the ReLU (as NaN and negative sums would be).
TEST_F(DepthwiseOnServerTest, ReluOutputsMatchTheReferenceWhereAllArePositive) {
  CheckPositiveOutputs("depthwise_conv2d", {1, 3, 13, 11, 3, 3, 2, 1}, 4);
  CheckPositiveOutputs("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 4);
}

TEST_F(DepthwiseOnServerTest, MobileNetLayerKindsMatchTheReference) {
  CheckTemplate("depthwise_conv2d", {1, 32, 28, 28, 3, 3, 1, 1}, 3);
  CheckTemplate("depthwise_conv2d", {1, 16, 28, 28, 3, 3, 2, 1}, 3);
  CheckTemplate("depthwise_conv2d", {1, 8, 7, 7, 3, 3, 1, 1}, 2);
}

TEST_F(DepthwiseOnServerTest, WorkSplitIntoTasksMatchesTheReference) {
  CheckSplit("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 3);
  CheckSplit("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 64);
}

// As a model's executor runs it: the plane buffers from the caller, holding other values when
// the call begins (their padding and overrun columns must be zero), with odd and even padding.
TEST_F(DepthwiseOnServerTest, ScratchFromTheCallerMatchesTheReference) {
  CheckScratchArg("depthwise_conv2d", {1, 3, 13, 11, 3, 3, 2, 1}, 1);
  CheckScratchArg("depthwise_conv2d", {1, 2, 8, 67, 5, 5, 2, 2}, 1);
  if (info_.cores >= 2) CheckScratchArg("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 2);
}

// Two threads on the server's pool: each with its own items and scratch at the same time.
TEST_F(DepthwiseOnServerTest, TwoThreadsMatchTheReference) {
  if (info_.cores < 2) GTEST_SKIP() << "the device has " << info_.cores << " core(s)";
  CheckThreads("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 2);
}

}  // namespace
}  // namespace crosstune::tuner
