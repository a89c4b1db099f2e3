// The constructors behind MakeTuner (tuners/registry.cc), one per strategy file.
#pragma once

#include <memory>

#include "crosstune/tuner/tuner.h"

namespace crosstune::tuner::internal {

std::unique_ptr<Tuner> MakeRandomTuner(const ConfigSpace& space, const TunerOptions& options);
std::unique_ptr<Tuner> MakeGridTuner(const ConfigSpace& space, const TunerOptions& options);
std::unique_ptr<Tuner> MakeGaTuner(const ConfigSpace& space, const TunerOptions& options);
std::unique_ptr<Tuner> MakeXgbTuner(const ConfigSpace& space, const TunerOptions& options);

}  // namespace crosstune::tuner::internal
