/* The CPU kernel ABI: what a crosstune module exports and how the server calls it.
 *
 * Freestanding C (no libc): kernels are compiled with -ffreestanding for any LLVM target, so this
 * header may include only the compiler's own headers and dlpack.h.
 *
 * A module is a shared library exporting one symbol, crosstune_module_v1(), that returns a static
 * table: the ABI version, the target it was built for and its functions. Every function has the
 * same packed signature: int32_t fn(const ct_arg* args, int32_t num_args); zero is success, any
 * other value an error whose text the module may give through last_error().
 */
#ifndef CROSSTUNE_KERNEL_ABI_H_
#define CROSSTUNE_KERNEL_ABI_H_

#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_ABI_VERSION 1u
#define CT_MODULE_SYMBOL "crosstune_module_v1"

typedef enum {
  CT_ARG_INT64 = 0,
  CT_ARG_FLOAT64 = 1,
  CT_ARG_TENSOR = 2,
} ct_arg_kind;

typedef struct {
  int32_t kind; /* a ct_arg_kind */
  int32_t reserved;
  union {
    int64_t v_int64;
    double v_float64;
    DLTensor* v_tensor;
  } value;
} ct_arg;

typedef int32_t (*ct_packed_fn)(const ct_arg* args, int32_t num_args);

/* signature: one character per argument, 't' tensor, 'i' int64, 'f' float64 ("ttti"). */
typedef struct {
  const char* name;
  ct_packed_fn fn;
  const char* signature;
} ct_function;

typedef struct {
  uint32_t abi_version; /* CT_ABI_VERSION */
  const char* target;   /* the target string the module was built for */
  uint32_t num_functions;
  const ct_function* functions;
  const char* (*last_error)(void); /* may be null */
} ct_module;

typedef const ct_module* (*ct_module_entry)(void);

#ifdef __cplusplus
#define CT_EXTERN_C extern "C"
#else
#define CT_EXTERN_C
#endif

#if defined(_WIN32)
#define CT_EXPORT __declspec(dllexport)
#else
#define CT_EXPORT __attribute__((visibility("default")))
#endif

/* Defines the module table and its entry point from a static array of ct_function:
 *   static const ct_function kFns[] = {{"vadd", vadd, "ttt"}};
 *   CT_DEFINE_MODULE("llvm -mtriple=aarch64-linux-gnu", kFns, 0)
 */
#define CT_DEFINE_MODULE(target_str, fn_array, last_error_fn)                                    \
  static const ct_module ct_module_table_ = {CT_ABI_VERSION, (target_str),                       \
                                             (uint32_t)(sizeof(fn_array) / sizeof(fn_array[0])), \
                                             (fn_array), (last_error_fn)};                       \
  CT_EXTERN_C CT_EXPORT const ct_module* crosstune_module_v1(void) { return &ct_module_table_; }

/* --- Parallel launch -------------------------------------------------------------------------
 *
 * The server gives a module a pool of threads (the session's; the size is set per call or per
 * session) through one optional exported variable: a module that defines
 *   const ct_runtime* crosstune_runtime_v1;
 * gets it pointed at the session's runtime right after dlopen, before crosstune_module_v1() is
 * called. A module without the symbol runs single-threaded as before, and a module loaded by a
 * server that predates the runtime (the variable stays null) runs its parallel loops serially.
 * The module stays freestanding: the threads belong to the server.
 *
 * Kernel sources get the variable and two helpers by defining CT_USE_RUNTIME before including
 * this header:
 *   #define CT_USE_RUNTIME 1
 *   #include "crosstune/kernel_abi.h"
 *   static int32_t body(int32_t task, int32_t num_tasks, void* closure) { ... share task ... }
 *   ... ct_parallel_for(body, &closure, ct_num_threads()) ...
 */
#define CT_RUNTIME_VERSION 1u
#define CT_RUNTIME_SYMBOL "crosstune_runtime_v1"

/* One share of a parallel loop: task is in [0, num_tasks). Non-zero = error. */
typedef int32_t (*ct_parallel_body)(int32_t task, int32_t num_tasks, void* closure);

typedef struct ct_runtime ct_runtime;
struct ct_runtime {
  uint32_t version; /* CT_RUNTIME_VERSION */
  /* Threads the current call may use (>= 1). */
  int32_t (*num_threads)(const ct_runtime* rt);
  /* Runs body(t, num_tasks, closure) for every t in [0, num_tasks), spread over the threads,
   * and returns when all have returned: 0, or the first non-zero return. A launch from inside a
   * body runs serially on the calling thread. */
  int32_t (*parallel_launch)(const ct_runtime* rt, ct_parallel_body body, void* closure,
                             int32_t num_tasks);
};

#if defined(CT_USE_RUNTIME) && CT_USE_RUNTIME
/* Written by the server after dlopen; null when nobody provides a runtime. Weak, so that the
 * objects of a library made of several sources (a network's nodes) share one. */
__attribute__((weak)) CT_EXPORT const ct_runtime* crosstune_runtime_v1 = 0;

static inline int32_t ct_num_threads(void) {
  const ct_runtime* rt = crosstune_runtime_v1;
  if (!rt || rt->version < 1u || !rt->num_threads) return 1;
  int32_t n = rt->num_threads(rt);
  return n < 1 ? 1 : n;
}

static inline int32_t ct_parallel_for(ct_parallel_body body, void* closure, int32_t num_tasks) {
  const ct_runtime* rt = crosstune_runtime_v1;
  if (rt && rt->version >= 1u && rt->parallel_launch && num_tasks > 1) {
    return rt->parallel_launch(rt, body, closure, num_tasks);
  }
  for (int32_t t = 0; t < num_tasks; ++t) {
    int32_t r = body(t, num_tasks, closure);
    if (r != 0) return r;
  }
  return 0;
}
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CROSSTUNE_KERNEL_ABI_H_ */
