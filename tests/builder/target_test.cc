#include "crosstune/builder/target.h"

#include <gtest/gtest.h>

namespace crosstune::builder {
namespace {

TEST(TargetTest, ParsesLlvmTargetString) {
  auto t = ParseTarget("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon,-crc");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->triple, "aarch64-linux-gnu");
  EXPECT_EQ(t->cpu, "cortex-a72");
  EXPECT_EQ(t->attrs, (std::vector<std::string>{"+neon", "-crc"}));
  EXPECT_EQ(t->Arch(), "aarch64");
  EXPECT_EQ(t->ToString(), "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon,-crc");
}

TEST(TargetTest, CanonicalizesTripleVendors) {
  auto t = ParseTarget("llvm -mtriple=x86_64-pc-linux-gnu");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->triple, "x86_64-linux-gnu");
  EXPECT_EQ(t->cpu, "x86-64");
}

TEST(TargetTest, ParsesCudaTarget) {
  auto t = ParseTarget("cuda -arch=sm_90");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->is_cuda());
  EXPECT_EQ(t->cuda_arch, "sm_90");
  EXPECT_EQ(t->ToString(), "cuda -arch=sm_90");
}

TEST(TargetTest, EveryPresetParses) {
  for (const auto& [name, str] : Presets()) {
    auto t = ParseTarget(name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().ToString();
  }
  EXPECT_EQ(ParseTarget("rpi4")->cpu, "cortex-a72");
  EXPECT_EQ(ParseTarget("h100")->cuda_arch, "sm_90");
  EXPECT_EQ(ParseTarget("armv7-neon")->triple, "armv7-linux-gnueabihf");
}

TEST(TargetTest, RefusesUnknownKeyListingValidOnes) {
  auto t = ParseTarget("llvm -mtriple=aarch64-linux-gnu -mfoo=1");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("unknown key '-mfoo'"), std::string::npos);
  EXPECT_NE(t.status().message().find("-mtriple -mcpu -mattr"), std::string::npos);
  auto c = ParseTarget("cuda -arch=sm_90 -mcpu=x");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("valid for cuda: -arch"), std::string::npos);
}

TEST(TargetTest, RefusesUnknownCpuListingLlvmCpus) {
  auto t = ParseTarget("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-z99");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown cpu 'cortex-z99'"), std::string::npos);
  EXPECT_NE(t.status().message().find("cortex-a72"),
            std::string::npos);  // the list comes from LLVM
}

TEST(TargetTest, RefusesFeatureLlvmDoesNotKnowForTheTriple) {
  auto t = ParseTarget("llvm -mtriple=aarch64-linux-gnu -mattr=+avx2");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown cpu feature 'avx2'"), std::string::npos);
  EXPECT_NE(t.status().message().find("neon"), std::string::npos);
  EXPECT_TRUE(ParseTarget("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2").ok());
}

TEST(TargetTest, RefusesUnknownKindTripleAndArch) {
  EXPECT_FALSE(ParseTarget("opencl -device=x").ok());
  EXPECT_FALSE(ParseTarget("llvm -mtriple=mips-linux-gnu").ok());
  EXPECT_FALSE(ParseTarget("llvm -mtriple=armv7-linux-gnueabi").ok());  // soft-float
  EXPECT_FALSE(ParseTarget("cuda -arch=sm_9x").ok());
  // A number past int's range is refused by name (found by fuzz_target: it threw out_of_range).
  auto huge = ParseTarget("cuda -arch=sm_512999999999999999999999");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("unknown CUDA arch"), std::string::npos);
  EXPECT_FALSE(ParseTarget("cuda -arch=sm_49").ok());
  EXPECT_TRUE(ParseTarget("cuda -arch=sm_120").ok());
  EXPECT_FALSE(ParseTarget("no-such-preset").ok());
  auto a = ParseTarget("auto");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("needs a device"), std::string::npos);
}

TEST(TargetTest, RequiredFeaturesFollowCpuAndAttrs) {
  auto avx512 = RequiredFeatures(*ParseTarget("x86-avx512"));
  ASSERT_TRUE(avx512.ok());
  EXPECT_NE(std::find(avx512->begin(), avx512->end(), "avx512f"), avx512->end());
  EXPECT_NE(std::find(avx512->begin(), avx512->end(), "avx2"), avx512->end());
  auto generic = RequiredFeatures(*ParseTarget("x86-64"));
  ASSERT_TRUE(generic.ok());
  EXPECT_TRUE(generic->empty()) << "baseline features are not required";
  auto neon = RequiredFeatures(*ParseTarget("armv7-neon"));
  ASSERT_TRUE(neon.ok());
  EXPECT_NE(std::find(neon->begin(), neon->end(), "neon"), neon->end());
}

TEST(TargetTest, AutoTargetFromDeviceInfo) {
  msg::DeviceInfo d;
  d.arch = "x86_64";
  d.triple = "x86_64-linux-gnu";
  d.cpu_features = {"sse4.2", "avx2", "fma", "avx512f", "not-a-feature"};
  auto t = TargetFromDevice(d);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ToString(),
            "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx2,+avx512f,+fma,+sse4.2");
  msg::DeviceInfo arm;
  arm.arch = "armv7l";
  EXPECT_EQ(TargetFromDevice(arm)->triple, "armv7-linux-gnueabihf");
  EXPECT_EQ(TargetFromDevice(arm, TargetKind::kCuda).status().code(), ErrorCode::kNoDevice);
  arm.gpus.push_back({"H100", "sm_90", 0});
  EXPECT_EQ(TargetFromDevice(arm, TargetKind::kCuda)->ToString(), "cuda -arch=sm_90");
}

}  // namespace
}  // namespace crosstune::builder
