// ONNX import (onnx_import.h): protobuf messages from Debian's onnx.proto, generated at build time.
#include "crosstune/model/onnx_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "crosstune/checked_math.h"
#include "crosstune/model/ops.h"
#include "crosstune/numbers.h"
#include "onnx.pb.h"
#include "onnx_contrib.h"
#include "onnx_files.h"

namespace crosstune::model {
namespace {

namespace fs = std::filesystem;

Status Invalid(std::string what) { return Status(ErrorCode::kInvalidArgument, std::move(what)); }

// What the import may still allocate for tensors (ImportOptions::max_model_bytes): every constant
// it makes (weights, attribute tensors, folded nodes) is charged before its bytes exist.
class Budget {
 public:
  explicit Budget(uint64_t limit) : limit_(limit) {}
  uint64_t limit() const { return limit_; }
  // `named`: "tensor 'w' [64,3,7,7] float32".
  Status Charge(const std::string& named, uint64_t bytes) {
    uint64_t total = 0;
    if (!CheckedAdd(used_, bytes, &total, limit_)) {
      uint64_t sum = 0;
      const bool wrapped = __builtin_add_overflow(used_, bytes, &sum);
      return Status(ErrorCode::kLimitExceeded,
                    named + " brings the model's tensors to " +
                        (wrapped ? std::string("past 2^64") : std::to_string(sum)) +
                        " bytes, over the import budget of " + std::to_string(limit_) +
                        " bytes (--max-model-mb)");
    }
    used_ = total;
    return Status::Ok();
  }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
};

// Where a tensor's data may come from, and what it may cost.
struct TensorSource {
  std::string base_dir;
  bool external_data = true;
  Budget* budget = nullptr;
};

// graph.h's DTypeFromOnnx reads ONNX's type codes by number: they are these.
static_assert(onnx::TensorProto::FLOAT == 1 && onnx::TensorProto::UINT8 == 2 &&
              onnx::TensorProto::INT8 == 3 && onnx::TensorProto::INT32 == 6 &&
              onnx::TensorProto::INT64 == 7 && onnx::TensorProto::BOOL == 9 &&
              onnx::TensorProto::DOUBLE == 11);

// The bytes of an external tensor: location (relative, inside base_dir), offset, length.
Expected<std::string> ReadExternal(const onnx::TensorProto& t, const TensorSource& src,
                                   uint64_t want) {
  const std::string tensor = "tensor '" + t.name() + "': ";
  if (!src.external_data) {
    return Invalid(tensor + "external data is not allowed here (the model has no folder)");
  }
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    if (e.key() != "offset" && e.key() != "length") continue;
    auto v = ParseUnsignedIn(e.value(), 0, kMaxCheckedSize);
    if (!v.ok()) {
      return Invalid(tensor + "external data " + e.key() + " '" + e.value() +
                     "' is not a byte count: " + v.status().message());
    }
    if (e.key() == "offset") offset = *v;
    if (e.key() == "length") length = *v;
  }
  if (length && *length != want) {
    return Invalid(tensor + "external data length " + std::to_string(*length) +
                   " is not the tensor's " + std::to_string(want) + " bytes");
  }
  auto bytes = ReadExternalData(src.base_dir, location, offset, length, want);
  if (!bytes.ok()) return Status(bytes.status().code(), tensor + bytes.status().message());
  return bytes;
}

// A tensor of an edge type (float16, the narrow types: graph.h) as the one the graph computes
// with (every other type as it is).
Value Widen(Value v) {
  if (!IsEdgeType(v.dtype)) return v;
  const DType wide = WideType(v.dtype);
  const bool real = wide == DType::kFloat32;
  const std::vector<double> d = real ? v.AsDoubles() : std::vector<double>();
  const std::vector<int64_t> w = real ? std::vector<int64_t>() : v.AsInts();
  std::vector<uint8_t> bytes(static_cast<size_t>(v.elements() * DTypeBytes(wide)));
  for (size_t i = 0; i < static_cast<size_t>(v.elements()); ++i) {
    PutElement(wide, bytes.data(), i, real ? d[i] : 0, real ? 0 : w[i]);
  }
  v.dtype = wide;
  v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return v;
}

Expected<Value> ReadTensorProto(const onnx::TensorProto& t, const TensorSource& src);

// A Cast of value `from` to `to` at the graph's edge (an input or output of an edge type), its
// output named `name`; returns that output's id.
Expected<int> AddEdgeCast(Graph& g, int from, DType to, const std::string& name) {
  Node n;
  n.op = "Cast";
  n.name = name + ":cast";
  n.SetInt("to", DTypeToOnnx(to));
  n.inputs = {from};
  Value v;
  v.name = name;
  n.outputs = {g.AddValue(std::move(v))};
  CT_RETURN_IF_ERROR(InferNode(g, n));
  const int out = n.outputs[0];
  g.nodes.push_back(std::move(n));
  return out;
}

// A tensor of the file: an edge type widened (its wide bytes charged too: both are held).
Expected<Value> FromTensorProto(const onnx::TensorProto& t, const TensorSource& src) {
  CT_ASSIGN_OR_RETURN(Value v, ReadTensorProto(t, src));
  if (IsEdgeType(v.dtype)) {
    const DType wide = WideType(v.dtype);
    CT_RETURN_IF_ERROR(src.budget->Charge(
        "tensor '" + t.name() + "' as " + DTypeName(wide),
        static_cast<uint64_t>(v.elements()) * static_cast<uint64_t>(DTypeBytes(wide))));
  }
  return Widen(std::move(v));
}

Expected<Value> ReadTensorProto(const onnx::TensorProto& t, const TensorSource& src) {
  Value v;
  v.name = t.name();
  const std::string what = "tensor '" + t.name() + "'";
  CT_ASSIGN_OR_RETURN(v.dtype, DTypeFromOnnx(t.data_type(), what));
  v.shape.assign(t.dims().begin(), t.dims().end());
  // The size is checked and charged before any byte is read or allocated.
  CT_ASSIGN_OR_RETURN(const uint64_t want,
                      CheckedBytes(what, v.shape, v.dtype, src.budget->limit()));
  const std::string named = what + " " + ShapeText(v.shape) + " " + DTypeName(v.dtype);
  CT_RETURN_IF_ERROR(src.budget->Charge(named, want));
  const int64_t n = v.elements();
  auto wrong = [&](uint64_t got) {
    return Invalid(what + " " + ShapeText(v.shape) + " holds " + std::to_string(got) +
                   " values or bytes, not " + std::to_string(n));
  };
  // The 4- and 2-bit types are packed in the file (the first element in the low bits), one per
  // byte in the graph.
  const int bits =
      v.dtype == DType::kInt4 || v.dtype == DType::kUint4 || v.dtype == DType::kFloat4E2M1 ? 4
      : v.dtype == DType::kInt2 || v.dtype == DType::kUint2                                ? 2
                                                                                           : 8;
  const uint64_t stored = bits == 8 ? want : (static_cast<uint64_t>(n) * bits + 7) / 8;
  auto unpack = [&](const std::string& packed) {
    if (bits == 8)
      return std::make_shared<const std::vector<uint8_t>>(packed.begin(), packed.end());
    std::vector<uint8_t> out(static_cast<size_t>(n));
    const int per = 8 / bits;
    for (int64_t i = 0; i < n; ++i) {
      const auto byte = static_cast<uint8_t>(packed[static_cast<size_t>(i / per)]);
      out[static_cast<size_t>(i)] =
          static_cast<uint8_t>((byte >> (bits * (i % per))) & ((1u << bits) - 1));
    }
    return std::make_shared<const std::vector<uint8_t>>(std::move(out));
  };
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    CT_ASSIGN_OR_RETURN(std::string raw, ReadExternal(t, src, stored));
    v.data = unpack(raw);
    return v;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != stored) return wrong(t.raw_data().size());
    v.data = unpack(t.raw_data());
    return v;
  }
  if (bits != 8) {
    return Invalid(what + ": a " + DTypeName(v.dtype) +
                   " tensor is read from raw_data or external data only");
  }
  // The typed fields: float_data, double_data, int64_data, uint64_data for uint32 and uint64,
  // and int32_data for the 32-bit and smaller integers, bool and float16's bits. Their counts are
  // checked before the tensor's bytes are allocated.
  auto check = [&](int size) -> Status {
    return static_cast<int64_t>(size) == n ? Status::Ok() : wrong(static_cast<uint64_t>(size));
  };
  switch (v.dtype) {
    case DType::kFloat32:
      CT_RETURN_IF_ERROR(check(t.float_data_size()));
      break;
    case DType::kFloat64:
      CT_RETURN_IF_ERROR(check(t.double_data_size()));
      break;
    case DType::kInt64:
      CT_RETURN_IF_ERROR(check(t.int64_data_size()));
      break;
    case DType::kUint32:
    case DType::kUint64:
      CT_RETURN_IF_ERROR(check(t.uint64_data_size()));
      break;
    case DType::kInt32:
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kUint16:
    case DType::kFloat16:
    default:  // the narrow types: one element per entry
      CT_RETURN_IF_ERROR(check(t.int32_data_size()));
      break;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(want));
  // An empty tensor's fields may hand out a null pointer: memcpy must not see it.
  auto put = [&](const void* p) {
    if (want > 0) std::memcpy(bytes.data(), p, static_cast<size_t>(want));
  };
  switch (v.dtype) {
    case DType::kFloat32:
      put(t.float_data().data());
      break;
    case DType::kFloat64:
      put(t.double_data().data());
      break;
    case DType::kInt64:
      put(t.int64_data().data());
      break;
    case DType::kInt32:
      put(t.int32_data().data());
      break;
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
      for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(t.int32_data(i));
      break;
    default:  // the narrow types: bfloat16 as float16 below, the 8-bit ones as uint8 above
      if (DTypeBytes(v.dtype) == 1) {
        for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(t.int32_data(i));
        break;
      }
      [[fallthrough]];
    case DType::kInt16:
    case DType::kUint16:
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = static_cast<uint16_t>(t.int32_data(i));
        std::memcpy(bytes.data() + 2 * i, &v, 2);
      }
      break;
    case DType::kUint64:
      put(t.uint64_data().data());
      break;
    case DType::kUint32:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t v = static_cast<uint32_t>(t.uint64_data(i));
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
      break;
  }
  v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return v;
}

