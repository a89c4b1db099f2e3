// The layout plan (layout_plan.h) on a small network with every case in it: a conv of NCHW data
// (layout 2), a max-pool and convs of blocked data (layout 1), a blocked residual, a grouped conv
// that needs NCHW (one transform shared with a graph output), a conv whose residual is NCHW, a
// depthwise conv of blocked data (kept blocked), a global average pool of blocked data and a
// dense layer. The rewritten graph must compute what
// the original does (host interpreter, and the generated kernels compiled and run here), and the
// tasks extracted without a target must be those the compiler looks up.
#include "crosstune/model/layout_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "crosstune/builder/builder.h"
#include "crosstune/model/compile.h"
#include "crosstune/model/ops.h"
#include "crosstune/model/passes.h"
#include "crosstune/model/tasks.h"
#include "crosstune/tuner/conv_layout.h"
#include "loaded_kernel.h"

namespace crosstune::model {
namespace {

Attr Ints(std::vector<int64_t> v) {
  Attr a;
  a.kind = Attr::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attr Int(int64_t v) {
  Attr a;
  a.kind = Attr::Kind::kInt;
  a.i = v;
  return a;
}

// Builds a graph node by node through the operator table, as an import would; weights are
// seeded pseudo-random numbers.
class SmallNet {
 public:
  SmallNet() {
    g_.name = "layouts";
    g_.opset = 13;
  }
  int Input(const std::string& name, std::vector<int64_t> shape) {
    Value v;
    v.name = name;
    v.shape = std::move(shape);
    const int id = g_.AddValue(std::move(v));
    g_.inputs.push_back(id);
    return id;
  }
  int Weight(const std::string& name, std::vector<int64_t> shape) {
    std::vector<float> data(static_cast<size_t>(NumElements(shape)));
    for (float& f : data) f = Next() * 0.5f;
    return g_.AddFloatConstant(name, std::move(shape), data);
  }
  int Op(const std::string& op, const std::string& name, std::vector<int> inputs,
         std::map<std::string, Attr> attrs = {}) {
    Node n;
    n.op = op;
    n.name = name;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    Value out;
    out.name = name;
    n.outputs = {g_.AddValue(std::move(out))};
    const Status st = InferNode(g_, n);
    EXPECT_TRUE(st.ok()) << st.ToString();
    g_.nodes.push_back(std::move(n));
    return g_.nodes.back().outputs[0];
  }
  int Conv(const std::string& name, int x, int64_t c, int64_t k, int64_t r, int64_t stride,
           int64_t group = 1) {
    const int w = Weight(name + ".weight", {k, c / group, r, r});
    const int b = Weight(name + ".bias", {k});
    const int64_t pad = r / 2;
    return Op("Conv", name, {x, w, b},
              {{"kernel_shape", Ints({r, r})},
               {"strides", Ints({stride, stride})},
               {"pads", Ints({pad, pad, pad, pad})},
               {"group", Int(group)}});
  }
  Graph Take(std::vector<int> outputs) {
    g_.outputs = std::move(outputs);
    return std::move(g_);
  }
  float Next() {
    seed_ = seed_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<int64_t>(seed_ >> 40) % 2001 - 1000) / 1000.0f;
  }

 private:
  Graph g_;
  uint64_t seed_ = 42;
};

// conv1 (3 -> 20, NCHW input) -> relu -> maxpool -> conv2 -> relu -> conv3 (+ pool) -> relu
// ("block", a graph output) -> grouped grp (4 groups) -> relu -> conv4 (+ grp: an NCHW residual)
// -> relu -> depthwise dw -> relu -> global average pool -> flatten -> fc ("probs"), after the
// default passes. 20 channels: not a multiple of any block.
Graph SmallGraph(std::vector<float>* input) {
  SmallNet b;
  const int x = b.Input("input", {1, 3, 12, 12});
  int y = b.Op("Relu", "conv1.relu", {b.Conv("conv1", x, 3, 20, 3, 1)});
  const int pool = b.Op(
      "MaxPool", "pool", {y},
      {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}});
  y = b.Op("Relu", "conv2.relu", {b.Conv("conv2", pool, 20, 20, 3, 1)});
  y = b.Op("Add", "conv3.add", {b.Conv("conv3", y, 20, 20, 1, 1), pool});
  const int block = b.Op("Relu", "block", {y});
  const int grp = b.Op("Relu", "grp.relu", {b.Conv("grp", block, 20, 20, 3, 1, 4)});
  y = b.Op("Add", "conv4.add", {b.Conv("conv4", grp, 20, 20, 1, 1), grp});
  y = b.Op("Relu", "conv4.relu", {y});
  y = b.Op("Relu", "dw.relu", {b.Conv("dw", y, 20, 20, 3, 1, 20)});
  y = b.Op("GlobalAveragePool", "gap", {y});
  y = b.Op("Flatten", "flatten", {y});
  const int fc_w = b.Weight("fc.weight", {10, 20});
  const int fc_b = b.Weight("fc.bias", {10});
  y = b.Op("Gemm", "probs", {y, fc_w, fc_b}, {{"transB", Int(1)}});
  input->resize(3 * 12 * 12);
  for (float& f : *input) f = b.Next();
  Graph g = b.Take({block, y});
  const Status st = RunPasses(g, DefaultPasses());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return g;
}

const Node* NodeNamed(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return d;
}

TEST(LayoutPlanTest, ConvsOfBlockedDataAreLayoutOneAndOfNchwDataLayoutTwo) {
  std::vector<float> x;
  const Graph g = SmallGraph(&x);
  const LayoutPlan plan = PlanLayouts(g);
  std::map<std::string, int64_t> conv;
  std::map<std::string, bool> reads_block;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    conv[g.nodes[k].name] = plan.conv[k];
    reads_block[g.nodes[k].name] = plan.reads_block[k];
  }
  EXPECT_EQ(conv["conv1"], 2);
  EXPECT_EQ(conv["conv2"], 1);
  EXPECT_EQ(conv["conv3"], 1);
  EXPECT_EQ(conv["grp"], 0) << "a grouped conv stays NCHW";
  EXPECT_EQ(conv["conv4"], 2);
  EXPECT_EQ(conv["dw"], 1) << "a depthwise conv of blocked data stays blocked";
  EXPECT_TRUE(reads_block["pool"]);
  EXPECT_TRUE(reads_block["gap"]);
  EXPECT_FALSE(reads_block["probs"]);
  // With kNchw nothing is blocked.
  const LayoutPlan off = PlanLayouts(g, Layouts::kNchw);
  for (size_t k = 0; k < g.nodes.size(); ++k) EXPECT_EQ(off.conv[k], 0) << g.nodes[k].name;
  for (bool b : off.blocked) EXPECT_FALSE(b);
}

