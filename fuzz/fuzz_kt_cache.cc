// Kernel Tuner cache files as `crosstune replay` reads them: the JSON text (a closed file or one
// a stopped run left open), then the replay table's space built from its points.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "crosstune/tuner/kernel_tuner_cache.h"

namespace {

// One value, as the table's knobs compare them: 1 and 1.0 are one value.
bool SameValue(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune::tuner;
  auto cache =
      ParseKernelTunerCache(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (!cache.ok()) return 0;
  if (cache->params.empty() || cache->points.empty()) std::abort();  // refused, never returned
  auto made = MakePointSpace("fuzz.json", cache->points, cache->params);
  if (!made.ok()) return 0;
  if (made->indices.size() != cache->points.size()) std::abort();
  for (size_t i = 0; i < cache->points.size(); ++i) {
    // Every point's index must hold its own values.
    if (made->indices[i] >= made->space->size()) std::abort();
    Config c = made->space->Get(made->indices[i]);
    for (const std::string& name : made->params) {
      if (!SameValue(c.Value(name), cache->points[i].values.at(name))) std::abort();
    }
    if (i == 0) (void)made->space->Features(c);
  }
  return 0;
}