Expected<Attr> FromAttribute(const onnx::AttributeProto& a, const std::string& where,
                             const TensorSource& src) {
  Attr out;
  // Files before IR 2's `type` field say which field is set only by setting it.
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED) {
    if (a.has_f()) type = onnx::AttributeProto::FLOAT;
    if (a.has_i()) type = onnx::AttributeProto::INT;
    if (a.has_s()) type = onnx::AttributeProto::STRING;
    if (a.has_t()) type = onnx::AttributeProto::TENSOR;
    if (a.floats_size()) type = onnx::AttributeProto::FLOATS;
    if (a.ints_size()) type = onnx::AttributeProto::INTS;
  }
  switch (type) {
    case onnx::AttributeProto::FLOAT:
      out.kind = Attr::Kind::kFloat;
      out.f = a.f();
      break;
    case onnx::AttributeProto::INT:
      out.kind = Attr::Kind::kInt;
      out.i = a.i();
      break;
    case onnx::AttributeProto::STRING:
      out.kind = Attr::Kind::kString;
      out.s = a.s();
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attr::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      out.kind = Attr::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::TENSOR: {
      out.kind = Attr::Kind::kTensor;
      CT_ASSIGN_OR_RETURN(Value v, FromTensorProto(a.t(), src));
      out.tensor = std::make_shared<Value>(std::move(v));
      break;
    }
    default:
      return Invalid(where + ": attribute '" + a.name() + "' of type " +
                     std::to_string(static_cast<int>(type)) +
                     " is not supported (float, int, string, tensor, floats, ints)");
  }
  return out;
}

