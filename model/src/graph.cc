#include "crosstune/model/graph.h"

#include <cmath>
#include <cstring>
#include <set>
#include <type_traits>

#include "crosstune/checked_math.h"
#include "crosstune/model/ops.h"
#include "crosstune/protocol.h"
#include "narrow_types.h"

namespace crosstune::model {

namespace {

struct DTypeRow {
  DType type;
  const char* name;
  int32_t onnx;
  int bytes;
};
const DTypeRow kDTypes[] = {
    {DType::kFloat32, "float32", 1, 4},
    {DType::kUint8, "uint8", 2, 1},
    {DType::kInt8, "int8", 3, 1},
    {DType::kUint16, "uint16", 4, 2},
    {DType::kInt16, "int16", 5, 2},
    {DType::kInt32, "int32", 6, 4},
    {DType::kInt64, "int64", 7, 8},
    {DType::kBool, "bool", 9, 1},
    {DType::kFloat16, "float16", 10, 2},
    {DType::kFloat64, "float64", 11, 8},
    {DType::kUint32, "uint32", 12, 4},
    {DType::kUint64, "uint64", 13, 8},
    {DType::kBfloat16, "bfloat16", 16, 2},
    {DType::kFloat8E4M3FN, "float8e4m3fn", 17, 1},
    {DType::kFloat8E4M3FNUZ, "float8e4m3fnuz", 18, 1},
    {DType::kFloat8E5M2, "float8e5m2", 19, 1},
    {DType::kFloat8E5M2FNUZ, "float8e5m2fnuz", 20, 1},
    {DType::kUint4, "uint4", 21, 1},
    {DType::kInt4, "int4", 22, 1},
    {DType::kFloat4E2M1, "float4e2m1", 23, 1},
    {DType::kUint2, "uint2", 25, 1},
    {DType::kInt2, "int2", 26, 1},
};

const DTypeRow& RowOf(DType t) {
  for (const DTypeRow& r : kDTypes) {
    if (r.type == t) return r;
  }
  return kDTypes[0];
}

}  // namespace

const char* DTypeName(DType t) { return RowOf(t).name; }

bool IsEdgeType(DType t) { return t == DType::kFloat16 || t >= DType::kBfloat16; }

bool IsNarrowType(DType t) { return t >= DType::kBfloat16; }

DType WideType(DType t) {
  switch (t) {
    case DType::kInt4:
    case DType::kInt2:
      return DType::kInt8;
    case DType::kUint4:
    case DType::kUint2:
      return DType::kUint8;
    default:
      return IsEdgeType(t) ? DType::kFloat32 : t;
  }
}

Expected<DType> DTypeFromOnnx(int32_t code, const std::string& what) {
  for (const DTypeRow& r : kDTypes) {
    if (r.onnx == code) return r.type;
  }
  std::string names;
  for (const DTypeRow& r : kDTypes) names += std::string(names.empty() ? "" : ", ") + r.name;
  return Status(ErrorCode::kInvalidArgument, what + ": element type " + std::to_string(code) +
                                                 " is not supported (" + names + ")");
}

int32_t DTypeToOnnx(DType t) { return RowOf(t).onnx; }

int DTypeBytes(DType t) { return RowOf(t).bytes; }

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // infinity or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    uint32_t m = mant;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((m & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) {  // infinity or NaN (a quiet NaN keeps a mantissa bit)
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  }
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds past 65504
  if (abs < 0x38800000) {               // below the smallest normal half: a subnormal or zero
    if (abs < 0x33000000) return sign;  // below half the smallest subnormal
    const uint32_t e = abs >> 23, m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // m's bits past the half's subnormal mantissa
    uint32_t h = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112 << 10));
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into the exponent
  return static_cast<uint16_t>(sign | h);
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

namespace {

// Element i of bytes `p` of type `t`, as double or as int64.
template <typename R>
R ElementAs(DType t, const uint8_t* p, size_t i) {
  auto get = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + sizeof(v) * i, sizeof(v));
    return static_cast<R>(v);
  };
  switch (t) {
    case DType::kFloat32:
      return get(float{});
    case DType::kFloat64:
      return get(double{});
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return static_cast<R>(HalfToFloat(h));
    }
    case DType::kInt64:
      return get(int64_t{});
    case DType::kInt32:
      return get(int32_t{});
    case DType::kInt16:
      return get(int16_t{});
    case DType::kInt8:
      return get(int8_t{});
    case DType::kUint64:
      return get(uint64_t{});
    case DType::kUint32:
      return get(uint32_t{});
    case DType::kUint16:
      return get(uint16_t{});
    case DType::kUint8:
    case DType::kBool:
      return get(uint8_t{});
    case DType::kBfloat16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return static_cast<R>(narrow::ct_bf16_to_float(h));
    }
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1: {
      const float f = narrow::ct_mini_to_float(p[i], narrow::MiniKind(t));
      if constexpr (std::is_integral_v<R>) {
        if (!std::isfinite(f)) return R{};
      }
      return static_cast<R>(f);
    }
    case DType::kUint4:
    case DType::kInt4:
    case DType::kUint2:
    case DType::kInt2: {
      bool is_signed = false;
      const int bits = narrow::NarrowIntBits(t, &is_signed);
      return static_cast<R>(narrow::ct_narrow_int(p[i], bits, is_signed ? 1 : 0));
    }
  }
  return R{};
}

}  // namespace

void PutElement(DType t, uint8_t* p, size_t i, double real, int64_t whole, bool saturate) {
  auto put = [&](auto v) { std::memcpy(p + sizeof(v) * i, &v, sizeof(v)); };
  switch (t) {
    case DType::kFloat32:
      put(static_cast<float>(real));
      break;
    case DType::kFloat64:
      put(real);
      break;
    case DType::kFloat16:
      put(FloatToHalf(static_cast<float>(real)));
      break;
    case DType::kInt64:
      put(whole);
      break;
    case DType::kInt32:
      put(static_cast<int32_t>(whole));
      break;
    case DType::kInt16:
      put(static_cast<int16_t>(whole));
      break;
    case DType::kInt8:
      put(static_cast<int8_t>(whole));
      break;
    case DType::kUint64:
      put(static_cast<uint64_t>(whole));
      break;
    case DType::kUint32:
      put(static_cast<uint32_t>(whole));
      break;
    case DType::kUint16:
      put(static_cast<uint16_t>(whole));
      break;
    case DType::kUint8:
      put(static_cast<uint8_t>(whole));
      break;
    case DType::kBool:
      put(static_cast<uint8_t>(real != 0));
      break;
    case DType::kBfloat16:
      put(narrow::ct_float_to_bf16(static_cast<float>(real)));
      break;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1:
      put(static_cast<uint8_t>(narrow::ct_float_to_mini(static_cast<float>(real),
                                                        narrow::MiniKind(t), saturate ? 1 : 0)));
      break;
    case DType::kUint4:
    case DType::kInt4:
    case DType::kUint2:
    case DType::kInt2: {
      bool is_signed = false;
      const int bits = narrow::NarrowIntBits(t, &is_signed);
      put(narrow::ct_to_narrow_int(real, bits, is_signed ? 1 : 0));
      break;
    }
  }
}

std::vector<int64_t> Value::AsInts() const {
  std::vector<int64_t> out(static_cast<size_t>(elements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAs<int64_t>(dtype, data->data(), i);
  return out;
}

std::vector<double> Value::AsDoubles() const {
  std::vector<double> out(static_cast<size_t>(elements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAs<double>(dtype, data->data(), i);
  return out;
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
