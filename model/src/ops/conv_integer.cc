// ConvInteger and QLinearConv (opset 10 on): 2-D convolutions of int8 or uint8 data and weights
// (groups, strides, dilations, pads, auto_pad as Conv), accumulated exactly in int32:
//   ConvInteger  y = sum (x - x_zero_point) * (w - w_zero_point[k])            (int32 out)
//   QLinearConv  acc = that + B[k]; y = saturate(round_half_even(acc * x_scale * w_scale[k] /
//                y_scale) + y_zero_point)                                      (y_zero_point's
//                type)
// as ONNX's reference computes them (the scale product in double). The zero points and scales are
// tensors (w's per output channel or one); the kernel reads them at run time. One generated
// kernel per node (kernels/math.cc); the host evaluation below folds and interprets.
#include <cmath>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace ops {

QuantConvInputs QuantConvOf(const Node& n) {
  QuantConvInputs q;
  auto at = [&](size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; };
  if (n.op == "QLinearConv") {
    q = {at(0), at(3), at(2), at(5), at(1), at(4), at(6), at(7), at(8)};
  } else {
    q = {at(0), at(1), at(2), at(3), -1, -1, -1, -1, -1};
  }
  return q;
}

}  // namespace ops

namespace {

bool Int8Like(DType t) { return t == DType::kInt8 || t == DType::kUint8; }

Status InferQuantConv(OpContext& ctx) {
  const Node& n = ctx.node();
  const ops::QuantConvInputs q = ops::QuantConvOf(n);
  const Graph& g = ctx.graph();
  if (q.x < 0 || q.w < 0) return ctx.Error("the data and weight inputs are required");
  const Value& x = g.values[q.x];
  const Value& w = g.values[q.w];
  if (!Int8Like(x.dtype) || !Int8Like(w.dtype)) {
    return ctx.Error("data and weight must be int8 or uint8, not " +
                     std::string(DTypeName(x.dtype)) + " and " + DTypeName(w.dtype));
  }
  if (x.shape.size() != 4 || w.shape.size() != 4) {
    return ctx.Error("only 2-D convolutions (4-D NCHW data and weight) are supported, data is " +
                     ShapeText(x.shape));
  }
  const int64_t group = n.Int("group", 1);
  const int64_t c = x.shape[1], k = w.shape[0];
  if (group < 1 || c % group != 0 || k % group != 0 || w.shape[1] != c / group) {
    return ctx.Error("weight " + ShapeText(w.shape) + " does not fit data " + ShapeText(x.shape) +
                     " with group " + std::to_string(group));
  }
  // Each zero point and scale: one value, or (the weight's) one per output channel.
  auto check = [&](int id, const char* what, bool per_channel, DType type) -> Status {
    if (id < 0) return Status::Ok();
    const Value& v = g.values[id];
    if (v.dtype != type) {
      return ctx.Error(std::string(what) + " must be " + DTypeName(type) + ", not " +
                       DTypeName(v.dtype));
    }
    if (v.elements() != 1 && !(per_channel && v.shape == std::vector<int64_t>{k})) {
      return ctx.Error(std::string(what) + " " + ShapeText(v.shape) + " must hold one value" +
                       (per_channel ? " or one per output channel" : ""));
    }
    return Status::Ok();
  };
  CT_RETURN_IF_ERROR(check(q.x_zero, "x_zero_point", false, x.dtype));
  CT_RETURN_IF_ERROR(check(q.w_zero, "w_zero_point", true, w.dtype));
  CT_RETURN_IF_ERROR(check(q.x_scale, "x_scale", false, DType::kFloat32));
  CT_RETURN_IF_ERROR(check(q.w_scale, "w_scale", true, DType::kFloat32));
  CT_RETURN_IF_ERROR(check(q.y_scale, "y_scale", false, DType::kFloat32));
  DType out = DType::kInt32;
  if (n.op == "QLinearConv") {
    if (q.x_scale < 0 || q.w_scale < 0 || q.y_scale < 0) {
      return ctx.Error("x_scale, w_scale and y_scale are required");
    }
    out = q.y_zero >= 0 ? g.values[q.y_zero].dtype : x.dtype;
    if (!Int8Like(out)) return ctx.Error("y_zero_point must be int8 or uint8");
    CT_RETURN_IF_ERROR(check(q.y_zero, "y_zero_point", false, out));
    if (q.bias >= 0 && (g.values[q.bias].dtype != DType::kInt32 ||
                        g.values[q.bias].shape != std::vector<int64_t>{k})) {
      return ctx.Error("B must be int32 [" + std::to_string(k) + "]");
    }
  }
  ops::Window wd;
  CT_RETURN_IF_ERROR(
      ops::ResolveWindow(ctx, x.shape[2], x.shape[3], {w.shape[2], w.shape[3]}, &wd));
  if (wd.kh != w.shape[2] || wd.kw != w.shape[3]) {
    return ctx.Error("kernel_shape differs from the weight's " + ShapeText(w.shape));
  }
  ctx.SetOutput(0, out, {x.shape[0], k, wd.oh, wd.ow});
  return Status::Ok();
}

Status EvalQuantConv(OpContext& ctx) {
  const Node& n = ctx.node();
  const Graph& g = ctx.graph();
  const ops::QuantConvInputs q = ops::QuantConvOf(n);
  const Value& xv = g.values[q.x];
  const Value& wv = g.values[q.w];
  const std::vector<int64_t> x = xv.AsInts(), w = wv.AsInts();
  auto values = [&](int id, double fallback, size_t count) {
    std::vector<double> v = id >= 0 ? g.values[id].AsDoubles() : std::vector<double>{fallback};
    if (v.size() == 1) v.assign(count, v[0]);
    return v;
  };
  const auto& ys = ctx.out(0).shape;
  const int64_t batch = ys[0], k = ys[1], oh = ys[2], ow = ys[3];
  const int64_t c = xv.shape[1], h = xv.shape[2], wd_ = xv.shape[3];
  const int64_t cg = wv.shape[1], kg = k / n.Int("group", 1);
  const ops::Window win = ops::WindowOf(n, ys);
  const std::vector<double> xz = values(q.x_zero, 0, 1), wz = values(q.w_zero, 0, k);
  const std::vector<double> xs = values(q.x_scale, 1, 1), wsc = values(q.w_scale, 1, k);
  const std::vector<double> yscale = values(q.y_scale, 1, 1), yz = values(q.y_zero, 0, 1);
  const std::vector<double> bias = values(q.bias, 0, k);
  const DType out = ctx.out(0).dtype;
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  const double lo = out == DType::kInt8 ? -128 : 0, hi = out == DType::kInt8 ? 127 : 255;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t oc = 0; oc < k; ++oc) {
      const int64_t grp = oc / kg;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t acc = 0;
          for (int64_t ic = 0; ic < cg; ++ic) {
            for (int64_t r = 0; r < win.kh; ++r) {
              const int64_t iy = oy * win.sh - win.pt + r * win.dh;
              if (iy < 0 || iy >= h) continue;
              for (int64_t s = 0; s < win.kw; ++s) {
                const int64_t ix = ox * win.sw - win.pl + s * win.dw;
                if (ix < 0 || ix >= wd_) continue;
                const int64_t xi = ((b * c + grp * cg + ic) * h + iy) * wd_ + ix;
                const int64_t wi = ((oc * cg + ic) * win.kh + r) * win.kw + s;
                acc +=
                    (x[xi] - static_cast<int64_t>(xz[0])) * (w[wi] - static_cast<int64_t>(wz[oc]));
              }
            }
          }
          const size_t o = static_cast<size_t>(((b * k + oc) * oh + oy) * ow + ox);
          if (n.op == "ConvInteger") {
            PutElement(out, y.data(), o, 0, acc);
            continue;
          }
          double r =
              static_cast<double>(static_cast<int32_t>(acc + static_cast<int64_t>(bias[oc])));
          // The scales' product in float32, as the reference's numpy computes it.
          const float mult = static_cast<float>(xs[0]) * static_cast<float>(wsc[oc]) /
                             static_cast<float>(yscale[0]);
          r = r * static_cast<double>(mult) + yz[0];
          r = std::nearbyint(std::min(hi, std::max(lo, r)));
          PutElement(out, y.data(), o, r, static_cast<int64_t>(r));
        }
      }
    }
  }
  return Status::Ok();
}

