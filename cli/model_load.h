// What the compiler module's model commands share (import, compile, tune --model): an ONNX model
// read with --shape flags and put through the default passes, as `crosstune compile` compiles it.
#pragma once

#include <string>
#include <vector>

#include "crosstune/model/graph.h"
#include "crosstune/model/tasks.h"
#include "crosstune/tuner/workload.h"

namespace crosstune::cli {

// ImportOnnx with --shape NAME=D1,D2,... flags, then the default passes; ends the command with
// the importer's error (naming the node, the input or the shape flag) when it fails.
model::Graph LoadModel(const std::string& path, const std::vector<std::string>& shapes);
// "r50w16" for "models/r50w16.onnx": the workload name its records carry.
std::string ModelName(const std::string& path);

}  // namespace crosstune::cli
