// com.microsoft's operators as the ai.onnx nodes they stand for (onnx_contrib.h).
#include "onnx_contrib.h"

#include <cmath>
#include <cstring>
#include <map>
#include <utility>

namespace crosstune::model {
namespace {

Status ContribError(std::string what) {
  return Status(ErrorCode::kInvalidArgument, std::move(what));
}

const std::map<std::string, std::vector<std::string>>& ContribTable() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"BiasGelu", {}},
      {"FastGelu", {}},
      {"Gelu", {}},
      {"SkipLayerNormalization", {"epsilon"}},
      {"EmbedLayerNormalization", {"epsilon", "mask_index_type"}},
      {"Attention",
       {"num_heads", "unidirectional", "qkv_hidden_sizes", "scale", "mask_filter_value",
        "do_rotary", "past_present_share_buffer", "rotary_embedding_dim"}},
  };
  return table;
}

// Appends nodes under the contrib node's name, each output a new value unless given.
class Emitter {
 public:
  Emitter(Graph& g, const Node& n, const std::function<Status(Node&)>& add)
      : g_(g), base_(n.name), add_(add) {}

  // A node of `op` on `inputs` (attributes set by `attrs`) whose output is value `out` (a new
  // one when -1); returns the output's id.
  Expected<int> Op(const std::string& op, std::vector<int> inputs,
                   const std::function<void(Node&)>& attrs = nullptr, int out = -1) {
    Node n;
    n.op = op;
    n.name = base_ + "/" + op + "_" + std::to_string(count_++);
    n.inputs = std::move(inputs);
    if (attrs) attrs(n);
    if (out < 0) {
      Value v;
      v.name = g_.UniqueValueName(n.name);
      out = g_.AddValue(std::move(v));
    }
    n.outputs = {out};
    CT_RETURN_IF_ERROR(add_(n));
    return out;
  }
  int Floats(std::vector<int64_t> shape, const std::vector<float>& data) {
    return g_.AddFloatConstant(g_.UniqueValueName(base_ + "/const"), std::move(shape), data);
  }
  int Ints(std::vector<int64_t> shape, const std::vector<int64_t>& data) {
    std::vector<uint8_t> bytes(data.size() * 8);
    if (!bytes.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
    return g_.AddConstant(g_.UniqueValueName(base_ + "/const"), DType::kInt64, std::move(shape),
                          std::move(bytes));
  }
  Expected<int> Reshape(int x, const std::vector<int64_t>& shape) {
    return Op("Reshape", {x, Ints({static_cast<int64_t>(shape.size())}, shape)});
  }
  Expected<int> Cast(int x, DType to) {
    return Op("Cast", {x}, [&](Node& n) { n.SetInt("to", DTypeToOnnx(to)); });
  }

 private:
  Graph& g_;
  std::string base_;
  const std::function<Status(Node&)>& add_;
  int count_ = 0;
};

int In(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }
int Out(const Node& n, size_t i) { return i < n.outputs.size() ? n.outputs[i] : -1; }

// A sum of the given values (-1s skipped), the last Add writing `out` where given.
Expected<int> Sum(Emitter& e, std::vector<int> terms, int out) {
  std::vector<int> have;
  for (int t : terms) {
    if (t >= 0) have.push_back(t);
  }
  int acc = have[0];
  for (size_t i = 1; i < have.size(); ++i) {
    CT_ASSIGN_OR_RETURN(acc, e.Op("Add", {acc, have[i]}, nullptr, i + 1 == have.size() ? out : -1));
  }
  if (have.size() == 1 && out >= 0) return e.Op("Identity", {acc}, nullptr, out);
  return acc;
}

Expected<int> LayerNorm(Emitter& e, const Node& n, int x, int gamma, int beta, int out) {
  std::vector<int> inputs = {x, gamma};
  if (beta >= 0) inputs.push_back(beta);
  const double eps = n.Float("epsilon", 1e-12);
  return e.Op(
      "LayerNormalization", inputs,
      [&](Node& ln) {
        ln.SetInt("axis", -1);
        ln.SetFloat("epsilon", eps);
      },
      out);
}

Status ExpandGelu(Emitter& e, const Node& n, const std::string& approximate) {
  int x = In(n, 0);
  if (In(n, 1) >= 0) {
    CT_ASSIGN_OR_RETURN(x, e.Op("Add", {x, In(n, 1)}));
  }
  return e
      .Op(
          "Gelu", {x}, [&](Node& g) { g.SetString("approximate", approximate); }, Out(n, 0))
      .status();
}

Status ExpandSkipLayerNorm(Emitter& e, const Node& n, const std::string& where) {
  if (Out(n, 1) >= 0 || Out(n, 2) >= 0) {
    return ContribError(where + ": outputs 1 and 2 (the mean and inverse standard deviation) are " +
                        "not supported; output 3, the sum, is");
  }
  CT_ASSIGN_OR_RETURN(int sum, Sum(e, {In(n, 0), In(n, 1), In(n, 4)}, Out(n, 3)));
  return LayerNorm(e, n, sum, In(n, 2), In(n, 3), Out(n, 0)).status();
}

Status ExpandEmbedLayerNorm(Graph& g, Emitter& e, const Node& n, const std::string& where) {
  const int ids = In(n, 0), segment_ids = In(n, 1), word = In(n, 2), position = In(n, 3);
  const int segment = In(n, 4), gamma = In(n, 5), beta = In(n, 6), mask = In(n, 7);
  const int position_ids = In(n, 8);
  if (ids < 0 || word < 0 || position < 0 || gamma < 0 || beta < 0) {
    return ContribError(where + ": input_ids, word_embedding, position_embedding, gamma and beta " +
                        "are required");
  }
  if ((segment_ids < 0) != (segment < 0)) {
    return ContribError(where + ": segment_ids and segment_embedding come together");
  }
  const std::vector<int64_t> shape = g.values[ids].shape;  // a copy: adding values moves them
  if (shape.size() != 2) {
    return ContribError(where + ": input_ids must be 2-D [batch, sequence], not " +
                        ShapeText(shape));
  }
  CT_ASSIGN_OR_RETURN(int sum, e.Op("Gather", {word, ids}));
  int positions = position_ids;
  if (positions < 0) {
    std::vector<int64_t> iota(static_cast<size_t>(shape[1]));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int64_t>(i);
    positions = e.Ints({shape[1]}, iota);
  }
  CT_ASSIGN_OR_RETURN(int pos, e.Op("Gather", {position, positions}));
  int seg = -1;
  if (segment >= 0) {
    CT_ASSIGN_OR_RETURN(seg, e.Op("Gather", {segment, segment_ids}));
  }
  CT_ASSIGN_OR_RETURN(sum, Sum(e, {sum, pos, seg}, Out(n, 2)));
  CT_RETURN_IF_ERROR(LayerNorm(e, n, sum, gamma, beta, Out(n, 0)).status());
  if (Out(n, 1) < 0) return Status::Ok();
  // mask_index: each batch row's count of ones (0 without a mask), int32.
  if (mask < 0) {
    CT_ASSIGN_OR_RETURN(
        int zeros, e.Cast(e.Ints({shape[0]}, std::vector<int64_t>(shape[0], 0)), DType::kInt32));
    return e.Op("Identity", {zeros}, nullptr, Out(n, 1)).status();
  }
  CT_ASSIGN_OR_RETURN(int m, e.Cast(mask, DType::kFloat32));
  const int ones = e.Floats({shape[1], 1}, std::vector<float>(static_cast<size_t>(shape[1]), 1));
  CT_ASSIGN_OR_RETURN(int counts, e.Op("MatMul", {m, ones}));
  CT_ASSIGN_OR_RETURN(counts, e.Reshape(counts, {shape[0]}));
  return e
      .Op(
          "Cast", {counts}, [](Node& c) { c.SetInt("to", DTypeToOnnx(DType::kInt32)); }, Out(n, 1))
      .status();
}

// Columns [from, from + count) of a constant [rows, cols] float32 matrix (or of a vector).
int Columns(Emitter& e, const Value& w, int64_t from, int64_t count) {
  const bool vector = w.shape.size() == 1;
  const int64_t rows = vector ? 1 : w.shape[0], cols = w.shape.back();
  std::vector<float> part(static_cast<size_t>(rows * count));
  const float* src = w.floats();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < count; ++c) part[r * count + c] = src[r * cols + from + c];
  }
  return vector ? e.Floats({count}, part) : e.Floats({rows, count}, part);
}

