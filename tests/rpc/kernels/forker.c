/* A kernel that forks a process which outlives it: pids(t) writes the session process's pid to
 * t[0] and the forked process's pid to t[1] (int64). */
#define _GNU_SOURCE
#include <unistd.h>

#include "crosstune/kernel_abi.h"

static const char* last_error(void) { return ""; }
static int32_t pids(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  int64_t* out = (int64_t*)args[0].value.v_tensor->data;
  out[0] = getpid();
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    for (;;) pause();
  }
  out[1] = child;
  return 0;
}
static const ct_function kFunctions[] = {{"pids", pids, "t"}};
CT_DEFINE_MODULE("llvm -mtriple=host", kFunctions, last_error)
