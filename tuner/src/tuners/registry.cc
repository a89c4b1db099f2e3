// MakeTuner: a search strategy by name.
#include "registry.h"

#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner {

namespace {
using Factory = std::unique_ptr<Tuner> (*)(const ConfigSpace&, const TunerOptions&);
struct TunerEntry {
  const char* name;
  Factory make;
};
constexpr TunerEntry kTuners[] = {
    {"random", internal::MakeRandomTuner},
    {"grid", internal::MakeGridTuner},
    {"ga", internal::MakeGaTuner},
    {"xgb", internal::MakeXgbTuner},
};
}  // namespace

const std::vector<std::string>& TunerNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const TunerEntry& e : kTuners) out.push_back(e.name);
    return out;
  }();
  return names;
}

Expected<std::unique_ptr<Tuner>> MakeTuner(const std::string& name, const ConfigSpace& space,
                                           const TunerOptions& options) {
  for (const TunerEntry& e : kTuners) {
    if (name == e.name) return e.make(space, options);
  }
  std::string valid;
  for (const std::string& n : TunerNames()) valid += (valid.empty() ? "" : ", ") + n;
  return Status(ErrorCode::kInvalidArgument,
                "unknown tuner '" + name + "' (tuners: " + valid + ")");
}

}  // namespace crosstune::tuner
