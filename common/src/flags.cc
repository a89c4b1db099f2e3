// Everything in crosstune_common that speaks CLI11, in one file: CLI11 2.1 is header-only and
// compiles its validators into every file that includes it (about 6 s of a 2-core machine's time
// per file at -O2 -g), so the rest of the library does not include it.
#include <CLI/CLI.hpp>
#include <string>

#include "crosstune/flag_checks.h"
#include "crosstune/numbers.h"
#include "crosstune/protocol.h"
#include "crosstune/timing.h"

namespace crosstune {

CLI::Validator NumberIn(double min, double max) {
  std::string range = DescribeRange(min, max);
  return CLI::Validator(
      [min, max](std::string& text) {
        auto v = ParseNumberIn(text, min, max);
        return v.ok() ? std::string() : v.status().message();
      },
      range, "number in " + range);
}

CLI::Validator SecondsIn(double min, double max) {
  std::string range = DescribeRange(min, max);
  return CLI::Validator(
      [min, max](std::string& text) {
        auto v = ParseNumberIn(text, min, max);
        return v.ok() ? std::string() : v.status().message() + " seconds";
      },
      range + " s", "seconds in " + range);
}

void AddTimingFlags(CLI::App* cmd, TimingOptions* t, const char* what) {
  cmd->add_option("--number", t->number,
                  std::string(what) + " per round (grows to reach --min-repeat-ms)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeat", t->repeat, "rounds")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, Limits::kMaxTimeRepeat));
  cmd->add_option("--min-repeat-ms", t->min_repeat_ms, "shortest round in ms")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{0}, Limits::kMaxTimeRoundMs));
  cmd->add_option("--cooldown-ms", t->cooldown_ms, "pause between rounds in ms")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{0}, Limits::kMaxTimeRoundMs));
  cmd->add_flag("--flush-cache", t->flush_cache,
                "evict the call's data from the CPU caches before each round");
}

}  // namespace crosstune
