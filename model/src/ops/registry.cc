// The operator table (ops.h) and what runs an OpDef on a node.
#include <algorithm>
#include <cstring>
#include <set>

#include "crosstune/checked_math.h"
#include "crosstune/model/ops.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

// One row per operator.
const OpDef* const kOps[] = {
    &kConv,
    &kFusedConv,
    &kConvTranspose,
    &kBatchNormalization,
    &kLrn,
    &kRelu,
    &kSigmoid,
    &kLeakyRelu,
    &kClip,
    &kAbs,
    &kNeg,
    &kExp,
    &kLog,
    &kSqrt,
    &kReciprocal,
    &kTanh,
    &kErf,
    &kFloor,
    &kRound,
    &kSin,
    &kCos,
    &kTan,
    &kAsin,
    &kAcos,
    &kAtan,
    &kSinh,
    &kCosh,
    &kAsinh,
    &kAcosh,
    &kAtanh,
    &kCeil,
    &kSoftplus,
    &kSoftsign,
    &kElu,
    &kSelu,
    &kHardSigmoid,
    &kHardSwish,
    &kGelu,
    &kAdd,
    &kSub,
    &kMul,
    &kDiv,
    &kSum,
    &kPow,
    &kMin,
    &kMax,
    &kMean,
    &kPRelu,
    &kMod,
    &kMaxPool,
    &kAveragePool,
    &kGlobalAvgPool,
    &kConcat,
    &kFlatten,
    &kReshape,
    &kTranspose,
    &kSqueeze,
    &kUnsqueeze,
    &kGemm,
    &kMatMul,
    &kDense,
    &kPackedMatMul,
    &kSoftmax,
    &kLogSoftmax,
    &kReduceSum,
    &kReduceMean,
    &kReduceMax,
    &kReduceMin,
    &kReduceProd,
    &kReduceL1,
    &kReduceL2,
    &kReduceLogSum,
    &kReduceLogSumExp,
    &kReduceSumSquare,
    &kLayerNormalization,
    &kRMSNormalization,
    &kEinsum,
    &kConvInteger,
    &kQLinearConv,
    &kConv2dInt8,
    &kInstanceNormalization,
    &kDropout,
    &kIdentity,
    &kConstant,
    &kConstantOfShape,
    &kShape,
    &kRange,
    &kCast,
    &kCastLike,
    &kSize,
    &kSlice,
    &kGather,
    &kAttention,
    &kResize,
    &kUpsample,
    &kExpand,
    &kTile,
    &kSplit,
    &kPad,
    &kQuantizeLinear,
    &kDequantizeLinear,
    &kMatMulInteger,
    &kQLinearMatMul,
    &kDynamicQuantizeLinear,
    &kEqual,
    &kLess,
    &kGreater,
    &kLessOrEqual,
    &kGreaterOrEqual,
    &kNot,
    &kAnd,
    &kOr,
    &kXor,
    &kWhere,
    &kLayoutTransform,
};

}  // namespace

const OpDef* FindOp(const std::string& op) {
  for (const OpDef* d : kOps) {
    if (op == d->op) return d;
  }
  return nullptr;
}

