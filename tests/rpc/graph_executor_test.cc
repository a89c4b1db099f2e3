// The graph executor in-process, over a fake module (C++ lambdas as its functions): argument
// binding, params used in place, the storage plan, scratch, and what each refusal says. The real
// thing (a library built by the builder, a package on a crosstune-server) is
// tests/builder/model_executor_test.cc.
#include "crosstune/server/graph_executor.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "crosstune/server/call_slot.h"

namespace crosstune::server {
namespace {

constexpr DLDataType kF32{kDLFloat, 32, 1};

using Kernel = std::function<int32_t(const ct_arg*, int32_t)>;

class FakeModule final : public Module {
 public:
  void Add(const std::string& name, const std::string& signature, Kernel k) {
    functions_.push_back({name, signature});
    kernels_.push_back(std::move(k));
  }
  std::string_view kind() const override { return "cpu"; }
  const std::string& target() const override { return target_; }
  const std::vector<msg::FunctionInfo>& functions() const override { return functions_; }
  Status Invoke(size_t index, const ct_arg* args, int32_t num_args, uint64_t times,
                int32_t* ret) override {
    *ret = 0;
    for (uint64_t i = 0; i < times && *ret == 0; ++i) *ret = kernels_[index](args, num_args);
    ++calls;
    return Status::Ok();
  }
  std::string LastError() const override { return "fake says no"; }
  int calls = 0;

 private:
  std::string target_ = "fake";
  std::vector<msg::FunctionInfo> functions_;
  std::vector<Kernel> kernels_;
};

float* F(const ct_arg& a) { return static_cast<float*>(a.value.v_tensor->data); }
int64_t Elems(const ct_arg& a) {
  int64_t n = 1;
  for (int i = 0; i < a.value.v_tensor->ndim; ++i) n *= a.value.v_tensor->shape[i];
  return n;
}

graph::Node Null(const std::string& name) {
  graph::Node n;
  n.op = std::string(graph::kNullOp);
  n.name = name;
  return n;
}

graph::Node Op(const std::string& name, const std::string& fn,
               std::vector<graph::EntryRef> inputs) {
  graph::Node n;
  n.op = std::string(graph::kTvmOp);
  n.name = name;
  n.func_name = fn;
  n.inputs = std::move(inputs);
  n.num_inputs = static_cast<uint32_t>(n.inputs.size());
  n.flops = 4;
  return n;
}

// x, w -> add(x, w) -> relu -> neg = y; add and neg share storage 2.
graph::Graph SmallGraph() {
  graph::Graph g;
  g.nodes = {Null("x"), Null("w"), Op("add", "ct_add", {{0, 0, 0}, {1, 0, 0}}),
             Op("relu", "ct_relu", {{2, 0, 0}}), Op("neg", "ct_neg", {{3, 0, 0}})};
  graph::FillIndex(&g);
  g.heads = {{4, 0, 0}};
  g.storage_id = {0, 1, 2, 3, 2};
  g.shape = {{1, 4}, {4}, {1, 4}, {1, 4}, {1, 4}};
  g.dltype = {kF32, kF32, kF32, kF32, kF32};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.storage_bytes = {16, 16, 16, 16};
  return g;
}

std::unique_ptr<FakeModule> SmallModule() {
  auto m = std::make_unique<FakeModule>();
  m->Add("ct_add", "ttt", [](const ct_arg* a, int32_t) {
    for (int64_t i = 0; i < Elems(a[2]); ++i) F(a[2])[i] = F(a[0])[i] + F(a[1])[i];
    return 0;
  });
  m->Add("ct_relu", "tt", [](const ct_arg* a, int32_t) {
    for (int64_t i = 0; i < Elems(a[1]); ++i) F(a[1])[i] = F(a[0])[i] > 0 ? F(a[0])[i] : 0;
    return 0;
  });
  m->Add("ct_neg", "tt", [](const ct_arg* a, int32_t) {
    for (int64_t i = 0; i < Elems(a[1]); ++i) F(a[1])[i] = -F(a[0])[i];
    return 0;
  });
  return m;
}

// params.bin bytes in 64-byte aligned memory that outlives the ParamsFile.
struct Params {
  char* bytes = nullptr;
  std::unique_ptr<pkg::ParamsFile> file;
  ~Params() {
    file.reset();
    std::free(bytes);
  }
};
void MakeParams(Params* p, const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
  pkg::ParamsWriter w;
  for (const auto& [name, v] : tensors) {
    ASSERT_TRUE(w.Add(name, kF32, {static_cast<int64_t>(v.size())}, v.data(), v.size() * 4).ok());
  }
  std::string s = w.Serialize();
  p->bytes = static_cast<char*>(std::aligned_alloc(64, (s.size() + 63) / 64 * 64));
  std::memcpy(p->bytes, s.data(), s.size());
  auto f = pkg::ParamsFile::FromBuffer(p->bytes, s.size());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  p->file = std::move(f).value();
}

// The executor takes the params file; the test keeps the bytes alive beside it.
Expected<std::unique_ptr<GraphExecutor>> Create(graph::Graph g, Params* p,
                                                std::unique_ptr<FakeModule> m,
                                                uint64_t limit = 1 << 20) {
  return GraphExecutor::Create("m.ctpkg", std::move(g), std::move(p->file), std::move(m), limit);
}

TEST(GraphExecutor, RunsNodesInOrder) {
  Params p;
  MakeParams(&p, {{"w", {1, -5, 2, -1}}});
  auto ex = Create(SmallGraph(), &p, SmallModule());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  GraphExecutor& e = **ex;
  ASSERT_EQ(e.inputs().size(), 1u);
  ASSERT_EQ(e.steps().size(), 3u);
  EXPECT_EQ(e.params_bytes(), 16u);
  EXPECT_EQ(e.flops(), 12u);
  EXPECT_EQ(e.steps()[0].shapes, "1x4, 4 -> 1x4");
  EXPECT_EQ(e.steps()[0].label, "'add' (ct_add)");
  // Activations: storage ids 0, 2 and 3 (1 is the param's), 64 bytes each after alignment.
  EXPECT_EQ(e.storage_bytes(), 3u * 64);
  auto in = e.FindInput("x");
  ASSERT_TRUE(in.ok());
  const float x[4] = {1, 2, 3, 4};
  std::memcpy((*in)->data, x, sizeof(x));
  (*in)->set = true;
  CallSlot slot;
  ASSERT_TRUE(e.Run(&slot).ok());
  EXPECT_TRUE(e.has_run());
  auto out = e.FindOutput("y", 0);
  ASSERT_TRUE(out.ok());
  const float* y = reinterpret_cast<const float*>((*out)->data);
  EXPECT_EQ(y[0], -2);
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], -5);
  EXPECT_EQ(y[3], -3);
  // The last node's label is in the slot, for the parent's crash report.
  EXPECT_STREQ(slot.node, "'neg' (ct_neg)");

