// Generated kernels with arithmetic beyond one element: Softmax and LogSoftmax, LRN, a generic Gemm
// and MatMul (those the dense template does not take), and a direct convolution for the convs no
// template takes (groups, dilation, uneven pads or strides, a depthwise conv with a residual).
#include <map>

#include "../ops/op_defs.h"
#include "kernels/kernels_impl.h"

namespace crosstune::model::kernels {

Expected<GeneratedKernel> Softmax(const Graph& g, const Node& n, const std::string& name) {
  const auto& s = g.values[n.inputs[0]].shape;
  const int64_t axis = n.Int("axis", 0);
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  if (g.opset >= 13) {
    len = s[axis];
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  } else {
    for (size_t d = axis; d < s.size(); ++d) len *= s[d];
  }
  std::ostringstream d;
  // exp through ct_exp (kExpFunction), its own loop so that it vectorizes; then the sum.
  d << "#define LEN " << len << "L\n#define INNER " << inner << "L\n" << kExpFunction;
  return LoopKernel(
      name, 1, 1, outer * inner, d.str(),
      "    const long base = it / INNER * LEN * INNER + it % INNER;\n"
      "    float m = in0[base];\n"
      "    for (long j = 1; j < LEN; ++j) if (in0[base + j * INNER] > m) m = "
      "in0[base + j * INNER];\n"
      "    for (long j = 0; j < LEN; ++j) out0[base + j * INNER] = ct_exp(in0[base + j * INNER] - "
      "m);\n"
      "    float sum = 0;\n"
      "    for (long j = 0; j < LEN; ++j) sum += out0[base + j * INNER];\n" +
          std::string(n.op == "LogSoftmax"
                          ? "    const float ls = __builtin_logf(sum);\n"
                            "    for (long j = 0; j < LEN; ++j) out0[base + j * INNER] = "
                            "in0[base + j * INNER] - m - ls;"
                          : "    for (long j = 0; j < LEN; ++j) out0[base + j * INNER] "
                            "/= sum;"));
}

Expected<GeneratedKernel> Lrn(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const int64_t c = x[1], inner = NumElements(x) / x[0] / c, size = n.Int("size", 1);
  std::ostringstream d;
  d << "#define C " << c << "L\n#define INNER " << inner << "L\n#define LO " << (size - 1) / 2
    << "L\n#define HI " << size - 1 - (size - 1) / 2 << "L\n#define ALPHA_N "
    << CFloat(n.Float("alpha", 1e-4) / static_cast<double>(size)) << "\n#define BETA "
    << CFloat(n.Float("beta", 0.75)) << "\n#define BIAS " << CFloat(n.Float("bias", 1.0)) << "\n";
  return LoopKernel(name, 1, 1, x[0] * c, d.str(),
                    "    const long ch = it % C, base = (it - ch) * INNER;\n"
                    "    const long k0 = ch - LO < 0 ? 0 : ch - LO, k1 = ch + HI < C ? ch + HI : C "
                    "- 1;\n"
                    "    for (long j = 0; j < INNER; ++j) {\n"
                    "      float sq = 0;\n"
                    "      for (long k = k0; k <= k1; ++k) { const float v = in0[base + k * INNER "
                    "+ j]; sq += v * v; }\n"
                    "      const float t = BIAS + ALPHA_N * sq;\n"
                    "      out0[base + ch * INNER + j] = in0[base + ch * INNER + j] / "
                    "__builtin_expf(BETA * __builtin_logf(t));\n    }");
}

// Gemm (alpha, beta, transposes, C broadcast), Dense without a template, MatMul, MatMulInteger,
// QLinearMatMul: items are output rows.
Expected<GeneratedKernel> MatrixProduct(const Graph& g, const Node& n, const std::string& name) {
  const auto& a = g.values[n.inputs[0]].shape;
  const auto& out = g.values[n.outputs[0]].shape;
  std::ostringstream d;
  std::string body;
  const int inputs = static_cast<int>(n.inputs.size());
  if (n.op == "Gemm" || n.op == "Dense") {
    const bool dense = n.op == "Dense";
    const bool ta = !dense && n.Int("transA", 0) != 0;
    const bool tb = dense || n.Int("transB", 0) != 0;
    const int64_t m = out[0], nn = out[1], k = ta ? a[0] : a[1];
    d << "#define M " << m << "L\n#define N " << nn << "L\n#define K " << k << "L\n"
      << "#define ALPHA " << CFloat(dense ? 1.0 : n.Float("alpha", 1.0)) << "\n#define BETA "
      << CFloat(dense ? 1.0 : n.Float("beta", 1.0)) << "\n";
    std::string c_term = "0.0f";
    if (inputs > 2) {
      const auto cs = BroadcastStrides(g.values[n.inputs[2]].shape, out);
      d << "#define CS0 " << cs[0] << "L\n#define CS1 " << cs[1] << "L\n";
      c_term = "BETA * in2[it * CS0 + j * CS1]";
    }
    body = std::string("    for (long j = 0; j < N; ++j) {\n      float sum = 0;\n") +
           "      for (long p = 0; p < K; ++p) sum += " +
           (ta ? "in0[p * M + it]" : "in0[it * K + p]") + " * " +
           (tb ? "in1[j * K + p]" : "in1[p * N + j]") +
           ";\n      out0[it * N + j] = ALPHA * sum + " + c_term + ";\n    }";
    return LoopKernel(name, inputs, 1, m, d.str(), body);
  }
  if (n.op == "PackedMatMul") {
    // A [..., K] of M rows times B in column panels (tuner/matmul_layout.h; the matmul template
    // computes the node, this kernel only where no template does).
    const int64_t k = n.Int("k", 0), nn = n.Int("n", 0), vw = n.Int("vw", 1);
    d << "#define N " << nn << "L\n#define K " << k << "L\n#define VW " << vw << "L\n";
    body =
        "    const float* pa = in0 + it * K;\n"
        "    for (long j = 0; j < N; ++j) {\n      float sum = 0;\n"
        "      const float* pb = in1 + j / VW * K * VW + j % VW;\n"
        "      for (long p = 0; p < K; ++p) sum += pa[p] * pb[p * VW];\n"
        "      out0[it * N + j] = sum;\n    }";
    return LoopKernel(name, 2, 1, NumElements(out) / nn, d.str(), body);
  }
  // MatMul: both operands as batches of matrices, broadcast over the batch dimensions.
  const auto& b = g.values[n.inputs[n.op == "QLinearMatMul" ? 3 : 1]].shape;
  const int64_t m = a.size() == 1 ? 1 : a[a.size() - 2], k = a.back();
  const int64_t nn = b.size() == 1 ? 1 : b.back();
  std::vector<int64_t> ab(a.begin(), a.end() - std::min<size_t>(2, a.size()));
  std::vector<int64_t> bb(b.begin(), b.end() - std::min<size_t>(2, b.size()));
  std::vector<int64_t> batch;
  ops::BroadcastShapes(ab, bb, &batch);
  const auto sa = BroadcastStrides(ab, batch), sb = BroadcastStrides(bb, batch);
  d << "#define M " << m << "L\n#define N " << nn << "L\n#define K " << k << "L\n#define BR "
    << batch.size() << "\nstatic const long kBatch[] = " << CArray(batch)
    << ";\nstatic const long kSA[] = " << CArray(sa)
    << ";\nstatic const long kSB[] = " << CArray(sb) << ";\n";
  const std::string batch_offsets =
      "    long rem = it / M, oa = 0, ob = 0;\n"
      "    for (int d = BR - 1; d >= 0; --d) { const long x = rem % kBatch[d]; rem /= kBatch[d];\n"
      "      oa += x * kSA[d]; ob += x * kSB[d]; }\n";
  if (n.op == "MatMul") {
    body = batch_offsets +
           "    const float* pa = in0 + oa * M * K + it % M * K;\n"
           "    const float* pb = in1 + ob * K * N;\n"
           "    for (long j = 0; j < N; ++j) {\n      float sum = 0;\n"
           "      for (long p = 0; p < K; ++p) sum += pa[p] * pb[p * N + j];\n"
           "      out0[it * N + j] = sum;\n    }";
    return LoopKernel(name, 2, 1, NumElements(out) / nn, d.str(), body);
  }
  // MatMulInteger (A, B, A's zero point, B's) and QLinearMatMul (a, a_scale, a_zero_point, b,
  // b_scale, b_zero_point, y_scale, y_zero_point): int sums of the operands less their zero
  // points; QLinearMatMul requantizes each as QuantizeLinear does.
  const bool qlinear = n.op == "QLinearMatMul";
  const int b_at = qlinear ? 3 : 1;
  // The kernel's arguments are the node's present inputs, in order.
  std::vector<std::string> types;
  std::vector<std::string> arg(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0) continue;
    arg[i] = "in" + std::to_string(types.size());
    types.push_back(CType(g.values[n.inputs[i]].dtype));
  }
  types.push_back(CType(g.values[n.outputs[0]].dtype));
  auto zero = [&](size_t i, const std::string& index) {
    if (i >= arg.size() || arg[i].empty()) return std::string("0");
    const bool one = g.values[n.inputs[i]].elements() == 1;
    return "(int)" + arg[i] + "[" + (one ? std::string("0") : index) + "]";
  };
  const std::string za = zero(2, "it % M"), zb = zero(qlinear ? 5 : 3, "j");
  body = batch_offsets + "    const " + types[0] + "* pa = " + arg[0] +
         " + oa * M * K + it % M * K;\n" + "    const " + types[b_at] + "* pb = " + arg[b_at] +
         " + ob * K * N;\n" + "    const int za = " + za + ";\n" +
         "    for (long j = 0; j < N; ++j) {\n      int sum = 0;\n      const int zb = " + zb +
         ";\n      for (long p = 0; p < K; ++p) sum += ((int)pa[p] - za) * ((int)pb[p * N + j] - "
         "zb);\n";
  if (qlinear) {
    const bool s8 = g.values[n.outputs[0]].dtype == DType::kInt8;
    body += "      float v = __builtin_nearbyintf((float)sum * (" + arg[1] + "[0] * " + arg[4] +
            "[0] / " + arg[6] + "[0])) + (float)" + arg[7] + "[0];\n" +
            "      v = v != v ? 0.0f : v < " + (s8 ? "-128.0f ? -128.0f" : "0.0f ? 0.0f") +
            " : v > " + (s8 ? "127.0f ? 127.0f" : "255.0f ? 255.0f") +
            " : v;\n      out0[it * N + j] = (" + types.back() + ")v;\n    }";
  } else {
    body += "      out0[it * N + j] = sum;\n    }";
  }
  return LoopKernel(name, static_cast<int>(types.size()) - 1, 1, NumElements(out) / nn, d.str(),
                    body, types);
}

