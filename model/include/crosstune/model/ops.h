// The operators the model compiler knows, in one table: a new operator is one OpDef (in a file
// of model/src/ops/) plus one row in model/src/ops/registry.cc.
//
// An OpDef says which attributes the operator takes (any other is refused at import, with the
// node's name), checks the values it supports and infers its outputs' dtypes and shapes (import
// runs this node by node, so every value's shape is known), and may evaluate the node on the host:
// constant folding uses that for nodes whose inputs are all constants, and Interpret() runs a whole
// graph with it as the reference the compiled network is checked against.
//
// Thread-safety: the table is immutable; the functions touch only the graph they are given.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "crosstune/model/graph.h"
#include "crosstune/status.h"

namespace crosstune::model {

// One node of a graph while an OpDef works on it.
class OpContext {
 public:
  OpContext(Graph& graph, Node& node) : graph_(graph), node_(node) {}
  Graph& graph() { return graph_; }
  Node& node() { return node_; }
  int opset() const { return graph_.opset; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  // Input i is present (not left out, and within the node's inputs).
  bool has_input(int i) const { return i < num_inputs() && node_.inputs[i] >= 0; }
  const Value& in(int i) const { return graph_.values[node_.inputs[i]]; }
  Value& out(int i) { return graph_.values[node_.outputs[i]]; }
  // kInvalidArgument "Conv node 'conv1': <what>".
  Status Error(const std::string& what) const;
  // An input that must be a constant (e.g. Reshape's shape): its elements as int64, or an error
  // naming it.
  Expected<std::vector<int64_t>> ConstInts(int i, const std::string& what) const;
  // Sets output i's dtype and shape.
  void SetOutput(int i, DType dtype, std::vector<int64_t> shape);
  // Output i's data, float32 or raw bytes (sized from its dtype and shape).
  std::vector<float>& OutFloats(int i);
  std::vector<uint8_t>& OutBytes(int i);
  // Inputs' data as float (any float32 input).
  const float* InFloats(int i) const { return in(i).floats(); }
  // Stores what OutFloats/OutBytes filled into the outputs' values.
  void Commit();

 private:
  Graph& graph_;
  Node& node_;
  std::vector<std::pair<int, std::vector<float>>> float_outs_;
  std::vector<std::pair<int, std::vector<uint8_t>>> byte_outs_;
};

inline constexpr int kMinOpsetDefault = 7;
// The newest opset the rows were checked against: onnx's definitions of every operator in the
// table, up to this opset, changed nothing the row's kernel computes (only types it does not take,
// which are refused by name, or attributes it does not take, refused by name too). A row whose
// operator changed after it says so with its own until_opset.
inline constexpr int kMaxOpsetDefault = 28;

// An attribute an operator takes: its name and the kind a file must give it as (a wrong kind is
// refused at import, naming the node, the attribute and both kinds).
struct AttrSpec {
  std::string name;
  Attr::Kind kind = Attr::Kind::kInt;
};
namespace attr {
inline AttrSpec Int(std::string name) { return {std::move(name), Attr::Kind::kInt}; }
inline AttrSpec Float(std::string name) { return {std::move(name), Attr::Kind::kFloat}; }
inline AttrSpec String(std::string name) { return {std::move(name), Attr::Kind::kString}; }
inline AttrSpec Ints(std::string name) { return {std::move(name), Attr::Kind::kInts}; }
inline AttrSpec Floats(std::string name) { return {std::move(name), Attr::Kind::kFloats}; }
inline AttrSpec Tensor(std::string name) { return {std::move(name), Attr::Kind::kTensor}; }
}  // namespace attr

struct OpDef {
  const char* op;  // the ONNX operator type, or a fused operator's name ("FusedConv")
  std::vector<AttrSpec> attributes;
  int min_inputs = 1;
  int max_inputs = 1;
  int max_outputs = 1;  // outputs past the first that are used must be supported by Infer
  // Checks attribute values and input shapes, normalises the attributes (explicit pads, strides,
  // ...) and sets every output's dtype and shape.
  Status (*infer)(OpContext& ctx) = nullptr;
  // Computes the outputs from the inputs' data (all present inputs are constants). Null: the
  // operator is never folded and Interpret() refuses it.
  Status (*eval)(OpContext& ctx) = nullptr;
  // Multiply-adds count twice; null: 0 (data movement only).
  double (*flops)(const Graph& g, const Node& n) = nullptr;
  // eval reads only its inputs' shapes (Shape): it folds even when they are not constants.
  bool folds_from_shapes = false;
  // The oldest opset whose definition of the operator this implements: models of opsets below 7
  // import when every operator they use is unchanged since then.
  int since_opset = kMinOpsetDefault;
  // An operator the passes make (FusedConv, Dense, LayoutTransform): never read from a file.
  bool from_passes = false;
  // The newest opset whose definition of the operator this implements (see kMaxOpsetDefault); a
  // model of a newer opset is refused, naming the operator, the opset and this range. (Last: the
  // rows initialise the fields above in order.)
  int until_opset = kMaxOpsetDefault;
};

const OpDef* FindOp(const std::string& op);
// Operator names of the table, sorted.
std::vector<std::string> SupportedOps();
// The ONNX operators a model may use (the rows the passes do not make), sorted, each with the
// opsets its row implements.
struct OnnxOperator {
  std::string op;
  int since_opset = 0, until_opset = 0;
};
std::vector<OnnxOperator> OnnxOperators();

// Checks the node against its OpDef (known operator, attribute names and kinds, input and output
// counts), infers its outputs and checks their shapes (CheckedBytes: rank, no negative dimension,
// no overflow). Errors name the node, its operator and what is missing. The opset is not checked
// here: the importer refuses a file's node outside its row's opsets before inferring anything.
Status InferNode(Graph& g, Node& n);
// Evaluates a node whose inputs are constants: its outputs become constants.
Status EvalNode(Graph& g, Node& n);
// The node can be folded now: its operator evaluates on the host and every present input is a
// constant (or it reads only shapes).
bool CanFold(const Graph& g, const Node& n);
double NodeFlops(const Graph& g, const Node& n);

// Runs the graph on the host with every node's eval (the reference for compiled code): the
// graph's inputs get `inputs` (in order, each of the input's dtype and shape); returns the
// outputs as constants.
Expected<std::vector<Value>> Interpret(const Graph& g, const std::vector<Value>& inputs);
// The same for float32 inputs and outputs.
Expected<std::vector<std::vector<float>>> Interpret(const Graph& g,
                                                    const std::vector<std::vector<float>>& inputs);

}  // namespace crosstune::model
