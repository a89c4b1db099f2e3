// Softmax and LogSoftmax: over one axis (opset 13+, default -1), or before opset 13 over the
// flattened dimensions from `axis` on (default 1), as the ONNX versions define it.
#include <cmath>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferSoftmax(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32) return ctx.Error("only float32 is supported");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = ops::NormAxis(ctx.node().Int("axis", ctx.opset() >= 13 ? -1 : 1), rank);
  if (axis < 0) return ctx.Error("axis out of range for " + ShapeText(x.shape));
  ctx.node().SetInt("axis", axis);
  ctx.SetOutput(0, DType::kFloat32, x.shape);
  return Status::Ok();
}

Status EvalSoftmaxOrLog(OpContext& ctx, bool log) {
  const Value& xv = ctx.in(0);
  const int64_t axis = ctx.node().Int("axis", 0);
  const auto& s = xv.shape;
  // Rows of `len` elements `stride` apart: one axis since opset 13, all trailing ones before.
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  if (ctx.opset() >= 13) {
    len = s[axis];
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  } else {
    for (size_t d = axis; d < s.size(); ++d) len *= s[d];
  }
  const float* x = xv.floats();
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      float m = x[base];
      for (int64_t j = 1; j < len; ++j) m = std::max(m, x[base + j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(static_cast<double>(x[base + j * inner]) - m);
      for (int64_t j = 0; j < len; ++j) {
        const double v = static_cast<double>(x[base + j * inner]) - m;
        y[base + j * inner] = static_cast<float>(log ? v - std::log(sum) : std::exp(v) / sum);
      }
    }
  return Status::Ok();
}

Status EvalSoftmax(OpContext& ctx) { return EvalSoftmaxOrLog(ctx, false); }
Status EvalLogSoftmax(OpContext& ctx) { return EvalSoftmaxOrLog(ctx, true); }

double SoftmaxFlops(const Graph& g, const Node& n) {
  return 3.0 * g.values[n.outputs[0]].elements();
}

}  // namespace

const OpDef kSoftmax = {"Softmax", {attr::Int("axis")}, 1,           1,
                        1,         InferSoftmax,        EvalSoftmax, SoftmaxFlops};
const OpDef kLogSoftmax = {"LogSoftmax", {attr::Int("axis")}, 1,           1, 1,
                           InferSoftmax, EvalLogSoftmax,      SoftmaxFlops};

}  // namespace crosstune::model
