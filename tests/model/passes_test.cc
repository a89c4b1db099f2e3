// The graph passes and task extraction on models scripts/make-model.py writes, with onnxruntime's
// outputs as the reference: import is right when the host interpreter agrees with onnxruntime,
// and each pass is right when the graph computes the same outputs after it.
#include "crosstune/model/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "crosstune/model/layout_plan.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/model/ops.h"
#include "crosstune/model/storage_plan.h"
#include "crosstune/model/tasks.h"
#include "model_files.h"

namespace crosstune::model {
namespace {

using testing::MakeModel;
using testing::ReferenceOutput;
using testing::SeededInput;

// max |a - b| / (1e-5 + |b|)-ish: the worst element's error in units of fp32 tolerance
// (atol 1e-4 + rtol 1e-3), printed with the max abs and max rel errors.
double Compare(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double abs_err = 0, rel_err = 0, worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    abs_err = std::max(abs_err, d);
    rel_err = std::max(rel_err, d / std::max(1e-6, std::fabs(static_cast<double>(want[i]))));
    worst = std::max(worst, d / (1e-4 + 1e-3 * std::fabs(static_cast<double>(want[i]))));
  }
  std::printf("%s: max abs error %.3g, max rel error %.3g\n", what, abs_err, rel_err);
  return worst;
}

std::map<std::string, int> Ops(const Graph& g) { return Stats(g).ops; }

TEST(PassesTest, FoldingAndFusionKeepTheOutputsOfAnExplicitBatchNormModel) {
  const std::string path = MakeModel("small_bn.onnx", "small --bn explicit");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = SeededInput(path);
  auto before = Interpret(*g, {x});
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_LE(Compare((*before)[0], ReferenceOutput(path), "imported vs onnxruntime"), 1.0);

  Graph fused = *g;
  ASSERT_TRUE(RunPasses(fused, DefaultPasses()).ok());
  auto ops = Ops(fused);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(ops.count("Relu"), 0u);
  EXPECT_EQ(ops.count("Add"), 0u);
  EXPECT_EQ(ops.count("Dropout"), 0u);
  EXPECT_EQ(ops["FusedConv"], 4);
  EXPECT_EQ(ops["Dense"], 1);
  auto after = Interpret(fused, {x});
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_LE(Compare((*after)[0], (*before)[0], "fused vs unfused"), 1.0);
  // The model's own names stay.
  EXPECT_EQ(fused.values[fused.inputs[0]].name, "input");
  EXPECT_EQ(fused.values[fused.outputs[0]].name, "probs");
}

TEST(PassesTest, EachPassAloneKeepsTheOutputs) {
  const std::string path = MakeModel("small_bn.onnx", "small --bn explicit");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = SeededInput(path);
  auto want = Interpret(*g, {x});
  ASSERT_TRUE(want.ok());
  for (const Pass& p : DefaultPasses()) {
    Graph h = *g;
    ASSERT_TRUE(p.run(h).ok()) << p.name;
    auto got = Interpret(h, {x});
    ASSERT_TRUE(got.ok()) << p.name << ": " << got.status().message();
    EXPECT_LE(Compare((*got)[0], (*want)[0], p.name), 1.0);
  }
}

// fuse_layernorm: the BERT-style encoder written before opset 17 (LayerNormalization as
// ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div, Mul, Add) holds five LayerNormalization nodes and
// no ReduceMean after the passes, and computes what it did before them.
TEST(PassesTest, ALayerNormWrittenOutIsFusedIntoOneNode) {
  const std::string path = MakeModel("bert_decomposed.onnx", "bert --ln decomposed");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(Ops(*g)["ReduceMean"], 10);
  auto int64s = [](std::vector<int64_t> v) {
    Value x;
    x.dtype = DType::kInt64;
    x.shape = {1, static_cast<int64_t>(v.size())};
    x.data = std::make_shared<std::vector<uint8_t>>(
        reinterpret_cast<const uint8_t*>(v.data()),
        reinterpret_cast<const uint8_t*>(v.data() + v.size()));
    return x;
  };
  std::vector<int64_t> ids(32), mask(32, 1), types(32, 0);
  for (int i = 0; i < 32; ++i) ids[i] = i * 37 % 1000;
  for (int i = 24; i < 32; ++i) mask[i] = 0;
  for (int i = 16; i < 32; ++i) types[i] = 1;
  const std::vector<Value> in = {int64s(ids), int64s(mask), int64s(types)};
  auto want = Interpret(*g, in);
  ASSERT_TRUE(want.ok()) << want.status().message();
  Graph fused = *g;
  ASSERT_TRUE(RunPasses(fused, DefaultPasses()).ok());
  EXPECT_EQ(Ops(fused)["LayerNormalization"], 5);
  EXPECT_EQ(Ops(fused)["ReduceMean"], 0);
  EXPECT_EQ(Ops(fused)["Sqrt"], 0);
  auto got = Interpret(fused, in);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 2u);
  for (size_t o = 0; o < 2; ++o) {
    const Value &a = (*got)[o], &b = (*want)[o];
    EXPECT_LE(Compare(std::vector<float>(a.floats(), a.floats() + a.elements()),
                      std::vector<float>(b.floats(), b.floats() + b.elements()), "fused layernorm"),
              1.0);
  }
}

