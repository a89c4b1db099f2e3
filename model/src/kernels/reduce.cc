// Generated kernels of the reductions (ReduceSum ... ReduceSumSquare; items are output
// elements, each a loop over its reduced elements), InstanceNormalization (items are (n, c)
// planes) and LayerNormalization (items are rows of
// the normalized trailing axes; its Mean and InvStdDev, when the node has them, one per row).
#include "../ops/op_defs.h"
#include "kernels/kernels_impl.h"

namespace crosstune::model::kernels {
namespace {

// C of the digit loop that turns index `i` of an index space (dims, strides) into an offset.
std::string OffsetLoop(const std::string& dims, const std::string& strides, const std::string& n,
                       const std::string& index, const std::string& offset) {
  return "      { long rem = " + index + ";\n        for (int d = " + n + " - 1; d >= 0; --d) { " +
         offset + " += rem % " + dims + "[d] * " + strides + "[d]; rem /= " + dims + "[d]; } }\n";
}

}  // namespace

Expected<GeneratedKernel> Reduce(const Graph& g, const Node& n, const std::string& name) {
  const ops::ReduceShape r = ops::SplitReduce(g.values[n.inputs[0]].shape, n.Ints("axes", {}));
  int64_t kept = 1, red = 1;
  for (int64_t d : r.kept_dims) kept *= d;
  for (int64_t d : r.reduced_dims) red *= d;
  const std::string& op = n.op;
  std::ostringstream d;
  d << "#define NKEPT " << r.kept_dims.size() << "\n#define NRED " << r.reduced_dims.size()
    << "\n#define RED " << red << "L\n"
    << "static const long kKept[] = " << CArray(r.kept_dims) << ";\n"
    << "static const long kKeptS[] = " << CArray(r.kept_strides) << ";\n"
    << "static const long kRed[] = " << CArray(r.reduced_dims) << ";\n"
    << "static const long kRedS[] = " << CArray(r.reduced_strides) << ";\n";
  std::string init = "0.0f", step = "acc += v;", final = "acc";
  if (op == "ReduceMax") {
    init = "-__builtin_inff()";
    step = "if (v > acc) acc = v;";
  } else if (op == "ReduceMin") {
    init = "__builtin_inff()";
    step = "if (v < acc) acc = v;";
  } else if (op == "ReduceProd") {
    init = "1.0f";
    step = "acc *= v;";
  } else if (op == "ReduceL1") {
    step = "acc += __builtin_fabsf(v);";
  } else if (op == "ReduceL2") {
    step = "acc += v * v;";
    final = "__builtin_sqrtf(acc)";
  } else if (op == "ReduceSumSquare") {
    step = "acc += v * v;";
  } else if (op == "ReduceMean") {
    final = "acc / (float)RED";
  } else if (op == "ReduceLogSum") {
    final = "__builtin_logf(acc)";
  } else if (op == "ReduceLogSumExp") {
    step = "acc += __builtin_expf(v - m);";
    final = "RED ? m + __builtin_logf(acc) : -__builtin_inff()";
  }
  std::string body = "    long base = 0;\n" + OffsetLoop("kKept", "kKeptS", "NKEPT", "it", "base") +
                     "    float m = -__builtin_inff();\n";
  if (op == "ReduceLogSumExp") {
    body += "    for (long i = 0; i < RED; ++i) {\n      long off = base;\n" +
            OffsetLoop("kRed", "kRedS", "NRED", "i", "off") +
            "      if (in0[off] > m) m = in0[off];\n    }\n";
  }
  body += "    float acc = " + init + ";\n    for (long i = 0; i < RED; ++i) {\n" +
          "      long off = base;\n" + OffsetLoop("kRed", "kRedS", "NRED", "i", "off") +
          "      const float v = in0[off];\n      " + step + "\n    }\n    (void)m;\n" +
          "    out0[it] = " + final + ";";
  return LoopKernel(name, 1, 1, kept, d.str(), body);
}

// A row of LEN values at x = in0 + it * LEN (and y = out0 + it * LEN): its mean and variance.
const char* const kRowMeanAndVariance =
    "    const float* x = in0 + it * LEN;\n"
    "    float* y = out0 + it * LEN;\n"
    "    float mean = 0, var = 0;\n"
    "    for (long j = 0; j < LEN; ++j) mean += x[j];\n"
    "    mean /= (float)LEN;\n"
    "    for (long j = 0; j < LEN; ++j) var += (x[j] - mean) * (x[j] - mean);\n"
    "    var /= (float)LEN;\n";

// InstanceNormalization: items are (n, c) planes.
Expected<GeneratedKernel> InstanceNorm(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const int64_t c = x[1], len = NumElements(x) / x[0] / c;
  std::ostringstream d;
  d << "#define LEN " << len << "L\n#define C " << c << "L\n#define EPS "
    << CFloat(n.Float("epsilon", 1e-5)) << "\n";
  const std::string body =
      std::string(kRowMeanAndVariance) +
      "    const float a = in1[it % C] / __builtin_sqrtf(var + EPS), b = in2[it % C];\n"
      "    for (long j = 0; j < LEN; ++j) y[j] = (x[j] - mean) * a + b;";
  return LoopKernel(name, 3, 1, x[0] * c, d.str(), body);
}

Expected<GeneratedKernel> LayerNorm(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const int64_t axis = n.Int("axis", 0);
  const std::vector<int64_t> norm(x.begin() + axis, x.end());
  int64_t len = 1;
  for (int64_t v : norm) len *= v;
  const int64_t rows = len ? NumElements(x) / len : 0;
  const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  const int stats = static_cast<int>(n.outputs.size()) - 1;  // Mean, InvStdDev
  std::ostringstream d;
  d << "#define LEN " << len << "L\n#define NNORM " << norm.size() << "\n#define EPS "
    << CFloat(n.Float("epsilon", 1e-5)) << "\n"
    << "static const long kNorm[] = " << CArray(norm) << ";\n"
    << "static const long kScaleS[] = "
    << CArray(BroadcastStrides(g.values[n.inputs[1]].shape, norm)) << ";\n";
  if (has_bias) {
    d << "static const long kBiasS[] = "
      << CArray(BroadcastStrides(g.values[n.inputs[2]].shape, norm)) << ";\n";
  }
  // RMSNormalization: the mean of the squares, nothing subtracted.
  const bool rms = n.op == "RMSNormalization";
  const std::string stats_code = rms ? "    const float* x = in0 + it * LEN;\n"
                                       "    float* y = out0 + it * LEN;\n"
                                       "    const float mean = 0;\n"
                                       "    float var = 0;\n"
                                       "    for (long j = 0; j < LEN; ++j) var += x[j] * x[j];\n"
                                       "    var /= (float)LEN;\n"
                                     : kRowMeanAndVariance;
  std::string body = stats_code + "    const float inv = 1.0f / __builtin_sqrtf(var + EPS);\n" +
                     std::string(stats > 0 ? "    out1[it] = mean;\n" : "") +
                     std::string(stats > 1 ? "    out2[it] = inv;\n" : "") +
                     "    for (long j = 0; j < LEN; ++j) {\n"
                     "      long s = 0, b = 0;\n" +
                     OffsetLoop("kNorm", "kScaleS", "NNORM", "j", "s") +
                     (has_bias ? OffsetLoop("kNorm", "kBiasS", "NNORM", "j", "b") : std::string()) +
                     "      y[j] = (x[j] - mean) * inv * in1[s]" + (has_bias ? " + in2[b]" : "") +
                     ";\n      (void)b;\n    }";
  return LoopKernel(name, has_bias ? 3 : 2, 1 + stats, rows, d.str(), body);
}

}  // namespace crosstune::model::kernels
