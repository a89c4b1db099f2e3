// Elementwise activations and math on float32 and float64: Relu, Sigmoid, LeakyRelu, Clip; Abs,
// Neg, Exp, Log, Sqrt, Reciprocal, Tanh, Erf, Floor, Round, Ceil, Sin, Cos, Tan, Asin, Acos, Atan,
// Sinh, Cosh, Asinh, Acosh, Atanh; Softplus, Softsign, Elu, Selu, HardSigmoid, HardSwish, Gelu;
// Relu, Clip, Abs and Neg on the integers too. The host evaluates in double and rounds once, as the
// generated kernels' float math (kernels/elementwise.cc) stays within fp32 tolerance of it.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferUnary(OpContext& ctx) {
  const DType t = ctx.in(0).dtype;
  const std::string& op = ctx.node().op;
  const bool integers = op == "Relu" || op == "Clip" || op == "Abs" || op == "Neg";
  if (t != DType::kFloat32 && t != DType::kFloat64 &&
      !(integers && t != DType::kBool && !IsEdgeType(t))) {
    return ctx.Error(std::string("the element type ") + DTypeName(t) + " is not supported (" +
                     (integers ? "float32, float64 and the integers)" : "float32, float64)"));
  }
  ctx.SetOutput(0, t, ctx.in(0).shape);
  return Status::Ok();
}

// y = f(x) per element, f taking and giving double: rounded once to float32, or written as the
// element type (an integer result as C converts it).
template <typename F>
Status EvalUnary(OpContext& ctx, F f) {
  if (ctx.in(0).dtype == DType::kFloat32) {
    const float* x = ctx.InFloats(0);
    std::vector<float>& y = ctx.OutFloats(0);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(f(static_cast<double>(x[i])));
    return Status::Ok();
  }
  const std::vector<double> x = ctx.in(0).AsDoubles();
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = f(x[i]);
    PutElement(ctx.out(0).dtype, y.data(), i, r, static_cast<int64_t>(r));
  }
  return Status::Ok();
}

Status EvalRelu(OpContext& ctx) {
  return EvalUnary(ctx, [](double v) { return v > 0 ? v : 0.0; });
}
Status EvalSigmoid(OpContext& ctx) {
  return EvalUnary(ctx, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
}
Status EvalLeakyRelu(OpContext& ctx) {
  const double alpha = ctx.node().Float("alpha", 0.01);
  return EvalUnary(ctx, [alpha](double v) { return v >= 0 ? v : alpha * v; });
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
    if (!b.is_const() || b.dtype != ctx.in(0).dtype || b.elements() != 1) {
      return ctx.Error(std::string(i == 1 ? "min" : "max") +
                       " must be a scalar constant known at compile time, of the input's type");
    }
    n.SetFloat(i == 1 ? "min" : "max", b.AsDoubles()[0]);
  }
  n.inputs.resize(1);
  return Status::Ok();
}

Status EvalClip(OpContext& ctx) {
  const double lo = ctx.node().Float("min", -DBL_MAX);
  const double hi = ctx.node().Float("max", DBL_MAX);
  // min, then max: where min > max every value becomes max, as ONNX states.
  return EvalUnary(ctx, [lo, hi](double v) {
    const double t = v < lo ? lo : v;
    return t > hi ? hi : t;
  });
}

// ONNX's defaults of the attributes below: Infer writes each one the node lacks, so the kernels
// (kernels/elementwise.cc) read the same values.
constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

template <typename F>
Status EvalMath(OpContext& ctx, F f) {
  return EvalUnary(ctx, f);
}

