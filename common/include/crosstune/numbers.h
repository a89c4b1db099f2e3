// Numbers a person typed (flags of every binary, tensor shapes, priorities): parsed whole,
// checked against a range before any cast, NaN and infinities refused. Every error names the
// value and the range, e.g. "70000 is not in 0..65535", so a message built on it can prefix the
// flag: "--port: 70000 is not in 0..65535".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "crosstune/status.h"

namespace crosstune {

// A decimal integer (an optional sign, digits, nothing else) in [min, max]; kInvalidArgument
// otherwise.
Expected<int64_t> ParseIntegerIn(std::string_view text, int64_t min, int64_t max);
Expected<uint64_t> ParseUnsignedIn(std::string_view text, uint64_t min, uint64_t max);

// A finite decimal number ("2", "0.5", "1e-3") in [min, max]; "nan", "inf" and anything else
// are kInvalidArgument.
Expected<double> ParseNumberIn(std::string_view text, double min, double max);

// "0..65535", "0.01..3600": a range as the messages above print it.
std::string DescribeRange(int64_t min, int64_t max);
std::string DescribeRange(uint64_t min, uint64_t max);
std::string DescribeRange(double min, double max);

// Seconds (already range-checked, so finite and far below the limits of the type) as
// milliseconds, rounded to the nearest; a positive value under half a millisecond is 1 ms, never
// 0 (which means "no limit" to most of the options that take it).
std::chrono::milliseconds SecondsToMs(double seconds);

}  // namespace crosstune