// Not under ASan (the asan test preset excludes it): 30 s there, nearly all of it the host
// interpreter's loops over ResNet-50's convolutions. The import of the same network
// (TasksTest, StoragePlanTest), the passes and the blocked layouts (the small models here and
// LayoutPlanTest) all run there.
TEST(PassesTest, ResNet50Width16MatchesOnnxRuntimeBeforeAndAfterThePasses) {
  const std::string path = MakeModel("r50w16_bn.onnx", "resnet50 --width 16 --bn explicit");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = SeededInput(path);
  const std::vector<float> ref = ReferenceOutput(path);
  Graph fused = *g;
  ASSERT_TRUE(RunPasses(fused, DefaultPasses()).ok());
  EXPECT_EQ(Ops(fused)["FusedConv"], 53);
  auto got = Interpret(fused, {x});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_LE(Compare((*got)[0], ref, "resnet50 w16, passes run, vs onnxruntime"), 1.0);
  // Blocked layouts as compile rewrites them (AVX2's block of 8): every conv blocked, no transform
  // (the max-pool keeps the stem's output blocked, the global pool reads the last block's).
  Graph blocked = fused;
  ASSERT_TRUE(RewriteLayouts(blocked, PlanLayouts(blocked), 8).ok());
  EXPECT_EQ(Ops(blocked).count("LayoutTransform"), 0u);
  int layouts = 0;
  for (const Node& n : blocked.nodes) layouts += n.Has("layout");
  EXPECT_EQ(layouts, 53);
  auto got_blocked = Interpret(blocked, {x});
  ASSERT_TRUE(got_blocked.ok()) << got_blocked.status().message();
  EXPECT_LE(Compare((*got_blocked)[0], ref, "resnet50 w16, blocked layouts, vs onnxruntime"), 1.0);
  EXPECT_EQ((*got_blocked)[0], (*got)[0]) << "the blocked graph computes the same sums";
}

