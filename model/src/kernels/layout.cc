// Generated kernels that move data between layouts: Concat (items: outer rows), Transpose
// (items: output rows, each input offset from the row's index through permuted strides), Slice
// (the same through the slice's strides), Expand, Tile and Pad (items: output rows, each element's
// source found per dimension), Split (items: outer rows) and LayoutTransform (layout_plan.h;
// items: rows of the blocked side).
#include "../ops/op_defs.h"
#include "crosstune/model/layout_plan.h"
#include "kernels/kernels_impl.h"

namespace crosstune::model::kernels {

Expected<GeneratedKernel> Concat(const Graph& g, const Node& n, const std::string& name) {
  const auto& out = g.values[n.outputs[0]].shape;
  const int64_t axis = n.Int("axis", 0);
  const int64_t es = DTypeBytes(g.values[n.outputs[0]].dtype);
  int64_t outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  const int inputs = static_cast<int>(n.inputs.size());
  std::string body =
      "    char* d = (char*)out0 + it * " + std::to_string(out[axis] * inner) + "L;\n";
  for (int i = 0; i < inputs; ++i) {
    const int64_t chunk = g.values[n.inputs[i]].shape[axis] * inner;
    body += "    { const char* s = (const char*)in" + std::to_string(i) + " + it * " +
            std::to_string(chunk) + "L;\n      for (long j = 0; j < " + std::to_string(chunk) +
            "L; ++j) d[j] = s[j];\n      d += " + std::to_string(chunk) + "L; }\n";
  }
  return LoopKernel(name, inputs, 1, outer, "", body);
}

Expected<GeneratedKernel> Transpose(const Graph& g, const Node& n, const std::string& name) {
  const Value& x = g.values[n.inputs[0]];
  const auto& out = g.values[n.outputs[0]].shape;
  const auto perm = n.Ints("perm");
  const size_t rank = perm.size();
  std::vector<int64_t> in_stride(rank, 1), stride(rank);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * x.shape[d];
  for (size_t d = 0; d < rank; ++d) stride[d] = in_stride[perm[d]];
  const int64_t len = rank ? out.back() : 1;
  const int64_t rows = len ? NumElements(out) / len : 1;
  const std::string es = std::to_string(DTypeBytes(x.dtype));
  std::string defines = "#define RANK " + std::to_string(rank) + "\n#define ES " + es + "\n" +
                        "static const long kOut[] = " + CArray(out) + ";\n" +
                        "static const long kS[] = " + CArray(stride) + ";\n";
  std::string body =
      "    long rem = it, o = 0;\n"
      "    for (int d = RANK - 2; d >= 0; --d) { o += rem % kOut[d] * kS[d]; rem /= kOut[d]; }\n"
      "    const char* s = (const char*)in0; char* dst = (char*)out0 + it * " +
      std::to_string(len) +
      "L * ES;\n"
      "    for (long j = 0; j < " +
      std::to_string(len) +
      "L; ++j)\n"
      "      for (int b = 0; b < ES; ++b) dst[j * ES + b] = s[(o + j * kS[RANK - 1]) * ES + b];";
  return LoopKernel(name, 1, 1, rows ? rows : 1, defines, body);
}

Expected<GeneratedKernel> LayoutTransform(const Graph& g, const Node& n, const std::string& name) {
  const bool to_blocked = n.String("to", "") == kToBlocked;
  // The blocked side: [N, BLOCKS, H, W, CB].
  const auto& b = g.values[to_blocked ? n.outputs[0] : n.inputs[0]].shape;
  const int64_t c = n.Int("channels", 0);
  if (b.size() != 5 || c < 1) {
    return Status(ErrorCode::kInvalidArgument,
                  n.op + " node '" + n.name + "': the blocked side is " + ShapeText(b));
  }
  std::ostringstream d;
  d << "#define BLOCKS " << b[1] << "L\n#define CB " << b[4] << "L\n#define C " << c
    << "L\n#define H " << b[2] << "L\n#define W " << b[3] << "L\n#define HW (H * W)\n";
  // Item: one row (W pixels) of one block of one image.
  std::string body =
      "    const long y = it % H, blk = it / H % BLOCKS, img = it / H / BLOCKS;\n"
      "    const long lanes = C - blk * CB < CB ? C - blk * CB : CB;\n";
  if (to_blocked) {
    body +=
        "    float* dst = out0 + (img * BLOCKS + blk) * HW * CB + y * W * CB;\n"
        "    const float* src = in0 + (img * C + blk * CB) * HW + y * W;\n"
        "    for (long x = 0; x < W; ++x)\n"
        "      for (long l = 0; l < CB; ++l) dst[x * CB + l] = l < lanes ? src[l * HW + x] : 0.0f;";
  } else {
    body +=
        "    const float* src = in0 + (img * BLOCKS + blk) * HW * CB + y * W * CB;\n"
        "    float* dst = out0 + (img * C + blk * CB) * HW + y * W;\n"
        "    for (long l = 0; l < lanes; ++l)\n"
        "      for (long x = 0; x < W; ++x) dst[l * HW + x] = src[x * CB + l];";
  }
  return LoopKernel(name, 1, 1, b[0] * b[1] * b[2], d.str(), body);
}

// Gather: items are (outer, index) pairs, each a copy of one inner slice; an index out of range
// fails the run, naming it.
Expected<GeneratedKernel> Gather(const Graph& g, const Node& n, const std::string& name) {
  const Value& data = g.values[n.inputs[0]];
  const Value& idx = g.values[n.inputs[1]];
  const int64_t axis = n.Int("axis", 0);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < data.shape.size(); ++d) {
    inner *= data.shape[d];
  }
  const int64_t nidx = NumElements(idx.shape);
  const std::string defines = "#define DIM " + std::to_string(data.shape[axis]) +
                              "L\n#define NIDX " + std::to_string(nidx) + "L\n#define ROW " +
                              std::to_string(inner * DTypeBytes(data.dtype)) + "L\n";
  const std::string body =
      "    long i = (long)in1[it % NIDX];\n"
      "    if (i < 0) i += DIM;\n"
      "    if (i < 0 || i >= DIM) { g_error = \"" +
      name +
      ": an index is out of range\"; return 1; }\n"
      "    const char* src = (const char*)in0 + ((it / NIDX) * DIM + i) * ROW;\n"
      "    char* dst = (char*)out0 + it * ROW;\n"
      "    for (long b = 0; b < ROW; ++b) dst[b] = src[b];";
  return LoopKernel(name, 2, 1, outer * nidx, defines, body, {"char", CType(idx.dtype), "char"});
}

