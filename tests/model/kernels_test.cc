// The generated kernels (kernels.h), compiled for this machine and run in this process on the
// values the host interpreter computes: every node of every supported operator's ONNX node test,
// after the passes (so fused convs and dense nodes run through the generic kernels too), each
// kernel once serially and once split over a pool of threads as the server runs it. And the
// tables agree: every operator a compiled graph can hold has a kernel row.
#include "crosstune/model/kernels.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "crosstune/model/layout_plan.h"
#include "crosstune/model/ops.h"
#include "crosstune/model/passes.h"
#include "crosstune/server/parallel_pool.h"
#include "loaded_kernel.h"
#include "testdata_cases.h"

namespace crosstune::model {
namespace {

using testing::Loaded;

// The server's thread pool (the session's, kernel_abi.h's ct_runtime) with 4 threads, counting
// what the kernels ask of it.
class TestRuntime {
 public:
  static constexpr int kThreads = 4;
  TestRuntime() { pool_.SetThreads(kThreads); }
  const ct_runtime* runtime() const { return &abi_.rt; }
  int asked() const { return asked_; }
  int launches() const { return launches_; }

 private:
  struct Abi {
    ct_runtime rt;  // first member: a ct_runtime* is an Abi*
    TestRuntime* self;
  };
  static int32_t NumThreads(const ct_runtime* rt) {
    TestRuntime* self = reinterpret_cast<const Abi*>(rt)->self;
    ++self->asked_;
    return self->pool_.runtime()->num_threads(self->pool_.runtime());
  }
  static int32_t Launch(const ct_runtime* rt, ct_parallel_body body, void* closure,
                        int32_t num_tasks) {
    TestRuntime* self = reinterpret_cast<const Abi*>(rt)->self;
    ++self->launches_;
    return self->pool_.Launch(body, closure, num_tasks);
  }
  server::ParallelPool pool_{kThreads};
  Abi abi_{{CT_RUNTIME_VERSION, NumThreads, Launch}, this};
  std::atomic<int> asked_{0}, launches_{0};
};

// Runs the node's kernel on fresh outputs and checks them against the interpreter's values.
void RunAndCheck(Graph& g, const Node& n, const Loaded& lib, const GeneratedKernel& k,
                 const char* how) {
  std::vector<Value> outs;
  std::vector<Value*> args;
  for (int i : n.inputs) {
    if (i >= 0) args.push_back(&g.values[i]);
  }
  for (int o : n.outputs) {
    Value v = g.values[o];
    v.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(v.bytes()), 0xAB);
    outs.push_back(std::move(v));
  }
  for (Value& v : outs) args.push_back(&v);
  ASSERT_EQ(lib.Call(args), 0) << n.name << " (" << how << ")";
  for (size_t o = 0; o < outs.size(); ++o) {
    const Value& want = g.values[n.outputs[o]];
    if (want.dtype != DType::kFloat32) {
      EXPECT_EQ(*outs[o].data, *want.data) << n.name << " (" << how << ")";
      continue;
    }
    int bad = 0;
    for (int64_t e = 0; e < want.elements(); ++e) {
      const double w = want.floats()[e], got = outs[o].floats()[e];
      if (!(std::fabs(got - w) <= 1e-5 + 1e-4 * std::fabs(w))) ++bad;
    }
    EXPECT_EQ(bad, 0) << n.op << " node '" << n.name << "' (" << how << "): " << bad << " of "
                      << want.elements() << " elements differ\n"
                      << k.source;
  }
}

class KernelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(KernelTest, GeneratedKernelsComputeWhatTheInterpreterDoes) {
  const auto dir = testing::NodeTestDir(GetParam());
  const std::vector<Value> inputs = testing::ReadSet(dir / "test_data_set_0", "input_");
  std::vector<Value> feed;
  auto g = testing::ImportNodeTest(dir, inputs, &feed);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  if (g->nodes.empty()) {
    GTEST_SKIP() << GetParam() << ": the passes fold the whole graph into constants, so no "
                 << "kernel is left to run";
  }
  for (size_t i = 0; i < feed.size(); ++i) g->values[g->inputs[i]].data = feed[i].data;
  TestRuntime threads;
  for (Node& n : g->nodes) {
    // The interpreter's values for this node, then the kernel's outputs beside them.
    ASSERT_TRUE(EvalNode(*g, n).ok());
    auto k = GenerateKernel(*g, n);
    ASSERT_TRUE(k.ok()) << k.status().message();
    auto lib = Loaded::Compile(*k);
    ASSERT_TRUE(lib.ok()) << lib.status().message() << "\n" << k->source;
    RunAndCheck(*g, n, **lib, *k, "serial");
    ASSERT_TRUE((*lib)->SetRuntime(threads.runtime())) << n.name << ": no " CT_RUNTIME_SYMBOL;
    const int asked = threads.asked();
    RunAndCheck(*g, n, **lib, *k, "4 threads");
    EXPECT_GT(threads.asked(), asked) << n.name << ": the kernel never asked the runtime";
  }
  RecordProperty("parallel_launches", threads.launches());
}

// The narrow types (narrow_types.h): float32 to each, on the host and in a compiled Cast kernel,
// gives the codes numpy's ml_dtypes 0.7 gives (its casts do not saturate: saturate=0 here; the
// 4- and 2-bit integers: truncated, 0 out of range); saturate=1 takes infinities and 1e6 to the
// largest finite value; and every code of each type decodes the same on both sides and, but for
// the NaNs, encodes back to itself.
TEST(NarrowTypesTest, CastsMatchMlDtypesOnTheHostAndInTheKernel) {
  const std::vector<float> x = {0.3F,  1.7F,   2.5F,     -2.5F, 7.6F, 8.0F,
                                -9.2F, 100.0F, INFINITY, NAN,   -0.0F};
  struct Case {
    DType type;
    std::vector<int> codes;
  };
  const Case cases[] = {
      {DType::kFloat8E4M3FN, {42, 62, 66, 194, 79, 80, 209, 108, 127, 127, 128}},
      {DType::kFloat8E4M3FNUZ, {50, 70, 74, 202, 87, 88, 217, 116, 128, 128, 0}},
      {DType::kFloat8E5M2, {53, 63, 65, 193, 72, 72, 201, 86, 124, 126, 128}},
      {DType::kFloat8E5M2FNUZ, {57, 67, 69, 197, 76, 76, 205, 90, 128, 128, 0}},
      {DType::kFloat4E2M1, {1, 3, 4, 12, 7, 7, 15, 7, 7, 8, 8}},
      {DType::kBfloat16,
       {16026, 16346, 16416, 49184, 16627, 16640, 49427, 17096, 32640, 32704, 32768}},
      {DType::kInt4, {0, 1, 2, 14, 7, 0, 0, 0, 0, 0, 0}},
      {DType::kUint4, {0, 1, 2, 0, 7, 8, 0, 0, 0, 0, 0}},
      {DType::kInt2, {0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
      {DType::kUint2, {0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0}},
  };
  auto bytes_of = [](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    return std::make_shared<std::vector<uint8_t>>(b, b + n);
  };
  // One compiled Cast of `in` to `to` (saturate as given), run: the output's codes.
  auto kernel_cast = [&](const Value& in, DType to, bool saturate) {
    Graph g;
    g.opset = 21;
    Value y;
    y.name = "y";
    Node n;
    n.op = "Cast";
    n.name = "cast";
    n.SetInt("to", DTypeToOnnx(to));
    n.SetInt("saturate", saturate ? 1 : 0);
    n.inputs = {g.AddValue(in)};
    n.outputs = {g.AddValue(y)};
    EXPECT_TRUE(InferNode(g, n).ok());
    auto k = GenerateKernel(g, n);
    EXPECT_TRUE(k.ok()) << k.status().message();
    auto lib = Loaded::Compile(*k);
    EXPECT_TRUE(lib.ok()) << lib.status().message();
    Value out = g.values[n.outputs[0]];
    out.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out.bytes()), 0xAB);
    std::vector<Value*> args = {&g.values[n.inputs[0]], &out};
    EXPECT_EQ((*lib)->Call(args), 0);
    return out;
  };
  Value xs;
  xs.name = "x";
  xs.shape = {static_cast<int64_t>(x.size())};
  xs.data = bytes_of(x.data(), x.size() * 4);
  for (const Case& c : cases) {
    SCOPED_TRACE(DTypeName(c.type));
    const int es = DTypeBytes(c.type);
    std::vector<uint8_t> host(x.size() * es);
    for (size_t i = 0; i < x.size(); ++i) PutElement(c.type, host.data(), i, x[i], 0, false);
    const Value got = kernel_cast(xs, c.type, false);
    for (size_t i = 0; i < x.size(); ++i) {
      int h = host[i * es], k = (*got.data)[i * es];
      if (es == 2) {
        h |= host[i * es + 1] << 8;
        k |= (*got.data)[i * es + 1] << 8;
      }
      EXPECT_EQ(h, c.codes[i]) << "host, " << x[i];
      EXPECT_EQ(k, c.codes[i]) << "kernel, " << x[i];
    }
    // Every code: decoded alike on both sides, and encoded back to itself but for the NaNs.
    const int64_t codes =
        es == 2                                                                             ? 65536
        : c.type == DType::kFloat4E2M1 || c.type == DType::kInt4 || c.type == DType::kUint4 ? 16
        : c.type == DType::kInt2 || c.type == DType::kUint2                                 ? 4
                                                                                            : 256;
    Value all;
    all.name = "codes";
    all.dtype = c.type;
    all.shape = {codes};
    std::vector<uint8_t> raw(static_cast<size_t>(codes * es));
    for (int64_t v = 0; v < codes; ++v) {
      raw[v * es] = static_cast<uint8_t>(v);
      if (es == 2) raw[v * es + 1] = static_cast<uint8_t>(v >> 8);
    }
    all.data = bytes_of(raw.data(), raw.size());
    const std::vector<double> want = all.AsDoubles();
    const DType wide = WideType(c.type);
    const Value back = kernel_cast(all, wide, true);
    const std::vector<double> kernel = back.AsDoubles();
    int differ = 0, not_back = 0;
    for (int64_t v = 0; v < codes; ++v) {
      if (!(kernel[v] == want[v] || (kernel[v] != kernel[v] && want[v] != want[v]))) ++differ;
      if (want[v] != want[v]) continue;
      std::vector<uint8_t> again(es);
      PutElement(c.type, again.data(), 0, want[v], static_cast<int64_t>(want[v]), false);
      if (again != std::vector<uint8_t>(raw.begin() + v * es, raw.begin() + (v + 1) * es)) {
        // -0 of a type without it, and float4's -0, encode as 0x80 / 0x8: only +0 differs.
        if (want[v] != 0) ++not_back;
      }
    }
    EXPECT_EQ(differ, 0) << "codes the kernel decodes differently from the host";
    EXPECT_EQ(not_back, 0) << "codes that do not encode back to themselves";
  }
  // Saturating (ONNX's default): infinities and 1e6 to the largest finite float8, keeping signs.
  const std::vector<float> big = {INFINITY, -INFINITY, 1e6F, -1e6F};
  Value bs;
  bs.name = "big";
  bs.shape = {4};
  bs.data = bytes_of(big.data(), 16);
  const std::pair<DType, int> largest[] = {{DType::kFloat8E4M3FN, 0x7e},
                                           {DType::kFloat8E4M3FNUZ, 0x7f},
                                           {DType::kFloat8E5M2, 0x7b},
                                           {DType::kFloat8E5M2FNUZ, 0x7f}};
  for (const auto& [type, code] : largest) {
    SCOPED_TRACE(DTypeName(type));
    const Value got = kernel_cast(bs, type, true);
    EXPECT_EQ(*got.data, (std::vector<uint8_t>{
                             static_cast<uint8_t>(code), static_cast<uint8_t>(code | 0x80),
                             static_cast<uint8_t>(code), static_cast<uint8_t>(code | 0x80)}));
  }
}

// A constant of `t` and `shape` whose elements `value` gives in order; its id.
int AddTensor(Graph& g, const char* name, DType t, std::vector<int64_t> shape,
              const std::function<double()>& value) {
  Value v;
  v.name = name;
  v.dtype = t;
  v.shape = std::move(shape);
  std::vector<uint8_t> bytes(static_cast<size_t>(v.bytes()));
  for (int64_t i = 0; i < v.elements(); ++i) {
    const double d = value();
    PutElement(t, bytes.data(), static_cast<size_t>(i), d, static_cast<int64_t>(d));
  }
  v.data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return g.AddValue(std::move(v));
}

// QLinearConv and ConvInteger beyond the node tests' per-tensor cases: int8 data, a weight
// zero point and scale per output channel, two groups, stride 2, pads and a bias; the kernel
// against the host evaluation, element for element.
TEST(QuantConvKernelTest, PerChannelGroupedStridedConvsComputeWhatTheInterpreterDoes) {
  for (const char* op : {"QLinearConv", "ConvInteger"}) {
    SCOPED_TRACE(op);
    Graph g;
    g.opset = 13;
    uint32_t seed = 7;
    auto next = [&seed] { return (seed = seed * 1103515245 + 12345) >> 16; };
    auto tensor = [&](const char* name, DType t, std::vector<int64_t> shape,
                      const std::function<double()>& value) {
      return AddTensor(g, name, t, std::move(shape), value);
    };
    auto int8 = [&] { return static_cast<double>(static_cast<int>(next() % 256) - 128); };
    const int x = tensor("x", DType::kInt8, {1, 4, 9, 7}, int8);
    const int w = tensor("w", DType::kInt8, {6, 2, 3, 3}, int8);
    const int xz = tensor("xz", DType::kInt8, {}, [] { return 3.0; });
    const int wz = tensor("wz", DType::kInt8, {6}, [&] { return double(next() % 7) - 3; });
    Node n;
    n.op = op;
    n.name = "qconv";
    if (std::string(op) == "QLinearConv") {
      const int xs = tensor("xs", DType::kFloat32, {}, [] { return 0.02; });
      const int ws = tensor("ws", DType::kFloat32, {6}, [&] { return 0.001 * (1 + next() % 9); });
      const int ys = tensor("ys", DType::kFloat32, {}, [] { return 0.05; });
      const int yz = tensor("yz", DType::kUint8, {}, [] { return 128.0; });
      const int b = tensor("b", DType::kInt32, {6}, [&] { return double(next() % 2001) - 1000; });
      n.inputs = {x, xs, xz, w, ws, wz, ys, yz, b};
    } else {
      n.inputs = {x, w, xz, wz};
    }
    n.SetInt("group", 2);
    n.SetInts("strides", {2, 2});
    n.SetInts("pads", {1, 0, 1, 1});
    Value y;
    y.name = "y";
    n.outputs = {g.AddValue(y)};
    ASSERT_TRUE(InferNode(g, n).ok()) << InferNode(g, n).message();
    EXPECT_EQ(g.values[n.outputs[0]].shape, (std::vector<int64_t>{1, 6, 5, 3}));
    ASSERT_TRUE(EvalNode(g, n).ok());
    const std::vector<int64_t> host = g.values[n.outputs[0]].AsInts();
    EXPECT_GT(std::set<int64_t>(host.begin(), host.end()).size(), 10U) << "a varied output";
    auto k = GenerateKernel(g, n);
    ASSERT_TRUE(k.ok()) << k.status().message();
    auto lib = Loaded::Compile(*k);
    ASSERT_TRUE(lib.ok()) << lib.status().message() << "\n" << k->source;
    RunAndCheck(g, n, **lib, *k, "serial");
  }
}

// A QLinearConv the conv2d_int8 template takes (uint8 data with a zero point, int8 weight per
// channel, bias, pad 1, stride 2, C not a multiple of 4, K not one of the lanes) rewritten by
// RewriteInt8Convs: the Conv2dInt8 node's generated kernel, on the NHWC data the rewrite's
// Transpose makes, computes the QLinearConv's host evaluation within one step (the kernel
// scales in float32, the host in double) with the weight packed and the zero point's sums folded
// into the bias.
TEST(QuantConvKernelTest, AQLinearConvRewrittenAsConv2dInt8ComputesTheSame) {
  Graph g;
  g.opset = 13;
  uint32_t seed = 11;
  auto next = [&seed] { return (seed = seed * 1103515245 + 12345) >> 16; };
  auto tensor = [&](const char* name, DType t, std::vector<int64_t> shape,
                    const std::function<double()>& value) {
    return AddTensor(g, name, t, std::move(shape), value);
  };
  const int x = tensor("x", DType::kUint8, {1, 6, 9, 7}, [&] { return double(next() % 256); });
  const int xs = tensor("xs", DType::kFloat32, {}, [] { return 0.02; });
  const int xz = tensor("xz", DType::kUint8, {}, [] { return 120.0; });
  const int w = tensor("w", DType::kInt8, {5, 6, 3, 3}, [&] { return double(next() % 255) - 127; });
  const int ws = tensor("ws", DType::kFloat32, {5}, [&] { return 0.001 * (1 + next() % 9); });
  const int wz = tensor("wz", DType::kInt8, {}, [] { return 0.0; });
  const int ys = tensor("ys", DType::kFloat32, {}, [] { return 0.3; });
  const int yz = tensor("yz", DType::kUint8, {}, [] { return 100.0; });
  const int b = tensor("b", DType::kInt32, {5}, [&] { return double(next() % 20001) - 10000; });
  Node n;
  n.op = "QLinearConv";
  n.name = "qconv";
  n.inputs = {x, xs, xz, w, ws, wz, ys, yz, b};
  n.SetInts("strides", {2, 2});
  n.SetInts("pads", {1, 1, 1, 1});
  Value y;
  y.name = "y";
  n.outputs = {g.AddValue(y)};
  ASSERT_TRUE(InferNode(g, n).ok()) << InferNode(g, n).message();
  g.nodes.push_back(n);
  g.outputs = {n.outputs[0]};
  Graph rewritten = g;
  ASSERT_TRUE(EvalNode(g, g.nodes[0]).ok());
  const Value& want = g.values[g.outputs[0]];  // NCHW [1, 5, 5, 4]
  const std::vector<int64_t> host = want.AsInts();
  EXPECT_GT(std::set<int64_t>(host.begin(), host.end()).size(), 10U) << "a varied output";

  auto target = builder::ParseTarget("llvm -mtriple=x86_64-linux-gnu");
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(RewriteInt8Convs(rewritten, *target, 1).ok());
  ASSERT_EQ(rewritten.nodes.size(), 3u);
  EXPECT_EQ(rewritten.nodes[0].op, "Transpose");
  EXPECT_EQ(rewritten.nodes[2].op, "Transpose");
  Node& to_nhwc = rewritten.nodes[0];
  ASSERT_TRUE(EvalNode(rewritten, to_nhwc).ok());
  const Node& conv = rewritten.nodes[1];
  ASSERT_EQ(conv.op, "Conv2dInt8");
  auto k = GenerateKernel(rewritten, conv);
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto lib = Loaded::Compile(*k);
  ASSERT_TRUE(lib.ok()) << lib.status().message() << "\n" << k->source;
  std::vector<Value*> args;
  for (int i : conv.inputs) args.push_back(&rewritten.values[i]);
  Value out = rewritten.values[conv.outputs[0]];  // NHWC [1, 5, 4, 5]
  ASSERT_EQ(out.shape, (std::vector<int64_t>{1, 5, 4, 5}));
  out.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out.bytes()), 0xAB);
  args.push_back(&out);
  ASSERT_EQ((*lib)->Call(args), 0);
  int off = 0;
  for (int64_t c = 0; c < 5; ++c)
    for (int64_t h = 0; h < 5; ++h)
      for (int64_t wi = 0; wi < 4; ++wi) {
        const int got = (*out.data)[(h * 4 + wi) * 5 + c];
        const int64_t expected = host[(c * 5 + h) * 4 + wi];
        EXPECT_LE(std::abs(got - expected), 1) << c << "," << h << "," << wi;
        off += got != expected;
      }
  EXPECT_LE(off, 2) << "a step off only where a product falls near a half";
}

