// QLinearConv nodes as conv2d_int8 tasks (layout_plan.h: Int8ConvShape, RewriteInt8Convs).
#include <climits>
#include <cstring>
#include <map>
#include <optional>

#include "crosstune/model/layout_plan.h"
#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/task.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

bool ConstScalar(const Graph& g, int v, DType t) {
  return v >= 0 && g.values[v].is_const() && g.values[v].dtype == t && g.values[v].elements() == 1;
}

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Node TransposeNode(const std::string& name, int in, int out, std::vector<int64_t> perm) {
  Node t;
  t.name = name;
  t.op = "Transpose";
  t.inputs = {in};
  t.outputs = {out};
  t.SetInts("perm", std::move(perm));
  return t;
}

// Where `n` is an elementwise node (DequantizeLinear or QuantizeLinear of one scale and zero
// point; Add, Sub, Mul or Relu of same-shape operands, or one-element constants) whose 4-D
// operands all have NHWC copies: the node on those copies, writing a new NHWC value.
std::optional<Node> ElementwiseInNhwc(Graph& g, const Node& n, const std::map<int, int>& nhwc_of) {
  const bool quantize = n.op == "DequantizeLinear" || n.op == "QuantizeLinear";
  const bool arithmetic = n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Relu";
  if ((!quantize && !arithmetic) || n.outputs.size() != 1 || n.Int("block_size", 0) != 0) {
    return std::nullopt;
  }
  const std::vector<int64_t> shape = g.values[n.outputs[0]].shape;
  if (shape.size() != 4) return std::nullopt;
  Node m = n;
  int data = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const int v = n.inputs[i];
    if (v < 0) continue;
    const Value& in = g.values[v];
    if (in.is_const() && in.elements() == 1) continue;
    auto it = nhwc_of.find(v);
    if ((quantize && i > 0) || in.shape != shape || it == nhwc_of.end()) return std::nullopt;
    m.inputs[i] = it->second;
    ++data;
  }
  if (data == 0) return std::nullopt;
  Value y = g.values[n.outputs[0]];
  y.name = g.UniqueValueName(y.name + ".nhwc");
  y.shape = {shape[0], shape[2], shape[3], shape[1]};
  m.outputs = {g.AddValue(std::move(y))};
  return m;
}

}  // namespace

std::optional<std::vector<int64_t>> Int8ConvShape(const Graph& g, const Node& n) {
  if (n.op != "QLinearConv") return std::nullopt;
  const ops::QuantConvInputs q = ops::QuantConvOf(n);
  const Value& x = g.values[q.x];
  const Value& w = g.values[q.w];
  const Value& y = g.values[n.outputs[0]];
  if (x.dtype != DType::kUint8 || y.dtype != DType::kUint8 || x.shape.size() != 4 ||
      !w.is_const() || w.dtype != DType::kInt8 || w.shape.size() != 4 || n.Int("group", 1) != 1) {
    return std::nullopt;
  }
  if (!ConstScalar(g, q.x_scale, DType::kFloat32) || !ConstScalar(g, q.y_scale, DType::kFloat32) ||
      q.w_scale < 0 || !g.values[q.w_scale].is_const() ||
      (q.x_zero >= 0 && !ConstScalar(g, q.x_zero, DType::kUint8)) ||
      (q.y_zero >= 0 && !ConstScalar(g, q.y_zero, DType::kUint8)) ||
      (q.bias >= 0 && !g.values[q.bias].is_const())) {
    return std::nullopt;
  }
  if (q.w_zero >= 0 && (!g.values[q.w_zero].is_const() || !ops::AllZero(g, q.w_zero))) {
    return std::nullopt;
  }
  const ops::Window win = ops::WindowOf(n, y.shape);
  if (win.dh != 1 || win.dw != 1 || win.sh != win.sw || win.pt != win.pl || win.pt != win.pb ||
      win.pt != win.pr) {
    return std::nullopt;
  }
  const int64_t xz = q.x_zero >= 0 ? g.values[q.x_zero].AsInts()[0] : 0;
  const int64_t yz = q.y_zero >= 0 ? g.values[q.y_zero].AsInts()[0] : 0;
  return std::vector<int64_t>{x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                              w.shape[0], w.shape[2], w.shape[3], win.sh,
                              win.pt,     xz,         yz,         0};
}

