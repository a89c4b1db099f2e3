// The conv2d template: shapes and their errors, the space and its limits (unit), and generated
// code for many shapes and configs run on a real crosstune-server on loopback against the
// reference (integration).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/tuner/task.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

builder::Target Avx512() {
  auto t = builder::ParseTarget("x86-avx512");
  EXPECT_TRUE(t.ok());
  return *t;
}

TEST(Conv2dTaskTest, RefusesWrongShapesWithTheUsage) {
  for (std::vector<int64_t> bad : {std::vector<int64_t>{1, 64, 56, 56, 64, 3, 3, 1},
                                   {1, 64, 56, 56, 64, 3, 3, 1, 1, 0, 1, 0, 0},
                                   {1, 64, 56, 56, 64, 3, 3, 1, 1, 0, 1, 3},
                                   {1, 64, 56, 56, 64, 3, 3, 1, 1, 0, 1, -1},
                                   {1, 64, 56, 56, 64, 3, 3, 1, 1, 0, 3},
                                   {0, 64, 56, 56, 64, 3, 3, 1, 1},
                                   {1, 64, 56, 56, 64, 3, 3, 0, 1},
                                   {1, 64, 56, 56, 64, 3, 3, 1, -1},
                                   {1, 64, 56, 56, 64, 3, 3, 1, 1, 2},
                                   {1, 4, 2, 2, 8, 5, 5, 1, 1},
                                   {65536, 65536, 65536, 65536, 1, 1, 1, 1, 0}}) {
    auto task = MakeTask("conv2d", bad, Avx512());
    ASSERT_FALSE(task.ok());
    EXPECT_EQ(task.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(task.status().message().find(
                  "conv2d takes --shape N,C,H,W,K,R,S,stride,pad[,residual[,activation[,layout]]]"),
              std::string::npos)
        << task.status().message();
  }
  auto unknown = MakeTask("conv3d", {1, 2, 3}, Avx512());
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("conv2d"), std::string::npos);
}

TEST(Conv2dTaskTest, ArgumentsFlopsAndKeyFollowTheShape) {
  auto plain = MakeTask("conv2d", {1, 64, 56, 56, 64, 3, 3, 1, 1, 0}, Avx512());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->id().Key(), "conv2d 1,64,56,56,64,3,3,1,1 float32");
  auto args = (*plain)->args();
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[3].name, "out");
  EXPECT_TRUE(args[3].output);
  EXPECT_EQ(args[3].shape, (std::vector<int64_t>{1, 64, 56, 56}));
  EXPECT_DOUBLE_EQ((*plain)->flops(), 2.0 * 64 * 56 * 56 * 64 * 9);

  // 7x7 stride 2 pad 3 on 224: 112 x 112 out, and a residual argument before out.
  auto stem = MakeTask("conv2d", {2, 3, 224, 224, 64, 7, 7, 2, 3, 1}, Avx512());
  ASSERT_TRUE(stem.ok());
  args = (*stem)->args();
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[3].name, "residual");
  EXPECT_FALSE(args[3].output);
  EXPECT_EQ(args[4].shape, (std::vector<int64_t>{2, 64, 112, 112}));
}

