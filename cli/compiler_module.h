// The compiler module: the `crosstune` commands that need a compiler (build, tune, log, export,
// replay, records: crosstune::builder and crosstune::tuner, hence LLVM, clang, NVRTC and
// XGBoost) are a shared module, libcrosstune-cli-build.so. The `crosstune` binary links none of
// those: it lists these commands in `crosstune --help` from the table below and loads the module
// only when one of them runs, so every other command starts without loading a compiler (~33 ms
// on its own).
//
// A CLI::App crosses the boundary, so both sides must come from one build: the module says which
// crosstune and CLI11 it was built with, and the binary refuses any other.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string_view>

#include "crosstune/status.h"

namespace crosstune::cli {

struct CompilerCommand {
  const char* name;
  const char* help;  // the line `crosstune --help` shows; the module registers the same
};

inline constexpr CompilerCommand kCompilerCommands[] = {
    {"build", "Compile a kernel for a target into a .ctpkg package"},
    {"tune", "search a kernel template's config space on devices"},
    {"log", "read tuning record logs"},
    {"export", "build a log's best config into a .ctpkg"},
    {"replay", "compare tuners on a recorded space (our full-space log or a Kernel Tuner cache)"},
    {"import", "read an ONNX model: its inputs, ops, tasks, params, FLOPs and activation memory"},
    {"compile",
     "compile an ONNX model with tuned configs into one .ctpkg (library, graph, params)"},
    {"records", "the farm's tuning records, kept by the tracker: ls, import logs, export, best"},
};

// The help line of compiler command `name`, or nullptr when `name` is not one.
inline const char* CompilerCommandHelp(std::string_view name) {
  for (const auto& c : kCompilerCommands) {
    if (name == c.name) return c.help;
  }
  return nullptr;
}

// The module's file name. The binary looks for it beside itself (the build tree), then in
// CROSSTUNE_CLI_MODULE_DIR relative to itself (the install tree: ../lib/crosstune).
inline constexpr char kCompilerModuleFile[] = "libcrosstune-cli-build.so";
inline constexpr char kCompilerModuleEntry[] = "crosstune_cli_module_v1";
inline constexpr uint32_t kCompilerModuleAbi = 1;  // bump when CrosstuneCliModule changes

extern "C" {
// The module's description of itself: a static table, valid while the module is loaded.
struct CrosstuneCliModule {
  uint32_t abi_version;           // kCompilerModuleAbi
  const char* crosstune_version;  // CROSSTUNE_VERSION_STRING it was built with
  const char* cli11_version;      // CLI11_VERSION it was built with
  // Adds compiler command `name` to `app`; false when the module has no such command.
  bool (*register_command)(CLI::App* app, const char* name);
};
// The one symbol the module exports (kCompilerModuleEntry).
const CrosstuneCliModule* crosstune_cli_module_v1();
}

// Finds and loads the module (in the `crosstune` binary), for compiler command `command`, which
// the errors name. The module stays loaded until the process exits: the app holds its code.
Expected<const CrosstuneCliModule*> LoadCompilerModule(std::string_view command);

}  // namespace crosstune::cli