Status ExpandAttention(Graph& g, Emitter& e, const Node& n, const std::string& where) {
  if (In(n, 4) >= 0 || In(n, 6) >= 0) {
    return ContribError(where + ": past key/value (inputs 4 and 6) is not supported");
  }
  if (Out(n, 1) >= 0) return ContribError(where + ": output 1 (present) is not supported");
  if (n.Int("do_rotary", 0) != 0) return ContribError(where + ": do_rotary is not supported");
  if (n.Int("past_present_share_buffer", 0) != 0) {
    return ContribError(where + ": past_present_share_buffer is not supported");
  }
  const int heads = static_cast<int>(n.Int("num_heads", 0));
  if (heads < 1) return ContribError(where + ": num_heads must be given and at least 1");
  // Copies (their data shared): adding values moves the graph's.
  const Value x = g.values[In(n, 0)];
  if (In(n, 1) < 0) return ContribError(where + ": the weights (input 1) are required");
  const Value w = g.values[In(n, 1)];
  if (x.shape.size() != 3 || x.dtype != DType::kFloat32) {
    return ContribError(where + ": the input must be float32 [batch, sequence, hidden], not " +
                        ShapeText(x.shape) + " " + DTypeName(x.dtype));
  }
  if (!w.is_const() || w.dtype != DType::kFloat32 || w.shape.size() != 2 ||
      w.shape[0] != x.shape[2]) {
    return ContribError(where + ": the weights must be a float32 constant [" +
                        std::to_string(x.shape[2]) + ", q + k + v hidden] (a model's initializer)");
  }
  std::vector<int64_t> sizes = n.Ints("qkv_hidden_sizes", {});
  if (sizes.empty()) sizes.assign(3, w.shape[1] / 3);
  if (sizes.size() != 3 || sizes[0] + sizes[1] + sizes[2] != w.shape[1] || sizes[0] != sizes[1] ||
      sizes[0] % heads || sizes[2] % heads || sizes[0] <= 0 || sizes[2] <= 0) {
    return ContribError(where + ": qkv_hidden_sizes must split the weights' " +
                        std::to_string(w.shape[1]) + " columns into Q and K of one size and V, " +
                        "each a multiple of num_heads");
  }
  const int bias_id = In(n, 2);
  Value b;
  if (bias_id >= 0) {
    b = g.values[bias_id];
    if (!b.is_const() || b.dtype != DType::kFloat32 ||
        b.shape != std::vector<int64_t>{w.shape[1]}) {
      return ContribError(where + ": the bias must be a float32 constant [" +
                          std::to_string(w.shape[1]) + "]");
    }
  }
  // Q, K and V: the packed weights' columns, split here once.
  std::vector<int> qkv;
  int64_t from = 0;
  for (int64_t size : sizes) {
    CT_ASSIGN_OR_RETURN(int y, e.Op("MatMul", {In(n, 0), Columns(e, w, from, size)}));
    if (bias_id >= 0) {
      CT_ASSIGN_OR_RETURN(y, e.Op("Add", {y, Columns(e, b, from, size)}));
    }
    qkv.push_back(y);
    from += size;
  }
  // The key-padding mask, added to the scores as onnxruntime adds it.
  const int64_t batch = x.shape[0], seq = x.shape[1];
  const float filter = static_cast<float>(n.Float("mask_filter_value", -10000.0));
  int bias = -1;
  if (const int mask = In(n, 3); mask >= 0) {
    const std::vector<int64_t> ms = g.values[mask].shape;
    int keep = -1;  // float32, 1 where a key is attended
    std::vector<int64_t> to;
    if (ms == std::vector<int64_t>{batch}) {  // each row's length: keys j < length
      std::vector<int64_t> iota(static_cast<size_t>(seq));
      for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int64_t>(i);
      CT_ASSIGN_OR_RETURN(int lengths, e.Cast(mask, DType::kInt64));
      CT_ASSIGN_OR_RETURN(lengths, e.Reshape(lengths, {batch, 1}));
      CT_ASSIGN_OR_RETURN(keep, e.Op("Less", {e.Ints({1, seq}, iota), lengths}));
      CT_ASSIGN_OR_RETURN(keep, e.Cast(keep, DType::kFloat32));
      to = {batch, 1, 1, seq};
    } else if (ms == std::vector<int64_t>{batch, seq}) {
      CT_ASSIGN_OR_RETURN(keep, e.Cast(mask, DType::kFloat32));
      to = {batch, 1, 1, seq};
    } else if (ms == std::vector<int64_t>{batch, seq, seq}) {
      CT_ASSIGN_OR_RETURN(keep, e.Cast(mask, DType::kFloat32));
      to = {batch, 1, seq, seq};
    } else {
      return ContribError(where + ": mask_index " + ShapeText(ms) + " is not supported ([" +
                          std::to_string(batch) + "] lengths, or ones and zeros [" +
                          std::to_string(batch) + "," + std::to_string(seq) + "] or [" +
                          std::to_string(batch) + "," + std::to_string(seq) + "," +
                          std::to_string(seq) + "])");
    }
    // (1 - keep) * filter: 0 where attended, mask_filter_value where not.
    CT_ASSIGN_OR_RETURN(int masked, e.Op("Sub", {e.Floats({}, {1.0F}), keep}));
    CT_ASSIGN_OR_RETURN(masked, e.Op("Mul", {masked, e.Floats({}, {filter})}));
    CT_ASSIGN_OR_RETURN(bias, e.Reshape(masked, to));
  }
  if (const int extra = In(n, 5); extra >= 0) {
    if (bias >= 0) {
      CT_ASSIGN_OR_RETURN(bias, e.Op("Add", {bias, extra}));
    } else {
      bias = extra;
    }
  }
  std::vector<int> inputs = {qkv[0], qkv[1], qkv[2]};
  if (bias >= 0) inputs.push_back(bias);
  const bool scaled = n.Has("scale");
  const double scale = n.Float("scale", 0);
  const bool causal = n.Int("unidirectional", 0) != 0;
  return e
      .Op(
          "Attention", inputs,
          [&](Node& a) {
            a.SetInt("q_num_heads", heads);
            a.SetInt("kv_num_heads", heads);
            if (scaled) a.SetFloat("scale", scale);
            if (causal) a.SetInt("is_causal", 1);
          },
          Out(n, 0))
      .status();
}

}  // namespace