TEST(LayoutPlanTest, RewriteInsertsOneTransformPerDisagreementAndKeepsTheGraphsEdges) {
  std::vector<float> x;
  const Graph original = SmallGraph(&x);
  Graph g = original;
  ASSERT_TRUE(RewriteLayouts(g, PlanLayouts(g), 8).ok());
  // Exactly two transforms: "block" back to NCHW once (the grouped conv and the graph output
  // read it), and the grouped conv's NCHW output to blocked for conv4's residual. The depthwise
  // conv reads and writes blocked data: none around it.
  std::vector<std::string> transforms;
  for (const Node& n : g.nodes) {
    if (n.op != "LayoutTransform") continue;
    transforms.push_back(g.values[n.inputs[0]].name + " -> " + g.values[n.outputs[0]].name + " " +
                         n.String("to", ""));
    EXPECT_EQ(n.Int("block", 0), 8);
  }
  ASSERT_EQ(transforms.size(), 2u);
  EXPECT_EQ(transforms[0], "block.blocked -> block nchw");
  EXPECT_EQ(transforms[1], "grp.relu -> grp.relu.blocked blocked");
  // The graph's inputs and outputs: the same names and NCHW shapes.
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.values[g.inputs[0]].name, "input");
  EXPECT_EQ(g.values[g.inputs[0]].shape, (std::vector<int64_t>{1, 3, 12, 12}));
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(g.values[g.outputs[0]].name, "block");
  EXPECT_EQ(g.values[g.outputs[0]].shape, (std::vector<int64_t>{1, 20, 6, 6}));
  EXPECT_EQ(g.values[g.outputs[1]].name, "probs");
  // Convs: their layout, blocked data where it is, packed weights (layout 1) and padded biases.
  const Node* conv1 = NodeNamed(g, "conv1");
  const Node* conv2 = NodeNamed(g, "conv2");
  ASSERT_TRUE(conv1 && conv2);
  EXPECT_EQ(conv1->Int("layout", 0), 2);
  EXPECT_EQ(g.values[conv1->inputs[0]].name, "input");
  EXPECT_EQ(g.values[conv1->inputs[1]].shape, (std::vector<int64_t>{20, 3, 3, 3}));
  EXPECT_EQ(g.values[conv1->inputs[2]].shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(g.values[conv1->outputs[0]].shape, tuner::BlockedShape({1, 20, 12, 12}, 8));
  EXPECT_EQ(conv2->Int("layout", 0), 1);
  EXPECT_EQ(g.values[conv2->inputs[0]].shape, tuner::BlockedShape({1, 20, 6, 6}, 8));
  EXPECT_EQ(g.values[conv2->inputs[1]].shape, tuner::PackedWeightShape({20, 20, 3, 3}, 8));
  EXPECT_EQ(g.values[conv2->inputs[1]].layout, "KCRS8k");
  EXPECT_EQ(NodeNamed(g, "grp")->Has("layout"), false);
  const Node* dw = NodeNamed(g, "dw");
  ASSERT_NE(dw, nullptr);
  EXPECT_EQ(dw->Int("layout", 0), 1);
  EXPECT_EQ(g.values[dw->inputs[1]].shape, (std::vector<int64_t>{3, 1, 3, 3, 8}));
  EXPECT_EQ(g.values[dw->inputs[1]].layout, "C1RS8c");
  // The network's work is the same (padded lanes are not counted).
  EXPECT_DOUBLE_EQ(Stats(g).flops, Stats(original).flops);
  // The original weights of packed convs are gone: params.bin holds the packed ones only.
  for (const Value& v : g.values) EXPECT_NE(v.name, "conv2.weight");
  // The tasks of the rewritten graph are those extracted before.
  std::vector<std::pair<std::string, std::vector<int64_t>>> before, after;
  for (const auto& l : ExtractTasks(original)) before.emplace_back(l.template_name, l.shape);
  for (const auto& l : ExtractTasks(g)) after.emplace_back(l.template_name, l.shape);
  EXPECT_EQ(before, after);
  EXPECT_EQ(before.front().second, (std::vector<int64_t>{1, 3, 12, 12, 20, 3, 3, 1, 1, 0, 1, 2}));
}

