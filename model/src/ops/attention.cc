// Attention (opset 23 on): Y = softmax(Q K^T * scale + bias) V per batch, query head and query
// row, as ONNX's reference computes it. Q, K, V are 4-D [batch, heads, sequence, head size] or
// 3-D [batch, sequence, heads * head size] (q_num_heads and kv_num_heads say the heads); query
// heads share key/value heads in groups (GQA); past_key/past_value come before K/V along the
// sequence (present_key/present_value are the concatenation); the bias is the attention mask
// (boolean: attended or not; float: added; a last dimension shorter than the keys masks the rest),
// the causal frontier (a query at row i sees keys up to i + the past's length, or up to
// nonpad_kv_seqlen - the queries' length), the sliding window (opset 25) and the padding of
// nonpad_kv_seqlen; softcap squashes the scores (softcap * tanh(s / softcap)); a row whose bias
// masks every key gives zeros. qk_matmul_output is the scores (mode 0 and 1), the scores with the
// bias (2) or the softmax (3). float32 only; softmax_precision is accepted and the softmax runs
// in float32.
#include <cmath>
#include <limits>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferAttention(OpContext& ctx) {
  Node& n = ctx.node();
  const Value& q = ctx.in(0);
  const Value& k = ctx.in(1);
  const Value& v = ctx.in(2);
  for (int i = 0; i < 3; ++i) {
    if (ctx.in(i).dtype != DType::kFloat32) {
      return ctx.Error("Q, K and V must be float32, not " +
                       std::string(DTypeName(ctx.in(i).dtype)));
    }
  }
  const size_t rank = q.shape.size();
  if ((rank != 3 && rank != 4) || k.shape.size() != rank || v.shape.size() != rank) {
    return ctx.Error("Q, K and V must all be 3-D or all 4-D");
  }
  ops::AttentionDims a;
  a.three_d = rank == 3;
  a.batch = q.shape[0];
  if (a.three_d) {
    a.q_heads = n.Int("q_num_heads", 0);
    a.kv_heads = n.Int("kv_num_heads", 0);
    if (a.q_heads < 1 || a.kv_heads < 1) {
      return ctx.Error("3-D inputs need q_num_heads and kv_num_heads");
    }
    if (q.shape[2] % a.q_heads || k.shape[2] % a.kv_heads || v.shape[2] % a.kv_heads) {
      return ctx.Error("the hidden sizes do not split into the heads");
    }
    a.q_len = q.shape[1];
    a.kv_len = k.shape[1];
    a.head = q.shape[2] / a.q_heads;
    a.v_head = v.shape[2] / a.kv_heads;
    if (k.shape[2] / a.kv_heads != a.head) return ctx.Error("Q's and K's head sizes differ");
  } else {
    a.q_heads = q.shape[1];
    a.kv_heads = k.shape[1];
    a.q_len = q.shape[2];
    a.kv_len = k.shape[2];
    a.head = q.shape[3];
    a.v_head = v.shape[3];
    if (k.shape[3] != a.head || v.shape[1] != a.kv_heads) {
      return ctx.Error("K " + ShapeText(k.shape) + " and V " + ShapeText(v.shape) +
                       " do not fit Q " + ShapeText(q.shape));
    }
  }
  if (k.shape[0] != a.batch || v.shape[0] != a.batch || v.shape[rank - 2] != k.shape[rank - 2]) {
    return ctx.Error("Q, K and V differ in batch or K and V in length");
  }
  if (a.kv_heads < 1 || a.q_heads % a.kv_heads != 0) {
    return ctx.Error("the query heads (" + std::to_string(a.q_heads) +
                     ") are not a multiple of the key/value heads (" + std::to_string(a.kv_heads) +
                     ")");
  }
  if (ctx.has_input(4) != ctx.has_input(5)) {
    return ctx.Error("past_key and past_value come together");
  }
  if (ctx.has_input(4)) {
    const auto& pk = ctx.in(4).shape;
    const auto& pv = ctx.in(5).shape;
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != a.batch || pk[1] != a.kv_heads ||
        pk[3] != a.head || pv[0] != a.batch || pv[1] != a.kv_heads || pv[2] != pk[2] ||
        pv[3] != a.v_head || ctx.in(4).dtype != DType::kFloat32 ||
        ctx.in(5).dtype != DType::kFloat32) {
      return ctx.Error("past_key " + ShapeText(pk) + " and past_value " + ShapeText(pv) +
                       " do not fit K and V");
    }
    a.past = pk[2];
  }
  if (ctx.has_input(6)) {
    if (ctx.has_input(4)) return ctx.Error("nonpad_kv_seqlen does not go with a past");
    const Value& np = ctx.in(6);
    if (np.dtype != DType::kInt64 || np.shape != std::vector<int64_t>{a.batch}) {
      return ctx.Error("nonpad_kv_seqlen must be int64 [batch]");
    }
  }
  const int64_t total = a.past + a.kv_len;
  if (total > (int64_t{1} << 14)) {
    return ctx.Error("a key sequence of " + std::to_string(total) +
                     " is past the generated kernel's 16384");
  }
  if (ctx.has_input(3)) {
    const Value& m = ctx.in(3);
    if (m.dtype != DType::kFloat32 && m.dtype != DType::kBool) {
      return ctx.Error("the mask must be bool or float32");
    }
    if (m.shape.empty() || m.shape.size() > 4 || m.shape.back() > total) {
      return ctx.Error("the mask " + ShapeText(m.shape) + " does not fit the scores [" +
                       std::to_string(a.batch) + "," + std::to_string(a.q_heads) + "," +
                       std::to_string(a.q_len) + "," + std::to_string(total) + "]");
    }
    std::vector<int64_t> padded(4 - m.shape.size(), 1);
    padded.insert(padded.end(), m.shape.begin(), m.shape.end());
    const int64_t want[3] = {a.batch, a.q_heads, a.q_len};
    for (int d = 0; d < 3; ++d) {
      if (padded[d] != 1 && padded[d] != want[d]) {
        return ctx.Error("the mask " + ShapeText(m.shape) + " does not broadcast to the scores");
      }
    }
  }
  const int64_t mode = n.Int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return ctx.Error("qk_matmul_output_mode must be 0 to 3");
  if (n.Int("left_window_size", -1) < -1 || n.Int("right_window_size", -1) < -1) {
    return ctx.Error("the window sizes must be -1 or more");
  }
  n.attrs.erase("softmax_precision");
  if (!n.Has("scale")) n.SetFloat("scale", 1.0 / std::sqrt(static_cast<double>(a.head)));
  if (a.three_d) {
    ctx.SetOutput(0, DType::kFloat32, {a.batch, a.q_len, a.q_heads * a.v_head});
  } else {
    ctx.SetOutput(0, DType::kFloat32, {a.batch, a.q_heads, a.q_len, a.v_head});
  }
  if (ctx.num_outputs() > 1)
    ctx.SetOutput(1, DType::kFloat32, {a.batch, a.kv_heads, total, a.head});
  if (ctx.num_outputs() > 2) {
    ctx.SetOutput(2, DType::kFloat32, {a.batch, a.kv_heads, total, a.v_head});
  }
  if (ctx.num_outputs() > 3) {
    ctx.SetOutput(3, DType::kFloat32, {a.batch, a.q_heads, a.q_len, total});
  }
  return Status::Ok();
}

