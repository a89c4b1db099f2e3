// Checked arithmetic for sizes that come from outside (a model file's dims, a graph.json shape, a
// params.bin header): every product of dimensions and every sum of byte counts that a file can
// choose goes through these, so none wraps into a small, plausible number.
//
//   uint64_t n;
//   if (!CheckedElements(shape, kMaxCheckedSize, &n)) return error;   // n fits, as do its parts
//
// No __int128: the server also builds for 32-bit ARM. Header-only, no state: thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace crosstune {

// The largest element or byte count the checks below accept by default (2^62): far past any
// memory, and small enough that a few sums of such counts and an int64 cast stay exact.
inline constexpr uint64_t kMaxCheckedSize = uint64_t{1} << 62;

// *out = a * b, or false when the product passes `limit`.
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out, uint64_t limit = kMaxCheckedSize) {
  uint64_t p = 0;
  if (__builtin_mul_overflow(a, b, &p) || p > limit) return false;
  *out = p;
  return true;
}

// *out = a + b, or false when the sum passes `limit`.
inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out, uint64_t limit = kMaxCheckedSize) {
  uint64_t s = 0;
  if (__builtin_add_overflow(a, b, &s) || s > limit) return false;
  *out = s;
  return true;
}

// The number of elements of `shape` times `scale` (an element's bytes; 1 for a count), or false
// when a dimension is negative or the product passes `limit`. A zero dimension counts as one
// while checking, so that every partial product of the dimensions (the strides and outer/inner
// extents a kernel forms) is also within `limit`; *out is still the true product (0).
inline bool CheckedElements(const std::vector<int64_t>& shape, uint64_t scale, uint64_t* out,
                            uint64_t limit = kMaxCheckedSize) {
  uint64_t bound = scale == 0 ? 1 : scale;
  bool empty = scale == 0;
  if (bound > limit) return false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (!CheckedMul(bound, static_cast<uint64_t>(d), &bound, limit)) return false;
  }
  *out = empty ? 0 : bound;
  return true;
}

}  // namespace crosstune