// Slice: rows of the output's last dimension, each input element through the slice's strides.
Expected<GeneratedKernel> Slice(const Graph& g, const Node& n, const std::string& name) {
  const Value& x = g.values[n.inputs[0]];
  const auto& out = g.values[n.outputs[0]].shape;
  const ops::SliceStrides s = ops::SliceOf(n, x.shape);
  const size_t rank = out.size();
  const int64_t len = rank ? out.back() : 1;
  const int64_t rows = len ? NumElements(out) / len : 0;
  const std::string es = std::to_string(DTypeBytes(x.dtype));
  std::string defines = "#define RANK " + std::to_string(rank) + "\n#define ES " + es + "\n" +
                        "static const long kOut[] = " + CArray(out) + ";\n" +
                        "static const long kS[] = " + CArray(s.strides) + ";\n";
  std::string body =
      "    long rem = it, o = " + std::to_string(s.offset) +
      "L;\n"
      "    for (int d = RANK - 2; d >= 0; --d) { o += rem % kOut[d] * kS[d]; rem /= kOut[d]; }\n"
      "    const char* src = (const char*)in0; char* dst = (char*)out0 + it * " +
      std::to_string(len) +
      "L * ES;\n"
      "    for (long j = 0; j < " +
      std::to_string(len) + "L; ++j)\n" +
      "      for (int b = 0; b < ES; ++b) dst[j * ES + b] = src[(o + j * " +
      (rank ? "kS[RANK - 1]" : std::string("0")) + ") * ES + b];";
  return LoopKernel(name, 1, 1, rows, defines, body);
}