TEST(LayoutPlanTest, RewrittenGraphComputesWhatTheOriginalDoes) {
  std::vector<float> x;
  const Graph original = SmallGraph(&x);
  auto want = Interpret(original, {x});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (int64_t cb : {4, 8, 16}) {
    Graph g = original;
    ASSERT_TRUE(RewriteLayouts(g, PlanLayouts(g), cb).ok());
    auto got = Interpret(g, {x});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      EXPECT_LE(MaxAbsDiff((*got)[o], (*want)[o]), 1e-6) << "output " << o << ", cb " << cb;
    }
  }
}

// Every node of the rewritten graph through its generated kernel (the blocked conv kernel is
// the one a conv its template refuses gets), against the interpreter's values.
TEST(LayoutPlanTest, GeneratedKernelsOfTheRewrittenGraphComputeWhatTheInterpreterDoes) {
  std::vector<float> x;
  Graph g = SmallGraph(&x);
  ASSERT_TRUE(RewriteLayouts(g, PlanLayouts(g), 8).ok());
  std::vector<uint8_t> bytes(x.size() * 4);
  std::memcpy(bytes.data(), x.data(), bytes.size());
  g.values[g.inputs[0]].data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  for (Node& n : g.nodes) {
    ASSERT_TRUE(EvalNode(g, n).ok()) << n.name;
    auto k = GenerateKernel(g, n);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    auto lib = testing::Loaded::Compile(*k);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString() << "\n" << k->source;
    std::vector<Value*> args;
    for (int i : n.inputs) {
      if (i >= 0) args.push_back(&g.values[i]);
    }
    Value out = g.values[n.outputs[0]];
    out.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out.bytes()), 0xAB);
    args.push_back(&out);
    ASSERT_EQ((*lib)->Call(args), 0) << n.name;
    const Value& want = g.values[n.outputs[0]];
    const std::vector<float> got(out.floats(), out.floats() + out.elements());
    const std::vector<float> ref(want.floats(), want.floats() + want.elements());
    // Lanes past C are exact zeros in both.
    EXPECT_LE(MaxAbsDiff(got, ref), 1e-4) << n.op << " node '" << n.name << "'\n" << k->source;
  }
}