Status EvalAbs(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::fabs(v); });
}
Status EvalNeg(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return -v; });
}
Status EvalExp(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::exp(v); });
}
Status EvalLog(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::log(v); });
}
Status EvalSqrt(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::sqrt(v); });
}
Status EvalReciprocal(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return 1.0 / v; });
}
Status EvalTanh(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::tanh(v); });
}
Status EvalErf(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::erf(v); });
}
Status EvalFloor(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::floor(v); });
}
Status EvalSin(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::sin(v); });
}
Status EvalCos(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::cos(v); });
}
Status EvalTan(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::tan(v); });
}
Status EvalAsin(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::asin(v); });
}
Status EvalAcos(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::acos(v); });
}
Status EvalAtan(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::atan(v); });
}
Status EvalSinh(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::sinh(v); });
}
Status EvalCosh(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::cosh(v); });
}
Status EvalAsinh(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::asinh(v); });
}
Status EvalAcosh(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::acosh(v); });
}
Status EvalAtanh(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::atanh(v); });
}
// Round: halves to even (the default rounding mode), as ONNX states.
Status EvalRound(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::nearbyint(v); });
}
Status EvalCeil(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return std::ceil(v); });
}
Status EvalSoftplus(OpContext& ctx) {
  return EvalMath(
      ctx, [](double v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); });
}
Status EvalSoftsign(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return v / (1 + std::fabs(v)); });
}
// The unary ops whose attributes have defaults.
Status InferWithDefaults(OpContext& ctx, std::initializer_list<std::pair<const char*, double>> d) {
  CT_RETURN_IF_ERROR(InferUnary(ctx));
  for (const auto& [key, value] : d) {
    if (!ctx.node().Has(key)) ctx.node().SetFloat(key, value);
  }
  return Status::Ok();
}
Status InferElu(OpContext& ctx) { return InferWithDefaults(ctx, {{"alpha", 1.0}}); }
Status InferSelu(OpContext& ctx) {
  return InferWithDefaults(ctx, {{"alpha", kSeluAlpha}, {"gamma", kSeluGamma}});
}
Status InferHardSigmoid(OpContext& ctx) {
  return InferWithDefaults(ctx, {{"alpha", 0.2}, {"beta", 0.5}});
}

Status EvalElu(OpContext& ctx) {
  const double alpha = ctx.node().Float("alpha", 1.0);
  return EvalMath(ctx, [alpha](double v) { return v >= 0 ? v : alpha * (std::exp(v) - 1); });
}
Status EvalSelu(OpContext& ctx) {
  const double alpha = ctx.node().Float("alpha", kSeluAlpha);
  const double gamma = ctx.node().Float("gamma", kSeluGamma);
  return EvalMath(ctx, [alpha, gamma](double v) {
    return v > 0 ? gamma * v : gamma * (alpha * std::exp(v) - alpha);
  });
}
Status EvalHardSigmoid(OpContext& ctx) {
  const double alpha = ctx.node().Float("alpha", 0.2), beta = ctx.node().Float("beta", 0.5);
  return EvalMath(ctx, [alpha, beta](double v) { return std::clamp(alpha * v + beta, 0.0, 1.0); });
}
Status EvalHardSwish(OpContext& ctx) {
  return EvalMath(ctx, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); });
}