// A trailing activation (0 none, 1 relu) is a shape field, not a knob: the model compiler gives a
// conv without activation (a ResNet downsample) as "...,0,0". Left out, or 1, it is relu, and the
// key stays the one earlier logs have, so their records still name the task.
TEST(Conv2dTaskTest, ATrailingActivationIsPartOfTheShapeAndTheKey) {
  auto key = [](const std::vector<int64_t>& shape) {
    auto task = MakeTask("conv2d", shape, Avx512());
    EXPECT_TRUE(task.ok()) << task.status().ToString();
    return task.ok() ? (*task)->id().Key() : "";
  };
  EXPECT_EQ(key({1, 64, 56, 56, 256, 1, 1, 1, 0}), "conv2d 1,64,56,56,256,1,1,1,0 float32");
  EXPECT_EQ(key({1, 64, 56, 56, 256, 1, 1, 1, 0, 0}), "conv2d 1,64,56,56,256,1,1,1,0 float32");
  EXPECT_EQ(key({1, 64, 56, 56, 256, 1, 1, 1, 0, 0, 1}), "conv2d 1,64,56,56,256,1,1,1,0 float32");
  EXPECT_EQ(key({1, 64, 56, 56, 256, 1, 1, 1, 0, 1, 1}), "conv2d 1,64,56,56,256,1,1,1,0,1 float32");
  EXPECT_EQ(key({1, 64, 56, 56, 256, 1, 1, 1, 0, 0, 0}),
            "conv2d 1,64,56,56,256,1,1,1,0,0,0 float32");
  EXPECT_EQ(key({1, 64, 56, 56, 256, 1, 1, 1, 0, 1, 0}),
            "conv2d 1,64,56,56,256,1,1,1,0,1,0 float32");
  // The key's sizes make the same task again (resume and export remake tasks from records).
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 8, 9, 9, 16, 3, 3, 1, 1, 0, 0},
                                     {1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 0},
                                     {1, 8, 9, 9, 16, 3, 3, 1, 1, 0, 1}}) {
    auto task = MakeTask("conv2d", shape, Avx512());
    ASSERT_TRUE(task.ok());
    auto again = MakeTask("conv2d", (*task)->id().shape, Avx512());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->id(), (*task)->id());
    EXPECT_EQ((*again)->space().size(), (*task)->space().size());
  }
  // No knob: the space is the relu one's, and the residual argument comes with its own flag.
  auto relu = MakeTask("conv2d", {1, 8, 9, 9, 16, 3, 3, 1, 1}, Avx512());
  auto none = MakeTask("conv2d", {1, 8, 9, 9, 16, 3, 3, 1, 1, 0, 0}, Avx512());
  ASSERT_TRUE(relu.ok() && none.ok());
  EXPECT_EQ((*none)->space().size(), (*relu)->space().size());
  EXPECT_EQ((*none)->args().size(), 4u);
  auto both = MakeTask("conv2d", {1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 0}, Avx512());
  ASSERT_TRUE(both.ok());
  EXPECT_EQ((*both)->args()[3].name, "residual");
}

// Layout 1 (blocked tensors, the weight packed, the bias padded to whole channel blocks) and 2
// (NCHW data and weight, blocked out) are the last shape field and part of the key; CUDA takes
// NCHW only.
TEST(Conv2dTaskTest, BlockedLayoutsAreTheLastShapeFieldAndShapeTheArguments) {
  auto blocked = MakeTask("conv2d", {1, 20, 9, 9, 33, 3, 3, 1, 1, 1, 1, 1}, Avx512());
  ASSERT_TRUE(blocked.ok()) << blocked.status().ToString();
  EXPECT_EQ((*blocked)->id().Key(), "conv2d 1,20,9,9,33,3,3,1,1,1,1,1 float32");
  auto args = (*blocked)->args();
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[0].shape, (std::vector<int64_t>{1, 2, 9, 9, 16}));
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{3, 32, 3, 3, 16}));
  EXPECT_EQ(args[2].shape, (std::vector<int64_t>{48}));
  EXPECT_EQ(args[3].shape, (std::vector<int64_t>{1, 3, 9, 9, 16}));
  EXPECT_EQ(args[4].shape, (std::vector<int64_t>{1, 3, 9, 9, 16}));
  EXPECT_DOUBLE_EQ((*blocked)->flops(), 2.0 * 33 * 81 * 20 * 9);
  // Whole channel blocks a tile: 3 output blocks take 1 or 3 vectors, never 2; no matrix product.
  EXPECT_EQ((*blocked)->space().FindKnob("oc_vectors")->values,
            (std::vector<nlohmann::json>{1, 3}));
  EXPECT_EQ((*blocked)->space().FindKnob("algorithm")->size(), 1u);
  EXPECT_TRUE((*blocked)->space().IsValid((*blocked)->DefaultConfig()));

  auto stem = MakeTask("conv2d", {1, 3, 224, 224, 64, 7, 7, 2, 3, 0, 1, 2}, Avx512());
  ASSERT_TRUE(stem.ok());
  EXPECT_EQ((*stem)->id().Key(), "conv2d 1,3,224,224,64,7,7,2,3,0,1,2 float32");
  args = (*stem)->args();
  EXPECT_EQ(args[0].shape, (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(args[3].shape, (std::vector<int64_t>{1, 4, 112, 112, 16}));
  // NCHW given as 0 is the key it always was.
  auto plain = MakeTask("conv2d", {1, 64, 56, 56, 64, 3, 3, 1, 1, 0, 1, 0}, Avx512());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->id().Key(), "conv2d 1,64,56,56,64,3,3,1,1 float32");

  auto cuda = builder::ParseTarget("cuda -arch=sm_80");
  ASSERT_TRUE(cuda.ok());
  auto on_gpu = MakeTask("conv2d", {1, 16, 8, 8, 16, 3, 3, 1, 1, 0, 1, 1}, *cuda);
  ASSERT_FALSE(on_gpu.ok());
  EXPECT_NE(on_gpu.status().message().find("blocked layouts are for CPU targets"),
            std::string::npos)
      << on_gpu.status().message();
}