// The folder a file's external data is looked up in ("." for a bare name).
std::string FolderOf(const std::string& path) {
  const std::string dir = fs::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Every output of an inferred node within the budget; those folding will make charged to it.
Status CheckOutputs(const Graph& g, const Node& n, const std::string& where, bool folds,
                    Budget* budget) {
  for (int o : n.outputs) {
    const Value& v = g.values[o];
    const std::string what = where + ": output '" + v.name + "'";
    auto bytes = CheckedBytes(what, v.shape, v.dtype, budget->limit());
    if (!bytes.ok()) return bytes.status();
    if (folds && !v.is_const()) {
      CT_RETURN_IF_ERROR(
          budget->Charge(what + " " + ShapeText(v.shape) + " " + DTypeName(v.dtype), *bytes));
    }
  }
  return Status::Ok();
}

// Every operator, opset and attribute the graph uses that the operator table does not take.
std::vector<Unsupported> CollectUnsupported(const onnx::GraphProto& gp, int opset) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Unsupported> found;
  auto note = [&](Unsupported u, const std::string& node) {
    Unsupported& entry = found.try_emplace({u.kind, u.domain, u.op, u.attribute}, u).first->second;
    entry.nodes.push_back(node);
  };
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    const std::string node = np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name();
    Unsupported u;
    u.op = np.op_type();
    if (np.domain() == kContribDomain) {
      const std::vector<std::string>* attrs = ContribAttributes(np.op_type());
      u.domain = np.domain();
      if (attrs == nullptr) {
        u.kind = "operator";
        note(u, node);
        continue;
      }
      for (const auto& a : np.attribute()) {
        if (std::find(attrs->begin(), attrs->end(), a.name()) != attrs->end()) continue;
        u.kind = "attribute";
        u.attribute = a.name();
        note(u, node);
      }
      continue;
    }
    if (!np.domain().empty() && np.domain() != "ai.onnx") {
      u.kind = "operator";
      u.domain = np.domain();
      note(u, node);
      continue;
    }
    const OpDef* def = FindOp(np.op_type());
    if (def == nullptr || def->from_passes) {
      u.kind = "operator";
      note(u, node);
      continue;
    }
    if (opset < def->since_opset || opset > def->until_opset) {
      u.kind = "opset";
      u.since_opset = def->since_opset;
      u.until_opset = def->until_opset;
      note(u, node);
      continue;
    }
    for (const auto& a : np.attribute()) {
      const bool known = std::any_of(def->attributes.begin(), def->attributes.end(),
                                     [&](const AttrSpec& spec) { return spec.name == a.name(); });
      if (known) continue;
      u.kind = "attribute";
      u.attribute = a.name();
      note(u, node);
    }
  }
  std::vector<Unsupported> out;
  for (auto& [key, u] : found) out.push_back(std::move(u));
  return out;
}