  // What a cold timing evicts from the caches: the whole run's memory (the param w, then the
  // activations), and each step's own tensors (add: x, w -> 1x4).
  auto all = e.Buffers();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].size(), 16u);
  EXPECT_EQ(all[1].size(), 3u * 64);
  auto add = e.StepBuffers(0);
  ASSERT_EQ(add.size(), 3u);
  EXPECT_EQ(static_cast<const void*>(add[0].data()), static_cast<const void*>((*in)->data));
  EXPECT_EQ(static_cast<const void*>(add[1].data()), static_cast<const void*>(all[0].data()));
  for (auto bytes : add) EXPECT_EQ(bytes.size(), 16u);
}

TEST(GraphExecutor, BindsParamEntriesToTheMappedFile) {
  Params p;
  MakeParams(&p, {{"w", {1, 2, 3, 4}}});
  const char* begin = p.bytes;
  const pkg::ParamTensor w = p.file->tensors()[0];
  const void* w_data = p.file->data(w);
  const void* seen = nullptr;
  auto m = SmallModule();
  m->Add("ct_probe", "tt", [&](const ct_arg* a, int32_t) {
    seen = a[0].value.v_tensor->data;
    return 0;
  });
  graph::Graph g = SmallGraph();
  g.nodes[4] = Op("neg", "ct_probe", {{1, 0, 0}});  // reads w; writes storage 2 (add is dead)
  auto ex = Create(g, &p, std::move(m));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  ASSERT_TRUE((*ex)->FindInput("x").ok());
  (*(*ex)->FindInput("x"))->set = true;
  ASSERT_TRUE((*ex)->Run(nullptr).ok());
  // The tensor points into params.bin's own bytes: no copy.
  EXPECT_EQ(seen, w_data);
  EXPECT_GT(static_cast<const char*>(seen), begin);
}

