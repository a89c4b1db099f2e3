// Operators that copy their input into a new shape given by constants (any element type): Expand
// (broadcast to a shape), Tile (repeats per dimension), Split (into parts along an axis) and Pad
// (constant, reflect, edge or wrap; negative pads crop). Infer writes each node's shape inputs
// back as attributes and drops those inputs, so a kernel reads one tensor: Expand and Tile keep
// none (their output's shape says it all), Split keeps `axis` and `split`, Pad keeps `pads` (per
// dimension, begins then ends), `mode` and `value` (a float; any other type's constant is 0).
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

// The element of `in_shape` that element `i` of a tensor of `out_shape` reads, through `map`
// (per dimension: the output index to the input's, or -1 for none).
template <typename Map>
int64_t SourceOf(int64_t i, const std::vector<int64_t>& in_shape,
                 const std::vector<int64_t>& out_shape, Map map) {
  int64_t src = 0, stride = 1;
  for (size_t d = out_shape.size(); d-- > 0;) {
    const int64_t o = i % out_shape[d];
    i /= out_shape[d];
    const int64_t s = map(d, o);
    if (s < 0) return -1;
    src += s * stride;
    stride *= in_shape[d];
  }
  return src;
}

// Copies each output element from the input element `map` names (Pad's constant where none);
// `in_shape` is the input's (Expand's with leading dimensions of 1 to the output's rank).
template <typename Map>
void Gathered(OpContext& ctx, const std::vector<int64_t>& in_shape, Map map, const uint8_t* fill) {
  const Value& x = ctx.in(0);
  const std::vector<int64_t> out_shape = ctx.out(0).shape;
  const size_t es = static_cast<size_t>(DTypeBytes(x.dtype));
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  const int64_t total = NumElements(out_shape);
  for (int64_t i = 0; i < total; ++i) {
    const int64_t s = SourceOf(i, in_shape, out_shape, map);
    std::memcpy(y.data() + static_cast<size_t>(i) * es,
                s < 0 ? fill : x.data->data() + static_cast<size_t>(s) * es, es);
  }
}

Status InferExpand(OpContext& ctx) {
  const Value& x = ctx.in(0);
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstInts(1, "the shape"));
  std::vector<int64_t> out;
  if (!ops::BroadcastShapes(x.shape, shape, &out)) {
    return ctx.Error(ShapeText(x.shape) + " does not broadcast to " + ShapeText(shape));
  }
  ctx.node().inputs.resize(1);
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

Status EvalExpand(OpContext& ctx) {
  const auto& in = ctx.in(0).shape;
  const size_t lead = ctx.out(0).shape.size() - in.size();
  // The input's dimensions align with the output's last ones; a leading one reads index 0.
  std::vector<int64_t> padded(lead, 1);
  padded.insert(padded.end(), in.begin(), in.end());
  Gathered(
      ctx, padded, [&](size_t d, int64_t o) { return padded[d] == 1 ? 0 : o; }, nullptr);
  return Status::Ok();
}

Status InferTile(OpContext& ctx) {
  const Value& x = ctx.in(0);
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ctx.ConstInts(1, "repeats"));
  if (repeats.size() != x.shape.size()) {
    return ctx.Error("repeats has " + std::to_string(repeats.size()) + " values for " +
                     ShapeText(x.shape));
  }
  std::vector<int64_t> out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    if (repeats[d] < 0) return ctx.Error("a repeat is negative");
    if (out[d] != 0 && repeats[d] > (int64_t{1} << 40) / out[d]) {
      return ctx.Error("the output is too large");
    }
    out[d] *= repeats[d];
  }
  ctx.node().inputs.resize(1);
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

Status EvalTile(OpContext& ctx) {
  const auto& in = ctx.in(0).shape;
  Gathered(
      ctx, in, [&](size_t d, int64_t o) { return o % in[d]; }, nullptr);
  return Status::Ok();
}

