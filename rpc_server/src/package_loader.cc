#include "package_loader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <mutex>
#include <optional>

#include "crosstune/graph.h"
#include "crosstune/module_table.h"
#include "crosstune/package.h"
#include "crosstune/server/device_info.h"
#include "crosstune/server/workspace.h"
#include "cuda_backend.h"

namespace crosstune::server {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What this device is, collected once per session process (the session child may load the CUDA
// driver; see device_info.h).
const msg::DeviceInfo& ThisDevice() {
  static std::once_flag once;
  static msg::DeviceInfo info;
  std::call_once(once, [] { info = CollectDeviceInfo(); });
  return info;
}

class PackageLoader final : public ModuleLoader {
 public:
  std::string_view name() const override { return "ctpkg"; }

  bool Accepts(const LoadRequest& r) const override {
    return EndsWith(r.display_name, ".ctpkg") ||
           r.head.compare(0, pkg::kManifestPath.size(), pkg::kManifestPath) == 0;
  }

  Expected<std::unique_ptr<Module>> Load(const LoadRequest& r) override {
    return LoadPackage(r, nullptr);
  }
};

}  // namespace

Expected<std::unique_ptr<Module>> LoadPackage(const LoadRequest& r, ModelFiles* model) {
  if (r.workspace == nullptr)
    return Status(ErrorCode::kInternal, "package load without a workspace");
  // A fresh directory inside the workspace for this package's files; the client cannot have put
  // links there (uploads never create them), and ExtractPackage writes with O_EXCL|O_NOFOLLOW.
  // Its name is one of the workspace's reserved temporaries: no client path can name it, and
  // listings skip it.
  std::string dir = r.workspace->root() + "/" + kWorkspaceTempPrefix + "pkg-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    return Status(ErrorCode::kIoError, "cannot make a directory for the package in the workspace");
  }
  // The extracted copy is needed only while loading: a loaded library and a mapped params.bin
  // stay mapped after their files are gone, and the CUDA loader reads its image into memory.
  // Removed on every path, so repeated loads (or failed extractions) do not pile up hidden copies
  // in the workspace.
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  auto shown = [&](const Status& s) {
    return Status(s.code(),
                  r.display_name + ": " +
                      ShowAs(ShowAs(s.message(), dir, "(package)"), r.abs_path, r.display_name));
  };
  auto manifest = pkg::ExtractPackage(r.abs_path, dir, ThisDevice());
  if (!manifest.ok()) return shown(manifest.status());
  if (model != nullptr) {
    if (manifest->kind != "cpu") {
      return Status(
          ErrorCode::kInvalidArgument,
          r.display_name + ": the graph executor runs CPU packages, this one is " + manifest->kind);
    }
    // Members were re-hashed as they were extracted: these are the verified bytes.
    const std::string graph_path = dir + "/" + std::string(pkg::kGraphPath);
    const std::string params_path = dir + "/" + std::string(pkg::kParamsPath);
    std::error_code ec;
    if (!std::filesystem::exists(graph_path, ec)) {
      return Status(ErrorCode::kInvalidArgument,
                    r.display_name +
                        ": not a model package (it has no graph.json); load it as "
                        "a module instead");
    }
    UniqueFd gfd(::open(graph_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!gfd.valid())
      return Status(ErrorCode::kIoError, r.display_name + ": cannot open graph.json");
    model->graph_json.clear();
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(gfd.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status(ErrorCode::kIoError, r.display_name + ": cannot read graph.json");
      if (n == 0) break;
      if (model->graph_json.size() + static_cast<size_t>(n) > graph::kMaxGraphBytes) {
        return Status(ErrorCode::kLimitExceeded,
                      r.display_name + ": graph.json is over the limit of " +
                          std::to_string(graph::kMaxGraphBytes) + " bytes");
      }
      model->graph_json.append(buf, static_cast<size_t>(n));
    }
    if (std::filesystem::exists(params_path, ec)) {
      auto params = pkg::ParamsFile::Open(params_path);
      if (!params.ok()) return shown(params.status());
      model->params = std::move(params).value();
    }
  }
  if (manifest->kind == "cuda") {
    auto m = LoadCudaModule(*manifest, dir);
    if (!m.ok()) return shown(m.status());
    return m;
  }
  LoadRequest lib;
  lib.display_name = r.display_name + ":" + manifest->library;
  lib.abs_path = dir + "/" + manifest->library;
  lib.workspace = r.workspace;
  lib.runtime = r.runtime;
  UniqueFd fd(::open(lib.abs_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return Status(ErrorCode::kIoError, lib.display_name + ": cannot open");
  lib.fd = fd.get();
  char head[64];
  ssize_t n = ::pread(lib.fd, head, sizeof(head), 0);
  lib.head.assign(head, n > 0 ? static_cast<size_t>(n) : 0);
  auto module = MakeCpuLoader()->Load(lib);
  if (!module.ok()) return module.status();
  // The table the library exports must be the one the manifest promised (inspect checks the
  // same, on the table it reads from the library's image).
  if (Status s = pkg::CheckLibraryFunctions(*manifest, (*module)->functions()); !s.ok()) {
    return Status(s.code(), r.display_name + ": " + s.message());
  }
  return module;
}

Expected<std::unique_ptr<GraphExecutor>> LoadModelPackage(const LoadRequest& r,
                                                          uint64_t max_storage_bytes) {
  ModelFiles files;
  CT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, LoadPackage(r, &files));
  auto graph = graph::ParseGraph(files.graph_json);
  if (!graph.ok()) {
    return Status(graph.status().code(), r.display_name + ": " + graph.status().message());
  }
  return GraphExecutor::Create(r.display_name, std::move(graph).value(), std::move(files.params),
                               std::move(module), max_storage_bytes);
}

std::unique_ptr<ModuleLoader> MakePackageLoader() { return std::make_unique<PackageLoader>(); }

}  // namespace crosstune::server
