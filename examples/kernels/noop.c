/* The empty remote function crosstune-bench-rpc calls to measure one RPC round trip. Freestanding;
 * built like sample.c. */
#include "crosstune/kernel_abi.h"

#ifndef CT_KERNEL_TARGET
#define CT_KERNEL_TARGET "llvm"
#endif

static int32_t Noop(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}

static const ct_function kFunctions[] = {{"noop", Noop, ""}};
CT_DEFINE_MODULE(CT_KERNEL_TARGET, kFunctions, 0)