// Einsum in float32 as exporters write attention (the node tests are float64): QK^T and PV per
// batch and head, a shared weight, a diagonal, and "..." broadcasting a dimension of 1, each
// kernel against the interpreter, and the first against a product written out here.
TEST(EinsumKernelTest, TheAttentionFormsAndBroadcastsComputeWhatTheInterpreterDoes) {
  struct Case {
    const char* equation;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<int64_t> out;
  };
  const Case cases[] = {
      {"bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}, {2, 3, 4, 6}},
      {"bhqk,bhkd->bhqd", {{2, 3, 4, 6}, {2, 3, 6, 5}}, {2, 3, 4, 5}},
      {"bsh,hd", {{2, 4, 8}, {8, 3}}, {2, 3, 4}},  // implicit: the letters used once, sorted
      {"...ii->...i", {{3, 4, 4}}, {3, 4}},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 2}}, {2, 5, 3, 2}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    Graph g;
    g.opset = 13;
    Node n;
    n.op = "Einsum";
    n.name = "einsum";
    n.SetString("equation", c.equation);
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      Value v;
      v.name = "x" + std::to_string(i);
      v.shape = c.shapes[i];
      std::vector<float> d(static_cast<size_t>(NumElements(v.shape)));
      for (float& f : d)
        f = static_cast<float>((seed = seed * 1103515245 + 12345) >> 16) / 65536.0F - 0.5F;
      v.data = std::make_shared<std::vector<uint8_t>>(
          reinterpret_cast<const uint8_t*>(d.data()),
          reinterpret_cast<const uint8_t*>(d.data() + d.size()));
      n.inputs.push_back(g.AddValue(std::move(v)));
    }
    Value y;
    y.name = "y";
    n.outputs = {g.AddValue(y)};
    ASSERT_TRUE(InferNode(g, n).ok());
    EXPECT_EQ(g.values[n.outputs[0]].shape, c.out);
    ASSERT_TRUE(EvalNode(g, n).ok());
    if (std::string(c.equation) == "bhqd,bhkd->bhqk") {
      const float* q = g.values[n.inputs[0]].floats();
      const float* k = g.values[n.inputs[1]].floats();
      const float* s = g.values[n.outputs[0]].floats();
      // Element [1, 2, 3, 4]: row 3 of Q's batch 1, head 2 against row 4 of K's.
      double want = 0;
      for (int d = 0; d < 5; ++d)
        want += q[((1 * 3 + 2) * 4 + 3) * 5 + d] * k[((1 * 3 + 2) * 6 + 4) * 5 + d];
      EXPECT_NEAR(s[((1 * 3 + 2) * 4 + 3) * 6 + 4], want, 1e-5);
    }
    auto kernel = GenerateKernel(g, n);
    ASSERT_TRUE(kernel.ok()) << kernel.status().message();
    auto lib = Loaded::Compile(*kernel);
    ASSERT_TRUE(lib.ok()) << lib.status().message() << "\n" << kernel->source;
    RunAndCheck(g, n, **lib, *kernel, "serial");
  }
}

