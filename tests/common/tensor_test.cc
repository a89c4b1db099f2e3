#include "crosstune/tensor.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace crosstune
