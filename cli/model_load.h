// What the compiler module's model commands share (import, compile, tune --model): an ONNX model
// read with --shape flags and put through the default passes, as `crosstune compile` compiles it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/model/graph.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/model/tasks.h"
#include "crosstune/tuner/workload.h"

namespace crosstune::cli {

// --max-model-mb: the importer's budget (ImportOptions::max_model_bytes) in MiB, its default
// and its largest value (1 TiB).
inline constexpr uint64_t kDefaultMaxModelMb = model::kDefaultMaxModelBytes >> 20;
inline constexpr uint64_t kMaxModelMb = uint64_t{1} << 20;

// ImportOnnx with --shape NAME=D1,D2,... flags, then the default passes; ends the command with
// the importer's error (naming the node, the input or the shape flag) when it fails.
model::Graph LoadModel(const std::string& path, const std::vector<std::string>& shapes,
                       uint64_t max_model_mb = kDefaultMaxModelMb);
// "r50w16" for "models/r50w16.onnx": the workload name its records carry.
std::string ModelName(const std::string& path);

}  // namespace crosstune::cli
