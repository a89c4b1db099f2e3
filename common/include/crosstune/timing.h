// How the time evaluator measures a function (design.md, "Time evaluator"): one warm-up call,
// then `repeat` rounds of `number` calls; a round shorter than min_repeat_ms grows `number` and
// is measured again; an optional cooldown between rounds and an optional CPU cache flush before
// each. One struct for the wire messages (TimeRequest, TimeModelRequest), the server's evaluator,
// the client's TimeOptions and the tuner's MeasureOptions, and one function for its flags.
#pragma once

#include <cstdint>

namespace CLI {
class App;
}

namespace crosstune {

struct TimingOptions {
  uint32_t number = 1;         // calls per round; grows to reach min_repeat_ms
  uint32_t repeat = 1;         // rounds
  uint32_t min_repeat_ms = 0;  // shortest round, in ms (0: no growth)
  uint32_t cooldown_ms = 0;    // pause between rounds, in ms
  bool flush_cache = false;    // evict the call's data from the CPU caches before each round

  bool operator==(const TimingOptions&) const = default;
};

// Adds --number, --repeat, --min-repeat-ms, --cooldown-ms and --flush-cache to `cmd`, parsed into
// `*t`; the values in `*t` at this call are the defaults shown in --help. The ranges are the
// server's (Limits::kMaxTimeRepeat, Limits::kMaxTimeRoundMs), so a value the server would refuse
// is refused at parsing. `what` names what a round repeats ("calls", "runs"). `*t` must outlive
// parsing.
void AddTimingFlags(CLI::App* cmd, TimingOptions* t, const char* what = "calls");

}  // namespace crosstune
