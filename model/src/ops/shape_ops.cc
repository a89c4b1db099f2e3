// Operators that move data without arithmetic, on any dtype: Concat, Flatten, Reshape,
// Transpose, Squeeze, Unsqueeze, and Dropout and Identity (inference: a copy; the passes remove
// them).
#include <algorithm>
#include <cstring>
#include <set>

#include "crosstune/checked_math.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

// Output 0 is input 0's bytes under another shape.
Status EvalCopy(OpContext& ctx) {
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  if (!y.empty()) std::memcpy(y.data(), ctx.in(0).data->data(), y.size());  // (empty: may be null)
  return Status::Ok();
}

Status InferConcat(OpContext& ctx) {
  if (!ctx.node().Has("axis")) return ctx.Error("attribute 'axis' is missing");
  const auto& first = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  const int64_t axis = ops::NormAxis(ctx.node().Int("axis", 0), rank);
  if (axis < 0) return ctx.Error("axis out of range for " + ShapeText(first.shape));
  ctx.node().SetInt("axis", axis);
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Value& v = ctx.in(i);
    if (v.dtype != first.dtype || static_cast<int64_t>(v.shape.size()) != rank) {
      return ctx.Error("inputs differ in dtype or rank");
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && v.shape[d] != first.shape[d]) {
        return ctx.Error("shapes " + ShapeText(first.shape) + " and " + ShapeText(v.shape) +
                         " differ outside the axis");
      }
    }
    uint64_t sum = 0;
    if (!CheckedAdd(static_cast<uint64_t>(shape[axis]), static_cast<uint64_t>(v.shape[axis]),
                    &sum)) {
      return ctx.Error("the concatenated axis is too long");
    }
    shape[axis] = static_cast<int64_t>(sum);
  }
  ctx.SetOutput(0, first.dtype, shape);
  return Status::Ok();
}

Status EvalConcat(OpContext& ctx) {
  const auto& shape = ctx.out(0).shape;
  const int64_t axis = ctx.node().Int("axis", 0);
  const int64_t es = DTypeBytes(ctx.out(0).dtype);
  int64_t outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  int64_t at = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const int64_t chunk = ctx.in(i).shape[axis] * inner;
    for (int64_t o = 0; o < outer && chunk > 0; ++o) {
      std::memcpy(y.data() + o * shape[axis] * inner + at, ctx.in(i).data->data() + o * chunk,
                  chunk);
    }
    at += chunk;
  }
  return Status::Ok();
}

Status InferFlatten(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = ctx.node().Int("axis", 1);
  if (axis < -rank || axis > rank) return ctx.Error("axis out of range");
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  ctx.SetOutput(0, x.dtype, {outer, outer ? x.elements() / outer : 0});
  return Status::Ok();
}

Status InferReshape(OpContext& ctx) {
  const Value& x = ctx.in(0);
  // The target shape is resolved once and kept as an attribute (the shape input then goes, so a
  // compiled Reshape is a copy of its one input).
  if (ctx.node().Has("shape") && ctx.num_inputs() == 1) {
    const auto shape = ctx.node().Ints("shape");
    if (NumElements(shape) != x.elements()) return ctx.Error("shape does not fit the data");
    ctx.SetOutput(0, x.dtype, shape);
    return Status::Ok();
  }
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstInts(1, "the target shape"));
  const bool allow_zero = ctx.node().Int("allowzero", 0) != 0;
  int infer = -1;
  uint64_t known = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allow_zero) {
      if (d >= x.shape.size()) return ctx.Error("a 0 in the shape has no input dimension");
      shape[d] = x.shape[d];
    }
    if (shape[d] == -1) {
      if (infer >= 0) return ctx.Error("more than one -1 in the shape");
      infer = static_cast<int>(d);
    } else if (shape[d] < 0) {
      return ctx.Error("negative dimension in the shape");
    } else if (!CheckedMul(known, static_cast<uint64_t>(shape[d]), &known)) {
      return ctx.Error("the shape " + ShapeText(shape) + " is too large");
    }
  }
  if (infer >= 0) {
    const auto elements = static_cast<uint64_t>(x.elements());
    if (known == 0 || elements % known) return ctx.Error("cannot infer the -1 dimension");
    shape[infer] = static_cast<int64_t>(elements / known);
  }
  if (NumElements(shape) != x.elements()) {
    return ctx.Error("cannot reshape " + ShapeText(x.shape) + " to " + ShapeText(shape));
  }
  ctx.node().SetInts("shape", shape);
  ctx.node().inputs.resize(1);
  ctx.SetOutput(0, x.dtype, shape);
  return Status::Ok();
}

