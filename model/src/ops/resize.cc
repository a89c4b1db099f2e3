// Resize (opset 10 on) and Upsample (7 to 9), nearest and linear, any number of axes. The output
// size comes from constant `sizes` or `scales` (and `axes`, opset 18); each output index maps to
// a source coordinate by the coordinate_transformation_mode (half_pixel, pytorch_half_pixel,
// half_pixel_symmetric, align_corners, asymmetric, tf_half_pixel_for_nn), which nearest rounds by
// nearest_mode and linear splits between its two neighbours, both clamped into the input as
// ONNX's reference does. Opset 10's Resize and Upsample are asymmetric with floor for nearest.
// Cubic, antialias and tf_crop_and_resize are refused by name. Infer resolves everything into
// per-axis tables (attributes `src0`, `src1`: each output index's two source indices, axis after
// axis; `weight`: the second one's weight, float; nearest has src0 alone), which the interpreter
// and the kernel both read.
#include <algorithm>
#include <cmath>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

struct Axis {
  int64_t in = 1, out = 1;
  double scale = 1;
};

Status ResolveScales(OpContext& ctx, const Value& x, std::vector<Axis>* axes) {
  Node& n = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  axes->assign(static_cast<size_t>(rank), Axis());
  for (int64_t d = 0; d < rank; ++d) {
    (*axes)[d].in = (*axes)[d].out = x.shape[d];
  }
  // Which inputs hold the scales and the sizes.
  int scales_at = -1, sizes_at = -1;
  if (n.op == "Upsample") {
    if (ctx.opset() < 9) {
      const Attr* a = n.Has("scales") ? &n.attrs.at("scales") : nullptr;
      if (a == nullptr || a->floats.size() != static_cast<size_t>(rank)) {
        return ctx.Error("scales must have one value per dimension");
      }
      for (int64_t d = 0; d < rank; ++d) (*axes)[d].scale = a->floats[d];
    } else {
      scales_at = 1;
    }
  } else if (ctx.opset() < 11) {
    scales_at = 1;
  } else {
    scales_at = ctx.has_input(2) ? 2 : -1;
    sizes_at = ctx.has_input(3) ? 3 : -1;
    if (scales_at >= 0 && ctx.in(2).elements() == 0) scales_at = -1;  // an empty scales
  }
  if ((scales_at >= 0) == (sizes_at >= 0) && !(n.op == "Upsample" && ctx.opset() < 9)) {
    return ctx.Error("exactly one of scales and sizes must be given");
  }
  std::vector<int64_t> which;
  if (n.Has("axes")) {
    for (int64_t a : n.Ints("axes")) {
      const int64_t d = ops::NormAxis(a, rank);
      if (d < 0) return ctx.Error("axis " + std::to_string(a) + " out of range");
      which.push_back(d);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) which.push_back(d);
  }
  if (scales_at >= 0) {
    const Value& s = ctx.in(scales_at);
    if (!s.is_const()) {
      return ctx.Error("scales ('" + s.name + "') must be a constant known at compile time");
    }
    if (s.dtype != DType::kFloat32) return ctx.Error("scales must be float32");
    if (static_cast<size_t>(s.elements()) != which.size()) {
      return ctx.Error("scales has " + std::to_string(s.elements()) + " values for " +
                       std::to_string(which.size()) + " axes");
    }
    for (size_t i = 0; i < which.size(); ++i) {
      const double v = s.floats()[i];
      if (!(v > 0) || !std::isfinite(v)) return ctx.Error("a scale is not positive");
      (*axes)[which[i]].scale = v;
    }
  }
  if (sizes_at >= 0) {
    CT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ctx.ConstInts(sizes_at, "sizes"));
    if (sizes.size() != which.size()) {
      return ctx.Error("sizes has " + std::to_string(sizes.size()) + " values for " +
                       std::to_string(which.size()) + " axes");
    }
    // keep_aspect_ratio_policy: stretch takes each size; not_larger and not_smaller take one
    // scale for every axis given (the smallest or the largest of sizes / input), and the sizes
    // it gives rounded half up.
    const std::string policy = n.String("keep_aspect_ratio_policy", "stretch");
    double common = policy == "not_larger" ? 1e300 : 0;
    for (size_t i = 0; i < which.size(); ++i) {
      Axis& a = (*axes)[which[i]];
      if (sizes[i] < 1 || a.in < 1) return ctx.Error("sizes and the input must not be empty");
      a.out = sizes[i];
      a.scale = static_cast<double>(sizes[i]) / static_cast<double>(a.in);
      common = policy == "not_larger" ? std::min(common, a.scale) : std::max(common, a.scale);
    }
    if (policy != "stretch") {
      for (int64_t d : which) {
        Axis& a = (*axes)[d];
        a.scale = common;
        a.out = static_cast<int64_t>(std::floor(common * static_cast<double>(a.in) + 0.5));
        if (a.out < 1) return ctx.Error("the sizes make an axis empty");
      }
    }
  } else {
    for (Axis& a : *axes) {
      const double out = a.scale * static_cast<double>(a.in);
      if (out > static_cast<double>(int64_t{1} << 40)) return ctx.Error("the output is too large");
      a.out = static_cast<int64_t>(out);
      if (a.out < 1) return ctx.Error("a scale makes an axis empty");
    }
  }
  return Status::Ok();
}

