// The one way to read JSON that comes from outside the process: TVM peers, package manifests,
// params indexes, graph.json, records logs, Kernel Tuner caches, command-line values.
//
// nlohmann's parser itself keeps its state on the heap, but copying, comparing or dump()ing a
// value recurses once per level: a 200 KB text nested 100,000 levels deep parses fine and then
// overflows the stack. ParseJson refuses such a text while it parses (nlohmann's parser callback
// sees every container open, so nothing deeper than the limit is ever built) and refuses a text
// over its size limit before it parses. A value it returns is safe to copy and dump.
//
// Thread-safety: the functions are reentrant.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "crosstune/status.h"

namespace crosstune {

// Containers nested deeper than this are refused. crosstune's own files need 5 or fewer levels.
inline constexpr int kMaxJsonDepth = 64;

struct JsonLimits {
  size_t max_bytes = 1u << 20;  // the whole text
  int max_depth = kMaxJsonDepth;
};

// Parses `text` as one JSON value (strict RFC 8259: no comments, no trailing bytes; strings must
// be UTF-8). Errors are InvalidArgument with a message that says what and where, e.g.
//   "JSON nested deeper than 64 levels at byte 65"
//   "JSON text of 2000000 bytes is over the limit of 1048576"
//   "not JSON: syntax error at byte 7: unexpected end of input; expected ']'"
// Callers prefix their context ("manifest.json: ..."). Bytes quoted from the text are escaped.
Expected<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits = {});

// `v` as compact JSON text for an error message or a log line, cut at about `max_bytes` (marked
// "...") without serializing the rest, with control characters escaped. Safe on any value, even
// one nested deeper than kMaxJsonDepth: each level writes a bracket before it descends, so the
// output is full before the recursion is deeper than `max_bytes`.
std::string JsonExcerpt(const nlohmann::json& v, size_t max_bytes = 64);

}  // namespace crosstune
