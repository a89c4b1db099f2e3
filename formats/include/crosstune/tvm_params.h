// Apache TVM's params blob (what relay.save_param_dict / tvm.runtime.save_param_dict write and
// the graph executor's load_params reads), converted both ways with our params.bin (params.h).
//
// The blob, all integers little-endian:
//   u64 magic 0xF7E58D4F05049CB7, u64 reserved (0)
//   u64 count, then count names: u64 length + that many bytes each
//   u64 count again (must equal the names'), then count tensors, each:
//     u64 magic 0xDD5E40F096B4A13F, u64 reserved (0)
//     i32 device_type (1: CPU, the only one a blob holds), i32 device_id
//     i32 ndim, then the dtype: u8 code, u8 bits, u16 lanes
//     i64 shape[ndim]
//     i64 data bytes (= ceil(bits / 8) x elements), then the data, C order
// Tensors belong to the names in order. The reader checks every length against what is left of
// the blob before it allocates or copies, refuses ranks over Limits::kMaxTensorRank, vector
// (lanes > 1) and sub-byte dtypes, a data size that disagrees with dtype and shape, duplicate
// names, and trailing bytes; each refusal names the param (or the offset when no name is known).
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "crosstune/params.h"
#include "crosstune/status.h"

namespace crosstune::pkg {

inline constexpr uint64_t kTvmParamsMagic = 0xF7E58D4F05049CB7ull;
inline constexpr uint64_t kTvmTensorMagic = 0xDD5E40F096B4A13Full;

// Adds every tensor of the blob to `out`, in the blob's order.
Status ImportTvmParams(std::string_view blob, ParamsWriter* out);

// The blob of every tensor of `params`, in params.bin's order.
std::string ExportTvmParams(const ParamsFile& params);

}  // namespace crosstune::pkg
