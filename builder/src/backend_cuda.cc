// The CUDA backend: CUDA C compiled by NVRTC to a cubin (and PTX); each kernel's launch geometry
// comes from its annotation line and travels in the package manifest (compiler_cuda.cc), so the
// server loads a CUDA module from its whole package.
#include "backend_kinds.h"
#include "crosstune/tensor.h"

namespace crosstune::builder {
namespace {

class CudaBackend final : public TargetBackend {
 public:
  std::string_view kind() const override { return "cuda"; }
  std::string_view source_extension() const override { return ".cu"; }
  std::string_view source_language() const override { return "CUDA"; }
  std::string_view example_target() const override { return "\"cuda -arch=sm_90\""; }
  Status CheckComplete(const Target& target) const override {
    if (target.cuda_arch.empty()) {
      return Status(ErrorCode::kInvalidArgument, "build request has no target");
    }
    return Status::Ok();
  }
  // object_only and link_objects are CPU-only (builder.h) and ignored here.
  Expected<CompileOutput> Compile(const BuildRequest& r) const override {
    return CompileCuda(r.source, r.target, r.flags,
                       r.source_name.empty() ? "kernel.cu" : r.source_name);
  }
  std::string_view compiler() const override { return "nvrtc"; }
  std::string compiler_version() const override { return NvrtcVersion(); }

  std::string_view library_extension() const override { return ".cubin"; }
  std::string ManifestTriple(const Target&) const override { return "nvptx64-nvidia-cuda"; }
  std::string ManifestCpu(const Target&) const override { return ""; }
  bool loads_from_package() const override { return true; }
  bool runs_graphs() const override { return false; }

  DLDevice tensor_device() const override { return DLDevice{kDLCUDA, 0}; }
  Status CheckTensorsFit(uint64_t bytes, const msg::DeviceInfo& device,
                         const std::string& what) const override {
    return crosstune::CheckTensorsFit(bytes, device, /*on_gpu=*/true, what);
  }
  // The device's first GPU, which is where CUDA tensors are allocated (tensor_device); a device
  // that reports none is named by its CPU (its session refuses the tensors, by name).
  Hardware RunsOn(const msg::DeviceInfo& device) const override {
    if (device.gpus.empty()) return Hardware{device.arch, device.cpu_model};
    return Hardware{device.gpus.front().arch, device.gpus.front().name};
  }
};

}  // namespace

const TargetBackend& CudaTargetBackend() {
  static const CudaBackend kBackend;
  return kBackend;
}

}  // namespace crosstune::builder
