#include "crosstune/model/graph.h"

#include <cstring>
#include <set>

#include "crosstune/checked_math.h"
#include "crosstune/model/ops.h"
#include "crosstune/protocol.h"

namespace crosstune::model {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kBool:
      return "bool";
    case DType::kUint8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kFloat64:
      return "float64";
  }
  return "?";
}

Expected<DType> DTypeFromOnnx(int32_t code, const std::string& what) {
  switch (code) {
    case 1:
      return DType::kFloat32;
    case 2:
      return DType::kUint8;
    case 3:
      return DType::kInt8;
    case 6:
      return DType::kInt32;
    case 7:
      return DType::kInt64;
    case 9:
      return DType::kBool;
    case 11:
      return DType::kFloat64;
    default:
      return Status(ErrorCode::kInvalidArgument,
                    what + ": element type " + std::to_string(code) +
                        " is not supported (float32, float64, int64, int32, int8, uint8, bool)");
  }
}

int32_t DTypeToOnnx(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 1;
    case DType::kUint8:
      return 2;
    case DType::kInt8:
      return 3;
    case DType::kInt32:
      return 6;
    case DType::kInt64:
      return 7;
    case DType::kBool:
      return 9;
    case DType::kFloat64:
      return 11;
  }
  return 0;
}

int DTypeBytes(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
      return 1;
  }
  return 1;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  uint64_t n = 0;
  return CheckedElements(shape, 1, &n) ? static_cast<int64_t>(n) : -1;
}

Expected<uint64_t> CheckedBytes(const std::string& what, const std::vector<int64_t>& shape,
                                DType dtype, uint64_t max_bytes) {
  if (shape.size() > static_cast<size_t>(Limits::kMaxTensorRank)) {
    return Status(ErrorCode::kLimitExceeded, what + " has rank " + std::to_string(shape.size()) +
                                                 ", over the limit of " +
                                                 std::to_string(Limits::kMaxTensorRank));
  }
  for (int64_t d : shape) {
    if (d < 0) {
      return Status(ErrorCode::kInvalidArgument,
                    what + " has the shape " + ShapeText(shape) + " (a negative dimension)");
    }
  }
  const std::string named = what + " " + ShapeText(shape) + " " + DTypeName(dtype);
  uint64_t bytes = 0;
  if (!CheckedElements(shape, static_cast<uint64_t>(DTypeBytes(dtype)), &bytes)) {
    return Status(ErrorCode::kLimitExceeded, named + " is too large (past 2^62 bytes)");
  }
  if (bytes > max_bytes) {
    return Status(ErrorCode::kLimitExceeded,
                  named + " is " + std::to_string(bytes) + " bytes, over the import budget of " +
                      std::to_string(max_bytes) + " bytes (--max-model-mb)");
  }
  return bytes;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> Value::AsInts() const {
  std::vector<int64_t> out(static_cast<size_t>(elements()));
  const uint8_t* p = data->data();
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype) {
      case DType::kInt64:
        std::memcpy(&out[i], p + 8 * i, 8);
        break;
      case DType::kInt32: {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = v;
        break;
      }
      case DType::kFloat32: {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = static_cast<int64_t>(v);
        break;
      }
      case DType::kFloat64: {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        out[i] = static_cast<int64_t>(v);
        break;
      }
      case DType::kInt8:
        out[i] = p[i] < 128 ? int64_t{p[i]} : int64_t{p[i]} - 256;
        break;
      case DType::kBool:
      case DType::kUint8:
        out[i] = p[i];
        break;
    }
  }
  return out;
}

std::vector<double> Value::AsDoubles() const {
  if (dtype == DType::kFloat32) {
    const float* f = floats();
    return std::vector<double>(f, f + elements());
  }
  if (dtype == DType::kFloat64) {
    std::vector<double> out(static_cast<size_t>(elements()));
    if (!out.empty()) std::memcpy(out.data(), data->data(), out.size() * 8);
    return out;
  }
  const std::vector<int64_t> ints = AsInts();
  return std::vector<double>(ints.begin(), ints.end());
}

const char* Attr::KindName(Kind k) {
  switch (k) {
    case Kind::kInt:
      return "an int";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kInts:
      return "ints";
    case Kind::kFloats:
      return "floats";
    case Kind::kTensor:
      return "a tensor";
  }
  return "?";
}

