#include "crosstune/numbers.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include "crosstune/text.h"

namespace crosstune {
namespace {

// The value as typed, safe to quote (a flag may hold anything, control characters included).
std::string Quote(std::string_view text) { return "'" + EscapeForLog(text, 64) + "'"; }

Status Bad(std::string message) { return Status(ErrorCode::kInvalidArgument, std::move(message)); }

// from_chars takes no leading '+'; a person may type one.
std::string_view WithoutPlus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

}  // namespace

std::string DescribeRange(int64_t min, int64_t max) { return fmt::format("{}..{}", min, max); }
std::string DescribeRange(uint64_t min, uint64_t max) { return fmt::format("{}..{}", min, max); }
std::string DescribeRange(double min, double max) { return fmt::format("{}..{}", min, max); }

Expected<int64_t> ParseIntegerIn(std::string_view text, int64_t min, int64_t max) {
  std::string_view digits = WithoutPlus(text);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  bool whole = !digits.empty() && end == digits.data() + digits.size();
  // Text that parsed as a number is digits and signs only: quoted as typed.
  if (ec == std::errc::result_out_of_range && whole) {
    return Bad(std::string(text) + " is not in " + DescribeRange(min, max));
  }
  if (ec != std::errc() || !whole) {
    return Bad(Quote(text) + " is not an integer in " + DescribeRange(min, max));
  }
  if (v < min || v > max) return Bad(std::string(text) + " is not in " + DescribeRange(min, max));
  return v;
}

Expected<uint64_t> ParseUnsignedIn(std::string_view text, uint64_t min, uint64_t max) {
  std::string_view digits = WithoutPlus(text);
  // from_chars for an unsigned type refuses a '-' at once; say "not in range" for "-1", which
  // strtoull would have turned into 2^64 - 1.
  bool negative = !digits.empty() && digits[0] == '-';
  if (negative) digits.remove_prefix(1);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  bool whole = !digits.empty() && end == digits.data() + digits.size();
  if (whole &&
      (ec == std::errc::result_out_of_range || (ec == std::errc() && negative && v != 0))) {
    return Bad(std::string(text) + " is not in " + DescribeRange(min, max));
  }
  if (ec != std::errc() || !whole) {
    return Bad(Quote(text) + " is not an integer in " + DescribeRange(min, max));
  }
  if (v < min || v > max) return Bad(std::string(text) + " is not in " + DescribeRange(min, max));
  return v;
}

Expected<double> ParseNumberIn(std::string_view text, double min, double max) {
  std::string_view digits = WithoutPlus(text);
  double v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  bool whole = !digits.empty() && end == digits.data() + digits.size();
  // Out of range here is a magnitude past double's (1e999) or under its smallest (1e-999).
  if (ec == std::errc::result_out_of_range && whole) {
    return Bad(std::string(text) + " is not in " + DescribeRange(min, max));
  }
  if (ec != std::errc() || !whole || !std::isfinite(v)) {
    return Bad(Quote(text) + " is not a finite number in " + DescribeRange(min, max));
  }
  if (v < min || v > max) return Bad(std::string(text) + " is not in " + DescribeRange(min, max));
  return v;
}

std::chrono::milliseconds SecondsToMs(double seconds) {
  if (!(seconds > 0)) return std::chrono::milliseconds(0);
  double ms = std::round(seconds * 1000);
  constexpr double kMax = 1e15;  // 31,000 years: past every flag's range
  return std::chrono::milliseconds(ms < 1 ? 1 : static_cast<int64_t>(std::min(ms, kMax)));
}

}  // namespace crosstune
