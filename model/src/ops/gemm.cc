// Gemm (alpha * A' B' + beta * C, C broadcast to [M, N]) and MatMul (numpy's, batched with
// broadcasting; 1-D operands promoted); Dense and PackedMatMul, which the compiler makes.
#include "crosstune/tuner/matmul_layout.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferGemm(OpContext& ctx) {
  const Value& a = ctx.in(0);
  const Value& b = ctx.in(1);
  if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32) {
    return ctx.Error("only float32 is supported");
  }
  if (a.shape.size() != 2 || b.shape.size() != 2) return ctx.Error("A and B must be 2-D");
  const bool ta = ctx.node().Int("transA", 0) != 0, tb = ctx.node().Int("transB", 0) != 0;
  const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb) {
    return ctx.Error("A " + ShapeText(a.shape) + " and B " + ShapeText(b.shape) +
                     " do not multiply");
  }
  if (ctx.has_input(2)) {
    std::vector<int64_t> out;
    if (!ops::BroadcastShapes(ctx.in(2).shape, {m, n}, &out) || out != std::vector<int64_t>{m, n}) {
      return ctx.Error("C " + ShapeText(ctx.in(2).shape) + " does not broadcast to [M, N]");
    }
  }
  ctx.SetOutput(0, DType::kFloat32, {m, n});
  return Status::Ok();
}

Status EvalGemm(OpContext& ctx) {
  const Value& av = ctx.in(0);
  const Value& bv = ctx.in(1);
  const Node& nd = ctx.node();
  const bool ta = nd.Int("transA", 0) != 0, tb = nd.Int("transB", 0) != 0;
  const double alpha = nd.Float("alpha", 1.0), beta = nd.Float("beta", 1.0);
  const int64_t m = ctx.out(0).shape[0], n = ctx.out(0).shape[1];
  const int64_t k = ta ? av.shape[0] : av.shape[1];
  std::vector<int64_t> cidx;
  if (ctx.has_input(2)) cidx = ops::BroadcastIndex(ctx.in(2).shape, {m, n});
  std::vector<float>& y = ctx.OutFloats(0);
  const float *a = av.floats(), *b = bv.floats();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) *
               (tb ? b[j * k + p] : b[p * n + j]);
      }
      double v = alpha * sum;
      if (!cidx.empty()) v += beta * ctx.in(2).floats()[cidx[i * n + j]];
      y[i * n + j] = static_cast<float>(v);
    }
  return Status::Ok();
}

double GemmFlops(const Graph& g, const Node& n) {
  const auto& a = g.values[n.inputs[0]].shape;
  const int64_t k = n.Int("transA", 0) ? a[0] : a[1];
  return 2.0 * g.values[n.outputs[0]].elements() * k;
}

// MatMul's operands as batched matrices: batch shape, rows, cols.
struct Mat {
  std::vector<int64_t> batch;
  int64_t rows, cols;
};

Status InferMatMul(OpContext& ctx) {
  const Value& a = ctx.in(0);
  const Value& b = ctx.in(1);
  if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32) {
    return ctx.Error("only float32 is supported");
  }
  std::vector<int64_t> out;
  CT_RETURN_IF_ERROR(ops::MatMulShape(ctx, a.shape, b.shape, &out));
  ctx.SetOutput(0, DType::kFloat32, out);
  return Status::Ok();
}

Status EvalMatMul(OpContext& ctx) {
  const Value& av = ctx.in(0);
  const Value& bv = ctx.in(1);
  auto as_mat = [](const std::vector<int64_t>& s, bool left) {
    Mat m;
    if (s.size() == 1) {
      m.rows = left ? 1 : s[0];
      m.cols = left ? s[0] : 1;
    } else {
      m.batch.assign(s.begin(), s.end() - 2);
      m.rows = s[s.size() - 2];
      m.cols = s.back();
    }
    return m;
  };
  const Mat a = as_mat(av.shape, true), b = as_mat(bv.shape, false);
  std::vector<int64_t> batch;
  ops::BroadcastShapes(a.batch, b.batch, &batch);
  const std::vector<int64_t> ia = ops::BroadcastIndex(a.batch, batch);
  const std::vector<int64_t> ib = ops::BroadcastIndex(b.batch, batch);
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  std::vector<float>& y = ctx.OutFloats(0);
  for (size_t bi = 0; bi < ia.size(); ++bi) {
    const float* pa = av.floats() + ia[bi] * m * k;
    const float* pb = bv.floats() + ib[bi] * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(pa[i * k + p]) * pb[p * n + j];
        y[(bi * m + i) * n + j] = static_cast<float>(sum);
      }
  }
  return Status::Ok();
}

double MatMulFlops(const Graph& g, const Node& n) {
  return 2.0 * g.values[n.outputs[0]].elements() * g.values[n.inputs[0]].shape.back();
}

