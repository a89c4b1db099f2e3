// QuantizeLinear and DequantizeLinear, per tensor or per axis (opset 13 on):
//   DequantizeLinear  y = (x - zero_point) * scale            x int8, uint8 or int32 -> float32
//   QuantizeLinear    y = saturate(rint(x / scale) + zero_point)  float32 -> int8 or uint8
// rint rounds half to even, as ONNX states; saturate clamps to the type's range. The scale is
// float32, a scalar or one value per index of `axis`; the zero point has the quantized type and
// the scale's shape (absent: 0, and QuantizeLinear's output uint8 unless output_dtype says).
// Blocked quantization (block_size, opset 21) and the float8/int4/int16 types are refused by
// name. Infer writes `axis` back normalised, -1 where the scale is a scalar.
#include <cmath>
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

bool Quantized(DType t) { return t == DType::kInt8 || t == DType::kUint8; }

// The checks both take: the scale and zero point against x, and the axis they run along.
Status InferScaleAndZero(OpContext& ctx, DType quantized) {
  Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const Value& scale = ctx.in(1);
  if (n.Int("block_size", 0) != 0) return ctx.Error("blocked quantization is not supported");
  if (scale.dtype != DType::kFloat32) {
    return ctx.Error(std::string("a ") + DTypeName(scale.dtype) +
                     " scale is not supported (float32)");
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = -1;
  if (!scale.shape.empty() && NumElements(scale.shape) != 1) {
    if (ctx.opset() < 13) return ctx.Error("a per-axis scale needs opset 13");
    axis = ops::NormAxis(n.Int("axis", 1), rank);
    if (axis < 0) return ctx.Error("axis out of range for " + ShapeText(x.shape));
    if (scale.shape.size() != 1 || scale.shape[0] != x.shape[axis]) {
      return ctx.Error("the scale " + ShapeText(scale.shape) + " does not match axis " +
                       std::to_string(axis) + " of " + ShapeText(x.shape));
    }
  } else if (!scale.shape.empty() && scale.shape.size() != 1) {
    return ctx.Error("the scale must be a scalar or 1-D");
  }
  if (ctx.has_input(2)) {
    const Value& zero = ctx.in(2);
    if (zero.dtype != quantized) {
      return ctx.Error(std::string("the zero point is ") + DTypeName(zero.dtype) + ", not " +
                       DTypeName(quantized));
    }
    if (NumElements(zero.shape) != NumElements(scale.shape)) {
      return ctx.Error("the zero point " + ShapeText(zero.shape) + " and the scale " +
                       ShapeText(scale.shape) + " differ in size");
    }
  }
  n.attrs.erase("block_size");
  n.attrs.erase("saturate");  // float8 only
  n.attrs.erase("output_dtype");
  n.attrs.erase("precision");
  n.SetInt("axis", axis);
  return Status::Ok();
}

Status InferDequantize(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (!Quantized(x.dtype) && x.dtype != DType::kInt32) {
    return ctx.Error(std::string("the element type ") + DTypeName(x.dtype) +
                     " is not supported (int8, uint8, int32)");
  }
  const int64_t out_type = ctx.node().Int("output_dtype", 0);
  if (out_type != 0 && out_type != DTypeToOnnx(DType::kFloat32)) {
    return ctx.Error("output_dtype " + std::to_string(out_type) + " is not supported (float32)");
  }
  if (x.dtype == DType::kInt32 && ctx.has_input(2)) {
    const Value& zero = ctx.in(2);
    if (!zero.is_const() || zero.dtype != DType::kInt32) {
      return ctx.Error("an int32 input takes no zero point but 0");
    }
    for (int64_t z : zero.AsInts()) {
      if (z != 0) return ctx.Error("an int32 input takes no zero point but 0");
    }
  }
  CT_RETURN_IF_ERROR(InferScaleAndZero(ctx, x.dtype));
  ctx.SetOutput(0, DType::kFloat32, x.shape);
  return Status::Ok();
}

Status InferQuantize(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32) {
    return ctx.Error(std::string("the element type ") + DTypeName(x.dtype) +
                     " is not supported (float32)");
  }
  DType to = DType::kUint8;
  if (ctx.has_input(2)) {
    to = ctx.in(2).dtype;
  } else if (const int64_t t = ctx.node().Int("output_dtype", 0); t != 0) {
    auto d = DTypeFromOnnx(static_cast<int32_t>(t), "output_dtype");
    if (!d.ok()) return ctx.Error(d.status().message());
    to = *d;
  }
  if (!Quantized(to)) {
    return ctx.Error(std::string("quantizing to ") + DTypeName(to) +
                     " is not supported (int8, uint8)");
  }
  CT_RETURN_IF_ERROR(InferScaleAndZero(ctx, to));
  ctx.SetOutput(0, to, x.shape);
  return Status::Ok();
}

