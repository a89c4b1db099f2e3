// ConvTranspose over NCHW (2-D): y[n, m, oh, ow] = B[m] + the sum over the group's input channels
// c and the kernel's (kh, kw) whose stride lands on (oh, ow): ih * stride + kh * dilation - pad
// = oh. Weights [C, M / group, kH, kW]. The output size comes from the strides, pads, dilations
// and output_padding, or from output_shape (the pads then split the difference: auto_pad
// SAME_UPPER puts the smaller half first, anything else the larger; a difference below 0 leaves
// pixels past the sum's reach, which hold the bias); Infer writes explicit
// `pads` (top, left, bottom, right), `strides`, `dilations` and `group` back.
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferConvTranspose(OpContext& ctx) {
  Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const Value& w = ctx.in(1);
  if (x.dtype != DType::kFloat32 || w.dtype != DType::kFloat32) {
    return ctx.Error("only float32 is supported");
  }
  if (x.shape.size() != 4 || w.shape.size() != 4) {
    return ctx.Error("only 2-D transposed convolutions (4-D data and weights) are supported, not " +
                     ShapeText(x.shape));
  }
  const int64_t group = n.Int("group", 1);
  if (group < 1 || x.shape[1] % group != 0 || w.shape[0] != x.shape[1]) {
    return ctx.Error("the weight " + ShapeText(w.shape) + " does not fit the data " +
                     ShapeText(x.shape) + " with group " + std::to_string(group));
  }
  const int64_t m = w.shape[1] * group;
  if (ctx.has_input(2) &&
      (ctx.in(2).dtype != DType::kFloat32 || ctx.in(2).shape != std::vector<int64_t>{m})) {
    return ctx.Error("the bias must be float32 [" + std::to_string(m) + "]");
  }
  auto pair = [&n](const char* key, int64_t fallback) {
    std::vector<int64_t> v = n.Ints(key);
    return v.empty() ? std::vector<int64_t>{fallback, fallback} : v;
  };
  const std::vector<int64_t> strides = pair("strides", 1), dilations = pair("dilations", 1);
  const std::vector<int64_t> out_pad = pair("output_padding", 0);
  std::vector<int64_t> kernel = n.Ints("kernel_shape");
  if (kernel.empty()) kernel = {w.shape[2], w.shape[3]};
  if (strides.size() != 2 || dilations.size() != 2 || out_pad.size() != 2 || kernel.size() != 2 ||
      kernel[0] != w.shape[2] || kernel[1] != w.shape[3]) {
    return ctx.Error(
        "strides, dilations, output_padding and kernel_shape must have 2 values "
        "matching the weight");
  }
  for (int i = 0; i < 2; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || out_pad[i] < 0 || out_pad[i] >= strides[i]) {
      return ctx.Error("strides and dilations must be positive, output_padding below the stride");
    }
  }
  const std::string auto_pad = n.String("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      auto_pad != "VALID") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not supported");
  }
  std::vector<int64_t> pads = n.Ints("pads");
  const std::vector<int64_t> given = n.Ints("output_shape");
  int64_t full[2];
  for (int i = 0; i < 2; ++i) {
    full[i] = strides[i] * (x.shape[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1;
  }
  std::vector<int64_t> out_hw(2);
  if (pads.empty() && (!given.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) {
    // The output size is given (or the input's times the stride), and the pads fill the rest.
    std::vector<int64_t> target = given;
    if (target.size() > 2) target.erase(target.begin(), target.end() - 2);
    if (target.empty()) target = {x.shape[2] * strides[0], x.shape[3] * strides[1]};
    if (target.size() != 2) return ctx.Error("output_shape must name the 2 spatial sizes");
    pads.assign(4, 0);
    for (int i = 0; i < 2; ++i) {
      // A negative total makes the output larger than the sum reaches: those pixels hold the
      // bias alone. (Halves rounded down, as ONNX's reference does.)
      const int64_t total = full[i] - target[i];
      const int64_t small = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[i + 2] = total - pads[i];
      out_hw[i] = target[i];
    }
  } else {
    if (pads.empty()) pads.assign(4, 0);
    if (pads.size() != 4) return ctx.Error("pads must have 4 values");
    for (int i = 0; i < 2; ++i) {
      if (pads[i] < 0 || pads[i + 2] < 0) return ctx.Error("pads must not be negative");
      out_hw[i] = given.size() >= 2 ? given[given.size() - 2 + i] : full[i] - pads[i] - pads[i + 2];
    }
  }
  if (out_hw[0] < 1 || out_hw[1] < 1) return ctx.Error("the output would be empty");
  n.attrs.erase("auto_pad");
  n.attrs.erase("output_shape");
  n.attrs.erase("output_padding");
  n.attrs.erase("kernel_shape");
  n.SetInts("pads", pads);
  n.SetInts("strides", strides);
  n.SetInts("dilations", dilations);
  n.SetInt("group", group);
  ctx.SetOutput(0, DType::kFloat32, {x.shape[0], m, out_hw[0], out_hw[1]});
  return Status::Ok();
}

Status EvalConvTranspose(OpContext& ctx) {
  const Node& n = ctx.node();
  const Value& xv = ctx.in(0);
  const Value& wv = ctx.in(1);
  const auto& y_shape = ctx.out(0).shape;
  const std::vector<int64_t> pads = n.Ints("pads"), s = n.Ints("strides"), d = n.Ints("dilations");
  const int64_t group = n.Int("group", 1);
  const int64_t batch = xv.shape[0], c = xv.shape[1], h = xv.shape[2], w = xv.shape[3];
  const int64_t mg = wv.shape[1], kh = wv.shape[2], kw = wv.shape[3];
  const int64_t m = y_shape[1], oh = y_shape[2], ow = y_shape[3], cg = c / group;
  const float *x = xv.floats(), *wt = wv.floats();
  const float* bias = ctx.has_input(2) ? ctx.InFloats(2) : nullptr;
  std::vector<float>& y = ctx.OutFloats(0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < m; ++o) {
      const int64_t g = o / mg, ol = o % mg;
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double sum = bias ? bias[o] : 0.0;
          for (int64_t ci = g * cg; ci < (g + 1) * cg; ++ci)
            for (int64_t r = 0; r < kh; ++r) {
              const int64_t ty = yy + pads[0] - r * d[0];
              if (ty < 0 || ty % s[0] != 0 || ty / s[0] >= h) continue;
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t tx = xx + pads[1] - q * d[1];
                if (tx < 0 || tx % s[1] != 0 || tx / s[1] >= w) continue;
                sum += static_cast<double>(x[((b * c + ci) * h + ty / s[0]) * w + tx / s[1]]) *
                       wt[((ci * mg + ol) * kh + r) * kw + q];
              }
            }
          y[((b * m + o) * oh + yy) * ow + xx] = static_cast<float>(sum);
        }
    }
  return Status::Ok();
}

double ConvTransposeFlops(const Graph& g, const Node& n) {
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& w = g.values[n.inputs[1]].shape;
  return 2.0 * NumElements(x) * w[1] * w[2] * w[3];
}

}  // namespace

const OpDef kConvTranspose = {
    "ConvTranspose",
    {attr::String("auto_pad"), attr::Ints("dilations"), attr::Int("group"),
     attr::Ints("kernel_shape"), attr::Ints("output_padding"), attr::Ints("output_shape"),
     attr::Ints("pads"), attr::Ints("strides")},
    2,
    3,
    1,
    InferConvTranspose,
    EvalConvTranspose,
    ConvTransposeFlops};

}  // namespace crosstune::model