// fuse_qdq_conv: an int8 copy of ResNet-50 (width 16) as onnxruntime's quantizer writes it has
// every conv between DequantizeLinear and QuantizeLinear nodes; after the passes each is a
// QLinearConv of the quantized tensors (no Conv, no weight DequantizeLinear left), the graph
// still computes onnxruntime's int8 logits within one step of the output, and its tasks are
// conv2d_int8 tasks, one per distinct conv of the float network. Not under ASan (the asan test
// preset excludes ResNet50Width16*): the interpreter's integer convs.
TEST(PassesTest, ResNet50Width16Int8ConvsBecomeQLinearConvs) {
  const std::string path = MakeModel("r50w16_int8.onnx", "resnet50 --width 16 --int8 per-channel");
  ASSERT_FALSE(path.empty());
  const double step = testing::OutputStep(path);
  ASSERT_GT(step, 0);
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  Graph fused = *g;
  ASSERT_TRUE(RunPasses(fused, DefaultPasses()).ok());
  auto ops = Ops(fused);
  EXPECT_EQ(ops["QLinearConv"], 53);
  EXPECT_EQ(ops.count("Conv"), 0u);
  EXPECT_EQ(ops.count("FusedConv"), 0u);
  auto got = Interpret(fused, {SeededInput(path)});
  ASSERT_TRUE(got.ok()) << got.status().message();
  const std::vector<float> want = ReferenceOutput(path);
  ASSERT_EQ((*got)[0].size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>((*got)[0][i]) - want[i]));
  }
  std::printf(
      "int8 ResNet-50 w16, passes run, vs onnxruntime: max abs error %.3g (one step %.3g)\n", worst,
      step);
  EXPECT_LE(worst, step * (1 + 1e-4));
  // The tasks: the float network's convs (their sizes, stride and pad; the int8 ones have no
  // residual or activation of their own), each with zero points 0 for the tuner.
  auto sizes = [](const std::vector<tuner::WorkloadLayer>& layers, const char* name) {
    std::map<std::vector<int64_t>, int> out;
    for (const auto& t : layers) {
      if (t.template_name != name) continue;
      if (std::string(name) == "conv2d_int8") {
        EXPECT_EQ(t.shape.size(), 12u) << t.name;
        EXPECT_EQ(t.shape[9], 0) << t.name;
        EXPECT_EQ(t.shape[10], 0) << t.name;
      }
      out[std::vector<int64_t>(t.shape.begin(), t.shape.begin() + 9)] += t.count;
    }
    return out;
  };
  const std::string float_path = MakeModel("r50w16_bn.onnx", "resnet50 --width 16 --bn explicit");
  auto f = ImportOnnx(float_path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_TRUE(RunPasses(*f, DefaultPasses()).ok());
  const auto int8 = sizes(ExtractTasks(fused), "conv2d_int8");
  EXPECT_EQ(int8, sizes(ExtractTasks(*f), "conv2d"));
  EXPECT_EQ(int8.size(), 23u);
}

// fuse_qdq_conv on a conv written by hand as other quantizers write it: a float bias (rounded to
// steps of x_scale * w_scale), a Relu before a quantize of zero point 0 (the uint8 clamp does its
// work), a data zero point of 128 and padding (the border reads the zero point). The graph
// computes what it did before within one step of its uint8 output; with a zero point of 3 on the
// output the Relu is not the clamp's to do, and the conv stays.
Graph HandWrittenQdqConv(uint8_t y_zero) {
  Graph g;
  g.opset = 13;
  auto add = [&](const char* op, std::vector<int> in, const char* out_name) {
    Node n;
    n.name = std::string(op) + "_" + out_name;
    n.op = op;
    n.inputs = std::move(in);
    Value out;
    out.name = out_name;
    n.outputs = {g.AddValue(out)};
    if (n.op == "DequantizeLinear" && g.values[n.inputs[0]].dtype == DType::kInt8) {
      n.SetInt("axis", 0);
    }
    if (n.op == "Conv") n.SetInts("pads", {1, 1, 1, 1});
    EXPECT_TRUE(InferNode(g, n).ok()) << n.name;
    g.nodes.push_back(n);
    return n.outputs[0];
  };
  Value x;
  x.name = "x";
  x.shape = {1, 6, 5, 7};
  const int xi = g.AddValue(x);
  g.inputs = {xi};
  const int k = 5;
  std::vector<uint8_t> w(k * 6 * 9);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<uint8_t>(static_cast<int8_t>((i * 37) % 255 - 127));
  std::vector<float> ws = {0.01f, 0.02f, 0.015f, 0.03f, 0.005f},
                     bias = {0.3f, -0.2f, 0.05f, -1.0f, 0.7f};
  const int xs = g.AddFloatConstant("xs", {}, {2.0f / 255});
  const int xz = g.AddConstant("xz", DType::kUint8, {}, {128});
  const int wq = g.AddConstant("wq", DType::kInt8, {k, 6, 3, 3}, w);
  const int wsc = g.AddFloatConstant("ws", {k}, ws);
  const int b = g.AddFloatConstant("b", {k}, bias);
  const int ys = g.AddFloatConstant("ys", {}, {0.05f});
  const int yz = g.AddConstant("yz", DType::kUint8, {}, {y_zero});
  const int q = add("QuantizeLinear", {xi, xs, xz}, "xq");
  const int xd = add("DequantizeLinear", {q, xs, xz}, "xd");
  const int wd = add("DequantizeLinear", {wq, wsc}, "wd");
  const int conv = add("Conv", {xd, wd, b}, "conv");
  const int relu = add("Relu", {conv}, "relu");
  const int yq = add("QuantizeLinear", {relu, ys, yz}, "yq");
  g.outputs = {add("DequantizeLinear", {yq, ys, yz}, "y")};
  return g;
}

