// KernelIncludeDir on its own: the build tree's path it falls back to is a definition of this
// file alone, so the builder's other files compile alike in every clone (ccache hits;
// cmake/CrosstunePathDefinitions.cmake).
#include <stdlib.h>

#include "crosstune/builder/compiler.h"

#ifndef CROSSTUNE_KERNEL_INCLUDE_DIR
#error "CROSSTUNE_KERNEL_INCLUDE_DIR must name the kernel include tree"
#endif

namespace crosstune::builder {

std::string KernelIncludeDir() {
  if (const char* env = ::getenv("CROSSTUNE_KERNEL_INCLUDE_DIR"); env != nullptr && *env)
    return env;
  return CROSSTUNE_KERNEL_INCLUDE_DIR;
}

}  // namespace crosstune::builder
