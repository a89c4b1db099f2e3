// The template table (templates/registry.cc) and what every template gets from it: MakeTask's
// checks, the generated kernel entry and module table, and the size limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/tuner/matmul_layout.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

builder::Target Host() {
  auto t = builder::ParseTarget("x86-avx2");
  EXPECT_TRUE(t.ok());
  return t.ok() ? *t : builder::Target{};
}

TEST(TemplateRegistryTest, EveryTemplateHasARowWithItsShapeSyntax) {
  const auto& all = Templates();
  ASSERT_EQ(all.size(), TemplateNames().size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].name, TemplateNames()[i]);
    EXPECT_FALSE(all[i].shape.empty()) << all[i].name;
    EXPECT_FALSE(all[i].help.empty()) << all[i].name;
    // A shape it cannot take is refused with the row's syntax.
    auto task = MakeTask(all[i].name, {}, Host());
    ASSERT_FALSE(task.ok()) << all[i].name;
    EXPECT_EQ(task.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(task.status().message().rfind(all[i].name + " takes --shape " + all[i].shape, 0), 0u)
        << task.status().message();
  }
  auto unknown = MakeTask("winograd", {1}, Host());
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("matmul, conv2d, depthwise_conv2d, dense"),
            std::string::npos)
      << unknown.status().message();
  EXPECT_FALSE(MakeTask("matmul", {8, 8, 8}, Host(), {.threads = 0}).ok());
}

// Before, matmul took 2^20 in every dimension, and the tuner then filled a double-precision host
// reference of any size before measuring anything.
TEST(TemplateRegistryTest, MatmulRefusesTensorsOverTheSizeLimit) {
  auto task = MakeTask("matmul", {1 << 20, 1 << 20, 16}, Host());
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(task.status().message(),
            "matmul takes --shape M,N,K[,groups[,packed_b]]: C would have over 2^32 elements");
  EXPECT_TRUE(MakeTask("matmul", {1 << 16, 1 << 16, 16}, Host()).ok());
  // The groups multiply A and C.
  auto groups = MakeTask("matmul", {1 << 12, 1 << 12, 16, 1 << 9}, Host());
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.status().message().find("would have over 2^32 elements"), std::string::npos);
}