TEST(PassesTest, AQdqConvWithAFloatBiasAndARelu) {
  std::vector<float> x(6 * 5 * 7);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 53) % 101) / 50.0f - 1.0f;
  for (uint8_t y_zero : {0, 3}) {
    SCOPED_TRACE(static_cast<int>(y_zero));
    Graph g = HandWrittenQdqConv(y_zero);
    auto want = Interpret(g, {x});
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(FuseQdqConv(g).ok());
    EXPECT_EQ(Ops(g).count("QLinearConv"), y_zero == 0 ? 1u : 0u);
    EXPECT_EQ(Ops(g).count("Relu"), y_zero == 0 ? 0u : 1u);
    auto got = Interpret(g, {x});
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ((*got)[0].size(), (*want)[0].size());
    int off = 0;
    for (size_t i = 0; i < (*got)[0].size(); ++i) {
      EXPECT_NEAR((*got)[0][i], (*want)[0][i], 0.05 * 1.0001) << i;
      off += (*got)[0][i] != (*want)[0][i];
    }
    EXPECT_LE(off, 4) << "a step off only where a sum falls near a half";
  }
}

// MobileNet's ReLU6: a Clip from 0 to 6 after a conv (a plain one, then a depthwise one) becomes
// the conv's relu6 activation; a Clip to another range stays a node. The depthwise conv is then
// the depthwise_conv2d template's task (activation 2), kept blocked after the blocked conv before
// it, its weight packed as [C/cb, 1, R, S, cb]; the graph computes the same before the pass, after
// it and after the layout rewrite (the host's blocked depthwise path).
TEST(PassesTest, AReluSixClipIsTheConvsActivationAndADepthwiseConvStaysBlocked) {
  Graph g;
  g.opset = 13;
  auto add = [&](const char* op, std::vector<int> in, const char* out_name,
                 std::vector<float> clip = {}) {
    Node n;
    n.name = std::string(op) + "_" + out_name;
    n.op = op;
    n.inputs = std::move(in);
    Value out;
    out.name = out_name;
    n.outputs = {g.AddValue(out)};
    if (n.op == "Conv") {
      const int64_t r = g.values[n.inputs[1]].shape[2];
      n.SetInts("pads", std::vector<int64_t>(4, r / 2));
      if (g.values[n.inputs[1]].shape[1] == 1) n.SetInt("group", g.values[n.inputs[1]].shape[0]);
    }
    if (!clip.empty()) {
      n.SetFloat("min", clip[0]);
      n.SetFloat("max", clip[1]);
    }
    EXPECT_TRUE(InferNode(g, n).ok()) << n.name;
    g.nodes.push_back(n);
    return n.outputs[0];
  };
  auto weights = [&](const char* name, std::vector<int64_t> shape, int seed) {
    std::vector<float> w(static_cast<size_t>(NumElements(shape)));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37 + seed) % 23) / 5 - 2;
    return g.AddFloatConstant(name, shape, w);
  };
  Value x;
  x.name = "x";
  x.shape = {1, 3, 9, 8};
  g.inputs = {g.AddValue(x)};
  const int c1 = add("Conv", {g.inputs[0], weights("w1", {10, 3, 3, 3}, 1)}, "c1");
  const int r1 = add("Clip", {c1}, "r1", {0, 6});
  const int c2 = add("Conv", {r1, weights("w2", {10, 1, 3, 3}, 2)}, "c2");
  const int r2 = add("Clip", {c2}, "r2", {0, 6});
  const int c3 = add("Conv", {r2, weights("w3", {4, 10, 1, 1}, 3)}, "c3");
  g.outputs = {add("Clip", {c3}, "y", {0, 5})};
  std::vector<float> in(3 * 9 * 8);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 53) % 101) / 25 - 2;
  auto want = Interpret(g, {in});
  ASSERT_TRUE(want.ok()) << want.status().message();
  int six = 0;
  for (float v : (*want)[0]) six += v == 5.0f;
  ASSERT_GT(six, 0) << "some outputs are clamped";

  ASSERT_TRUE(FuseConv(g).ok());
  EXPECT_EQ(Ops(g)["FusedConv"], 3);
  EXPECT_EQ(Ops(g)["Clip"], 1) << "the Clip to [0, 5] stays";
  std::vector<std::string> acts;
  for (const Node& n : g.nodes) {
    if (n.op == "FusedConv") acts.push_back(n.String("activation", ""));
  }
  EXPECT_EQ(acts, (std::vector<std::string>{"relu6", "relu6", "none"}));
  auto fused = Interpret(g, {in});
  ASSERT_TRUE(fused.ok()) << fused.status().message();
  ASSERT_EQ((*fused)[0].size(), (*want)[0].size());
  for (size_t i = 0; i < (*want)[0].size(); ++i) EXPECT_NEAR((*fused)[0][i], (*want)[0][i], 1e-4);

  const auto t = TaskOf(g, g.nodes[1]);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->template_name, "depthwise_conv2d");
  EXPECT_EQ(t->shape, (std::vector<int64_t>{1, 10, 9, 8, 3, 3, 1, 1, 2}));
  const LayoutPlan plan = PlanLayouts(g, Layouts::kBlocked);
  EXPECT_EQ(plan.conv, (std::vector<int64_t>{2, 1, 1, 0}));
  ASSERT_TRUE(RewriteLayouts(g, plan, 8).ok());
  const Node* dw = nullptr;
  for (const Node& n : g.nodes) {
    if (n.op == "FusedConv" && n.Int("group", 1) > 1) dw = &n;
  }
  ASSERT_NE(dw, nullptr);
  EXPECT_EQ(g.values[dw->inputs[1]].shape, (std::vector<int64_t>{2, 1, 3, 3, 8}));
  const auto bt = TaskOf(g, *dw);
  ASSERT_TRUE(bt.has_value());
  EXPECT_EQ(bt->shape, (std::vector<int64_t>{1, 10, 9, 8, 3, 3, 1, 1, 2, 1}));
  auto blocked = Interpret(g, {in});
  ASSERT_TRUE(blocked.ok()) << blocked.status().message();
  ASSERT_EQ((*blocked)[0].size(), (*want)[0].size());
  for (size_t i = 0; i < (*want)[0].size(); ++i) EXPECT_NEAR((*blocked)[0][i], (*want)[0][i], 1e-4);
}

