// Add, Sub, Mul, Div with numpy broadcasting, and Sum (any number of inputs), on float32 and on
// int64 (shape arithmetic that constant folding computes).
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferBroadcast(OpContext& ctx) {
  const DType t = ctx.in(0).dtype;
  if (t != DType::kFloat32 && t != DType::kInt64) {
    return ctx.Error(std::string("only float32 and int64 are supported, not ") + DTypeName(t));
  }
  std::vector<int64_t> shape = ctx.in(0).shape;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    if (ctx.in(i).dtype != t) return ctx.Error("inputs of different types");
    std::vector<int64_t> out;
    if (!ops::BroadcastShapes(shape, ctx.in(i).shape, &out)) {
      return ctx.Error("shapes " + ShapeText(shape) + " and " + ShapeText(ctx.in(i).shape) +
                       " do not broadcast");
    }
    shape = out;
  }
  ctx.SetOutput(0, t, shape);
  return Status::Ok();
}

template <typename T, typename F>
void Fold(OpContext& ctx, T* y, F f) {
  const auto& shape = ctx.out(0).shape;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const T* x = reinterpret_cast<const T*>(ctx.in(i).data->data());
    const std::vector<int64_t> idx = ops::BroadcastIndex(ctx.in(i).shape, shape);
    for (size_t e = 0; e < idx.size(); ++e) y[e] = i == 0 ? x[idx[e]] : f(y[e], x[idx[e]]);
  }
}

template <typename F>
Status EvalBroadcast(OpContext& ctx, F f) {
  if (ctx.out(0).dtype == DType::kFloat32) {
    Fold<float>(ctx, ctx.OutFloats(0).data(), f);
  } else {
    Fold<int64_t>(ctx, reinterpret_cast<int64_t*>(ctx.OutBytes(0).data()), f);
  }
  return Status::Ok();
}

Status EvalAdd(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto a, auto b) { return a + b; });
}
Status EvalSub(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto a, auto b) { return a - b; });
}
Status EvalMul(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto a, auto b) { return a * b; });
}
Status EvalDiv(OpContext& ctx) {
  if (ctx.out(0).dtype == DType::kInt64) {
    const Value& d = ctx.in(1);
    for (int64_t v : d.AsInts()) {
      if (v == 0) return ctx.Error("integer division by zero");
    }
  }
  return EvalBroadcast(ctx, [](auto a, auto b) { return a / b; });
}

double BroadcastFlops(const Graph& g, const Node& n) {
  return static_cast<double>(g.values[n.outputs[0]].elements()) *
         static_cast<double>(n.inputs.size() - 1);
}

}  // namespace

const OpDef kAdd = {"Add", {}, 2, 2, 1, InferBroadcast, EvalAdd, BroadcastFlops};
const OpDef kSub = {"Sub", {}, 2, 2, 1, InferBroadcast, EvalSub, BroadcastFlops};
const OpDef kMul = {"Mul", {}, 2, 2, 1, InferBroadcast, EvalMul, BroadcastFlops};
const OpDef kDiv = {"Div", {}, 2, 2, 1, InferBroadcast, EvalDiv, BroadcastFlops};
const OpDef kSum = {"Sum", {}, 1, 64, 1, InferBroadcast, EvalAdd, BroadcastFlops};

}  // namespace crosstune::model
