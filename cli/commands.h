// The `crosstune` command line: each area registers its subcommands on the one CLI11 app.
// main.cc stays a thin parser; the work happens in the libraries. The commands that need a
// compiler live in a module loaded only when one of them runs (compiler_module.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "crosstune/status.h"

namespace crosstune::cli {

// In the `crosstune` binary, which links no compiler:
// info, upload, download, ls, rm, run, bench (cli/session_commands.cc).
void RegisterSessionCommands(CLI::App& app);
// inspect (common's package checks).
void RegisterInspectCommand(CLI::App& app);
// run-model, bench-model, params import|export (cli/model_commands.cc).
void RegisterModelCommands(CLI::App& app);
// query, lease, drain, undrain, kick (tracker).
void RegisterTrackerCommands(CLI::App& app);

// In the compiler module (compiler_module.h), which links the builder and the tuner:
// build (builder).
void RegisterBuildCommand(CLI::App& app);
// tune, log summary|best|plot, export (tuner).
void RegisterTuneCommand(CLI::App& app);
void RegisterLogCommand(CLI::App& app);
void RegisterExportCommand(CLI::App& app);
// replay (tuner: compare tuners on a recorded space).
void RegisterReplayCommand(CLI::App& app);
// import, compile (model: ONNX import and the model compiler).
void RegisterImportCommand(CLI::App& app);
void RegisterCompileCommand(CLI::App& app);
// records import|export|best (tuner: the farm's records, kept by the tracker).
void RegisterRecordsCommand(CLI::App& app);

// Prints "crosstune: error: <what>" to stderr and returns the exit code 1.
int PrintError(const std::string& what);

// For subcommand callbacks: prints the error as PrintError does and ends the command with exit
// code 1 (throws CLI::RuntimeError, which main() turns into the exit code without printing more).
[[noreturn]] void Fail(const std::string& what);

// Prints `j` as JSON and a newline on stdout (compact, or indented by `indent`). Bytes that are
// not UTF-8 in its strings (file and member names from a device or a package, error texts that
// quote them) are replaced by U+FFFD, so the output is always valid JSON, where nlohmann's own
// dump() would throw and print nothing.
void PrintJson(const nlohmann::json& j, int indent = -1);

// A --call-timeout flag's seconds as a call's milliseconds (0: the server's own call timeout).
inline uint32_t TimeoutMs(double seconds) {
  return static_cast<uint32_t>(std::lround(seconds * 1000));
}

// Ends the command with the error of a failed step (Fail), or returns the value.
inline void Check(const Status& status) {
  if (!status.ok()) {
    Fail(status.message().empty() ? std::string(ErrorCodeName(status.code())) : status.message());
  }
}
template <typename T>
T Check(Expected<T> value) {
  Check(value.status());
  return std::move(value).value();
}

}  // namespace crosstune::cli
