// Helpers shared by the kernel templates: what the target's vector unit offers, candidate lists
// for split knobs, the factories' common tail (NewTask), and the generated C that every CPU
// template's kernel needs (vector types, tensor checks, a VW x VW in-register transpose, the
// parallel launch) with its entry point and module table, generated from the task's args().
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"
#include "crosstune/tuner/space.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner::templates {

inline bool HasAttr(const builder::Target& t, const std::string& feature) {
  return std::find(t.attrs.begin(), t.attrs.end(), "+" + feature) != t.attrs.end();
}

// AVX-512 from a feature or from the generic x86-64-v4 level (the x86-avx512 preset).
inline bool HasAvx512(const builder::Target& t) {
  const bool off = std::find(t.attrs.begin(), t.attrs.end(), "-avx512f") != t.attrs.end();
  return !off && (HasAttr(t, "avx512f") || t.cpu == "x86-64-v4");
}

// Floats per vector register the generated code should use.
inline int VectorWidth(const builder::Target& t) {
  const std::string arch = t.Arch();
  if (arch == "x86_64") {
    if (HasAvx512(t)) return 16;
    if (HasAttr(t, "avx") || HasAttr(t, "avx2") || t.cpu == "x86-64-v3") return 8;
    return 4;
  }
  return 4;  // NEON (aarch64, armv7), and scalarised 4-lane vectors elsewhere
}

// Vector registers a micro-kernel may hold at once.
inline int VectorRegisters(const builder::Target& t) {
  const std::string arch = t.Arch();
  if (arch == "x86_64") return HasAvx512(t) ? 32 : 16;
  if (arch == "aarch64") return 32;
  return 16;  // armv7 NEON: 16 q registers
}

