// PrintError, Fail and PrintJson (commands.h), in their own file: both the `crosstune` binary
// and the compiler module (compiler_module.h) link them.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
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

void PrintJson(const nlohmann::json& j, int indent) {
  const std::string text = j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}

}  // namespace crosstune::cli