TEST(Conv2dTaskTest, DefaultConfigIsValidAndFeaturesHaveOneLength) {
  for (std::string target : {"x86-avx512", "x86-avx2", "x86-64", "aarch64", "armv7-neon"}) {
    auto t = builder::ParseTarget(target);
    ASSERT_TRUE(t.ok()) << target;
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 64, 56, 56, 64, 3, 3, 1, 1},
                                       {1, 3, 224, 224, 64, 7, 7, 2, 3},
                                       {1, 1, 1, 1, 1, 1, 1, 1, 0},
                                       {1, 64, 56, 56, 64, 3, 3, 1, 1, 0, 1, 1},
                                       {1, 256, 14, 14, 1024, 1, 1, 1, 0, 1, 1, 1},
                                       {1, 3, 224, 224, 64, 7, 7, 2, 3, 0, 1, 2}}) {
      auto task = MakeTask("conv2d", shape, *t);
      ASSERT_TRUE(task.ok()) << task.status().ToString();
      Config d = (*task)->DefaultConfig();
      EXPECT_TRUE((*task)->space().IsValid(d)) << target << " " << d.ToString();
      const size_t len = (*task)->Features(d).size();
      UniqueSampler s((*task)->space(), 3);
      for (int i = 0; i < 20; ++i) {
        auto next = s.Next();
        if (!next) break;
        EXPECT_EQ((*task)->Features((*task)->space().Get(*next)).size(), len);
      }
    }
  }
  // On AVX-512 the 56-wide 3x3 layer gets 14-pixel tiles of two 16-channel vectors.
  auto task = MakeTask("conv2d", {1, 64, 56, 56, 64, 3, 3, 1, 1}, Avx512());
  ASSERT_TRUE(task.ok());
  Config d = (*task)->DefaultConfig();
  EXPECT_EQ(d.Int("ow_tile"), 14);
  EXPECT_EQ(d.Int("oc_vectors"), 2);
  EXPECT_EQ(d.Int("oh_rows"), 1);
  EXPECT_EQ(d.Int("unroll_c"), 1);
  // A row of 7 pixels is narrower than that tile: items of 4 rows, the channel loop unrolled 4
  // times, in blocked layouts (also the 7x7 output of a stride-2 layer); NCHW keeps 1 and 1.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 512, 7, 7, 512, 3, 3, 1, 1, 0, 1, 1},
                                     {1, 512, 14, 14, 512, 3, 3, 2, 1, 0, 1, 1},
                                     {1, 512, 7, 7, 2048, 1, 1, 1, 0, 1, 1, 1}}) {
    auto narrow = MakeTask("conv2d", shape, Avx512());
    ASSERT_TRUE(narrow.ok());
    Config n = (*narrow)->DefaultConfig();
    SCOPED_TRACE((*narrow)->id().Key());
    EXPECT_EQ(n.Int("ow_tile"), 7);
    EXPECT_EQ(n.Int("oh_rows"), 4);
    EXPECT_EQ(n.Int("unroll_c"), 4);
  }
  auto nchw = MakeTask("conv2d", {1, 512, 7, 7, 512, 3, 3, 1, 1}, Avx512());
  ASSERT_TRUE(nchw.ok());
  EXPECT_EQ((*nchw)->DefaultConfig().Int("oh_rows"), 1);
  EXPECT_EQ((*nchw)->DefaultConfig().Int("unroll_c"), 1);
  // A weight of over 4 MiB is read in memory order (the taps inside the channel loop), in any
  // layout; smaller ones keep the taps outside, and a 1x1 filter has no taps to move.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 512, 7, 7, 512, 3, 3, 1, 1, 0, 1, 1},
                                     {1, 512, 14, 14, 512, 3, 3, 2, 1, 0, 1, 1},
                                     {1, 512, 7, 7, 512, 3, 3, 1, 1}}) {
    auto big = MakeTask("conv2d", shape, Avx512());
    ASSERT_TRUE(big.ok());
    EXPECT_EQ((*big)->DefaultConfig().Int("taps_inner"), 1) << (*big)->id().Key();
  }
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 256, 14, 14, 256, 3, 3, 1, 1, 0, 1, 1},
                                     {1, 256, 28, 28, 256, 3, 3, 2, 1, 0, 1, 1},
                                     {1, 512, 7, 7, 2048, 1, 1, 1, 0, 1, 1, 1}}) {
    auto small = MakeTask("conv2d", shape, Avx512());
    ASSERT_TRUE(small.ok());
    EXPECT_EQ((*small)->DefaultConfig().Int("taps_inner"), 0) << (*small)->id().Key();
  }
  auto one_by_one = MakeTask("conv2d", {1, 512, 7, 7, 2048, 1, 1, 1, 0, 1, 1, 1}, Avx512());
  ASSERT_TRUE(one_by_one.ok());
  EXPECT_EQ((*one_by_one)->space().FindKnob("taps_inner")->size(), 1u);
}

