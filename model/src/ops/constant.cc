// Constant, ConstantOfShape, Shape and Range: values known at compile time (the fold pass removes
// them).
#include <cmath>
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferConstant(OpContext& ctx) {
  const Node& n = ctx.node();
  if (n.attrs.size() != 1) return ctx.Error("needs exactly one value attribute");
  const auto& [key, a] = *n.attrs.begin();
  Value& out = ctx.out(0);
  auto set = [&](DType t, std::vector<int64_t> shape, const void* p, size_t bytes) {
    out.dtype = t;
    out.shape = std::move(shape);
    out.data = std::make_shared<const std::vector<uint8_t>>(static_cast<const uint8_t*>(p),
                                                            static_cast<const uint8_t*>(p) + bytes);
  };
  if (key == "value") {
    out.dtype = a.tensor->dtype;
    out.shape = a.tensor->shape;
    out.data = a.tensor->data;
  } else if (key == "value_float") {
    const float f = static_cast<float>(a.f);
    set(DType::kFloat32, {}, &f, 4);
  } else if (key == "value_floats") {
    std::vector<float> f(a.floats.begin(), a.floats.end());
    set(DType::kFloat32, {static_cast<int64_t>(f.size())}, f.data(), f.size() * 4);
  } else if (key == "value_int") {
    set(DType::kInt64, {}, &a.i, 8);
  } else if (key == "value_ints") {
    set(DType::kInt64, {static_cast<int64_t>(a.ints.size())}, a.ints.data(), a.ints.size() * 8);
  }
  return Status::Ok();
}

Status EvalNothing(OpContext&) { return Status::Ok(); }  // infer set the data

Status InferConstantOfShape(OpContext& ctx) {
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstInts(0, "the shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("negative dimension in the shape");
  }
  DType t = DType::kFloat32;
  if (ctx.node().Has("value")) {
    const Value& v = *ctx.node().attrs.at("value").tensor;
    if (v.elements() != 1) return ctx.Error("value must hold one element");
    t = v.dtype;
  }
  // The data is made by eval, once the importer has checked the shape against its budget.
  ctx.SetOutput(0, t, shape);
  return Status::Ok();
}

Status EvalConstantOfShape(OpContext& ctx) {
  std::vector<uint8_t> one(4, 0);  // 0.0f by default
  if (ctx.node().Has("value")) {
    const Value& v = *ctx.node().attrs.at("value").tensor;
    one.assign(v.data->begin(), v.data->end());
  }
  const size_t es = one.size();
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (size_t at = 0; at + es <= y.size(); at += es) std::memcpy(y.data() + at, one.data(), es);
  return Status::Ok();
}

Status InferShape(OpContext& ctx) {
  const int64_t rank = static_cast<int64_t>(ctx.in(0).shape.size());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return v < 0 ? 0 : (v > rank ? rank : v);
  };
  const int64_t start = clamp(ctx.node().Int("start", 0));
  const int64_t end = clamp(ctx.node().Int("end", rank));
  ctx.SetOutput(0, DType::kInt64, {std::max<int64_t>(0, end - start)});
  return Status::Ok();
}

Status EvalShape(OpContext& ctx) {
  const auto& shape = ctx.in(0).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = ctx.node().Int("start", 0);
  if (start < 0) start += rank;
  start = std::max<int64_t>(0, std::min(start, rank));
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  if (!y.empty()) std::memcpy(y.data(), shape.data() + start, y.size());
  return Status::Ok();
}

// Range(start, limit, delta), three scalars of one type (float32, float64, int32 or int64): its
// length depends on their values, so they must be constants (exporters compute them from Shape,
// which folds where the shapes are static).
Status InferRange(OpContext& ctx) {
  const DType t = ctx.in(0).dtype;
  if (t != DType::kFloat32 && t != DType::kFloat64 && t != DType::kInt32 && t != DType::kInt64) {
    return ctx.Error(std::string("the element type ") + DTypeName(t) +
                     " is not supported (float32, float64, int32, int64)");
  }
  for (int i = 0; i < 3; ++i) {
    const Value& v = ctx.in(i);
    if (v.dtype != t) return ctx.Error("start, limit and delta differ in element type");
    if (!v.shape.empty() && NumElements(v.shape) != 1) return ctx.Error("inputs must be scalars");
    if (!v.is_const()) {
      return ctx.Error(std::string(i == 0   ? "start"
                                   : i == 1 ? "limit"
                                            : "delta") +
                       " is computed at run time; the output's length depends on it, so it "
                       "must be known at compile time (a constant, or from a static Shape)");
    }
  }
  int64_t n = 0;
  if (t == DType::kInt32 || t == DType::kInt64) {
    const int64_t start = ctx.in(0).AsInts()[0], limit = ctx.in(1).AsInts()[0],
                  delta = ctx.in(2).AsInts()[0];
    if (delta == 0) return ctx.Error("delta is 0");
    const int64_t span = limit - start;
    n = delta > 0 ? (span > 0 ? (span + delta - 1) / delta : 0)
                  : (span < 0 ? (-span + -delta - 1) / -delta : 0);
  } else {
    const double start = ctx.in(0).AsDoubles()[0], limit = ctx.in(1).AsDoubles()[0],
                 delta = ctx.in(2).AsDoubles()[0];
    if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
      return ctx.Error("delta is 0 or an input is not finite");
    }
    const double count = std::ceil((limit - start) / delta);
    if (count > static_cast<double>(int64_t{1} << 40)) return ctx.Error("the range is too long");
    n = count > 0 ? static_cast<int64_t>(count) : 0;
  }
  // The data is made by eval, once the importer has checked the shape against its budget.
  ctx.SetOutput(0, t, {n});
  return Status::Ok();
}

template <typename T>
void FillRange(std::vector<uint8_t>& y, T start, T delta) {
  T* out = reinterpret_cast<T*>(y.data());
  const size_t n = y.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
}

Status EvalRange(OpContext& ctx) {
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  const Value &s = ctx.in(0), &d = ctx.in(2);
  switch (s.dtype) {
    case DType::kInt64:
      FillRange<int64_t>(y, s.AsInts()[0], d.AsInts()[0]);
      break;
    case DType::kInt32:
      FillRange<int32_t>(y, static_cast<int32_t>(s.AsInts()[0]),
                         static_cast<int32_t>(d.AsInts()[0]));
      break;
    case DType::kFloat32:
      FillRange<float>(y, s.floats()[0], d.floats()[0]);
      break;
    default:
      FillRange<double>(y, s.AsDoubles()[0], d.AsDoubles()[0]);
      break;
  }
  return Status::Ok();
}

}  // namespace

const OpDef kConstant = {
    "Constant",
    {attr::Tensor("value"), attr::Float("value_float"), attr::Floats("value_floats"),
     attr::Int("value_int"), attr::Ints("value_ints")},
    0,
    0,
    1,
    InferConstant,
    EvalNothing,
    nullptr};
const OpDef kConstantOfShape = {"ConstantOfShape",    {attr::Tensor("value")}, 1,      1, 1,
                                InferConstantOfShape, EvalConstantOfShape,     nullptr};
const OpDef kShape = {
    "Shape", {attr::Int("start"), attr::Int("end")}, 1, 1, 1, InferShape, EvalShape, nullptr, true};

const OpDef kRange = {"Range", {}, 3, 3, 1, InferRange, EvalRange, nullptr, false, 11};

}  // namespace crosstune::model
