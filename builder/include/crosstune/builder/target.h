// Compile targets: TVM-style target strings, named presets, and `auto` from a device's info.
//
//   llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon,-crc
//   cuda -arch=sm_90
//   rpi4, x86-avx2, h100, ...        (Presets())
//
// Triples are x86_64-linux-gnu, aarch64-linux-gnu, armv7-linux-gnueabihf (hard-float) and
// riscv64-linux-gnu. CPU and feature names are LLVM's, checked against LLVM's own tables for the
// triple; a refusal lists the valid names.
//
// Thread-safety: all functions are safe to call from any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::builder {

// A kind of device; each has one TargetBackend (backend.h) that holds what is specific to it.
enum class TargetKind { kCpu, kCuda };

class TargetBackend;

struct Target {
  TargetKind kind = TargetKind::kCpu;
  std::string triple;              // canonical: "aarch64-linux-gnu"
  std::string cpu;                 // LLVM cpu name, "generic" when not given
  std::vector<std::string> attrs;  // "+neon", "-avx512f", in the order given
  std::string cuda_arch;           // "sm_90"

  // Canonical string: "llvm -mtriple=... -mcpu=... [-mattr=...]" or "cuda -arch=sm_90".
  std::string ToString() const;
  // "x86_64", "aarch64", "armv7", "riscv64" or the CUDA arch.
  std::string Arch() const;
  bool is_cuda() const { return kind == TargetKind::kCuda; }
  // What compiling, packaging and running for this target takes (backend.h).
  const TargetBackend& backend() const;
};

// Parses a target string or preset name and checks cpu and features with LLVM (see
// ValidateTarget). "auto" is refused here: it needs a device (TargetFromDevice).
Expected<Target> ParseTarget(std::string_view text);

// The target that uses exactly what the device reports: its triple, LLVM's baseline cpu for the
// arch, and +feature for each reported ISA feature LLVM knows; for kCuda, a CUDA target for its
// first GPU (kNoDevice when it has none).
Expected<Target> TargetFromDevice(const msg::DeviceInfo& device,
                                  TargetKind kind = TargetKind::kCpu);

// (name, target string) of every preset, in a stable order.
const std::vector<std::pair<std::string, std::string>>& Presets();

// kInvalidArgument when LLVM does not know the cpu or a feature for the triple; the message lists
// the valid names.
Status ValidateTarget(const Target& target);

// The ISA features (LLVM names) compiled code for this target may use and a device must have, as
// recorded in the package manifest. Baseline features every device of the arch has are left out.
Expected<std::vector<std::string>> RequiredFeatures(const Target& target);

// cc1 arguments for the triple's ABI and default features (what the clang driver would add):
// -target-cpu, -target-feature, -target-abi, -mfloat-abi.
std::vector<std::string> Cc1TargetArgs(const Target& target);

}  // namespace crosstune::builder