// The refusal: each entry with its node count and the first three names.
Status RefuseWhatIsNotSupported(const onnx::GraphProto& gp, int opset) {
  const std::vector<Unsupported> missing = CollectUnsupported(gp, opset);
  if (missing.empty()) return Status::Ok();
  std::string text;
  for (const Unsupported& u : missing) {
    std::string what =
        u.kind == "attribute" ? "attribute '" + u.attribute + "' of " + u.op : "operator " + u.op;
    if (!u.domain.empty()) what += " of domain '" + u.domain + "'";
    if (u.kind == "opset") {
      what += " (opsets " + std::to_string(u.since_opset) + " to " + std::to_string(u.until_opset) +
              ")";
    }
    const size_t count = u.nodes.size();
    text += (text.empty() ? "" : "; ") + what + " at ";
    text += count == 1 ? "node " : std::to_string(count) + " nodes (";
    for (size_t i = 0; i < std::min<size_t>(count, 3); ++i) {
      text += (i ? ", '" : "'") + u.nodes[i] + "'";
    }
    if (count > 3) text += ", ...";
    if (count > 1) text += ")";
  }
  return Invalid("not supported (opset " + std::to_string(opset) + "): " + text);
}

// The model's protobuf and its default-domain opset, checked against the supported ranges.
Status ParseModel(const std::string& bytes, onnx::ModelProto* model, int* opset) {
  if (!model->ParseFromString(bytes))
    return Invalid("not an ONNX model (the protobuf does not parse)");
  if (model->ir_version() < kMinIrVersion || model->ir_version() > kMaxIrVersion) {
    return Invalid("IR version " + std::to_string(model->ir_version()) + " is not supported (" +
                   std::to_string(kMinIrVersion) + " to " + std::to_string(kMaxIrVersion) + ")");
  }
  int64_t declared = -1;  // as the file says it: never truncated into a supported opset
  for (const auto& op : model->opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;
    declared = op.version();
  }
  if (model->opset_import_size() == 0) declared = 1;  // IR 3 files may leave it out: opset 1
  // Below kMinOpset only operators unchanged since then import (each OpDef says).
  if (declared < 1 || declared > kMaxOpset) {
    return Invalid("opset " + std::to_string(declared) +
                   " of the default domain is not supported (" + std::to_string(kMinOpset) +
                   " to " + std::to_string(kMaxOpset) + ")");
  }
  *opset = static_cast<int>(declared);
  return Status::Ok();
}

}  // namespace

