// An imported model as the binding's files share it (model.cc binds it, tuner.cc tunes it): the
// model library's LoadedModel (crosstune/model/pipeline.h), loaded as the CLI loads it.
#pragma once

#include "crosstune/model/pipeline.h"

namespace crosstune::python {

using ImportedModel = model::LoadedModel;

}  // namespace crosstune::python
