// info, upload, download, ls, rm, run, bench: the commands that talk to one crosstune-server.
#include "commands.h"

namespace crosstune::cli {

void RegisterSessionCommands(CLI::App& /*app*/) {}

}  // namespace crosstune::cli