// A record made before the taps_inner knob existed (a tuning of ResNet-50 on an AVX-512 AMD
// EPYC, its target and config as the log holds them) still names its config, and the code made
// for it now is the code it measured: the same generator hash, so resume and compile keep it.
TEST(Conv2dTaskTest, RecordsMadeBeforeTheTapsKnobStillNameTheirConfigAndCode) {
  auto target = builder::ParseTarget(
      "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+adx,+aes,+avx,+avx2,+avx512bf16,"
      "+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512ifma,+avx512vbmi,"
      "+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+avxvnni,+bmi,+bmi2,+cx16,+f16c,+fma,"
      "+gfni,+lzcnt,+movbe,+pclmul,+popcnt,+sha,+sse3,+sse4.1,+sse4.2,+ssse3,+vaes,+vpclmulqdq,"
      "+xsave");
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto task = MakeTask("conv2d", {1, 512, 7, 7, 512, 3, 3, 1, 1, 0, 1, 1}, *target);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  auto config = (*task)->space().FromJson(nlohmann::json::parse(
      R"({"algorithm": "direct", "gemm_chunk": [72, 64], "gemm_pack": 1, "gemm_rows": 1,
          "gemm_vectors": 1, "ic_block": 16, "oc_vectors": 2, "oh_rows": 2,
          "order": ["ow", "cb"], "ow_tile": 7, "unroll_c": 2})"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->index(), 181u);
  EXPECT_EQ(config->Int("taps_inner"), 0);
  EXPECT_EQ(GeneratorHash(**task, *config), "a7400c4b0775c8f6");
  // The same config with the taps inside is another point and other code.
  nlohmann::json inside = config->ToJson();
  inside["taps_inner"] = 1;
  auto other = (*task)->space().FromJson(inside);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->index(), config->index());
  EXPECT_NE(GeneratorHash(**task, *other), "a7400c4b0775c8f6");
}

