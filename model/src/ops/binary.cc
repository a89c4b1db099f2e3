// Add, Sub, Mul, Div, Mod, Pow with numpy broadcasting, Sum, Min and Max (any number of inputs),
// on float32, float64, int64, int32, int8 and uint8; Mean on the floats; PRelu (its slope
// broadcast into the input's shape). Integer Div truncates; Mod follows the divisor's sign
// (fmod=1: the dividend's, as C's fmod and %); a zero divisor is a named error, at fold time here
// and at run time in the kernel. Pow's exponent may be of another type (opset 12): the output is
// the base's.
#include <cmath>
#include <type_traits>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

bool IsFloatElement(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

Status InferBroadcast(OpContext& ctx) {
  const DType t = ctx.in(0).dtype;
  const std::string& op = ctx.node().op;
  if (t == DType::kBool || IsEdgeType(t) ||
      ((op == "Mean" || op == "PRelu") && !IsFloatElement(t))) {
    return ctx.Error(std::string("the element type ") + DTypeName(t) + " is not supported (" +
                     (op == "Mean" || op == "PRelu" ? "float32, float64)"
                                                    : "float32, float64 and the integers)"));
  }
  std::vector<int64_t> shape = ctx.in(0).shape;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    if (ctx.in(i).dtype != t && !(op == "Pow" && ctx.in(i).dtype != DType::kBool)) {
      return ctx.Error("inputs of different types");
    }
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

// An input's elements as T (Pow's exponent may be of another type): through Value's own
// readers, exact for the integers (as int64 bits) and the floats (as double).
template <typename T>
std::vector<T> ElementsAs(const Value& v) {
  std::vector<T> out;
  if constexpr (std::is_floating_point_v<T>) {
    for (double d : v.AsDoubles()) out.push_back(static_cast<T>(d));
  } else {
    for (int64_t i : v.AsInts()) out.push_back(static_cast<T>(i));
  }
  return out;
}

template <typename T, typename F>
void Fold(OpContext& ctx, T* y, F f) {
  const auto& shape = ctx.out(0).shape;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const std::vector<T> x = ElementsAs<T>(ctx.in(i));
    const std::vector<int64_t> idx = ops::BroadcastIndex(ctx.in(i).shape, shape);
    for (size_t e = 0; e < idx.size(); ++e) y[e] = i == 0 ? x[idx[e]] : f(y[e], x[idx[e]]);
  }
}

template <typename F>
Status EvalBroadcast(OpContext& ctx, F f) {
  uint8_t* y = ctx.OutBytes(0).data();
  switch (ctx.out(0).dtype) {
    case DType::kFloat32:
      Fold<float>(ctx, reinterpret_cast<float*>(y), f);
      break;
    case DType::kFloat64:
      Fold<double>(ctx, reinterpret_cast<double*>(y), f);
      break;
    case DType::kInt64:
      Fold<int64_t>(ctx, reinterpret_cast<int64_t*>(y), f);
      break;
    case DType::kInt32:
      Fold<int32_t>(ctx, reinterpret_cast<int32_t*>(y), f);
      break;
    case DType::kInt8:
      Fold<int8_t>(ctx, reinterpret_cast<int8_t*>(y), f);
      break;
    case DType::kInt16:
      Fold<int16_t>(ctx, reinterpret_cast<int16_t*>(y), f);
      break;
    case DType::kUint16:
      Fold<uint16_t>(ctx, reinterpret_cast<uint16_t*>(y), f);
      break;
    case DType::kUint32:
      Fold<uint32_t>(ctx, reinterpret_cast<uint32_t*>(y), f);
      break;
    case DType::kUint64:
      Fold<uint64_t>(ctx, reinterpret_cast<uint64_t*>(y), f);
      break;
    default:
      Fold<uint8_t>(ctx, y, f);
      break;
  }
  return Status::Ok();
}

// A zero divisor of an integer Div or Mod, named.
Status CheckDivisor(OpContext& ctx) {
  if (IsFloatElement(ctx.out(0).dtype)) return Status::Ok();
  for (int64_t v : ctx.in(1).AsInts()) {
    if (v == 0) return ctx.Error("integer division by zero");
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
  CT_RETURN_IF_ERROR(CheckDivisor(ctx));
  return EvalBroadcast(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a / b); });
}
Status EvalMod(OpContext& ctx) {
  CT_RETURN_IF_ERROR(CheckDivisor(ctx));
  const bool c_mod = ctx.node().Int("fmod", 0) != 0;
  return EvalBroadcast(ctx, [c_mod](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>) {
      T r = static_cast<T>(std::fmod(a, b));
      if (!c_mod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      T r = static_cast<T>(a % b);
      if (!c_mod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    }
  });
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
    auto* y = reinterpret_cast<double*>(ctx.OutBytes(0).data());
    Fold<double>(ctx, y, [](double a, double b) { return a + b; });
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
const OpDef kMod = {"Mod",   {attr::Int("fmod")}, 2,     2, 1, InferBroadcast,
                    EvalMod, BroadcastFlops,      false, 10};
const OpDef kPRelu = {"PRelu", {}, 2, 2, 1, InferPRelu, EvalPRelu, BroadcastFlops};

}  // namespace crosstune::model
