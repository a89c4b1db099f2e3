// Reductions over any set of axes on float32: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare (keepdims,
// noop_with_empty_axes; the axes an attribute before ReduceSum-13 and the others' opset 18, a
// constant input since); and LayerNormalization over the trailing axes from `axis`, its scale
// and bias broadcast into them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

// The opset from which the operator takes its axes as an input (ReduceSum's 13, the others' 18).
int AxesInputSince(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

// Writes the reduced axes back as the attribute `axes` (sorted, each in [0, rank)), `keepdims`
// explicit, the axes input dropped; `axes` empty with noop_with_empty_axes: nothing reduced.
Status InferReduce(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32) return ctx.Error("only float32 is supported");
  Node& n = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  if (ctx.opset() >= AxesInputSince(n.op)) {
    if (n.Has("axes"))
      return ctx.Error("axes are an input since opset " + std::to_string(AxesInputSince(n.op)));
    if (ctx.has_input(1)) {
      CT_ASSIGN_OR_RETURN(axes, ctx.ConstInts(1, "axes"));
    }
  } else {
    if (ctx.num_inputs() > 1)
      return ctx.Error("axes are an attribute before opset " +
                       std::to_string(AxesInputSince(n.op)));
    axes = n.Ints("axes", {});
  }
  const bool noop = n.Int("noop_with_empty_axes", 0) != 0;
  if (axes.empty() && !noop) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) {
    const int64_t norm = ops::NormAxis(a, rank);
    if (norm < 0)
      return ctx.Error("axis " + std::to_string(a) + " out of range for " + ShapeText(x.shape));
    a = norm;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    return ctx.Error("an axis is given twice");
  }
  const bool keep = n.Int("keepdims", 1) != 0;
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (!reduced) {
      out.push_back(x.shape[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  n.SetInts("axes", axes);
  n.SetInt("keepdims", keep ? 1 : 0);
  n.attrs.erase("noop_with_empty_axes");
  n.inputs.resize(1);
  ctx.SetOutput(0, DType::kFloat32, out);
  return Status::Ok();
}

}  // namespace

namespace ops {

ReduceShape SplitReduce(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes) {
  ReduceShape r;
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    (reduced ? r.reduced_dims : r.kept_dims).push_back(shape[d]);
    (reduced ? r.reduced_strides : r.kept_strides).push_back(strides[d]);
  }
  return r;
}

}  // namespace ops

namespace {

// The offset in the input of element `i` of an index space of `dims` with `strides`.
int64_t Offset(int64_t i, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

Status EvalReduce(OpContext& ctx) {
  const Value& xv = ctx.in(0);
  const std::string& op = ctx.node().op;
  const ops::ReduceShape r = ops::SplitReduce(xv.shape, ctx.node().Ints("axes", {}));
  int64_t kept = 1, red = 1;
  for (int64_t d : r.kept_dims) kept *= d;
  for (int64_t d : r.reduced_dims) red *= d;
  const float* x = xv.floats();
  std::vector<float>& y = ctx.OutFloats(0);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < kept; ++k) {
    const int64_t base = Offset(k, r.kept_dims, r.kept_strides);
    double acc = op == "ReduceMax" ? -kInf : op == "ReduceMin" ? kInf : op == "ReduceProd" ? 1 : 0;
    double m = -kInf;  // ReduceLogSumExp's max
    if (op == "ReduceLogSumExp") {
      for (int64_t i = 0; i < red; ++i) {
        m = std::max(m,
                     static_cast<double>(x[base + Offset(i, r.reduced_dims, r.reduced_strides)]));
      }
    }
    for (int64_t i = 0; i < red; ++i) {
      const double v = x[base + Offset(i, r.reduced_dims, r.reduced_strides)];
      if (op == "ReduceMax") {
        acc = std::max(acc, v);
      } else if (op == "ReduceMin") {
        acc = std::min(acc, v);
      } else if (op == "ReduceProd") {
        acc *= v;
      } else if (op == "ReduceL1") {
        acc += std::fabs(v);
      } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
        acc += v * v;
      } else if (op == "ReduceLogSumExp") {
        acc += std::exp(v - m);
      } else {
        acc += v;  // Sum, Mean, LogSum
      }
    }
    if (op == "ReduceMean") acc /= static_cast<double>(red);
    if (op == "ReduceL2") acc = std::sqrt(acc);
    if (op == "ReduceLogSum") acc = std::log(acc);
    if (op == "ReduceLogSumExp") acc = red ? m + std::log(acc) : -kInf;
    y[k] = static_cast<float>(acc);
  }
  return Status::Ok();
}

double ReduceFlops(const Graph& g, const Node& n) {
  return static_cast<double>(g.values[n.inputs[0]].elements());
}

