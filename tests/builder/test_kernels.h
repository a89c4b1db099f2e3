// Kernel sources shared by the builder tests.
#pragma once

namespace crosstune::testing {

// vadd(a, b, c, n): c = a + b over n float32 elements; scale(x, n, s): x *= s.
inline constexpr const char* kVaddSource = R"(
#include <stdint.h>
#include "kernel_abi.h"

static int32_t vadd(const ct_arg* args, int32_t num_args) {
  if (num_args != 4) return 1;
  const float* a = (const float*)args[0].value.v_tensor->data;
  const float* b = (const float*)args[1].value.v_tensor->data;
  float* c = (float*)args[2].value.v_tensor->data;
  int64_t n = args[3].value.v_int64;
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return 0;
}

static int32_t scale(const ct_arg* args, int32_t num_args) {
  if (num_args != 3) return 1;
  float* x = (float*)args[0].value.v_tensor->data;
  int64_t n = args[1].value.v_int64;
  float s = (float)args[2].value.v_float64;
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
  return 0;
}

static const ct_function kFns[] = {{"vadd", vadd, "ttti"}, {"scale", scale, "tif"}};
CT_DEFINE_MODULE("crosstune test kernel", kFns, 0)
)";

inline constexpr const char* kCudaVaddSource = R"(
// crosstune: kernel vadd(ttti) grid=a3/256 block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)";

}  // namespace crosstune::testing
