// ONNX import and the host interpreter against Debian's libonnx-testdata: for every node test of a
// supported operator, the imported graph's output shapes and the interpreter's outputs equal the
// reference outputs; and the refusals name what they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "crosstune/model/onnx_import.h"
#include "crosstune/model/ops.h"
#include "testdata_cases.h"

namespace crosstune::model {
namespace {

namespace fs = std::filesystem;

double MaxError(const Value& got, const Value& want) {
  double worst = 0;
  if (got.dtype == DType::kFloat32) {
    for (int64_t i = 0; i < want.elements(); ++i) {
      const double w = want.floats()[i], d = std::fabs(got.floats()[i] - w);
      worst = std::max(worst, d / (1e-5 + 1e-4 * std::fabs(w)));
    }
    return worst;
  }
  if (got.dtype == DType::kFloat64) {  // sums in another order than numpy's: not bit-exact
    const std::vector<double> g = got.AsDoubles(), w = want.AsDoubles();
    for (size_t i = 0; i < w.size(); ++i) {
      worst = std::max(worst, std::fabs(g[i] - w[i]) / (1e-12 + 1e-10 * std::fabs(w[i])));
    }
    return worst;
  }
  return *got.data == *want.data ? 0 : INFINITY;
}

class NodeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(NodeTest, ImportsAndComputesTheReferenceOutputs) {
  const fs::path dir = testing::NodeTestDir(GetParam());
  ASSERT_TRUE(fs::exists(dir / "model.onnx")) << dir << " (install libonnx-testdata)";
  const fs::path data = dir / "test_data_set_0";
  const std::vector<Value> inputs = testing::ReadSet(data, "input_");
  const std::vector<Value> outputs = testing::ReadSet(data, "output_");
  ASSERT_FALSE(outputs.empty());

  std::vector<Value> feed;
  auto g = testing::ImportNodeTest(dir, inputs, &feed);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->outputs.size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_EQ(g->values[g->outputs[i]].shape, outputs[i].shape) << "output " << i;
  }
  auto got = Interpret(*g, feed);
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_LE(MaxError((*got)[i], outputs[i]), 1.0) << "output " << i;
  }
}

// float16 at a graph's edge: every half survives a round trip through float, and float rounds to
// the nearest half (ties to even, past 65504 to infinity, below the subnormals to zero).
TEST(HalfTest, ConversionsRoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (f != f) continue;  // NaN
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // a tie: to the even one
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0);  // below half the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  const float nan = HalfToFloat(FloatToHalf(std::nanf("")));
  EXPECT_NE(nan, nan);
}

TEST(InferNodeTest, RefusesAnUnsupportedAttributeNamingIt) {
  Graph g;
  g.opset = 13;
  Value x;
  x.name = "x";
  x.shape = {1, 3, 8, 8};
  Value y;
  y.name = "y";
  Node n;
  n.op = "Relu";
  n.name = "act";
  n.inputs = {g.AddValue(x)};
  n.outputs = {g.AddValue(y)};
  n.SetInt("inplace", 1);
  Status s = InferNode(g, n);
  EXPECT_EQ(s.message(), "Relu node 'act': attribute 'inplace' is not supported");
  n.attrs.clear();
  EXPECT_TRUE(InferNode(g, n).ok());
  EXPECT_EQ(g.values[n.outputs[0]].shape, x.shape);
}

INSTANTIATE_TEST_SUITE_P(OnnxTestData, NodeTest, ::testing::ValuesIn(testing::kCases),
                         [](const auto& info) { return std::string(info.param).substr(5); });

}  // namespace
}  // namespace crosstune::model