// LayerNormalization: Y, and Mean and InvStdDev (outputs 1 and 2, of shape X's up to `axis`
// and ones after) where they are read. `axis` is written back in [0, rank). RMSNormalization
// (opset 23) is the same without the mean: Y = X / sqrt(mean(X^2) + epsilon) * scale.
Status InferLayerNorm(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32) return ctx.Error("only float32 is supported");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = ops::NormAxis(ctx.node().Int("axis", -1), rank);
  if (axis < 0) return ctx.Error("axis out of range for " + ShapeText(x.shape));
  if (ctx.node().Int("stash_type", 1) != 1) return ctx.Error("only stash_type 1 is supported");
  const std::vector<int64_t> norm(x.shape.begin() + axis, x.shape.end());
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const Value& p = ctx.in(i);
    std::vector<int64_t> b;
    if (p.dtype != DType::kFloat32) return ctx.Error("scale and bias must be float32");
    if (!ops::BroadcastShapes(norm, p.shape, &b) || b != norm) {
      return ctx.Error(std::string(i == 1 ? "scale " : "bias ") + ShapeText(p.shape) +
                       " does not broadcast into the normalized " + ShapeText(norm));
    }
  }
  ctx.node().SetInt("axis", axis);
  ctx.node().attrs.erase("stash_type");
  ctx.SetOutput(0, DType::kFloat32, x.shape);
  std::vector<int64_t> stats(x.shape.begin(), x.shape.begin() + axis);
  stats.resize(x.shape.size(), 1);
  for (int o = 1; o < ctx.num_outputs(); ++o) ctx.SetOutput(o, DType::kFloat32, stats);
  return Status::Ok();
}

Status EvalLayerNorm(OpContext& ctx) {
  const bool rms = ctx.node().op == "RMSNormalization";
  const Value& xv = ctx.in(0);
  const int64_t axis = ctx.node().Int("axis", 0);
  const double eps = ctx.node().Float("epsilon", 1e-5);
  const std::vector<int64_t> norm(xv.shape.begin() + axis, xv.shape.end());
  int64_t len = 1;
  for (int64_t d : norm) len *= d;
  const int64_t rows = len ? xv.elements() / len : 0;
  std::vector<float> scale(static_cast<size_t>(len), 1.0f), bias(static_cast<size_t>(len), 0.0f);
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const float* p = ctx.in(i).floats();
    const std::vector<int64_t> idx = ops::BroadcastIndex(ctx.in(i).shape, norm);
    for (int64_t j = 0; j < len; ++j) (i == 1 ? scale : bias)[j] = p[idx[j]];
  }
  const float* x = xv.floats();
  std::vector<float> means(static_cast<size_t>(rows)), invs(static_cast<size_t>(rows));
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * len;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < len; ++j) mean += row[j];
      mean /= static_cast<double>(len);
    }
    for (int64_t j = 0; j < len; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(len);
    const double inv = 1.0 / std::sqrt(var + eps);
    means[r] = static_cast<float>(mean);
    invs[r] = static_cast<float>(inv);
    for (int64_t j = 0; j < len; ++j) {
      y[r * len + j] = static_cast<float>((row[j] - mean) * inv * scale[j] + bias[j]);
    }
  }
  // (Each OutFloats call may move the vectors it handed out before: taken after y's last use.)
  if (ctx.num_outputs() > 1) ctx.OutFloats(1) = std::move(means);
  if (ctx.num_outputs() > 2) ctx.OutFloats(2) = std::move(invs);
  return Status::Ok();
}

double LayerNormFlops(const Graph& g, const Node& n) {
  return 8.0 * g.values[n.outputs[0]].elements();
}

// Every row from opset 1: version 11 only added negative axes, 13 types, 18 the axes as an
// input (above).
const std::vector<AttrSpec> kReduceAttrs = {attr::Ints("axes"), attr::Int("keepdims"),
                                            attr::Int("noop_with_empty_axes")};

}  // namespace

const OpDef kReduceSum = {"ReduceSum", kReduceAttrs, 1,           2,     1,
                          InferReduce, EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceMean = {"ReduceMean", kReduceAttrs, 1,           2,     1,
                           InferReduce,  EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceMax = {"ReduceMax", kReduceAttrs, 1,           2,     1,
                          InferReduce, EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceMin = {"ReduceMin", kReduceAttrs, 1,           2,     1,
                          InferReduce, EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceProd = {"ReduceProd", kReduceAttrs, 1,           2,     1,
                           InferReduce,  EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceL1 = {"ReduceL1",  kReduceAttrs, 1,           2,     1,
                         InferReduce, EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceL2 = {"ReduceL2",  kReduceAttrs, 1,           2,     1,
                         InferReduce, EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceLogSum = {"ReduceLogSum", kReduceAttrs, 1,           2,     1,
                             InferReduce,    EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceLogSumExp = {"ReduceLogSumExp", kReduceAttrs, 1,           2,     1,
                                InferReduce,       EvalReduce,   ReduceFlops, false, 1};
const OpDef kReduceSumSquare = {"ReduceSumSquare", kReduceAttrs, 1,           2,     1,
                                InferReduce,       EvalReduce,   ReduceFlops, false, 1};
const OpDef kRMSNormalization = {
    "RMSNormalization",
    {attr::Int("axis"), attr::Float("epsilon"), attr::Int("stash_type")},
    2,
    2,
    1,
    InferLayerNorm,
    EvalLayerNorm,
    LayerNormFlops,
    false,
    23};
const OpDef kLayerNormalization = {
    "LayerNormalization",
    {attr::Int("axis"), attr::Float("epsilon"), attr::Int("stash_type")},
    2,
    3,
    3,
    InferLayerNorm,
    EvalLayerNorm,
    LayerNormFlops,
    false,
    17};

}  // namespace crosstune::model
