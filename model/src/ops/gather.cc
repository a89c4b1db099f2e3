// Gather (any element type; int64 or int32 indices, negative ones counted from the end): the
// slices of `data` along `axis` that the indices name. Constant indices are checked against the
// axis at import; indices computed at run time are checked by the kernel, which fails the run
// with a named error.
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferGather(OpContext& ctx) {
  const Value& data = ctx.in(0);
  const Value& idx = ctx.in(1);
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32) {
    return ctx.Error("indices must be int64 or int32");
  }
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  const int64_t axis = ops::NormAxis(ctx.node().Int("axis", 0), rank);
  if (axis < 0) return ctx.Error("axis out of range for " + ShapeText(data.shape));
  const int64_t dim = data.shape[axis];
  if (idx.is_const()) {
    for (int64_t i : idx.AsInts()) {
      if (i < -dim || i >= dim) {
        return ctx.Error("index " + std::to_string(i) + " is out of range for axis " +
                         std::to_string(axis) + " of " + ShapeText(data.shape));
      }
    }
  }
  std::vector<int64_t> out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  ctx.node().SetInt("axis", axis);
  ctx.SetOutput(0, data.dtype, out);
  return Status::Ok();
}

Status EvalGather(OpContext& ctx) {
  const Value& data = ctx.in(0);
  const int64_t axis = ctx.node().Int("axis", 0);
  const std::vector<int64_t> idx = ctx.in(1).AsInts();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < data.shape.size(); ++d) {
    inner *= data.shape[d];
  }
  const int64_t dim = data.shape[axis];
  const size_t row = static_cast<size_t>(inner * DTypeBytes(data.dtype));
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  const uint8_t* x = data.data->data();
  size_t at = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : idx) {
      if (i < 0) i += dim;
      if (i < 0 || i >= dim) return ctx.Error("index out of range");
      std::memcpy(y.data() + at, x + static_cast<size_t>(o * dim + i) * row, row);
      at += row;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef kGather = {"Gather",    {attr::Int("axis")}, 2,       2,     1,
                       InferGather, EvalGather,          nullptr, false, 1};

}  // namespace crosstune::model