// Attention (ops/attention.cc): items are (batch, query head, query row); each computes its
// row of scores on the stack, the softmax and the weighted values. The first query row of each
// (batch, key/value head) also writes present_key/present_value where the node has them.
Expected<GeneratedKernel> Attention(const Graph& g, const Node& n, const std::string& name) {
  const ops::AttentionDims a = ops::AttentionOf(g, n);
  const int64_t total = a.past + a.kv_len;
  auto present = [&n](size_t i) { return n.inputs.size() > i && n.inputs[i] >= 0; };
  // The kernel's inputs are the node's present ones, in order.
  std::vector<std::string> arg(7);
  std::vector<std::string> types;
  for (size_t i = 0; i < n.inputs.size() && i < 7; ++i) {
    if (!present(i)) continue;
    arg[i] = "in" + std::to_string(types.size());
    types.push_back(CType(g.values[n.inputs[i]].dtype));
  }
  const int inputs = static_cast<int>(types.size());
  const int outs = static_cast<int>(n.outputs.size());
  for (int o = 0; o < outs; ++o) types.push_back("float");
  std::ostringstream d;
  d << "#define A_B " << a.batch << "L\n#define A_HQ " << a.q_heads << "L\n#define A_HK "
    << a.kv_heads << "L\n#define A_SQ " << a.q_len << "L\n#define A_SK " << a.kv_len
    << "L\n#define A_P " << a.past << "L\n#define A_T " << total << "L\n#define A_D " << a.head
    << "L\n#define A_DV " << a.v_head << "L\n#define A_GROUP " << a.q_heads / a.kv_heads
    << "L\n#define A_SCALE " << CFloat(n.Float("scale", 1.0)) << "\n#define A_SOFTCAP "
    << CFloat(n.Float("softcap", 0.0)) << "\n#define A_LEFT " << n.Int("left_window_size", -1)
    << "L\n#define A_RIGHT " << n.Int("right_window_size", -1) << "L\n";
  if (a.three_d) {
    d << "#define QAT(b, h, i, e) ((((b) * A_SQ + (i)) * A_HQ + (h)) * A_D + (e))\n"
      << "#define KAT(b, h, l, e) ((((b) * A_SK + (l)) * A_HK + (h)) * A_D + (e))\n"
      << "#define VAT(b, h, l, e) ((((b) * A_SK + (l)) * A_HK + (h)) * A_DV + (e))\n"
      << "#define YAT(b, h, i, e) ((((b) * A_SQ + (i)) * A_HQ + (h)) * A_DV + (e))\n";
  } else {
    d << "#define QAT(b, h, i, e) ((((b) * A_HQ + (h)) * A_SQ + (i)) * A_D + (e))\n"
      << "#define KAT(b, h, l, e) ((((b) * A_HK + (h)) * A_SK + (l)) * A_D + (e))\n"
      << "#define VAT(b, h, l, e) ((((b) * A_HK + (h)) * A_SK + (l)) * A_DV + (e))\n"
      << "#define YAT(b, h, i, e) ((((b) * A_HQ + (h)) * A_SQ + (i)) * A_DV + (e))\n";
  }
  const std::string past_k =
      present(4) ? arg[4] + "[(((b) * A_HK + (h)) * A_P + (l)) * A_D + (e)]" : "0.0f";
  const std::string past_v =
      present(5) ? arg[5] + "[(((b) * A_HK + (h)) * A_P + (l)) * A_DV + (e)]" : "0.0f";
  d << "#define KEY(b, h, l, e) ((l) < A_P ? " << past_k << " : " << arg[1]
    << "[KAT(b, h, (l) - A_P, e)])\n"
    << "#define VALUE(b, h, l, e) ((l) < A_P ? " << past_v << " : " << arg[2]
    << "[VAT(b, h, (l) - A_P, e)])\n";
  std::string bias = "      float bj = 0.0f;\n";
  if (present(3)) {
    const Value& m = g.values[n.inputs[3]];
    const auto ms = ops::AttentionMaskStrides(m.shape, a);
    d << "static const long kMS[] = " << CArray(ms) << ";\n#define A_MLEN " << m.shape.back()
      << "L\n";
    const std::string at = arg[3] + "[b * kMS[0] + h * kMS[1] + i * kMS[2] + j * kMS[3]]";
    bias += "      if (j >= A_MLEN) bj = -__builtin_inff();\n      else bj = " +
            (m.dtype == DType::kBool ? "(" + at + " ? 0.0f : -__builtin_inff())" : at) + ";\n";
  }
  if (n.Int("is_causal", 0) != 0) bias += "      if (j > i + offset) bj = -__builtin_inff();\n";
  bias +=
      "      { const long diff = i + offset - j;\n"
      "        if ((A_LEFT >= 0 && diff > A_LEFT) || (A_RIGHT >= 0 && -diff > A_RIGHT)) bj = "
      "-__builtin_inff(); }\n";
  if (present(6)) bias += "      if (j >= (long)" + arg[6] + "[b]) bj = -__builtin_inff();\n";
  const int64_t mode = n.Int("qk_matmul_output_mode", 0);
  const std::string qk = outs > 3 ? "out" + std::to_string(3) : "";
  std::string body =
      "    const long i = it % A_SQ, h = it / A_SQ % A_HQ, b = it / A_SQ / A_HQ, hk = h / "
      "A_GROUP;\n"
      "    const long offset = " +
      (present(6) ? "(long)" + arg[6] + "[b] - A_SQ" : std::string("A_P")) +
      ";\n"
      "    float s[A_T], bias[A_T];\n"
      "    float bias_max = -__builtin_inff(), mx = -__builtin_inff();\n"
      "    for (long j = 0; j < A_T; ++j) {\n"
      "      float dot = 0.0f;\n"
      "      for (long e = 0; e < A_D; ++e) dot += " +
      arg[0] +
      "[QAT(b, h, i, e)] * KEY(b, hk, j, e);\n"
      "      float sc = dot * A_SCALE;\n"
      "      if (A_SOFTCAP > 0.0f) sc = A_SOFTCAP * __builtin_tanhf(sc / A_SOFTCAP);\n"
      "      s[j] = sc;\n" +
      bias +
      "      bias[j] = bj;\n"
      "      if (bj > bias_max) bias_max = bj;\n"
      "      if (sc + bj > mx) mx = sc + bj;\n"
      "    }\n";
  if (!qk.empty() && mode != 3) {
    body += "    for (long j = 0; j < A_T; ++j) " + qk +
            "[it * A_T + j] = " + (mode == 2 ? "s[j] + bias[j]" : "s[j]") + ";\n";
  }
  body +=
      "    const int masked = bias_max == -__builtin_inff();\n"
      "    float sum = 0.0f;\n"
      "    for (long j = 0; j < A_T; ++j) {\n"
      "      s[j] = masked ? 0.0f : __builtin_expf(s[j] + bias[j] - mx);\n"
      "      sum += s[j];\n"
      "    }\n"
      "    for (long j = 0; j < A_T; ++j) s[j] = sum > 0.0f ? s[j] / sum : 0.0f;\n";
  if (!qk.empty() && mode == 3)
    body += "    for (long j = 0; j < A_T; ++j) " + qk + "[it * A_T + j] = s[j];\n";
  body +=
      "    for (long e = 0; e < A_DV; ++e) {\n"
      "      float acc = 0.0f;\n"
      "      for (long j = 0; j < A_T; ++j) acc += s[j] * VALUE(b, hk, j, e);\n"
      "      out0[YAT(b, h, i, e)] = acc;\n"
      "    }\n";
  if (outs > 1) {
    body +=
        "    if (i == 0 && h % A_GROUP == 0) {\n"
        "      for (long l = 0; l < A_T; ++l)\n"
        "        for (long e = 0; e < A_D; ++e) out1[((b * A_HK + hk) * A_T + l) * A_D + e] = "
        "KEY(b, hk, "
        "l, e);\n";
    if (outs > 2) {
      body +=
          "      for (long l = 0; l < A_T; ++l)\n"
          "        for (long e = 0; e < A_DV; ++e) out2[((b * A_HK + hk) * A_T + l) * A_DV + e] = "
          "VALUE(b, hk, l, e);\n";
    }
    body += "    }\n";
  }
  return LoopKernel(name, inputs, outs, a.batch * a.q_heads * a.q_len, d.str(), body, types);
}