// matmul's groups field: A and C of any leading dimensions (their product checked, the last one
// exact), B 2-D for one group and of G matrices for more; the 3-field shape keeps its exact 2-D
// checks (and so its code). CUDA takes no groups.
TEST(TemplateRegistryTest, MatmulGroupsTakeTensorsOfAnyLeadingDimensions) {
  auto one = MakeTask("matmul", {128, 3072, 768, 1}, Host());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto args = (*one)->args();
  EXPECT_EQ(args[0].shape, (std::vector<int64_t>{128, 768}));
  EXPECT_EQ(args[0].flat_tail, 1);
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{768, 3072}));
  EXPECT_EQ(args[1].flat_tail, 0);
  EXPECT_EQ(args[2].flat_tail, 1);
  std::string source = (*one)->Generate((*one)->DefaultConfig());
  EXPECT_EQ(Count(source, "static int check_flat_tensor("), 1u);
  EXPECT_EQ(Count(source, "check_flat_tensor(&args["), 2u);
  EXPECT_EQ(Count(source,
                  "A must be a compact float32 tensor of shape [..., 768] whose leading "
                  "dimensions multiply to 128"),
            1u);
  EXPECT_EQ(Count(source, "run_one"), 0u) << "one group: the one product's code";
  auto many = MakeTask("matmul", {128, 64, 128, 12}, Host());
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  args = (*many)->args();
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{12, 128, 64}));
  EXPECT_EQ(args[1].flat_tail, 2);
  EXPECT_DOUBLE_EQ((*many)->flops(), 2.0 * 12 * 128 * 64 * 128);
  source = (*many)->Generate((*many)->DefaultConfig());
  EXPECT_EQ(Count(source, "check_flat_tensor(&args["), 3u);
  EXPECT_GT(Count(source, "run_one"), 0u);
  auto plain = MakeTask("matmul", {128, 64, 128}, Host());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(Count((*plain)->Generate((*plain)->DefaultConfig()), "check_flat_tensor"), 0u);
  EXPECT_NE((*plain)->id().Key(), (*one)->id().Key());
  auto cuda = builder::ParseTarget("cuda -arch=sm_80");
  ASSERT_TRUE(cuda.ok());
  auto refused = MakeTask("matmul", {128, 64, 128, 12}, *cuda);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("groups are for CPU targets"), std::string::npos);
  EXPECT_FALSE(MakeTask("matmul", {128, 64, 128, 0}, Host()).ok());
  // A fifth field 1 (one group only): B in column panels one vector wide (matmul_layout.h), read
  // in place, nothing packed per call; no other value (four fields are the unpacked product). CUDA
  // takes neither.
  auto packed = MakeTask("matmul", {128, 64, 128, 1, 1}, Host());
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  const int64_t vw = (*packed)->args()[1].shape[2];
  EXPECT_EQ((*packed)->args()[1].shape, (std::vector<int64_t>{MatmulPanels(64, vw), 128, vw}));
  source = (*packed)->Generate((*packed)->DefaultConfig());
  EXPECT_EQ(Count(source, "#define B_PACKED 1"), 1u);
  EXPECT_NE((*packed)->id().Key(), (*one)->id().Key());
  EXPECT_FALSE(MakeTask("matmul", {128, 64, 128, 1, 0}, Host()).ok());
  EXPECT_FALSE(MakeTask("matmul", {128, 64, 128, 2, 1}, Host()).ok());
  EXPECT_FALSE(MakeTask("matmul", {128, 64, 128, 1, 2}, Host()).ok());
  EXPECT_FALSE(MakeTask("matmul", {128, 64, 128, 1, 1}, *cuda).ok());
}

TEST(TemplateRegistryTest, MatmulRefusesMoreThreadsThanTheDeviceHas) {
  auto task = MakeTask("matmul", {64, 64, 64}, Host(), {.threads = 4});
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  msg::DeviceInfo device;
  device.cores = 2;
  Status s = (*task)->CheckLimits((*task)->DefaultConfig(), device);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("4 threads; the device has 2 cores"), std::string::npos)
      << s.ToString();
  device.cores = 4;
  EXPECT_TRUE((*task)->CheckLimits((*task)->DefaultConfig(), device).ok());
}