Expected<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& base_dir,
                                const ImportOptions& options) {
  if (bytes.size() > options.max_model_bytes) {
    return Status(ErrorCode::kLimitExceeded, "the model is " + std::to_string(bytes.size()) +
                                                 " bytes, over the import budget of " +
                                                 std::to_string(options.max_model_bytes) +
                                                 " bytes (--max-model-mb)");
  }
  onnx::ModelProto model;
  Graph g;
  CT_RETURN_IF_ERROR(ParseModel(bytes, &model, &g.opset));
  const onnx::GraphProto& gp = model.graph();
  CT_RETURN_IF_ERROR(RefuseWhatIsNotSupported(gp, g.opset));
  g.name = gp.name();
  std::map<std::string, int> by_name;
  Budget budget(options.max_model_bytes);
  const TensorSource src{base_dir, options.external_data, &budget};

  // Values widened from an edge type (graph.h): the type they stand for, and for those widened
  // from a Cast's output, that narrow value.
  std::map<int, DType> edge_type;
  std::map<int, int> narrow_of;
  for (const auto& t : gp.initializer()) {
    if (by_name.count(t.name())) return Invalid("initializer '" + t.name() + "' is given twice");
    CT_ASSIGN_OR_RETURN(Value v, FromTensorProto(t, src));
    const std::string name = v.name;
    by_name[name] = g.AddValue(std::move(v));
    auto file_type = DTypeFromOnnx(t.data_type(), "initializer");
    if (file_type.ok() && IsEdgeType(*file_type)) edge_type[by_name[name]] = *file_type;
  }
  // --shape names only inputs (checked first: a wrong name explains a dynamic dimension error).
  std::vector<std::string> input_names;
  for (const auto& in : gp.input()) {
    if (by_name.count(in.name())) continue;
    if (std::find(input_names.begin(), input_names.end(), in.name()) != input_names.end()) {
      return Invalid("input '" + in.name() + "' is listed twice");
    }
    input_names.push_back(in.name());
  }
  for (const auto& [name, shape] : options.shapes) {
    if (std::find(input_names.begin(), input_names.end(), name) == input_names.end()) {
      std::string known;
      for (const auto& n : input_names) known += (known.empty() ? "" : ", ") + n;
      return Invalid("--shape names '" + name +
                     "', which is not an input of the model (inputs: " + known + ")");
    }
  }
  for (const auto& in : gp.input()) {
    if (by_name.count(in.name())) continue;  // an initializer listed as an input (IR < 4)
    if (auto c = options.constants.find(in.name()); c != options.constants.end()) {
      Value v = Widen(c->second);
      v.name = in.name();
      by_name[in.name()] = g.AddValue(std::move(v));
      continue;
    }
    Value v;
    v.name = in.name();
    const auto& tt = in.type().tensor_type();
    CT_ASSIGN_OR_RETURN(v.dtype, DTypeFromOnnx(tt.elem_type(), "input '" + in.name() + "'"));
    std::vector<int64_t> given;
    if (auto it = options.shapes.find(in.name()); it != options.shapes.end()) {
      given = it->second;
    }
    if (!tt.has_shape() && given.empty()) {
      return Invalid("input '" + in.name() + "' has no shape (give --shape " + in.name() +
                     "=D1,D2,...)");
    }
    if (!given.empty() && tt.has_shape() &&
        given.size() != static_cast<size_t>(tt.shape().dim_size())) {
      return Invalid("--shape " + in.name() + " has " + std::to_string(given.size()) +
                     " dimensions, the input has " + std::to_string(tt.shape().dim_size()));
    }
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      const bool fixed = dim.has_dim_value() && dim.dim_value() >= 0;
      if (!given.empty()) {
        if (fixed && dim.dim_value() != given[d]) {
          return Invalid("--shape " + in.name() + ": dimension " + std::to_string(d) + " is " +
                         std::to_string(dim.dim_value()) + " in the model, not " +
                         std::to_string(given[d]));
        }
        continue;
      }
      if (!fixed) {
        const std::string what = dim.has_dim_param() ? "'" + dim.dim_param() + "'" : "unknown";
        return Invalid("input '" + in.name() + "' has a dynamic dimension " + what +
                       " (give --shape " + in.name() + "=D1,D2,...)");
      }
      v.shape.push_back(dim.dim_value());
    }
    if (!given.empty()) v.shape = given;
    CT_RETURN_IF_ERROR(
        CheckedBytes("input '" + in.name() + "'", v.shape, v.dtype, budget.limit()).status());
    const DType type = v.dtype;
    const int id = g.AddValue(std::move(v));
    by_name[in.name()] = id;
    g.inputs.push_back(id);
    if (IsEdgeType(type)) {
      // The graph computes in the wide type: a Cast at its edge, which every reader reads.
      const DType wide = WideType(type);
      CT_ASSIGN_OR_RETURN(by_name[in.name()],
                          AddEdgeCast(g, id, wide, in.name() + ":" + DTypeName(wide)));
      edge_type[by_name[in.name()]] = type;
    }
  }
  // Every value something reads: a node's input or a graph output. An optional output past what
  // the operator table takes (Dropout's mask, MaxPool's indices, BatchNormalization's training
  // statistics) is dropped when nothing reads it; one that is read is refused by name.
  std::set<std::string> read;
  for (const auto& np : gp.node()) read.insert(np.input().begin(), np.input().end());
  for (const auto& out : gp.output()) read.insert(out.name());
  std::set<std::string> node_names;
  // Infers a node's outputs, checks their sizes, folds it when its inputs are constants, and
  // appends it.
  auto add_node = [&](Node& n) -> Status {
    const std::string where = n.op + " node '" + n.name + "'";
    CT_RETURN_IF_ERROR(InferNode(g, n));
    CT_RETURN_IF_ERROR(CheckOutputs(g, n, where, CanFold(g, n), &budget));
    if (CanFold(g, n)) CT_RETURN_IF_ERROR(EvalNode(g, n));
    g.nodes.push_back(std::move(n));
    return Status::Ok();
  };
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    Node n;
    n.op = np.op_type();
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name();
    while (!node_names.insert(n.name).second) n.name += "_" + std::to_string(k);
    const std::string where = n.op + " node '" + n.name + "'";
    const bool contrib = np.domain() == kContribDomain;
    if (!contrib && !np.domain().empty() && np.domain() != "ai.onnx") {
      return Invalid(where + ": domain '" + np.domain() + "' is not supported");
    }
    const OpDef* def = contrib ? nullptr : FindOp(n.op);
    if (!contrib && (def == nullptr || def->from_passes)) {
      return Invalid(where + ": operator " + n.op + " is not supported");
    }
    for (const auto& a : np.attribute()) {
      if (n.attrs.count(a.name())) {
        return Invalid(where + ": attribute '" + a.name() + "' is given twice");
      }
      CT_ASSIGN_OR_RETURN(n.attrs[a.name()], FromAttribute(a, where, src));
    }
    for (const auto& in : np.input()) {
      if (in.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      auto it = by_name.find(in);
      if (it == by_name.end())
        return Invalid(where + ": input '" + in + "' is not defined before it");
      n.inputs.push_back(it->second);
    }
    int outs = np.output_size();
    while (outs > 0 && np.output(outs - 1).empty()) --outs;  // optional outputs left out
    while (!contrib && outs > def->max_outputs && !read.count(np.output(outs - 1))) --outs;
    for (int o = 0; o < outs; ++o) {
      // A contrib node computes only the optional outputs something reads.
      if (contrib && o > 0 && !read.count(np.output(o))) {
        n.outputs.push_back(-1);
        continue;
      }
      Value v;
      v.name = np.output(o);
      // An optional output left out before one that is kept: computed, never read, named after
      // its node so that no file's name can clash with it.
      if (v.name.empty() && o > 0) v.name = n.name + ":unused_output_" + std::to_string(o);
      if (v.name.empty() || by_name.count(v.name)) {
        return Invalid(where + ": output " + std::to_string(o) + " ('" + v.name +
                       "') is empty or defined twice");
      }
      const std::string name = v.name;
      const int id = g.AddValue(std::move(v));
      by_name[name] = id;
      n.outputs.push_back(id);
    }
    if (contrib) {
      const size_t first = g.nodes.size();
      CT_RETURN_IF_ERROR(ExpandContrib(g, n, where, add_node));
      std::set<int> computed;
      for (size_t m = first; m < g.nodes.size(); ++m) {
        computed.insert(g.nodes[m].outputs.begin(), g.nodes[m].outputs.end());
      }
      for (int id : n.outputs) {
        if (id >= 0 && !computed.count(id) && !g.values[id].is_const()) {
          return Invalid(where + ": output '" + g.values[id].name + "' is not supported");
        }
      }
      continue;
    }
    // QuantizeLinear to a narrow integer (its zero point's type, or output_dtype's): the int8 or
    // uint8 quantization clipped to the narrow type's range; to a narrow float: refused by name.
    if (n.op == "QuantizeLinear" && !n.outputs.empty()) {
      DType target = DType::kFloat32;
      if (n.inputs.size() > 2 && n.inputs[2] >= 0 && edge_type.count(n.inputs[2])) {
        target = edge_type[n.inputs[2]];
      } else if (auto t = DTypeFromOnnx(static_cast<int32_t>(n.Int("output_dtype", 1)), "");
                 t.ok() && IsEdgeType(*t)) {
        target = *t;
        n.SetInt("output_dtype", DTypeToOnnx(WideType(target)));
      }
      if (IsEdgeType(target) && WideType(target) == DType::kFloat32) {
        return Invalid(where + ": quantizing to " + DTypeName(target) +
                       " is not supported (int8, uint8, int4, uint4, int2, uint2)");
      }
      if (IsEdgeType(target)) {
        const DType wide = WideType(target);
        const bool is_signed = wide == DType::kInt8;
        const int bits = target == DType::kInt4 || target == DType::kUint4 ? 4 : 2;
        const int64_t lo = is_signed ? -(1 << (bits - 1)) : 0;
        const int64_t hi = is_signed ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
        const int out = n.outputs[0];
        const std::string name = g.values[out].name, node = n.name;
        g.values[out].name = g.UniqueValueName(name + ":" + DTypeName(wide));
        CT_RETURN_IF_ERROR(add_node(n));
        // Min, then Max where the range has a negative end (Clip compiles float32 only).
        int last = out;
        for (const auto& [op, bound] : {std::pair<const char*, int64_t>{"Min", hi}, {"Max", lo}}) {
          if (std::string(op) == "Max" && !is_signed) break;
          Node clip;
          clip.op = op;
          clip.name = node + ":" + (std::string(op) == "Min" ? "clip_high" : "clip_low");
          const int b = g.AddConstant(g.UniqueValueName(clip.name + ":bound"), wide, {},
                                      {static_cast<uint8_t>(static_cast<int8_t>(bound))});
          clip.inputs = {last, b};
          Value v;
          v.name = is_signed && std::string(op) == "Min" ? g.UniqueValueName(name + ":high") : name;
          clip.outputs = {g.AddValue(std::move(v))};
          last = clip.outputs[0];
          CT_RETURN_IF_ERROR(add_node(clip));
        }
        by_name[name] = last;
        edge_type[last] = target;
        continue;
      }
    }
    if (n.op == "DequantizeLinear" && !n.inputs.empty() && edge_type.count(n.inputs[0]) &&
        WideType(edge_type[n.inputs[0]]) == DType::kFloat32) {
      return Invalid(where + ": dequantizing " + DTypeName(edge_type[n.inputs[0]]) +
                     " is not supported (int8, uint8, int32, int4, uint4, int2, uint2)");
    }
    // A Cast to float16 computes in float32 like the rest of the graph (as onnxruntime's CPU
    // kernels do): onnx's float16 tests expect values within float16 of that.
    if (n.op == "Cast" && n.Int("to", 0) == DTypeToOnnx(DType::kFloat16)) {
      n.SetInt("to", DTypeToOnnx(DType::kFloat32));
    }
    // A Cast (or CastLike) to a narrow type gives that type (its values rounded to the type's),
    // which the next nodes read widened.
    if ((n.op == "Cast" || n.op == "CastLike") && !n.outputs.empty()) {
      DType to = DType::kFloat32;
      bool edge = false;
      if (n.op == "Cast") {
        auto t = DTypeFromOnnx(static_cast<int32_t>(n.Int("to", 0)), where + ": attribute 'to'");
        edge = t.ok() && IsNarrowType(*t);
        if (edge) to = *t;
      } else if (n.inputs.size() == 2 && n.inputs[1] >= 0) {
        const int like = n.inputs[1];
        to = edge_type.count(like) ? edge_type[like] : g.values[like].dtype;
        edge = IsNarrowType(to);
        if (edge) {
          n.op = "Cast";
          n.SetInt("to", DTypeToOnnx(to));
          n.inputs.resize(1);
        }
      }
      if (edge) {
        const int out = n.outputs[0];
        const std::string name = g.values[out].name, node = n.name;
        g.values[out].name = g.UniqueValueName(name + ":" + DTypeName(to));
        CT_RETURN_IF_ERROR(add_node(n));
        Node widen;
        widen.op = "Cast";
        widen.name = node + ":widen";
        widen.SetInt("to", DTypeToOnnx(WideType(to)));
        widen.inputs = {out};
        Value v;
        v.name = name;
        widen.outputs = {g.AddValue(std::move(v))};
        by_name[name] = widen.outputs[0];
        edge_type[widen.outputs[0]] = to;
        narrow_of[widen.outputs[0]] = out;
        CT_RETURN_IF_ERROR(add_node(widen));
        continue;
      }
    }
    CT_RETURN_IF_ERROR(add_node(n));
  }
  for (const auto& out : gp.output()) {
    auto it = by_name.find(out.name());
    if (it == by_name.end()) return Invalid("output '" + out.name() + "' is computed by no node");
    int id = it->second;
    // An output of an edge type: the narrow value a Cast gave where there is one, else the wide
    // value computed, cast at the graph's edge; either under the output's name.
    auto declared = DTypeFromOnnx(out.type().tensor_type().elem_type(), "output");
    if (declared.ok() && IsEdgeType(*declared) && g.values[id].dtype != *declared) {
      const std::string wide_name = out.name() + ":" + DTypeName(g.values[id].dtype);
      auto source = narrow_of.find(id);
      if (source != narrow_of.end() && g.values[source->second].dtype == *declared) {
        g.values[id].name = g.UniqueValueName(wide_name);
        id = source->second;
        g.values[id].name = out.name();
      } else {
        g.values[id].name = g.UniqueValueName(wide_name);
        CT_ASSIGN_OR_RETURN(id, AddEdgeCast(g, id, *declared, out.name()));
      }
    }
    g.outputs.push_back(id);
  }
  return g;
}

