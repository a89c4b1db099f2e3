// Tensors a session has allocated on the device: 64-byte aligned host memory described by a
// DLTensor, looked up by id. The total bytes are bounded per session.
//
// Not thread-safe: owned by the session thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

class TensorStore {
 public:
  explicit TensorStore(uint64_t max_total_bytes) : max_total_bytes_(max_total_bytes) {}

  // kLimitExceeded past the session's budget; kNoDevice for a device this server cannot allocate
  // on (only kDLCPU today; a CUDA backend adds device memory here).
  Expected<msg::TensorRef> Alloc(const msg::TensorAllocRequest& request);
  Status Free(uint32_t id);
  // kNotFound for an unknown id.
  Expected<DLTensor*> Get(uint32_t id);
  // Checks that [offset, offset + nbytes) lies inside tensor `id` and returns its first byte.
  Expected<char*> Range(uint32_t id, uint64_t offset, uint64_t nbytes);

  uint64_t total_bytes() const { return total_bytes_; }

 private:
  struct Entry {
    std::vector<int64_t> shape;
    DLTensor tensor{};
    uint64_t nbytes = 0;
    struct FreeDeleter {
      void operator()(void* p) const;
    };
    std::unique_ptr<void, FreeDeleter> data;
  };
  uint64_t max_total_bytes_;
  uint64_t total_bytes_ = 0;
  uint32_t next_id_ = 1;
  std::map<uint32_t, std::unique_ptr<Entry>> tensors_;
};

}  // namespace crosstune::server
