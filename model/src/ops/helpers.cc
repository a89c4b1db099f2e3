// Helpers the OpDefs share (op_defs.h): broadcasting and 2-D windows.
#include <algorithm>

#include "crosstune/checked_math.h"
#include "ops/op_defs.h"

namespace crosstune::model::ops {
namespace {

constexpr int64_t kMaxWindowValue = int64_t{1} << 31;

}  // namespace

bool BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>* out) {
  const size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

std::vector<int64_t> BroadcastIndex(const std::vector<int64_t>& in_shape,
                                    const std::vector<int64_t>& out_shape) {
  const size_t rank = out_shape.size();
  const size_t off = rank - in_shape.size();
  // The input's stride for each output dimension (0 where it broadcasts).
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t d = rank; d-- > off;) {
    const int64_t dim = in_shape[d - off];
    stride[d] = dim == 1 ? 0 : s;
    s *= dim;
  }
  const int64_t total = NumElements(out_shape);
  std::vector<int64_t> index(static_cast<size_t>(total));
  std::vector<int64_t> pos(rank, 0);
  int64_t at = 0;
  for (int64_t e = 0; e < total; ++e) {
    index[e] = at;
    for (size_t d = rank; d-- > 0;) {
      ++pos[d];
      at += stride[d];
      if (pos[d] < out_shape[d]) break;
      at -= stride[d] * pos[d];
      pos[d] = 0;
    }
  }
  return index;
}

int64_t NormAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
}

Status ResolveWindow(OpContext& ctx, int64_t h, int64_t w, std::vector<int64_t> kernel,
                     Window* out) {
  Node& n = ctx.node();
  if (n.Has("kernel_shape")) kernel = n.Ints("kernel_shape");
  if (kernel.size() != 2) return ctx.Error("only 2-D windows (4-D NCHW tensors) are supported");
  const auto strides = n.Ints("strides", {1, 1});
  const auto dilations = n.Ints("dilations", {1, 1});
  auto pads = n.Ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    return ctx.Error("strides and dilations need 2 values and pads 4");
  }
  Window wd;
  wd.kh = kernel[0];
  wd.kw = kernel[1];
  wd.sh = strides[0];
  wd.sw = strides[1];
  wd.dh = dilations[0];
  wd.dw = dilations[1];
  if (wd.kh < 1 || wd.kw < 1 || wd.sh < 1 || wd.sw < 1 || wd.dh < 1 || wd.dw < 1) {
    return ctx.Error("kernel, strides and dilations must be positive");
  }
  for (int64_t p : pads) {
    if (p < 0) return ctx.Error("pads must not be negative");
  }
  // Each at most 2^31, so that the window arithmetic below stays far inside int64 (the input's
  // sides are checked shapes); the dilated kernel is a product, checked.
  for (int64_t v : {wd.kh, wd.kw, wd.sh, wd.sw, wd.dh, wd.dw, pads[0], pads[1], pads[2], pads[3]}) {
    if (v > kMaxWindowValue) {
      return ctx.Error("kernel, strides, dilations and pads must be at most " +
                       std::to_string(kMaxWindowValue));
    }
  }
  const std::string auto_pad = n.String("auto_pad", "NOTSET");
  uint64_t span_h = 0, span_w = 0;
  if (!CheckedMul(static_cast<uint64_t>(wd.kh - 1), static_cast<uint64_t>(wd.dh), &span_h) ||
      !CheckedMul(static_cast<uint64_t>(wd.kw - 1), static_cast<uint64_t>(wd.dw), &span_w)) {
    return ctx.Error("the dilated kernel is too large");
  }
  const int64_t ekh = static_cast<int64_t>(span_h) + 1, ekw = static_cast<int64_t>(span_w) + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    auto same = [&](int64_t in, int64_t s, int64_t ek, int64_t* begin, int64_t* end) {
      const int64_t o = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (o - 1) * s + ek - in);
      *begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      *end = total - *begin;
    };
    same(h, wd.sh, ekh, &pads[0], &pads[2]);
    same(w, wd.sw, ekw, &pads[1], &pads[3]);
  } else if (auto_pad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (auto_pad != "NOTSET") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not supported");
  }
  wd.pt = pads[0];
  wd.pl = pads[1];
  wd.pb = pads[2];
  wd.pr = pads[3];
  const bool ceil_mode = n.Int("ceil_mode", 0) != 0;
  auto size = [&](int64_t in, int64_t pb, int64_t pe, int64_t ek, int64_t s) -> int64_t {
    const int64_t span = in + pb + pe - ek;
    if (span < 0) return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // A last window that would start past the input and its leading padding is dropped.
    if (ceil_mode && (o - 1) * s >= in + pb) --o;
    return o;
  };
  wd.oh = size(h, wd.pt, wd.pb, ekh, wd.sh);
  wd.ow = size(w, wd.pl, wd.pr, ekw, wd.sw);
  if (wd.oh < 1 || wd.ow < 1) return ctx.Error("the window is larger than the padded input");
  n.attrs.erase("auto_pad");
  n.SetInts("kernel_shape", {wd.kh, wd.kw});
  n.SetInts("strides", {wd.sh, wd.sw});
  n.SetInts("dilations", {wd.dh, wd.dw});
  n.SetInts("pads", {wd.pt, wd.pl, wd.pb, wd.pr});
  *out = wd;
  return Status::Ok();
}

Window WindowOf(const Node& n, const std::vector<int64_t>& out_shape) {
  Window wd;
  const auto k = n.Ints("kernel_shape"), s = n.Ints("strides"), d = n.Ints("dilations");
  const auto p = n.Ints("pads");
  const std::vector<int64_t> o = {out_shape[2], out_shape[3]};
  wd.kh = k[0];
  wd.kw = k[1];
  wd.sh = s[0];
  wd.sw = s[1];
  wd.dh = d[0];
  wd.dw = d[1];
  wd.pt = p[0];
  wd.pl = p[1];
  wd.pb = p[2];
  wd.pr = p[3];
  wd.oh = o[0];
  wd.ow = o[1];
  return wd;
}

Expected<std::vector<float>> EvalPlain(OpContext& ctx, std::vector<PlainTensor> inputs,
                                       const std::vector<int64_t>& out_shape) {
  Graph tmp;
  tmp.opset = ctx.opset();
  Node n = ctx.node();
  for (const char* key : {"layout", "block", "channels", "filters"}) n.attrs.erase(key);
  n.inputs.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    n.inputs.push_back(
        inputs[i].shape.empty()
            ? -1
            : tmp.AddFloatConstant("in" + std::to_string(i), inputs[i].shape, inputs[i].data));
  }
  Value y;
  y.name = "out";
  y.shape = out_shape;
  n.outputs = {tmp.AddValue(std::move(y))};
  CT_RETURN_IF_ERROR(EvalNode(tmp, n));
  return FloatsOf(tmp.values[n.outputs[0]]);
}

std::vector<float> FloatsOf(const Value& v) {
  return std::vector<float>(v.floats(), v.floats() + v.elements());
}

std::vector<double> PerChannel(const Value& v, int64_t k) {
  std::vector<double> d = v.AsDoubles();
  if (d.size() == 1) d.assign(static_cast<size_t>(k), d[0]);
  if (static_cast<int64_t>(d.size()) != k) d.clear();
  return d;
}

bool AllZero(const Graph& g, int v) {
  if (v < 0) return true;
  for (double d : g.values[v].AsDoubles()) {
    if (d != 0) return false;
  }
  return true;
}

}  // namespace crosstune::model::ops