int64_t Node::Int(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.i;
}
double Node::Float(const std::string& key, double fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.f;
}
std::string Node::String(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.s;
}
std::vector<int64_t> Node::Ints(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.ints;
}
void Node::SetInt(const std::string& key, int64_t v) {
  Attr a;
  a.kind = Attr::Kind::kInt;
  a.i = v;
  attrs[key] = std::move(a);
}
void Node::SetFloat(const std::string& key, double v) {
  Attr a;
  a.kind = Attr::Kind::kFloat;
  a.f = v;
  attrs[key] = std::move(a);
}
void Node::SetString(const std::string& key, std::string v) {
  Attr a;
  a.kind = Attr::Kind::kString;
  a.s = std::move(v);
  attrs[key] = std::move(a);
}
void Node::SetInts(const std::string& key, std::vector<int64_t> v) {
  Attr a;
  a.kind = Attr::Kind::kInts;
  a.ints = std::move(v);
  attrs[key] = std::move(a);
}

int Graph::AddValue(Value v) {
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

int Graph::AddConstant(const std::string& name, DType dtype, std::vector<int64_t> shape,
                       std::vector<uint8_t> bytes) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return AddValue(std::move(v));
}

int Graph::AddFloatConstant(const std::string& name, std::vector<int64_t> shape,
                            const std::vector<float>& data) {
  std::vector<uint8_t> bytes(data.size() * 4);
  if (!bytes.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
  return AddConstant(name, DType::kFloat32, std::move(shape), std::move(bytes));
}

std::vector<int> Graph::Producers() const {
  std::vector<int> p(values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int o : nodes[n].outputs) p[o] = static_cast<int>(n);
  }
  return p;
}

std::vector<int> Graph::UseCounts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& n : nodes) {
    for (int i : n.inputs) {
      if (i >= 0) ++uses[i];
    }
  }
  for (int o : outputs) ++uses[o];
  return uses;
}

void Graph::Compact() {
  // Dead nodes, from the back: a node is live when one of its outputs is used.
  std::vector<int> uses = UseCounts();
  std::vector<bool> keep(nodes.size(), true);
  for (size_t k = nodes.size(); k-- > 0;) {
    bool used = false;
    for (int o : nodes[k].outputs) used = used || uses[o] > 0;
    if (!used) {
      keep[k] = false;
      for (int i : nodes[k].inputs) {
        if (i >= 0) --uses[i];
      }
    }
  }
  std::vector<Node> live;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (keep[k]) live.push_back(std::move(nodes[k]));
  }
  nodes = std::move(live);
  // Values referred to by a node or the graph's edges, renumbered in their old order.
  std::vector<int> remap(values.size(), -1);
  std::vector<bool> referred(values.size(), false);
  for (const Node& n : nodes) {
    for (int i : n.inputs) {
      if (i >= 0) referred[i] = true;
    }
    for (int o : n.outputs) referred[o] = true;
  }
  for (int i : inputs) referred[i] = true;
  for (int o : outputs) referred[o] = true;
  std::vector<Value> kept;
  for (size_t v = 0; v < values.size(); ++v) {
    if (!referred[v]) continue;
    remap[v] = static_cast<int>(kept.size());
    kept.push_back(std::move(values[v]));
  }
  values = std::move(kept);
  for (Node& n : nodes) {
    for (int& i : n.inputs) {
      if (i >= 0) i = remap[i];
    }
    for (int& o : n.outputs) o = remap[o];
  }
  for (int& i : inputs) i = remap[i];
  for (int& o : outputs) o = remap[o];
}

std::string Graph::UniqueValueName(const std::string& base) const {
  std::set<std::string> names;
  for (const Value& v : values) names.insert(v.name);
  if (!names.count(base)) return base;
  for (int k = 1;; ++k) {
    std::string n = base + "_" + std::to_string(k);
    if (!names.count(n)) return n;
  }
}

GraphStats Stats(const Graph& g) {
  GraphStats s;
  for (const Node& n : g.nodes) {
    ++s.ops[n.op];
    s.flops += NodeFlops(g, n);
  }
  std::vector<int> uses = g.UseCounts();
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].is_const() && uses[v] > 0) {
      s.params += g.values[v].elements();
      s.param_bytes += g.values[v].bytes();
    }
  }
  return s;
}

}  // namespace crosstune::model