Status RewriteInt8Convs(Graph& g, const builder::Target& target, int threads) {
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  std::map<int, int> nhwc_of;  // an NCHW uint8 value -> its NHWC copy
  const std::vector<Node> nodes = std::move(g.nodes);
  g.nodes.clear();
  for (const Node& n : nodes) {
    const auto shape = Int8ConvShape(g, n);
    if (!shape) {
      // An elementwise node of NHWC data (a residual block's DequantizeLinear, Add and
      // QuantizeLinear) computes in NHWC too: no transpose between the block's convs and its add.
      if (std::optional<Node> nhwc = ElementwiseInNhwc(g, n, nhwc_of)) {
        const int y = n.outputs[0];
        out.push_back(std::move(*nhwc));
        nhwc_of[y] = out.back().outputs[0];
        out.push_back(TransposeNode(n.name + ".to_nchw", nhwc_of[y], y, {0, 3, 1, 2}));
      } else {
        out.push_back(n);
      }
      continue;
    }
    auto task = tuner::MakeTask("conv2d_int8", *shape, target, {threads});
    if (!task.ok()) {  // past the template's limits: the QLinearConv's generated kernel
      out.push_back(n);
      continue;
    }
    const auto args = (*task)->args();
    const int64_t l = args[1].shape[4], kp = args[2].shape[0];
    const ops::QuantConvInputs q = ops::QuantConvOf(n);
    const int64_t nb = (*shape)[0], c = (*shape)[1], h = (*shape)[2], wd = (*shape)[3],
                  k = (*shape)[4], r = (*shape)[5], s = (*shape)[6], xz = (*shape)[9];
    // The data in NHWC, once for all its int8 convs.
    int x = q.x;
    if (auto it = nhwc_of.find(x); it != nhwc_of.end()) {
      x = it->second;
    } else {
      Value v;
      v.name = g.UniqueValueName(g.values[q.x].name + ".nhwc");
      v.dtype = DType::kUint8;
      v.shape = {nb, h, wd, c};
      x = g.AddValue(std::move(v));
      out.push_back(TransposeNode(n.name + ".to_nhwc", q.x, x, {0, 2, 3, 1}));
      nhwc_of[q.x] = x;
    }
    // The weight packed; the bias less xz * sum(w[k]) (the kernel reads xz in the padding); the
    // scale xs * ws[k] / ys in float32, as QLinearConv's kernel computes it.
    const Value& wv = g.values[q.w];
    const std::vector<int8_t> kcrs(
        reinterpret_cast<const int8_t*>(wv.data->data()),
        reinterpret_cast<const int8_t*>(wv.data->data()) + wv.elements());
    const std::vector<double> bias = q.bias >= 0 ? ops::PerChannel(g.values[q.bias], k)
                                                 : std::vector<double>(static_cast<size_t>(k), 0);
    const std::vector<double> ws = ops::PerChannel(g.values[q.w_scale], k);
    const float xs = static_cast<float>(g.values[q.x_scale].AsDoubles()[0]);
    const float ys = static_cast<float>(g.values[q.y_scale].AsDoubles()[0]);
    std::vector<int32_t> b(static_cast<size_t>(kp), 0);
    std::vector<float> scale(static_cast<size_t>(kp), 0.0f);
    for (int64_t o = 0; o < k; ++o) {
      int64_t sum = 0;
      for (int64_t i = 0; i < c * r * s; ++i) sum += kcrs[o * c * r * s + i];
      const int64_t folded = static_cast<int64_t>(bias[o]) - xz * sum;
      if (folded < INT32_MIN || folded > INT32_MAX) {
        return Status(ErrorCode::kInvalidArgument,
                      "node '" + n.name + "': its bias less the zero point's sums overflows int32");
      }
      b[o] = static_cast<int32_t>(folded);
      scale[o] = xs * static_cast<float>(ws[o]) / ys;
    }
    const std::vector<int8_t> packed = tuner::PackInt8Weight(kcrs, k, c, r, s, l);
    const int wp = g.AddConstant(g.UniqueValueName(wv.name + ".int8"), DType::kInt8,
                                 tuner::Int8WeightShape({k, c, r, s}, l), Bytes(packed));
    g.values[wp].layout = "int8:" + std::to_string(l);
    const int bp =
        g.AddConstant(g.UniqueValueName(n.name + ".bias_folded"), DType::kInt32, {kp}, Bytes(b));
    const int sp =
        g.AddConstant(g.UniqueValueName(n.name + ".scale"), DType::kFloat32, {kp}, Bytes(scale));
    const int y = n.outputs[0];
    Value yv;
    yv.name = g.UniqueValueName(g.values[y].name + ".nhwc");
    yv.dtype = DType::kUint8;
    yv.shape = args[4].shape;
    const int yn = g.AddValue(std::move(yv));
    Node conv;
    conv.name = n.name;
    conv.op = "Conv2dInt8";
    conv.inputs = {x, wp, bp, sp};
    conv.outputs = {yn};
    conv.SetInts("shape", *shape);
    out.push_back(std::move(conv));
    out.push_back(TransposeNode(n.name + ".to_nchw", yn, y, {0, 3, 1, 2}));
    nhwc_of[y] = yn;
  }
  g.nodes = std::move(out);
  g.Compact();  // the transposes no one reads (between two int8 convs) and the old weights
  return Status::Ok();
}

}  // namespace crosstune::model
