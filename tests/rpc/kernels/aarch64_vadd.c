/* Freestanding vadd for aarch64: refused with WrongArch on an x86 server, run for real under qemu.
 */
#include "crosstune/kernel_abi.h"

static int32_t vadd(const ct_arg* args, int32_t num_args) {
  (void)num_args;
  const DLTensor* c = args[2].value.v_tensor;
  const float* a = (const float*)args[0].value.v_tensor->data;
  const float* b = (const float*)args[1].value.v_tensor->data;
  float* out = (float*)c->data;
  int64_t n = 1;
  for (int i = 0; i < c->ndim; ++i) n *= c->shape[i];
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  return 0;
}
static const ct_function kFunctions[] = {{"vadd", vadd, "ttt"}};
CT_DEFINE_MODULE("llvm -mtriple=aarch64-linux-gnu", kFunctions, 0)