// The source coordinate of output index `y` along an axis.
double SourceCoordinate(const std::string& mode, const Axis& a, int64_t y) {
  const double out_width = a.scale * static_cast<double>(a.in);
  const double yd = static_cast<double>(y);
  if (mode == "align_corners") {
    return out_width == 1 ? 0.0 : yd * static_cast<double>(a.in - 1) / (out_width - 1);
  }
  if (mode == "asymmetric") return yd / a.scale;
  if (mode == "pytorch_half_pixel") return out_width == 1 ? -0.5 : (yd + 0.5) / a.scale - 0.5;
  if (mode == "tf_half_pixel_for_nn") return (yd + 0.5) / a.scale;
  if (mode == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(a.out) / out_width;
    const double center = static_cast<double>(a.in) / 2;
    return center * (1 - adjustment) + (yd + 0.5) / a.scale - 0.5;
  }
  return (yd + 0.5) / a.scale - 0.5;  // half_pixel
}

int64_t Clamp(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

Status InferResize(OpContext& ctx) {
  Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const bool legacy = n.op == "Upsample" || ctx.opset() < 11;
  if (x.dtype != DType::kFloat32) {
    return ctx.Error(std::string("the element type ") + DTypeName(x.dtype) +
                     " is not supported (float32)");
  }
  std::string mode = n.String("mode", "nearest");
  if (mode == "bilinear") mode = "linear";  // Upsample-7's name
  if (mode != "nearest" && mode != "linear") {
    return ctx.Error("mode '" + mode + "' is not supported (nearest, linear)");
  }
  const std::string coord =
      legacy ? "asymmetric" : n.String("coordinate_transformation_mode", "half_pixel");
  if (coord != "half_pixel" && coord != "pytorch_half_pixel" && coord != "align_corners" &&
      coord != "asymmetric" && coord != "tf_half_pixel_for_nn" && coord != "half_pixel_symmetric") {
    return ctx.Error("coordinate_transformation_mode '" + coord + "' is not supported");
  }
  const std::string nearest = legacy ? "floor" : n.String("nearest_mode", "round_prefer_floor");
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil") {
    return ctx.Error("nearest_mode '" + nearest + "' is not supported");
  }
  if (n.Int("antialias", 0) != 0) return ctx.Error("antialias is not supported");
  const std::string policy = n.String("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    return ctx.Error("keep_aspect_ratio_policy '" + policy + "' is not supported");
  }
  std::vector<Axis> axes;
  CT_RETURN_IF_ERROR(ResolveScales(ctx, x, &axes));
  std::vector<int64_t> src0, src1, out;
  Attr weight;
  weight.kind = Attr::Kind::kFloats;
  for (const Axis& a : axes) {
    out.push_back(a.out);
    for (int64_t y = 0; y < a.out; ++y) {
      const double c = SourceCoordinate(coord, a, y);
      const double f = std::floor(c);
      const double ratio = c == f ? 1.0 : c - f;  // the neighbours are floor(c) and floor(c) + 1
      const int64_t lo = static_cast<int64_t>(f);
      if (mode == "nearest") {
        bool up;
        if (c == f) {
          src0.push_back(Clamp(lo, a.in));
          continue;
        }
        if (nearest == "round_prefer_floor") {
          up = ratio > 0.5;
        } else if (nearest == "round_prefer_ceil") {
          up = ratio >= 0.5;
        } else {
          up = nearest == "ceil";
        }
        src0.push_back(Clamp(up ? lo + 1 : lo, a.in));
      } else {
        src0.push_back(Clamp(lo, a.in));
        src1.push_back(Clamp(lo + 1, a.in));
        weight.floats.push_back(c == f ? 0.0 : ratio);
      }
    }
  }
  for (const char* key : {"mode", "coordinate_transformation_mode", "nearest_mode", "antialias",
                          "keep_aspect_ratio_policy", "axes", "scales", "cubic_coeff_a",
                          "exclude_outside", "extrapolation_value"}) {
    n.attrs.erase(key);
  }
  n.inputs.resize(1);
  n.SetString("mode", mode);
  n.SetInts("src0", src0);
  if (mode == "linear") {
    n.SetInts("src1", src1);
    n.attrs["weight"] = weight;
  }
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

Status EvalResize(OpContext& ctx) {
  const Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const auto& out = ctx.out(0).shape;
  const bool linear = n.String("mode", "nearest") == "linear";
  const std::vector<int64_t> src0 = n.Ints("src0"), src1 = n.Ints("src1");
  const std::vector<double> weight = linear ? n.attrs.at("weight").floats : std::vector<double>();
  const size_t rank = out.size();
  std::vector<int64_t> base(rank, 0), stride(rank, 1);
  for (size_t d = 1; d < rank; ++d) base[d] = base[d - 1] + out[d - 1];
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * x.shape[d];
  const std::vector<float> in = ops::FloatsOf(x);
  std::vector<float>& y = ctx.OutFloats(0);
  const int64_t total = NumElements(out);
  std::vector<int64_t> idx(rank);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    double sum = 0;
    // Each corner of the cell: per axis the first source or (linear) the second.
    const int corners = linear ? 1 << rank : 1;
    for (int corner = 0; corner < corners; ++corner) {
      double w = 1;
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t t = base[d] + idx[d];
        const bool second = (corner >> d) & 1;
        if (linear) w *= second ? weight[t] : 1 - weight[t];
        off += (second ? src1[t] : src0[t]) * stride[d];
      }
      if (w != 0) sum += w * in[off];
    }
    y[i] = static_cast<float>(sum);
  }
  return Status::Ok();
}

const std::vector<AttrSpec> kResizeAttrs = {attr::String("mode"),
                                            attr::String("coordinate_transformation_mode"),
                                            attr::String("nearest_mode"),
                                            attr::Int("antialias"),
                                            attr::Ints("axes"),
                                            attr::String("keep_aspect_ratio_policy"),
                                            attr::Float("cubic_coeff_a"),
                                            attr::Int("exclude_outside"),
                                            attr::Float("extrapolation_value")};

}  // namespace

const OpDef kResize = {"Resize",    kResizeAttrs, 1,       4,     1,
                       InferResize, EvalResize,   nullptr, false, 10};
const OpDef kUpsample = {"Upsample",
                         {attr::String("mode"), attr::Floats("scales")},
                         1,
                         2,
                         1,
                         InferResize,
                         EvalResize,
                         nullptr,
                         false,
                         7,
                         // Upsample was deprecated at opset 10 (Resize took its place).
                         false,
                         9};

}  // namespace crosstune::model
