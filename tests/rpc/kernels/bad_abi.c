/* A module whose table claims an ABI version the server does not speak. */
#include "crosstune/kernel_abi.h"

static int32_t nop(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}
static const ct_function kFunctions[] = {{"nop", nop, ""}};
static const ct_module kTable = {99u, "llvm", 1, kFunctions, 0};
CT_EXTERN_C CT_EXPORT const ct_module* crosstune_module_v1(void) { return &kTable; }
