#include "crosstune/timing.h"

#include <CLI/CLI.hpp>
#include <string>

#include "crosstune/protocol.h"

namespace crosstune {

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
  cmd->add_flag("--flush-cache", t->flush_cache, "flush the CPU caches before each round");
}

}  // namespace crosstune
