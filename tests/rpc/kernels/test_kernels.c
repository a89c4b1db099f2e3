/* Kernels for the rpc tests: ordinary C shared libraries (not freestanding) so that the fault
 * kernels can provoke real signals. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "crosstune/kernel_abi.h"

static const char* g_error = "";
static const char* last_error(void) { return g_error; }

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* c = a + b (float32). */
static int32_t vadd(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  const DLTensor* a = args[0].value.v_tensor;
  const DLTensor* b = args[1].value.v_tensor;
  DLTensor* c = args[2].value.v_tensor;
  if (numel(a) != numel(c) || numel(b) != numel(c)) {
    g_error = "vadd: shapes differ";
    return 2;
  }
  const float* pa = (const float*)a->data;
  const float* pb = (const float*)b->data;
  float* pc = (float*)c->data;
  for (int64_t i = 0; i < numel(c); ++i) pc[i] = pa[i] + pb[i];
  return 0;
}

/* x[i] = x[i] * s + k (float32 tensor, float64 s, int64 k). */
static int32_t axpb(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  DLTensor* x = args[0].value.v_tensor;
  double s = args[1].value.v_float64;
  int64_t k = args[2].value.v_int64;
  float* p = (float*)x->data;
  for (int64_t i = 0; i < numel(x); ++i) p[i] = (float)(p[i] * s + (double)k);
  return 0;
}

static int32_t empty(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}

static int32_t fail(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  g_error = "fail: asked to fail";
  return 3;
}

/* Busy-waits for args[0] microseconds (timing tests). */
static int32_t busy_us(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t us = (t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000;
    if (us >= args[0].value.v_int64) return 0;
  }
}

static int32_t spin(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  volatile int forever = 1;
  while (forever) {
  }
  return 0;
}

static int32_t segv(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  /* An address the compiler cannot see is bogus (a constant one draws -Warray-bounds). */
  static volatile uintptr_t bad_address = 16;
  volatile int* p = (volatile int*)bad_address;
  *p = 1;
  return 0;
}

static int32_t trap(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  __builtin_trap();
}

static int32_t fpe(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
#if defined(__x86_64__) || defined(__i386__)
  /* Both operands volatile: gcc turns 1 / x into a compare, which would not trap. */
  volatile int zero = 0;
  volatile int seven = 7;
  volatile int x = seven / zero;
  return x;
#else
  /* ARM integer division by zero yields 0 instead of trapping. */
  raise(SIGFPE);
  return 0;
#endif
}

/* A real bus error: touch a mapping past the end of an empty file. */
static int32_t bus(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  char name[] = "/tmp/crosstune-sigbus-XXXXXX";
  int fd = mkstemp(name);
  if (fd < 0) return 1;
  unlink(name);
  volatile char* p = (volatile char*)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == (volatile char*)MAP_FAILED) return 1;
  p[0] = 1;
  return 0;
}

/* Spins with the timer signal blocked, so only the parent's watchdog can end it. */
static int32_t spin_masked(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_BLOCK, &set, NULL);
  volatile int forever = 1;
  while (forever) {
  }
  return 0;
}

static int32_t quit(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  _exit(3);
}

static const ct_function kFunctions[] = {
    {"vadd", vadd, "ttt"}, {"axpb", axpb, "tfi"},     {"empty", empty, ""},
    {"fail", fail, ""},    {"busy_us", busy_us, "i"}, {"spin", spin, ""},
    {"segv", segv, ""},    {"trap", trap, ""},        {"fpe", fpe, ""},
    {"bus", bus, ""},      {"quit", quit, ""},        {"spin_masked", spin_masked, ""},
};
CT_DEFINE_MODULE("llvm -mtriple=host", kFunctions, last_error)