std::vector<std::string> SupportedOps() {
  std::vector<std::string> out;
  for (const OpDef* d : kOps) out.emplace_back(d->op);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<OnnxOperator> OnnxOperators() {
  std::vector<OnnxOperator> out;
  for (const std::string& op : SupportedOps()) {
    const OpDef* d = FindOp(op);
    if (!d->from_passes) out.push_back({op, d->since_opset, d->until_opset});
  }
  return out;
}

Status OpContext::Error(const std::string& what) const {
  return Status(ErrorCode::kInvalidArgument, node_.op + " node '" + node_.name + "': " + what);
}

Expected<std::vector<int64_t>> OpContext::ConstInts(int i, const std::string& what) const {
  if (!has_input(i)) return Error(what + " is missing");
  const Value& v = in(i);
  if (!v.is_const()) {
    return Error(what + " ('" + v.name + "') must be a constant known at compile time");
  }
  if (v.dtype == DType::kFloat32 || v.dtype == DType::kFloat64) {
    return Error(what + " ('" + v.name + "') must be an integer tensor");
  }
  return v.AsInts();
}

void OpContext::SetOutput(int i, DType dtype, std::vector<int64_t> shape) {
  Value& v = out(i);
  v.dtype = dtype;
  v.shape = std::move(shape);
}

std::vector<float>& OpContext::OutFloats(int i) {
  float_outs_.emplace_back(i, std::vector<float>(static_cast<size_t>(out(i).elements())));
  return float_outs_.back().second;
}

std::vector<uint8_t>& OpContext::OutBytes(int i) {
  byte_outs_.emplace_back(i, std::vector<uint8_t>(static_cast<size_t>(out(i).bytes())));
  return byte_outs_.back().second;
}

void OpContext::Commit() {
  for (auto& [i, f] : float_outs_) {
    std::vector<uint8_t> bytes(f.size() * 4);
    if (!bytes.empty()) std::memcpy(bytes.data(), f.data(), bytes.size());
    out(i).data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  }
  for (auto& [i, b] : byte_outs_) {
    out(i).data = std::make_shared<const std::vector<uint8_t>>(std::move(b));
  }
  float_outs_.clear();
  byte_outs_.clear();
}

Status InferNode(Graph& g, Node& n) {
  const OpDef* def = FindOp(n.op);
  auto fail = [&](const std::string& what) {
    return Status(ErrorCode::kInvalidArgument, n.op + " node '" + n.name + "': " + what);
  };
  if (def == nullptr) return fail("operator " + n.op + " is not supported");
  // The opset range is checked on the file's nodes before import (onnx_import.cc): nodes the
  // importer writes itself (edge casts, com.microsoft's operators as ai.onnx ones) follow the
  // newest definitions at any opset.
  for (const auto& [key, attr] : n.attrs) {
    auto spec = std::find_if(def->attributes.begin(), def->attributes.end(),
                             [&key = key](const AttrSpec& a) { return a.name == key; });
    if (spec == def->attributes.end()) return fail("attribute '" + key + "' is not supported");
    // A tensor attribute without its tensor is a wrong kind too (only code makes one).
    if (attr.kind != spec->kind || (attr.kind == Attr::Kind::kTensor && !attr.tensor)) {
      return fail("attribute '" + key + "' is " + Attr::KindName(attr.kind) + ", " + n.op +
                  " takes " + Attr::KindName(spec->kind));
    }
  }
  int present = 0;
  for (int i : n.inputs) present += i >= 0 ? 1 : 0;
  if (static_cast<int>(n.inputs.size()) > def->max_inputs) {
    return fail("takes at most " + std::to_string(def->max_inputs) + " inputs, has " +
                std::to_string(n.inputs.size()));
  }
  if (n.inputs.empty() ? def->min_inputs > 0
                       : (n.inputs.size() < static_cast<size_t>(def->min_inputs) ||
                          n.inputs[0] < 0 || present < def->min_inputs)) {
    return fail("needs at least " + std::to_string(def->min_inputs) + " inputs");
  }
  if (n.outputs.empty()) return fail("has no output");
  if (static_cast<int>(n.outputs.size()) > def->max_outputs) {
    return fail("output " + std::to_string(def->max_outputs) + " ('" +
                g.values[n.outputs[def->max_outputs]].name + "') is not supported");
  }
  OpContext ctx(g, n);
  CT_RETURN_IF_ERROR(def->infer(ctx));
  // Whatever the operator computed, no output leaves with a shape that wraps or goes negative.
  for (int o : n.outputs) {
    const Value& v = g.values[o];
    auto bytes = CheckedBytes("output '" + v.name + "'", v.shape, v.dtype, kMaxCheckedSize);
    if (!bytes.ok()) {
      return Status(bytes.status().code(),
                    n.op + " node '" + n.name + "': " + bytes.status().message());
    }
  }
  return Status::Ok();
}

Status EvalNode(Graph& g, Node& n) {
  const OpDef* def = FindOp(n.op);
  if (def == nullptr || def->eval == nullptr) {
    return Status(ErrorCode::kInvalidArgument,
                  n.op + " node '" + n.name + "': cannot be evaluated on the host");
  }
  OpContext ctx(g, n);
  // Outputs of no elements need no arithmetic (and an operator's strides over an empty input
  // would divide by zero).
  bool empty = !n.outputs.empty();
  for (int o : n.outputs) empty = empty && g.values[o].elements() == 0;
  if (empty) {
    for (int o = 0; o < ctx.num_outputs(); ++o) ctx.OutBytes(o);
  } else {
    CT_RETURN_IF_ERROR(def->eval(ctx));
  }
  ctx.Commit();
  return Status::Ok();
}

bool CanFold(const Graph& g, const Node& n) {
  const OpDef* def = FindOp(n.op);
  if (def == nullptr || def->eval == nullptr) return false;
  if (def->folds_from_shapes) return true;
  for (int i : n.inputs) {
    if (i >= 0 && !g.values[i].is_const()) return false;
  }
  return true;
}

double NodeFlops(const Graph& g, const Node& n) {
  const OpDef* def = FindOp(n.op);
  return def && def->flops ? def->flops(g, n) : 0;
}

Expected<std::vector<Value>> Interpret(const Graph& graph, const std::vector<Value>& inputs) {
  Graph g = graph;  // weights are shared, not copied
  if (inputs.size() != g.inputs.size()) {
    return Status(ErrorCode::kInvalidArgument, "the graph has " + std::to_string(g.inputs.size()) +
                                                   " inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value& v = g.values[g.inputs[i]];
    if (inputs[i].dtype != v.dtype || inputs[i].shape != v.shape || !inputs[i].is_const() ||
        static_cast<int64_t>(inputs[i].data->size()) != v.bytes()) {
      return Status(ErrorCode::kInvalidArgument, "input '" + v.name + "' wants " +
                                                     DTypeName(v.dtype) + " " + ShapeText(v.shape));
    }
    v.data = inputs[i].data;
  }
  // Frees each value after its last use, so a whole network fits.
  std::vector<int> uses = g.UseCounts();
  for (Node& n : g.nodes) {
    CT_RETURN_IF_ERROR(EvalNode(g, n));
    for (int i : n.inputs) {
      if (i >= 0 && --uses[i] == 0 && !graph.values[i].is_const()) g.values[i].data.reset();
    }
  }
  std::vector<Value> out;
  for (int o : g.outputs) out.push_back(g.values[o]);
  return out;
}

Expected<std::vector<std::vector<float>>> Interpret(const Graph& g,
                                                    const std::vector<std::vector<float>>& inputs) {
  std::vector<Value> in;
  for (size_t i = 0; i < inputs.size() && i < g.inputs.size(); ++i) {
    Value v = g.values[g.inputs[i]];
    std::vector<uint8_t> bytes(inputs[i].size() * 4);
    if (!bytes.empty()) std::memcpy(bytes.data(), inputs[i].data(), bytes.size());
    v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    in.push_back(std::move(v));
  }
  if (in.size() != inputs.size()) {
    return Status(ErrorCode::kInvalidArgument, "the graph has " + std::to_string(g.inputs.size()) +
                                                   " inputs, got " + std::to_string(inputs.size()));
  }
  CT_ASSIGN_OR_RETURN(std::vector<Value> outs, Interpret(g, in));
  std::vector<std::vector<float>> out;
  for (const Value& v : outs) {
    if (v.dtype != DType::kFloat32) {
      return Status(ErrorCode::kInvalidArgument, "output '" + v.name + "' is not float32");
    }
    out.emplace_back(v.floats(), v.floats() + v.elements());
  }
  return out;
}

}  // namespace crosstune::model