Expected<Graph> ImportOnnx(const std::string& path, const ImportOptions& options) {
  CT_ASSIGN_OR_RETURN(std::string bytes, ReadModelFile(path, options.max_model_bytes));
  auto g = ImportOnnxBytes(bytes, FolderOf(path), options);
  if (!g.ok()) return Status(g.status().code(), path + ": " + g.status().message());
  return g;
}

Expected<UnsupportedReport> FindUnsupported(const std::string& path, uint64_t max_model_bytes) {
  CT_ASSIGN_OR_RETURN(std::string bytes, ReadModelFile(path, max_model_bytes));
  onnx::ModelProto model;
  UnsupportedReport report;
  Status s = ParseModel(bytes, &model, &report.opset);
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  report.unsupported = CollectUnsupported(model.graph(), report.opset);
  return report;
}

Expected<std::vector<std::string>> OnnxInputNames(const std::string& path) {
  CT_ASSIGN_OR_RETURN(std::string bytes, ReadModelFile(path, kDefaultMaxModelBytes));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return Invalid(path + ": not an ONNX model");
  std::set<std::string> weights;
  for (const auto& t : model.graph().initializer()) weights.insert(t.name());
  std::vector<std::string> out;
  for (const auto& in : model.graph().input()) {
    if (!weights.count(in.name())) out.push_back(in.name());
  }
  return out;
}