// PackedMatMul (PackMatmulWeights, layout_plan.h): A [..., K] times a constant [K, N] weight
// packed in column panels (tuner/matmul_layout.h), attributes k, n and vw (the panels' width);
// out [..., N].
Status InferPackedMatMul(OpContext& ctx) {
  const Value& a = ctx.in(0);
  const Value& b = ctx.in(1);
  const Node& n = ctx.node();
  const int64_t k = n.Int("k", 0), cols = n.Int("n", 0), vw = n.Int("vw", 0);
  if (k < 1 || cols < 1 || vw < 1) return ctx.Error("wants attributes k, n and vw of 1 or more");
  if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32 || a.shape.empty() ||
      a.shape.back() != k ||
      b.shape != std::vector<int64_t>{tuner::MatmulPanels(cols, vw), k, vw}) {
    return ctx.Error("wants float32 A [..., " + std::to_string(k) + "] and B in panels [" +
                     std::to_string(tuner::MatmulPanels(cols, vw)) + ", " + std::to_string(k) +
                     ", " + std::to_string(vw) + "]");
  }
  std::vector<int64_t> out = a.shape;
  out.back() = cols;
  ctx.SetOutput(0, DType::kFloat32, out);
  return Status::Ok();
}

Status EvalPackedMatMul(OpContext& ctx) {
  const Node& n = ctx.node();
  const int64_t k = n.Int("k", 0), cols = n.Int("n", 0);
  const std::vector<float> b = tuner::UnpackMatmulPanels(ctx.InFloats(1), k, cols, n.Int("vw", 1));
  const float* a = ctx.InFloats(0);
  std::vector<float>& y = ctx.OutFloats(0);
  const int64_t rows = static_cast<int64_t>(y.size()) / cols;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a[i * k + p]) * b[p * cols + j];
      y[i * cols + j] = static_cast<float>(sum);
    }
  return Status::Ok();
}

double PackedMatMulFlops(const Graph& g, const Node& n) {
  return 2.0 * g.values[n.outputs[0]].elements() * n.Int("k", 0);
}

// Dense (the passes' form of a Gemm with a constant weight): data [B, IN], weight [OUT, IN],
// bias [OUT]; y = data weight^T + bias.
Status InferDense(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const Value& w = ctx.in(1);
  if (x.shape.size() != 2 || w.shape.size() != 2 || x.shape[1] != w.shape[1] ||
      ctx.in(2).shape != std::vector<int64_t>{w.shape[0]}) {
    return ctx.Error("wants data [B, IN], weight [OUT, IN] and bias [OUT]");
  }
  ctx.SetOutput(0, DType::kFloat32, {x.shape[0], w.shape[0]});
  return Status::Ok();
}

Status EvalDense(OpContext& ctx) {
  const Value& xv = ctx.in(0);
  const Value& wv = ctx.in(1);
  const int64_t b = xv.shape[0], in = xv.shape[1], out = wv.shape[0];
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double sum = ctx.InFloats(2)[o];
      for (int64_t p = 0; p < in; ++p) {
        sum += static_cast<double>(xv.floats()[i * in + p]) * wv.floats()[o * in + p];
      }
      y[i * out + o] = static_cast<float>(sum);
    }
  return Status::Ok();
}

double DenseFlops(const Graph& g, const Node& n) {
  return 2.0 * g.values[n.outputs[0]].elements() * g.values[n.inputs[1]].shape[1];
}

}  // namespace

const OpDef kDense = {"Dense",
                      {},
                      3,
                      3,
                      1,
                      InferDense,
                      EvalDense,
                      DenseFlops,
                      /*folds_from_shapes=*/false,
                      kMinOpsetDefault,
                      /*from_passes=*/true};
const OpDef kPackedMatMul = {"PackedMatMul",
                             {attr::Int("k"), attr::Int("n"), attr::Int("vw")},
                             2,
                             2,
                             1,
                             InferPackedMatMul,
                             EvalPackedMatMul,
                             PackedMatMulFlops,
                             /*folds_from_shapes=*/false,
                             kMinOpsetDefault,
                             /*from_passes=*/true};
namespace ops {

Status MatMulShape(const OpContext& ctx, const std::vector<int64_t>& a,
                   const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  if (a.empty() || b.empty()) return ctx.Error("scalars do not multiply");
  const int64_t ka = a.back();
  const int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (ka != kb) {
    return ctx.Error("A " + ShapeText(a) + " and B " + ShapeText(b) + " do not multiply");
  }
  std::vector<int64_t> ba(a.begin(), a.end() - std::min<size_t>(2, a.size()));
  std::vector<int64_t> bb(b.begin(), b.end() - std::min<size_t>(2, b.size()));
  if (!BroadcastShapes(ba, bb, out)) return ctx.Error("batch dimensions do not broadcast");
  if (a.size() >= 2) out->push_back(a[a.size() - 2]);
  if (b.size() >= 2) out->push_back(b.back());
  return Status::Ok();
}

}  // namespace ops

const OpDef kGemm = {
    "Gemm",   {attr::Float("alpha"), attr::Float("beta"), attr::Int("transA"), attr::Int("transB")},
    2,        3,
    1,        InferGemm,
    EvalGemm, GemmFlops};
const OpDef kMatMul = {"MatMul", {}, 2, 2, 1, InferMatMul, EvalMatMul, MatMulFlops};

}  // namespace crosstune::model
