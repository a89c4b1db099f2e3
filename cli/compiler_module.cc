// The compiler module's entry point (compiler_module.h): built into libcrosstune-cli-build.so,
// never into the `crosstune` binary. Everything else in the module is hidden; this is its one
// exported symbol.
#include "compiler_module.h"

#include <CLI/CLI.hpp>
#include <string_view>

#include "commands.h"
#include "crosstune/version.h"

namespace crosstune::cli {
namespace {

bool RegisterCommand(CLI::App* app, const char* name) {
  const std::string_view n = name;
  if (n == "build") {
    RegisterBuildCommand(*app);
  } else if (n == "tune") {
    RegisterTuneCommand(*app);
  } else if (n == "log") {
    RegisterLogCommand(*app);
  } else if (n == "export") {
    RegisterExportCommand(*app);
  } else if (n == "replay") {
    RegisterReplayCommand(*app);
  } else if (n == "import") {
    RegisterImportCommand(*app);
  } else if (n == "compile") {
    RegisterCompileCommand(*app);
  } else if (n == "records") {
    RegisterRecordsCommand(*app);
  } else {
    return false;
  }
  return true;
}

constexpr CrosstuneCliModule kModule = {
    .abi_version = kCompilerModuleAbi,
    .crosstune_version = CROSSTUNE_VERSION_STRING,
    .cli11_version = CLI11_VERSION,
    .register_command = &RegisterCommand,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const CrosstuneCliModule*
crosstune_cli_module_v1() {
  return &kModule;
}

}  // namespace crosstune::cli
