// Generated kernels that go element by element: copies (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout), casts, activations, broadcasting arithmetic and a standalone
// BatchNormalization.
#include <cstdio>
#include <map>
#include <regex>

#include "kernels/kernels_impl.h"
#include "narrow_types.h"

namespace crosstune::model::kernels {
namespace {

constexpr int64_t kChunk = 4096;  // elements an item covers

int64_t Chunks(int64_t n) { return n <= 0 ? 1 : (n + kChunk - 1) / kChunk; }

std::string ChunkRange(int64_t n) {
  return "    const long j0 = it * " + std::to_string(kChunk) + "L, j1 = j0 + " +
         std::to_string(kChunk) + "L < " + std::to_string(n) + "L ? j0 + " +
         std::to_string(kChunk) + "L : " + std::to_string(n) + "L;\n";
}

}  // namespace

Expected<GeneratedKernel> Copy(const Graph& g, const Node& n, const std::string& name) {
  const int64_t bytes = g.values[n.outputs[0]].bytes();
  return LoopKernel(name, 1, 1, Chunks(bytes), "",
                    ChunkRange(bytes) +
                        "    const char* s = (const char*)in0; char* d = (char*)out0;\n"
                        "    for (long j = j0; j < j1; ++j) d[j] = s[j];");
}

// IEEE half precision bits to float and back (round to nearest even), as graph.h's HalfToFloat
// and FloatToHalf compute them.
const char* const kHalfConversions =
    "static inline float half_to_float(unsigned short h) {\n"
    "  const unsigned sign = (unsigned)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;\n"
    "  unsigned bits;\n"
    "  if (e == 0x1f) bits = sign | 0x7f800000u | (m << 13);\n"
    "  else if (e) bits = sign | ((e + 112) << 23) | (m << 13);\n"
    "  else if (!m) bits = sign;\n"
    "  else { int k = -1; unsigned mm = m; do { ++k; mm <<= 1; } while (!(mm & 0x400));\n"
    "    bits = sign | ((unsigned)(112 - k) << 23) | ((mm & 0x3ff) << 13); }\n"
    "  float f; __builtin_memcpy(&f, &bits, 4); return f;\n"
    "}\n"
    "static inline unsigned short float_to_half(float f) {\n"
    "  unsigned x; __builtin_memcpy(&x, &f, 4);\n"
    "  const unsigned short sign = (x >> 16) & 0x8000; const unsigned a = x & 0x7fffffffu;\n"
    "  if (a >= 0x7f800000u) return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0);\n"
    "  if (a >= 0x477ff000u) return sign | 0x7c00;\n"
    "  if (a < 0x38800000u) {\n"
    "    if (a < 0x33000000u) return sign;\n"
    "    const unsigned e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, s = 126 - e;\n"
    "    unsigned h = m >> s; const unsigned rest = m & ((1u << s) - 1), half = 1u << (s - 1);\n"
    "    if (rest > half || (rest == half && (h & 1))) ++h;\n"
    "    return sign | h;\n"
    "  }\n"
    "  unsigned h = (a >> 13) - (112u << 10); const unsigned rest = a & 0x1fff;\n"
    "  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;\n"
    "  return sign | h;\n"
    "}\n";

// Cast: each element converted as C converts it (floats to integers toward zero, as ONNX's Cast
// does; to bool: whether it is nonzero). A cast to the input's own type is a copy.
Expected<GeneratedKernel> Cast(const Graph& g, const Node& n, const std::string& name) {
  const Value& x = g.values[n.inputs[0]];
  const Value& y = g.values[n.outputs[0]];
  if (x.dtype == y.dtype) return Copy(g, n, name);
  const int64_t count = y.elements();
  const std::string to = CType(y.dtype);
  // The edge types (onnx_import.h) go through float (the narrow integers through long long) as
  // their bits, by graph.cc's conversions (narrow_types.h).
  auto mini = [](DType t) { return narrow::MiniKind(t); };
  auto narrow_int = [](DType t) {  // "BITS, SIGNED", or empty
    bool is_signed = false;
    const int bits = narrow::NarrowIntBits(t, &is_signed);
    return bits ? std::to_string(bits) + (is_signed ? ", 1" : ", 0") : std::string();
  };
  std::string from = "in0[j]";
  if (x.dtype == DType::kFloat16) from = "half_to_float(in0[j])";
  if (x.dtype == DType::kBfloat16) from = "ct_bf16_to_float(in0[j])";
  if (mini(x.dtype) >= 0) from = "ct_mini_to_float(in0[j], " + std::to_string(mini(x.dtype)) + ")";
  if (!narrow_int(x.dtype).empty()) from = "ct_narrow_int(in0[j], " + narrow_int(x.dtype) + ")";
  std::string conv;
  if (y.dtype == DType::kBool) {
    conv = "(unsigned char)(" + from + " != 0)";
  } else if (y.dtype == DType::kFloat16) {
    conv = "float_to_half((float)" + from + ")";
  } else if (y.dtype == DType::kBfloat16) {
    conv = "ct_float_to_bf16((float)" + from + ")";
  } else if (mini(y.dtype) >= 0) {
    conv = "(unsigned char)ct_float_to_mini((float)" + from + ", " + std::to_string(mini(y.dtype)) +
           ", " + std::to_string(n.Int("saturate", 1) != 0 ? 1 : 0) + ")";
  } else if (!narrow_int(y.dtype).empty()) {
    conv = "ct_to_narrow_int((double)" + from + ", " + narrow_int(y.dtype) + ")";
  } else {
    conv = "(" + to + ")" + from;
  }
  std::string defines;
  if (x.dtype == DType::kFloat16 || y.dtype == DType::kFloat16) defines += kHalfConversions;
  if (IsEdgeType(x.dtype) || IsEdgeType(y.dtype))
    defines += std::string(narrow::kNarrowTypesC) + "\n";
  return LoopKernel(
      name, 1, 1, Chunks(count), defines,
      ChunkRange(count) + "    for (long j = j0; j < j1; ++j) out0[j] = " + conv + ";",
      {CType(x.dtype), to});
}

// QuantizeLinear and DequantizeLinear (ops/quantize.cc): element j's scale and zero point are
// index j / INNER % DIM of theirs (DIM 1: one for the tensor); no zero point input reads 0.
Expected<GeneratedKernel> Quantize(const Graph& g, const Node& n, const std::string& name) {
  const Value& x = g.values[n.inputs[0]];
  const Value& y = g.values[n.outputs[0]];
  const int64_t count = y.elements();
  const int64_t axis = n.Int("axis", -1);
  int64_t inner = 1, dim = 1;
  if (axis >= 0) {
    dim = x.shape[axis];
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  }
  const bool zero = n.inputs.size() > 2 && n.inputs[2] >= 0;
  const std::string defines = "#define INNER " + std::to_string(inner) + "L\n#define DIM " +
                              std::to_string(dim) + "L\n#define ZERO(c) " +
                              (zero ? "((float)in2[c])" : "0.0f") + "\n";
  std::string body = ChunkRange(count) +
                     "    for (long j = j0; j < j1; ++j) {\n"
                     "      const long c = j / INNER % DIM;\n";
  const DType q = n.op == "QuantizeLinear" ? y.dtype : x.dtype;
  if (n.op == "QuantizeLinear") {
    const bool s8 = y.dtype == DType::kInt8;
    body +=
        "      float v = __builtin_nearbyintf(in0[j] / in1[c]) + ZERO(c);\n"
        "      v = v != v ? 0.0f : v < " +
        std::string(s8 ? "-128.0f ? -128.0f : v > 127.0f ? 127.0f"
                       : "0.0f ? 0.0f : v > 255.0f ? 255.0f") +
        " : v;\n      out0[j] = (" + CType(y.dtype) + ")v;\n    }";
  } else {
    body += "      out0[j] = ((float)in0[j] - ZERO(c)) * in1[c];\n    }";
  }
  std::vector<std::string> types = {CType(x.dtype), "float"};
  if (zero) types.push_back(CType(q));
  types.push_back(CType(y.dtype));
  return LoopKernel(name, zero ? 3 : 2, 1, Chunks(count), defines, body, types);
}

// DynamicQuantizeLinear: one item (the range of the whole tensor comes first); out0 uint8, out1
// the scale, out2 the zero point (those the graph reads).
Expected<GeneratedKernel> DynamicQuantize(const Graph& g, const Node& n, const std::string& name) {
  const int64_t count = g.values[n.inputs[0]].elements();
  const int outs = static_cast<int>(n.outputs.size());
  std::string body =
      "    float lo = 0.0f, hi = 0.0f;\n"
      "    for (long j = 0; j < " +
      std::to_string(count) +
      "L; ++j) { lo = in0[j] < lo ? in0[j] : lo; hi = in0[j] > hi ? in0[j] : hi; }\n"
      "    const float scale = (hi - lo) / 255.0f;\n"
      "    float zero = scale == 0.0f ? 0.0f : __builtin_nearbyintf(-lo / scale);\n"
      "    zero = zero < 0.0f ? 0.0f : zero > 255.0f ? 255.0f : zero;\n"
      "    for (long j = 0; j < " +
      std::to_string(count) +
      "L; ++j) {\n"
      "      float v = scale == 0.0f ? zero : __builtin_nearbyintf(in0[j] / scale) + zero;\n"
      "      v = v != v ? 0.0f : v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;\n"
      "      out0[j] = (unsigned char)v;\n    }\n";
  if (outs > 1) body += "    out1[0] = scale;\n";
  if (outs > 2) body += "    out2[0] = (unsigned char)zero;\n";
  std::vector<std::string> types = {"float", "unsigned char", "float", "unsigned char"};
  types.resize(static_cast<size_t>(outs) + 1);
  return LoopKernel(name, 1, outs, 1, "", body, types);
}

// erf for float32 without calls or branches, so that the loop vectorizes (libm's erff is a call
// per element: a BERT-base encoder's GELUs took 46 of its 544 ms with it). Below |x| = 0.75 the
// Taylor series to x^17; above, 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-x^2) with
// t = 1 / (1 + p |x|) (Abramowitz and Stegun 7.1.26) and ct_exp (kExpFunction); |x| above 4 is
// taken as 4 (erf rounds to 1 there). Against erf in double over [-6, 6] in steps of 1e-5 and
// at tiny arguments: at most 2.5e-7 absolute and 3.3e-7 relative error. NaN stays NaN.
constexpr const char* kErf = R"C(static inline float ct_erf(float x) {
  const float a = x < 0 ? -x : x;
  const float z = a < 4.0f ? a : 4.0f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float big = 1.0f - t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
                    t * (-1.453152027f + t * 1.061405429f)))) * ct_exp(-z * z);
  const float q = a * a;
  const float small = 1.12837917f * a * (1.0f + q * (-1.0f / 3 + q * (1.0f / 10 +
                      q * (-1.0f / 42 + q * (1.0f / 216 + q * (-1.0f / 1320 + q * (1.0f / 9360 +
                      q * (-1.0f / 75600 + q * (1.0f / 685440)))))))));
  const float e = a < 0.75f ? small : big;
  return x != x ? x : x < 0 ? -e : e;
}
)C";

