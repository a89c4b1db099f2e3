// crosstune: the host command line. A thin parser: each area registers its subcommands
// (commands.h) and the work happens in the libraries. This binary links no compiler; the commands
// that need one come from the compiler module, loaded only when one of them runs
// (compiler_module.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "compiler_module.h"
#include "crosstune/parse_only.h"
#include "crosstune/protocol.h"

namespace crosstune::cli {
namespace {

// The command that argv names: its first word that is not an option (the app itself takes only
// --help and --version), or "" when there is none.
std::string CommandName(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return argv[i];
  }
  return "";
}

// Adds compiler command `name`: the module's, when it is loaded (the command runs), or else a
// stand-in with the same name and help line, for `crosstune --help` and the list of commands.
void AddCompilerCommand(CLI::App& app, const CompilerCommand& command,
                        const CrosstuneCliModule* module) {
  if (module && module->register_command(&app, command.name)) return;
  auto* stand_in = app.add_subcommand(command.name, command.help);
  stand_in->allow_extras();
  std::string name = command.name;
  // Unreachable while CommandName() agrees with CLI11 about which command runs.
  stand_in->callback([name] { Fail("'" + name + "': the compiler module was not loaded"); });
}

int Main(int argc, char** argv) {
  const CrosstuneCliModule* module = nullptr;
  if (const std::string command = CommandName(argc, argv); CompilerCommandHelp(command)) {
    auto loaded = LoadCompilerModule(command);
    if (!loaded.ok()) return PrintError(loaded.status().message());
    module = *loaded;
  }

  CLI::App app{"crosstune: cross-deploy, run and tune kernels on remote devices"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "crosstune " + std::string(kCrosstuneVersion));
  // In the order `crosstune --help` lists them.
  RegisterSessionCommands(app);
  RegisterModelCommands(app);
  AddCompilerCommand(app, kCompilerCommands[0], module);  // build
  RegisterInspectCommand(app);
  RegisterTrackerCommands(app);
  for (const CompilerCommand& c : kCompilerCommands) {
    if (std::string_view(c.name) != "build") AddCompilerCommand(app, c, module);
  }
  // CROSSTUNE_PARSE_ONLY=1: check the command line with the real parser (the compiler module's
  // commands included) and run nothing.
  if (ParseOnlyRequested()) StopBeforeCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {  // CROSSTUNE_PARSE_ONLY: the line parsed
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // the command printed its error already (Fail)
  } catch (const CLI::ParseError& e) {
    // Usage errors get the same one-line form as every other error.
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) names += " " + sub->get_name();
      return PrintError(std::string("unknown command '") + argv[1] + "' (commands:" + names + ")");
    }
    return PrintError(e.what());
  } catch (const std::exception& e) {
    return PrintError(e.what());
  }
  return 0;
}

}  // namespace
}  // namespace crosstune::cli

int main(int argc, char** argv) {
  try {
    return crosstune::cli::Main(argc, argv);
  } catch (...) {  // e.g. out of memory while setting up the commands
    std::fputs("crosstune: error: unexpected exception\n", stderr);
    return 1;
  }
}