// Expand, Tile and Pad: each output element copies the input element whose index, per
// dimension, SRC(o, d) gives from the output's index o (-1: Pad's constant).
Expected<GeneratedKernel> Remap(const Graph& g, const Node& n, const std::string& name) {
  const Value& x = g.values[n.inputs[0]];
  const auto& out = g.values[n.outputs[0]].shape;
  const size_t rank = out.size();
  std::vector<int64_t> in(rank - x.shape.size(), 1);  // Expand: leading dimensions of 1
  in.insert(in.end(), x.shape.begin(), x.shape.end());
  const int64_t es = DTypeBytes(x.dtype);
  std::string map;
  std::vector<int64_t> begin(rank, 0);
  std::string helpers = "static const unsigned char kFill[] = {0};\n";
  if (n.op == "Expand") {
    map = "(kIn[d] == 1 ? 0 : o)";
  } else if (n.op == "Tile") {
    map = "(o % kIn[d])";
  } else {
    const auto pads = n.Ints("pads");
    for (size_t d = 0; d < rank; ++d) begin[d] = pads[d];
    const std::string mode = n.String("mode", "constant");
    map = "pad_src(o - kBegin[d], kIn[d])";
    std::string f;
    if (mode == "constant") {
      f = "return -1;";
    } else if (mode == "edge") {
      f = "return i < 0 ? 0 : dim - 1;";
    } else if (mode == "wrap") {
      f = "return (i % dim + dim) % dim;";
    } else {
      f = "return dim == 1 ? 0 : i < 0 ? -i : 2 * (dim - 1) - i;";
    }
    std::string bytes;  // the constant in the data's own type
    for (uint8_t c : ops::ScalarBytes(x.dtype, n.Float("value", 0.0))) {
      bytes += (bytes.empty() ? "" : ", ") + std::to_string(c);
    }
    helpers =
        "static const unsigned char kFill[] = {" + bytes +
        "};\nstatic long pad_src(long i, long dim) {\n  if (i >= 0 && i < dim) return i;\n  " + f +
        "\n}\n";
  }
  const int64_t len = rank ? out.back() : 1;
  const int64_t rows = len ? NumElements(out) / len : 0;
  std::string defines =
      "#define RANK " + std::to_string(rank) + "\n#define ES " + std::to_string(es) +
      "\n#define LEN " + std::to_string(len) + "L\n" +
      "static const long kOut[] = " + CArray(rank ? out : std::vector<int64_t>{1}) +
      ";\nstatic const long kIn[] = " + CArray(rank ? in : std::vector<int64_t>{1}) +
      ";\nstatic const long kBegin[] = " + CArray(rank ? begin : std::vector<int64_t>{0}) + ";\n" +
      helpers;
  std::string body =
      "    for (long j = 0; j < LEN; ++j) {\n"
      "      long rem = it * LEN + j, src = 0, stride = 1; int hole = 0;\n"
      "      for (int d = RANK - 1; d >= 0; --d) {\n"
      "        const long o = rem % kOut[d]; rem /= kOut[d];\n"
      "        const long s = " +
      map +
      ";\n"
      "        if (s < 0) { hole = 1; break; }\n"
      "        src += s * stride; stride *= kIn[d];\n"
      "      }\n"
      "      const char* from = hole ? (const char*)kFill : (const char*)in0 + src * ES;\n"
      "      char* dst = (char*)out0 + (it * LEN + j) * ES;\n"
      "      for (int b = 0; b < ES; ++b) dst[b] = from[b];\n"
      "    }";
  return LoopKernel(name, 1, 1, rows, defines, body);
}