TEST(PassesTest, ConstantFoldingRemovesShapeArithmetic) {
  const std::string path = MakeModel("shapes.onnx", "shapes");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  auto ops = Ops(*g);
  for (const char* op : {"Constant", "ConstantOfShape", "Shape", "Concat", "Unsqueeze"}) {
    EXPECT_EQ(ops.count(op), 0u) << op;
  }
  auto got = Interpret(*g, {SeededInput(path)});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_LE(Compare((*got)[0], ReferenceOutput(path), "shapes vs onnxruntime"), 1.0);
}

// ResNet-50 (torchvision's definition: stride on each stage's first 3x3), batch 1, 224x224:
// every convolution in network order as N,C,H,W,K,R,S,stride,pad[,residual[,activation]], then
// the classifier. Written out by hand, not generated, so the workload is checked against it. The
// projection shortcuts have no ReLU (activation 0; before the built-in graph became the workload,
// `--workload resnet50` tuned them with one). With blocked layouts (layout_plan.h) every conv
// names its layout (residual and activation then always written): the stem reads the NCHW input
// (layout 2), every other conv blocked data (layout 1; the max-pool keeps it blocked).
std::vector<std::pair<std::string, std::vector<int64_t>>> ResNet50ByHand(Layouts layouts) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> l;
  auto conv = [&](std::vector<int64_t> s) {
    if (layouts == Layouts::kBlocked) {
      if (s.size() < 10) s.push_back(0);
      if (s.size() < 11) s.push_back(1);
      s.push_back(l.empty() ? 2 : 1);
    }
    l.push_back({"conv2d", std::move(s)});
  };
  conv({1, 3, 224, 224, 64, 7, 7, 2, 3});
  // layer1: 56x56, 3 blocks 64 -> 256
  conv({1, 64, 56, 56, 64, 1, 1, 1, 0});
  conv({1, 64, 56, 56, 64, 3, 3, 1, 1});
  conv({1, 64, 56, 56, 256, 1, 1, 1, 0, 1});
  conv({1, 64, 56, 56, 256, 1, 1, 1, 0, 0, 0});  // projection shortcut: no ReLU
  for (int b = 0; b < 2; ++b) {
    conv({1, 256, 56, 56, 64, 1, 1, 1, 0});
    conv({1, 64, 56, 56, 64, 3, 3, 1, 1});
    conv({1, 64, 56, 56, 256, 1, 1, 1, 0, 1});
  }
  // layer2: 56 -> 28, 4 blocks 128 -> 512
  conv({1, 256, 56, 56, 128, 1, 1, 1, 0});
  conv({1, 128, 56, 56, 128, 3, 3, 2, 1});
  conv({1, 128, 28, 28, 512, 1, 1, 1, 0, 1});
  conv({1, 256, 56, 56, 512, 1, 1, 2, 0, 0, 0});  // projection shortcut
  for (int b = 0; b < 3; ++b) {
    conv({1, 512, 28, 28, 128, 1, 1, 1, 0});
    conv({1, 128, 28, 28, 128, 3, 3, 1, 1});
    conv({1, 128, 28, 28, 512, 1, 1, 1, 0, 1});
  }
  // layer3: 28 -> 14, 6 blocks 256 -> 1024
  conv({1, 512, 28, 28, 256, 1, 1, 1, 0});
  conv({1, 256, 28, 28, 256, 3, 3, 2, 1});
  conv({1, 256, 14, 14, 1024, 1, 1, 1, 0, 1});
  conv({1, 512, 28, 28, 1024, 1, 1, 2, 0, 0, 0});  // projection shortcut
  for (int b = 0; b < 5; ++b) {
    conv({1, 1024, 14, 14, 256, 1, 1, 1, 0});
    conv({1, 256, 14, 14, 256, 3, 3, 1, 1});
    conv({1, 256, 14, 14, 1024, 1, 1, 1, 0, 1});
  }
  // layer4: 14 -> 7, 3 blocks 512 -> 2048
  conv({1, 1024, 14, 14, 512, 1, 1, 1, 0});
  conv({1, 512, 14, 14, 512, 3, 3, 2, 1});
  conv({1, 512, 7, 7, 2048, 1, 1, 1, 0, 1});
  conv({1, 1024, 14, 14, 2048, 1, 1, 2, 0, 0, 0});  // projection shortcut
  for (int b = 0; b < 2; ++b) {
    conv({1, 2048, 7, 7, 512, 1, 1, 1, 0});
    conv({1, 512, 7, 7, 512, 3, 3, 1, 1});
    conv({1, 512, 7, 7, 2048, 1, 1, 1, 0, 1});
  }
  l.push_back({"dense", {1, 2048, 1000}});
  return l;
}