TEST(LayoutPlanTest, ExtractedTasksAreThoseTheCompilerLooksUp) {
  std::vector<float> x;
  const Graph g = SmallGraph(&x);
  auto builder = builder::Builder::Create({.workers = 1});
  ASSERT_TRUE(builder.ok()) << builder.status().ToString();
  for (const char* target : {"x86-avx2", "llvm -mtriple=aarch64-linux-gnu -mattr=+neon"}) {
    for (Layouts layouts : {Layouts::kBlocked, Layouts::kNchw}) {
      SCOPED_TRACE(std::string(target) + ", " + LayoutsName(layouts));
      CompileOptions o;
      o.target = *builder::ParseTarget(target);
      o.layouts = layouts;
      auto c = CompileModel(g, o, **builder);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      // The tasks compile looked up: every node's TaskOf in the compiled graph, which the node's
      // task (when its template took it) repeats.
      std::vector<std::pair<std::string, std::vector<int64_t>>> looked_up, extracted;
      for (const CompiledNode& cn : c->nodes) {
        auto t = TaskOf(c->graph, c->graph.nodes[cn.node]);
        if (!t) continue;
        if (cn.has_task) {
          EXPECT_EQ(cn.task.shape, t->shape);
        }
        std::pair<std::string, std::vector<int64_t>> key(t->template_name, t->shape);
        if (std::find(looked_up.begin(), looked_up.end(), key) == looked_up.end()) {
          looked_up.push_back(key);
        }
      }
      for (const auto& l : ExtractTasks(g, layouts))
        extracted.emplace_back(l.template_name, l.shape);
      EXPECT_EQ(looked_up, extracted);
      size_t layout_fields = 0, blocked_depthwise = 0;
      for (const auto& [name, shape] : extracted) {
        layout_fields += shape.size() == 12;
        blocked_depthwise += name == "depthwise_conv2d" && shape.size() == 10 && shape[9] == 1;
      }
      EXPECT_EQ(layout_fields, layouts == Layouts::kBlocked ? 4u : 0u);
      EXPECT_EQ(blocked_depthwise, layouts == Layouts::kBlocked ? 1u : 0u);
    }
  }
}

