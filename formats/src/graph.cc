#include "crosstune/graph.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "crosstune/json_error.h"
#include "crosstune/json_fields.h"
#include "crosstune/json_reader.h"
#include "crosstune/messages.h"
#include "crosstune/numbers.h"
#include "crosstune/protocol.h"
#include "crosstune/tensor.h"

namespace crosstune::graph {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A structural error while reading; `what` starts with the path of the offending key.
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A value quoted in an error message, cut short: the file came from outside.
std::string Quote(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

const json& At(const json& obj, const char* key, const std::string& path) {
  if (!obj.is_object()) throw Malformed(path + " must be an object");
  auto it = obj.find(key);
  if (it == obj.end()) throw Malformed(path + " has no \"" + key + "\"");
  return *it;
}

std::string String(const json& v, const std::string& path) {
  if (!v.is_string()) throw Malformed(path + " must be a string, got " + Quote(v));
  return v.get<std::string>();
}

// An unsigned integer given as a JSON number or a decimal string (TVM writes "3").
template <typename T>
T Count(const json& v, const std::string& path) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw Malformed(path + " must be a non-negative integer, got " + Quote(v));
    }
    uint64_t n = std::stoull(s);
    if (n > std::numeric_limits<T>::max()) throw Malformed(path + " is too large: " + s);
    return static_cast<T>(n);
  }
  try {
    return JsonInteger<T>(v, path.c_str());
  } catch (const std::runtime_error& e) {
    throw Malformed(e.what());
  }
}

// ["list_int", [...]] and the like.
const json& TypedList(const json& attrs, const char* key, const char* type) {
  const std::string path = std::string("attrs.") + key;
  const json& v = At(attrs, key, "attrs");
  if (!v.is_array() || v.size() != 2 || !v[0].is_string() || v[0] != type || !v[1].is_array()) {
    throw Malformed(path + " must be [\"" + type + "\", [...]]");
  }
  return v[1];
}

EntryRef ReadEntry(const json& v, const std::string& path) {
  if (!v.is_array() || v.size() < 2 || v.size() > 3) {
    throw Malformed(path + " must be [node, index, version], got " + Quote(v));
  }
  EntryRef e;
  e.node = Count<uint32_t>(v[0], path + "[0]");
  e.index = Count<uint32_t>(v[1], path + "[1]");
  if (v.size() == 3) e.version = Count<uint32_t>(v[2], path + "[2]");
  return e;
}

// A number written as a string (the version 2 node attrs are all strings, as TVM's graph
// executor reads them), parsed by numbers.h's ParseIntegerIn or ParseNumberIn.
template <typename T>
T FromText(const json& v, const std::string& path, Expected<T> (*parse)(std::string_view, T, T)) {
  if (!v.is_string()) throw Malformed(path + " must be a string, got " + Quote(v));
  auto n = parse(v.get_ref<const std::string&>(), std::numeric_limits<T>::lowest(),
                 std::numeric_limits<T>::max());
  if (!n.ok()) throw Malformed(path + ": " + n.status().message());
  return *n;
}

// Version 2: "provenance" is "default" or "record", the record's fields in provenance_task,
// provenance_config_index and provenance_timestamp (strings).
Provenance ReadProvenanceAttrs(const json& attrs, const std::string& apath) {
  Provenance p;
  const std::string kind = String(attrs.at("provenance"), apath + ".provenance");
  if (kind == "default") {
    p.is_default = true;
  } else if (kind != "record") {
    throw Malformed(apath + ".provenance must be \"default\" or \"record\", got " +
                    Quote(attrs.at("provenance")));
  }
  if (auto it = attrs.find("provenance_task"); it != attrs.end()) {
    p.task = String(*it, apath + ".provenance_task");
  }
  if (auto it = attrs.find("provenance_config_index"); it != attrs.end()) {
    p.config_index = FromText<int64_t>(*it, apath + ".provenance_config_index", ParseIntegerIn);
  }
  if (auto it = attrs.find("provenance_timestamp"); it != attrs.end()) {
    p.timestamp = FromText<double>(*it, apath + ".provenance_timestamp", ParseNumberIn);
  }
  return p;
}

