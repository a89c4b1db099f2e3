// The `.ctpkg` loader: verifies a package against this device (formats/package.h), unpacks it
// inside the session workspace and loads its library through the CPU loader or the CUDA backend.
#pragma once

#include <memory>
#include <string>

#include "crosstune/params.h"
#include "crosstune/server/graph_executor.h"
#include "crosstune/server/module.h"

namespace crosstune::server {

// Accepts files named *.ctpkg and ustar archives whose first member is manifest.json.
std::unique_ptr<ModuleLoader> MakePackageLoader();

// What a model package holds besides its library, read while the package is unpacked.
struct ModelFiles {
  std::string graph_json;
  std::unique_ptr<pkg::ParamsFile> params;  // mapped read-only; null when there is no params.bin
};

// Verifies the package for this device (hashes, build ids, triple, CPU features), unpacks it into
// a fresh directory of the workspace and loads its library; the directory is gone on return.
// With `model`, the package must be a CPU package with a graph.json, which is read, and its
// params.bin (if any) is mapped. Errors are prefixed with the client's name for the file.
Expected<std::unique_ptr<Module>> LoadPackage(const LoadRequest& request, ModelFiles* model);

// LoadPackage, then the graph executor over its graph, params and library (graph_executor.h).
Expected<std::unique_ptr<GraphExecutor>> LoadModelPackage(const LoadRequest& request,
                                                          uint64_t max_storage_bytes);

}  // namespace crosstune::server