// The values of `list` below `extent`, and `extent` itself (no blocking), sorted and unique.
inline std::vector<int64_t> CandidatesUpTo(const std::vector<int64_t>& list, int64_t extent) {
  std::vector<int64_t> out;
  for (int64_t v : list) {
    if (v < extent) out.push_back(v);
  }
  out.push_back(extent);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

inline std::vector<std::vector<int64_t>> AsCandidates(const std::vector<int64_t>& v) {
  std::vector<std::vector<int64_t>> out;
  out.reserve(v.size());
  for (int64_t x : v) out.push_back({x});
  return out;
}

inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Tensors of more elements than this are refused when a task is made (before any int64 product
// of the sizes can overflow, and before a host buffer for them is allocated).
constexpr double kMaxTensorElements = 4294967296.0;  // 2^32

// The sizes conv2d's and conv2d_int8's shapes begin with, N,C,H,W,K,R,S,stride,pad, with up to
// three flags after them (9 to 12 values): sizes and stride from 1 to 65536, pad from 0 to 65536,
// the filter within the padded input; kInvalidArgument starting with the template's `usage`.
inline Status CheckConvSizes(const std::string& usage, const std::vector<int64_t>& shape) {
  if (shape.size() < 9 || shape.size() > 12) {
    return Status(ErrorCode::kInvalidArgument,
                  usage + " (9 to 12 values, got " + std::to_string(shape.size()) + ")");
  }
  const int64_t limit = int64_t{1} << 16;
  for (size_t i = 0; i < 8; ++i) {
    if (shape[i] < 1 || shape[i] > limit) {
      return Status(ErrorCode::kInvalidArgument, usage + ": sizes and stride from 1 to 65536");
    }
  }
  const int64_t pad = shape[8];
  if (pad < 0 || pad > limit) {
    return Status(ErrorCode::kInvalidArgument, usage + ": pad from 0 to 65536");
  }
  if (shape[5] > shape[2] + 2 * pad || shape[6] > shape[3] + 2 * pad) {
    return Status(ErrorCode::kInvalidArgument,
                  usage + ": the filter (R,S) is larger than the padded input");
  }
  return Status::Ok();
}

// Refuses running a task with more threads than the device has cores (what the tuner measures
// would not be what a user gets).
inline Status CheckThreads(int threads, const msg::DeviceInfo& device) {
  if (device.cores > 0 && static_cast<uint32_t>(threads) > device.cores) {
    return Status(ErrorCode::kInvalidArgument, "the task runs with " + std::to_string(threads) +
                                                   " threads; the device has " +
                                                   std::to_string(device.cores) + " cores");
  }
  return Status::Ok();
}

// The name of the first argument over `limit` elements (kMaxTensorElements), or empty. Products in
// double: sizes up to 2^20 each cannot overflow it.
template <typename ArgList>
std::string OversizedArgument(const ArgList& args, double limit = kMaxTensorElements) {
  for (const auto& a : args) {
    double n = 1;
    for (int64_t d : a.shape) n *= static_cast<double>(d);
    if (n > limit) return a.name;
  }
  return "";
}
inline int64_t CeilDiv(int64_t v, int64_t m) { return (v + m - 1) / m; }

// The first lines of a generated kernel: the kernel ABI with its parallel launch where the header
// has one (CT_USE_RUNTIME; a header without it ignores the define and the kernel runs serially).
inline std::string KernelHeader() {
  return "#define CT_USE_RUNTIME 1\n#include \"crosstune/kernel_abi.h\"\n";
}

// Generated C after KernelHeader(), `#define VW <floats per vector>` and `#define THREADS <the
// task's threads>`:
//   vf / vfu / vi     aligned and unaligned float vectors, an int vector of the same lanes
//   MIN, MAX_TASKS    (THREADS, or CT_TASKS when larger: it bounds the tasks, and per-task
//                     scratch has MAX_TASKS slices, a task indexing its own)
//   g_error, last_error, set by check_tensor(arg, ndim, shape, what) on a bad tensor (a float32
//                     one; KernelEntry adds check_typed_tensor for kernels with other types)
//   relu(v)
//   transpose(t)      t[i][j] <- t[j][i] for a VW x VW block held in VW vectors
//   hsum(v)           the sum of v's lanes
//   zero_floats(p, n) n zeros from p
//   run_tasks(body, closure, items)  body(task, tasks, closure) for each task, on the server's
//                     threads where it offers them (serially otherwise, or with CT_TASKS defined,
//                     CT_TASKS tasks one after another: how tests check the split); tasks is at
//                     most the threads, MAX_TASKS and items. A task takes the items
//                     [items * task / tasks, items * (task + 1) / tasks) (task_range).
inline std::string KernelPrelude(int vw) {
  std::ostringstream o;
  o << R"C(
typedef float vf __attribute__((vector_size(VW * 4)));
typedef float vfu __attribute__((vector_size(VW * 4), aligned(4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#if defined(CT_TASKS) && CT_TASKS > THREADS
#define MAX_TASKS CT_TASKS
#else
#define MAX_TASKS THREADS
#endif

static const char* g_error = "";
static const char* last_error(void) { return g_error; }

/* A compact float32 tensor of `ndim` dimensions and the given shape, or 1 with g_error set. */
static int check_tensor(const ct_arg* arg, int ndim, const long* shape, const char* what) {
  if (arg->kind != CT_ARG_TENSOR) { g_error = what; return 1; }
  const DLTensor* t = arg->value.v_tensor;
  if (t->ndim != ndim || t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    g_error = what;
    return 1;
  }
  long stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (t->shape[d] != shape[d] || (t->strides && t->shape[d] > 1 && t->strides[d] != stride)) {
      g_error = what;
      return 1;
    }
    stride *= shape[d];
  }
  return 0;
}

static inline float* tensor_data(const ct_arg* arg) {
  const DLTensor* t = arg->value.v_tensor;
  return (float*)((char*)t->data + t->byte_offset);
}

static inline __attribute__((always_inline)) vf relu(vf v) {
  const vi keep = v > (vf){0};
  return (vf)((vi)v & keep);
}

typedef int32_t (*task_body)(int32_t task, int32_t num_tasks, void* closure);

/* n floats of zero from p (a loop: kernels link no C library). */
static inline __attribute__((unused)) void zero_floats(float* p, long n) {
  for (long i = 0; i < n; ++i) p[i] = 0;
}

static inline void task_range(long items, int32_t task, int32_t num_tasks, long* begin, long* end) {
  *begin = items * task / num_tasks;
  *end = items * (task + 1) / num_tasks;
}

static __attribute__((unused)) int32_t run_tasks(task_body body, void* closure, long items) {
  if (items <= 0) return 0;
#if defined(CT_TASKS)
  long tasks = CT_TASKS; /* tests: this many tasks, one after another */
#elif defined(CT_RUNTIME_VERSION)
  long tasks = ct_num_threads();
#else
  long tasks = 1;
#endif
  if (tasks > MAX_TASKS) tasks = MAX_TASKS;
  if (tasks > items) tasks = items;
#if defined(CT_RUNTIME_VERSION) && !defined(CT_TASKS)
  return ct_parallel_for(body, closure, (int32_t)tasks);
#else
  for (long t = 0; t < tasks; ++t) {
    const int32_t rc = body((int32_t)t, (int32_t)tasks, closure);
    if (rc != 0) return rc;
  }
  return 0;
#endif
}
)C";
  // Transpose: log2(VW) stages; stage b swaps, within each 2b x 2b block, the b x b block above
  // the diagonal with the one below it.
  o << "\nstatic inline __attribute__((always_inline)) void transpose(vf* t) {\n  vf a, b;\n";
  for (int b = 1; b < vw; b *= 2) {
    for (int i = 0; i < vw; ++i) {
      if (i & b) continue;
      std::string lo, hi;
      for (int j = 0; j < vw; ++j) {
        lo += ", " + std::to_string((j & b) ? vw + j - b : j);
        hi += ", " + std::to_string((j & b) ? vw + j : j + b);
      }
      o << "  a = t[" << i << "]; b = t[" << i + b << "];\n"
        << "  t[" << i << "] = __builtin_shufflevector(a, b" << lo << ");\n"
        << "  t[" << i + b << "] = __builtin_shufflevector(a, b" << hi << ");\n";
    }
  }
  o << "}\n";
  // Horizontal sum: log2(VW) halvings, each adding the upper half of what is left onto the
  // lower half (lanes past it are don't-cares).
  o << "\nstatic inline __attribute__((always_inline)) float hsum(vf v) {\n";
  for (int half = vw / 2; half >= 1; half /= 2) {
    std::string idx;
    for (int j = 0; j < vw; ++j) idx += ", " + std::to_string(j < half ? j + half : j);
    o << "  v += __builtin_shufflevector(v, v" << idx << ");\n";
  }
  o << "  return v[0];\n}\n";
  return o.str();
}

// The factories' common tail: `shape` (a template's sizes, with a `BuildSpace() const` that
// returns its config space) becomes a task T(id, target, space, shape).
template <typename T, typename Shape>
Expected<std::unique_ptr<Task>> NewTask(TaskId id, const builder::Target& target,
                                        const Shape& shape) {
  CT_ASSIGN_OR_RETURN(ConfigSpace space, shape.BuildSpace());
  return std::unique_ptr<Task>(new T(std::move(id), target, std::move(space), shape));
}

// ACT(v) on a vector and ACT1(x) on one float, after KernelPrelude(): the epilogue's activation
// of a conv shape's activation field (0 none, 1 relu, 2 relu6; reference.h's ApplyActivation).
// relu makes NaN 0; relu6 is relu, then at most 6 (relu6(v) is defined with it).
inline std::string ActivationDefines(int64_t act) {
  if (act == 2) {
    return "static inline __attribute__((always_inline)) vf relu6(vf v) {\n"
           "  const vf r = relu(v), six = (vf){0} + 6.0f;\n"
           "  const vi over = r > six;\n"
           "  return (vf)(((vi)r & ~over) | ((vi)six & over));\n"
           "}\n"
           "#define ACT(v) relu6(v)\n#define ACT1(x) ((x) > 0 ? ((x) < 6 ? (x) : 6) : 0)\n";
  }
  if (act == 1) return "#define ACT(v) relu(v)\n#define ACT1(x) ((x) > 0 ? (x) : 0)\n";
  return "#define ACT(v) (v)\n#define ACT1(x) (x)\n";
}

// One scratch buffer of a kernel: `floats` floats (a C expression of the kernel's defines, and
// the same count computed by the template), in MAX_TASKS slices when `per_task` (a task indexing
// its own), each buffer starting on a 64-byte boundary.
struct ScratchBuffer {
  std::string name;
  std::string c_floats;
  int64_t floats = 0;
  bool per_task = false;
};

// The bytes of `buffers` for a kernel of `threads` threads: what a caller gives a kernel generated
// with CT_SCRATCH_ARG (the size of the C struct KernelArgsStruct declares; a static assertion in
// the generated code checks that the two agree).
inline int64_t ScratchBytes(const std::vector<ScratchBuffer>& buffers, int threads) {
  int64_t bytes = 0;
  for (const ScratchBuffer& b : buffers)
    bytes += RoundUp(b.floats * (b.per_task ? threads : 1) * 4, 64);
  return bytes;
}

// The C element type of an argument of `dtype` (float, int8_t, uint8_t, int32_t) and its name in
// the kernel's errors (float32, int8, uint8, int32).
inline std::string CType(DLDataType dtype) {
  if (dtype.code == kDLInt) return dtype.bits == 8 ? "int8_t" : "int32_t";
  if (dtype.code == kDLUInt) return "uint8_t";
  return "float";
}
inline std::string DTypeText(DLDataType dtype) {
  if (dtype.code == kDLInt) return dtype.bits == 8 ? "int8" : "int32";
  if (dtype.code == kDLUInt) return "uint8";
  return "float32";
}

// Generated C after KernelPrelude(): `typedef struct {...} kernel_args;` with one pointer per
// tensor of `args`, named as the argument (const for inputs), which the kernel's bodies read
// through the closure they are given. With `scratch`, first `kernel_scratch`, a struct of those
// buffers (SCRATCH_BYTES long), and kernel_args has `kernel_scratch* scratch`: the module's own
// zero-initialised static copy, or with CT_SCRATCH_ARG defined the caller's buffer, the kernel's
// last tensor (a model's executor gives every node the same one: what the kernel does not write
// in a call holds anything).
inline std::string KernelArgsStruct(const std::vector<ArgSpec>& args,
                                    const std::vector<ScratchBuffer>& scratch = {},
                                    int threads = 1) {
  std::string o;
  if (!scratch.empty()) {
    o += "\ntypedef struct {\n";
    for (const ScratchBuffer& b : scratch) {
      o += "  float " + b.name + (b.per_task ? "[MAX_TASKS]" : "") + "[" + b.c_floats +
           "] __attribute__((aligned(64)));\n";
    }
    o += "} kernel_scratch;\n#define SCRATCH_BYTES " +
         std::to_string(ScratchBytes(scratch, threads)) +
         "L\n#if !defined(CT_TASKS) || CT_TASKS <= THREADS\n"
         "_Static_assert(sizeof(kernel_scratch) == SCRATCH_BYTES, \"the scratch size the template "
         "computes\");\n#endif\n";
  }
  o += "\ntypedef struct {\n";
  for (const ArgSpec& a : args)
    o += std::string(a.output ? "  " : "  const ") + CType(a.dtype) + "* " + a.name + ";\n";
  if (!scratch.empty()) o += "  kernel_scratch* scratch;\n";
  return o + "} kernel_args;\n";
}

// One step of a kernel: run_tasks(body, &args, items) over the server's threads, `items` a C
// expression.
struct KernelPhase {
  std::string body;
  std::string items;
};

// Generated C after the kernel's bodies: the exported function `name`, which checks the argument
// count and that every argument is a compact tensor of its ArgSpec's shape and dtype (a named
// error otherwise), binds them into a kernel_args, and runs `phases` in order, stopping at the
// first that fails; with no phases it calls the kernel's own `static int32_t run(kernel_args*)`.
// With `scratch_bytes` (KernelArgsStruct's kernel_scratch, of ScratchBytes()) it binds a.scratch
// too: with CT_SCRATCH_ARG defined the function takes one more tensor, a 64-byte aligned buffer of
// that many bytes or more.
// Then the module table with the function's signature.
inline std::string KernelEntry(const std::string& name, const std::vector<ArgSpec>& args,
                               const std::vector<KernelPhase>& phases, int64_t scratch_bytes = 0) {
  const bool scratch = scratch_bytes > 0;
  std::ostringstream o;
  std::string names, signature;
  for (const ArgSpec& a : args) {
    names += (names.empty() ? "" : ", ") + a.name;
    signature += "t";
  }
  const std::string count = std::to_string(args.size());
  const bool typed = std::any_of(args.begin(), args.end(), [](const ArgSpec& a) {
    return a.dtype.code != kDLFloat || a.dtype.bits != 32;
  });
  const bool flat =
      std::any_of(args.begin(), args.end(), [](const ArgSpec& a) { return a.flat_tail > 0; });
  if (flat) {
    // ArgSpec::flat_tail: the last `tail` dimensions checked, the ones before them multiplied
    // (only kernels with such an argument have it, so the others' code stays as it was).
    o << R"C(
static int check_flat_tensor(const ct_arg* arg, int tail, const long* shape, const char* what) {
  if (arg->kind != CT_ARG_TENSOR) { g_error = what; return 1; }
  const DLTensor* t = arg->value.v_tensor;
  if (t->ndim < tail || t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    g_error = what;
    return 1;
  }
  long stride = 1, lead = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    const int k = d - (t->ndim - tail); /* the tail's dimension, or below 0 */
    if ((k >= 0 && t->shape[d] != shape[1 + k]) ||
        (t->strides && t->shape[d] > 1 && t->strides[d] != stride)) {
      g_error = what;
      return 1;
    }
    stride *= t->shape[d];
    if (k < 0) lead *= t->shape[d];
  }
  if (lead != shape[0]) { g_error = what; return 1; }
  return 0;
}
)C";
  }
  if (typed) {
    // check_tensor with the element type as DLPack's code and bits (only kernels that take other
    // types than float32 have it, so the float32 templates' code stays as it was).
    o << R"C(
static int check_typed_tensor(const ct_arg* arg, int ndim, const long* shape, int code, int bits,
                              const char* what) {
  if (arg->kind != CT_ARG_TENSOR) { g_error = what; return 1; }
  const DLTensor* t = arg->value.v_tensor;
  if (t->ndim != ndim || t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1) {
    g_error = what;
    return 1;
  }
  long stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (t->shape[d] != shape[d] || (t->strides && t->shape[d] > 1 && t->strides[d] != stride)) {
      g_error = what;
      return 1;
    }
    stride *= shape[d];
  }
  return 0;
}
)C";
  }
  o << "\nstatic int32_t " << name << "(const ct_arg* args, int32_t num_args) {\n";
  if (scratch) {
    o << "#if defined(CT_SCRATCH_ARG)\n"
      << "  if (num_args != " << count << " + 1) {\n"
      << "    g_error = \"" << name << " takes " << args.size() + 1 << " tensors: " << names
      << ", scratch\";\n    return 1;\n  }\n"
      << "  if (args[" << count << "].kind != CT_ARG_TENSOR || args[" << count
      << "].value.v_tensor->ndim != 1 ||\n"
      << "      args[" << count << "].value.v_tensor->shape[0] * ((args[" << count
      << "].value.v_tensor->dtype.bits * args[" << count
      << "].value.v_tensor->dtype.lanes + 7) / 8) < SCRATCH_BYTES ||\n"
      << "      ((uintptr_t)args[" << count << "].value.v_tensor->data + args[" << count
      << "].value.v_tensor->byte_offset) % 64 != 0) {\n"
      << "    g_error = \"scratch must be a 64-byte aligned buffer of " << scratch_bytes
      << " bytes or more\";\n"
      << "    return 1;\n  }\n#else\n";
  }
  o << "  if (num_args != " << count << ") {\n"
    << "    g_error = \"" << name << " takes " << args.size() << " tensors: " << names << "\";\n"
    << "    return 1;\n  }\n";
  if (scratch) o << "#endif\n";
  for (size_t i = 0; i < args.size(); ++i) {
    std::string dims;
    for (int64_t d : args[i].shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    o << "  static const long shape" << i << "[" << std::max<size_t>(1, args[i].shape.size())
      << "] = {" << (dims.empty() ? "1" : dims) << "};\n"
      << "  if (";
    if (args[i].flat_tail > 0) {
      o << "check_flat_tensor(&args[" << i << "], " << args[i].flat_tail << ", shape" << i;
    } else if (typed) {
      o << "check_typed_tensor(&args[" << i << "], " << args[i].shape.size() << ", shape" << i
        << ", " << static_cast<int>(args[i].dtype.code) << ", "
        << static_cast<int>(args[i].dtype.bits);
    } else {
      o << "check_tensor(&args[" << i << "], " << args[i].shape.size() << ", shape" << i;
    }
    if (args[i].flat_tail > 0) {
      std::string tail;
      for (size_t d = 1; d < args[i].shape.size(); ++d) {
        tail += (tail.empty() ? "" : ", ") + std::to_string(args[i].shape[d]);
      }
      o << ", \"" << args[i].name << " must be a compact " << DTypeText(args[i].dtype)
        << " tensor of shape [..., " << tail << "] whose leading dimensions multiply to "
        << args[i].shape[0] << "\")) return 1;\n";
    } else {
      o << ", \"" << args[i].name << " must be a compact " << DTypeText(args[i].dtype)
        << " tensor of shape [" << dims << "]\")) return 1;\n";
    }
  }
  o << "  kernel_args a;\n";
  for (size_t i = 0; i < args.size(); ++i) {
    o << "  a." << args[i].name << " = ";
    if (args[i].dtype.code != kDLFloat) o << "(" << CType(args[i].dtype) << "*)";
    o << "tensor_data(&args[" << i << "]);\n";
  }
  if (scratch) {
    o << "#if defined(CT_SCRATCH_ARG)\n"
      << "  a.scratch = (kernel_scratch*)((char*)args[" << count << "].value.v_tensor->data + args["
      << count << "].value.v_tensor->byte_offset);\n"
      << "#else\n  static kernel_scratch scratch;\n  a.scratch = &scratch;\n#endif\n";
  }
  if (phases.empty()) {
    o << "  return run(&a);\n";
  } else {
    o << "  int32_t rc = 0;\n";
    for (const KernelPhase& p : phases) {
      o << "  if (rc == 0) rc = run_tasks(" << p.body << ", &a, " << p.items << ");\n";
    }
    o << "  return rc;\n";
  }
  o << "}\n\n";
  if (scratch) {
    o << "#if defined(CT_SCRATCH_ARG)\n#define SIGNATURE \"" << signature << "t\"\n#else\n";
  }
  o << "#define SIGNATURE \"" << signature << "\"\n";
  if (scratch) o << "#endif\n";
  o << "static const ct_function kFunctions[] = {{\"" << name << "\", " << name
    << ", SIGNATURE}};\nCT_DEFINE_MODULE(\"crosstune " << name << "\", kFunctions, last_error)\n";
  return o.str();
}

}  // namespace crosstune::tuner::templates
