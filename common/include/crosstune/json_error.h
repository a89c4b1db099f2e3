// What the JSON library's exceptions say, in words, for error messages and warnings.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace crosstune {

// A nlohmann exception's text without its "[json.exception.type_error.302] " tag (and a parse
// error's "parse error at line 1, column 7: "), escaped and cut short, e.g. "type must be string,
// but is number" or "key 'config' not found". Messages and warnings quote this, never e.what().
// (Defined with the bounded reader, json_reader.cc, which words its own errors with it.)
std::string JsonErrorReason(const nlohmann::json::exception& e);

}  // namespace crosstune