Status InferSplit(OpContext& ctx) {
  Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = ops::NormAxis(n.Int("axis", 0), rank);
  if (axis < 0) return ctx.Error("axis out of range for " + ShapeText(x.shape));
  const int64_t dim = x.shape[axis];
  const int64_t parts = ctx.num_outputs();
  std::vector<int64_t> split;
  if (ctx.opset() < 13) {
    if (ctx.num_inputs() > 1) return ctx.Error("split is an attribute before opset 13");
    split = n.Ints("split");
  } else {
    if (n.Has("split")) return ctx.Error("split is an input since opset 13");
    if (ctx.has_input(1)) {
      CT_ASSIGN_OR_RETURN(split, ctx.ConstInts(1, "split"));
    }
  }
  if (n.Has("num_outputs")) {
    if (ctx.opset() < 18) return ctx.Error("num_outputs is an attribute since opset 18");
    if (!split.empty()) return ctx.Error("both split and num_outputs are given");
    if (n.Int("num_outputs", 0) != parts) {
      return ctx.Error("num_outputs is " + std::to_string(n.Int("num_outputs", 0)) +
                       " but the node has " + std::to_string(parts) + " outputs");
    }
  }
  if (split.empty()) {
    // Equal parts; since opset 18 the last may be smaller (ceil(dim / parts) each).
    const int64_t each = ctx.opset() >= 18 ? (dim + parts - 1) / parts : dim / parts;
    if (ctx.opset() < 18 && each * parts != dim) {
      return ctx.Error("axis " + std::to_string(axis) + " of " + ShapeText(x.shape) +
                       " does not split into " + std::to_string(parts) + " equal parts");
    }
    for (int64_t i = 0, left = dim; i < parts; ++i) {
      split.push_back(std::min(each, left));
      left -= split.back();
    }
  }
  if (static_cast<int64_t>(split.size()) != parts) {
    return ctx.Error("split has " + std::to_string(split.size()) + " sizes for " +
                     std::to_string(parts) + " outputs");
  }
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0) return ctx.Error("a split size is negative");
    sum += s;
  }
  if (sum != dim) {
    return ctx.Error("the split sizes add up to " + std::to_string(sum) + ", not axis " +
                     std::to_string(axis) + "'s " + std::to_string(dim));
  }
  n.attrs.clear();
  n.SetInt("axis", axis);
  n.SetInts("split", split);
  n.inputs.resize(1);
  for (int64_t i = 0; i < parts; ++i) {
    std::vector<int64_t> out = x.shape;
    out[axis] = split[i];
    if (n.outputs[i] >= 0) ctx.SetOutput(static_cast<int>(i), x.dtype, out);
  }
  return Status::Ok();
}

Status EvalSplit(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const int64_t axis = ctx.node().Int("axis", 0);
  const std::vector<int64_t> split = ctx.node().Ints("split");
  int64_t outer = 1, inner = DTypeBytes(x.dtype);
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t row = x.shape[axis] * inner;
  int64_t at = 0;
  for (size_t i = 0; i < split.size(); ++i) {
    const int64_t chunk = split[i] * inner;
    if (ctx.node().outputs[i] >= 0) {
      std::vector<uint8_t>& y = ctx.OutBytes(static_cast<int>(i));
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(y.data() + o * chunk, x.data->data() + o * row + at, chunk);
      }
    }
    at += chunk;
  }
  return Status::Ok();
}

