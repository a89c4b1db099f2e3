// Slice (any element type): starts, ends, axes and steps as attributes (opset 1) or constant
// inputs (opset 10 on), each axis clamped as ONNX states (negative indices from the end, steps
// of either sign). Infer writes the result back as one start and one step per dimension
// (attributes `starts` and `steps`, the inputs dropped); the output's shape holds the counts.
#include <algorithm>
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferSlice(OpContext& ctx) {
  Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    if (ctx.num_inputs() > 1) return ctx.Error("starts and ends are attributes before opset 10");
    starts = n.Ints("starts");
    ends = n.Ints("ends");
    axes = n.Ints("axes");
  } else {
    if (n.Has("starts") || n.Has("ends") || n.Has("axes")) {
      return ctx.Error("starts, ends and axes are inputs since opset 10");
    }
    CT_ASSIGN_OR_RETURN(starts, ctx.ConstInts(1, "starts"));
    CT_ASSIGN_OR_RETURN(ends, ctx.ConstInts(2, "ends"));
    if (ctx.has_input(3)) {
      CT_ASSIGN_OR_RETURN(axes, ctx.ConstInts(3, "axes"));
    }
    if (ctx.has_input(4)) {
      CT_ASSIGN_OR_RETURN(steps, ctx.ConstInts(4, "steps"));
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return ctx.Error("starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1);
  std::vector<int64_t> out = x.shape;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t d = ops::NormAxis(axes[i], rank);
    if (d < 0 || seen[d]) return ctx.Error("bad or repeated axis " + std::to_string(axes[i]));
    seen[d] = true;
    if (steps[i] == 0) return ctx.Error("a step is 0");
    const int64_t dim = x.shape[d];
    // Past-the-end markers (INT64_MAX, INT64_MIN) come through the clamps unchanged in sign.
    auto from_end = [dim](int64_t v) { return v < 0 ? (v < -dim ? -dim - 1 : v) + dim : v; };
    int64_t s = from_end(starts[i]), e = from_end(ends[i]);
    int64_t count;
    if (steps[i] > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e - steps[i] - 1) / -steps[i] : 0;
    }
    first[d] = count > 0 ? s : 0;
    step[d] = steps[i];
    out[d] = count;
  }
  n.attrs.clear();
  n.SetInts("starts", first);
  n.SetInts("steps", step);
  n.inputs.resize(1);
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

namespace ops {

SliceStrides SliceOf(const Node& n, const std::vector<int64_t>& in_shape) {
  const std::vector<int64_t> starts = n.Ints("starts"), steps = n.Ints("steps");
  const size_t rank = in_shape.size();
  SliceStrides s;
  s.strides.assign(rank, 0);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    s.offset += starts[d] * stride;
    s.strides[d] = steps[d] * stride;
    stride *= in_shape[d];
  }
  return s;
}

}  // namespace ops

namespace {

Status EvalSlice(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const auto& out = ctx.out(0).shape;
  const ops::SliceStrides s = ops::SliceOf(ctx.node(), x.shape);
  const size_t es = static_cast<size_t>(DTypeBytes(x.dtype));
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  const uint8_t* in = x.data->data();
  const int64_t total = NumElements(out);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = s.offset;
    for (size_t d = out.size(); d-- > 0;) {
      off += rem % out[d] * s.strides[d];
      rem /= out[d];
    }
    std::memcpy(y.data() + static_cast<size_t>(i) * es, in + static_cast<size_t>(off) * es, es);
  }
  return Status::Ok();
}

}  // namespace

const OpDef kSlice = {
    "Slice",   {attr::Ints("starts"), attr::Ints("ends"), attr::Ints("axes"), attr::Ints("steps")},
    1,         5,
    1,         InferSlice,
    EvalSlice, nullptr,
    false,     1};

}  // namespace crosstune::model