// Version 1: {"default": true} or {"task": ..., "config_index": N, "timestamp": T}.
Provenance ReadProvenance(const json& v, const std::string& path) {
  if (!v.is_object()) throw Malformed(path + " must be an object");
  Provenance p;
  if (auto it = v.find("default"); it != v.end()) {
    if (!it->is_boolean()) throw Malformed(path + ".default must be true or false");
    p.is_default = it->get<bool>();
  }
  if (auto it = v.find("task"); it != v.end()) p.task = String(*it, path + ".task");
  if (auto it = v.find("config_index"); it != v.end()) {
    try {
      p.config_index = JsonInteger<int64_t>(*it, (path + ".config_index").c_str());
    } catch (const std::runtime_error& e) {
      throw Malformed(e.what());
    }
  }
  if (auto it = v.find("timestamp"); it != v.end()) {
    if (!it->is_number()) throw Malformed(path + ".timestamp must be a number");
    p.timestamp = it->get<double>();
  }
  return p;
}

Node ReadNode(const json& v, size_t i) {
  const std::string path = "nodes[" + std::to_string(i) + "]";
  Node n;
  n.op = String(At(v, "op", path), path + ".op");
  n.name = String(At(v, "name", path), path + ".name");
  const json& inputs = At(v, "inputs", path);
  if (!inputs.is_array()) throw Malformed(path + ".inputs must be a list");
  for (size_t k = 0; k < inputs.size(); ++k) {
    n.inputs.push_back(ReadEntry(inputs[k], path + ".inputs[" + std::to_string(k) + "]"));
  }
  auto attrs_it = v.find("attrs");
  if (n.op != kTvmOp) {
    n.num_inputs = static_cast<uint32_t>(n.inputs.size());
    return n;
  }
  if (attrs_it == v.end()) throw Malformed(path + " (tvm_op) has no \"attrs\"");
  const json& attrs = *attrs_it;
  const std::string apath = path + ".attrs";
  if (!attrs.is_object()) throw Malformed(apath + " must be an object");
  for (auto it = attrs.begin(); it != attrs.end(); ++it) {
    const std::string& key = it.key();
    const std::string kpath = apath + "." + key;
    if (key == "func_name") {
      n.func_name = String(*it, kpath);
    } else if (key == "num_inputs") {
      n.num_inputs = Count<uint32_t>(*it, kpath);
    } else if (key == "num_outputs") {
      n.num_outputs = Count<uint32_t>(*it, kpath);
    } else if (key == "flatten_data") {
      n.flatten_data = it->is_string() ? it->get<std::string>() : it->dump();
    } else if (key == "op_type") {
      n.op_type = String(*it, kpath);
    } else if (key == "scratch_bytes") {
      n.scratch_bytes = Count<uint64_t>(*it, kpath);
    } else if (key == "flops") {
      n.flops = Count<uint64_t>(*it, kpath);
    } else if (key == "provenance") {
      n.provenance =
          it->is_string() ? ReadProvenanceAttrs(attrs, apath) : ReadProvenance(*it, kpath);
    } else if (key == "provenance_task" || key == "provenance_config_index" ||
               key == "provenance_timestamp") {
      // Read with "provenance" above.
    } else {
      n.other_attrs[key] = it->dump();
    }
  }
  if (attrs.find("func_name") == attrs.end()) throw Malformed(apath + " has no \"func_name\"");
  if (attrs.find("num_inputs") == attrs.end()) {
    n.num_inputs = static_cast<uint32_t>(n.inputs.size());
  }
  return n;
}

