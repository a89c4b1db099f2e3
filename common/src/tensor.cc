#include "crosstune/tensor.h"

#include <fmt/format.h>

#include <map>

#include "crosstune/checked_math.h"
#include "crosstune/messages.h"
#include "crosstune/protocol.h"

namespace crosstune {

bool operator==(const DLDataType& a, const DLDataType& b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

Expected<DLDataType> ParseDType(const std::string& name) {
  static const std::map<std::string, DLDataType> kNames = {
      {"f16", {kDLFloat, 16, 1}},   {"float16", {kDLFloat, 16, 1}},
      {"f32", {kDLFloat, 32, 1}},   {"float32", {kDLFloat, 32, 1}},
      {"f64", {kDLFloat, 64, 1}},   {"float64", {kDLFloat, 64, 1}},
      {"bf16", {kDLBfloat, 16, 1}}, {"bfloat16", {kDLBfloat, 16, 1}},
      {"i8", {kDLInt, 8, 1}},       {"int8", {kDLInt, 8, 1}},
      {"i16", {kDLInt, 16, 1}},     {"int16", {kDLInt, 16, 1}},
      {"i32", {kDLInt, 32, 1}},     {"int32", {kDLInt, 32, 1}},
      {"i64", {kDLInt, 64, 1}},     {"int64", {kDLInt, 64, 1}},
      {"u8", {kDLUInt, 8, 1}},      {"uint8", {kDLUInt, 8, 1}},
      {"u16", {kDLUInt, 16, 1}},    {"uint16", {kDLUInt, 16, 1}},
      {"u32", {kDLUInt, 32, 1}},    {"uint32", {kDLUInt, 32, 1}},
      {"u64", {kDLUInt, 64, 1}},    {"uint64", {kDLUInt, 64, 1}},
      {"bool", {kDLUInt, 8, 1}},
  };
  auto it = kNames.find(name);
  if (it == kNames.end()) {
    return Status(ErrorCode::kInvalidArgument,
                  "unknown dtype '" + name +
                      "' (valid: f16 f32 f64 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool)");
  }
  return it->second;
}

std::string DTypeName(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLFloat:
      base = "f";
      break;
    case kDLInt:
      base = "i";
      break;
    case kDLUInt:
      base = "u";
      break;
    case kDLBfloat:
      base = "bf";
      break;
    default:
      base = "t" + std::to_string(t.code) + "_";
      break;
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

Expected<uint64_t> TensorBytes(const std::vector<int64_t>& shape, DLDataType dtype) {
  if (shape.size() > static_cast<size_t>(Limits::kMaxTensorRank)) {
    return Status(ErrorCode::kLimitExceeded, "tensor rank " + std::to_string(shape.size()) +
                                                 " is over the limit of " +
                                                 std::to_string(Limits::kMaxTensorRank));
  }
  // DLPack 0.6's type codes: int, uint, float, opaque handle, bfloat16, complex.
  const bool known_code = dtype.code <= kDLComplex;
  if (!known_code || dtype.bits == 0 || dtype.bits % 8 != 0 || dtype.bits > 128 ||
      dtype.lanes == 0) {
    return Status(ErrorCode::kInvalidArgument, "unsupported dtype " + DTypeName(dtype));
  }
  for (int64_t d : shape) {
    if (d < 0) return Status(ErrorCode::kInvalidArgument, "negative dimension in tensor shape");
  }
  uint64_t n = 0;
  if (!CheckedElements(shape, static_cast<uint64_t>(dtype.bits / 8) * dtype.lanes, &n)) {
    return Status(ErrorCode::kLimitExceeded, "tensor size overflows");
  }
  return n;
}

Expected<TensorSpec> ParseTensorSpec(const std::string& text) {
  TensorSpec spec;
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t x = text.find('x', start);
    parts.push_back(text.substr(start, x - start));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (parts.size() < 2) {
    return Status(ErrorCode::kInvalidArgument,
                  "bad tensor spec '" + text + "', expected e.g. 1024x16xf32");
  }
  CT_ASSIGN_OR_RETURN(spec.dtype, ParseDType(parts.back()));
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p.empty() || p.find_first_not_of("0123456789") != std::string::npos || p.size() > 18) {
      return Status(ErrorCode::kInvalidArgument,
                    "bad dimension '" + p + "' in tensor spec '" + text + "'");
    }
    spec.shape.push_back(std::stoll(p));
  }
  CT_RETURN_IF_ERROR(TensorBytes(spec.shape, spec.dtype).status());
  return spec;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += "x";
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string ByteSize(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

Status CheckTensorsFit(uint64_t bytes, const msg::DeviceInfo& device, bool on_gpu,
                       const std::string& what) {
  auto over = [&](const std::string& limit) {
    return Status(ErrorCode::kLimitExceeded, fmt::format("{}: {} of tensors ({} bytes) is over {}",
                                                         what, ByteSize(bytes), bytes, limit));
  };
  if (device.max_tensor_bytes > 0 && bytes > device.max_tensor_bytes) {
    return over(fmt::format("the server's limit of {} per session (--max-tensor-bytes {})",
                            ByteSize(device.max_tensor_bytes), device.max_tensor_bytes));
  }
  const uint64_t memory =
      on_gpu ? (device.gpus.empty() ? 0 : device.gpus.front().memory_bytes) : device.memory_bytes;
  if (memory > 0 && bytes > memory) {
    return over(fmt::format("the {}'s memory of {} ({} bytes)", on_gpu ? "GPU" : "device",
                            ByteSize(memory), memory));
  }
  return Status::Ok();
}

}  // namespace crosstune