// An Einsum whose equation does not fit its inputs is refused by name.
TEST(EinsumKernelTest, AnEquationThatDoesNotFitItsInputsIsRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"ij,jk->ik", "Einsum node 'e': dimension 'j' is 3 in one place and 5 in another"},
      {"ij,kl->x", "Einsum node 'e': output letter 'x' is in no input"},
      {"ijk,jk->ik", "Einsum node 'e': input 0 'ijk' does not name the 2 dimensions"},
      {"ij", "Einsum node 'e': the equation 'ij' names 1 inputs, the node has 2"},
      {"i1,jk", "Einsum node 'e': input 0 has '1', not a letter"},
  };
  // (A product past 2^36: "ab,cd->" of two [65536, 65536] inputs.)
  {
    Graph g;
    g.opset = 13;
    Value a, b, y;
    a.name = "a";
    b.name = "b";
    a.shape = b.shape = {65536, 65536};
    y.name = "y";
    Node n;
    n.op = "Einsum";
    n.name = "e";
    n.SetString("equation", "ab,cd->");
    n.inputs = {g.AddValue(a), g.AddValue(b)};
    n.outputs = {g.AddValue(y)};
    EXPECT_EQ(InferNode(g, n).message(),
              "Einsum node 'e': the equation asks for more than 2^36 products ([] out, "
              "[65536,65536,65536,65536] summed)");
  }
  for (const auto& [equation, message] : cases) {
    Graph g;
    g.opset = 13;
    Value a, b, y;
    a.name = "a";
    a.shape = {2, 3};
    b.name = "b";
    b.shape = {5, 4};
    y.name = "y";
    Node n;
    n.op = "Einsum";
    n.name = "e";
    n.SetString("equation", equation);
    n.inputs = {g.AddValue(a), g.AddValue(b)};
    n.outputs = {g.AddValue(y)};
    EXPECT_EQ(InferNode(g, n).message(), message);
  }
}