Graph ReadGraph(const json& root) {
  if (!root.is_object()) throw Malformed("the top level must be an object");
  Graph g;
  const json& nodes = At(root, "nodes", "graph");
  if (!nodes.is_array()) throw Malformed("nodes must be a list");
  if (nodes.size() > kMaxNodes) {
    throw std::length_error("graph has " + std::to_string(nodes.size()) +
                            " nodes, over the limit of " + std::to_string(kMaxNodes));
  }
  for (size_t i = 0; i < nodes.size(); ++i) g.nodes.push_back(ReadNode(nodes[i], i));
  const json& args = At(root, "arg_nodes", "graph");
  if (!args.is_array()) throw Malformed("arg_nodes must be a list");
  for (size_t i = 0; i < args.size(); ++i) {
    g.arg_nodes.push_back(Count<uint32_t>(args[i], "arg_nodes[" + std::to_string(i) + "]"));
  }
  const json& rows = At(root, "node_row_ptr", "graph");
  if (!rows.is_array()) throw Malformed("node_row_ptr must be a list");
  for (size_t i = 0; i < rows.size(); ++i) {
    g.node_row_ptr.push_back(Count<uint32_t>(rows[i], "node_row_ptr[" + std::to_string(i) + "]"));
  }
  const json& heads = At(root, "heads", "graph");
  if (!heads.is_array()) throw Malformed("heads must be a list");
  for (size_t i = 0; i < heads.size(); ++i) {
    g.heads.push_back(ReadEntry(heads[i], "heads[" + std::to_string(i) + "]"));
  }
  const json& attrs = At(root, "attrs", "graph");
  const json& sids = TypedList(attrs, "storage_id", "list_int");
  for (size_t i = 0; i < sids.size(); ++i) {
    g.storage_id.push_back(Count<uint32_t>(sids[i], "attrs.storage_id[" + std::to_string(i) + "]"));
  }
  const json& shapes = TypedList(attrs, "shape", "list_shape");
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string p = "attrs.shape[" + std::to_string(i) + "]";
    if (!shapes[i].is_array()) throw Malformed(p + " must be a list of dimensions");
    if (shapes[i].size() > static_cast<size_t>(Limits::kMaxTensorRank)) {
      throw Malformed(p + " has rank " + std::to_string(shapes[i].size()) + ", over the limit of " +
                      std::to_string(Limits::kMaxTensorRank));
    }
    try {
      g.shape.push_back(JsonIntegers<int64_t>(shapes[i], p.c_str()));
    } catch (const std::runtime_error& e) {
      throw Malformed(e.what());
    }
  }
  const json& dtypes = TypedList(attrs, "dltype", "list_str");
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const std::string p = "attrs.dltype[" + std::to_string(i) + "]";
    auto t = ParseDType(String(dtypes[i], p));
    if (!t.ok()) throw Malformed(p + ": " + t.status().message());
    g.dltype.push_back(*t);
  }
  // Ours: under "metadata" (version 2), or at the top level (version 1, which TVM's loader
  // refused).
  const json* build_id = nullptr;
  const json* ours_ptr = nullptr;
  if (auto m = root.find("metadata"); m != root.end()) {
    if (!m->is_object()) throw Malformed("metadata must be an object");
    if (auto it = m->find("build_id"); it != m->end()) build_id = &*it;
    if (auto it = m->find("crosstune"); it != m->end()) ours_ptr = &*it;
  }
  if (build_id == nullptr) {
    if (auto it = root.find("build_id"); it != root.end()) build_id = &*it;
  }
  if (ours_ptr == nullptr) {
    if (auto it = root.find("crosstune"); it != root.end()) ours_ptr = &*it;
  }
  if (build_id != nullptr) g.build_id = String(*build_id, "build_id");
  if (ours_ptr != nullptr) {
    const json& ours = *ours_ptr;
    if (!ours.is_object()) throw Malformed("crosstune must be an object");
    g.version = Count<uint32_t>(At(ours, "version", "crosstune"), "crosstune.version");
    if (g.version > kGraphVersion) {
      throw std::domain_error("graph.json is format version " + std::to_string(g.version) +
                              "; this crosstune reads up to " + std::to_string(kGraphVersion));
    }
    auto names = [&](const char* key, std::vector<std::string>* out) {
      const std::string p = std::string("crosstune.") + key;
      const json& v = At(ours, key, "crosstune");
      if (!v.is_array()) throw Malformed(p + " must be a list of names");
      for (size_t i = 0; i < v.size(); ++i) {
        out->push_back(String(v[i], p + "[" + std::to_string(i) + "]"));
      }
    };
    names("inputs", &g.inputs);
    names("outputs", &g.outputs);
    const json& bytes = At(ours, "storage_bytes", "crosstune");
    if (!bytes.is_array()) throw Malformed("crosstune.storage_bytes must be a list");
    for (size_t i = 0; i < bytes.size(); ++i) {
      g.storage_bytes.push_back(
          Count<uint64_t>(bytes[i], "crosstune.storage_bytes[" + std::to_string(i) + "]"));
    }
  }
  return g;
}

