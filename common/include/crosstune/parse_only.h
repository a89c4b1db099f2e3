// Argument-check mode, shared by every program that parses its flags with CLI11 (crosstune,
// crosstune-server, crosstune-tracker, crosstune-build-worker). With CROSSTUNE_PARSE_ONLY=1 in the
// environment a program parses its command line with its real parser (options, subcommands,
// validators and range checks) and exits without running anything: status 0 when the line
// parses, else CLI11's error. The documentation's command checker (scripts/check-doc-commands.py)
// runs every command line the docs show this way. Checks a command makes only once it runs
// (a file that must exist, --tracker without --key) are not made.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>

namespace crosstune {

// True when CROSSTUNE_PARSE_ONLY is "1".
inline bool ParseOnlyRequested() {
  const char* value = std::getenv("CROSSTUNE_PARSE_ONLY");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// Removes the callbacks of `app` and of every subcommand under it, so that parse() runs none
// of the commands it recognises.
inline void DropCallbacks(CLI::App& app) {
  app.final_callback({});
  app.parse_complete_callback({});
  app.preparse_callback({});
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) DropCallbacks(*sub);
}

// Parses argv with `app` in argument-check mode and returns the program's exit status: 0 when
// it parses (or asks for --help), else CLI11's error, printed as CLI11 prints it.
inline int ParseOnly(CLI::App& app, int argc, char** argv) {
  DropCallbacks(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

}  // namespace crosstune
