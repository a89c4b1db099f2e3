// The CUDA backend: the driver API through libcuda.so.1 loaded with dlopen, so one server binary
// runs with or without a GPU. Without the driver every entry point reports kNoDevice "no CUDA
// driver"; nothing here links against CUDA.
//
// Thread-safety: the driver is loaded once (thread-safe); a CudaModule is used by the one session
// thread that loaded it, like every Module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "crosstune/package.h"
#include "crosstune/server/module.h"
#include "crosstune/status.h"

namespace crosstune::server {

// Loads the driver, initializes it and makes device 0's primary context current. kNoDevice with
// the reason when there is no driver or no GPU.
Status CudaInit();

// A module from a verified CUDA package: the cubin (or, when the GPU is newer than the cubin's
// major, the PTX) loaded with cuModuleLoadData, one function per manifest entry, launched with the
// manifest's geometry (pkg::Function). Tensor arguments must live on kDLCUDA.
Expected<std::unique_ptr<Module>> LoadCudaModule(const pkg::Manifest& manifest,
                                                 const std::string& package_dir);

// Device memory for kDLCUDA tensors (for the tensor store): cuMemAlloc / cuMemFree / copies.
Expected<void*> CudaAlloc(uint64_t nbytes);
void CudaFree(void* device_ptr);
Status CudaCopyToDevice(void* device_dst, const void* host_src, uint64_t nbytes);
Status CudaCopyToHost(void* host_dst, const void* device_src, uint64_t nbytes);

// Evaluates one launch dimension of pkg::Function ("256", "a3", "a3/256") against int arguments.
Expected<uint32_t> EvalLaunchDim(const std::string& dim, const ct_arg* args, int32_t num_args);

}  // namespace crosstune::server
