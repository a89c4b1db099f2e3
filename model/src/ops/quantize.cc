// QuantizeLinear and DequantizeLinear, per tensor or per axis (opset 13 on):
//   DequantizeLinear  y = (x - zero_point) * scale            x int8, uint8 or int32 -> float32
//   QuantizeLinear    y = saturate(rint(x / scale) + zero_point)  float32 -> int8 or uint8
// rint rounds half to even, as ONNX states; saturate clamps to the type's range. The scale is
// float32, a scalar or one value per index of `axis`; the zero point has the quantized type and
// the scale's shape (absent: 0, and QuantizeLinear's output uint8 unless output_dtype says).
// Blocked quantization (block_size, opset 21) and the float8/int4/int16 types are refused by
// name. Infer writes `axis` back normalised, -1 where the scale is a scalar.
// And the integer products onnxruntime's quantizers write: MatMulInteger (uint8/int8 operands
// less their zero points, int32 sums; A's zero point per tensor or per row, B's per tensor or per
// column), QLinearMatMul (the same requantized: y = saturate(rint(sum * a_scale * b_scale /
// y_scale) + y_zero_point), scales and zero points per tensor) and DynamicQuantizeLinear (uint8
// with the scale and zero point that map [min(x, 0), max(x, 0)] onto [0, 255]).
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

// Saturates a float already rounded to `t`'s range.
uint8_t Saturate(float v, DType t) {
  const float lo = t == DType::kInt8 ? -128.0f : 0.0f, hi = t == DType::kInt8 ? 127.0f : 255.0f;
  const float c = std::isnan(v) ? 0.0f : std::fmin(std::fmax(v, lo), hi);
  return t == DType::kInt8 ? static_cast<uint8_t>(static_cast<int8_t>(c)) : static_cast<uint8_t>(c);
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
  const Channel ch = ChannelOf(ctx.node(), x.shape);
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (int64_t i = 0; i < x.elements(); ++i) {
    const int64_t c = ch(i);
    y[static_cast<size_t>(i)] =
        Saturate(std::nearbyint(in[i] / scale[c]) + static_cast<float>(zero[c]), to);
  }
  return Status::Ok();
}

// --- Integer products ---------------------------------------------------------------------------

// A zero point of MatMulInteger: absent, a scalar, or one per row of A (`rows`) / per column of B.
Status CheckProductZero(OpContext& ctx, int i, DType t, int64_t per, const char* what) {
  if (!ctx.has_input(i)) return Status::Ok();
  const Value& z = ctx.in(i);
  if (z.dtype != t) {
    return ctx.Error(std::string(what) + "'s zero point is " + DTypeName(z.dtype) + ", not " +
                     DTypeName(t));
  }
  const int64_t n = NumElements(z.shape);
  if (n != 1 && !(z.shape.size() == 1 && n == per)) {
    return ctx.Error(std::string(what) + "'s zero point " + ShapeText(z.shape) +
                     " is neither a scalar nor one per " + (i == 2 ? "row" : "column"));
  }
  return Status::Ok();
}

Status InferMatMulInteger(OpContext& ctx) {
  const Value& a = ctx.in(0);
  const Value& b = ctx.in(1);
  if (!Quantized(a.dtype) || !Quantized(b.dtype)) {
    return ctx.Error(std::string("the operands are ") + DTypeName(a.dtype) + " and " +
                     DTypeName(b.dtype) + " (uint8 or int8 each)");
  }
  std::vector<int64_t> out;
  CT_RETURN_IF_ERROR(ops::MatMulShape(ctx, a.shape, b.shape, &out));
  const int64_t rows = a.shape.size() >= 2 ? a.shape[a.shape.size() - 2] : 1;
  CT_RETURN_IF_ERROR(CheckProductZero(ctx, 2, a.dtype, rows, "A"));
  CT_RETURN_IF_ERROR(
      CheckProductZero(ctx, 3, b.dtype, b.shape.size() >= 2 ? b.shape.back() : 1, "B"));
  ctx.SetOutput(0, DType::kInt32, out);
  return Status::Ok();
}

