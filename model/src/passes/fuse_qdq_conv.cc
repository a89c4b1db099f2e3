// fuse_qdq_conv: a Conv between DequantizeLinear and QuantizeLinear nodes, as onnxruntime's
// quantizer writes a QDQ model, becomes one QLinearConv of the quantized tensors (passes.h):
//
//   Conv(DequantizeLinear(xq, xs, xz), DequantizeLinear(wq, ws, 0), DequantizeLinear(bq, bs, 0))
//     [-> Relu] -> QuantizeLinear(ys, yz) -> yq
//
// becomes QLinearConv(xq, xs, xz, wq, ws, 0, ys, yz, B). The conv then sums the integers exactly
// in int32, as onnxruntime runs such a model, where the float graph sums the dequantized values
// and rounds once at the end: the two differ by at most one step where a sum falls near a half.
// The weight and its scales are constants: int8, zero point 0, scales one or one per output
// channel (axis 0). B is the bias in steps of xs * ws[k]: the int32 bias itself where its
// DequantizeLinear has that scale (the quantizer writes it so), else a float bias rounded. A
// Relu between the conv and a quantize of zero point 0 into uint8 goes: the uint8 clamp at 0 is
// the Relu. Anything else (uint8 weights, a float input, a zero point on the weight, a conv
// whose float output has other users) is left as it is. The data's DequantizeLinear stays for
// its other users; the weight's goes when nothing else uses it.
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "crosstune/model/passes.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

using ops::AllZero;

struct Dequantized {
  int q = -1, scale = -1, zero = -1;  // the DequantizeLinear's inputs
  int64_t axis = 1;
};

// The DequantizeLinear that produces `v`, if one does (per-tensor or per-axis, no blocks).
std::optional<Dequantized> DequantizeOf(const Graph& g, const std::vector<int>& producer, int v) {
  if (v < 0 || producer[v] < 0) return std::nullopt;
  const Node& n = g.nodes[producer[v]];
  if (n.op != "DequantizeLinear" || n.Int("block_size", 0) != 0) return std::nullopt;
  Dequantized d;
  d.q = n.inputs[0];
  d.scale = n.inputs[1];
  d.zero = n.inputs.size() > 2 ? n.inputs[2] : -1;
  d.axis = n.Int("axis", 1);
  return d;
}

bool ConstOf(const Graph& g, int v, DType t) {
  return v >= 0 && g.values[v].is_const() && g.values[v].dtype == t;
}

}  // namespace