Status InferPad(OpContext& ctx) {
  Node& n = ctx.node();
  const Value& x = ctx.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const std::string mode = n.String("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      !(mode == "wrap" && ctx.opset() >= 19)) {
    return ctx.Error("mode '" + mode + "' is not supported (constant, reflect, edge" +
                     (ctx.opset() >= 19 ? ", wrap)" : ")"));
  }
  std::vector<int64_t> pads;
  double value = 0;
  if (ctx.opset() < 11) {
    if (ctx.num_inputs() > 1) return ctx.Error("pads are an attribute before opset 11");
    pads = n.Ints("pads");
    value = n.Float("value", 0.0);
  } else {
    if (n.Has("pads") || n.Has("value")) return ctx.Error("pads are inputs since opset 11");
    CT_ASSIGN_OR_RETURN(pads, ctx.ConstInts(1, "pads"));
    if (ctx.has_input(2)) {
      const Value& v = ctx.in(2);
      if (!v.is_const()) {
        return ctx.Error("constant_value ('" + v.name +
                         "') must be a constant known at compile time");
      }
      if (v.dtype != x.dtype) return ctx.Error("constant_value's type differs from the data's");
      if (v.elements() != 1) return ctx.Error("constant_value must hold one element");
      value = v.AsDoubles()[0];
    }
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    CT_ASSIGN_OR_RETURN(axes, ctx.ConstInts(3, "axes"));
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) {
    return ctx.Error("pads has " + std::to_string(pads.size()) + " values for " +
                     std::to_string(axes.size()) + " axes (a begin and an end each)");
  }
  std::vector<int64_t> full(2 * static_cast<size_t>(rank), 0);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t d = ops::NormAxis(axes[i], rank);
    if (d < 0 || seen[d]) return ctx.Error("bad or repeated axis " + std::to_string(axes[i]));
    seen[d] = true;
    full[d] = pads[i];
    full[d + rank] = pads[i + axes.size()];
  }
  std::vector<int64_t> out = x.shape;
  for (int64_t d = 0; d < rank; ++d) {
    out[d] += full[d] + full[d + rank];
    if (out[d] < 0) return ctx.Error("the pads crop dimension " + std::to_string(d) + " below 0");
    const bool pads_d = full[d] > 0 || full[d + rank] > 0;
    if (pads_d && mode != "constant" && x.shape[d] == 0) {
      return ctx.Error("mode '" + mode + "' pads an empty dimension");
    }
    if (pads_d && mode == "reflect" && (full[d] >= x.shape[d] || full[d + rank] >= x.shape[d])) {
      return ctx.Error("reflect pads of dimension " + std::to_string(d) +
                       " must be smaller than its size " + std::to_string(x.shape[d]));
    }
  }
  n.attrs.clear();
  n.SetInts("pads", full);
  n.SetString("mode", mode);
  n.SetFloat("value", value);
  n.inputs.resize(1);
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

namespace ops {

std::vector<uint8_t> ScalarBytes(DType t, double v) {
  std::vector<uint8_t> out(static_cast<size_t>(DTypeBytes(t)));
  PutElement(t, out.data(), 0, v, static_cast<int64_t>(v));
  return out;
}

}  // namespace ops

namespace {

// Pad's source index along one dimension of size `dim` for output index `o` (-1: the constant).
int64_t PadSource(const std::string& mode, int64_t o, int64_t begin, int64_t dim) {
  int64_t i = o - begin;
  if (i >= 0 && i < dim) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : dim - 1;
  if (mode == "wrap") return ((i % dim) + dim) % dim;
  // reflect: the edge element is not repeated (pads are smaller than dim, so one bounce).
  if (dim == 1) return 0;
  return i < 0 ? -i : 2 * (dim - 1) - i;
}

Status EvalPad(OpContext& ctx) {
  const Value& x = ctx.in(0);
  const std::vector<int64_t> pads = ctx.node().Ints("pads");
  const std::string mode = ctx.node().String("mode", "constant");
  const std::vector<uint8_t> bytes = ops::ScalarBytes(x.dtype, ctx.node().Float("value", 0.0));
  Gathered(
      ctx, x.shape, [&](size_t d, int64_t o) { return PadSource(mode, o, pads[d], x.shape[d]); },
      bytes.data());
  return Status::Ok();
}

}  // namespace

const OpDef kExpand = {"Expand", {}, 2, 2, 1, InferExpand, EvalExpand, nullptr, false, 8};
const OpDef kTile = {"Tile", {}, 2, 2, 1, InferTile, EvalTile, nullptr, false, 6};
const OpDef kSplit = {"Split",  {attr::Int("axis"), attr::Ints("split"), attr::Int("num_outputs")},
                      1,        2,
                      64,       InferSplit,
                      EvalSplit};
const OpDef kPad = {"Pad",   {attr::String("mode"), attr::Ints("pads"), attr::Float("value")},
                    1,       4,
                    1,       InferPad,
                    EvalPad, nullptr,
                    false,   2};

}  // namespace crosstune::model