// ConvTranspose (ops/conv_transpose.cc): items are output rows (n, m, oh); each output pixel
// sums the input pixels whose stride lands on it.
Expected<GeneratedKernel> ConvTranspose(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& wt = g.values[n.inputs[1]].shape;
  const auto& y = g.values[n.outputs[0]].shape;
  const auto pads = n.Ints("pads"), s = n.Ints("strides"), dl = n.Ints("dilations");
  const bool bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  std::ostringstream d;
  d << "#define C " << x[1] << "L\n#define H " << x[2] << "L\n#define W " << x[3]
    << "L\n#define MG " << wt[1] << "L\n#define KH " << wt[2] << "L\n#define KW " << wt[3]
    << "L\n#define M " << y[1] << "L\n#define OH " << y[2] << "L\n#define OW " << y[3]
    << "L\n#define CG " << x[1] / n.Int("group", 1) << "L\n#define PT " << pads[0]
    << "L\n#define PL " << pads[1] << "L\n#define SH " << s[0] << "L\n#define SW " << s[1]
    << "L\n#define DH " << dl[0] << "L\n#define DW " << dl[1] << "L\n";
  const std::string body =
      "    const long yy = it % OH, o = it / OH % M, b = it / OH / M;\n"
      "    const long g = o / MG, ol = o % MG;\n"
      "    for (long xx = 0; xx < OW; ++xx) {\n"
      "      float sum = " +
      std::string(bias ? "in2[o]" : "0.0f") +
      ";\n"
      "      for (long ci = g * CG; ci < (g + 1) * CG; ++ci)\n"
      "        for (long r = 0; r < KH; ++r) {\n"
      "          const long ty = yy + PT - r * DH;\n"
      "          if (ty < 0 || ty % SH != 0 || ty / SH >= H) continue;\n"
      "          for (long q = 0; q < KW; ++q) {\n"
      "            const long tx = xx + PL - q * DW;\n"
      "            if (tx < 0 || tx % SW != 0 || tx / SW >= W) continue;\n"
      "            sum += in0[((b * C + ci) * H + ty / SH) * W + tx / SW] *\n"
      "                   in1[((ci * MG + ol) * KH + r) * KW + q];\n"
      "          }\n"
      "        }\n"
      "      out0[it * OW + xx] = sum;\n"
      "    }";
  return LoopKernel(name, bias ? 3 : 2, 1, y[0] * y[1] * y[2], d.str(), body);
}

