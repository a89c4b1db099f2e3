// The generated kernels (kernels.h), compiled for this machine and run in this process on the
// values the host interpreter computes: every node of every supported operator's ONNX node test,
// after the passes (so fused convs and dense nodes run through the generic kernels too).
#include "crosstune/model/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "crosstune/model/ops.h"
#include "crosstune/model/passes.h"
#include "loaded_kernel.h"
#include "testdata_cases.h"

namespace crosstune::model {
namespace {

using testing::Loaded;

class KernelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(KernelTest, GeneratedKernelsComputeWhatTheInterpreterDoes) {
  const auto dir = testing::NodeTestDir(GetParam());
  const std::vector<Value> inputs = testing::ReadSet(dir / "test_data_set_0", "input_");
  std::vector<Value> feed;
  auto g = testing::ImportNodeTest(dir, inputs, &feed);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  for (size_t i = 0; i < feed.size(); ++i) g->values[g->inputs[i]].data = feed[i].data;
  int ran = 0;
  for (Node& n : g->nodes) {
    // The interpreter's values for this node, then the kernel's output beside them.
    ASSERT_TRUE(EvalNode(*g, n).ok());
    auto k = GenerateKernel(*g, n);
    ASSERT_TRUE(k.ok()) << k.status().message();
    auto lib = Loaded::Compile(*k);
    ASSERT_TRUE(lib.ok()) << lib.status().message() << "\n" << k->source;
    std::vector<Value> outs;
    std::vector<Value*> args;
    for (int i : n.inputs) {
      if (i >= 0) args.push_back(&g->values[i]);
    }
    for (int o : n.outputs) {
      Value v = g->values[o];
      v.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(v.bytes()), 0xAB);
      outs.push_back(std::move(v));
    }
    for (Value& v : outs) args.push_back(&v);
    ASSERT_EQ((*lib)->Call(args), 0) << n.name;
    for (size_t o = 0; o < outs.size(); ++o) {
      const Value& want = g->values[n.outputs[o]];
      if (want.dtype != DType::kFloat32) {
        EXPECT_EQ(*outs[o].data, *want.data) << n.name;
        continue;
      }
      int bad = 0;
      for (int64_t e = 0; e < want.elements(); ++e) {
        const double w = want.floats()[e], got = outs[o].floats()[e];
        if (!(std::fabs(got - w) <= 1e-5 + 1e-4 * std::fabs(w))) ++bad;
      }
      EXPECT_EQ(bad, 0) << n.op << " node '" << n.name << "': " << bad << " of " << want.elements()
                        << " elements differ\n"
                        << k->source;
    }
    ++ran;
  }
  EXPECT_GT(ran + static_cast<int>(g->nodes.empty()), 0);
}

INSTANTIATE_TEST_SUITE_P(OnnxTestData, KernelTest, ::testing::ValuesIn(testing::kCases),
                         [](const auto& info) { return std::string(info.param).substr(5); });

}  // namespace
}  // namespace crosstune::model
