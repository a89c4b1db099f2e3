// Argument-check mode, shared by every program that parses its flags with CLI11 (crosstune,
// crosstune-server, crosstune-tracker, crosstune-build-worker). With CROSSTUNE_PARSE_ONLY=1 in the
// environment a program parses its command line with its real parser (options, subcommands,
// validators and range checks) and exits without running anything: status 0 when the line
// parses, else CLI11's error. The documentation's command checker (scripts/check-doc-commands.py)
// runs every command line the docs show this way. Checks a command makes only once it runs
// (a file that must exist, --tracker without --key) are not made.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace crosstune {

// True when CROSSTUNE_PARSE_ONLY is "1".
inline bool ParseOnlyRequested() {
  const char* value = std::getenv("CROSSTUNE_PARSE_ONLY");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// Makes parse() stop once `app`'s whole command line has been parsed and checked (unknown
// options, extras, requirements, validators), before any command runs: the top-level app's
// parse-complete callback, which CLI11 runs first, throws CLI::Success (exit status 0). The
// commands' own callbacks stay in place: they often own the variables their options write to.
// File-system checks (an input file that must exist) are switched off: the files a documented
// command names are not where it is checked.
// It also prints "argument-check mode" as the program's first line on stderr: the checker probes
// each program with --help for it, since one built without the mode would run the command.
inline void StopBeforeCommands(CLI::App& app) {
  std::fputs("argument-check mode\n", stderr);
  app.parse_complete_callback([] { throw CLI::Success(); });
  std::vector<CLI::App*> apps{&app};
  for (size_t i = 0; i < apps.size(); ++i) {
    for (CLI::App* sub : apps[i]->get_subcommands([](CLI::App*) { return true; })) {
      apps.push_back(sub);
    }
    for (CLI::Option* option : apps[i]->get_options([](CLI::Option*) { return true; })) {
      for (int v = 0;; ++v) {
        CLI::Validator* validator = nullptr;
        try {
          validator = option->get_validator(v);
        } catch (const CLI::OptionNotFound&) {
          break;
        }
        const std::string what = validator->get_description();
        if (what == "FILE" || what == "DIR" || what == "PATH(existing)") validator->active(false);
      }
    }
  }
}

// Parses argv with `app` in argument-check mode and returns the program's exit status: 0 when
// it parses (or asks for --help), else CLI11's error, printed as CLI11 prints it.
inline int ParseOnly(CLI::App& app, int argc, char** argv) {
  StopBeforeCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

}  // namespace crosstune