Status Invalid(const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "graph.json: " + what);
}

std::string NodeLabel(const Graph& g, uint32_t node) {
  return "node " + std::to_string(node) + " '" + g.nodes[node].name + "'";
}

// Lists names for a message: "a, b, c" (the first 20, then "and N more").
std::string NameList(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 20; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 20) s += " and " + std::to_string(names.size() - 20) + " more";
  return s;
}

Status ValidateNodes(const Graph& g) {
  std::set<std::string_view> names;
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.name.empty()) return Invalid("node " + std::to_string(i) + " has no name");
    if (!names.insert(n.name).second) {
      return Invalid("two nodes are named '" + n.name + "' (node names must be unique)");
    }
    if (n.op == kNullOp) {
      if (!n.inputs.empty() || n.num_outputs != 1) {
        return Invalid(NodeLabel(g, i) + " is a null node (an input or a param) with inputs or " +
                       "more than one output");
      }
      continue;
    }
    if (n.op != kTvmOp) {
      return Invalid(NodeLabel(g, i) + " has op '" + n.op + "' (known: null, tvm_op)");
    }
    if (n.func_name.empty()) return Invalid(NodeLabel(g, i) + " has an empty func_name");
    if (n.num_inputs != n.inputs.size()) {
      return Invalid(NodeLabel(g, i) + " says num_inputs " + std::to_string(n.num_inputs) +
                     " but lists " + std::to_string(n.inputs.size()) + " inputs");
    }
    if (n.num_outputs == 0) return Invalid(NodeLabel(g, i) + " has no outputs");
    if (n.num_args() > static_cast<size_t>(Limits::kMaxCallArgs)) {
      return Invalid(NodeLabel(g, i) + " takes " + std::to_string(n.num_args()) +
                     " arguments, over the call limit of " + std::to_string(Limits::kMaxCallArgs));
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const EntryRef& e = n.inputs[k];
      if (e.node >= i) {
        return Invalid(NodeLabel(g, i) + " input " + std::to_string(k) + " refers to node " +
                       std::to_string(e.node) + ", which does not come before it");
      }
      if (e.index >= g.nodes[e.node].num_outputs) {
        return Invalid(NodeLabel(g, i) + " input " + std::to_string(k) + " refers to output " +
                       std::to_string(e.index) + " of " + NodeLabel(g, e.node) + ", which has " +
                       std::to_string(g.nodes[e.node].num_outputs));
      }
    }
  }
  return Status::Ok();
}

Status ValidateIndex(const Graph& g) {
  std::vector<uint32_t> nulls;
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (!g.nodes[i].is_op()) nulls.push_back(i);
  }
  if (g.arg_nodes != nulls) return Invalid("arg_nodes must list exactly the null nodes, in order");
  if (g.node_row_ptr.size() != g.nodes.size() + 1 || g.node_row_ptr[0] != 0) {
    return Invalid("node_row_ptr must have " + std::to_string(g.nodes.size() + 1) +
                   " elements starting at 0, has " + std::to_string(g.node_row_ptr.size()));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.node_row_ptr[i + 1] != uint64_t{g.node_row_ptr[i]} + g.nodes[i].num_outputs) {
      return Invalid("node_row_ptr[" + std::to_string(i + 1) + "] must be node_row_ptr[" +
                     std::to_string(i) + "] + the outputs of " +
                     NodeLabel(g, static_cast<uint32_t>(i)));
    }
  }
  const size_t entries = g.num_entries();
  if (g.storage_id.size() != entries || g.shape.size() != entries || g.dltype.size() != entries) {
    return Invalid("attrs storage_id, shape and dltype must have one element per entry (" +
                   std::to_string(entries) + "), have " + std::to_string(g.storage_id.size()) +
                   ", " + std::to_string(g.shape.size()) + " and " +
                   std::to_string(g.dltype.size()));
  }
  for (size_t i = 0; i < g.heads.size(); ++i) {
    const EntryRef& h = g.heads[i];
    if (h.node >= g.nodes.size() || h.index >= g.nodes[h.node].num_outputs) {
      return Invalid("heads[" + std::to_string(i) + "] refers to no output of the graph");
    }
  }
  if (g.heads.empty()) return Invalid("the graph has no outputs (heads is empty)");
  for (size_t e = 0; e < entries; ++e) {
    auto bytes = TensorBytes(g.shape[e], g.dltype[e]);
    if (!bytes.ok()) {
      return Invalid("entry " + std::to_string(e) + " (" + EntryName(g, static_cast<uint32_t>(e)) +
                     "): " + bytes.status().message());
    }
  }
  return Status::Ok();
}