// Gather's indices may come at run time: one out of range fails the call with a named error,
// and the kernel serves the next call.
TEST(GatherKernelTest, AnIndexOutOfRangeAtRunTimeFailsTheCallByName) {
  Graph g;
  g.opset = 13;
  Value data, idx, out;
  data.name = "data";
  data.shape = {5, 3};
  std::vector<float> d(15);
  for (int i = 0; i < 15; ++i) d[i] = static_cast<float>(i);
  data.data = std::make_shared<std::vector<uint8_t>>(
      reinterpret_cast<const uint8_t*>(d.data()), reinterpret_cast<const uint8_t*>(d.data() + 15));
  idx.name = "idx";
  idx.dtype = DType::kInt64;
  idx.shape = {2};
  out.name = "y";
  Node n;
  n.op = "Gather";
  n.name = "lookup";
  n.inputs = {g.AddValue(data), g.AddValue(idx)};
  n.outputs = {g.AddValue(out)};
  ASSERT_TRUE(InferNode(g, n).ok());
  EXPECT_EQ(g.values[n.outputs[0]].shape, (std::vector<int64_t>{2, 3}));
  auto k = GenerateKernel(g, n);
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto lib = Loaded::Compile(*k);
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  auto call = [&](std::vector<int64_t> at, std::vector<float>* got) {
    Value i = g.values[n.inputs[1]], y = g.values[n.outputs[0]];
    i.data =
        std::make_shared<std::vector<uint8_t>>(reinterpret_cast<const uint8_t*>(at.data()),
                                               reinterpret_cast<const uint8_t*>(at.data() + 2));
    y.data = std::make_shared<std::vector<uint8_t>>(24, 0);
    std::vector<Value*> args = {&g.values[n.inputs[0]], &i, &y};
    const int32_t rc = (*lib)->Call(args);
    got->assign(y.floats(), y.floats() + 6);
    return rc;
  };
  std::vector<float> got;
  EXPECT_NE(call({1, 99}, &got), 0);
  EXPECT_NE((*lib)->LastError().find("an index is out of range"), std::string::npos)
      << (*lib)->LastError();
  ASSERT_EQ(call({4, -5}, &got), 0);
  EXPECT_EQ(got, (std::vector<float>{12, 13, 14, 0, 1, 2}));
}

