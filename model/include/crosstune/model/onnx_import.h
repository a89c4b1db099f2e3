// ONNX import: a .onnx file to a Graph (graph.h) with every value's shape known.
//
//   auto g = ImportOnnx("resnet50.onnx", {.shapes = {{"input", {1, 3, 224, 224}}}});
//
// Reads IR versions 3 to 14 (old files list initializers among the graph inputs: those are
// weights, not inputs), tensors in raw_data or the typed fields, external data files (beside the
// model, never outside its folder), and the default domain's opsets 7 to 28, each operator in the
// opsets its row of the table (ops.h) follows. Every operator, attribute and opset the table
// does not take is refused at once, before any tensor is read, with its node count and names.
// Nodes are then checked and their shapes inferred one by one through the table, so a wrong
// shape or attribute value is refused with the node's name and what is wrong; nodes
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
#include "crosstune/model/ops.h"
#include "crosstune/status.h"

namespace crosstune::model {

// The newest IR version and default-domain opset are those of the onnx release the model venv pins
// (scripts/install-deps.sh; onnx 1.23.2: IR 14, opset 28): the OpTable test fails when a newer
// release knows more, until the operator table's rows are checked against it.
inline constexpr int kMinIrVersion = 3, kMaxIrVersion = 14;
inline constexpr int kMinOpset = 7, kMaxOpset = kMaxOpsetDefault;
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

// What a model uses that the operator table does not take: one entry per operator (of another
// domain, or missing from the table), per operator whose row does not cover the model's opset,
// and per attribute an operator's row does not take. The import refuses the same, in one
// message; `crosstune import --json` prints these.
struct Unsupported {
  std::string kind;       // "operator", "opset" or "attribute"
  std::string op;         // the operator's type
  std::string domain;     // "" for the default domain
  std::string attribute;  // for "attribute"
  int since_opset = 0;    // for "opset": the opsets the row covers
  int until_opset = 0;
  std::vector<std::string> nodes;  // every node that uses it, in the file's order
};
struct UnsupportedReport {
  int opset = 0;                         // the default domain's, as the file declares it
  std::vector<Unsupported> unsupported;  // sorted by kind, domain, operator, attribute
};
// Reads the model's graph (no tensor is checked or evaluated); an error only when the file is no
// ONNX model, or its IR version or opset is out of range.
Expected<UnsupportedReport> FindUnsupported(const std::string& path,
                                            uint64_t max_model_bytes = kDefaultMaxModelBytes);

// The names of a model's inputs that are not initializers, in order (no shapes needed).
Expected<std::vector<std::string>> OnnxInputNames(const std::string& path);

// "--shape NAME=D1,D2,..." flags into ImportOptions::shapes; kInvalidArgument naming a bad one.
Expected<std::map<std::string, std::vector<int64_t>>> ParseShapeFlags(
    const std::vector<std::string>& flags);

// A serialized TensorProto file (the ONNX test data's input_0.pb / output_0.pb) as a constant of
// the file's own element type (an edge type such as float16 or bfloat16 is not widened: it is what
// a graph input of that type takes and a graph output of it gives).
Expected<Value> ReadTensorFile(const std::string& path);

}  // namespace crosstune::model
