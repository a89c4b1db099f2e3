// graph.json of a model package: the network a graph executor runs. The model compiler writes it
// (through GraphToJson), crosstune-server reads and verifies it (ParseGraph, ValidateGraph,
// CheckParams, CheckFunctions) before anything runs.
//
// The file is in TVM's graph executor schema, as TVM's own loader (GraphExecutor::Load, in the
// releases that have the graph executor) reads it: every node attr is a string, the graph attrs
// are TVM's typed lists, and our own keys sit under "metadata", the last key, where that loader
// stops reading (graph_test.cc's WritesWhatTvmsLoaderReads checks the rules):
//
// {
//   "nodes": [                                      in topological order
//     {"op": "null", "name": "input", "inputs": []},          a graph input or a param
//     {"op": "tvm_op", "name": "layer1.0.conv1", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
//      "attrs": {"func_name": "ct_n3_conv2d",         the library function (kernel_abi.h)
//                "num_inputs": "3", "num_outputs": "1",
//                "flatten_data": "0",                  TVM's; kept, not used
//                "op_type": "conv2d",                  ours: for profiles and inspect
//                "scratch_bytes": "0",                 ours: > 0 adds a LAST argument, a u8 1-D
//                                                      tensor of this many bytes, 64-byte aligned
//                                                      (one buffer shared by all nodes: they run
//                                                      one at a time)
//                "flops": "231211008",                 ours: per call, for GFLOP/s in profiles
//                "provenance": "record",               ours: "record" or "default" (the
//                "provenance_task": "conv2d 1,64,56,56,...",   template's default config)
//                "provenance_config_index": "123",
//                "provenance_timestamp": "1764000000.5"}}],
//   "arg_nodes": [0, 1, 2],                          every "null" node, in order
//   "node_row_ptr": [0, 1, 2, 3, 4],                 entry id of node i's output j: row_ptr[i] + j
//   "heads": [[3, 0, 0]],                            the graph's outputs, in order
//   "attrs": {"storage_id": ["list_int", [...]],     per entry
//             "shape": ["list_shape", [[1, 3, 224, 224], ...]],   per entry
//             "dltype": ["list_str", ["float32", ...]]},          per entry
//   "metadata": {
//     "build_id": "<SHA-256 of the library>",        stamped by pkg::WritePackage
//     "crosstune": {"version": 2,
//                   "inputs": ["input"],             the model's inputs: null nodes that are not
//                                                    params, in the order the model lists them
//                   "outputs": ["logits"],           one name per head
//                   "storage_bytes": [602112, ...]}} bytes of each storage id
// }
//
// Version 1 files (written before this schema) are still read: their "build_id" and
// "crosstune" keys at the top level, numbers for scratch_bytes and flops, and provenance as an
// object ({"default": true} or {"task", "config_index", "timestamp"}).
//
// Rules ValidateGraph enforces (each refusal names the node, entry or storage id):
// - node names are unique and non-empty; "op" is "null" or "tvm_op"; a null node has no inputs
//   and one output; a tvm_op names a func_name and has num_inputs == inputs.size() and
//   num_outputs >= 1; every input refers to an output of an EARLIER node (topological order);
// - arg_nodes lists exactly the null nodes; node_row_ptr has nodes + 1 entries and steps by each
//   node's num_outputs; heads refer to existing entries; storage_id, shape and dltype have one
//   element per entry; shapes have rank <= 8 and no negative dimension; dltypes are known;
// - crosstune.inputs are distinct null nodes; crosstune.outputs has one name per head;
// - every storage id is in [0, storage_bytes.size()) and used; an entry fits its storage id;
//   two entries share a storage id only if their lifetimes do not overlap (EntryLifetimes:
//   graph inputs and params live for the whole run, heads to its end, any other entry from the
//   node that writes it to its last reader, both ends included; so a node never writes into the
//   buffer of one of its own inputs);
// - a node's arguments (inputs + outputs + scratch) fit the call limit (Limits::kMaxCallArgs).
// Params are the null nodes not named in crosstune.inputs; CheckParams matches them against
// params.bin by name, dtype and shape. CheckFunctions matches every func_name against the
// library's function table: it must exist with one 't' per argument.
//
// Thread-safety: plain data and free functions without shared state.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/messages_fwd.h"
#include "crosstune/params.h"
#include "crosstune/status.h"

