/* A module whose constructor never returns: loading it must be bounded like a call. */
#include "crosstune/kernel_abi.h"

__attribute__((constructor)) static void spin_forever(void) {
  volatile int forever = 1;
  while (forever) {
  }
}

static const char* last_error(void) { return ""; }
static int32_t never(const ct_arg* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}
static const ct_function kFunctions[] = {{"never", never, ""}};
CT_DEFINE_MODULE("llvm -mtriple=host", kFunctions, last_error)