TEST(Conv2dTaskTest, RefusesScratchOverAQuarterOfTheDeviceMemory) {
  auto task = MakeTask("conv2d", {8, 256, 224, 224, 64, 3, 3, 1, 1}, Avx512());
  ASSERT_TRUE(task.ok());
  msg::DeviceInfo small;
  small.memory_bytes = uint64_t{64} << 20;
  Status s = (*task)->CheckLimits((*task)->DefaultConfig(), small);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("quarter of the device's memory"), std::string::npos) << s.message();
  msg::DeviceInfo big;
  big.memory_bytes = uint64_t{64} << 30;
  EXPECT_TRUE((*task)->CheckLimits((*task)->DefaultConfig(), big).ok());
}

// Under ASan only GemmAlgorithmHandlesPaddingStridesAndRemainders and
// TapsInsideTheChannelLoopMatchTheReference run (CMakePresets.json, the asan test preset's
// exclude): the rest took about 220 s of the asan run's 870, in the builder's clang and in the
// kernels it compiles at run time, neither of them instrumented, while their host code (the
// generator, BuildCandidates, the runner, the server's thread pool, scratch from the caller, a
// split into tasks) is the same as the kept two's and the dense and depthwise tests'.
class Conv2dOnServerTest : public testing::TemplateOnServerTest {
 protected:
  void Check(const std::vector<int64_t>& shape, int samples) {
    CheckTemplate("conv2d", shape, samples);
  }
};

// Sizes that fill no tile: odd widths and heights, channel counts that fill no vector or block.
TEST_F(Conv2dOnServerTest, OddShapesMatchTheReference) {
  Check({1, 3, 13, 11, 5, 3, 3, 2, 1}, 6);
  Check({1, 16, 9, 7, 20, 1, 1, 1, 0}, 6);
  Check({2, 17, 10, 12, 33, 3, 3, 1, 1}, 4);
}

TEST_F(Conv2dOnServerTest, ResidualIsAddedBeforeTheRelu) {
  Check({1, 8, 11, 9, 24, 3, 3, 1, 1, 1}, 4);
  Check({2, 16, 8, 8, 16, 1, 1, 2, 0, 1}, 2);
}

// With inputs of both signs about half the sums are negative, and ReLU makes them (and NaN) 0:
// with non-negative inputs every output is above 0, so each one shows whether it was computed.
TEST_F(Conv2dOnServerTest, ReluOutputsMatchTheReferenceWhereAllArePositive) {
  CheckPositiveOutputs("conv2d", {1, 3, 13, 11, 5, 3, 3, 2, 1}, 6);
  CheckPositiveOutputs("conv2d", {2, 17, 10, 12, 33, 3, 3, 1, 1}, 4);
  CheckPositiveOutputs("conv2d", {1, 8, 11, 9, 24, 3, 3, 1, 1, 1}, 4);
}

// Activation 0: negative sums are stored as they are (half the outputs here), by the direct and
// the gemm algorithm, the latter reading 1x1 panels in place.
TEST_F(Conv2dOnServerTest, WithoutActivationNegativeOutputsAreKept) {
  Check({1, 8, 11, 9, 24, 3, 3, 1, 1, 0, 0}, 4);
  Check({1, 8, 11, 9, 24, 3, 3, 1, 1, 1, 0}, 4);
  Check({1, 16, 9, 7, 20, 1, 1, 1, 0, 0, 0}, 4);
}

// Activation 2, relu6 (MobileNet's Clip(0, 6)): on non-negative inputs the sums of 20 products
// lie on both sides of 6 (the data is checked to have both): NCHW (the gemm and the direct
// algorithm) and blocked.
TEST_F(Conv2dOnServerTest, Relu6ClampsAtSixAndKeepsWhatIsBelow) {
  CheckClampsAtSix("conv2d", {1, 20, 9, 7, 20, 1, 1, 1, 0, 0, 2}, 4);
  CheckClampsAtSix("conv2d", {1, 20, 9, 9, 16, 1, 1, 1, 0, 0, 2, 1}, 4);
}

