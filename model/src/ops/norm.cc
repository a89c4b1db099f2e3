// BatchNormalization (inference), InstanceNormalization and LRN, over NCHW (any number of spatial
// dimensions).
#include <cmath>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferBatchNorm(OpContext& ctx) {
  const Node& n = ctx.node();
  if (n.Int("training_mode", 0) != 0) return ctx.Error("training_mode=1 is not supported");
  if (n.Int("spatial", 1) != 1) return ctx.Error("spatial=0 is not supported");
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32 || x.shape.size() < 2) {
    return ctx.Error("data must be float32 [N, C, ...]");
  }
  for (int i = 1; i < 5; ++i) {
    if (!ctx.has_input(i) || ctx.in(i).shape != std::vector<int64_t>{x.shape[1]}) {
      return ctx.Error("scale, bias, mean and var must each be [" + std::to_string(x.shape[1]) +
                       "]");
    }
  }
  ctx.SetOutput(0, DType::kFloat32, x.shape);
  return Status::Ok();
}

Status EvalBatchNorm(OpContext& ctx) {
  const Value& xv = ctx.in(0);
  const float *x = xv.floats(), *scale = ctx.InFloats(1), *bias = ctx.InFloats(2);
  const float *mean = ctx.InFloats(3), *var = ctx.InFloats(4);
  const double eps = ctx.node().Float("epsilon", 1e-5);
  const int64_t c = xv.shape[1], inner = xv.elements() / xv.shape[0] / c;
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t i = 0; i < xv.elements(); ++i) {
    const int64_t ch = i / inner % c;
    y[i] = static_cast<float>((x[i] - mean[ch]) / std::sqrt(var[ch] + eps) * scale[ch] + bias[ch]);
  }
  return Status::Ok();
}

// InstanceNormalization: each (n, c) plane normalised by its own mean and variance, then
// scale[c] and bias[c].
Status InferInstanceNorm(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32 || x.shape.size() < 3) {
    return ctx.Error("data must be float32 [N, C, D1, ...]");
  }
  for (int i = 1; i < 3; ++i) {
    if (ctx.in(i).dtype != DType::kFloat32 || ctx.in(i).shape != std::vector<int64_t>{x.shape[1]}) {
      return ctx.Error("scale and bias must each be float32 [" + std::to_string(x.shape[1]) + "]");
    }
  }
  ctx.SetOutput(0, DType::kFloat32, x.shape);
  return Status::Ok();
}

Status EvalInstanceNorm(OpContext& ctx) {
  const Value& xv = ctx.in(0);
  const float *x = xv.floats(), *scale = ctx.InFloats(1), *bias = ctx.InFloats(2);
  const double eps = ctx.node().Float("epsilon", 1e-5);
  const int64_t c = xv.shape[1], len = xv.elements() / xv.shape[0] / c;
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t row = 0; row < xv.shape[0] * c; ++row) {
    const float* p = x + row * len;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < len; ++j) mean += p[j];
    mean /= static_cast<double>(len);
    for (int64_t j = 0; j < len; ++j) var += (p[j] - mean) * (p[j] - mean);
    var /= static_cast<double>(len);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < len; ++j) {
      y[row * len + j] = static_cast<float>((p[j] - mean) * inv * scale[row % c] + bias[row % c]);
    }
  }
  return Status::Ok();
}

Status InferLrn(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (!ctx.node().Has("size") || ctx.node().Int("size", 0) < 1) {
    return ctx.Error("attribute 'size' (a positive odd count) is missing");
  }
  if (x.dtype != DType::kFloat32 || x.shape.size() < 3) {
    return ctx.Error("data must be float32 [N, C, ...]");
  }
  ctx.SetOutput(0, DType::kFloat32, x.shape);
  return Status::Ok();
}

Status EvalLrn(OpContext& ctx) {
  const Value& xv = ctx.in(0);
  const Node& n = ctx.node();
  const double alpha = n.Float("alpha", 1e-4), beta = n.Float("beta", 0.75);
  const double bias = n.Float("bias", 1.0);
  const int64_t size = n.Int("size", 1);
  const int64_t c = xv.shape[1], inner = xv.elements() / xv.shape[0] / c;
  const float* x = xv.floats();
  std::vector<float>& y = ctx.OutFloats(0);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  for (int64_t i = 0; i < xv.elements(); ++i) {
    const int64_t ch = i / inner % c, base = i - ch * inner;
    double sq = 0;
    for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(c - 1, ch + hi); ++k) {
      const double v = x[base + k * inner];
      sq += v * v;
    }
    y[i] = static_cast<float>(x[i] / std::pow(bias + alpha / size * sq, beta));
  }
  return Status::Ok();
}

double BatchNormFlops(const Graph& g, const Node& n) {
  return 2.0 * g.values[n.outputs[0]].elements();
}

}  // namespace

const OpDef kBatchNormalization = {"BatchNormalization",
                                   {attr::Float("epsilon"), attr::Float("momentum"),
                                    attr::Int("spatial"), attr::Int("training_mode")},
                                   5,
                                   5,
                                   1,
                                   InferBatchNorm,
                                   EvalBatchNorm,
                                   BatchNormFlops};

const OpDef kInstanceNormalization = {
    "InstanceNormalization", {attr::Float("epsilon")}, 3,       3,     1,
    InferInstanceNorm,       EvalInstanceNorm,         nullptr, false, 6};

const OpDef kLrn = {
    "LRN",   {attr::Float("alpha"), attr::Float("beta"), attr::Float("bias"), attr::Int("size")},
    1,       1,
    1,       InferLrn,
    EvalLrn, nullptr};

}  // namespace crosstune::model