// The reference: the same loops as the kernel (kernels/math.cc), in double.
Status EvalAttention(OpContext& ctx) {
  const Node& n = ctx.node();
  const ops::AttentionDims a = ops::AttentionOf(ctx.graph(), n);
  const int64_t total = a.past + a.kv_len, group = a.q_heads / a.kv_heads;
  const float *q = ctx.InFloats(0), *k = ctx.InFloats(1), *v = ctx.InFloats(2);
  const float* pk = ctx.has_input(4) ? ctx.InFloats(4) : nullptr;
  const float* pv = ctx.has_input(5) ? ctx.InFloats(5) : nullptr;
  const std::vector<int64_t> nonpad =
      ctx.has_input(6) ? ctx.in(6).AsInts() : std::vector<int64_t>();
  std::vector<double> mask;
  std::vector<int64_t> mask_strides;
  int64_t mask_len = 0;
  const bool bool_mask = ctx.has_input(3) && ctx.in(3).dtype == DType::kBool;
  if (ctx.has_input(3)) {
    mask = ctx.in(3).AsDoubles();
    mask_len = ctx.in(3).shape.back();
    mask_strides = ops::AttentionMaskStrides(ctx.in(3).shape, a);
  }
  const double scale = n.Float("scale", 1.0), softcap = n.Float("softcap", 0.0);
  const bool causal = n.Int("is_causal", 0) != 0;
  const int64_t left = n.Int("left_window_size", -1), right = n.Int("right_window_size", -1);
  const int64_t mode = n.Int("qk_matmul_output_mode", 0);
  const double inf = std::numeric_limits<double>::infinity();
  auto key = [&](int64_t b, int64_t hk, int64_t l, int64_t d) -> double {
    if (l < a.past) return pk[((b * a.kv_heads + hk) * a.past + l) * a.head + d];
    l -= a.past;
    return a.three_d ? k[(b * a.kv_len + l) * a.kv_heads * a.head + hk * a.head + d]
                     : k[((b * a.kv_heads + hk) * a.kv_len + l) * a.head + d];
  };
  auto value = [&](int64_t b, int64_t hk, int64_t l, int64_t d) -> double {
    if (l < a.past) return pv[((b * a.kv_heads + hk) * a.past + l) * a.v_head + d];
    l -= a.past;
    return a.three_d ? v[(b * a.kv_len + l) * a.kv_heads * a.v_head + hk * a.v_head + d]
                     : v[((b * a.kv_heads + hk) * a.kv_len + l) * a.v_head + d];
  };
  std::vector<float>& y = ctx.OutFloats(0);
  std::vector<float>* qk = ctx.num_outputs() > 3 ? &ctx.OutFloats(3) : nullptr;
  std::vector<double> s(static_cast<size_t>(total)), bias(static_cast<size_t>(total));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.q_heads; ++h)
      for (int64_t i = 0; i < a.q_len; ++i) {
        const int64_t hk = h / group;
        const int64_t offset = nonpad.empty() ? a.past : nonpad[b] - a.q_len;
        double bias_max = -inf;
        for (int64_t j = 0; j < total; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < a.head; ++d) {
            const double qv = a.three_d ? q[(b * a.q_len + i) * a.q_heads * a.head + h * a.head + d]
                                        : q[((b * a.q_heads + h) * a.q_len + i) * a.head + d];
            dot += qv * key(b, hk, j, d);
          }
          double sc = dot * scale;
          if (softcap > 0) sc = softcap * std::tanh(sc / softcap);
          s[j] = sc;
          double bj = 0;
          if (!mask.empty()) {
            if (j >= mask_len) {
              bj = -inf;
            } else {
              const double m = mask[b * mask_strides[0] + h * mask_strides[1] +
                                    i * mask_strides[2] + j * mask_strides[3]];
              bj = bool_mask ? (m != 0 ? 0.0 : -inf) : m;
            }
          }
          if (causal && j > i + offset) bj = -inf;
          const int64_t diff = i + offset - j;
          if ((left >= 0 && diff > left) || (right >= 0 && -diff > right)) bj = -inf;
          if (!nonpad.empty() && j >= nonpad[b]) bj = -inf;
          bias[j] = bj;
          bias_max = std::max(bias_max, bj);
        }
        const int64_t row = (b * a.q_heads + h) * a.q_len + i;
        double mx = -inf;
        for (int64_t j = 0; j < total; ++j) mx = std::max(mx, s[j] + bias[j]);
        if (qk != nullptr && mode != 3) {
          for (int64_t j = 0; j < total; ++j) {
            (*qk)[row * total + j] = static_cast<float>(mode == 2 ? s[j] + bias[j] : s[j]);
          }
        }
        const bool masked = bias_max == -inf;
        double sum = 0;
        for (int64_t j = 0; j < total; ++j) {
          s[j] = masked || mx == -inf ? 0.0 : std::exp(s[j] + bias[j] - mx);
          sum += s[j];
        }
        for (int64_t j = 0; j < total; ++j) s[j] = sum > 0 ? s[j] / sum : 0.0;
        if (qk != nullptr && mode == 3) {
          for (int64_t j = 0; j < total; ++j) (*qk)[row * total + j] = static_cast<float>(s[j]);
        }
        for (int64_t d = 0; d < a.v_head; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < total; ++j) acc += s[j] * value(b, hk, j, d);
          const int64_t at = a.three_d ? (b * a.q_len + i) * a.q_heads * a.v_head + h * a.v_head + d
                                       : row * a.v_head + d;
          y[at] = static_cast<float>(acc);
        }
      }
  for (int o = 1; o <= 2 && o < ctx.num_outputs(); ++o) {
    const int64_t width = o == 1 ? a.head : a.v_head;
    std::vector<float>& present = ctx.OutFloats(o);
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t hk = 0; hk < a.kv_heads; ++hk)
        for (int64_t l = 0; l < total; ++l)
          for (int64_t d = 0; d < width; ++d) {
            present[((b * a.kv_heads + hk) * total + l) * width + d] =
                static_cast<float>(o == 1 ? key(b, hk, l, d) : value(b, hk, l, d));
          }
  }
  return Status::Ok();
}

