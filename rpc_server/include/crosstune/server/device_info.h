// What a device is: architecture, target triple, CPU model and features, cores, memory, OS, GPUs.
#pragma once

#include <string>
#include <vector>

#include "crosstune/messages.h"

namespace crosstune::server {

// Collects the device's description. Architecture and triple come from compile-time macros (under
// qemu-user /proc/cpuinfo describes the host); x86 features come from /proc/cpuinfo flags and ARM
// features from the auxiliary vector (which qemu-user fills for the emulated CPU), both mapped to
// LLVM feature names. GPUs come from the CUDA driver loaded with dlopen: without it the list is
// empty and gpu_status says why. Loads the CUDA driver into the calling process: call it in the
// session child, never in the parent that forks.
msg::DeviceInfo CollectDeviceInfo();

// CollectDeviceInfo in a short-lived child process, for a parent that will fork sessions later
// and so must never load the CUDA driver itself. Falls back to the description without GPUs when
// the child fails.
msg::DeviceInfo CollectDeviceInfoInChild();

// Maps x86 /proc/cpuinfo flag names to LLVM feature names; unknown flags are dropped.
std::vector<std::string> X86FlagsToLlvmFeatures(const std::string& flags_line);

}  // namespace crosstune::server
