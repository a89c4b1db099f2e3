// The `.ctpkg` loader: verifies a package against this device (common/package.h), unpacks it inside
// the session workspace and loads its library through the CPU loader or the CUDA backend.
#pragma once

#include <memory>

#include "crosstune/server/module.h"

namespace crosstune::server {

// Accepts files named *.ctpkg and ustar archives whose first member is manifest.json.
std::unique_ptr<ModuleLoader> MakePackageLoader();

}  // namespace crosstune::server