const std::vector<std::string>* ContribAttributes(const std::string& op) {
  auto it = ContribTable().find(op);
  return it == ContribTable().end() ? nullptr : &it->second;
}

Status ExpandContrib(Graph& g, const Node& n, const std::string& where,
                     const std::function<Status(Node&)>& add) {
  if (ContribAttributes(n.op) == nullptr) {
    return ContribError(where + ": operator " + n.op + " of domain '" + kContribDomain +
                        "' is not supported");
  }
  // The inputs each operator requires (EmbedLayerNormalization checks its own).
  const size_t required = n.op == "BiasGelu"                 ? 2
                          : n.op == "SkipLayerNormalization" ? 3
                          : n.op == "Attention"              ? 2
                                                             : 1;
  for (size_t i = 0; i < required; ++i) {
    if (In(n, i) < 0) {
      return ContribError(where + ": input " + std::to_string(i) + " is required (" +
                          std::to_string(required) + " are)");
    }
  }
  Emitter e(g, n, add);
  if (n.op == "BiasGelu" || n.op == "Gelu") return ExpandGelu(e, n, "none");
  if (n.op == "FastGelu") return ExpandGelu(e, n, "tanh");
  if (n.op == "SkipLayerNormalization") return ExpandSkipLayerNorm(e, n, where);
  if (n.op == "EmbedLayerNormalization") return ExpandEmbedLayerNorm(g, e, n, where);
  return ExpandAttention(g, e, n, where);
}

}  // namespace crosstune::model