double QuantConvFlops(const Graph& g, const Node& n) {
  const Value& w = g.values[ops::QuantConvOf(n).w];
  return 2.0 * static_cast<double>(g.values[n.outputs[0]].elements()) *
         (static_cast<double>(w.elements()) / static_cast<double>(w.shape[0]));
}

// Conv2dInt8 (layout_plan.h: RewriteInt8Convs): NHWC uint8 data, conv2d_int8's packed weight,
// int32 bias and float32 scales; "shape" is its task's (N,C,H,W,K,R,S,stride,pad,xz,yz,relu).
Status InferConv2dInt8(OpContext& ctx) {
  const std::vector<int64_t> s = ctx.node().Ints("shape");
  if (s.size() != 12 || s[7] < 1 || s[8] < 0) {
    return ctx.Error("shape must be conv2d_int8's 12 sizes, not " + ShapeText(s));
  }
  const int64_t oh = (s[2] + 2 * s[8] - s[5]) / s[7] + 1, ow = (s[3] + 2 * s[8] - s[6]) / s[7] + 1;
  if (ctx.in(0).dtype != DType::kUint8 ||
      ctx.in(0).shape != std::vector<int64_t>{s[0], s[2], s[3], s[1]}) {
    return ctx.Error("data must be uint8 NHWC " + ShapeText({s[0], s[2], s[3], s[1]}));
  }
  if (ctx.in(1).dtype != DType::kInt8 || ctx.in(1).shape.size() != 6 ||
      ctx.in(2).dtype != DType::kInt32 || ctx.in(3).dtype != DType::kFloat32) {
    return ctx.Error(
        "weight, bias and scale must be the packed int8, int32 and float32 of conv2d_int8");
  }
  ctx.SetOutput(0, DType::kUint8, {s[0], oh, ow, s[4]});
  return Status::Ok();
}

