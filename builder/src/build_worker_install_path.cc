// InstalledBuildWorkerPath on its own: where the worker program is installed is a definition of
// this file alone (builder/CMakeLists.txt), so the builder's other files compile alike whatever
// the install prefix. A wheel's build installs under a new temporary folder each time (pip), and
// the definition on the whole library made its every file, the slow in-process clang front end
// among them, miss ccache in every wheel build.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"

#if !defined(CROSSTUNE_BUILD_WORKER_FROM_BINDIR) || !defined(CROSSTUNE_BUILD_WORKER_INSTALL_PATH)
#error "CROSSTUNE_BUILD_WORKER_FROM_BINDIR and CROSSTUNE_BUILD_WORKER_INSTALL_PATH must be defined"
#endif

namespace crosstune::builder {

std::string InstalledBuildWorkerPath(const std::string& program) {
  namespace fs = std::filesystem;
  // Relative to the program's folder first: an install tree finds its own worker wherever it was
  // installed or moved (a .deb puts it under /usr, whatever prefix this tree was configured with).
  std::vector<std::string> candidates;
  if (!program.empty()) {
    candidates.push_back((fs::path(program).parent_path() / CROSSTUNE_BUILD_WORKER_FROM_BINDIR)
                             .lexically_normal()
                             .string());
  }
  candidates.emplace_back(CROSSTUNE_BUILD_WORKER_INSTALL_PATH);
  for (const std::string& path : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

}  // namespace crosstune::builder
