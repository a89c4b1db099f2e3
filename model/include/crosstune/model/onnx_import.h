// ONNX import: a .onnx file to a Graph (graph.h) with every value's shape known.
//
//   auto g = ImportOnnx("resnet50.onnx", {.shapes = {{"input", {1, 3, 224, 224}}}});
//
// Reads IR versions 3 to 11 (old files list initializers among the graph inputs: those are
// weights, not inputs), tensors in raw_data or the typed fields, external data files (beside the
// model, never outside its folder), and the default domain's opsets 7 to 17. Nodes are checked
// and their shapes inferred one by one through the operator table (ops.h), so an unsupported
// operator or attribute is refused with the node's name, its operator and what is missing; nodes
// whose inputs are constants are evaluated at once (a Reshape's target shape must be known). An
// input with a dynamic dimension needs a shape from `shapes`, else it is refused by name. The
// model's own input and output names are kept.
//
// Host only: the generated protobuf code links libprotobuf-lite, never part of the server.
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crosstune/model/graph.h"
#include "crosstune/status.h"

namespace crosstune::model {

inline constexpr int kMinIrVersion = 3, kMaxIrVersion = 11;
inline constexpr int kMinOpset = 7, kMaxOpset = 17;
inline constexpr uint64_t kDefaultMaxModelBytes = uint64_t{4} << 30;  // 4 GiB

struct ImportOptions {
  // Input name -> shape, for inputs with dynamic dimensions (or to check a static one).
  std::map<std::string, std::vector<int64_t>> shapes;
  // Inputs to bind to constants at import (e.g. a Reshape's target shape that a model takes as
  // an input): they stop being inputs, and constant folding sees them.
  std::map<std::string, Value> constants;
  // The import's memory budget: the model file, each tensor (weights, folded constants and
  // computed values alike) and the sum of all constant tensors must fit in it; past it the
  // import fails with kLimitExceeded naming the tensor (`--max-model-mb` on the command line).
  uint64_t max_model_bytes = kDefaultMaxModelBytes;
  // Tensors whose data lies in files beside the model; false refuses them (an import from
  // memory with no folder, e.g. the fuzz target).
  bool external_data = true;
};

Expected<Graph> ImportOnnx(const std::string& path, const ImportOptions& options = {});
// From serialized bytes; external data files are looked up in `base_dir`.
Expected<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& base_dir,
                                const ImportOptions& options = {});

// The names of a model's inputs that are not initializers, in order (no shapes needed).
Expected<std::vector<std::string>> OnnxInputNames(const std::string& path);

// "--shape NAME=D1,D2,..." flags into ImportOptions::shapes; kInvalidArgument naming a bad one.
Expected<std::map<std::string, std::vector<int64_t>>> ParseShapeFlags(
    const std::vector<std::string>& flags);

// A serialized TensorProto file (the ONNX test data's input_0.pb / output_0.pb) as a constant.
Expected<Value> ReadTensorFile(const std::string& path);

}  // namespace crosstune::model
