// The model compiler's graph IR: values (tensors, with shapes always known after import) and
// nodes (operators), in topological order.
//
//   Graph g = *ImportOnnx("resnet50.onnx", {});   // onnx_import.h
//   for (const Node& n : g.nodes) ... g.values[n.inputs[0]].shape ...
//
// A value with `data` is a constant (an initializer, or folded at compile time); the rest are
// computed by the node that produces them or are graph inputs. Every value's dtype and shape are
// static: import resolves them (with --shape for dynamic dimensions) and every pass keeps them.
// `layout` names how a constant's bytes are ordered when a pass repacked it for a kernel (empty:
// plain row-major in the order of `shape`), so a kernel that reads blocked weights can say so.
//
// Thread-safety: none; a Graph is a plain value, owned by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::model {

// Element types. float16 and the narrow types after it (bfloat16, float8, float4, the 4- and 2-bit
// integers) are edge types: the importer widens their weights and constants (to float32, or int8
// and uint8 for the narrow integers), casts inputs and outputs of them at the graph's edge and
// widens what a Cast to one of them gives (onnx_import.h), so inside a graph they appear only on
// Cast nodes. The narrow types hold one element per byte (bfloat16: two), their bit pattern in
// the low bits, in a package as uint8 (uint16).
enum class DType : uint8_t {
  kFloat32,
  kInt64,
  kInt32,
  kBool,
  kUint8,
  kInt8,
  kFloat64,
  kFloat16,
  kInt16,
  kUint16,
  kUint32,
  kUint64,
  kBfloat16,
  kFloat8E4M3FN,
  kFloat8E4M3FNUZ,
  kFloat8E5M2,
  kFloat8E5M2FNUZ,
  kUint4,
  kInt4,
  kFloat4E2M1,
  kUint2,
  kInt2,
};
// float16 and the narrow types (above), and the type a graph computes them in.
bool IsEdgeType(DType t);
bool IsNarrowType(DType t);  // an edge type but float16
DType WideType(DType t);
// "float32", "int64", ... (TVM's dltype names).
const char* DTypeName(DType t);
int DTypeBytes(DType t);
// The type of ONNX's TensorProto.DataType code (1 FLOAT, 2 UINT8, 3 INT8, 4 UINT16, 5 INT16,
// 6 INT32, 7 INT64, 9 BOOL, 10 FLOAT16, 11 DOUBLE, 12 UINT32, 13 UINT64); kInvalidArgument
// naming `what` and the types taken for any other.
Expected<DType> DTypeFromOnnx(int32_t code, const std::string& what);
int32_t DTypeToOnnx(DType t);
// IEEE half precision bits to float and back (round to nearest even; overflow to infinity).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
// Writes element i of bytes `p` as type `t`: the integer types from `whole` (as C converts), the
// float types from `real`, bool as whether `real` is nonzero; the narrow types as Cast converts
// (narrow_types.h: float8 saturating unless `saturate` is false; the 4- and 2-bit integers from
// `real`).
void PutElement(DType t, uint8_t* p, size_t i, double real, int64_t whole, bool saturate = true);

// The product of the dimensions (checked_math.h); -1 for a shape no check below would pass (a
// negative dimension, or a product past 2^62), which every value has passed after import.
int64_t NumElements(const std::vector<int64_t>& shape);
// A tensor's bytes, checked as a parser must: rank at most Limits::kMaxTensorRank, no negative
// dimension, and the product of the dimensions and the element size (every partial product too)
// within `max_bytes`. `what` names it in errors ("output 'y'", "tensor 'w'"):
// kInvalidArgument "output 'y' has the shape [-2,3] (a negative dimension)", kLimitExceeded
// "tensor 'w' [1048576,1048576] float32 is 4398046511104 bytes, over the import budget of ...".
Expected<uint64_t> CheckedBytes(const std::string& what, const std::vector<int64_t>& shape,
                                DType dtype, uint64_t max_bytes);
// "[1,3,224,224]".
std::string ShapeText(const std::vector<int64_t>& shape);

struct Value {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  // Constant bytes (NumElements(shape) x DTypeBytes(dtype)); null for a computed value. Shared so
  // that copies of a graph do not copy weights.
  std::shared_ptr<const std::vector<uint8_t>> data;
  std::string layout;

  bool is_const() const { return data != nullptr; }
  int64_t elements() const { return NumElements(shape); }
  int64_t bytes() const { return elements() * DTypeBytes(dtype); }
  // Typed views of a constant (the dtype must match).
  const float* floats() const { return reinterpret_cast<const float*>(data->data()); }
  const int64_t* ints() const { return reinterpret_cast<const int64_t*>(data->data()); }
  // A constant's elements as int64 (int64, int32, bool, uint8, int8 or whole floats).
  std::vector<int64_t> AsInts() const;
  // The same as doubles (floats exactly; integers past 2^53 rounded).
  std::vector<double> AsDoubles() const;
};

// A node attribute, as ONNX has them.
struct Attr {
  enum class Kind : uint8_t { kInt, kFloat, kString, kInts, kFloats, kTensor };
  // "an int", "a float", "a string", "ints", "floats", "a tensor".
  static const char* KindName(Kind k);
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::shared_ptr<Value> tensor;
};

struct Node {
  std::string name;  // the model's node name (made unique at import when missing or repeated)
  std::string op;    // ONNX operator type ("Conv"), or a fused operator of the passes
  std::vector<int> inputs;   // value ids; -1 for an optional input left out
  std::vector<int> outputs;  // value ids
  std::map<std::string, Attr> attrs;

  bool Has(const std::string& key) const { return attrs.count(key) != 0; }
  int64_t Int(const std::string& key, int64_t fallback) const;
  double Float(const std::string& key, double fallback) const;
  std::string String(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& key, std::vector<int64_t> fallback = {}) const;
  void SetInt(const std::string& key, int64_t v);
  void SetFloat(const std::string& key, double v);
  void SetString(const std::string& key, std::string v);
  void SetInts(const std::string& key, std::vector<int64_t> v);
};

struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;   // topological order
  std::vector<int> inputs;   // the model's own inputs (not its weights), in order
  std::vector<int> outputs;  // the model's outputs, in order
  int opset = 0;             // of the default (ai.onnx) domain

  int AddValue(Value v);
  // A new constant value; returns its id.
  int AddConstant(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  std::vector<uint8_t> bytes);
  int AddFloatConstant(const std::string& name, std::vector<int64_t> shape,
                       const std::vector<float>& data);
  // Which node produces each value (-1: a graph input or constant), and how many nodes and graph
  // outputs use it. Recomputed on demand: passes edit nodes freely.
  std::vector<int> Producers() const;
  std::vector<int> UseCounts() const;
  // Drops nodes whose outputs nobody uses (and that are not graph outputs) and values no node or
  // graph edge refers to, renumbering ids. Names stay.
  void Compact();
  // A name no value has yet, from `base` ("conv1.weight", "conv1.weight_1", ...).
  std::string UniqueValueName(const std::string& base) const;
};

// Sums for `crosstune import`: what the model holds.
struct GraphStats {
  std::map<std::string, int> ops;  // operator -> count
  int64_t params = 0;              // elements of constants
  int64_t param_bytes = 0;
  double flops = 0;  // multiply-adds count twice
};
GraphStats Stats(const Graph& g);

}  // namespace crosstune::model