namespace {

// The loops of a direct conv's output element over its window (input channel ic of the group,
// kernel row r and column s; iy and ix the input's row and column, inside the image), running
// `statement` at each tap. C, H, W, CG, KH, KW, SH, SW, DH, DW, PT, PL are the kernel's macros.
std::string WindowLoop(const std::string& statement) {
  return "      for (long ic = 0; ic < CG; ++ic)\n"
         "        for (long r = 0; r < KH; ++r) {\n"
         "          const long iy = oy * SH - PT + r * DH;\n"
         "          if (iy < 0 || iy >= H) continue;\n"
         "          for (long s = 0; s < KW; ++s) {\n"
         "            const long ix = ox * SW - PL + s * DW;\n"
         "            if (ix < 0 || ix >= W) continue;\n"
         "            " +
         statement + "\n          }\n        }\n";
}

}  // namespace

Expected<GeneratedKernel> DirectConv(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& wt = g.values[n.inputs[1]].shape;
  const auto& y = g.values[n.outputs[0]].shape;
  const ops::Window w = ops::WindowOf(n, y);
  const int64_t group = n.Int("group", 1);
  // A Conv may come without its bias (a FusedConv always has one); a FusedConv may add a residual.
  const bool bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  const bool residual = n.inputs.size() > 3 && n.inputs[3] >= 0;
  if (residual && !bias) {
    return Status(ErrorCode::kInvalidArgument,
                  n.op + " node '" + n.name + "': a residual needs a bias input");
  }
  // A conv of the layout plan (layout_plan.h; a task its template refuses): blocked residual and
  // output (lanes past K written as zeros), blocked data and a packed weight with layout 1. A
  // depthwise one's packed weight is [C/CB, 1, R, S, CB]: the index below with CP = 1.
  const int64_t layout = n.Int("layout", 0);
  const int64_t cb = n.Int("block", 1);
  const int64_t c = n.Int("channels", x[1]), k = n.Int("filters", wt[0]);
  const bool depthwise = group > 1 && group == c && k == c && wt[1] == 1;
  const int64_t cg = layout && !depthwise ? c : wt[1];
  if (layout != 0 && group != 1 && !depthwise) {
    return Status(
        ErrorCode::kInvalidArgument,
        n.op + " node '" + n.name + "': a blocked conv must have group 1 or be depthwise");
  }
  const std::string act = n.String("activation", "none");
  std::ostringstream d;
  d << "#define C " << c << "L\n#define H " << x[2] << "L\n#define W " << x[3] << "L\n#define K "
    << k << "L\n#define CG " << cg << "L\n#define KG " << k / group << "L\n#define OH " << w.oh
    << "L\n#define OW " << w.ow << "L\n#define KH " << w.kh << "L\n#define KW " << w.kw
    << "L\n#define SH " << w.sh << "L\n#define SW " << w.sw << "L\n#define DH " << w.dh
    << "L\n#define DW " << w.dw << "L\n#define PT " << w.pt << "L\n#define PL " << w.pl << "L\n"
    << "#define CB " << cb << "L\n#define CP " << (layout ? wt[1] : c) << "L\n#define KP "
    << (layout ? y[1] * cb : k) << "L\n#define XB " << (layout == 1 ? x[1] : 0) << "L\n"
    << "#define BIAS " << (bias ? "in2[oc]" : "0.0f") << "\n";
  // Element offsets of data (b, c, y, x), weight (k, c, r, s) and output (b, k, y, x).
  d << (layout == 1 ? "#define XI(b, c, y, x) ((((b) * XB + (c) / CB) * H + (y)) * W + (x)) "
                      "* CB + (c) % CB\n"
                    : "#define XI(b, c, y, x) (((b) * C + (c)) * H + (y)) * W + (x)\n")
    << (layout == 1 ? "#define WI(k, c, r, s) ((((k) / CB * CP + (c)) * KH + (r)) * KW + (s)) * CB "
                      "+ (k) % CB\n"
                    : "#define WI(k, c, r, s) (((k) * CG + (c)) * KH + (r)) * KW + (s)\n")
    << (layout ? "#define YI(b, k, y, x) ((((b) * (KP / CB) + (k) / CB) * OH + (y)) * OW + (x)) * "
                 "CB + (k) % CB\n"
               : "#define YI(b, k, y, x) (((b) * K + (k)) * OH + (y)) * OW + (x)\n");
  std::string body =
      "    const long oy = it % OH, oc = it / OH % KP, b = it / (OH * KP), grp = oc / KG;\n"
      "    if (oc >= K) {\n"
      "      for (long ox = 0; ox < OW; ++ox) out0[YI(b, oc, oy, ox)] = 0.0f;\n"
      "      continue;\n    }\n"
      "    for (long ox = 0; ox < OW; ++ox) {\n"
      "      float sum = BIAS;\n" +
      WindowLoop("sum += in0[XI(b, grp * CG + ic, iy, ix)] * in1[WI(oc, ic, r, s)];") +
      "      const long o = YI(b, oc, oy, ox);\n";
  if (residual) body += "      sum += in3[o];\n";
  if (act == "relu" || act == "relu6") body += "      if (sum < 0) sum = 0;\n";
  if (act == "relu6") body += "      if (sum > 6) sum = 6;\n";
  body += std::string("      out0[o] = sum;\n    }");
  return LoopKernel(name, 2 + bias + residual, 1, x[0] * (layout ? y[1] * cb : k) * w.oh, d.str(),
                    body);
}

