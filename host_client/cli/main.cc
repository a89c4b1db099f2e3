// crosstune: the host command line. A thin parser: each area registers its subcommands
// (commands.h) and the work happens in the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "crosstune/protocol.h"

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

int main(int argc, char** argv) {
  CLI::App app{"crosstune: cross-deploy, run and tune kernels on remote devices"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "crosstune " + std::string(crosstune::kCrosstuneVersion));
  crosstune::cli::RegisterSessionCommands(app);
  crosstune::cli::RegisterBuildCommands(app);
  crosstune::cli::RegisterTrackerCommands(app);
  crosstune::cli::RegisterTuneCommands(app);
  crosstune::cli::RegisterReplayCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // the command printed its error already (Fail)
  } catch (const CLI::ParseError& e) {
    // Usage errors get the same one-line form as every other error.
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) names += " " + sub->get_name();
      return crosstune::cli::PrintError(std::string("unknown command '") + argv[1] +
                                        "' (commands:" + names + ")");
    }
    return crosstune::cli::PrintError(e.what());
  } catch (const std::exception& e) {
    return crosstune::cli::PrintError(e.what());
  }
  return 0;
}
