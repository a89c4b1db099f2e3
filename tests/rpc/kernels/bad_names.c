/* A module whose function table names a function in Latin-1: the loader refuses it rather than
 * put bytes that are not UTF-8 into its reply. */
#include "crosstune/kernel_abi.h"

static const char* last_error(void) { return ""; }
static int32_t f(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}
static const ct_function kFunctions[] = {{"gr\xfc\xdf", f, ""}};
CT_DEFINE_MODULE("llvm -mtriple=host", kFunctions, last_error)