// A MatMul's constant weight under 3-D activations is packed once at compile time
// (PackMatmulWeights): two MatMuls sharing a weight share its panels, a MatMul of 2-D activations
// keeps its weight, and a CUDA target packs nothing. The rewritten graph computes what the
// original does, through the interpreter and through the PackedMatMul's generated kernel, and
// the task the compiler looks up is the one extracted from the original graph.
TEST(LayoutPlanTest, MatmulWeightsArePackedOnceAndComputeWhatTheOriginalDoes) {
  SmallNet b;
  const int x = b.Input("x", {2, 3, 8});
  const int x2 = b.Input("x2", {5, 8});
  const int w = b.Weight("w", {8, 13});
  const int y1 = b.Op("MatMul", "y1", {x, w});
  const int y2 = b.Op("MatMul", "y2", {b.Op("Relu", "relu", {x}), w});
  const int y3 = b.Op("MatMul", "y3", {x2, w});
  std::vector<std::vector<float>> in = {std::vector<float>(2 * 3 * 8), std::vector<float>(5 * 8)};
  for (auto& t : in)
    for (float& f : t) f = b.Next();
  const Graph original = b.Take({y1, y2, y3});
  auto want = Interpret(original, in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const auto extracted = TaskOf(original, *NodeNamed(original, "y1"));
  ASSERT_TRUE(extracted.has_value());
  EXPECT_EQ(extracted->shape, (std::vector<int64_t>{6, 13, 8, 1, 1}));

  Graph cuda = original;
  ASSERT_TRUE(PackMatmulWeights(cuda, *builder::ParseTarget("sm_80"), 1).ok());
  for (const Node& n : cuda.nodes) EXPECT_NE(n.op, "PackedMatMul") << n.name;

  Graph g = original;
  ASSERT_TRUE(PackMatmulWeights(g, *builder::ParseTarget("x86-avx2"), 1).ok());
  const Node* p1 = NodeNamed(g, "y1");
  const Node* p2 = NodeNamed(g, "y2");
  ASSERT_TRUE(p1 && p2);
  EXPECT_EQ(p1->op, "PackedMatMul");
  EXPECT_EQ(p2->op, "PackedMatMul");
  EXPECT_EQ(p1->inputs[1], p2->inputs[1]) << "one weight, one copy of its panels";
  EXPECT_EQ(g.values[p1->inputs[1]].shape, (std::vector<int64_t>{12, 8, 8}));
  EXPECT_EQ(NodeNamed(g, "y3")->op, "MatMul");
  EXPECT_EQ(NodeNamed(g, "y3")->inputs[1], w);
  const auto looked_up = TaskOf(g, *p1);
  ASSERT_TRUE(looked_up.has_value());
  EXPECT_EQ(looked_up->shape, extracted->shape);
  auto got = Interpret(g, in);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t o = 0; o < want->size(); ++o) {
    EXPECT_LE(MaxAbsDiff((*got)[o], (*want)[o]), 1e-6) << "output " << o;
  }
  // The PackedMatMul's generated kernel (what a node no template takes would run).
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<uint8_t> bytes(in[i].size() * 4);
    std::memcpy(bytes.data(), in[i].data(), bytes.size());
    g.values[g.inputs[i]].data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  }
  for (Node& n : g.nodes) ASSERT_TRUE(EvalNode(g, n).ok()) << n.name;
  auto k = GenerateKernel(g, *p1);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto lib = testing::Loaded::Compile(*k);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString() << "\n" << k->source;
  Value out = g.values[p1->outputs[0]];
  out.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out.bytes()), 0xAB);
  std::vector<Value*> args = {&g.values[p1->inputs[0]], &g.values[p1->inputs[1]], &out};
  ASSERT_EQ((*lib)->Call(args), 0);
  EXPECT_LE(MaxAbsDiff(std::vector<float>(out.floats(), out.floats() + out.elements()), (*want)[0]),
            1e-5)
      << k->source;
}

}  // namespace
}  // namespace crosstune::model
