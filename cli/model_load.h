// What the compiler module's model commands share (import, compile, tune --model): an ONNX model
// read through model::Load with the --shape and --max-model-mb flags, as the Python package's
// import_onnx reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/model/pipeline.h"

namespace crosstune::cli {

// model::Load with --shape NAME=D1,D2,... flags (model::ParseShapeFlags) and the budget in MiB;
// ends the command with the error (naming the node, the input or the shape flag) when it fails.
model::LoadedModel LoadModel(const std::string& path, const std::vector<std::string>& shapes,
                             uint64_t max_model_mb = model::kDefaultMaxModelMb);

}  // namespace crosstune::cli
