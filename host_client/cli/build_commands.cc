// `crosstune build` and `crosstune inspect` (the builder). Registers nothing until the builder
// lands; the builder work owns this file.
#include "commands.h"

namespace crosstune::cli {

void RegisterBuildCommands(CLI::App& /*app*/) {}

}  // namespace crosstune::cli