// Gelu's `approximate`: "none" (the erf form) or "tanh".
Status InferGelu(OpContext& ctx) {
  CT_RETURN_IF_ERROR(InferUnary(ctx));
  const std::string a = ctx.node().String("approximate", "none");
  if (a != "none" && a != "tanh") {
    return ctx.Error("approximate '" + a + "' is not one of none, tanh");
  }
  return Status::Ok();
}
Status EvalGelu(OpContext& ctx) {
  if (ctx.node().String("approximate", "none") == "tanh") {
    return EvalMath(ctx, [](double v) {
      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    });
  }
  return EvalMath(ctx, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
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
const OpDef kAbs = {"Abs", {}, 1, 1, 1, InferUnary, EvalAbs, ElementFlops, false, 6};
const OpDef kNeg = {"Neg", {}, 1, 1, 1, InferUnary, EvalNeg, ElementFlops, false, 6};
const OpDef kExp = {"Exp", {}, 1, 1, 1, InferUnary, EvalExp, ElementFlops, false, 6};
const OpDef kLog = {"Log", {}, 1, 1, 1, InferUnary, EvalLog, ElementFlops, false, 6};
const OpDef kSqrt = {"Sqrt", {}, 1, 1, 1, InferUnary, EvalSqrt, ElementFlops, false, 6};
const OpDef kReciprocal = {"Reciprocal",   {},           1,     1, 1, InferUnary,
                           EvalReciprocal, ElementFlops, false, 6};
const OpDef kTanh = {"Tanh", {}, 1, 1, 1, InferUnary, EvalTanh, ElementFlops, false, 6};
const OpDef kErf = {"Erf", {}, 1, 1, 1, InferUnary, EvalErf, ElementFlops, false, 9};
const OpDef kFloor = {"Floor", {}, 1, 1, 1, InferUnary, EvalFloor, ElementFlops, false, 6};
const OpDef kSin = {"Sin", {}, 1, 1, 1, InferUnary, EvalSin, ElementFlops, false, 7};
const OpDef kCos = {"Cos", {}, 1, 1, 1, InferUnary, EvalCos, ElementFlops, false, 7};
const OpDef kTan = {"Tan", {}, 1, 1, 1, InferUnary, EvalTan, ElementFlops, false, 7};
const OpDef kAsin = {"Asin", {}, 1, 1, 1, InferUnary, EvalAsin, ElementFlops, false, 7};
const OpDef kAcos = {"Acos", {}, 1, 1, 1, InferUnary, EvalAcos, ElementFlops, false, 7};
const OpDef kAtan = {"Atan", {}, 1, 1, 1, InferUnary, EvalAtan, ElementFlops, false, 7};
const OpDef kSinh = {"Sinh", {}, 1, 1, 1, InferUnary, EvalSinh, ElementFlops, false, 9};
const OpDef kCosh = {"Cosh", {}, 1, 1, 1, InferUnary, EvalCosh, ElementFlops, false, 9};
const OpDef kAsinh = {"Asinh", {}, 1, 1, 1, InferUnary, EvalAsinh, ElementFlops, false, 9};
const OpDef kAcosh = {"Acosh", {}, 1, 1, 1, InferUnary, EvalAcosh, ElementFlops, false, 9};
const OpDef kAtanh = {"Atanh", {}, 1, 1, 1, InferUnary, EvalAtanh, ElementFlops, false, 9};
const OpDef kRound = {"Round", {}, 1, 1, 1, InferUnary, EvalRound, ElementFlops, false, 11};
const OpDef kCeil = {"Ceil", {}, 1, 1, 1, InferUnary, EvalCeil, ElementFlops, false, 6};
const OpDef kSoftplus = {"Softplus", {}, 1, 1, 1, InferUnary, EvalSoftplus, ElementFlops, false, 1};
const OpDef kSoftsign = {"Softsign", {}, 1, 1, 1, InferUnary, EvalSoftsign, ElementFlops, false, 1};
const OpDef kElu = {"Elu",   {attr::Float("alpha")}, 1,     1, 1, InferElu,
                    EvalElu, ElementFlops,           false, 6};
const OpDef kSelu = {"Selu",   {attr::Float("alpha"), attr::Float("gamma")},
                     1,        1,
                     1,        InferSelu,
                     EvalSelu, ElementFlops,
                     false,    6};
const OpDef kHardSigmoid = {"HardSigmoid",
                            {attr::Float("alpha"), attr::Float("beta")},
                            1,
                            1,
                            1,
                            InferHardSigmoid,
                            EvalHardSigmoid,
                            ElementFlops,
                            false,
                            6};
const OpDef kHardSwish = {"HardSwish",   {},           1,     1, 1, InferUnary,
                          EvalHardSwish, ElementFlops, false, 14};
const OpDef kGelu = {
    "Gelu", {attr::String("approximate")}, 1, 1, 1, InferGelu, EvalGelu, ElementFlops, false, 20};

}  // namespace crosstune::model