double AttentionFlops(const Graph& g, const Node& n) {
  const ops::AttentionDims a = ops::AttentionOf(g, n);
  return 2.0 * a.batch * a.q_heads * a.q_len * (a.past + a.kv_len) * (a.head + a.v_head);
}

}  // namespace

namespace ops {

AttentionDims AttentionOf(const Graph& g, const Node& n) {
  const auto& q = g.values[n.inputs[0]].shape;
  const auto& k = g.values[n.inputs[1]].shape;
  const auto& v = g.values[n.inputs[2]].shape;
  AttentionDims a;
  a.three_d = q.size() == 3;
  a.batch = q[0];
  if (a.three_d) {
    a.q_heads = n.Int("q_num_heads", 1);
    a.kv_heads = n.Int("kv_num_heads", 1);
    a.q_len = q[1];
    a.kv_len = k[1];
    a.head = q[2] / a.q_heads;
    a.v_head = v[2] / a.kv_heads;
  } else {
    a.q_heads = q[1];
    a.kv_heads = k[1];
    a.q_len = q[2];
    a.kv_len = k[2];
    a.head = q[3];
    a.v_head = v[3];
  }
  if (n.inputs.size() > 4 && n.inputs[4] >= 0) a.past = g.values[n.inputs[4]].shape[2];
  return a;
}

std::vector<int64_t> AttentionMaskStrides(const std::vector<int64_t>& mask,
                                          const AttentionDims& a) {
  std::vector<int64_t> padded(4 - mask.size(), 1);
  padded.insert(padded.end(), mask.begin(), mask.end());
  std::vector<int64_t> strides(4, 0);
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    strides[d] = padded[d] == 1 && d < 3 ? 0 : stride;
    stride *= padded[d];
  }
  (void)a;
  return strides;
}

}  // namespace ops

const OpDef kAttention = {
    "Attention",
    {attr::Int("is_causal"), attr::Int("kv_num_heads"), attr::Int("q_num_heads"),
     attr::Int("qk_matmul_output_mode"), attr::Float("scale"), attr::Float("softcap"),
     attr::Int("softmax_precision"), attr::Int("left_window_size"), attr::Int("right_window_size")},
    3,
    7,
    4,
    InferAttention,
    EvalAttention,
    AttentionFlops,
    false,
    23};

}  // namespace crosstune::model