class BuiltinWorkloadTest : public ::testing::TestWithParam<Layouts> {};

TEST_P(BuiltinWorkloadTest, ResNet50HasTheNetworksDistinctLayersAndCounts) {
  auto layers = MakeWorkload("resnet50", GetParam());
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  std::map<std::pair<std::string, std::vector<int64_t>>, int> want;
  for (const auto& [tmpl, shape] : ResNet50ByHand(GetParam())) ++want[{tmpl, shape}];
  std::map<std::pair<std::string, std::vector<int64_t>>, int> got;
  int convs = 0;
  for (const auto& l : *layers) {
    EXPECT_EQ(got.count({l.template_name, l.shape}), 0u) << l.name << " listed twice";
    got[{l.template_name, l.shape}] = l.count;
    if (l.template_name == "conv2d") convs += l.count;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(convs, 53);
  EXPECT_EQ(layers->size(), want.size());
  // Names say where each layer first occurs.
  EXPECT_EQ(layers->front().name, "conv1");
  EXPECT_EQ(layers->back().name, "fc");
  bool found = false;
  for (const auto& l : *layers) {
    if (l.template_name == "conv2d" && l.shape.size() >= 9 &&
        std::vector<int64_t>(l.shape.begin(), l.shape.begin() + 9) ==
            std::vector<int64_t>{1, 128, 56, 56, 128, 3, 3, 2, 1}) {
      EXPECT_EQ(l.name, "layer2.0.conv2");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

INSTANTIATE_TEST_SUITE_P(Layouts, BuiltinWorkloadTest,
                         ::testing::Values(Layouts::kBlocked, Layouts::kNchw),
                         [](const auto& info) { return std::string(LayoutsName(info.param)); });

TEST(BuiltinWorkloadsTest, AnUnknownWorkloadNamesTheKnownOnes) {
  auto w = MakeWorkload("vgg16");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("resnet50"), std::string::npos);
}

TEST(TasksTest, ImportedResNet50HasTheTasksOfTheBuiltInWorkload) {
  const std::string path = MakeModel("r50.onnx", "resnet50");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  for (Layouts layouts : {Layouts::kBlocked, Layouts::kNchw}) {
    const auto imported = ExtractTasks(*g, layouts);
    auto builtin = MakeWorkload("resnet50", layouts);
    ASSERT_TRUE(builtin.ok());
    ASSERT_EQ(imported.size(), builtin->size());
    for (size_t i = 0; i < imported.size(); ++i) {
      EXPECT_EQ(imported[i].name, (*builtin)[i].name);
      EXPECT_EQ(imported[i].template_name, (*builtin)[i].template_name);
      EXPECT_EQ(imported[i].shape, (*builtin)[i].shape) << imported[i].name;
      EXPECT_EQ(imported[i].count, (*builtin)[i].count) << imported[i].name;
    }
  }
  const GraphStats s = Stats(*g);
  EXPECT_NEAR(s.params / 1e6, 25.53, 0.01);
  EXPECT_NEAR(s.flops / 2e9, 4.09, 0.02);  // GMAC
}

// No two values whose lifetimes overlap share a buffer, and every buffer holds its values.
void ExpectValidPlan(const Graph& g, const StoragePlan& plan) {
  const int end = static_cast<int>(g.nodes.size());
  std::vector<int> first(g.values.size(), -1), last(g.values.size(), -1);
  for (int k = 0; k < end; ++k) {
    for (int i : g.nodes[k].inputs) {
      if (i >= 0) last[i] = std::max(last[i], k);
    }
    for (int o : g.nodes[k].outputs) first[o] = k;
  }
  for (int o : g.outputs) last[o] = end;
  for (int i : g.inputs) last[i] = end;
  for (size_t a = 0; a < g.values.size(); ++a) {
    if (plan.storage_of[a] < 0) continue;
    EXPECT_GE(plan.storage_bytes[plan.storage_of[a]], g.values[a].bytes()) << g.values[a].name;
    for (size_t b = a + 1; b < g.values.size(); ++b) {
      if (plan.storage_of[a] != plan.storage_of[b]) continue;
      ASSERT_FALSE(g.values[a].is_const() || g.values[b].is_const())
          << g.values[a].name << " and " << g.values[b].name << " share a param's storage";
      const bool apart =
          std::max(last[a], first[a]) < first[b] || std::max(last[b], first[b]) < first[a];
      EXPECT_TRUE(apart) << g.values[a].name << " and " << g.values[b].name << " overlap";
    }
  }
}

TEST(StoragePlanTest, ResNet50NeedsAtMostTvmsActivationMemory) {
  const std::string path = MakeModel("r50.onnx", "resnet50");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  const StoragePlan plan = PlanStorage(*g);
  ExpectValidPlan(*g, plan);
  std::printf("resnet50: activations %.2f MB in %zu buffers, params %.1f MB\n",
              plan.activation_bytes / 1e6, plan.storage_bytes.size(), plan.param_bytes / 1e6);
  EXPECT_LE(plan.activation_bytes, 9.8e6);
}

TEST(StoragePlanTest, SmallModelPlanIsValid) {
  const std::string path = MakeModel("small_bn.onnx", "small --bn explicit");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ExpectValidPlan(*g, PlanStorage(*g));  // before the passes: BN, relu and adds of their own
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  ExpectValidPlan(*g, PlanStorage(*g));
}

TEST(ImportTest, RefusesAnUnsupportedOperatorByNodeName) {
  const std::string path = MakeModel("unsupported.onnx", "unsupported");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("operator Hardmax at node 'hardmax'"), std::string::npos)
      << g.status().message();
}

TEST(ImportTest, ADynamicDimensionNeedsAShape) {
  const std::string path = MakeModel("dynamic.onnx", "dynamic");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("input 'input' has a dynamic dimension 'N'"),
            std::string::npos)
      << g.status().message();
  auto shaped = ImportOnnx(path, {.shapes = {{"input", {2, 3, 8, 8}}}});
  ASSERT_TRUE(shaped.ok()) << shaped.status().message();
  EXPECT_EQ(shaped->values[shaped->outputs[0]].shape, (std::vector<int64_t>{2, 4, 8, 8}));
  auto wrong = ImportOnnx(path, {.shapes = {{"image", {2, 3, 8, 8}}}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'image', which is not an input of the model "
                                          "(inputs: input)"),
            std::string::npos)
      << wrong.status().message();
}

TEST(ImportTest, ReadsOldIrWithInitializersAmongTheInputs) {
  const std::string path = MakeModel("old_ir.onnx", "old-ir");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->inputs.size(), 1u);
  auto got = Interpret(*g, {SeededInput(path)});
  ASSERT_TRUE(got.ok());
  EXPECT_LE(Compare((*got)[0], ReferenceOutput(path), "old IR vs onnxruntime"), 1.0);
}

