// PrintError and Fail (commands.h), in their own file: both the `crosstune` binary and the
// compiler module (compiler_module.h) link them.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands.h"

namespace crosstune::cli {

int PrintError(const std::string& what) {
  std::fprintf(stderr, "crosstune: error: %s\n", what.c_str());
  return 1;
}

void Fail(const std::string& what) {
  PrintError(what);
  throw CLI::RuntimeError(1);
}

}  // namespace crosstune::cli
