/* A module whose crosstune_runtime_v1 is a function, not the pointer variable kernel_abi.h
 * defines: the server must refuse it rather than write over its code. */
#include "crosstune/kernel_abi.h"

CT_EXTERN_C CT_EXPORT int crosstune_runtime_v1(void) { return 0; }

static int32_t noop(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}

static const ct_function kFunctions[] = {{"noop", noop, ""}};
CT_DEFINE_MODULE("llvm", kFunctions, 0)
