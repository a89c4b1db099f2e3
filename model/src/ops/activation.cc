// Elementwise activations: Relu, Sigmoid, LeakyRelu, Clip (float32).
#include <cfloat>
#include <cmath>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferUnary(OpContext& ctx) {
  if (ctx.in(0).dtype != DType::kFloat32) return ctx.Error("only float32 is supported");
  ctx.SetOutput(0, DType::kFloat32, ctx.in(0).shape);
  return Status::Ok();
}

template <typename F>
Status EvalUnary(OpContext& ctx, F f) {
  const float* x = ctx.InFloats(0);
  std::vector<float>& y = ctx.OutFloats(0);
  for (size_t i = 0; i < y.size(); ++i) y[i] = f(x[i]);
  return Status::Ok();
}

Status EvalRelu(OpContext& ctx) {
  return EvalUnary(ctx, [](float v) { return v > 0 ? v : 0.0f; });
}
Status EvalSigmoid(OpContext& ctx) {
  return EvalUnary(ctx, [](float v) { return static_cast<float>(1.0 / (1.0 + std::exp(-v))); });
}
Status EvalLeakyRelu(OpContext& ctx) {
  const float alpha = static_cast<float>(ctx.node().Float("alpha", 0.01));
  return EvalUnary(ctx, [alpha](float v) { return v >= 0 ? v : alpha * v; });
}

// Clip's bounds: attributes before opset 11, optional constant inputs since. Written back as
// attributes min/max so later stages read one form.
Status InferClip(OpContext& ctx) {
  CT_RETURN_IF_ERROR(InferUnary(ctx));
  Node& n = ctx.node();
  if (ctx.opset() < 11 || n.Has("min") || n.Has("max")) {
    if (ctx.num_inputs() > 1) return ctx.Error("min/max are attributes before opset 11");
    return Status::Ok();
  }
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Value& b = ctx.in(i);
    if (!b.is_const() || b.dtype != DType::kFloat32 || b.elements() != 1) {
      return ctx.Error(std::string(i == 1 ? "min" : "max") + " must be a float32 scalar constant");
    }
    n.SetFloat(i == 1 ? "min" : "max", b.floats()[0]);
  }
  n.inputs.resize(1);
  return Status::Ok();
}

Status EvalClip(OpContext& ctx) {
  const float lo = static_cast<float>(ctx.node().Float("min", -FLT_MAX));
  const float hi = static_cast<float>(ctx.node().Float("max", FLT_MAX));
  return EvalUnary(ctx, [lo, hi](float v) { return v < lo ? lo : (v > hi ? hi : v); });
}

double ElementFlops(const Graph& g, const Node& n) {
  return static_cast<double>(g.values[n.outputs[0]].elements());
}

}  // namespace

const OpDef kRelu = {"Relu", {}, 1, 1, 1, InferUnary, EvalRelu, ElementFlops};
const OpDef kSigmoid = {"Sigmoid", {}, 1, 1, 1, InferUnary, EvalSigmoid, ElementFlops};
const OpDef kLeakyRelu = {"LeakyRelu", {attr::Float("alpha")}, 1,           1, 1,
                          InferUnary,  EvalLeakyRelu,          ElementFlops};
const OpDef kClip = {
    "Clip", {attr::Float("min"), attr::Float("max")}, 1, 3, 1, InferClip, EvalClip, ElementFlops};

}  // namespace crosstune::model
