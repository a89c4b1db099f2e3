// Tensor descriptors on DLPack's vocabulary: dtype names, shapes, byte sizes with limits.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune {

namespace msg {
struct DeviceInfo;
}

// "f32"/"float32", "f64", "f16", "bf16", "i8".."i64", "u8".."u64", "bool".
Expected<DLDataType> ParseDType(const std::string& name);
std::string DTypeName(DLDataType t);  // "f32"
bool operator==(const DLDataType& a, const DLDataType& b);

// Checked product of shape and element size: negative dims, rank over Limits::kMaxTensorRank or
// overflow are kInvalidArgument / kLimitExceeded.
Expected<uint64_t> TensorBytes(const std::vector<int64_t>& shape, DLDataType dtype);

// "1024x16xf32" -> shape {1024, 16}, dtype f32.
struct TensorSpec {
  std::vector<int64_t> shape;
  DLDataType dtype{kDLFloat, 32, 1};
};
Expected<TensorSpec> ParseTensorSpec(const std::string& text);
std::string ShapeString(const std::vector<int64_t>& shape);  // "1024x16"

// 1536 -> "1.5 KiB"; under 1 KiB "512 B".
std::string ByteSize(uint64_t bytes);

// Whether tensors of `bytes` in all can be held by one session on `device`, checked by a client
// before it allocates or generates anything: they must fit the server's tensor limit per session
// (--max-tensor-bytes, DeviceInfo::max_tensor_bytes) and the memory they would live in (the first
// GPU's when `on_gpu`, else the device's). kLimitExceeded names the size and the limit, after
// `what` ("matmul 512,512,512", "--arg tensors"). A limit the device does not report (0) is not
// checked.
Status CheckTensorsFit(uint64_t bytes, const msg::DeviceInfo& device, bool on_gpu,
                       const std::string& what);

}  // namespace crosstune