// Einsum: each output element the sum, over the summed dimensions, of the inputs' products
// (ops::PlanEinsum's strides), accumulated in the element type.
Expected<GeneratedKernel> Einsum(const Graph& g, const Node& n, const std::string& name) {
  ops::EinsumPlan p;
  CT_RETURN_IF_ERROR(ops::PlanEinsum(g, n, &p));
  const size_t k = n.inputs.size();
  const char* t = CType(g.values[n.outputs[0]].dtype);
  // C has no empty arrays: each table ends with one unused entry.
  auto table = [](std::vector<int64_t> v, int64_t pad) {
    v.push_back(pad);
    return CArray(v);
  };
  std::ostringstream d;
  d << "#define NOUT " << p.out_dims.size() << "\n#define NSUM " << p.sum_dims.size()
    << "\n#define SUMS " << NumElements(p.sum_dims) << "L\n#define NIN " << k << "\n"
    << "static const long kOutDims[] = " << table(p.out_dims, 1) << ";\n"
    << "static const long kSumDims[] = " << table(p.sum_dims, 1) << ";\n";
  std::vector<int64_t> out_s, sum_s;
  for (size_t i = 0; i < k; ++i) {
    out_s.insert(out_s.end(), p.out_strides[i].begin(), p.out_strides[i].end());
    sum_s.insert(sum_s.end(), p.sum_strides[i].begin(), p.sum_strides[i].end());
  }
  d << "static const long kOutS[] = " << table(out_s, 0) << ";\n"
    << "static const long kSumS[] = " << table(sum_s, 0) << ";\n";
  std::string ins = "    const " + std::string(t) + "* in[NIN] = {";
  for (size_t i = 0; i < k; ++i) ins += (i ? ", in" : "in") + std::to_string(i);
  const std::string body =
      ins +
      "};\n"
      "    long base[NIN], off[NIN], r = it;\n"
      "    for (int j = 0; j < NIN; ++j) base[j] = 0;\n"
      "    for (int d = NOUT - 1; d >= 0; --d) {\n"
      "      const long i = r % kOutDims[d];\n"
      "      r /= kOutDims[d];\n"
      "      for (int j = 0; j < NIN; ++j) base[j] += i * kOutS[j * NOUT + d];\n"
      "    }\n    " +
      t +
      " acc = 0;\n"
      "    for (long s = 0; s < SUMS; ++s) {\n"
      "      long q = s;\n"
      "      for (int j = 0; j < NIN; ++j) off[j] = base[j];\n"
      "      for (int d = NSUM - 1; d >= 0; --d) {\n"
      "        const long i = q % kSumDims[d];\n"
      "        q /= kSumDims[d];\n"
      "        for (int j = 0; j < NIN; ++j) off[j] += i * kSumS[j * NSUM + d];\n"
      "      }\n    " +
      "  " + t +
      " prod = 1;\n"
      "      for (int j = 0; j < NIN; ++j) prod *= in[j][off[j]];\n"
      "      acc += prod;\n"
      "    }\n"
      "    out0[it] = acc;";
  return LoopKernel(name, static_cast<int>(k), 1, NumElements(p.out_dims), d.str(), body,
                    std::vector<std::string>(k + 1, t));
}

