/* Kernels that use the server's parallel launch (kernel_abi.h, CT_USE_RUNTIME). Ordinary C so the
 * crash kernel can provoke a real signal from a worker thread. */
#include <signal.h>

#define CT_USE_RUNTIME 1
#include "crosstune/kernel_abi.h"

static const char* g_error = "";
static const char* last_error(void) { return g_error; }

/* out[0] = ct_num_threads() (int64 tensor of 1). */
static int32_t num_threads(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  *(int64_t*)args[0].value.v_tensor->data = ct_num_threads();
  return 0;
}

/* Every task waits until all have arrived: only passes when `tasks` threads run at once. */
struct meet {
  int32_t arrived;
};
static int32_t meet_body(int32_t task, int32_t num_tasks, void* closure) {
  (void)task;
  struct meet* m = (struct meet*)closure;
  __atomic_add_fetch(&m->arrived, 1, __ATOMIC_SEQ_CST);
  /* A bounded wait (about seconds on any machine): a task alone gives up instead of hanging. */
  for (long long spin = 0; spin < 2000000000LL; ++spin) {
    if (__atomic_load_n(&m->arrived, __ATOMIC_SEQ_CST) >= num_tasks) return 0;
  }
  g_error = "rendezvous: the tasks did not all run at the same time";
  return 5;
}
static int32_t rendezvous(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  struct meet m = {0};
  return ct_parallel_for(meet_body, &m, (int32_t)args[0].value.v_int64);
}

/* out[i] = sum of in[j] * (j % 7) over j in task i's share, and each task's share is launched
 * again from inside (a nested launch, which runs serially). int64 counts what ran: out[tasks]
 * counts every task once. */
struct partial {
  const float* in;
  int64_t n;
  double* out;
  int32_t nested_depth_seen;
};
struct inner {
  const float* in;
  int64_t lo, hi;
  double sum;
};
static int32_t inner_body(int32_t task, int32_t num_tasks, void* closure) {
  struct inner* c = (struct inner*)closure;
  int64_t len = c->hi - c->lo;
  int64_t lo = c->lo + len * task / num_tasks, hi = c->lo + len * (task + 1) / num_tasks;
  for (int64_t j = lo; j < hi; ++j) c->sum += (double)c->in[j] * (double)(j % 7);
  return 0;
}
static int32_t partial_body(int32_t task, int32_t num_tasks, void* closure) {
  struct partial* p = (struct partial*)closure;
  struct inner c = {p->in, p->n * task / num_tasks, p->n * (task + 1) / num_tasks, 0.0};
  /* Nested: serial on this thread, so the unsynchronised sum is safe. */
  int32_t r = ct_parallel_for(inner_body, &c, 3);
  p->out[task] = c.sum;
  return r;
}
static int32_t partial_sums(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  const DLTensor* in = args[0].value.v_tensor;
  DLTensor* out = args[1].value.v_tensor;
  struct partial p = {(const float*)in->data, in->shape[0], (double*)out->data, 0};
  return ct_parallel_for(partial_body, &p, (int32_t)out->shape[0]);
}

/* Task `bad` fails with 9; the others succeed. */
static int32_t fail_body(int32_t task, int32_t num_tasks, void* closure) {
  (void)num_tasks;
  return task == *(int64_t*)closure ? 9 : 0;
}
static int32_t fail_one(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  int64_t bad = args[0].value.v_int64;
  int32_t r = ct_parallel_for(fail_body, &bad, 8);
  if (r) g_error = "fail_one: a task failed";
  return r;
}

/* The last task crashes (SIGSEGV); with several threads, usually on a worker. */
static int32_t crash_body(int32_t task, int32_t num_tasks, void* closure) {
  (void)closure;
  if (task == num_tasks - 1) raise(SIGSEGV);
  return 0;
}
static int32_t crash_in_task(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return ct_parallel_for(crash_body, 0, 4);
}

static const ct_function kFunctions[] = {
    {"num_threads", num_threads, "t"},    {"rendezvous", rendezvous, "i"},
    {"partial_sums", partial_sums, "tt"}, {"fail_one", fail_one, "i"},
    {"crash_in_task", crash_in_task, ""},
};
CT_DEFINE_MODULE("llvm", kFunctions, last_error)
