// params.bin: named tensors in one file that can be memory-mapped and used in place.
//
// Layout (all integers little-endian):
//   0   8 bytes  magic "CTPARAM1"
//   8   u32      format version (1)
//   12  u32      reserved, 0
//   16  64 bytes build_id: SHA-256 hex of the library these params belong to (or zeros)
//   80  u64      index_bytes
//   88  index    JSON: {"tensors": [{"name", "dtype", "shape", "offset", "nbytes"}]}
//   ... data     each tensor at a 64-byte aligned file offset
// The reader refuses a wrong magic or version, an index that is not that JSON, a tensor whose
// nbytes does not match dtype x shape, a misaligned or overlapping offset, duplicate names, and
// data past the end of the file ("truncated").
//
// Thread-safety: ParamsWriter is single-threaded; a ParamsFile is immutable after Open and may be
// read from any thread.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::pkg {

inline constexpr uint64_t kParamsAlignment = 64;
inline constexpr std::string_view kParamsMagic = "CTPARAM1";
inline constexpr uint32_t kParamsVersion = 1;

struct ParamTensor {
  std::string name;
  DLDataType dtype{kDLFloat, 32, 1};
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in the file
  uint64_t nbytes = 0;
};

class ParamsWriter {
 public:
  // The data is copied; the writer holds it until Write.
  Status Add(const std::string& name, DLDataType dtype, const std::vector<int64_t>& shape,
             const void* data, uint64_t nbytes);
  void set_build_id(std::string build_id) { build_id_ = std::move(build_id); }
  Status Write(const std::string& path) const;
  std::string Serialize() const;

 private:
  struct Entry {
    ParamTensor meta;
    std::string bytes;
  };
  std::vector<Entry> entries_;
  std::string build_id_;
};

// A validated, read-only memory map of a params file.
class ParamsFile {
 public:
  static Expected<std::unique_ptr<ParamsFile>> Open(const std::string& path);
  // Validates bytes already in memory (they must outlive the object and be 64-byte aligned for the
  // tensor pointers to be aligned).
  static Expected<std::unique_ptr<ParamsFile>> FromBuffer(const void* data, uint64_t size);
  ~ParamsFile();

  const std::string& build_id() const { return build_id_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor* Find(std::string_view name) const;
  const void* data(const ParamTensor& t) const { return base_ + t.offset; }

 private:
  ParamsFile() = default;
  Status Parse();

  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;  // owned mmap, null for FromBuffer
  std::string build_id_;
  std::vector<ParamTensor> tensors_;
};

// Rewrites the build_id in a serialized params file (the packager stamps the library's id).
Expected<std::string> RestampParams(std::string_view params, const std::string& build_id);

}  // namespace crosstune::pkg