// The kinds of layer ResNet-50 has, at smaller sizes: 7x7 s2 p3, 3x3 s2 p1, 1x1 s2 p0, 1x1 s1 p0
// (full pixel panels read in place and a partial one copied).
TEST_F(Conv2dOnServerTest, ResNetLayerKindsMatchTheReference) {
  Check({1, 3, 23, 21, 16, 7, 7, 2, 3}, 3);
  Check({1, 32, 15, 15, 32, 3, 3, 2, 1}, 3);
  Check({1, 64, 14, 14, 64, 1, 1, 2, 0}, 3);
  Check({1, 32, 14, 14, 48, 1, 1, 1, 0}, 3);
}

// Work split into several tasks (here run one after another): each task's range of items and
// its own row buffers and panels. 64 tasks is more than some layers have items.
TEST_F(Conv2dOnServerTest, WorkSplitIntoTasksMatchesTheReference) {
  CheckSplit("conv2d", {2, 9, 11, 13, 20, 3, 3, 1, 1, 1}, 3);
  CheckSplit("conv2d", {1, 16, 9, 7, 20, 1, 1, 1, 0}, 5);
  CheckSplit("conv2d", {1, 3, 13, 11, 5, 3, 3, 2, 1}, 64);
}

// The implicit matrix product on layers with padding, strides and a residual: im2col panels
// with zeros over the padding, panels that end past the last pixel, channel rows past K, the
// reduction in one chunk or several.
TEST_F(Conv2dOnServerTest, GemmAlgorithmHandlesPaddingStridesAndRemainders) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 5, 17, 19, 33, 7, 7, 2, 3},
                                     {2, 9, 11, 13, 20, 3, 3, 1, 1, 1},
                                     {1, 12, 9, 9, 7, 3, 3, 2, 1}}) {
    auto task = MakeTask("conv2d", shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    const ConfigSpace& space = (*task)->space();
    std::vector<uint64_t> indices;
    const Knob* chunks = space.FindKnob("gemm_chunk");
    ASSERT_NE(chunks, nullptr);
    // (rows, vectors, unroll, chunk: the first candidate, several chunks, or none)
    for (auto [rows, vectors, unroll, chunk] : {std::tuple{1, 1, 1, size_t{0}},
                                                {3, 2, 4, chunks->size() - 1},
                                                {7, 4, 1, size_t{0}},
                                                {4, 3, 8, chunks->size() - 1}}) {
      auto c = space.FromJson({{"ow_tile", 1},
                               {"oc_vectors", 1},
                               {"ic_block", space.FindKnob("ic_block")->values.front()},
                               {"order", {"ow", "cb"}},
                               {"oh_rows", 1},
                               {"unroll_c", unroll},
                               {"taps_inner", 0},
                               {"algorithm", "gemm"},
                               {"gemm_rows", rows},
                               {"gemm_vectors", vectors},
                               {"gemm_pack", 1},
                               {"gemm_chunk", chunks->values[chunk]}});
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      if (space.IsValid(*c)) indices.push_back(c->index());
    }
    ASSERT_GE(indices.size(), 3u);
    testing::ExpectConfigsMatchReference(*builder_, **task, device_, info_, indices);
  }
}

// The filter's taps inside the channel loop (the weight read in memory order): NCHW and blocked
// layouts, padding, strides, the 7x7 first layer, tiles with a remainder, several channel
// vectors and unrolled channel loops.
TEST_F(Conv2dOnServerTest, TapsInsideTheChannelLoopMatchTheReference) {
  size_t checked = 0;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 3, 13, 11, 5, 3, 3, 2, 1},
                                     {2, 17, 10, 12, 33, 3, 3, 1, 1, 1},
                                     {1, 20, 9, 9, 33, 3, 3, 1, 1, 1, 1, 1},
                                     {1, 32, 7, 7, 64, 3, 3, 1, 1, 0, 1, 1},
                                     {1, 3, 23, 21, 20, 7, 7, 2, 3, 0, 1, 2}}) {
    auto task = MakeTask("conv2d", shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    const ConfigSpace& space = (*task)->space();
    std::vector<uint64_t> indices;
    for (auto [tile, vectors, unroll] : {std::tuple{1, 1, 1}, {3, 2, 2}, {7, 1, 4}, {4, 2, 1}}) {
      nlohmann::json values = (*task)->DefaultConfig().ToJson();
      values["ow_tile"] = tile;
      values["oc_vectors"] = vectors;
      values["unroll_c"] = unroll;
      values["taps_inner"] = 1;
      auto c = space.FromJson(values);
      if (c.ok() && space.IsValid(*c)) indices.push_back(c->index());
    }
    SCOPED_TRACE((*task)->id().Key());
    ASSERT_FALSE(indices.empty());
    checked += indices.size();
    testing::ExpectConfigsMatchReference(*builder_, **task, device_, info_, indices);
  }
  EXPECT_GE(checked, 12u);
}

