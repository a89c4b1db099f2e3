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
                                   {1, 32, 112, 112, 3, 3, 1, 1, 1, 0, 0},
                                   {1, 32, 112, 112, 3, 3, 1, 1, 3},
                                   {1, 32, 112, 112, 3, 3, 1, 1, 1, 2},
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

// The activation (0 none, 1 relu, 2 relu6) and layout (0 NCHW, 1 blocked) fields: relu on NCHW
// keeps the eight-value key records always had; blocked tensors are [N, C/VW, H, W, VW], the
// weight [C/VW, 1, R, S, VW], the bias padded to whole blocks.
TEST(DepthwiseConv2dTaskTest, ActivationAndLayoutFieldsShapeTheKeyAndArguments) {
  auto target = builder::ParseTarget("x86-avx2");
  ASSERT_TRUE(target.ok());
  auto plain = MakeTask("depthwise_conv2d", {1, 20, 9, 9, 3, 3, 1, 1, 1, 0}, *target);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->id().shape, (std::vector<int64_t>{1, 20, 9, 9, 3, 3, 1, 1}));
  auto six = MakeTask("depthwise_conv2d", {1, 20, 9, 9, 3, 3, 1, 1, 2}, *target);
  ASSERT_TRUE(six.ok()) << six.status().ToString();
  EXPECT_EQ((*six)->id().shape, (std::vector<int64_t>{1, 20, 9, 9, 3, 3, 1, 1, 2}));
  auto blocked = MakeTask("depthwise_conv2d", {1, 20, 9, 9, 3, 3, 2, 1, 1, 1}, *target);
  ASSERT_TRUE(blocked.ok()) << blocked.status().ToString();
  EXPECT_EQ((*blocked)->id().shape, (std::vector<int64_t>{1, 20, 9, 9, 3, 3, 2, 1, 1, 1}));
  const auto args = (*blocked)->args();
  EXPECT_EQ(args[0].shape, (std::vector<int64_t>{1, 3, 9, 9, 8}));
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{3, 1, 3, 3, 8}));
  EXPECT_EQ(args[2].shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(args[3].shape, (std::vector<int64_t>{1, 3, 5, 5, 8}));
  EXPECT_TRUE((*blocked)->space().IsValid((*blocked)->DefaultConfig()));
  EXPECT_NE((*blocked)->Generate((*blocked)->DefaultConfig()).find("#define ACT(v) relu(v)"),
            std::string::npos);
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

// Blocked layouts (the model compiler's between convs): channel counts that fill no block (zero
// lanes past C in data, weight, bias and out), padding 0, 1 and 2 (a zero-bordered copy, or the
// input read in place), strides 1 and 2, 3x3 and 5x5, each activation; also split into tasks,
// with the caller's scratch and on two threads.
TEST_F(DepthwiseOnServerTest, BlockedLayoutsMatchTheReference) {
  CheckTemplate("depthwise_conv2d", {1, 5, 13, 11, 3, 3, 2, 1, 1, 1}, 4);
  CheckTemplate("depthwise_conv2d", {2, 20, 9, 10, 3, 3, 1, 1, 0, 1}, 4);
  CheckTemplate("depthwise_conv2d", {1, 16, 8, 17, 5, 5, 2, 2, 2, 1}, 3);
  CheckTemplate("depthwise_conv2d", {1, 9, 7, 7, 3, 3, 1, 0, 2, 1}, 3);
  CheckSplit("depthwise_conv2d", {2, 12, 9, 9, 3, 3, 1, 1, 1, 1}, 5);
  CheckScratchArg("depthwise_conv2d", {1, 5, 13, 11, 3, 3, 2, 1, 2, 1}, 1);
  if (info_.cores >= 2) CheckThreads("depthwise_conv2d", {2, 24, 20, 20, 3, 3, 1, 1, 1, 1}, 2);
}

// relu6 clamps at 6: on non-negative inputs a 5x5 window's sums lie on both sides of 6 (the data
// is checked to have both), NCHW and blocked (channels that fill whole blocks: every output lane
// is a channel's, above 0).
TEST_F(DepthwiseOnServerTest, Relu6ClampsAtSixAndKeepsWhatIsBelow) {
  CheckClampsAtSix("depthwise_conv2d", {1, 6, 11, 13, 5, 5, 1, 2, 2}, 3);
  CheckClampsAtSix("depthwise_conv2d", {1, 16, 11, 13, 5, 5, 1, 2, 2, 1}, 3);
}

// Two threads on the server's pool: each with its own items and scratch at the same time.
TEST_F(DepthwiseOnServerTest, TwoThreadsMatchTheReference) {
  if (info_.cores < 2) GTEST_SKIP() << "the device has " << info_.cores << " core(s)";
  CheckThreads("depthwise_conv2d", {2, 5, 9, 37, 3, 3, 1, 1}, 2);
}

}  // namespace
}  // namespace crosstune::tuner