Expected<GeneratedKernel> Unary(const Graph& g, const Node& n, const std::string& name) {
  const DType t = g.values[n.inputs[0]].dtype;
  const bool f32 = t == DType::kFloat32, f64 = t == DType::kFloat64;
  // A constant of the node's type: float32's exactly, float64's and the integers' as double.
  auto lit = [f32](double v) {
    if (f32) return CFloat(v);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return std::string(buf);
  };
  std::string expr;
  if (n.op == "Relu") {
    expr = "v > 0 ? v : 0.0f";
  } else if (n.op == "Sigmoid") {
    expr = "1.0f / (1.0f + __builtin_expf(-v))";
  } else if (n.op == "LeakyRelu") {
    expr = "v >= 0 ? v : " + lit(n.Float("alpha", 0.01)) + " * v";
  } else if (n.op == "Clip") {
    const std::string lo = n.Has("min") ? lit(n.Float("min", 0)) : "-__builtin_inff()";
    const std::string hi = n.Has("max") ? lit(n.Float("max", 0)) : "__builtin_inff()";
    expr = "AT_MOST(AT_LEAST(v, " + lo + "), " + hi + ")";  // min > max: every value is max
  } else if (n.op == "Abs") {
    expr = f32 || f64 ? "__builtin_fabsf(v)" : "(v < 0 ? -v : v)";
  } else if (n.op == "Neg") {
    expr = "-v";
  } else if (n.op == "Exp") {
    expr = "__builtin_expf(v)";
  } else if (n.op == "Log") {
    expr = "__builtin_logf(v)";
  } else if (n.op == "Sqrt") {
    expr = "__builtin_sqrtf(v)";
  } else if (n.op == "Reciprocal") {
    expr = "1.0f / v";
  } else if (n.op == "Tanh") {
    expr = "__builtin_tanhf(v)";
  } else if (n.op == "Erf") {
    expr = f32 ? "ct_erf(v)" : "__builtin_erff(v)";
  } else if (n.op == "Floor") {
    expr = "__builtin_floorf(v)";
  } else if (n.op == "Sin") {
    expr = "__builtin_sinf(v)";
  } else if (n.op == "Cos") {
    expr = "__builtin_cosf(v)";
  } else if (n.op == "Tan") {
    expr = "__builtin_tanf(v)";
  } else if (n.op == "Asin") {
    expr = "__builtin_asinf(v)";
  } else if (n.op == "Acos") {
    expr = "__builtin_acosf(v)";
  } else if (n.op == "Atan") {
    expr = "__builtin_atanf(v)";
  } else if (n.op == "Sinh") {
    expr = "__builtin_sinhf(v)";
  } else if (n.op == "Cosh") {
    expr = "__builtin_coshf(v)";
  } else if (n.op == "Asinh") {
    expr = "__builtin_asinhf(v)";
  } else if (n.op == "Acosh") {
    expr = "__builtin_acoshf(v)";
  } else if (n.op == "Atanh") {
    expr = "__builtin_atanhf(v)";
  } else if (n.op == "Round") {
    expr = "__builtin_nearbyintf(v)";
  } else if (n.op == "Ceil") {
    expr = "__builtin_ceilf(v)";
  } else if (n.op == "Softplus") {
    expr = "v > 0 ? v + __builtin_log1pf(__builtin_expf(-v)) : __builtin_log1pf(__builtin_expf(v))";
  } else if (n.op == "Softsign") {
    expr = "v / (1.0f + __builtin_fabsf(v))";
  } else if (n.op == "Elu") {
    expr = "v >= 0 ? v : " + lit(n.Float("alpha", 1)) + " * (__builtin_expf(v) - 1.0f)";
  } else if (n.op == "Selu") {
    const std::string a = lit(n.Float("alpha", 0)), g = lit(n.Float("gamma", 0));
    expr = "v > 0 ? " + g + " * v : " + g + " * (" + a + " * __builtin_expf(v) - " + a + ")";
  } else if (n.op == "HardSigmoid") {
    expr = "HARD(" + lit(n.Float("alpha", 0)) + " * v + " + lit(n.Float("beta", 0)) + ")";
  } else if (n.op == "HardSwish") {
    expr = "v * HARD(v / 6.0f + 0.5f)";
  } else if (n.op == "Gelu" && n.String("approximate", "none") == "tanh") {
    expr = "0.5f * v * (1.0f + __builtin_tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))";
  } else if (n.op == "Gelu") {
    expr = std::string("0.5f * v * (1.0f + ") + (f32 ? "ct_erf" : "__builtin_erff") +
           "(v * 0.7071067811865476f))";
  }
  if (expr.empty()) {
    return Status(ErrorCode::kInternal, n.op + " node '" + n.name + "': no unary kernel");
  }
  if (!f32) {
    // float64: the double builtins; the integers keep the value's own type.
    expr = std::regex_replace(expr, std::regex("__builtin_(\\w+?)f\\("), "__builtin_$1(");
    expr = std::regex_replace(expr, std::regex("([0-9])f\\b"), "$1");
  }
  const int64_t e = g.values[n.outputs[0]].elements();
  return LoopKernel(
      name, 1, 1, Chunks(e),
      "#define HARD(t) ((t) < 0.0f ? 0.0f : ((t) > 1.0f ? 1.0f : (t)))\n"
      "#define AT_LEAST(v, lo) ((v) < (lo) ? (lo) : (v))\n"
      "#define AT_MOST(v, hi) ((v) > (hi) ? (hi) : (v))\n" +
          (expr.find("ct_erf(") != std::string::npos ? std::string(kExpFunction) + kErf
                                                     : std::string()),
      ChunkRange(e) +
          "    for (long j = j0; j < j1; ++j) {\n"
          "      const " +
          std::string(CType(t)) + " v = in0[j];\n      out0[j] = " + expr + ";\n    }",
      {CType(t), CType(t)});
}

