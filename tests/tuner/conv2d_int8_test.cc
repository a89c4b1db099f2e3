// The conv2d_int8 template: shapes and their errors, the packed layout per target (unit), and
// generated code for odd shapes, zero points, saturation and ResNet-like layers, many configs each,
// on a local crosstune-server against the reference (integration).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crosstune/tuner/task.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

TEST(Conv2dInt8TaskTest, RefusesWrongShapesWithTheUsage) {
  auto target = builder::ParseTarget("x86-avx2");
  ASSERT_TRUE(target.ok());
  for (std::vector<int64_t> bad : {std::vector<int64_t>{1, 8, 9, 9, 16, 3, 3, 1},
                                   {1, 8, 9, 9, 16, 3, 3, 1, 1, 0, 0, 1, 0},
                                   {1, 0, 9, 9, 16, 3, 3, 1, 1},
                                   {1, 8, 9, 9, 16, 3, 3, 1, -1},
                                   {1, 8, 2, 2, 16, 5, 5, 1, 1},
                                   {1, 8, 9, 9, 16, 3, 3, 1, 1, 256},
                                   {1, 8, 9, 9, 16, 3, 3, 1, 1, 0, -1},
                                   {1, 8, 9, 9, 16, 3, 3, 1, 1, 0, 0, 2},
                                   {1, 8192, 9, 9, 16, 3, 3, 1, 1}}) {
    auto task = MakeTask("conv2d_int8", bad, *target);
    ASSERT_FALSE(task.ok());
    EXPECT_NE(task.status().message().find(
                  "conv2d_int8 takes --shape N,C,H,W,K,R,S,stride,pad[,in_zero[,out_zero[,relu]]]"),
              std::string::npos)
        << task.status().message();
  }
}

// The weight packs L output channels (the target's int32 lanes) by 4 input channels, zero past K
// and C; bias and scale are padded to whole vectors; data and out are NHWC.
TEST(Conv2dInt8TaskTest, ArgumentsFollowTheTargetsLanes) {
  struct Case {
    const char* target;
    int64_t lanes;
  };
  for (const Case& c : {Case{"x86-avx512", 16}, Case{"x86-avx2", 8}, Case{"aarch64", 4},
                        Case{"armv7-neon", 4}, Case{"riscv64", 4}}) {
    auto target = builder::ParseTarget(c.target);
    ASSERT_TRUE(target.ok()) << c.target;
    auto task = MakeTask("conv2d_int8", {1, 6, 14, 14, 20, 3, 3, 2, 1, 3, 7, 0}, *target);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    const auto args = (*task)->args();
    const int64_t ko = (20 + c.lanes - 1) / c.lanes;
    SCOPED_TRACE(c.target);
    EXPECT_EQ(args[0].shape, (std::vector<int64_t>{1, 14, 14, 6}));
    EXPECT_EQ(args[1].shape, (std::vector<int64_t>{ko, 3, 3, 2, c.lanes, 4}));
    EXPECT_EQ(args[2].shape, (std::vector<int64_t>{ko * c.lanes}));
    EXPECT_EQ(args[4].shape, (std::vector<int64_t>{1, 7, 7, 20}));
    EXPECT_EQ(args[0].dtype.code, kDLUInt);
    EXPECT_EQ(args[1].dtype.code, kDLInt);
    EXPECT_EQ(args[1].dtype.bits, 8);
    EXPECT_EQ(args[2].dtype.bits, 32);
    EXPECT_EQ(args[3].dtype.code, kDLFloat);
    EXPECT_DOUBLE_EQ((*task)->flops(), 2.0 * 7 * 7 * 20 * 9 * 6);
    EXPECT_TRUE((*task)->space().IsValid((*task)->DefaultConfig()));
    EXPECT_EQ((*task)->id().Key(), "conv2d_int8 1,6,14,14,20,3,3,2,1,3,7,0 int8");
    // The kernel checks each tensor's type.
    const std::string source = (*task)->Generate((*task)->DefaultConfig());
    EXPECT_NE(source.find("data must be a compact uint8 tensor of shape [1, 14, 14, 6]"),
              std::string::npos);
    EXPECT_NE(source.find("bias must be a compact int32 tensor"), std::string::npos);
  }
}

// Random values become whole numbers of each argument's type, and go to its bytes and back.
TEST(Conv2dInt8TaskTest, InputsAreWholeNumbersOfTheirTypes) {
  auto target = builder::ParseTarget("x86-avx2");
  ASSERT_TRUE(target.ok());
  auto task = MakeTask("conv2d_int8", {1, 16, 16, 16, 9, 3, 3, 1, 1}, *target);
  ASSERT_TRUE(task.ok());
  const HostArgs in = MakeInputs(**task, 7);
  const auto args = (*task)->args();
  float lo[2] = {1e9f, 1e9f}, hi[2] = {-1e9f, -1e9f};
  for (int a = 0; a < 2; ++a) {
    for (float v : in[a]) {
      EXPECT_EQ(v, std::nearbyint(v));
      lo[a] = std::min(lo[a], v);
      hi[a] = std::max(hi[a], v);
    }
    EXPECT_EQ(ArgValues(args[a], ArgBytes(args[a], in[a])), in[a]);
  }
  EXPECT_EQ(lo[0], 0);
  EXPECT_EQ(hi[0], 255);
  EXPECT_EQ(lo[1], -128);
  EXPECT_EQ(hi[1], 127);
  EXPECT_EQ(ArgBytes(args[0], {-3, 300, 7.4f}), (std::vector<uint8_t>{0, 255, 7}));
}

