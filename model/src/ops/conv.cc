// Conv (ONNX) and FusedConv (the passes' conv + bias + residual add + activation: one tuned task).
//
// FusedConv: inputs data [N,C,H,W], weight [K,C/group,R,S], bias [K] (optional), residual
// [N,K,OH,OW] (optional); attributes as Conv's after import (explicit pads) plus activation
// ("none", "relu" or "relu6": clamped to [0, 6]). After RewriteLayouts (layout_plan.h) a conv2d
// or depthwise conv may hold blocked data, residual and output and a packed weight (attributes
// layout, block, channels, filters): the host evaluates it through NCHW copies.
#include <algorithm>
#include <cmath>

#include "crosstune/tuner/conv_layout.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferConvLike(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const Value& w = ctx.in(1);
  if (x.dtype != DType::kFloat32 || w.dtype != DType::kFloat32) {
    return ctx.Error("only float32 is supported");
  }
  if (x.shape.size() != 4 || w.shape.size() != 4) {
    return ctx.Error("only 2-D convolutions (4-D NCHW data and weight) are supported, data is " +
                     ShapeText(x.shape));
  }
  const int64_t group = ctx.node().Int("group", 1);
  const int64_t c = x.shape[1], k = w.shape[0];
  if (group < 1 || c % group != 0 || k % group != 0 || w.shape[1] != c / group) {
    return ctx.Error("weight " + ShapeText(w.shape) + " does not fit data " + ShapeText(x.shape) +
                     " with group " + std::to_string(group));
  }
  ops::Window wd;
  CT_RETURN_IF_ERROR(
      ops::ResolveWindow(ctx, x.shape[2], x.shape[3], {w.shape[2], w.shape[3]}, &wd));
  if (wd.kh != w.shape[2] || wd.kw != w.shape[3]) {
    return ctx.Error("kernel_shape differs from the weight's " + ShapeText(w.shape));
  }
  if (ctx.has_input(2) && ctx.in(2).shape != std::vector<int64_t>{k}) {
    return ctx.Error("bias must be [" + std::to_string(k) + "]");
  }
  std::vector<int64_t> out = {x.shape[0], k, wd.oh, wd.ow};
  if (ctx.has_input(3) && ctx.in(3).shape != out) {
    return ctx.Error("residual must be " + ShapeText(out));
  }
  const std::string act = ctx.node().String("activation", "none");
  if (act != "none" && act != "relu" && act != "relu6") {
    return ctx.Error("activation '" + act + "' is not supported");
  }
  ctx.SetOutput(0, DType::kFloat32, out);
  return Status::Ok();
}

// A conv of layout 1 or 2 (tuner::ConvLayout): unpacked, run, its output blocked again.
Status EvalBlockedConv(OpContext& ctx) {
  const Node& n = ctx.node();
  const int64_t cb = n.Int("block", 1), c = n.Int("channels", 0), k = n.Int("filters", 0);
  const bool packed = n.Int("layout", 0) == static_cast<int64_t>(tuner::ConvLayout::kBlocked);
  const int64_t group = n.Int("group", 1);
  const Value& xv = ctx.in(0);
  const Value& wv = ctx.in(1);
  const int64_t batch = xv.shape[0], h = xv.shape[2], w = xv.shape[3];
  const int64_t r = wv.shape[2], s = wv.shape[3];
  const int64_t oh = ctx.out(0).shape[2], ow = ctx.out(0).shape[3];
  std::vector<ops::PlainTensor> in(4);
  in[0] = {{batch, c, h, w},
           packed ? tuner::FromBlocked(ops::FloatsOf(xv), batch, c, h * w, cb) : ops::FloatsOf(xv)};
  // A depthwise weight is packed as a blocked [1, C, R, S] tensor (conv_layout.h).
  in[1] = {{k, c / group, r, s},
           !packed      ? ops::FloatsOf(wv)
           : group == 1 ? tuner::UnpackWeight(ops::FloatsOf(wv), k, c, r, s, cb)
                        : tuner::FromBlocked(ops::FloatsOf(wv), 1, k, r * s, cb)};
  if (ctx.has_input(2)) {
    in[2] = {{k}, std::vector<float>(ctx.InFloats(2), ctx.InFloats(2) + k)};
  }
  if (ctx.has_input(3)) {
    in[3] = {{batch, k, oh, ow},
             tuner::FromBlocked(ops::FloatsOf(ctx.in(3)), batch, k, oh * ow, cb)};
  }
  CT_ASSIGN_OR_RETURN(std::vector<float> y, ops::EvalPlain(ctx, std::move(in), {batch, k, oh, ow}));
  ctx.OutFloats(0) = tuner::ToBlocked(y, batch, k, oh * ow, cb);
  return Status::Ok();
}

