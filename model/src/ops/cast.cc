// Cast and CastLike between the element types the importer takes (float32, float64, the integers,
// bool and the edge types: float16, bfloat16, float8, float4 and the 4- and 2-bit integers, as
// narrow_types.h converts them; float to integer truncates toward zero, anything to bool is "not
// zero"), and Size (a tensor's element count, known from its shape). A Cast of a constant folds;
// one left to compile is a generated kernel of its two element types (kernels/elementwise.cc).
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferCast(OpContext& ctx) {
  auto to = DTypeFromOnnx(static_cast<int32_t>(ctx.node().Int("to", 0)), "attribute 'to'");
  if (!to.ok()) return ctx.Error(to.status().message());
  // saturate matters to the float8 types only (narrow_types.h); 1 by default.
  if (!IsEdgeType(*to) || WideType(*to) != DType::kFloat32 || *to == DType::kFloat16 ||
      *to == DType::kBfloat16 || ctx.node().Int("saturate", 1) != 0) {
    ctx.node().attrs.erase("saturate");
  }
  ctx.SetOutput(0, *to, ctx.in(0).shape);
  return Status::Ok();
}

// CastLike becomes the Cast to its second input's type (whose data it never reads).
Status InferCastLike(OpContext& ctx) {
  Node& n = ctx.node();
  const DType to = ctx.in(1).dtype;
  n.op = "Cast";
  n.attrs.erase("saturate");
  n.SetInt("to", DTypeToOnnx(to));
  n.inputs.resize(1);
  ctx.SetOutput(0, to, ctx.in(0).shape);
  return Status::Ok();
}

bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || WideType(t) == DType::kFloat32;
}

Status EvalCast(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const DType to = ctx.out(0).dtype;
  // Integers stay exact through AsInts; floats go through AsDoubles (to an integer: truncated).
  const bool f = IsFloat(x.dtype);
  const std::vector<double> d = f ? x.AsDoubles() : std::vector<double>();
  const std::vector<int64_t> n = f ? std::vector<int64_t>() : x.AsInts();
  const bool saturate = ctx.node().Int("saturate", 1) != 0;
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (int64_t i = 0; i < x.elements(); ++i) {
    // A float that no int64 holds (NaN, infinities, past 2^63) converts as 0 to an integer.
    const bool whole_ok = !f || (d[i] > -9.2e18 && d[i] < 9.2e18);
    PutElement(to, y.data(), static_cast<size_t>(i), f ? d[i] : static_cast<double>(n[i]),
               f ? (whole_ok ? static_cast<int64_t>(d[i]) : 0) : n[i], saturate);
  }
  return Status::Ok();
}

Status InferSize(OpContext& ctx) {
  ctx.SetOutput(0, DType::kInt64, {});
  return Status::Ok();
}

Status EvalSize(OpContext& ctx) {
  PutElement(DType::kInt64, ctx.OutBytes(0).data(), 0, 0, NumElements(ctx.in(0).shape));
  return Status::Ok();
}

}  // namespace

const OpDef kCast = {
    "Cast", {attr::Int("to"), attr::Int("saturate")}, 1, 1, 1, InferCast, EvalCast, nullptr, false,
    6};
const OpDef kCastLike = {
    "CastLike", {attr::Int("saturate")}, 2, 2, 1, InferCastLike, EvalCast, nullptr, false, 15};
const OpDef kSize = {"Size", {}, 1, 1, 1, InferSize, EvalSize, nullptr, true};

}  // namespace crosstune::model