// Under ASan only the scratch and two-thread cases run (the asan test preset's exclude): the
// others change only the generated kernels, which the builder's clang compiles uninstrumented.
class Conv2dInt8OnServerTest : public testing::TemplateOnServerTest {};

TEST_F(Conv2dInt8OnServerTest, OddShapesMatchTheReference) {
  // Channels not a multiple of 4 (a padded copy), output channels past a vector, strides, pads
  // and rows that end in a narrower tile.
  CheckTemplate("conv2d_int8", {1, 3, 13, 11, 5, 3, 3, 2, 1, 0, 128, 0}, 4);
  CheckTemplate("conv2d_int8", {2, 7, 9, 10, 19, 3, 3, 1, 1, 17, 3, 1}, 4);
  CheckTemplate("conv2d_int8", {1, 8, 10, 7, 33, 1, 1, 1, 0, 0, 128, 0}, 4);
  CheckTemplate("conv2d_int8", {1, 12, 11, 11, 8, 1, 1, 2, 0, 5, 64, 0}, 2);
  CheckTemplate("conv2d_int8", {1, 4, 9, 9, 6, 5, 5, 2, 2, 9, 100, 1}, 2);
}

// The zero points at their ends: padding of 255 or 0, an output clamped to 0 (no ReLU, zero point
// 0: every negative sum), to 255, and to the zero point (ReLU).
TEST_F(Conv2dInt8OnServerTest, ZeroPointsAndSaturationMatchTheReference) {
  CheckTemplate("conv2d_int8", {1, 6, 8, 8, 12, 3, 3, 1, 1, 255, 0, 0}, 2);
  CheckTemplate("conv2d_int8", {1, 6, 8, 8, 12, 3, 3, 1, 1, 0, 255, 0}, 2);
  CheckTemplate("conv2d_int8", {1, 6, 8, 8, 12, 3, 3, 1, 1, 128, 200, 1}, 2);
}

TEST_F(Conv2dInt8OnServerTest, ResNetLayerKindsMatchTheReference) {
  CheckTemplate("conv2d_int8", {1, 64, 14, 14, 64, 3, 3, 1, 1, 0, 0, 1}, 3);
  CheckTemplate("conv2d_int8", {1, 64, 14, 14, 128, 1, 1, 2, 0, 0, 0, 0}, 2);
  CheckTemplate("conv2d_int8", {1, 32, 8, 8, 48, 3, 3, 2, 1, 0, 0, 1}, 2);
}

// The code for targets without int8 products of their own (armv7, riscv64: shifts and multiplies
// of int32 vectors), on this machine as a baseline x86-64 target (4 lanes, no AVX2).
TEST_F(Conv2dInt8OnServerTest, GenericCodeMatchesTheReference) {
  if (target_.Arch() != "x86_64") GTEST_SKIP() << "the server is not an x86-64 machine";
  auto generic = builder::ParseTarget("x86-64");
  ASSERT_TRUE(generic.ok());
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 3, 13, 11, 5, 3, 3, 2, 1, 0, 128, 0},
        {1, 8, 10, 7, 33, 1, 1, 1, 0, 0, 128, 0},
        {1, 6, 8, 8, 12, 3, 3, 1, 1, 255, 0, 0}}) {
    auto task = MakeTask("conv2d_int8", shape, *generic);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    testing::ExpectConfigsMatchReference(*builder_, **task, device_, info_,
                                         testing::ConfigsToCheck(**task, 2, 17));
  }
}

TEST_F(Conv2dInt8OnServerTest, WorkSplitIntoTasksMatchesTheReference) {
  CheckSplit("conv2d_int8", {2, 7, 9, 10, 19, 3, 3, 1, 1, 17, 3, 1}, 3);
  CheckSplit("conv2d_int8", {1, 8, 10, 7, 33, 1, 1, 1, 0}, 64);
}

// As a model's executor runs it: the padded input and the weight sums in the caller's buffer,
// which holds other values when the call begins.
TEST_F(Conv2dInt8OnServerTest, ScratchFromTheCallerMatchesTheReference) {
  CheckScratchArg("conv2d_int8", {1, 3, 13, 11, 5, 3, 3, 2, 1, 0, 128, 0}, 1);
  if (info_.cores >= 2) CheckScratchArg("conv2d_int8", {2, 7, 9, 10, 19, 3, 3, 1, 1, 17, 3}, 2);
}

TEST_F(Conv2dInt8OnServerTest, TwoThreadsMatchTheReference) {
  if (info_.cores < 2) GTEST_SKIP() << "the device has " << info_.cores << " core(s)";
  CheckThreads("conv2d_int8", {2, 7, 9, 10, 19, 3, 3, 1, 1, 17, 3, 1}, 2);
}

}  // namespace
}  // namespace crosstune::tuner
