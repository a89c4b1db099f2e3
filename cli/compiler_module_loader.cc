// Finding and loading the compiler module (compiler_module.h), in the `crosstune` binary: beside
// the executable (the build tree), then CROSSTUNE_CLI_MODULE_DIR relative to it (the install
// tree). Every failure is a named error, never a crash.
#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler_module.h"
#include "crosstune/version.h"

#ifndef CROSSTUNE_CLI_MODULE_DIR
#define CROSSTUNE_CLI_MODULE_DIR "../lib/crosstune"
#endif

namespace crosstune::cli {
namespace {

namespace fs = std::filesystem;

// The directory of the running executable, from /proc/self/exe ("" when that cannot be read).
fs::path ExecutableDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self.parent_path();
}

// dlerror()'s text for the call that just failed.
std::string DlError() {
  const char* e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

}  // namespace

Expected<const CrosstuneCliModule*> LoadCompilerModule(std::string_view command) {
  const std::string needs =
      "'" + std::string(command) + "' needs the compiler module " + kCompilerModuleFile;
  const fs::path dir = ExecutableDir();
  if (dir.empty()) {
    return Status(ErrorCode::kNotFound, needs +
                                            ", but /proc/self/exe does not say where this "
                                            "crosstune is installed");
  }
  const std::vector<fs::path> candidates = {
      dir / kCompilerModuleFile,
      (dir / CROSSTUNE_CLI_MODULE_DIR / kCompilerModuleFile).lexically_normal()};
  std::string looked;
  for (const fs::path& path : candidates) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      looked += (looked.empty() ? "" : ", ") + path.string();
      continue;
    }
    const std::string where = path.string() + ": ";
    // RTLD_LOCAL: the module's own copies of the crosstune libraries stay its own. RTLD_LAZY, as
    // the loader binds a program's own libraries: binding all of LLVM's and clang's symbols up
    // front cost ~1 ms more per compiler command. The module is linked with --no-undefined.
    void* handle = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (!handle) {
      return Status(ErrorCode::kNotFound, where + "cannot load the compiler module: " + DlError());
    }
    auto* entry =
        reinterpret_cast<const CrosstuneCliModule* (*)()>(::dlsym(handle, kCompilerModuleEntry));
    if (!entry) {
      return Status(ErrorCode::kVersionMismatch,
                    where + "not a crosstune compiler module (no " + kCompilerModuleEntry + ")");
    }
    const CrosstuneCliModule* module = entry();
    if (module->abi_version != kCompilerModuleAbi) {
      return Status(ErrorCode::kVersionMismatch,
                    where + "compiler module ABI " + std::to_string(module->abi_version) +
                        ", this crosstune needs " + std::to_string(kCompilerModuleAbi) +
                        " (install the binary and the module from one build)");
    }
    if (std::strcmp(module->crosstune_version, CROSSTUNE_VERSION_STRING) != 0 ||
        std::strcmp(module->cli11_version, CLI11_VERSION) != 0) {
      return Status(ErrorCode::kVersionMismatch,
                    where + "compiler module of crosstune " + module->crosstune_version +
                        " (CLI11 " + module->cli11_version + "), this is crosstune " +
                        CROSSTUNE_VERSION_STRING + " (CLI11 " + CLI11_VERSION +
                        "); install the binary and the module from one build");
    }
    return module;  // never unloaded: the app holds the module's callbacks until exit
  }
  return Status(ErrorCode::kNotFound, needs + ", which is not there (looked for " + looked + ")");
}

}  // namespace crosstune::cli
