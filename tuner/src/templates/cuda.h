// The CUDA templates (cuda_gemm.cc): matmul, conv2d and dense for `cuda -arch=sm_XX` targets,
// made by the CPU templates' factories once the shape is checked, plus the GPU limits their
// configs are checked against.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/messages_fwd.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {

// Shape already checked by MakeMatmulTask: M,N,K.
Expected<std::unique_ptr<Task>> MakeCudaMatmulTask(const std::vector<int64_t>& shape,
                                                   const builder::Target& target,
                                                   const TaskOptions& options);
// Shape already checked by MakeConv2dTask: N,C,H,W,K,R,S,stride,pad[,residual].
Expected<std::unique_ptr<Task>> MakeCudaConv2dTask(const std::vector<int64_t>& shape,
                                                   const builder::Target& target,
                                                   const TaskOptions& options);

// Shape already checked by MakeDenseTask: B,IN,OUT.
Expected<std::unique_ptr<Task>> MakeCudaDenseTask(const std::vector<int64_t>& shape,
                                                  const builder::Target& target,
                                                  const TaskOptions& options);

namespace templates {

// What a CUDA kernel's block may use. From the device's report where it gives one, else the
// documented values of the target's architecture (CUDA C++ Programming Guide, "Technical
// Specifications per Compute Capability").
struct GpuLimits {
  uint32_t threads_per_block = 1024;
  uint32_t shared_per_block = 48 * 1024;  // static __shared__ arrays
  uint32_t registers_per_block = 64 * 1024;
  uint32_t registers_per_thread = 255;
  uint32_t multiprocessors = 0;  // 0: unknown (not part of an architecture)
  std::string source;            // "device <name>" or "sm_90 defaults"
};

GpuLimits ArchGpuLimits(const std::string& cuda_arch);
// The first GPU of `device` when it reports one of the target's architecture family, else the
// architecture's values; a reported value of 0 keeps the architecture's.
GpuLimits DeviceGpuLimits(const std::string& cuda_arch, const msg::DeviceInfo& device);

}  // namespace templates
}  // namespace crosstune::tuner