Status EvalConvLike(OpContext& ctx) {
  if (ctx.node().Has("layout")) return EvalBlockedConv(ctx);
  const Value& xv = ctx.in(0);
  const Value& wv = ctx.in(1);
  const float* x = xv.floats();
  const float* w = wv.floats();
  const float* bias = ctx.has_input(2) ? ctx.in(2).floats() : nullptr;
  const float* res = ctx.has_input(3) ? ctx.in(3).floats() : nullptr;
  const std::string act = ctx.node().String("activation", "none");
  const bool relu = act == "relu" || act == "relu6";
  const double most = act == "relu6" ? 6.0 : HUGE_VAL;
  const ops::Window wd = ops::WindowOf(ctx.node(), ctx.out(0).shape);
  const int64_t n = xv.shape[0], c = xv.shape[1], h = xv.shape[2], wi = xv.shape[3];
  const int64_t k = wv.shape[0], group = ctx.node().Int("group", 1);
  const int64_t cg = c / group, kg = k / group;
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < k; ++oc) {
      const int64_t g = oc / kg;
      for (int64_t oy = 0; oy < wd.oh; ++oy)
        for (int64_t ox = 0; ox < wd.ow; ++ox) {
          double sum = bias ? bias[oc] : 0.0;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t r = 0; r < wd.kh; ++r) {
              const int64_t iy = oy * wd.sh - wd.pt + r * wd.dh;
              if (iy < 0 || iy >= h) continue;
              for (int64_t s = 0; s < wd.kw; ++s) {
                const int64_t ix = ox * wd.sw - wd.pl + s * wd.dw;
                if (ix < 0 || ix >= wi) continue;
                sum += static_cast<double>(x[((b * c + g * cg + ic) * h + iy) * wi + ix]) *
                       w[((oc * cg + ic) * wd.kh + r) * wd.kw + s];
              }
            }
          const int64_t o = ((b * k + oc) * wd.oh + oy) * wd.ow + ox;
          if (res) sum += res[o];
          if (relu && sum < 0) sum = 0;
          y[o] = static_cast<float>(std::min(sum, most));
        }
    }
  return Status::Ok();
}

double ConvFlops(const Graph& g, const Node& n) {
  const auto& w = g.values[n.inputs[1]].shape;
  const auto& y = g.values[n.outputs[0]].shape;
  if (n.Has("layout")) {
    // Blocked: the lanes past K and C are no work of the network's.
    return 2.0 * y[0] * n.Int("filters", 0) * y[2] * y[3] * n.Int("channels", 0) /
           n.Int("group", 1) * w[2] * w[3];
  }
  return 2.0 * NumElements(y) * w[1] * w[2] * w[3];
}

}  // namespace

const OpDef kConv = {"Conv",
                     {attr::String("auto_pad"), attr::Ints("dilations"), attr::Int("group"),
                      attr::Ints("kernel_shape"), attr::Ints("pads"), attr::Ints("strides")},
                     2,
                     3,
                     1,
                     InferConvLike,
                     EvalConvLike,
                     ConvFlops};

const OpDef kFusedConv = {"FusedConv",
                          {attr::Ints("dilations"), attr::Int("group"), attr::Ints("kernel_shape"),
                           attr::Ints("pads"), attr::Ints("strides"), attr::String("activation")},
                          2,
                          4,
                          1,
                          InferConvLike,
                          EvalConvLike,
                          ConvFlops,
                          false,
                          kMinOpsetDefault,
                          /*from_passes=*/true};

}  // namespace crosstune::model