// Erf's and Gelu's float32 kernel computes erf without libm, so that it vectorizes: against
// erf in double over [-6, 6] (200,001 points), tiny arguments, zeros and infinities within 3e-7
// absolute error (relative to values above 1) and, for Erf, 4e-7 relative error (libm's erff is
// within about 1e-7); NaN stays NaN.
TEST(ArithmeticKernelTest, ErfWithoutLibmIsWithinThreeTenthsOfAMillionthOfErf) {
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i) x.push_back(static_cast<float>(-6.0 + i * 6e-5));
  for (int i = 0; i < 100; ++i) {
    const float tiny = 1e-30f * std::pow(1.9f, static_cast<float>(i));
    if (tiny < 1) x.insert(x.end(), {tiny, -tiny});
  }
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()});
  for (const char* op : {"Erf", "Gelu"}) {
    SCOPED_TRACE(op);
    Graph g;
    g.opset = 20;
    Value in, out;
    in.name = "x";
    in.shape = {static_cast<int64_t>(x.size())};
    in.data = std::make_shared<std::vector<uint8_t>>(
        reinterpret_cast<const uint8_t*>(x.data()),
        reinterpret_cast<const uint8_t*>(x.data() + x.size()));
    out.name = "y";
    Node n;
    n.op = op;
    n.name = "f";
    n.inputs = {g.AddValue(in)};
    n.outputs = {g.AddValue(out)};
    ASSERT_TRUE(InferNode(g, n).ok());
    auto k = GenerateKernel(g, n);
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ(k->source.find("__builtin_erf"), std::string::npos) << "no libm call";
    auto lib = Loaded::Compile(*k);
    ASSERT_TRUE(lib.ok()) << lib.status().message();
    Value y = g.values[n.outputs[0]];
    y.data = std::make_shared<std::vector<uint8_t>>(x.size() * 4, 0);
    std::vector<Value*> args = {&g.values[n.inputs[0]], &y};
    ASSERT_EQ((*lib)->Call(args), 0);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      if (std::isinf(v) && std::string(op) == "Gelu") continue;  // inf * 0 and inf * 1 in C
      const double want =
          std::string(op) == "Erf" ? std::erf(v) : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      const double got = y.floats()[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << v;
        continue;
      }
      EXPECT_LE(std::fabs(got - want), 3e-7 * std::max(1.0, std::fabs(want))) << v;
      // Gelu's 1 + erf loses the relative precision of its negative tail (as with libm).
      if (std::string(op) == "Erf") EXPECT_LE(std::fabs(got - want), 4e-7 * std::fabs(want)) << v;
    }
  }
}