// Add, Sub, Mul, Div, Pow, Sum, Min, Max, Mean, PRelu; Equal, Less, Greater, LessOrEqual,
// GreaterOrEqual, Not, And, Or, Xor, Where (each argument of its own element type): rows of the
// output's last dimension; each input's offset from the row's index through its broadcast
// strides.
Expected<GeneratedKernel> Broadcast(const Graph& g, const Node& n, const std::string& name) {
  const auto& out = g.values[n.outputs[0]].shape;
  const int inputs = static_cast<int>(n.inputs.size());
  // How the value so far and the next input's term combine.
  const DType t = g.values[n.outputs[0]].dtype;
  const bool integer = t != DType::kFloat32 && t != DType::kFloat64;
  const std::string ct = CType(t);
  auto combine = [&](const std::string& a, const std::string& b) -> std::string {
    if (n.op == "Sub") return "(" + ct + ")((" + a + ") - " + b + ")";
    if (n.op == "Mul") return "(" + ct + ")((" + a + ") * " + b + ")";
    if (n.op == "Div") return "(" + ct + ")((" + a + ") / " + b + ")";
    if (n.op == "Mod") {
      if (!integer) {
        return std::string(n.Int("fmod", 0) ? "(" + ct + ")__builtin_fmod(" : "PYFMOD(") + a +
               ", " + b + ")";
      }
      return std::string(n.Int("fmod", 0) ? "CMOD(" : "PYMOD(") + a + ", " + b + ")";
    }
    if (n.op == "Pow") {
      return t == DType::kFloat32 ? "__builtin_powf(" + a + ", " + b + ")"
                                  : "(" + ct + ")__builtin_pow(" + a + ", " + b + ")";
    }
    if (n.op == "Min") return "MIN2(" + a + ", " + b + ")";
    if (n.op == "Max") return "MAX2(" + a + ", " + b + ")";
    if (n.op == "PRelu") return "PRELU(" + a + ", " + b + ")";
    return "(" + ct + ")((" + a + ") + " + b + ")";  // Add, Sum, Mean
  };
  const int64_t rank = static_cast<int64_t>(out.size());
  const int64_t len = rank ? out.back() : 1;
  const int64_t rows = len ? NumElements(out) / len : 0;
  std::string defines =
      "#define RANK " + std::to_string(rank) +
      "\n"
      "#define MIN2(a, b) ((b) < (a) ? (b) : (a))\n"
      "#define MAX2(a, b) ((b) > (a) ? (b) : (a))\n"
      "#define PRELU(x, s) ((x) < 0 ? (s) * (x) : (x))\n"
      "#define CMOD(a, b) ((a) % (b))\n"
      "static inline double PYFMOD(double a, double b) {\n"
      "  const double r = __builtin_fmod(a, b);\n"
      "  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;\n}\n"
      "#define PYMOD(a, b) (((a) % (b) != 0 && (((a) % (b) < 0) != ((b) < 0))) ? (a) % (b) + (b) "
      ": (a) % (b))\n";
  defines += "static const long kOut[] = " + CArray(out) + ";\n";
  std::string offsets = "    long rem = it";
  for (int i = 0; i < inputs; ++i) offsets += ", o" + std::to_string(i) + " = 0";
  offsets +=
      ";\n    for (int d = RANK - 2; d >= 0; --d) {\n      const long x = rem % kOut[d];\n"
      "      rem /= kOut[d];\n";
  std::string expr;
  std::vector<std::string> terms, types;
  for (int i = 0; i < inputs; ++i) {
    const std::string s = std::to_string(i);
    const auto strides = BroadcastStrides(g.values[n.inputs[i]].shape, out);
    defines += "static const long kS" + s + "[] = " + CArray(strides) + ";\n";
    offsets += "      o" + s + " += x * kS" + s + "[d];\n";
    const std::string last = rank ? std::to_string(strides.back()) : "0";
    terms.push_back("in" + s + "[o" + s + " + j * " + last + "L]");
    types.push_back(CType(g.values[n.inputs[i]].dtype));
    expr = i == 0 ? terms[0] : combine(expr, terms.back());
  }
  types.push_back(CType(g.values[n.outputs[0]].dtype));
  if (n.op == "Mean") expr = "(" + expr + ") / " + std::to_string(inputs) + ".0";
  // Comparisons and logic (any element type in, bool out) and Where.
  const std::map<std::string, std::string> kCompare = {{"Equal", "=="},
                                                       {"Less", "<"},
                                                       {"Greater", ">"},
                                                       {"LessOrEqual", "<="},
                                                       {"GreaterOrEqual", ">="}};
  if (auto c = kCompare.find(n.op); c != kCompare.end()) {
    expr = "(" + terms[0] + " " + c->second + " " + terms[1] + ")";
  } else if (n.op == "Not") {
    expr = "(" + terms[0] + " == 0)";
  } else if (n.op == "And") {
    expr = "(" + terms[0] + " != 0 && " + terms[1] + " != 0)";
  } else if (n.op == "Or") {
    expr = "(" + terms[0] + " != 0 || " + terms[1] + " != 0)";
  } else if (n.op == "Xor") {
    expr = "((" + terms[0] + " != 0) != (" + terms[1] + " != 0))";
  } else if (n.op == "Where") {
    expr = "(" + terms[0] + " ? " + terms[1] + " : " + terms[2] + ")";
  }
  offsets += "    }\n";
  // An integer divisor of 0 fails the call, naming the node, where C would trap.
  const std::string check = integer && (n.op == "Div" || n.op == "Mod")
                                ? "if (" + terms[1] + " == 0) { g_error = \"" + name +
                                      ": integer division by zero\"; return 1; }\n      "
                                : std::string();
  return LoopKernel(name, inputs, 1, rows, defines,
                    offsets + "    for (long j = 0; j < " + std::to_string(len) +
                        "L; ++j) {\n      " + check + "out0[it * " + std::to_string(len) +
                        "L + j] = " + expr + ";\n    }",
                    types);
}

// Standalone BatchNormalization (one that did not fold into a conv): items are planes.
Expected<GeneratedKernel> BatchNorm(const Graph& g, const Node& n, const std::string& name) {
  const auto& x = g.values[n.inputs[0]].shape;
  const int64_t c = x[1], inner = NumElements(x) / x[0] / c;
  return LoopKernel(name, 5, 1, x[0] * c, "#define EPS " + CFloat(n.Float("epsilon", 1e-5)) + "\n",
                    "    const long ch = it % " + std::to_string(c) +
                        "L;\n"
                        "    const float s = in1[ch] / __builtin_sqrtf(in4[ch] + EPS);\n"
                        "    const float b = in2[ch] - in3[ch] * s;\n"
                        "    for (long j = 0; j < " +
                        std::to_string(inner) + "L; ++j) out0[it * " + std::to_string(inner) +
                        "L + j] = in0[it * " + std::to_string(inner) + "L + j] * s + b;");
}

}  // namespace crosstune::model::kernels
