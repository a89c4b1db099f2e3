#include "crosstune/tensor.h"

#include <gtest/gtest.h>

#include "crosstune/messages.h"

namespace crosstune {
namespace {

TEST(Tensor, ParsesSpec) {
  auto s = ParseTensorSpec("1024x16xf32");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->shape, (std::vector<int64_t>{1024, 16}));
  EXPECT_EQ(DTypeName(s->dtype), "f32");
}

TEST(Tensor, RefusesUnknownDTypeListingValidOnes) {
  auto s = ParseTensorSpec("4xq7");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("f32"), std::string::npos);
}

TEST(Tensor, RefusesOverflowingShape) {
  auto n = TensorBytes({1LL << 40, 1LL << 40}, DLDataType{kDLFloat, 32, 1});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), ErrorCode::kLimitExceeded);
}

TEST(Tensor, RefusesRankOverLimit) {
  std::vector<int64_t> shape(Limits::kMaxTensorRank + 1, 1);
  EXPECT_EQ(TensorBytes(shape, DLDataType{kDLFloat, 32, 1}).status().code(),
            ErrorCode::kLimitExceeded);
}

TEST(Tensor, RefusesUnknownDTypeCodes) {
  auto n = TensorBytes({4}, DLDataType{200, 32, 1});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(TensorBytes({4}, DLDataType{kDLFloat, 248, 1}).ok());
  EXPECT_TRUE(TensorBytes({4}, DLDataType{kDLComplex, 64, 1}).ok());
}

TEST(Tensor, ComputesBytes) { EXPECT_EQ(*TensorBytes({3, 5}, DLDataType{kDLFloat, 64, 1}), 120u); }

TEST(Tensor, ChecksTensorsAgainstTheServersLimitAndTheMemoryTheyLiveIn) {
  msg::DeviceInfo device;
  device.memory_bytes = uint64_t{16} << 30;
  device.max_tensor_bytes = uint64_t{8} << 30;
  device.gpus.push_back(msg::GpuInfo{});
  device.gpus.back().memory_bytes = uint64_t{4} << 30;
  EXPECT_TRUE(CheckTensorsFit(uint64_t{8} << 30, device, false, "A, B, C").ok());
  Status s = CheckTensorsFit(uint64_t{12} << 40, device, false, "A, B, C");
  EXPECT_EQ(s.code(), ErrorCode::kLimitExceeded);
  EXPECT_EQ(s.message(),
            "A, B, C: 12.0 TiB of tensors (13194139533312 bytes) is over the server's limit of "
            "8.0 GiB per session (--max-tensor-bytes 8589934592)");
  device.max_tensor_bytes = uint64_t{1} << 60;
  s = CheckTensorsFit(uint64_t{17} << 30, device, false, "--arg");
  EXPECT_EQ(s.message(),
            "--arg: 17.0 GiB of tensors (18253611008 bytes) is over the device's memory of "
            "16.0 GiB (17179869184 bytes)");
  // A CUDA task's tensors live in the GPU's memory.
  EXPECT_TRUE(CheckTensorsFit(uint64_t{5} << 30, device, false, "x").ok());
  EXPECT_NE(CheckTensorsFit(uint64_t{5} << 30, device, true, "x").message().find("GPU's memory"),
            std::string::npos);
  // Limits an older server does not report are not checked.
  EXPECT_TRUE(CheckTensorsFit(UINT64_MAX, msg::DeviceInfo{}, true, "x").ok());
}

}  // namespace
}  // namespace crosstune
