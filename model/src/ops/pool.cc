// MaxPool, AveragePool (count_include_pad, ceil_mode) and GlobalAveragePool on NCHW float32.
// After RewriteLayouts (layout_plan.h) a MaxPool may read and write blocked tensors and a
// GlobalAveragePool read one (attributes block, channels): the host evaluates them through NCHW
// copies.
#include <algorithm>
#include <cfloat>

#include "crosstune/tuner/conv_layout.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferPool(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32) return ctx.Error("only float32 is supported");
  if (x.shape.size() != 4) {
    return ctx.Error("only 2-D pooling (4-D NCHW data) is supported, data is " +
                     ShapeText(x.shape));
  }
  if (!ctx.node().Has("kernel_shape")) return ctx.Error("attribute 'kernel_shape' is missing");
  if (ctx.node().Int("storage_order", 0) != 0) return ctx.Error("storage_order=1 is not supported");
  if (ctx.node().op == "AveragePool" &&
      ctx.node().Ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1}) {
    return ctx.Error("dilations are not supported");
  }
  ops::Window wd;
  CT_RETURN_IF_ERROR(ops::ResolveWindow(ctx, x.shape[2], x.shape[3], {}, &wd));
  ctx.SetOutput(0, DType::kFloat32, {x.shape[0], x.shape[1], wd.oh, wd.ow});
  return Status::Ok();
}

template <typename F>
void ForEachWindow(OpContext& ctx, F f) {
  const Value& xv = ctx.in(0);
  const ops::Window wd = ops::WindowOf(ctx.node(), ctx.out(0).shape);
  const int64_t planes = xv.shape[0] * xv.shape[1], h = xv.shape[2], w = xv.shape[3];
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < wd.oh; ++oy)
      for (int64_t ox = 0; ox < wd.ow; ++ox) {
        y[(p * wd.oh + oy) * wd.ow + ox] = f(xv.floats() + p * h * w, h, w, wd, oy, ox);
      }
}

// A pool of blocked data: unblocked, run, its output blocked again when `blocked_out`.
Status EvalBlockedPool(OpContext& ctx, bool blocked_out) {
  const int64_t cb = ctx.node().Int("block", 1), c = ctx.node().Int("channels", 0);
  const Value& xv = ctx.in(0);
  const auto& x = xv.shape;
  const auto& y = ctx.out(0).shape;
  const std::vector<int64_t> plain_y = {y[0], c, y[2], y[3]};
  CT_ASSIGN_OR_RETURN(
      std::vector<float> out,
      ops::EvalPlain(ctx,
                     {{{x[0], c, x[2], x[3]},
                       tuner::FromBlocked(ops::FloatsOf(xv), x[0], c, x[2] * x[3], cb)}},
                     plain_y));
  ctx.OutFloats(0) = blocked_out ? tuner::ToBlocked(out, y[0], c, y[2] * y[3], cb) : out;
  return Status::Ok();
}

Status EvalMaxPool(OpContext& ctx) {
  if (ctx.node().Has("block")) return EvalBlockedPool(ctx, true);
  ForEachWindow(
      ctx, [](const float* x, int64_t h, int64_t w, const ops::Window& wd, int64_t oy, int64_t ox) {
        float m = -FLT_MAX;
        for (int64_t r = 0; r < wd.kh; ++r) {
          const int64_t iy = oy * wd.sh - wd.pt + r * wd.dh;
          if (iy < 0 || iy >= h) continue;
          for (int64_t s = 0; s < wd.kw; ++s) {
            const int64_t ix = ox * wd.sw - wd.pl + s * wd.dw;
            if (ix >= 0 && ix < w) m = std::max(m, x[iy * w + ix]);
          }
        }
        return m;
      });
  return Status::Ok();
}

Status EvalAveragePool(OpContext& ctx) {
  const bool include_pad = ctx.node().Int("count_include_pad", 0) != 0;
  ForEachWindow(ctx, [include_pad](const float* x, int64_t h, int64_t w, const ops::Window& wd,
                                   int64_t oy, int64_t ox) {
    const int64_t y0 = oy * wd.sh - wd.pt, x0 = ox * wd.sw - wd.pl;
    double sum = 0;
    int64_t count = 0;
    for (int64_t iy = std::max<int64_t>(y0, 0); iy < std::min(y0 + wd.kh, h); ++iy)
      for (int64_t ix = std::max<int64_t>(x0, 0); ix < std::min(x0 + wd.kw, w); ++ix) {
        sum += x[iy * w + ix];
        ++count;
      }
    if (include_pad) {
      // Padding counts; the end that ceil_mode adds past the pads does not.
      const int64_t rows = std::min(y0 + wd.kh, h + wd.pb) - std::max(y0, -wd.pt);
      const int64_t cols = std::min(x0 + wd.kw, w + wd.pr) - std::max(x0, -wd.pl);
      count = rows * cols;
    }
    return static_cast<float>(count ? sum / count : 0.0);
  });
  return Status::Ok();
}

Status InferGlobalAvgPool(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32 || x.shape.size() < 3) {
    return ctx.Error("data must be float32 [N, C, spatial...]");
  }
  std::vector<int64_t> shape = x.shape;
  for (size_t d = 2; d < shape.size(); ++d) shape[d] = 1;
  ctx.SetOutput(0, DType::kFloat32, shape);
  return Status::Ok();
}

Status EvalGlobalAvgPool(OpContext& ctx) {
  if (ctx.node().Has("block")) return EvalBlockedPool(ctx, false);
  const Value& xv = ctx.in(0);
  const int64_t planes = xv.shape[0] * xv.shape[1], inner = xv.elements() / planes;
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i) sum += xv.floats()[p * inner + i];
    y[p] = static_cast<float>(sum / inner);
  }
  return Status::Ok();
}

// Of a blocked tensor, the elements of its NCHW form (lanes past C are no work).
double NchwElements(const Graph& g, const Node& n, int v) {
  const auto& s = g.values[v].shape;
  if (!n.Has("block") || s.size() != 5) return static_cast<double>(NumElements(s));
  return static_cast<double>(s[0]) * n.Int("channels", 0) * s[2] * s[3];
}

double PoolFlops(const Graph& g, const Node& n) {
  const auto k = n.Ints("kernel_shape", {1, 1});
  return NchwElements(g, n, n.outputs[0]) * k[0] * k[1];
}
double GlobalPoolFlops(const Graph& g, const Node& n) { return NchwElements(g, n, n.inputs[0]); }

}  // namespace

const OpDef kMaxPool = {"MaxPool",
                        {attr::String("auto_pad"), attr::Int("ceil_mode"), attr::Ints("dilations"),
                         attr::Ints("kernel_shape"), attr::Ints("pads"), attr::Int("storage_order"),
                         attr::Ints("strides")},
                        1,
                        1,
                        1,
                        InferPool,
                        EvalMaxPool,
                        PoolFlops};
const OpDef kAveragePool = {"AveragePool",
                            {attr::String("auto_pad"), attr::Int("ceil_mode"),
                             attr::Int("count_include_pad"), attr::Ints("dilations"),
                             attr::Ints("kernel_shape"), attr::Ints("pads"), attr::Ints("strides")},
                            1,
                            1,
                            1,
                            InferPool,
                            EvalAveragePool,
                            PoolFlops};
const OpDef kGlobalAvgPool = {
    "GlobalAveragePool", {},    1, 1, 1, InferGlobalAvgPool, EvalGlobalAvgPool,
    GlobalPoolFlops,     false, 1};

}  // namespace crosstune::model