// The small network declared as the pinned onnx's newest opset and IR version (what exporters
// write today) imports and computes exactly what its opset 13 copy computes.
TEST(ImportTest, ReadsTheNewestOpsetAndIrVersionOfThePinnedOnnx) {
  const std::string old = MakeModel("small.onnx", "small");
  const std::string newest = MakeModel("small_newest.onnx", "small --opset newest --ir newest");
  ASSERT_FALSE(old.empty() || newest.empty());
  auto a = ImportOnnx(old);
  auto b = ImportOnnx(newest);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(a->opset, 13);
  EXPECT_EQ(b->opset, kMaxOpset);
  const std::vector<float> x = SeededInput(old);
  auto ya = Interpret(*a, {x});
  auto yb = Interpret(*b, {x});
  ASSERT_TRUE(ya.ok()) << ya.status().message();
  ASSERT_TRUE(yb.ok()) << yb.status().message();
  EXPECT_EQ((*ya)[0], (*yb)[0]);
}

// The operator table against the pinned onnx release: its newest opset is kMaxOpset, each row
// starts at a version of its operator (or at opset 7 or below), and a row that stops before
// kMaxOpset stops before a version that exists. A newer onnx pin fails here until the rows are
// checked against its new versions.
TEST(OpTableTest, RowsFollowThePinnedOnnxsVersionsOfTheirOperators) {
  std::string ops;
  for (const std::string& op : SupportedOps()) {
    if (!FindOp(op)->from_passes) ops += " " + op;
  }
  const std::string out = testing::RunModelPython(
      "import json, sys\n"
      "import onnx.defs as d\n"
      "versions = {}\n"
      "for s in d.get_all_schemas_with_history():\n"
      "    if s.domain == '' and s.name in sys.argv[1:]:\n"
      "        versions.setdefault(s.name, []).append(s.since_version)\n"
      "print(json.dumps({'newest': d.onnx_opset_version(), 'versions': versions}))\n",
      ops);
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["newest"].get<int>(), kMaxOpset)
      << "the pinned onnx knows a newer opset: check every row against its new versions";
  for (const std::string& op : SupportedOps()) {
    const OpDef* def = FindOp(op);
    if (def->from_passes) continue;
    ASSERT_TRUE(j["versions"].contains(op)) << "onnx knows no operator " << op;
    std::vector<int> v = j["versions"][op].get<std::vector<int>>();
    std::sort(v.begin(), v.end());
    const bool starts_at_a_version =
        def->since_opset <= kMinOpset || std::find(v.begin(), v.end(), def->since_opset) != v.end();
    EXPECT_TRUE(starts_at_a_version) << op << " since " << def->since_opset;
    int newest = 0;
    for (int x : v) newest = x <= kMaxOpset ? std::max(newest, x) : newest;
    if (def->until_opset < kMaxOpset) {
      EXPECT_GT(newest, def->until_opset) << op << " stops at opset " << def->until_opset
                                          << " though onnx has no newer version of it";
    }
  }
}

TEST(ImportTest, ReadsExternalData) {
  const std::string path = MakeModel("external.onnx", "external");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto got = Interpret(*g, {SeededInput(path)});
  ASSERT_TRUE(got.ok());
  EXPECT_LE(Compare((*got)[0], ReferenceOutput(path), "external data vs onnxruntime"), 1.0);
}

}  // namespace
}  // namespace crosstune::model
