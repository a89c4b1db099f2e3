// One backend per device kind: everything the builder, the tuner and the CLI need to know about a
// kind of target — how to compile for it, how to package the result, where its tensors live on
// the device and which limits apply — behind one interface, looked up from the target.
//
//   const TargetBackend& b = request.target.backend();
//   Expected<CompileOutput> out = b.Compile(request);
//
// Adding a device kind (a second GPU backend, say) is: a TargetKind value and its parse rule in
// target.cc, one backend_<kind>.cc implementing this class, and one row in BackendFor
// (backend.cc). Code that asks a backend needs no change.
//
// Thread-safety: backends are immutable singletons that live for the whole program; every method
// may be called from any thread (Compile serializes inside its compiler, see compiler.h).
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/builder/target.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::builder {

// The hardware a kernel of a kind runs on, as records name it (arch, model).
struct Hardware {
  std::string arch;   // "x86_64", "sm_90"
  std::string model;  // the CPU's or GPU's model name
};

class TargetBackend {
 public:
  virtual ~TargetBackend() = default;

  // --- Compile ---------------------------------------------------------------------------------
  // The package manifest's "kind" ("cpu", "cuda").
  virtual std::string_view kind() const = 0;
  // What a kernel source of this kind ends with (".c", ".cu") and the language it is written in
  // ("C", "CUDA"): sources are named with it, and SourceKind tells a file's kind by it.
  virtual std::string_view source_extension() const = 0;
  virtual std::string_view source_language() const = 0;
  // A --target value of this kind, for messages ("rpi4", "\"cuda -arch=sm_90\"").
  virtual std::string_view example_target() const = 0;
  // kInvalidArgument when `target` lacks what compiling for it needs (a triple, an arch).
  virtual Status CheckComplete(const Target& target) const = 0;
  // Compiles `request` in this process (a pool worker calls it; see BuildInProcess).
  virtual Expected<CompileOutput> Compile(const BuildRequest& request) const = 0;
  // The compiler ("clang+lld", "nvrtc") and its version, as the manifest records them; both are
  // part of the build cache key.
  virtual std::string_view compiler() const = 0;
  virtual std::string compiler_version() const = 0;

  // --- Package ---------------------------------------------------------------------------------
  // The library's extension in a package (".so", ".cubin").
  virtual std::string_view library_extension() const = 0;
  // The manifest's triple and cpu for `target`.
  virtual std::string ManifestTriple(const Target& target) const = 0;
  virtual std::string ManifestCpu(const Target& target) const = 0;
  // True when a module cannot be loaded from its library alone, so a candidate goes to the device
  // as its whole .ctpkg (CUDA: each kernel's launch geometry is in the manifest).
  virtual bool loads_from_package() const = 0;
  // True when a whole model (graph.json + params.bin, run by the server's graph executor) can be
  // built for this kind.
  virtual bool runs_graphs() const = 0;

  // --- Allocate, limits ------------------------------------------------------------------------
  // Where a kernel's tensors are allocated on the device.
  virtual DLDevice tensor_device() const = 0;
  // kLimitExceeded when `bytes` of tensors do not fit the device memory this kind's kernels use;
  // `what` names the tensors in the message.
  virtual Status CheckTensorsFit(uint64_t bytes, const msg::DeviceInfo& device,
                                 const std::string& what) const = 0;
  // The hardware a kernel of this kind runs on when it runs on `device`.
  virtual Hardware RunsOn(const msg::DeviceInfo& device) const = 0;
};

// The backend of a kind; every TargetKind has one.
const TargetBackend& BackendFor(TargetKind kind);
// The same, or null for a value that is no TargetKind (a kind decoded from another host's bytes).
const TargetBackend* FindBackend(TargetKind kind);
// Every kind with a backend, in BackendFor's order.
std::vector<TargetKind> TargetKinds();

// The kind of a kernel source file by its name: the kind whose source_extension the name ends
// with, else kCpu (C is the default language of a kernel).
TargetKind SourceKind(std::string_view file_name);

}  // namespace crosstune::builder
