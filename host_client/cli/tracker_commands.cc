// `crosstune query / lease / drain / undrain / kick` (the tracker). Registers nothing until the
// tracker lands; the tracker work owns this file.
#include "commands.h"

namespace crosstune::cli {

void RegisterTrackerCommands(CLI::App& /*app*/) {}

}  // namespace crosstune::cli