Status ValidateNames(const Graph& g) {
  std::set<std::string_view> seen;
  for (const std::string& in : g.inputs) {
    int64_t node = g.FindNode(in);
    if (node < 0) return Invalid("crosstune.inputs names '" + in + "', which is no node");
    if (g.nodes[static_cast<size_t>(node)].is_op()) {
      return Invalid("crosstune.inputs names '" + in + "', which is an operator, not a null node");
    }
    if (!seen.insert(in).second) return Invalid("crosstune.inputs lists '" + in + "' twice");
  }
  if (g.outputs.size() != g.heads.size()) {
    return Invalid("crosstune.outputs has " + std::to_string(g.outputs.size()) + " names for " +
                   std::to_string(g.heads.size()) + " heads");
  }
  std::set<std::string_view> out_seen;
  for (const std::string& out : g.outputs) {
    if (out.empty()) return Invalid("crosstune.outputs has an empty name");
    if (!out_seen.insert(out).second) return Invalid("crosstune.outputs lists '" + out + "' twice");
  }
  return Status::Ok();
}

Status ValidateStorage(const Graph& g) {
  const size_t entries = g.num_entries();
  const size_t ids = g.storage_bytes.size();
  std::vector<std::vector<uint32_t>> users(ids);
  for (uint32_t e = 0; e < entries; ++e) {
    const uint32_t sid = g.storage_id[e];
    if (sid >= ids) {
      return Invalid("entry " + std::to_string(e) + " (" + EntryName(g, e) + ") has storage id " +
                     std::to_string(sid) + "; crosstune.storage_bytes sizes " +
                     std::to_string(ids) + " ids");
    }
    const uint64_t bytes = *TensorBytes(g.shape[e], g.dltype[e]);
    if (bytes > g.storage_bytes[sid]) {
      return Invalid("storage " + std::to_string(sid) + " is " +
                     std::to_string(g.storage_bytes[sid]) + " bytes, too small for " +
                     EntryName(g, e) + " (" + std::to_string(bytes) + " bytes)");
    }
    users[sid].push_back(e);
  }
  const std::vector<Lifetime> life = EntryLifetimes(g);
  for (size_t sid = 0; sid < ids; ++sid) {
    std::vector<uint32_t>& u = users[sid];
    if (u.empty()) return Invalid("storage " + std::to_string(sid) + " is used by no entry");
    std::sort(u.begin(), u.end(), [&](uint32_t a, uint32_t b) {
      return life[a].first != life[b].first ? life[a].first < life[b].first : a < b;
    });
    // Sorted by start: a user that starts before the latest end seen so far overlaps it.
    uint32_t open = u[0];
    for (size_t k = 1; k < u.size(); ++k) {
      if (life[u[k]].first <= life[open].last) {
        return Invalid("storage " + std::to_string(sid) + " holds " + EntryName(g, open) + " and " +
                       EntryName(g, u[k]) + " at once");
      }
      if (life[u[k]].last > life[open].last) open = u[k];
    }
  }
  return Status::Ok();
}

}  // namespace

int64_t Graph::FindNode(std::string_view name) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

Expected<Graph> ParseGraph(std::string_view json_text) {
  auto root = ParseJson(json_text, JsonLimits{kMaxGraphBytes, kMaxJsonDepth});
  if (!root.ok()) {
    return Status(root.status().code(), "graph.json: " + root.status().message());
  }
  try {
    return ReadGraph(*root);
  } catch (const Malformed& e) {
    return Status(ErrorCode::kInvalidArgument, std::string("graph.json: ") + e.what());
  } catch (const std::length_error& e) {
    return Status(ErrorCode::kLimitExceeded, e.what());
  } catch (const std::domain_error& e) {
    return Status(ErrorCode::kVersionMismatch, e.what());
  } catch (const json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, "graph.json: " + JsonErrorReason(e));
  }
}