// Every element of a per-tensor input: a scalar or a one-element tensor.
Status CheckScalar(OpContext& ctx, int i, DType t, const char* what) {
  const Value& v = ctx.in(i);
  if (v.dtype != t) {
    return ctx.Error(std::string(what) + " is " + DTypeName(v.dtype) + ", not " + DTypeName(t));
  }
  if (NumElements(v.shape) != 1) {
    return ctx.Error(std::string(what) + " " + ShapeText(v.shape) +
                     " is not per tensor (per-row and per-column scales are not supported)");
  }
  return Status::Ok();
}

Status InferQLinearMatMul(OpContext& ctx) {
  const Value& a = ctx.in(0);
  const Value& b = ctx.in(3);
  const DType y = ctx.in(7).dtype;
  if (!Quantized(a.dtype) || !Quantized(b.dtype) || !Quantized(y)) {
    return ctx.Error("a, b and y must be uint8 or int8");
  }
  CT_RETURN_IF_ERROR(CheckScalar(ctx, 1, DType::kFloat32, "a_scale"));
  CT_RETURN_IF_ERROR(CheckScalar(ctx, 2, a.dtype, "a_zero_point"));
  CT_RETURN_IF_ERROR(CheckScalar(ctx, 4, DType::kFloat32, "b_scale"));
  CT_RETURN_IF_ERROR(CheckScalar(ctx, 5, b.dtype, "b_zero_point"));
  CT_RETURN_IF_ERROR(CheckScalar(ctx, 6, DType::kFloat32, "y_scale"));
  CT_RETURN_IF_ERROR(CheckScalar(ctx, 7, y, "y_zero_point"));
  std::vector<int64_t> out;
  CT_RETURN_IF_ERROR(ops::MatMulShape(ctx, a.shape, b.shape, &out));
  ctx.SetOutput(0, y, out);
  return Status::Ok();
}

// sum_k (a - za) (b - zb) over MatMul's batches; za per row (one value: every row), zb per column.
std::vector<int64_t> IntegerProduct(const Value& av, const Value& bv,
                                    const std::vector<int64_t>& za, const std::vector<int64_t>& zb,
                                    const std::vector<int64_t>& out_shape) {
  const std::vector<int64_t> a = av.AsInts(), b = bv.AsInts();
  const auto& as = av.shape;
  const auto& bs = bv.shape;
  const int64_t m = as.size() == 1 ? 1 : as[as.size() - 2], k = as.back();
  const int64_t n = bs.size() == 1 ? 1 : bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - std::min<size_t>(2, as.size()));
  std::vector<int64_t> bb(bs.begin(), bs.end() - std::min<size_t>(2, bs.size()));
  std::vector<int64_t> batch;
  ops::BroadcastShapes(ab, bb, &batch);
  const std::vector<int64_t> ia = ops::BroadcastIndex(ab, batch),
                             ib = ops::BroadcastIndex(bb, batch);
  std::vector<int64_t> y(static_cast<size_t>(NumElements(out_shape)));
  for (size_t bi = 0; bi < ia.size(); ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = 0;
        const int64_t zi = za[za.size() == 1 ? 0 : i], zj = zb[zb.size() == 1 ? 0 : j];
        for (int64_t p = 0; p < k; ++p) {
          sum += (a[ia[bi] * m * k + i * k + p] - zi) * (b[ib[bi] * k * n + p * n + j] - zj);
        }
        y[(bi * m + i) * n + j] = static_cast<int32_t>(sum);
      }
  return y;
}

std::vector<int64_t> ZeroOf(OpContext& ctx, int i) {
  return ctx.has_input(i) ? ctx.in(i).AsInts() : std::vector<int64_t>{0};
}

