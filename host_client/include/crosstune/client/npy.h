// NumPy .npy files: the host-side format for tensor arguments and results of `crosstune run`.
//
// Reads format versions 1.0, 2.0 and 3.0 and writes 1.0 (2.0 when the header needs it). Only
// little-endian, C-order arrays of f16/f32/f64, i8..i64, u8..u64 and bool are supported; Fortran
// order, big-endian data, other dtypes, truncated data and malformed headers are clear errors.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::client {

struct NpyArray {
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  DLDataType dtype{kDLFloat, 32, 1};
  bool is_bool = false;       // numpy '|b1' (dtype is u8, as crosstune's "bool")
  std::vector<uint8_t> data;  // C order, little-endian, exactly shape x itemsize bytes

  uint64_t num_elements() const;
};

// Parses a whole .npy image; `what` names it in error messages (usually the path).
Expected<NpyArray> ParseNpy(std::string_view bytes, const std::string& what = "npy data");
Expected<NpyArray> ReadNpy(const std::string& path);

// Encodes `nbytes` bytes of C-order little-endian data; nbytes must match shape and dtype.
Expected<std::string> EncodeNpy(const std::vector<int64_t>& shape, DLDataType dtype,
                                const void* data, uint64_t nbytes, bool is_bool = false);
Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, DLDataType dtype,
                const void* data, uint64_t nbytes, bool is_bool = false);
Status WriteNpy(const std::string& path, const NpyArray& array);

// The numpy descr for a dtype ("<f4", "|u1", "|b1"); kInvalidArgument when .npy cannot hold it.
Expected<std::string> NpyDescr(DLDataType dtype, bool is_bool = false);

}  // namespace crosstune::client
