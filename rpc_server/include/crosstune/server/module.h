// Modules and the loaders that make them: the seam where device backends plug in.
//
// A ModuleLoader turns a file in the workspace into a Module. The session asks a LoaderRegistry,
// which picks the first loader that accepts the file (by name and first bytes): the CPU loader
// takes ELF shared objects; a `.ctpkg` package loader (formats/package.h) and a CUDA loader
// (cubin/PTX, driver API) register the same way. See RegisterDefaultLoaders in loaders.cc.
//
// Thread-safety: modules are used by the one session thread that loaded them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/kernel_abi.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

class Workspace;

class Module {
 public:
  virtual ~Module() = default;
  virtual std::string_view kind() const = 0;  // "cpu", "cuda"
  virtual const std::string& target() const = 0;
  virtual const std::vector<msg::FunctionInfo>& functions() const = 0;

  // Calls function `index` (into functions()) `times` times in a row with the same packed
  // arguments, and waits until the work is done (an async backend synchronizes). A non-zero
  // kernel return stops the loop and is returned in *ret; the Status is for backend failures.
  // This is the hot path of calls and timing: no allocation, no logging.
  virtual Status Invoke(size_t index, const ct_arg* args, int32_t num_args, uint64_t times,
                        int32_t* ret) = 0;
  // The module's text for the last non-zero return ("" when it has none).
  virtual std::string LastError() const = 0;
};

// What a loader is given: the file, open, and where it lives.
struct LoadRequest {
  std::string display_name;  // the client's path, for messages
  std::string abs_path;      // absolute path inside the workspace (for dlopen)
  int fd = -1;               // open for reading, positioned anywhere (use pread)
  std::string head;          // the first up to 64 bytes of the file
  Workspace* workspace = nullptr;
  // The session's threads for modules that define crosstune_runtime_v1 (kernel_abi.h); may be
  // null (the module's parallel loops then run serially).
  const ct_runtime* runtime = nullptr;
};

// `text` with every occurrence of the server-side `path` replaced by the client's `name`: loader
// and extraction messages must not show the server's directories.
std::string ShowAs(std::string text, const std::string& path, const std::string& name);

class ModuleLoader {
 public:
  virtual ~ModuleLoader() = default;
  virtual std::string_view name() const = 0;
  // Whether this loader handles the file; decided from the name and the first bytes only.
  virtual bool Accepts(const LoadRequest& request) const = 0;
  virtual Expected<std::unique_ptr<Module>> Load(const LoadRequest& request) = 0;
};

// Loaders in the order they are asked. Not thread-safe; built once per session.
class LoaderRegistry {
 public:
  void Add(std::unique_ptr<ModuleLoader> loader) { loaders_.push_back(std::move(loader)); }
  // Asked before every loader added so far: for a loader that must see files the built-in ones
  // would take (the CPU loader accepts everything), e.g. a simulated device's.
  void AddFirst(std::unique_ptr<ModuleLoader> loader) {
    loaders_.insert(loaders_.begin(), std::move(loader));
  }
  // The first loader that accepts the file loads it; none: kInvalidArgument naming the file.
  Expected<std::unique_ptr<Module>> Load(const LoadRequest& request);

 private:
  std::vector<std::unique_ptr<ModuleLoader>> loaders_;
};

// The CPU loader: an ELF shared object exporting crosstune_module_v1 (kernel_abi.h). Checks the
// ELF machine before dlopen (WrongArch), then dlopen(RTLD_NOW | RTLD_LOCAL), the entry symbol and
// the ABI version (VersionMismatch).
std::unique_ptr<ModuleLoader> MakeCpuLoader();

// Adds the built-in loaders (CPU today; package and CUDA loaders add themselves here).
void RegisterDefaultLoaders(LoaderRegistry& registry);

// Checks call arguments against a signature ('t' tensor, 'i' int64, 'f' float64):
// kInvalidArgument naming the function, the position and what was expected.
Status CheckSignature(const std::string& function, const std::string& signature,
                      const std::vector<msg::Arg>& args);

}  // namespace crosstune::server
