// The small network the model tests build and run: its node kernels (C, for the real builder),
// its graph (through formats/graph.h), its params, and what it computes, on the host.
//
//   x[1,8] -> dense(w[8,4], b[4]) -> h -> relu -> r -> square (scratch) -> q -> split -> lo, hi
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "crosstune/graph.h"
#include "crosstune/params.h"

namespace crosstune::testing {

inline constexpr DLDataType kNetF32{kDLFloat, 32, 1};

// The network's node kernels. dense and relu check their tensors and return non-zero on a
// mismatch; relu splits its work over the session's threads.
inline constexpr const char* kNetSource = R"(
#define CT_USE_RUNTIME 1
#include <stdint.h>
#include "kernel_abi.h"

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
#define T(i) (args[i].value.v_tensor)
#define F(i) ((float*)T(i)->data)

static const char* g_error = "";
static const char* last_error(void) { return g_error; }

/* y[1,N] = x[1,K] . w[K,N] + b[N] */
static int32_t dense(const ct_arg* args, int32_t n) {
  if (n != 4) return 1;
  int64_t K = T(1)->shape[0], N = T(1)->shape[1];
  if (T(0)->shape[1] != K || T(2)->shape[0] != N || T(3)->shape[1] != N) return 2;
  for (int64_t j = 0; j < N; ++j) {
    float acc = F(2)[j];
    for (int64_t k = 0; k < K; ++k) acc += F(0)[k] * F(1)[k * N + j];
    F(3)[j] = acc;
  }
  return 0;
}

struct relu_job { const float* x; float* y; int64_t n; };
static int32_t relu_part(int32_t task, int32_t tasks, void* closure) {
  struct relu_job* j = (struct relu_job*)closure;
  for (int64_t i = task; i < j->n; i += tasks) j->y[i] = j->x[i] > 0 ? j->x[i] : 0;
  return 0;
}
static int32_t relu(const ct_arg* args, int32_t n) {
  if (n != 2 || numel(T(0)) != numel(T(1))) return 1;
  struct relu_job j = {F(0), F(1), numel(T(0))};
  return ct_parallel_for(relu_part, &j, ct_num_threads());
}

/* y = x * x, staged through the scratch tensor (the last argument) */
static int32_t square(const ct_arg* args, int32_t n) {
  if (n != 3) return 1;
  int64_t len = numel(T(0));
  if (numel(T(2)) < len * 4) return 3;
  float* s = (float*)T(2)->data;
  for (int64_t i = 0; i < len; ++i) s[i] = F(0)[i];
  for (int64_t i = 0; i < len; ++i) F(1)[i] = s[i] * s[i];
  return 0;
}

/* lo, hi = the two halves of x */
static int32_t split(const ct_arg* args, int32_t n) {
  if (n != 3) return 1;
  int64_t half = numel(T(1));
  for (int64_t i = 0; i < half; ++i) {
    F(1)[i] = F(0)[i];
    F(2)[i] = F(0)[half + i];
  }
  return 0;
}

static int32_t crash(const ct_arg* args, int32_t n) {
  (void)args;
  (void)n;
  *(volatile int*)0 = 1;
  return 0;
}

static int32_t hang(const ct_arg* args, int32_t n) {
  (void)args;
  volatile int32_t spin = n;
  for (;;) spin = spin + 1;
  return 0;
}

static int32_t fail(const ct_arg* args, int32_t n) {
  (void)args;
  (void)n;
  g_error = "the fail kernel always fails";
  return 5;
}

static const ct_function kFns[] = {
    {"ct_dense", dense, "tttt"}, {"ct_relu", relu, "tt"},  {"ct_square", square, "ttt"},
    {"ct_split", split, "ttt"},  {"ct_crash", crash, "tt"}, {"ct_hang", hang, "tt"},
    {"ct_fail", fail, "tt"}};
CT_DEFINE_MODULE("crosstune model test", kFns, last_error)
)";

inline constexpr int64_t kIn = 8, kHidden = 4;

inline graph::Node NetNull(const std::string& name) {
  graph::Node n;
  n.op = std::string(graph::kNullOp);
  n.name = name;
  return n;
}

inline graph::Node NetOp(const std::string& name, const std::string& fn, const std::string& op_type,
                         std::vector<graph::EntryRef> inputs, uint32_t outputs = 1) {
  graph::Node n;
  n.op = std::string(graph::kTvmOp);
  n.name = name;
  n.func_name = fn;
  n.op_type = op_type;
  n.inputs = std::move(inputs);
  n.num_inputs = static_cast<uint32_t>(n.inputs.size());
  n.num_outputs = outputs;
  n.provenance = graph::Provenance{true, "", -1, 0};
  return n;
}

// x[1,8] -> dense(w[8,4], b[4]) -> h -> relu -> r -> square (scratch) -> q -> split -> lo, hi.
// h and q share storage 3 (h is dead once relu has run).
inline graph::Graph NetGraph() {
  graph::Graph g;
  g.nodes = {NetNull("x"),
             NetNull("w"),
             NetNull("b"),
             NetOp("dense", "ct_dense", "dense", {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}}),
             NetOp("relu", "ct_relu", "relu", {{3, 0, 0}}),
             NetOp("square", "ct_square", "elementwise", {{4, 0, 0}}),
             NetOp("split", "ct_split", "split", {{5, 0, 0}}, 2)};
  g.nodes[3].flops = 2 * kIn * kHidden;
  g.nodes[3].provenance = graph::Provenance{false, "dense 1,8,4", 17, 1764000000.0};
  g.nodes[5].scratch_bytes = 64;
  graph::FillIndex(&g);
  g.heads = {{6, 0, 0}, {6, 1, 0}};
  g.storage_id = {0, 1, 2, 3, 4, 3, 5, 6};
  g.shape = {{1, kIn},     {kIn, kHidden}, {kHidden}, {1, kHidden},
             {1, kHidden}, {1, kHidden},   {1, 2},    {1, 2}};
  g.dltype.assign(8, kNetF32);
  g.inputs = {"x"};
  g.outputs = {"lo", "hi"};
  g.storage_bytes = {32, 128, 16, 16, 16, 8, 8};
  return g;
}

struct Weights {
  std::vector<float> w = std::vector<float>(kIn * kHidden);
  std::vector<float> b = std::vector<float>(kHidden);
  Weights() {
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.7f * static_cast<float>(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * static_cast<float>(i) - 0.5f;
  }
};

inline pkg::ParamsWriter NetParams(const Weights& wt, bool with_b = true, bool extra = false,
                                   std::vector<int64_t> w_shape = {kIn, kHidden}) {
  pkg::ParamsWriter p;
  EXPECT_TRUE(p.Add("w", kNetF32, w_shape, wt.w.data(), wt.w.size() * 4).ok());
  if (with_b) {
    EXPECT_TRUE(p.Add("b", kNetF32, {kHidden}, wt.b.data(), wt.b.size() * 4).ok());
  }
  if (extra) {
    EXPECT_TRUE(p.Add("unused", kNetF32, {2}, wt.b.data(), 8).ok());
  }
  return p;
}

// What the network computes, here on the host.
inline std::vector<float> Reference(const Weights& wt, const std::vector<float>& x) {
  std::vector<float> q(kHidden);
  for (int64_t j = 0; j < kHidden; ++j) {
    float acc = wt.b[j];
    for (int64_t k = 0; k < kIn; ++k) acc += x[k] * wt.w[k * kHidden + j];
    float r = acc > 0 ? acc : 0;
    q[j] = r * r;
  }
  return q;
}

}  // namespace crosstune::testing
