// Add, Sub, Mul, Div, Pow with numpy broadcasting, Sum, Min, Max and Mean (any number of
// inputs), on float32 and on int64 (shape arithmetic that constant folding computes); PRelu
// (its slope broadcast into the input's shape).
#include <cmath>

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

Status EvalPow(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto a, auto b) {
    return static_cast<decltype(a)>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  });
}
Status EvalMin(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto a, auto b) { return b < a ? b : a; });
}
Status EvalMax(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto a, auto b) { return b > a ? b : a; });
}
Status EvalMean(OpContext& ctx) {
  const int n = ctx.num_inputs();
  if (ctx.out(0).dtype == DType::kFloat32) {
    std::vector<float>& y = ctx.OutFloats(0);
    Fold<float>(ctx, y.data(), [](float a, float b) { return a + b; });
    for (float& v : y) v /= static_cast<float>(n);
  } else {
    auto* y = reinterpret_cast<int64_t*>(ctx.OutBytes(0).data());
    Fold<int64_t>(ctx, y, [](int64_t a, int64_t b) { return a + b; });
    for (int64_t e = 0; e < ctx.out(0).elements(); ++e) y[e] /= n;
  }
  return Status::Ok();
}

// PRelu: the slope broadcasts into X's shape (unidirectionally): the output is X's shape.
Status InferPRelu(OpContext& ctx) {
  CT_RETURN_IF_ERROR(InferBroadcast(ctx));
  if (ctx.out(0).shape != ctx.in(0).shape) {
    return ctx.Error("slope " + ShapeText(ctx.in(1).shape) + " does not broadcast into X " +
                     ShapeText(ctx.in(0).shape));
  }
  return Status::Ok();
}
Status EvalPRelu(OpContext& ctx) {
  return EvalBroadcast(ctx, [](auto x, auto slope) { return x < 0 ? slope * x : x; });
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
// Pow-12 and later take an exponent of another type than the base: refused by name (inputs of
// different types).
const OpDef kPow = {"Pow", {}, 2, 2, 1, InferBroadcast, EvalPow, BroadcastFlops};
const OpDef kMin = {"Min", {}, 1, 64, 1, InferBroadcast, EvalMin, BroadcastFlops, false, 8};
const OpDef kMax = {"Max", {}, 1, 64, 1, InferBroadcast, EvalMax, BroadcastFlops, false, 8};
const OpDef kMean = {"Mean", {}, 1, 64, 1, InferBroadcast, EvalMean, BroadcastFlops, false, 8};
const OpDef kPRelu = {"PRelu", {}, 2, 2, 1, InferPRelu, EvalPRelu, BroadcastFlops};

}  // namespace crosstune::model