Status InferTranspose(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> perm = ctx.node().Ints("perm");
  if (!ctx.node().Has("perm")) {
    for (int64_t d = rank; d-- > 0;) perm.push_back(d);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return ctx.Error("perm has " + std::to_string(perm.size()) + " values for a tensor of rank " +
                     std::to_string(rank));
  }
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      return ctx.Error("perm " + ShapeText(perm) + " is not a permutation of the " +
                       std::to_string(rank) + " axes");
    }
    seen[p] = true;
  }
  ctx.node().SetInts("perm", perm);
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(x.shape[p]);
  ctx.SetOutput(0, x.dtype, shape);
  return Status::Ok();
}

Status EvalTranspose(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const auto perm = ctx.node().Ints("perm");
  const auto& out = ctx.out(0).shape;
  const size_t rank = perm.size();
  const int64_t es = DTypeBytes(x.dtype);
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * x.shape[d];
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  std::vector<int64_t> pos(rank, 0);
  for (int64_t e = 0; e < x.elements(); ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += pos[d] * in_stride[perm[d]];
    std::memcpy(y.data() + e * es, x.data->data() + src * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++pos[d] < out[d]) break;
      pos[d] = 0;
    }
  }
  return Status::Ok();
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, a constant input since.
Expected<std::vector<int64_t>> Axes(OpContext& ctx) {
  if (ctx.opset() >= 13 && !ctx.node().Has("axes")) {
    if (!ctx.has_input(1)) return std::vector<int64_t>{};
    CT_ASSIGN_OR_RETURN(auto axes, ctx.ConstInts(1, "axes"));
    ctx.node().SetInts("axes", axes);
    ctx.node().inputs.resize(1);
    return axes;
  }
  if (ctx.num_inputs() > 1) return ctx.Error("axes are an attribute before opset 13");
  return ctx.node().Ints("axes");
}

Status InferSqueeze(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  CT_ASSIGN_OR_RETURN(auto axes, Axes(ctx));
  std::set<int64_t> drop;
  for (int64_t a : axes) {
    const int64_t d = ops::NormAxis(a, rank);
    if (d < 0 || x.shape[d] != 1) return ctx.Error("axis " + std::to_string(a) + " is not 1");
    drop.insert(d);
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    const bool gone = axes.empty() ? x.shape[d] == 1 : drop.count(d) != 0;
    if (!gone) shape.push_back(x.shape[d]);
  }
  ctx.SetOutput(0, x.dtype, shape);
  return Status::Ok();
}

Status InferUnsqueeze(OpContext& ctx) {
  const Value& x = ctx.in(0);
  CT_ASSIGN_OR_RETURN(auto axes, Axes(ctx));
  const int64_t rank = static_cast<int64_t>(x.shape.size() + axes.size());
  std::set<int64_t> add;
  for (int64_t a : axes) {
    const int64_t d = ops::NormAxis(a, rank);
    if (d < 0 || !add.insert(d).second)
      return ctx.Error("bad or repeated axis " + std::to_string(a));
  }
  std::vector<int64_t> shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) shape.push_back(add.count(d) ? 1 : x.shape[next++]);
  ctx.SetOutput(0, x.dtype, shape);
  return Status::Ok();
}

Status InferIdentity(OpContext& ctx) {
  ctx.SetOutput(0, ctx.in(0).dtype, ctx.in(0).shape);
  return Status::Ok();
}

// Inference: the data passes through. A training_mode input must be a false constant.
Status InferDropout(OpContext& ctx) {
  if (ctx.has_input(2)) {
    const Value& t = ctx.in(2);
    if (!t.is_const() || t.AsInts() != std::vector<int64_t>{0}) {
      return ctx.Error("training_mode must be a constant false (inference only)");
    }
  }
  ctx.node().inputs.resize(1);
  return InferIdentity(ctx);
}

}  // namespace

const OpDef kConcat = {"Concat", {attr::Int("axis")}, 1, 1024, 1, InferConcat, EvalConcat, nullptr};
const OpDef kFlatten = {"Flatten", {attr::Int("axis")}, 1, 1, 1, InferFlatten, EvalCopy, nullptr};
const OpDef kReshape = {
    "Reshape", {attr::Int("allowzero"), attr::Ints("shape")}, 1, 2, 1, InferReshape, EvalCopy,
    nullptr};
const OpDef kTranspose = {"Transpose",    {attr::Ints("perm")}, 1,      1, 1,
                          InferTranspose, EvalTranspose,        nullptr};
const OpDef kSqueeze = {"Squeeze", {attr::Ints("axes")}, 1, 2, 1, InferSqueeze, EvalCopy, nullptr};
const OpDef kUnsqueeze = {"Unsqueeze", {attr::Ints("axes")}, 1,        2,
                          1,           InferUnsqueeze,       EvalCopy, nullptr};
const OpDef kDropout = {
    "Dropout", {attr::Float("ratio"), attr::Int("seed")}, 1, 3, 1, InferDropout, EvalCopy, nullptr};
const OpDef kIdentity = {"Identity", {}, 1, 1, 1, InferIdentity, EvalCopy, nullptr};

}  // namespace crosstune::model