// Split: items are outer rows; each copies its part of the row into each output.
Expected<GeneratedKernel> Split(const Graph& g, const Node& n, const std::string& name) {
  const Value& x = g.values[n.inputs[0]];
  const int64_t axis = n.Int("axis", 0);
  const auto split = n.Ints("split");
  int64_t outer = 1, inner = DTypeBytes(x.dtype);
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  std::string body = "    const char* s = (const char*)in0 + it * " +
                     std::to_string(x.shape[axis] * inner) + "L;\n";
  for (size_t i = 0; i < split.size(); ++i) {
    const int64_t chunk = split[i] * inner;
    body += "    { char* d = (char*)out" + std::to_string(i) + " + it * " + std::to_string(chunk) +
            "L;\n      for (long j = 0; j < " + std::to_string(chunk) +
            "L; ++j) d[j] = s[j];\n      s += " + std::to_string(chunk) + "L; }\n";
  }
  return LoopKernel(name, 1, static_cast<int>(split.size()), outer, "", body);
}

// Resize and Upsample (ops/resize.cc): items are output rows; each element reads its source
// index per axis from the tables Infer made (linear: the 2^rank corners of its cell, weighted).
Expected<GeneratedKernel> Resize(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& out = g.values[n.outputs[0]].shape;
  const size_t rank = out.size();
  const bool linear = n.String("mode", "nearest") == "linear";
  std::vector<int64_t> base(rank, 0), stride(rank, 1);
  for (size_t d = 1; d < rank; ++d) base[d] = base[d - 1] + out[d - 1];
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * x[d];
  std::ostringstream d;
  d << "#define RANK " << rank << "\n#define LEN " << out.back() << "L\n"
    << "static const long kOut[] = " << CArray(out) << ";\n"
    << "static const long kBase[] = " << CArray(base) << ";\n"
    << "static const long kStride[] = " << CArray(stride) << ";\n"
    << "static const long kSrc0[] = " << CArray(n.Ints("src0")) << ";\n";
  std::string body =
      "    long idx[RANK];\n"
      "    for (long j = 0; j < LEN; ++j) {\n"
      "      long rem = it * LEN + j;\n"
      "      for (int a = RANK - 1; a >= 0; --a) { idx[a] = rem % kOut[a]; rem /= kOut[a]; }\n";
  if (linear) {
    d << "static const long kSrc1[] = " << CArray(n.Ints("src1")) << ";\n"
      << "static const float kW[] = {";
    const auto& w = n.attrs.at("weight").floats;
    for (size_t i = 0; i < w.size(); ++i) d << (i ? ", " : "") << CFloat(w[i]);
    d << "};\n";
    body +=
        "      float sum = 0.0f;\n"
        "      for (int corner = 0; corner < (1 << RANK); ++corner) {\n"
        "        float w = 1.0f; long off = 0;\n"
        "        for (int a = 0; a < RANK; ++a) {\n"
        "          const long t = kBase[a] + idx[a];\n"
        "          const int second = (corner >> a) & 1;\n"
        "          w *= second ? kW[t] : 1.0f - kW[t];\n"
        "          off += (second ? kSrc1[t] : kSrc0[t]) * kStride[a];\n"
        "        }\n"
        "        if (w != 0.0f) sum += w * in0[off];\n"
        "      }\n"
        "      out0[it * LEN + j] = sum;\n    }";
  } else {
    body +=
        "      long off = 0;\n"
        "      for (int a = 0; a < RANK; ++a) off += kSrc0[kBase[a] + idx[a]] * kStride[a];\n"
        "      out0[it * LEN + j] = in0[off];\n    }";
  }
  return LoopKernel(name, 1, 1, NumElements(out) / out.back(), d.str(), body);
}

}  // namespace crosstune::model::kernels
