#include "kernels/kernel_text.h"

#include <cstdio>

namespace crosstune::model::kernels {

const char* CType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kInt64:
      return "long long";
    case DType::kInt32:
      return "int";
    case DType::kInt8:
      return "signed char";
    case DType::kUint8:
    case DType::kBool:
      return "unsigned char";
    case DType::kInt16:
      return "short";
    case DType::kUint16:
    case DType::kFloat16:  // its bits (the Cast kernel converts)
    default:               // the narrow types' bit patterns (narrow_types.h)
      return DTypeBytes(t) == 2 ? "unsigned short" : "unsigned char";
    case DType::kUint32:
      return "unsigned int";
    case DType::kUint64:
      return "unsigned long long";
  }
  return "float";
}

GeneratedKernel LoopKernel(const std::string& function, int inputs, int outputs, int64_t items,
                           const std::string& defines, const std::string& body,
                           const std::vector<std::string>& types) {
  auto type = [&types](int i) {
    return i < static_cast<int>(types.size()) ? types[i] : std::string("float");
  };
  std::ostringstream o;
  const int args = inputs + outputs;
  o << "/* crosstune generated kernel " << function << " */\n"
    << "#define CT_USE_RUNTIME 1\n#include \"crosstune/kernel_abi.h\"\n"
    << "#define ITEMS " << items << "L\n"
    << "static const char* g_error = \"\";\n"
    << "static const char* last_error(void) { return g_error; }\n"
    << "static inline float* arg_data(const ct_arg* a) {\n"
    << "  const DLTensor* t = a->value.v_tensor;\n"
    << "  return (float*)((char*)t->data + t->byte_offset);\n}\n"
    << defines << "\n"
    << "static int32_t body(int32_t task, int32_t num_tasks, void* closure) {\n"
    << "  const ct_arg* args = (const ct_arg*)closure;\n";
  for (int i = 0; i < inputs; ++i) {
    o << "  const " << type(i) << "* restrict in" << i << " = (const " << type(i)
      << "*)arg_data(&args[" << i << "]);\n";
  }
  for (int i = 0; i < outputs; ++i) {
    o << "  " << type(inputs + i) << "* restrict out" << i << " = (" << type(inputs + i)
      << "*)arg_data(&args[" << inputs + i << "]);\n";
  }
  o << "  const long first = ITEMS * task / num_tasks, last = ITEMS * (task + 1) / num_tasks;\n"
    << "  for (long it = first; it < last; ++it) {\n"
    << body << "\n  }\n  return 0;\n}\n"
    << "static int32_t entry(const ct_arg* args, int32_t num_args) {\n"
    << "  if (num_args != " << args << ") { g_error = \"" << function << " takes " << args
    << " tensors\"; return 1; }\n"
    << "  for (int i = 0; i < " << args << "; ++i)\n"
    << "    if (args[i].kind != CT_ARG_TENSOR) { g_error = \"" << function
    << " takes tensors only\"; return 1; }\n"
    << "  long tasks = ct_num_threads();\n"
    << "  if (tasks > ITEMS) tasks = ITEMS;\n"
    << "  if (tasks < 1) return 0;\n"
    << "  return ct_parallel_for(body, (void*)args, (int32_t)tasks);\n}\n"
    << "static const ct_function kFunctions[] = {{\"" << function << "\", entry, \""
    << std::string(static_cast<size_t>(args), 't') << "\"}};\n"
    << "CT_DEFINE_MODULE(\"crosstune generated\", kFunctions, last_error)\n";
  GeneratedKernel k;
  k.source = o.str();
  k.function = function;
  k.signature = std::string(static_cast<size_t>(args), 't');
  return k;
}

std::string CArray(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]) + "L";
  if (v.empty()) s += "0";
  return s + "}";
}

std::string CFloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return buf;
}

std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& shape,
                                      const std::vector<int64_t>& out) {
  const size_t rank = out.size(), off = rank - shape.size();
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t d = rank; d-- > off;) {
    stride[d] = shape[d - off] == 1 ? 0 : s;
    s *= shape[d - off];
  }
  return stride;
}

const char* const kExpFunction = R"C(static inline float ct_exp(float y) {
  const float c = y < -87.0f ? -87.0f : y > 88.0f ? 88.0f : y;
  const float t = c * 1.44269504f;
  const int n = (int)(t < 0 ? t - 0.5f : t + 0.5f); /* round(c / ln 2) */
  const float r = (c - (float)n * 0.693145752f) - (float)n * 1.42860677e-6f;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
      r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  union { int i; float f; } two_n;
  two_n.i = (n + 127) << 23;
  const float e = p * two_n.f;
  return y != y ? y : y < -87.0f ? 0.0f : y > 88.0f ? __builtin_inff() : e;
}
)C";

}  // namespace crosstune::model::kernels