std::string GraphToJson(const Graph& g, int indent) {
  auto entry = [](const EntryRef& e) { return ordered_json::array({e.node, e.index, e.version}); };
  ordered_json nodes = ordered_json::array();
  for (const Node& n : g.nodes) {
    ordered_json j;
    j["op"] = n.op;
    j["name"] = n.name;
    j["inputs"] = ordered_json::array();
    for (const EntryRef& e : n.inputs) j["inputs"].push_back(entry(e));
    if (n.is_op()) {
      ordered_json a;
      a["func_name"] = n.func_name;
      a["num_inputs"] = std::to_string(n.num_inputs);
      a["num_outputs"] = std::to_string(n.num_outputs);
      a["flatten_data"] = n.flatten_data;
      if (!n.op_type.empty()) a["op_type"] = n.op_type;
      a["scratch_bytes"] = std::to_string(n.scratch_bytes);
      a["flops"] = std::to_string(n.flops);
      if (n.provenance) {
        if (n.provenance->is_default) {
          a["provenance"] = "default";
        } else {
          a["provenance"] = "record";
          a["provenance_task"] = n.provenance->task;
          a["provenance_config_index"] = std::to_string(n.provenance->config_index);
          // The shortest text that reads back as the same double.
          char buf[32];
          auto res = std::to_chars(buf, buf + sizeof buf, n.provenance->timestamp);
          a["provenance_timestamp"] = std::string(buf, res.ptr);
        }
      }
      for (const auto& [key, text] : n.other_attrs) a[key] = ordered_json::parse(text);
      j["attrs"] = a;
    }
    nodes.push_back(std::move(j));
  }
  ordered_json heads = ordered_json::array();
  for (const EntryRef& h : g.heads) heads.push_back(entry(h));
  ordered_json dtypes = ordered_json::array();
  for (const DLDataType& t : g.dltype) dtypes.push_back(TvmDTypeName(t));
  ordered_json root;
  root["nodes"] = nodes;
  root["arg_nodes"] = g.arg_nodes;
  root["node_row_ptr"] = g.node_row_ptr;
  root["heads"] = heads;
  root["attrs"] = {{"storage_id", {"list_int", g.storage_id}},
                   {"shape", {"list_shape", g.shape}},
                   {"dltype", {"list_str", dtypes}}};
  // Last: TVM's loader stops reading at "metadata".
  root["metadata"] = {{"build_id", g.build_id},
                      {"crosstune",
                       {{"version", kGraphVersion},
                        {"inputs", g.inputs},
                        {"outputs", g.outputs},
                        {"storage_bytes", g.storage_bytes}}}};
  return root.dump(indent);
}

void FillIndex(Graph* g) {
  g->arg_nodes.clear();
  g->node_row_ptr.assign(1, 0);
  for (uint32_t i = 0; i < g->nodes.size(); ++i) {
    if (!g->nodes[i].is_op()) g->arg_nodes.push_back(i);
    g->node_row_ptr.push_back(g->node_row_ptr.back() + g->nodes[i].num_outputs);
  }
}

Status ValidateGraph(const Graph& g) {
  CT_RETURN_IF_ERROR(ValidateNodes(g));
  CT_RETURN_IF_ERROR(ValidateIndex(g));
  CT_RETURN_IF_ERROR(ValidateNames(g));
  return ValidateStorage(g);
}

std::vector<Lifetime> EntryLifetimes(const Graph& g) {
  const uint32_t end = static_cast<uint32_t>(g.nodes.size());
  std::vector<Lifetime> life(g.num_entries());
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (uint32_t k = 0; k < n.num_outputs; ++k) {
      // Inputs and params are there before the first node and stay until the end.
      life[g.entry_id(i, k)] = n.is_op() ? Lifetime{i, i} : Lifetime{0, end};
    }
    for (const EntryRef& in : n.inputs) {
      Lifetime& l = life[g.entry_id(in)];
      l.last = std::max(l.last, i);
    }
  }
  for (const EntryRef& h : g.heads) life[g.entry_id(h)].last = end;
  return life;
}