// ConvInteger and QLinearConv (ops/conv_integer.cc): items are (batch, output channel, output
// row); the products accumulate in int32, QLinearConv's requantized as the host evaluation does.
Expected<GeneratedKernel> QuantConv(const Graph& g, const Node& n, const std::string& name) {
  const ops::QuantConvInputs q = ops::QuantConvOf(n);
  const auto& x = g.values[q.x].shape;
  const auto& wt = g.values[q.w].shape;
  const auto& y = g.values[n.outputs[0]].shape;
  const ops::Window w = ops::WindowOf(n, y);
  const int64_t k = wt[0];
  // The kernel's arguments are the present inputs in order: each role's `inN`.
  std::vector<std::string> types;
  std::map<int, std::string> arg;  // value id -> "inN"
  for (int id : n.inputs) {
    if (id < 0) continue;
    arg[id] = "in" + std::to_string(types.size());
    types.push_back(CType(g.values[id].dtype));
  }
  const int inputs = static_cast<int>(types.size());
  types.push_back(CType(g.values[n.outputs[0]].dtype));
  auto scalar_or = [&](int id, const std::string& fallback, bool per_channel) {
    if (id < 0) return fallback;
    const bool many = per_channel && g.values[id].elements() > 1;
    return "(double)" + arg[id] + (many ? "[oc]" : "[0]");
  };
  std::ostringstream d;
  d << "#define C " << x[1] << "L\n#define H " << x[2] << "L\n#define W " << x[3] << "L\n#define K "
    << k << "L\n#define CG " << wt[1] << "L\n#define KG " << k / n.Int("group", 1)
    << "L\n#define OH " << w.oh << "L\n#define OW " << w.ow << "L\n#define KH " << w.kh
    << "L\n#define KW " << w.kw << "L\n#define SH " << w.sh << "L\n#define SW " << w.sw
    << "L\n#define DH " << w.dh << "L\n#define DW " << w.dw << "L\n#define PT " << w.pt
    << "L\n#define PL " << w.pl << "L\n";
  std::string body =
      "    const long oy = it % OH, oc = it / OH % K, b = it / (OH * K), grp = oc / KG;\n"
      "    const int xz = (int)" +
      scalar_or(q.x_zero, "0", false) + ", wz = (int)" + scalar_or(q.w_zero, "0", true) +
      ";\n"
      "    for (long ox = 0; ox < OW; ++ox) {\n"
      "      int acc = 0;\n" +
      WindowLoop("acc += ((int)" + arg[q.x] +
                 "[((b * C + grp * CG + ic) * H + iy) * W + ix] - xz) * ((int)" + arg[q.w] +
                 "[((oc * CG + ic) * KH + r) * KW + s] - wz);") +
      "      const long o = ((b * K + oc) * OH + oy) * OW + ox;\n";
  if (n.op == "ConvInteger") {
    body += "      out0[o] = acc;\n    }";
  } else {
    const bool s8 = g.values[n.outputs[0]].dtype == DType::kInt8;
    body += "      const float mult = (float)" + scalar_or(q.x_scale, "1", false) + " * (float)" +
            scalar_or(q.w_scale, "1", true) + " / (float)" + scalar_or(q.y_scale, "1", false) +
            ";\n"
            "      double v = (double)(acc + (int)" +
            scalar_or(q.bias, "0", true) + ") * (double)mult + " + scalar_or(q.y_zero, "0", false) +
            ";\n      v = v < " +
            (s8 ? "-128.0 ? -128.0 : v > 127.0 ? 127.0" : "0.0 ? 0.0 : v > 255.0 ? 255.0") +
            " : v;\n"
            "      out0[o] = (" +
            types.back() + ")__builtin_nearbyint(v);\n    }";
  }
  return LoopKernel(name, inputs, 1, x[0] * k * w.oh, d.str(), body, types);
}

