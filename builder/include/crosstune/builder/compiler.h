// The compilers behind the builder, used in-process: clang + LLVM 14 + lld for CPU kernels, NVRTC
// for CUDA kernels. The worker pool (builder.h) runs these in its worker processes; call them
// directly only where a crash may take the caller down.
//
// Thread-safety: CompileCpu and CompileCuda may be called from any thread; each compiler is
// serialized by a process-wide mutex (lld's ELF driver keeps global state, and one process per
// core is how the pool gets parallelism).
#pragma once

#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/package.h"
#include "crosstune/status.h"

namespace crosstune::builder {

struct CompileOutput {
  std::string library;                   // .so bytes (CPU) or .cubin bytes (CUDA)
  std::string ptx;                       // CUDA: PTX of the same source, for newer GPUs
  std::vector<pkg::Function> functions;  // from the module table / the kernel annotations
  std::vector<std::string> required_features;
  std::string diagnostics;  // warnings, also on success
};

// Compiles freestanding C (kernel_abi.h module) to a shared library for `target`. The include path
// holds only kernel_abi.h and dlpack/dlpack.h (plus clang's builtin headers). `flags` are extra
// compiler flags: -D, -U, -O0..-O3, -f(no-)fast-math, -W*. Errors are kBuildError with clang's
// diagnostics as the message.
// `file_name` is what diagnostics call the source.
//
// One library from many sources (a network: one translation unit per node, each with its own
// macros and statics): compile each with CompileCpuObject, then the source holding the library's
// module table with CompileCpu(..., link_objects). A node's source renames its own entry point
// (`#define crosstune_module_v1 <unique name>`) so the objects link; kernel_abi.h's runtime
// variable is a weak definition, so every object shares the one the server sets.
Expected<CompileOutput> CompileCpu(const std::string& source, const Target& target,
                                   const std::vector<std::string>& flags,
                                   const std::string& file_name = "kernel.c",
                                   const std::vector<std::string>& link_objects = {});
// Compiles to a relocatable object (CompileOutput::library holds its bytes); no module table is
// read. Same flags and errors as CompileCpu.
Expected<CompileOutput> CompileCpuObject(const std::string& source, const Target& target,
                                         const std::vector<std::string>& flags,
                                         const std::string& file_name = "kernel.c");

// Compiles CUDA C with NVRTC to a cubin for target.cuda_arch (and PTX). Kernels are declared for
// the manifest by comment lines in the source, one per kernel:
//   // crosstune: kernel vadd(ttti) grid=a3/256 block=256
//   // crosstune: kernel mm(ttt) grid=16,16,1 block=16,16 shared=0
// grid/block take up to three comma-separated dims, each a number, "aK" (int argument K) or
// "aK/N" (ceil of argument K over N); missing dims are 1. See pkg::Function.
Expected<CompileOutput> CompileCuda(const std::string& source, const Target& target,
                                    const std::vector<std::string>& flags,
                                    const std::string& file_name = "kernel.cu");

// Parses the "// crosstune: kernel" lines (exposed for tests).
Expected<std::vector<pkg::Function>> ParseCudaKernelAnnotations(const std::string& source);

std::string LlvmVersion();   // "14.0.6"
std::string NvrtcVersion();  // "13.0", or "" when NVRTC is not built in
bool HasNvrtc();
// The folder of the NVRTC library this process uses (its builtins library is loaded from there
// at the first compile); "" without NVRTC.
std::string NvrtcLibraryDir();
// Loads NVRTC's builtins library now (NVRTC loads it by name at its first compile, through the
// dynamic loader's cache and folders): what a process calls before the build box (sandbox.h)
// closes those. Does nothing without NVRTC.
void PreloadNvrtcBuiltins();

// The directory holding kernel_abi.h and dlpack/dlpack.h for kernels.
std::string KernelIncludeDir();

}  // namespace crosstune::builder
