/* Sample crosstune CPU module: vadd and matmul on f32 tensors.
 *
 * Freestanding C (no libc), so one source builds for any LLVM target:
 *   clang-14 --target=aarch64-linux-gnu -ffreestanding -nostdlib -fPIC -O3 \
 *       -I common/include -I <dir holding dlpack/> -c sample.c -o sample.o
 *   ld.lld -shared sample.o -o sample.so
 * (armhf: --target=armv7a-linux-gnueabihf -mfloat-abi=hard -mfpu=neon).
 *
 *   vadd(a[n], b[n], c[n]):            c = a + b
 *   matmul(a[m,k], b[k,n], c[m,n]):    c = a @ b
 */
#include "crosstune/kernel_abi.h"

#ifndef CT_KERNEL_TARGET
#define CT_KERNEL_TARGET "llvm"
#endif

static const char* g_error = "";
static const char* LastError(void) { return g_error; }

static int32_t Fail(const char* why) {
  g_error = why;
  return 1;
}

static int IsF32(const DLTensor* t) {
  return t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1 && t->strides == 0;
}

static float* Data(const DLTensor* t) { return (float*)((char*)t->data + t->byte_offset); }

static int64_t NumElements(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

static int32_t Vadd(const ct_arg* args, int32_t num_args) {
  if (num_args != 3) return Fail("vadd takes 3 tensors");
  const DLTensor* a = args[0].value.v_tensor;
  const DLTensor* b = args[1].value.v_tensor;
  const DLTensor* c = args[2].value.v_tensor;
  if (!IsF32(a) || !IsF32(b) || !IsF32(c)) return Fail("vadd wants compact f32 tensors");
  int64_t n = NumElements(c);
  if (NumElements(a) != n || NumElements(b) != n) return Fail("vadd: sizes differ");
  const float* restrict pa = Data(a);
  const float* restrict pb = Data(b);
  float* restrict pc = Data(c);
  for (int64_t i = 0; i < n; ++i) pc[i] = pa[i] + pb[i];
  return 0;
}

static int32_t Matmul(const ct_arg* args, int32_t num_args) {
  if (num_args != 3) return Fail("matmul takes 3 tensors");
  const DLTensor* a = args[0].value.v_tensor;
  const DLTensor* b = args[1].value.v_tensor;
  const DLTensor* c = args[2].value.v_tensor;
  if (!IsF32(a) || !IsF32(b) || !IsF32(c)) return Fail("matmul wants compact f32 tensors");
  if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2) return Fail("matmul wants 2-d tensors");
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  if (b->shape[0] != k || c->shape[0] != m || c->shape[1] != n)
    return Fail("matmul: shapes differ");
  const float* restrict pa = Data(a);
  const float* restrict pb = Data(b);
  float* restrict pc = Data(c);
  /* i-k-j order: the inner loop runs along rows of b and c, which vectorizes. */
  for (int64_t i = 0; i < m; ++i) {
    float* restrict row = pc + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      float av = pa[i * k + p];
      const float* restrict brow = pb + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
  return 0;
}

static const ct_function kFunctions[] = {
    {"vadd", Vadd, "ttt"},
    {"matmul", Matmul, "ttt"},
};
CT_DEFINE_MODULE(CT_KERNEL_TARGET, kFunctions, LastError)
