// Text that comes from outside (the wire, a database, a kernel's error message): UTF-8 checks,
// repair for output that must be valid UTF-8 (JSON), and escaping for log lines.
#pragma once

#include <string>
#include <string_view>

namespace crosstune {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD.
std::string ToValidUtf8(std::string_view s);

// `s` made safe for one log line: control characters (including CR, LF, ESC and DEL) become
// \n, \r, \t or \xHH, a backslash becomes \\, and bytes that are not UTF-8 become \xHH; the
// result is cut at `max_bytes` (marked with "...").
std::string EscapeForLog(std::string_view s, size_t max_bytes = 256);

}  // namespace crosstune
