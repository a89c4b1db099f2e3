// Durations as the scheduler's parts count and word them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "crosstune/tracker/outbox.h"

namespace crosstune::tracker {

inline int64_t ToMs(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<Ms>(d).count();
}

// Whole seconds, as messages give them: "12 s".
inline std::string Seconds(std::chrono::steady_clock::duration d) {
  return std::to_string(ToMs(d) / 1000) + " s";
}

}  // namespace crosstune::tracker
