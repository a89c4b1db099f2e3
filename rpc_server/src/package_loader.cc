#include "package_loader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <optional>

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
    if (r.workspace == nullptr)
      return Status(ErrorCode::kInternal, "package load without a workspace");
    // A fresh directory inside the workspace for this package's files; the client cannot have put
    // links there (uploads never create them), and ExtractPackage writes with O_EXCL|O_NOFOLLOW.
    // Its name is one of the workspace's reserved temporaries: no client path can name it, and
    // listings skip it.
    std::string dir = r.workspace->root() + "/" + kWorkspaceTempPrefix + "pkg-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
      return Status(ErrorCode::kIoError,
                    "cannot make a directory for the package in the workspace");
    }
    // The extracted copy is needed only while loading: a loaded library stays mapped after its
    // file is gone, and the CUDA loader reads its image into memory. Removed on every path, so
    // repeated loads (or failed extractions) do not pile up hidden copies in the workspace.
    struct RemoveDir {
      std::string path;
      ~RemoveDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
      }
    } remove_dir{dir};
    auto manifest = pkg::ExtractPackage(r.abs_path, dir, ThisDevice());
    if (!manifest.ok()) {
      return Status(manifest.status().code(),
                    r.display_name + ": " +
                        ShowAs(ShowAs(manifest.status().message(), dir, "(package)"), r.abs_path,
                               r.display_name));
    }
    if (manifest->kind == "cuda") {
      auto m = LoadCudaModule(*manifest, dir);
      if (!m.ok()) {
        return Status(m.status().code(),
                      r.display_name + ": " + ShowAs(m.status().message(), dir, "(package)"));
      }
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
    auto module = cpu_->Load(lib);
    if (!module.ok()) return module.status();
    // The table the library exports must be the one the manifest promised.
    const auto& fns = (*module)->functions();
    bool same = fns.size() == manifest->functions.size();
    for (size_t i = 0; same && i < fns.size(); ++i) {
      same = fns[i].name == manifest->functions[i].name &&
             fns[i].signature == manifest->functions[i].signature;
    }
    if (!same) {
      return Status(ErrorCode::kBadHash,
                    r.display_name + ": the library's functions differ from the manifest's");
    }
    return module;
  }

 private:
  std::unique_ptr<ModuleLoader> cpu_ = MakeCpuLoader();
};

}  // namespace

std::unique_ptr<ModuleLoader> MakePackageLoader() { return std::make_unique<PackageLoader>(); }

}  // namespace crosstune::server
