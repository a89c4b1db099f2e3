// The bounded JSON reader itself (common/include/crosstune/json_reader.h), which every reader of
// outside JSON goes through: whatever it accepts must be nested 64 levels deep at most (so copying
// and serializing it cannot overflow the stack), must copy, serialize and read back as the same
// value; whatever it refuses gets a message; JsonExcerpt of anything stays within its bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "crosstune/json_reader.h"

namespace {

// The nesting depth of `v`, walked without recursion (the value may be what is being guarded).
int Depth(const nlohmann::json& v) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> todo = {{&v, 1}};
  while (!todo.empty()) {
    auto [j, level] = todo.back();
    todo.pop_back();
    if (!j->is_structured()) continue;
    deepest = std::max(deepest, level);
    for (const auto& child : *j) todo.emplace_back(&child, level + 1);
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = ParseJson(text, {.max_bytes = 1u << 20});
  if (!j.ok()) {
    if (j.status().message().empty() || j.status().code() != ErrorCode::kInvalidArgument) {
      std::abort();
    }
    return 0;
  }
  if (Depth(*j) > kMaxJsonDepth) std::abort();
  nlohmann::json copy = *j;  // recursive: safe only because of the depth bound
  std::string dumped = copy.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  auto again = ParseJson(dumped, {.max_bytes = 2u << 20});
  if (!again.ok() || *again != *j) std::abort();
  if (JsonExcerpt(*j, 40).size() > 40 * 6 + 3) std::abort();  // each byte escapes to 6 at most
  return 0;
}