// An integer divisor of 0 at run time fails the call with a named error instead of trapping,
// and the kernel serves the next call (Div and Mod, whose C operators would raise SIGFPE).
TEST(ArithmeticKernelTest, AnIntegerDivisorOfZeroAtRunTimeFailsTheCallByName) {
  for (const char* op : {"Div", "Mod"}) {
    SCOPED_TRACE(op);
    Graph g;
    g.opset = 13;
    Value a, b, out;
    a.name = "a";
    b.name = "b";
    a.dtype = b.dtype = DType::kInt32;
    a.shape = b.shape = {3};
    out.name = "y";
    Node n;
    n.op = op;
    n.name = "divide";
    n.inputs = {g.AddValue(a), g.AddValue(b)};
    n.outputs = {g.AddValue(out)};
    ASSERT_TRUE(InferNode(g, n).ok());
    auto k = GenerateKernel(g, n);
    ASSERT_TRUE(k.ok()) << k.status().message();
    auto lib = Loaded::Compile(*k);
    ASSERT_TRUE(lib.ok()) << lib.status().message();
    auto call = [&](std::vector<int32_t> divisor, std::vector<int32_t>* got) {
      const std::vector<int32_t> dividend = {7, -7, 9};
      Value x = g.values[n.inputs[0]], d = g.values[n.inputs[1]], y = g.values[n.outputs[0]];
      auto bytes = [](const std::vector<int32_t>& v) {
        return std::make_shared<std::vector<uint8_t>>(
            reinterpret_cast<const uint8_t*>(v.data()),
            reinterpret_cast<const uint8_t*>(v.data() + v.size()));
      };
      x.data = bytes(dividend);
      d.data = bytes(divisor);
      y.data = std::make_shared<std::vector<uint8_t>>(12, 0);
      std::vector<Value*> args = {&x, &d, &y};
      const int32_t rc = (*lib)->Call(args);
      const auto* p = reinterpret_cast<const int32_t*>(y.data->data());
      got->assign(p, p + 3);
      return rc;
    };
    std::vector<int32_t> got;
    EXPECT_NE(call({2, 0, 3}, &got), 0);
    EXPECT_NE((*lib)->LastError().find("integer division by zero"), std::string::npos)
        << (*lib)->LastError();
    ASSERT_EQ(call({2, 2, -4}, &got), 0);
    // Div truncates; Mod takes the divisor's sign.
    EXPECT_EQ(got, std::string(op) == "Div" ? (std::vector<int32_t>{3, -3, -2})
                                            : (std::vector<int32_t>{1, 1, -3}));
  }
}

