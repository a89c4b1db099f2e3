// CLI11 validators for numeric flags, shared by every binary (crosstune-server,
// crosstune-tracker, crosstune): the text is checked with numbers.h before CLI11 converts it to
// the option's type, so a value outside the type never reaches a cast, NaN and infinities are
// refused, and the message states the range. CLI11 prefixes the option's name:
// "--port: 70000 is not in 0..65535".
#pragma once

#include <CLI/CLI.hpp>
#include <concepts>
#include <cstdint>
#include <string>

#include "crosstune/numbers.h"

namespace crosstune {

// An integer flag of any integral type; [min, max] must lie within that type.
template <std::integral T>
CLI::Validator IntegerIn(T min, T max) {
  std::string range;
  std::function<std::string(std::string&)> check;
  if constexpr (std::is_signed_v<T>) {
    range = DescribeRange(int64_t{min}, int64_t{max});
    check = [min, max](std::string& text) {
      auto v = ParseIntegerIn(text, min, max);
      return v.ok() ? std::string() : v.status().message();
    };
  } else {
    range = DescribeRange(uint64_t{min}, uint64_t{max});
    check = [min, max](std::string& text) {
      auto v = ParseUnsignedIn(text, min, max);
      return v.ok() ? std::string() : v.status().message();
    };
  }
  return CLI::Validator(std::move(check), range, "integer in " + range);
}

// A finite number in [min, max] (for a floating-point flag).
CLI::Validator NumberIn(double min, double max);
// A duration in seconds in [min, max]; convert it with SecondsToMs.
CLI::Validator SecondsIn(double min, double max);

}  // namespace crosstune
