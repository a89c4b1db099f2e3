// The CPU backend: freestanding C compiled in-process by clang/LLVM and linked by lld into a shared
// library that the server dlopens (compiler_cpu.cc).
#include "backend_kinds.h"
#include "crosstune/tensor.h"

namespace crosstune::builder {
namespace {

class CpuBackend final : public TargetBackend {
 public:
  std::string_view kind() const override { return "cpu"; }
  std::string_view source_extension() const override { return ".c"; }
  std::string_view source_language() const override { return "C"; }
  std::string_view example_target() const override { return "rpi4"; }
  Status CheckComplete(const Target& target) const override {
    if (target.triple.empty()) {
      return Status(ErrorCode::kInvalidArgument, "build request has no target");
    }
    return Status::Ok();
  }
  Expected<CompileOutput> Compile(const BuildRequest& r) const override {
    const std::string file = r.source_name.empty() ? "kernel.c" : r.source_name;
    if (r.object_only) return CompileCpuObject(r.source, r.target, r.flags, file);
    return CompileCpu(r.source, r.target, r.flags, file, r.link_objects);
  }
  std::string_view compiler() const override { return "clang+lld"; }
  std::string compiler_version() const override { return LlvmVersion(); }

  std::string_view library_extension() const override { return ".so"; }
  std::string ManifestTriple(const Target& target) const override { return target.triple; }
  std::string ManifestCpu(const Target& target) const override { return target.cpu; }
  bool loads_from_package() const override { return false; }
  bool runs_graphs() const override { return true; }

  DLDevice tensor_device() const override { return DLDevice{kDLCPU, 0}; }
  Status CheckTensorsFit(uint64_t bytes, const msg::DeviceInfo& device,
                         const std::string& what) const override {
    return crosstune::CheckTensorsFit(bytes, device, /*on_gpu=*/false, what);
  }
  Hardware RunsOn(const msg::DeviceInfo& device) const override {
    return Hardware{device.arch, device.cpu_model};
  }
};

}  // namespace

const TargetBackend& CpuTargetBackend() {
  static const CpuBackend kBackend;
  return kBackend;
}

}  // namespace crosstune::builder