// Element i's index into the scale and zero point.
struct Channel {
  int64_t inner = 1, dim = 1;
  bool per_axis = false;
  int64_t operator()(int64_t i) const { return per_axis ? i / inner % dim : 0; }
};

Channel ChannelOf(const Node& n, const std::vector<int64_t>& shape) {
  Channel c;
  const int64_t axis = n.Int("axis", -1);
  if (axis < 0) return c;
  c.per_axis = true;
  c.dim = shape[axis];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) c.inner *= shape[d];
  return c;
}

Status EvalDequantize(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const std::vector<int64_t> q = x.AsInts();
  const float* scale = ctx.in(1).floats();
  const std::vector<int64_t> zero =
      ctx.has_input(2) ? ctx.in(2).AsInts() : std::vector<int64_t>(ctx.in(1).elements(), 0);
  const Channel ch = ChannelOf(ctx.node(), x.shape);
  std::vector<float>& y = ctx.OutFloats(0);
  for (size_t i = 0; i < q.size(); ++i) {
    const int64_t c = ch(static_cast<int64_t>(i));
    y[i] = static_cast<float>(q[i] - zero[c]) * scale[c];
  }
  return Status::Ok();
}

Status EvalQuantize(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const float* in = x.floats();
  const float* scale = ctx.in(1).floats();
  const std::vector<int64_t> zero =
      ctx.has_input(2) ? ctx.in(2).AsInts() : std::vector<int64_t>(ctx.in(1).elements(), 0);
  const DType to = ctx.out(0).dtype;
  const float lo = to == DType::kInt8 ? -128.0f : 0.0f, hi = to == DType::kInt8 ? 127.0f : 255.0f;
  const Channel ch = ChannelOf(ctx.node(), x.shape);
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (int64_t i = 0; i < x.elements(); ++i) {
    const int64_t c = ch(i);
    const float v = std::nearbyint(in[i] / scale[c]) + static_cast<float>(zero[c]);
    const float clamped = std::isnan(v) ? 0.0f : std::fmin(std::fmax(v, lo), hi);
    y[static_cast<size_t>(i)] = to == DType::kInt8
                                    ? static_cast<uint8_t>(static_cast<int8_t>(clamped))
                                    : static_cast<uint8_t>(clamped);
  }
  return Status::Ok();
}

const std::vector<AttrSpec> kQuantizeAttrs = {attr::Int("axis"), attr::Int("block_size"),
                                              attr::Int("saturate"), attr::Int("output_dtype"),
                                              attr::Int("precision")};

}  // namespace

const OpDef kDequantizeLinear = {"DequantizeLinear", kQuantizeAttrs, 2,       3,     1,
                                 InferDequantize,    EvalDequantize, nullptr, false, 10};
const OpDef kQuantizeLinear = {"QuantizeLinear", kQuantizeAttrs, 2,       3,     1,
                               InferQuantize,    EvalQuantize,   nullptr, false, 10};

}  // namespace crosstune::model
