#include "crosstune/server/tensor_store.h"

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "crosstune/tensor.h"
#include "cuda_backend.h"

namespace crosstune::server {

namespace {

// Tensors this big are mapped and populated at allocation: the page faults of first touch then
// happen here, not inside a timed kernel or a measured copy.
constexpr uint64_t kPopulateMinBytes = uint64_t{1} << 20;

}  // namespace

void TensorStore::Entry::FreeDeleter::operator()(void* p) const {
  switch (kind) {
    case Kind::kMalloc:
      std::free(p);
      break;
    case Kind::kMmap:
      ::munmap(p, bytes);
      break;
    case Kind::kCuda:
      CudaFree(p);
      break;
  }
}

Expected<msg::TensorRef> TensorStore::Alloc(const msg::TensorAllocRequest& request) {
  const bool on_gpu = request.device_type == kDLCUDA;
  if (!on_gpu && request.device_type != kDLCPU) {
    return Status(ErrorCode::kNoDevice,
                  "this server allocates tensors on the CPU (device type 1) "
                  "and CUDA GPU 0 (device type 2), not device type " +
                      std::to_string(request.device_type));
  }
  if (request.device_id != 0) {
    return Status(ErrorCode::kNoDevice,
                  "no device " + std::to_string(request.device_id) + " (only device 0 is served)");
  }
  DLDataType dtype{request.dtype_code, request.dtype_bits, request.dtype_lanes};
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, TensorBytes(request.shape, dtype));
  if (nbytes > max_total_bytes_ || total_bytes_ > max_total_bytes_ - nbytes) {
    return Status(ErrorCode::kLimitExceeded,
                  "tensor of " + std::to_string(nbytes) +
                      " bytes would take the session past its " + std::to_string(max_total_bytes_) +
                      "-byte tensor limit (" + std::to_string(total_bytes_) + " in use)");
  }
  constexpr uint64_t kAlign = 64;
  uint64_t alloc = (std::max<uint64_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
  // Sizes are 64-bit on the wire; on a 32-bit board mmap/malloc take a 32-bit size_t, and a
  // 4 GiB + 1 MiB request would map 1 MiB while every bounds check used the full size. Nothing
  // larger than the address space can be mapped, so refuse it here. (Every later copy is
  // bounded by nbytes, so it fits size_t too.)
  if (alloc > static_cast<uint64_t>(std::numeric_limits<ptrdiff_t>::max())) {
    return Status(ErrorCode::kLimitExceeded,
                  "tensor of " + std::to_string(nbytes) + " bytes does not fit the " +
                      std::to_string(sizeof(void*) * 8) + "-bit address space of this device");
  }
  void* p = nullptr;
  Entry::Kind kind = Entry::Kind::kMalloc;
  if (on_gpu) {
    CT_ASSIGN_OR_RETURN(p, CudaAlloc(alloc));
    kind = Entry::Kind::kCuda;
  } else if (alloc >= kPopulateMinBytes) {
    p = ::mmap(nullptr, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
               -1, 0);
    if (p == MAP_FAILED) p = nullptr;
    kind = Entry::Kind::kMmap;
  } else {
    // The heap may hand back what this session freed, or what the server held before it forked
    // the session: zeroed, so a copy out of a tensor never written shows none of it. (Mapped
    // tensors are fresh pages, zero already.)
    p = std::aligned_alloc(kAlign, alloc);
    if (p) std::memset(p, 0, alloc);
  }
  if (!p) {
    return Status(ErrorCode::kLimitExceeded,
                  "out of memory allocating a tensor of " + std::to_string(nbytes) + " bytes");
  }
  auto e = std::make_unique<Entry>();
  e->data = std::unique_ptr<void, Entry::FreeDeleter>(p, Entry::FreeDeleter{kind, alloc});
  e->on_gpu = on_gpu;
  e->shape = request.shape;
  e->nbytes = nbytes;
  e->tensor.data = p;
  e->tensor.device = DLDevice{on_gpu ? kDLCUDA : kDLCPU, 0};
  e->tensor.ndim = static_cast<int32_t>(e->shape.size());
  e->tensor.dtype = dtype;
  e->tensor.shape = e->shape.data();
  e->tensor.strides = nullptr;
  e->tensor.byte_offset = 0;
  uint32_t id = next_id_++;
  total_bytes_ += nbytes;
  tensors_.emplace(id, std::move(e));
  return msg::TensorRef{id, nbytes};
}

Status TensorStore::Free(uint32_t id) {
  auto it = tensors_.find(id);
  if (it == tensors_.end()) {
    return Status(ErrorCode::kNotFound, "no tensor " + std::to_string(id) + " in this session");
  }
  total_bytes_ -= it->second->nbytes;
  tensors_.erase(it);
  return Status::Ok();
}

Expected<DLTensor*> TensorStore::Get(uint32_t id) {
  auto it = tensors_.find(id);
  if (it == tensors_.end()) {
    return Status(ErrorCode::kNotFound, "no tensor " + std::to_string(id) + " in this session");
  }
  return &it->second->tensor;
}

std::span<const char> TensorStore::HostBytes(uint32_t id) const {
  auto it = tensors_.find(id);
  if (it == tensors_.end() || it->second->on_gpu) return {};
  return {static_cast<const char*>(it->second->data.get()),
          static_cast<size_t>(it->second->nbytes)};
}

Expected<TensorStore::Span> TensorStore::Range(uint32_t id, uint64_t offset, uint64_t nbytes) {
  auto it = tensors_.find(id);
  if (it == tensors_.end()) {
    return Status(ErrorCode::kNotFound, "no tensor " + std::to_string(id) + " in this session");
  }
  uint64_t size = it->second->nbytes;
  if (offset > size || nbytes > size - offset) {
    return Status(ErrorCode::kInvalidArgument, "copy of " + std::to_string(nbytes) +
                                                   " bytes at offset " + std::to_string(offset) +
                                                   " is outside tensor " + std::to_string(id) +
                                                   " of " + std::to_string(size) + " bytes");
  }
  return Span{static_cast<char*>(it->second->data.get()) + offset, it->second->on_gpu};
}

}  // namespace crosstune::server