namespace crosstune::graph {

// crosstune.version; a reader refuses a newer one with kVersionMismatch.
inline constexpr uint32_t kGraphVersion = 2;
inline constexpr std::string_view kNullOp = "null";
inline constexpr std::string_view kTvmOp = "tvm_op";
// Read limits, checked while parsing: graph.json is small next to params.bin.
inline constexpr uint64_t kMaxGraphBytes = uint64_t{64} << 20;
inline constexpr size_t kMaxNodes = size_t{1} << 16;

// One output of a node: [node, index, version] in the file (version is TVM's, kept, unused).
struct EntryRef {
  uint32_t node = 0;
  uint32_t index = 0;
  uint32_t version = 0;
  bool operator==(const EntryRef& o) const { return node == o.node && index == o.index; }
};

// Where a node's kernel config came from: a tuning record, or the template default.
struct Provenance {
  bool is_default = false;  // {"default": true}
  std::string task;         // the record's task identity
  int64_t config_index = -1;
  double timestamp = 0;  // the record's, seconds since the epoch
};

struct Node {
  std::string op;  // kNullOp or kTvmOp
  std::string name;
  std::vector<EntryRef> inputs;
  // tvm_op only.
  std::string func_name;
  uint32_t num_inputs = 0;
  uint32_t num_outputs = 1;
  std::string flatten_data = "0";
  std::string op_type;
  uint64_t scratch_bytes = 0;
  uint64_t flops = 0;
  std::optional<Provenance> provenance;
  // Attributes this version does not know, as JSON text, written back unchanged.
  std::map<std::string, std::string> other_attrs;

  bool is_op() const { return op == kTvmOp; }
  // Arguments of its call: inputs, outputs, then the scratch tensor when scratch_bytes > 0.
  size_t num_args() const { return inputs.size() + num_outputs + (scratch_bytes > 0 ? 1 : 0); }
};

struct Graph {
  std::vector<Node> nodes;
  std::vector<uint32_t> arg_nodes;
  std::vector<uint32_t> node_row_ptr;
  std::vector<EntryRef> heads;
  // Per entry.
  std::vector<uint32_t> storage_id;
  std::vector<std::vector<int64_t>> shape;
  std::vector<DLDataType> dltype;
  std::string build_id;
  // Ours ("crosstune").
  uint32_t version = kGraphVersion;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<uint64_t> storage_bytes;

  size_t num_entries() const { return node_row_ptr.empty() ? 0 : node_row_ptr.back(); }
  // Valid for a graph that passed ValidateGraph (or after FillIndex).
  uint32_t entry_id(uint32_t node, uint32_t index = 0) const { return node_row_ptr[node] + index; }
  uint32_t entry_id(const EntryRef& e) const { return entry_id(e.node, e.index); }
  // The node of that name, or -1.
  int64_t FindNode(std::string_view name) const;
};

// Structure and types only (kInvalidArgument naming the key: "graph.json: nodes[4].inputs[1]:
// ..."); kVersionMismatch for a newer crosstune.version; kLimitExceeded past kMaxNodes. The text
// is read with the bounded reader (json_reader.h): over kMaxGraphBytes or nested deeper than
// kMaxJsonDepth is kInvalidArgument before anything is built. A file without our keys (TVM's own)
// parses, with empty inputs/outputs/storage_bytes: ValidateGraph then says what is missing.
Expected<Graph> ParseGraph(std::string_view json_text);
// TVM's key order, num_inputs/num_outputs/flatten_data as strings (as TVM writes them).
std::string GraphToJson(const Graph& graph, int indent = 2);
// Sets arg_nodes and node_row_ptr from the nodes (for writers that built the nodes).
void FillIndex(Graph* graph);

// Everything the header lists under "Rules".
Status ValidateGraph(const Graph& graph);

// When an entry is alive, in node positions: [first, last], both included; nodes.size() means
// "after the last node" (graph inputs, params and heads last until then). For a valid graph.
struct Lifetime {
  uint32_t first = 0;
  uint32_t last = 0;
};
std::vector<Lifetime> EntryLifetimes(const Graph& graph);

// "layer1.0.relu", or "split:1" for a node's second output. For a valid graph.
std::string EntryName(const Graph& graph, uint32_t entry_id);

// The null nodes that are not graph inputs, in node order.
std::vector<uint32_t> ParamNodes(const Graph& graph);

// Every param node has a tensor of its name in params.bin with its entry's dtype and shape, and
// params.bin holds nothing else. kInvalidArgument listing every missing and every extra name
// ("params.bin lacks 2 params the graph needs: conv1.weight, fc.bias; ..."), or naming the first
// param whose dtype or shape differs.
Status CheckParams(const Graph& graph, const std::vector<pkg::ParamTensor>& params);

// Every tvm_op's func_name is a function of the library with one 't' per argument.
// kInvalidArgument naming the node and the function.
Status CheckFunctions(const Graph& graph, const std::vector<msg::FunctionInfo>& functions);

// TVM's dtype names: "float32", "int64", "uint8", "bfloat16" ("float32x4" for lanes).
std::string TvmDTypeName(DLDataType dtype);

}  // namespace crosstune::graph