INSTANTIATE_TEST_SUITE_P(OnnxTestData, KernelTest, ::testing::ValuesIn(testing::kCases),
                         [](const auto& info) { return std::string(info.param).substr(5); });

// Every operator a graph can still hold after constant folding has a kernel row (kernels.h), so
// a new operator without one fails here rather than at compile time on a user's model. An
// operator without a row must be one that never survives folding, and the reason is checked
// here on a node of it whose inputs are not constants: it is either refused (it needs constant
// inputs, so it is always folded) or it folds anyway.
TEST(KernelTableTest, EveryOperatorThatCanSurviveFoldingHasAKernelRow) {
  struct Folded {
    const char* op;
    std::vector<int64_t> input_shape;  // empty: no input
    DType input_dtype;
    const char* refused_with;  // null: the node infers and folds from its shapes alone
    int inputs = 1;            // each of input_shape and input_dtype
  };
  const Folded kAlwaysFolded[] = {
      {"Constant", {}, DType::kFloat32, nullptr},   // no inputs: folds at once
      {"Shape", {2, 3}, DType::kFloat32, nullptr},  // reads only its input's shape
      {"Size", {2, 3}, DType::kFloat32, nullptr},   // the same
      {"ConstantOfShape", {1}, DType::kInt64, "must be a constant known at compile time"},
      {"Range", {1}, DType::kInt64, "must be known at compile time", 3},
  };
  for (const Folded& f : kAlwaysFolded) {
    SCOPED_TRACE(f.op);
    Graph g;
    g.opset = 13;
    Node n;
    n.name = std::string("a_") + f.op;
    n.op = f.op;
    for (int i = 0; i < (f.input_shape.empty() ? 0 : f.inputs); ++i) {
      Value in;
      in.name = "x" + std::to_string(i);  // a graph input: no data
      in.dtype = f.input_dtype;
      in.shape = f.input_shape;
      n.inputs.push_back(g.AddValue(in));
      g.inputs.push_back(n.inputs.back());
    }
    if (std::string(f.op) == "Constant") n.SetFloat("value_float", 1.5f);
    Value out;
    out.name = "y";
    n.outputs.push_back(g.AddValue(out));
    Status s = InferNode(g, n);
    if (f.refused_with != nullptr) {
      EXPECT_NE(s.message().find(f.refused_with), std::string::npos) << s.ToString();
    } else {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_TRUE(CanFold(g, n)) << "a node of " << f.op << " can survive folding";
    }
    EXPECT_FALSE(HasGeneratedKernel(f.op)) << f.op << " has a kernel row: leave it out of here";
  }
  for (const std::string& op : SupportedOps()) {
    bool folded = false;
    for (const Folded& f : kAlwaysFolded) folded = folded || op == f.op;
    EXPECT_TRUE(folded || HasGeneratedKernel(op))
        << op << " is in the operator table (ops.h) but has no row in the kernel table "
        << "(model/src/kernels/registry.cc)";
  }
}

}  // namespace
}  // namespace crosstune::model