Expected<std::map<std::string, std::vector<int64_t>>> ParseShapeFlags(
    const std::vector<std::string>& flags) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    const std::string name = f.substr(0, eq);
    if (eq == std::string::npos || name.empty()) {
      return Invalid("--shape '" + f + "' is not NAME=D1,D2,...");
    }
    std::vector<int64_t> dims;
    size_t pos = eq + 1;
    while (true) {
      const size_t comma = f.find(',', pos);
      const std::string part =
          f.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      char* end = nullptr;
      const long long v = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || v < 1 || v > (int64_t{1} << 31)) {
        return Invalid("--shape '" + f + "': dimensions are positive integers");
      }
      dims.push_back(v);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    if (!out.emplace(name, dims).second) return Invalid("--shape gives '" + name + "' twice");
  }
  return out;
}

Expected<Value> ReadTensorFile(const std::string& path) {
  CT_ASSIGN_OR_RETURN(std::string bytes, ReadModelFile(path, kDefaultMaxModelBytes));
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) return Invalid(path + ": not a TensorProto");
  Budget budget(kDefaultMaxModelBytes);
  auto v = ReadTensorProto(t, {FolderOf(path), true, &budget});
  if (!v.ok()) return Status(v.status().code(), path + ": " + v.status().message());
  return v;
}

}  // namespace crosstune::model