TEST(GraphExecutor, PassesOneSharedScratchBufferLast) {
  Params p;
  MakeParams(&p, {{"w", {0, 0, 0, 0}}});
  graph::Graph g = SmallGraph();
  g.nodes[3].scratch_bytes = 100;
  g.nodes[4].scratch_bytes = 300;
  std::vector<std::pair<void*, int64_t>> scratch;
  auto m = std::make_unique<FakeModule>();
  Kernel ok = [](const ct_arg*, int32_t) { return 0; };
  Kernel record = [&](const ct_arg* a, int32_t n) {
    const DLTensor* t = a[n - 1].value.v_tensor;
    EXPECT_EQ(t->ndim, 1);
    EXPECT_EQ(t->dtype.code, kDLUInt);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 64, 0u);
    std::memset(t->data, 0xab, static_cast<size_t>(t->shape[0]));  // all of it is usable
    scratch.emplace_back(t->data, t->shape[0]);
    return 0;
  };
  m->Add("ct_add", "ttt", ok);
  m->Add("ct_relu", "ttt", record);
  m->Add("ct_neg", "ttt", record);
  auto ex = Create(g, &p, std::move(m));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  (*(*ex)->FindInput("x"))->set = true;
  ASSERT_TRUE((*ex)->Run(nullptr).ok());
  ASSERT_EQ(scratch.size(), 2u);
  EXPECT_EQ(scratch[0].first, scratch[1].first);
  EXPECT_EQ(scratch[0].second, 100);
  EXPECT_EQ(scratch[1].second, 300);
}

TEST(GraphExecutor, NamesTheNodeWhoseKernelFails) {
  Params p;
  MakeParams(&p, {{"w", {0, 0, 0, 0}}});
  auto m = SmallModule();
  auto* raw = m.get();
  graph::Graph g = SmallGraph();
  g.nodes[3].func_name = "ct_fail";
  m->Add("ct_fail", "tt", [](const ct_arg*, int32_t) { return 7; });
  auto ex = Create(g, &p, std::move(m));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  (*(*ex)->FindInput("x"))->set = true;
  Status s = (*ex)->Run(nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kKernelError);
  EXPECT_EQ(s.message(), "node 'relu' (ct_fail) of model 'm.ctpkg' returned 7: fake says no");
  EXPECT_EQ(raw->calls, 2);  // add, then relu; neg never ran
  EXPECT_FALSE((*ex)->has_run());
}

TEST(GraphExecutor, IsStrictAboutNamesAndUnsetInputs) {
  Params p;
  MakeParams(&p, {{"w", {0, 0, 0, 0}}});
  auto ex = Create(SmallGraph(), &p, SmallModule());
  ASSERT_TRUE(ex.ok());
  auto in = (*ex)->FindInput("data");
  EXPECT_EQ(in.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(in.status().message(), "m.ctpkg has no input 'data' (its inputs: x)");
  EXPECT_EQ((*ex)->FindOutput("logits", 0).status().message(),
            "m.ctpkg has no output 'logits' (its outputs: y)");
  EXPECT_FALSE((*ex)->FindOutput("", 1).ok());
  EXPECT_TRUE((*ex)->FindOutput("", 0).ok());
  Status unset = (*ex)->CheckInputsSet();
  EXPECT_NE(unset.message().find("input 'x' was never set"), std::string::npos);
}

TEST(GraphExecutor, RefusesBadPackagesBeforeAnythingRuns) {
  {  // a param the graph needs is missing, another is extra
    Params p;
    MakeParams(&p, {{"bias", {0}}});
    auto ex = Create(SmallGraph(), &p, SmallModule());
    ASSERT_FALSE(ex.ok());
    EXPECT_EQ(ex.status().message(),
              "m.ctpkg: params.bin lacks 1 param the graph needs: w; params.bin holds 1 param "
              "the graph does not use: bias");
  }
  {  // a function the library lacks
    Params p;
    MakeParams(&p, {{"w", {0, 0, 0, 0}}});
    graph::Graph g = SmallGraph();
    g.nodes[3].func_name = "ct_gone";
    auto ex = Create(g, &p, SmallModule());
    ASSERT_FALSE(ex.ok());
    EXPECT_NE(ex.status().message().find("'relu' calls 'ct_gone', which the library does not have"),
              std::string::npos);
  }
  {  // overlapping storage
    Params p;
    MakeParams(&p, {{"w", {0, 0, 0, 0}}});
    graph::Graph g = SmallGraph();
    g.storage_id[3] = 2;
    g.storage_bytes.pop_back();
    g.storage_id[4] = 3;
    g.storage_bytes.push_back(16);
    auto ex = Create(g, &p, SmallModule());
    ASSERT_FALSE(ex.ok());
    EXPECT_NE(ex.status().message().find("storage 2 holds add and relu at once"), std::string::npos)
        << ex.status().message();
  }
  {  // storage past the session's limit
    Params p;
    MakeParams(&p, {{"w", {0, 0, 0, 0}}});
    graph::Graph g = SmallGraph();
    g.storage_bytes[3] = uint64_t{1} << 62;
    auto ex = Create(g, &p, SmallModule(), 1 << 20);
    ASSERT_FALSE(ex.ok());
    EXPECT_EQ(ex.status().code(), ErrorCode::kLimitExceeded);
  }
}

}  // namespace
}  // namespace crosstune::server