// Conv2dInt8 (layout_plan.h) where no template kernel stands in: the same sums, one output row of
// one channel an item. The compiler makes these nodes only where the conv2d_int8 template takes
// them, so this runs when a package is built without the tuner's kernel (tests, the interpreter).
Expected<GeneratedKernel> Conv2dInt8(const Graph& g, const Node& n, const std::string& name) {
  const std::vector<int64_t> s = n.Ints("shape");
  const auto& y = g.values[n.outputs[0]].shape;
  const auto& wt = g.values[n.inputs[1]].shape;  // [KO, R, S, C4, L, 4]
  std::ostringstream d;
  d << "#define C " << s[1] << "L\n#define H " << s[2] << "L\n#define W " << s[3] << "L\n#define K "
    << s[4] << "L\n#define R " << s[5] << "L\n#define S " << s[6] << "L\n#define STRIDE " << s[7]
    << "L\n#define PAD " << s[8] << "L\n#define IN_ZERO " << s[9] << "\n#define OUT_ZERO " << s[10]
    << "\n#define LOW " << (s[11] != 0 ? s[10] : 0) << "\n#define OH " << y[1] << "L\n#define OW "
    << y[2] << "L\n#define C4 " << wt[3] << "L\n#define L " << wt[4] << "L\n";
  const std::string body =
      "    const long oy = it % OH, oc = it / OH % K, b = it / (OH * K);\n"
      "    for (long ox = 0; ox < OW; ++ox) {\n"
      "      int acc = in2[oc];\n"
      "      for (long r = 0; r < R; ++r)\n"
      "        for (long s = 0; s < S; ++s) {\n"
      "          const long iy = oy * STRIDE - PAD + r, ix = ox * STRIDE - PAD + s;\n"
      "          const int inside = iy >= 0 && iy < H && ix >= 0 && ix < W;\n"
      "          for (long c = 0; c < C; ++c) {\n"
      "            const int xv = inside ? (int)in0[((b * H + iy) * W + ix) * C + c] : IN_ZERO;\n"
      "            acc += xv * (int)in1[((((oc / L) * R + r) * S + s) * C4 + c / 4) * L * 4 +\n"
      "                                 (oc % L) * 4 + c % 4];\n"
      "          }\n"
      "        }\n"
      "      float v = __builtin_rintf((float)acc * in3[oc]) + OUT_ZERO;\n"
      "      v = v < LOW ? LOW : v > 255 ? 255 : v;\n"
      "      out0[((b * OH + oy) * OW + ox) * K + oc] = (unsigned char)v;\n"
      "    }";
  return LoopKernel(name, 4, 1, s[0] * s[4] * y[1], d.str(), body,
                    {"unsigned char", "signed char", "int", "float", "unsigned char"});
}

}  // namespace crosstune::model::kernels