double Conv2dInt8Flops(const Graph& g, const Node& n) {
  const std::vector<int64_t> s = n.Ints("shape");
  return 2.0 * static_cast<double>(g.values[n.outputs[0]].elements()) *
         static_cast<double>(s[1] * s[5] * s[6]);
}

const std::vector<AttrSpec> kQuantConvAttrs = {attr::String("auto_pad"), attr::Ints("dilations"),
                                               attr::Int("group"),       attr::Ints("kernel_shape"),
                                               attr::Ints("pads"),       attr::Ints("strides")};

}  // namespace

const OpDef kConvInteger = {"ConvInteger", kQuantConvAttrs, 2,     4, 1, InferQuantConv,
                            EvalQuantConv, QuantConvFlops,  false, 10};
const OpDef kQLinearConv = {"QLinearConv", kQuantConvAttrs, 8,     9, 1, InferQuantConv,
                            EvalQuantConv, QuantConvFlops,  false, 10};

const OpDef kConv2dInt8 = {"Conv2dInt8",
                           {attr::Ints("shape")},
                           4,
                           4,
                           1,
                           InferConv2dInt8,
                           nullptr,
                           Conv2dInt8Flops,
                           false,
                           kMinOpsetDefault,
                           /*from_passes=*/true};

}  // namespace crosstune::model