// Every CPU template's kernel has one entry, generated from its args(): the count, a check of
// every tensor against its shape, the module table with one 't' per tensor; and one prelude.
TEST(TemplateRegistryTest, EveryCpuKernelHasTheEntryItsArgsSay) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> tasks = {
      {"matmul", {33, 17, 9}},
      {"conv2d", {1, 8, 9, 9, 16, 3, 3, 1, 1, 1}},
      {"conv2d", {1, 8, 9, 9, 16, 1, 1, 1, 0}},
      {"depthwise_conv2d", {1, 8, 9, 9, 3, 3, 2, 1}},
      {"dense", {2, 37, 13}},
      {"conv2d_int8", {1, 6, 9, 9, 16, 3, 3, 1, 1, 3, 4, 0}}};
  for (const auto& [name, shape] : tasks) {
    auto task = MakeTask(name, shape, Host());
    ASSERT_TRUE(task.ok()) << name << ": " << task.status().ToString();
    const auto args = (*task)->args();
    const std::string fn = (*task)->function();
    const std::string source = (*task)->Generate((*task)->DefaultConfig());
    SCOPED_TRACE(name);
    EXPECT_EQ(Count(source, "static int32_t " + fn + "(const ct_arg* args, int32_t num_args)"), 1u);
    EXPECT_EQ(Count(source, "if (num_args != " + std::to_string(args.size()) + ")"), 1u);
    // Float32 kernels check with the prelude's check_tensor; one with other types with
    // check_typed_tensor, each tensor against its own type.
    const bool typed = name == "conv2d_int8";
    EXPECT_EQ(Count(source, "check_tensor(&args["), typed ? 0u : args.size());
    EXPECT_EQ(Count(source, "check_typed_tensor(&args["), typed ? args.size() : 0u);
    EXPECT_EQ(Count(source, "static int check_typed_tensor("), typed ? 1u : 0u);
    for (const auto& a : args) {
      std::string dims;
      for (int64_t d : a.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      const std::string type = a.dtype.code == kDLUInt  ? "uint8"
                               : a.dtype.code == kDLInt ? (a.dtype.bits == 8 ? "int8" : "int32")
                                                        : "float32";
      EXPECT_EQ(
          Count(source, a.name + " must be a compact " + type + " tensor of shape [" + dims + "]"),
          1u)
          << a.name;
    }
    EXPECT_EQ(Count(source, "{\"" + fn + "\", " + fn + ", SIGNATURE}"), 1u);
    EXPECT_EQ(Count(source, "#define SIGNATURE \"" + std::string(args.size(), 't') + "\""), 1u);
    // With working memory: one more tensor when the caller gives it (CT_SCRATCH_ARG).
    const bool scratch = (*task)->ScratchBytes((*task)->DefaultConfig()) > 0;
    EXPECT_EQ(name == "conv2d" || name == "depthwise_conv2d" || name == "conv2d_int8", scratch);
    EXPECT_EQ(Count(source, "#define SIGNATURE \"" + std::string(args.size() + 1, 't') + "\""),
              scratch ? 1u : 0u);
    EXPECT_EQ(Count(source, "if (num_args != " + std::to_string(args.size()) + " + 1)"),
              scratch ? 1u : 0u);
    EXPECT_EQ(Count(source, "CT_DEFINE_MODULE("), 1u);
    EXPECT_EQ(Count(source, "typedef float vf "), 1u) << "one prelude";
    EXPECT_EQ(Count(source, "} kernel_args;"), 1u);
  }
}