Status EvalMatMulInteger(OpContext& ctx) {
  const std::vector<int64_t> y =
      IntegerProduct(ctx.in(0), ctx.in(1), ZeroOf(ctx, 2), ZeroOf(ctx, 3), ctx.out(0).shape);
  std::vector<uint8_t>& out = ctx.OutBytes(0);
  for (size_t i = 0; i < y.size(); ++i) {
    const int32_t v = static_cast<int32_t>(y[i]);
    std::memcpy(out.data() + i * 4, &v, 4);
  }
  return Status::Ok();
}

Status EvalQLinearMatMul(OpContext& ctx) {
  const std::vector<int64_t> y = IntegerProduct(ctx.in(0), ctx.in(3), ctx.in(2).AsInts(),
                                                ctx.in(5).AsInts(), ctx.out(0).shape);
  const float scale = ctx.in(1).floats()[0] * ctx.in(4).floats()[0] / ctx.in(6).floats()[0];
  const float zero = static_cast<float>(ctx.in(7).AsInts()[0]);
  const DType t = ctx.out(0).dtype;
  std::vector<uint8_t>& out = ctx.OutBytes(0);
  for (size_t i = 0; i < y.size(); ++i) {
    out[i] = Saturate(std::nearbyint(static_cast<float>(y[i]) * scale) + zero, t);
  }
  return Status::Ok();
}

Status InferDynamicQuantize(OpContext& ctx) {
  const Value& x = ctx.in(0);
  if (x.dtype != DType::kFloat32) {
    return ctx.Error(std::string("the element type ") + DTypeName(x.dtype) +
                     " is not supported (float32)");
  }
  ctx.SetOutput(0, DType::kUint8, x.shape);
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DType::kFloat32, {});
  if (ctx.num_outputs() > 2) ctx.SetOutput(2, DType::kUint8, {});
  return Status::Ok();
}

Status EvalDynamicQuantize(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const float* in = x.floats();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.elements(); ++i) {
    lo = std::fmin(lo, in[i]);
    hi = std::fmax(hi, in[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  const float zero =
      scale == 0 ? 0.0f : std::fmin(std::fmax(std::nearbyint(-lo / scale), 0.0f), 255.0f);
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (int64_t i = 0; i < x.elements(); ++i) {
    y[static_cast<size_t>(i)] = scale == 0
                                    ? static_cast<uint8_t>(zero)
                                    : Saturate(std::nearbyint(in[i] / scale) + zero, DType::kUint8);
  }
  if (ctx.num_outputs() > 1) ctx.OutFloats(1)[0] = scale;
  if (ctx.num_outputs() > 2) ctx.OutBytes(2)[0] = static_cast<uint8_t>(zero);
  return Status::Ok();
}

double IntegerProductFlops(const Graph& g, const Node& n) {
  return 2.0 * g.values[n.outputs[0]].elements() * g.values[n.inputs[0]].shape.back();
}

const std::vector<AttrSpec> kQuantizeAttrs = {attr::Int("axis"), attr::Int("block_size"),
                                              attr::Int("saturate"), attr::Int("output_dtype"),
                                              attr::Int("precision")};

}  // namespace

const OpDef kDequantizeLinear = {"DequantizeLinear", kQuantizeAttrs, 2,       3,     1,
                                 InferDequantize,    EvalDequantize, nullptr, false, 10};
const OpDef kQuantizeLinear = {"QuantizeLinear", kQuantizeAttrs, 2,       3,     1,
                               InferQuantize,    EvalQuantize,   nullptr, false, 10};
const OpDef kMatMulInteger = {
    "MatMulInteger",     {},    2, 4, 1, InferMatMulInteger, EvalMatMulInteger,
    IntegerProductFlops, false, 10};
const OpDef kQLinearMatMul = {
    "QLinearMatMul",     {},    8, 8, 1, InferQLinearMatMul, EvalQLinearMatMul,
    IntegerProductFlops, false, 10};
const OpDef kDynamicQuantizeLinear = {
    "DynamicQuantizeLinear", {},      1,     1, 3, InferDynamicQuantize,
    EvalDynamicQuantize,     nullptr, false, 11};

}  // namespace crosstune::model
