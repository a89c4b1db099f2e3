// Integers read from JSON that came from outside (manifests, params indexes). nlohmann's get<T>()
// converts a float such as 8.9e81 to an integer type with undefined behaviour (UBSan reports it;
// the package fuzzer found one), and wraps a negative number into an unsigned type. These accept
// JSON integers that fit T only, and throw std::runtime_error naming the field (and quoting the
// value, cut short) otherwise.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "crosstune/json_reader.h"

namespace crosstune {

template <typename T>
T JsonInteger(const nlohmann::json& v, const char* field) {
  static_assert(std::is_integral_v<T>);
  auto bad = [&] {
    return std::runtime_error(std::string(field) + " must be an integer in [" +
                              std::to_string(std::numeric_limits<T>::min()) + ", " +
                              std::to_string(std::numeric_limits<T>::max()) + "], got " +
                              JsonExcerpt(v));
  };
  if (!v.is_number_integer()) throw bad();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw bad();
    return static_cast<T>(u);
  }
  const int64_t i = v.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    if (i < 0 || static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      throw bad();
    }
  } else {
    if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      throw bad();
    }
  }
  return static_cast<T>(i);
}

// A list of integers, each as JsonInteger.
template <typename T>
std::vector<T> JsonIntegers(const nlohmann::json& v, const char* field) {
  if (!v.is_array()) throw std::runtime_error(std::string(field) + " must be a list of integers");
  std::vector<T> out;
  out.reserve(v.size());
  for (const auto& e : v) out.push_back(JsonInteger<T>(e, field));
  return out;
}

}  // namespace crosstune