// A record names its task by key and its config by index and knob values; resume, export and
// `log best` remake the task from the key's sizes. These are the tasks and spaces the templates
// made before they were rows of the table (taken from the code before the change, run with this
// test): the same key, the same numbering and validity, the same default, so earlier logs still
// resume and export.
TEST(TemplateRegistryTest, EarlierRecordsStillNameTheirTaskAndConfig) {
  struct Case {
    std::string target, name;
    std::vector<int64_t> shape;
    std::string key;
    uint64_t size, default_index, valid_in_first;
    std::string middle;  // the config at size / 2, as a record's values
  };
  const std::vector<Case> cases = {
      {"x86-avx2",
       "matmul",
       {512, 512, 512},
       "matmul 512,512,512 float32 threads=2",
       645120,
       137175,
       11000,
       R"({"mr":1,"nv":1,"order":["jr","ir"],"pack_a":0,"prefetch":8,"tile_k":[32,16],)"
       R"("tile_m":[22,24],"tile_n":[8,64],"unroll_k":1})"},
      {"x86-avx512",
       "conv2d",
       {1, 64, 56, 56, 64, 3, 3, 1, 1},
       "conv2d 1,64,56,56,64,3,3,1,1 float32",
       11289600,
       523,
       7723,
       R"({"algorithm":"direct","gemm_chunk":[3,256],"gemm_pack":1,"gemm_rows":1,)"
       R"("gemm_vectors":3,"ic_block":1,"oc_vectors":1,"oh_rows":1,"order":["ow","cb"],)"
       R"("ow_tile":1,"unroll_c":1})"},
      {"x86-avx512",
       "conv2d",
       {1, 256, 56, 56, 64, 1, 1, 1, 0, 1},
       "conv2d 1,256,56,56,64,1,1,1,0,1 float32",
       13547520,
       6431040,
       7723,
       R"({"algorithm":"direct","gemm_chunk":[2,128],"gemm_pack":1,"gemm_rows":1,)"
       R"("gemm_vectors":1,"ic_block":1,"oc_vectors":1,"oh_rows":1,"order":["ow","cb"],)"
       R"("ow_tile":1,"unroll_c":1})"},
      {"aarch64",
       "depthwise_conv2d",
       {1, 32, 112, 112, 3, 3, 2, 1},
       "depthwise_conv2d 1,32,112,112,3,3,2,1 float32",
       32,
       11,
       31,
       R"({"tile_rows":3,"tile_vectors":1})"},
      {"x86-avx2",
       "dense",
       {1, 2048, 1000},
       "dense 1,2048,1000 float32 threads=2",
       108,
       66,
       72,
       R"({"batch_tile":1,"rows":1,"tile_in":[2,1024],"unroll_in":2})"},
      {"cuda -arch=sm_90",
       "matmul",
       {512, 256, 128},
       "matmul 512,256,128 float32",
       98304,
       89754,
       12733,
       R"({"block_k":4,"block_m":16,"block_n":16,"double_buffer":0,"pad":4,"thread_m":1,)"
       R"("thread_n":1,"unroll_k":1,"vec_a":1,"vec_b":1})"},
      {"cuda -arch=sm_80",
       "conv2d",
       {1, 64, 56, 56, 64, 3, 3, 1, 1, 1},
       "conv2d 1,64,56,56,64,3,3,1,1,1 float32",
       36864,
       33524,
       11949,
       R"({"block_k":4,"block_m":16,"block_n":16,"double_buffer":0,"pad":4,"thread_m":1,)"
       R"("thread_n":1,"unroll_k":1,"vec_a":1,"vec_b":1})"},
      {"cuda -arch=sm_90",
       "dense",
       {1, 2048, 1000},
       "dense 1,2048,1000 float32",
       12288,
       11174,
       7160,
       R"({"block_k":4,"block_m":16,"block_n":16,"double_buffer":0,"pad":4,"thread_m":1,)"
       R"("thread_n":1,"unroll_k":1,"vec_a":1,"vec_b":1})"},
  };
  for (const Case& c : cases) {
    auto target = builder::ParseTarget(c.target);
    ASSERT_TRUE(target.ok()) << c.target;
    auto task = MakeTask(c.name, c.shape, *target, {.threads = c.target == "x86-avx2" ? 2 : 1});
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    const ConfigSpace& space = (*task)->space();
    // Knobs added since (conv2d's taps_inner) come last: the earlier points keep their indices,
    // with the new knobs at their first choice, which records without them mean.
    std::vector<std::string> added;
    uint64_t earlier = space.size();
    if (const Knob* taps = space.FindKnob("taps_inner"); taps != nullptr) {
      added.push_back("taps_inner");
      earlier /= taps->size();
    }
    uint64_t valid = 0;
    for (uint64_t i = 0; i < std::min<uint64_t>(earlier, 20000); ++i) {
      valid += space.IsValid(space.Get(i)) ? 1 : 0;
    }
    SCOPED_TRACE((*task)->id().Key());
    EXPECT_EQ((*task)->id().Key(), c.key);
    EXPECT_EQ(earlier, c.size);
    EXPECT_EQ((*task)->DefaultConfig().index(), c.default_index);
    EXPECT_EQ(valid, c.valid_in_first);
    nlohmann::json middle = space.Get(c.size / 2).ToJson();
    for (const auto& k : added) {
      EXPECT_EQ(middle[k], space.FindKnob(k)->values.front()) << k;
      middle.erase(k);
    }
    EXPECT_EQ(middle.dump(), c.middle);
    // A record's values find the config it was.
    auto back = space.FromJson(nlohmann::json::parse(c.middle));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->index(), c.size / 2);
  }
}

}  // namespace
}  // namespace crosstune::tuner
