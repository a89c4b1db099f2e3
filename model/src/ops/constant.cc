// Constant, ConstantOfShape and Shape: values known at compile time (the fold pass removes them).
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

}  // namespace crosstune::model
