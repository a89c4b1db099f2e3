// Tensors a session has allocated on the device, described by DLTensors and looked up by id:
// kDLCPU tensors are 64-byte aligned host memory (from 1 MiB up mapped and populated at allocation,
// so first-touch faults stay out of timed kernels and copies), kDLCUDA tensors device memory of GPU
// 0 (through the CUDA backend). The total bytes are bounded per session.
//
// Not thread-safe: owned by the session thread.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

class TensorStore {
 public:
  explicit TensorStore(uint64_t max_total_bytes) : max_total_bytes_(max_total_bytes) {}

  // kLimitExceeded past the session's budget; kNoDevice for a device this server cannot allocate
  // on (kDLCUDA without a driver or GPU, any other device type).
  Expected<msg::TensorRef> Alloc(const msg::TensorAllocRequest& request);
  Status Free(uint32_t id);
  // kNotFound for an unknown id.
  Expected<DLTensor*> Get(uint32_t id);
  // Checks that [offset, offset + nbytes) lies inside tensor `id` and returns its first byte: a
  // host pointer, or a device address when `on_gpu`.
  struct Span {
    char* data = nullptr;
    bool on_gpu = false;
  };
  Expected<Span> Range(uint32_t id, uint64_t offset, uint64_t nbytes);
  // Tensor `id`'s bytes in host memory; empty for a GPU tensor or an unknown id.
  std::span<const char> HostBytes(uint32_t id) const;

  uint64_t total_bytes() const { return total_bytes_; }

 private:
  struct Entry {
    std::vector<int64_t> shape;
    DLTensor tensor{};
    uint64_t nbytes = 0;
    // How the memory was allocated, to free it the same way. No initializers: they would make
    // the deleter not default-constructible inside the enclosing class.
    enum class Kind { kMalloc, kMmap, kCuda };
    struct FreeDeleter {
      Kind kind;
      uint64_t bytes;  // of a kMmap mapping
      void operator()(void* p) const;
    };
    std::unique_ptr<void, FreeDeleter> data;
    bool on_gpu = false;
  };
  uint64_t max_total_bytes_;
  uint64_t total_bytes_ = 0;
  uint32_t next_id_ = 1;
  std::map<uint32_t, std::unique_ptr<Entry>> tensors_;
};

}  // namespace crosstune::server