Status FuseQdqConv(Graph& g) {
  const std::vector<int> producer = g.Producers();
  const std::vector<int> uses = g.UseCounts();
  for (Node& quant : g.nodes) {
    if (quant.op != "QuantizeLinear" || quant.Int("block_size", 0) != 0) continue;
    const int yq = quant.outputs[0];
    const int ys = quant.inputs[1], yz = quant.inputs.size() > 2 ? quant.inputs[2] : -1;
    if (g.values[yq].dtype != DType::kUint8 || !ConstOf(g, ys, DType::kFloat32) ||
        g.values[ys].elements() != 1 || (yz >= 0 && !ConstOf(g, yz, DType::kUint8)) ||
        (yz >= 0 && g.values[yz].elements() != 1)) {
      continue;
    }
    int y = quant.inputs[0];
    if (producer[y] < 0 || uses[y] != 1) continue;
    if (g.nodes[producer[y]].op == "Relu") {
      // Relu then a quantize whose zero point is 0: the uint8 clamp does the Relu's work.
      if (!AllZero(g, yz)) continue;
      y = g.nodes[producer[y]].inputs[0];
      if (producer[y] < 0 || uses[y] != 1) continue;
    }
    const Node& conv = g.nodes[producer[y]];
    if (conv.op != "Conv" || conv.inputs.size() < 2) continue;
    const auto x = DequantizeOf(g, producer, conv.inputs[0]);
    const auto w = DequantizeOf(g, producer, conv.inputs[1]);
    if (!x || !w || g.values[x->q].dtype != DType::kUint8 ||
        !ConstOf(g, x->scale, DType::kFloat32) || g.values[x->scale].elements() != 1 ||
        (x->zero >= 0 &&
         (!ConstOf(g, x->zero, DType::kUint8) || g.values[x->zero].elements() != 1))) {
      continue;
    }
    const Value& wq = g.values[w->q];
    if (!ConstOf(g, w->q, DType::kInt8) || wq.shape.size() != 4 ||
        !ConstOf(g, w->scale, DType::kFloat32) || !AllZero(g, w->zero) ||
        (w->zero >= 0 && g.values[w->zero].dtype != DType::kInt8)) {
      continue;
    }
    const int64_t k = wq.shape[0];
    if (g.values[w->scale].elements() != 1 &&
        (w->axis != 0 || g.values[w->scale].elements() != k)) {
      continue;
    }
    // The bias in steps of xs * ws[k].
    const double xs = g.values[x->scale].AsDoubles()[0];
    const std::vector<double> ws = ops::PerChannel(g.values[w->scale], k);
    std::vector<int32_t> bias(static_cast<size_t>(k), 0);
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) {
      const int b = conv.inputs[2];
      std::vector<double> steps;  // the float bias, or its integers where their scale is xs * ws
      if (const auto bq = DequantizeOf(g, producer, b);
          bq && ConstOf(g, bq->q, DType::kInt32) && ConstOf(g, bq->scale, DType::kFloat32) &&
          AllZero(g, bq->zero) && (g.values[bq->scale].elements() == 1 || bq->axis == 0)) {
        const std::vector<double> q = ops::PerChannel(g.values[bq->q], k),
                                  bs = ops::PerChannel(g.values[bq->scale], k);
        if (q.empty() || bs.empty()) continue;
        steps.resize(static_cast<size_t>(k));
        for (int64_t i = 0; i < k; ++i) {
          const double step =
              static_cast<double>(static_cast<float>(xs) * static_cast<float>(ws[i]));
          steps[i] = (std::fabs(bs[i] - step) <= 1e-6 * step ? q[i] : q[i] * bs[i] / step);
        }
      } else if (ConstOf(g, b, DType::kFloat32)) {
        steps = ops::PerChannel(g.values[b], k);
        for (int64_t i = 0; i < k && !steps.empty(); ++i) steps[i] /= xs * ws[i];
      }
      if (steps.empty()) continue;
      bool fits = true;
      for (int64_t i = 0; i < k; ++i) {
        const double r = std::nearbyint(steps[i]);
        fits = fits && std::fabs(r) < 2147483647.0;
        bias[i] = fits ? static_cast<int32_t>(r) : 0;
      }
      if (!fits) continue;
    }
    std::vector<uint8_t> bias_bytes(bias.size() * sizeof(int32_t));
    std::memcpy(bias_bytes.data(), bias.data(), bias_bytes.size());
    const int b = g.AddConstant(g.UniqueValueName(conv.name + ".bias_int32"), DType::kInt32, {k},
                                std::move(bias_bytes));
    int xz = x->zero, wz = w->zero;
    if (xz < 0)
      xz = g.AddConstant(g.UniqueValueName(conv.name + ".x_zero"), DType::kUint8, {}, {0});
    if (wz < 0) wz = g.AddConstant(g.UniqueValueName(conv.name + ".w_zero"), DType::kInt8, {}, {0});
    int yzero = yz;
    if (yzero < 0) {
      yzero = g.AddConstant(g.UniqueValueName(conv.name + ".y_zero"), DType::kUint8, {}, {0});
    }
    Node fused;
    fused.name = conv.name;
    fused.op = "QLinearConv";
    fused.attrs = conv.attrs;
    fused.inputs = {x->q, x->scale, xz, w->q, w->scale, wz, ys, yzero, b};
    fused.outputs = {yq};
    quant = std::move(fused);  // the conv's place in the order is the quantize's: inputs come first
  }
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