std::string EntryName(const Graph& g, uint32_t entry_id) {
  auto it = std::upper_bound(g.node_row_ptr.begin(), g.node_row_ptr.end(), entry_id);
  if (it == g.node_row_ptr.begin() || it == g.node_row_ptr.end()) {
    return "entry " + std::to_string(entry_id);
  }
  const size_t node = static_cast<size_t>(it - g.node_row_ptr.begin()) - 1;
  const uint32_t index = entry_id - g.node_row_ptr[node];
  const Node& n = g.nodes[node];
  return n.num_outputs > 1 ? n.name + ":" + std::to_string(index) : n.name;
}

std::vector<uint32_t> ParamNodes(const Graph& g) {
  std::set<std::string_view> inputs(g.inputs.begin(), g.inputs.end());
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (!g.nodes[i].is_op() && inputs.count(g.nodes[i].name) == 0) out.push_back(i);
  }
  return out;
}

Status CheckParams(const Graph& g, const std::vector<pkg::ParamTensor>& params) {
  std::unordered_map<std::string_view, const pkg::ParamTensor*> by_name;
  for (const pkg::ParamTensor& p : params) by_name[p.name] = &p;
  std::vector<std::string> missing, extra;
  std::set<std::string_view> wanted;
  for (uint32_t node : ParamNodes(g)) {
    const std::string& name = g.nodes[node].name;
    wanted.insert(name);
    if (by_name.count(name) == 0) missing.push_back(name);
  }
  for (const pkg::ParamTensor& p : params) {
    if (wanted.count(p.name) == 0) extra.push_back(p.name);
  }
  if (!missing.empty() || !extra.empty()) {
    std::string why;
    if (!missing.empty()) {
      why = "params.bin lacks " + std::to_string(missing.size()) + " param" +
            (missing.size() == 1 ? "" : "s") + " the graph needs: " + NameList(missing);
    }
    if (!extra.empty()) {
      why += std::string(why.empty() ? "" : "; ") + "params.bin holds " +
             std::to_string(extra.size()) + " param" + (extra.size() == 1 ? "" : "s") +
             " the graph does not use: " + NameList(extra);
    }
    return Status(ErrorCode::kInvalidArgument, why);
  }
  for (uint32_t node : ParamNodes(g)) {
    const pkg::ParamTensor& p = *by_name[g.nodes[node].name];
    const uint32_t e = g.entry_id(node);
    if (!(p.dtype == g.dltype[e]) || p.shape != g.shape[e]) {
      return Status(ErrorCode::kInvalidArgument,
                    "param '" + p.name + "' is " + ShapeString(p.shape) + "x" +
                        TvmDTypeName(p.dtype) + " in params.bin, the graph wants " +
                        ShapeString(g.shape[e]) + "x" + TvmDTypeName(g.dltype[e]));
    }
  }
  return Status::Ok();
}

Status CheckFunctions(const Graph& g, const std::vector<msg::FunctionInfo>& functions) {
  std::unordered_map<std::string_view, const msg::FunctionInfo*> by_name;
  for (const msg::FunctionInfo& f : functions) by_name[f.name] = &f;
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!n.is_op()) continue;
    auto it = by_name.find(n.func_name);
    if (it == by_name.end()) {
      return Status(ErrorCode::kInvalidArgument, NodeLabel(g, i) + " calls '" + n.func_name +
                                                     "', which the library does not have");
    }
    const std::string want(n.num_args(), 't');
    if (it->second->signature != want) {
      return Status(ErrorCode::kInvalidArgument,
                    NodeLabel(g, i) + " calls '" + n.func_name + "' with " +
                        std::to_string(n.num_args()) + " tensors (" +
                        std::to_string(n.inputs.size()) + " in, " + std::to_string(n.num_outputs) +
                        " out" + (n.scratch_bytes ? ", scratch" : "") +
                        "), the library's signature is '" + it->second->signature + "'");
    }
  }
  return Status::Ok();
}

std::string TvmDTypeName(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLFloat:
      base = "float";
      break;
    case kDLInt:
      base = "int";
      break;
    case kDLUInt:
      base = "uint";
      break;
    case kDLBfloat:
      base = "bfloat";
      break;
    default:
      return DTypeName(t);
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

}  // namespace crosstune::graph