// As a model's executor runs it: scratch from the caller, holding other values when the call
// begins. Padded layers (the packed input's zero border), channel counts that fill no block (the
// zero channels past C in the input and the packed weights), 1x1 panels, one thread and two.
TEST_F(Conv2dOnServerTest, ScratchFromTheCallerMatchesTheReference) {
  CheckScratchArg("conv2d", {1, 3, 13, 11, 5, 3, 3, 2, 1}, 1);
  CheckScratchArg("conv2d", {2, 17, 10, 12, 33, 3, 3, 1, 1, 1}, 1);
  CheckScratchArg("conv2d", {1, 16, 9, 7, 20, 1, 1, 1, 0}, 1);
  if (info_.cores >= 2) CheckScratchArg("conv2d", {1, 5, 17, 19, 33, 7, 7, 2, 3}, 2);
}

// Blocked layouts: channel counts that fill no block (zero lanes past C and K in the tensors and
// the packed weight, the padded bias), padded layers (a zero-bordered copy of the blocked rows)
// and unpadded ones (read in place), strides, residuals, no activation; NCHW data into blocked
// out (the network's first layer). Also split into tasks and with the caller's scratch.
TEST_F(Conv2dOnServerTest, BlockedLayoutsMatchTheReference) {
  Check({1, 20, 9, 9, 33, 3, 3, 1, 1, 1, 1, 1}, 4);
  Check({2, 32, 14, 14, 48, 1, 1, 1, 0, 0, 0, 1}, 4);
  Check({1, 16, 15, 15, 32, 1, 1, 2, 0, 1, 0, 1}, 3);
  Check({1, 16, 15, 13, 16, 3, 3, 2, 1, 0, 1, 1}, 3);
  Check({1, 3, 23, 21, 20, 7, 7, 2, 3, 0, 1, 2}, 4);
  Check({1, 5, 11, 9, 16, 3, 3, 1, 1, 1, 0, 2}, 3);
  Check({1, 3, 13, 11, 33, 3, 3, 2, 1, 0, 1, 2}, 4);  // a tile's second block past K
  CheckSplit("conv2d", {2, 17, 11, 13, 20, 3, 3, 1, 1, 1, 1, 1}, 3);
  CheckSplit("conv2d", {1, 3, 13, 11, 5, 3, 3, 2, 1, 0, 1, 2}, 7);
  CheckScratchArg("conv2d", {1, 20, 9, 9, 33, 3, 3, 1, 1, 1, 1, 1}, 1);
  CheckScratchArg("conv2d", {1, 32, 8, 8, 32, 1, 1, 1, 0, 0, 1, 1}, 1);
  CheckScratchArg("conv2d", {1, 3, 13, 11, 5, 3, 3, 2, 1, 0, 1, 2}, 1);
  if (info_.cores >= 2) CheckThreads("conv2d", {1, 32, 30, 30, 48, 3, 3, 1, 1, 1, 1, 1}, 2);
}

// Two threads on the server's pool: each with its own items and scratch at the same time.
TEST_F(Conv2dOnServerTest, TwoThreadsMatchTheReference) {
  if (info_.cores < 2) GTEST_SKIP() << "the device has " << info_.cores << " core(s)";
  // Long enough for the two threads to overlap (a race on shared scratch shows).
  CheckThreads("conv2d", {2, 32, 30, 30, 48, 3, 3, 1, 1, 1}, 2);
  CheckThreads("conv2d", {1, 16, 9, 7, 20, 1, 1, 1, 0}, 2);
}

}  // namespace
}  // namespace crosstune::tuner
