// Generated pooling kernels: MaxPool, AveragePool (count_include_pad; ceil_mode through the
// explicit window the import resolved) and GlobalAveragePool. Items are output rows of a plane.
// MaxPool and GlobalAveragePool of blocked data (layout_plan.h: attribute block) work on a
// pixel's CB lanes at once, contiguous in memory: the lane loops vectorize.
#include "../ops/op_defs.h"
#include "kernels/kernels_impl.h"

namespace crosstune::model::kernels {
namespace {

// [N, C/cb, H, W, cb] in, [N, C/cb, OH, OW, cb] out; items are output rows of a block. Lanes past
// C are written as zeros (a window wholly in the padding would leave -inf there).
Expected<GeneratedKernel> BlockedMaxPool(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& y = g.values[n.outputs[0]].shape;
  const ops::Window w = ops::WindowOf(n, y);
  const int64_t c = n.Int("channels", 0);
  std::ostringstream d;
  d << "#define BLOCKS " << x[1] << "L\n#define CB " << x[4] << "L\n#define C " << c
    << "L\n#define H " << x[2] << "L\n#define W " << x[3] << "L\n#define OH " << w.oh
    << "L\n#define OW " << w.ow << "L\n#define KH " << w.kh << "L\n#define KW " << w.kw
    << "L\n#define SH " << w.sh << "L\n#define SW " << w.sw << "L\n#define DH " << w.dh
    << "L\n#define DW " << w.dw << "L\n#define PT " << w.pt << "L\n#define PL " << w.pl << "L\n";
  const std::string body =
      "    const long plane = it / OH, oy = it % OH, blk = plane % BLOCKS;\n"
      "    const float* xp = in0 + plane * H * W * CB;\n"
      "    float* yp = out0 + (plane * OH + oy) * OW * CB;\n"
      "    const long lanes = C - blk * CB < CB ? C - blk * CB : CB;\n"
      "    for (long ox = 0; ox < OW; ++ox) {\n"
      "      float m[CB];\n"
      "      for (long l = 0; l < CB; ++l) m[l] = -__builtin_inff();\n"
      "      for (long r = 0; r < KH; ++r) {\n"
      "        const long iy = oy * SH - PT + r * DH;\n"
      "        if (iy < 0 || iy >= H) continue;\n"
      "        for (long s = 0; s < KW; ++s) {\n"
      "          const long ix = ox * SW - PL + s * DW;\n"
      "          if (ix < 0 || ix >= W) continue;\n"
      "          const float* px = xp + (iy * W + ix) * CB;\n"
      "          for (long l = 0; l < CB; ++l) m[l] = px[l] > m[l] ? px[l] : m[l];\n"
      "        }\n      }\n"
      "      for (long l = 0; l < CB; ++l) yp[ox * CB + l] = l < lanes ? m[l] : 0.0f;\n"
      "    }";
  return LoopKernel(name, 1, 1, y[0] * y[1] * w.oh, d.str(), body);
}

// [N, C/cb, H, W, cb] in, NCHW [N, C, 1, 1] out; items are blocks.
Expected<GeneratedKernel> BlockedGlobalAvgPool(const Graph& g, const Node& n,
                                               const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const int64_t c = n.Int("channels", 0);
  std::ostringstream d;
  d << "#define BLOCKS " << x[1] << "L\n#define CB " << x[4] << "L\n#define C " << c
    << "L\n#define HW " << x[2] * x[3] << "L\n";
  const std::string body =
      "    const long b = it / BLOCKS, blk = it % BLOCKS;\n"
      "    const float* xp = in0 + it * HW * CB;\n"
      "    float sum[CB];\n"
      "    for (long l = 0; l < CB; ++l) sum[l] = 0;\n"
      "    for (long p = 0; p < HW; ++p)\n"
      "      for (long l = 0; l < CB; ++l) sum[l] += xp[p * CB + l];\n"
      "    for (long l = 0; l < CB && blk * CB + l < C; ++l)\n"
      "      out0[b * C + blk * CB + l] = sum[l] / (float)HW;";
  return LoopKernel(name, 1, 1, x[0] * x[1], d.str(), body);
}

}  // namespace

Expected<GeneratedKernel> Pool(const Graph& g, const Node& n, const std::string& name) {
  if (n.Has("block")) {
    if (n.op != "MaxPool") {
      return Status(ErrorCode::kInvalidArgument,
                    n.op + " node '" + n.name + "': no kernel pools blocked data");
    }
    return BlockedMaxPool(g, n, name);
  }
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& y = g.values[n.outputs[0]].shape;
  const ops::Window w = ops::WindowOf(n, y);
  std::ostringstream d;
  d << "#define H " << x[2] << "L\n#define W " << x[3] << "L\n#define OH " << w.oh
    << "L\n#define OW " << w.ow << "L\n#define KH " << w.kh << "L\n#define KW " << w.kw
    << "L\n#define SH " << w.sh << "L\n#define SW " << w.sw << "L\n#define DH " << w.dh
    << "L\n#define DW " << w.dw << "L\n#define PT " << w.pt << "L\n#define PL " << w.pl
    << "L\n#define PB " << w.pb << "L\n#define PR " << w.pr << "L\n";
  std::string body =
      "    const long plane = it / OH, oy = it % OH;\n"
      "    const float* xp = in0 + plane * H * W;\n"
      "    float* yp = out0 + (plane * OH + oy) * OW;\n";
  if (n.op == "MaxPool") {
    // A window tap at a time over the whole output row: for tap (r, s) the row's outputs read
    // x[iy][ox * SW + off], a strided run with no bounds test (the range of ox inside the input
    // is worked out first), so the loop vectorizes. `v > m` keeps a NaN out, as one output at a
    // time did.
    body +=
        "    for (long ox = 0; ox < OW; ++ox) yp[ox] = -__builtin_inff();\n"
        "    for (long r = 0; r < KH; ++r) {\n"
        "      const long iy = oy * SH - PT + r * DH;\n"
        "      if (iy < 0 || iy >= H) continue;\n"
        "      const float* row = xp + iy * W;\n"
        "      for (long s = 0; s < KW; ++s) {\n"
        "        const long off = s * DW - PL;\n"
        "        const long lo = off >= 0 ? 0 : (SW - 1 - off) / SW;\n"
        "        long hi = off > W - 1 ? 0 : (W - 1 - off) / SW + 1;\n"
        "        if (hi > OW) hi = OW;\n"
        "        for (long ox = lo; ox < hi; ++ox) {\n"
        "          const float v = row[ox * SW + off];\n"
        "          yp[ox] = v > yp[ox] ? v : yp[ox];\n"
        "        }\n      }\n    }";
  } else {
    body += "    for (long ox = 0; ox < OW; ++ox) {\n";
    const bool include_pad = n.Int("count_include_pad", 0) != 0;
    body +=
        "      const long y0 = oy * SH - PT, x0 = ox * SW - PL;\n"
        "      const long ya = y0 < 0 ? 0 : y0, yb = y0 + KH < H ? y0 + KH : H;\n"
        "      const long xa = x0 < 0 ? 0 : x0, xb = x0 + KW < W ? x0 + KW : W;\n"
        "      float sum = 0;\n"
        "      for (long iy = ya; iy < yb; ++iy)\n"
        "        for (long ix = xa; ix < xb; ++ix) sum += xp[iy * W + ix];\n";
    body += include_pad ? "      const long ye = y0 + KH < H + PB ? y0 + KH : H + PB;\n"
                          "      const long xe = x0 + KW < W + PR ? x0 + KW : W + PR;\n"
                          "      const long ys = y0 > -PT ? y0 : -PT, xs = x0 > -PL ? x0 : -PL;\n"
                          "      const long count = (ye - ys) * (xe - xs);\n"
                        : "      const long count = (yb - ya) * (xb - xa);\n";
    body += "      yp[ox] = count > 0 ? sum / (float)count : 0.0f;\n    }";
  }
  return LoopKernel(name, 1, 1, x[0] * x[1] * w.oh, d.str(), body);
}

Expected<GeneratedKernel> GlobalAvgPool(const Graph& g, const Node& n, const std::string& name) {
  if (n.Has("block")) return BlockedGlobalAvgPool(g, n, name);
  const auto& x = g.values[n.inputs[0]].shape;
  const int64_t planes = x[0] * x[1], inner = NumElements(x) / planes;
  return LoopKernel(name, 1, 1, planes, "#define INNER " + std::to_string(inner) + "L\n",
                    "    float sum = 0;\n"
                    "    for (long j = 0; j < INNER; ++j) sum += in0[it * INNER + j];\n"
                    "    out0[it] = sum / (float)INNER;");
}

}  // namespace crosstune::model::kernels
