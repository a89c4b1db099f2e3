// The OpDefs of model/src/ops/*.cc (one row each in registry.cc), and helpers they share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/model/ops.h"

namespace crosstune::model {

extern const OpDef kConv, kFusedConv, kConvTranspose;                       // conv.cc
extern const OpDef kBatchNormalization, kInstanceNormalization, kLrn;       // norm.cc
extern const OpDef kRelu, kSigmoid, kLeakyRelu, kClip;                      // activation.cc
extern const OpDef kAbs, kNeg, kExp, kLog, kSqrt, kReciprocal;              // activation.cc
extern const OpDef kTanh, kErf, kFloor, kRound, kCeil, kSoftplus;           // activation.cc
extern const OpDef kSoftsign, kElu, kSelu, kHardSigmoid;                    // activation.cc
extern const OpDef kSin, kCos, kTan, kAsin, kAcos, kAtan;                   // activation.cc
extern const OpDef kSinh, kCosh, kAsinh, kAcosh, kAtanh;                    // activation.cc
extern const OpDef kHardSwish, kGelu;                                       // activation.cc
extern const OpDef kAdd, kSub, kMul, kDiv, kSum;                            // binary.cc
extern const OpDef kPow, kMin, kMax, kMean, kPRelu, kMod;                   // binary.cc
extern const OpDef kMaxPool, kAveragePool, kGlobalAvgPool;                  // pool.cc
extern const OpDef kConcat, kFlatten, kReshape, kTranspose;                 // shape_ops.cc
extern const OpDef kSqueeze, kUnsqueeze, kDropout, kIdentity;               // shape_ops.cc
extern const OpDef kConstant, kConstantOfShape, kShape, kRange;             // constant.cc
extern const OpDef kCast, kCastLike, kSize;                                 // cast.cc
extern const OpDef kSlice;                                                  // slice.cc
extern const OpDef kGather;                                                 // gather.cc
extern const OpDef kAttention;                                              // attention.cc
extern const OpDef kEinsum;                                                 // einsum.cc
extern const OpDef kConvInteger, kQLinearConv, kConv2dInt8;                 // conv_integer.cc
extern const OpDef kResize, kUpsample;                                      // resize.cc
extern const OpDef kExpand, kTile, kSplit, kPad;                            // expand.cc
extern const OpDef kQuantizeLinear, kDequantizeLinear;                      // quantize.cc
extern const OpDef kMatMulInteger, kQLinearMatMul, kDynamicQuantizeLinear;  // quantize.cc
extern const OpDef kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual;  // logic.cc
extern const OpDef kNot, kAnd, kOr, kXor, kWhere;                           // logic.cc
extern const OpDef kGemm, kMatMul, kDense, kPackedMatMul;                   // gemm.cc
extern const OpDef kSoftmax, kLogSoftmax;                                   // softmax.cc
extern const OpDef kReduceSum, kReduceMean, kReduceMax, kReduceMin;         // reduce.cc
extern const OpDef kReduceProd, kReduceL1, kReduceL2, kReduceLogSum;        // reduce.cc
extern const OpDef kReduceLogSumExp, kReduceSumSquare;                      // reduce.cc
extern const OpDef kLayerNormalization, kRMSNormalization;                  // reduce.cc
extern const OpDef kLayoutTransform;                                        // layout_transform.cc

namespace ops {

// Numpy's multidirectional broadcast of two shapes, or empty with ok=false.
bool BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>* out);
// For each element of `out_shape`, the index of the element of `in_shape` (broadcast into it).
std::vector<int64_t> BroadcastIndex(const std::vector<int64_t>& in_shape,
                                    const std::vector<int64_t>& out_shape);
// An axis in [-rank, rank) as [0, rank), or -1.
int64_t NormAxis(int64_t axis, int64_t rank);

// The spatial window of a 2-D conv or pool (NCHW): kernel, strides, dilations and pads
// (top, left, bottom, right) resolved from the attributes, auto_pad included; and the output size.
struct Window {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t oh = 0, ow = 0;
};
// Reads kernel_shape (or `kernel` when the node has none: a conv's weight), strides, dilations,
// pads, auto_pad and ceil_mode, writes them back explicit (auto_pad removed; ceil_mode kept), and
// computes the output size. Errors through ctx.
Status ResolveWindow(OpContext& ctx, int64_t h, int64_t w, std::vector<int64_t> kernel,
                     Window* out);
// From the explicit attributes ResolveWindow wrote and the output's NCHW (or blocked) shape.
Window WindowOf(const Node& n, const std::vector<int64_t>& out_shape);

// A node of blocked tensors (layout_plan.h) evaluated the plain way: a copy of the node without
// its layout attributes runs its operator's eval on these NCHW inputs (an empty shape: an input
// left out) and returns its output 0 of `out_shape`, for the caller to block again.
struct PlainTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
Expected<std::vector<float>> EvalPlain(OpContext& ctx, std::vector<PlainTensor> inputs,
                                       const std::vector<int64_t>& out_shape);
// A float32 value's elements.
std::vector<float> FloatsOf(const Value& v);
// A constant of one or `k` values (a quantization scale, zero point or bias per tensor or per
// output channel) as `k` doubles; empty when it holds another count.
std::vector<double> PerChannel(const Value& v, int64_t k);
// Every element of the constant is 0 (an absent input, v < 0, counts as 0).
bool AllZero(const Graph& g, int v);

// A Slice node after Infer (its `starts` and `steps` per dimension): the input element of the
// output's first element, and each output dimension's stride in the input (in elements).
struct SliceStrides {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};
SliceStrides SliceOf(const Node& n, const std::vector<int64_t>& in_shape);

// A reduction's index spaces over a compact tensor of `shape`: the dimensions kept and those
// reduced (`axes`), each with its element strides in the input.
struct ReduceShape {
  std::vector<int64_t> kept_dims, kept_strides, reduced_dims, reduced_strides;
};
ReduceShape SplitReduce(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes);

// MatMul's output shape (numpy's: batched, broadcast, 1-D operands promoted and dropped), or an
// error through ctx naming the shapes.
Status MatMulShape(const OpContext& ctx, const std::vector<int64_t>& a,
                   const std::vector<int64_t>& b, std::vector<int64_t>* out);

// An Attention node's sizes (ops/attention.cc), from its inputs' shapes and attributes.
struct AttentionDims {
  bool three_d = false;  // [batch, sequence, heads * head size] rather than 4-D
  int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 1, kv_len = 1, head = 1, v_head = 1;
  int64_t past = 0;  // past_key's length
};
AttentionDims AttentionOf(const Graph& g, const Node& n);
// The attention mask's element strides over the scores' [batch, q heads, q rows, keys] (0 where
// it broadcasts; its own last dimension always counts).
std::vector<int64_t> AttentionMaskStrides(const std::vector<int64_t>& mask, const AttentionDims& a);

// An Einsum node's loops (ops/einsum.cc): the output's dimensions and those summed over, and each
// input's element stride along each of them (0 where it broadcasts; a letter repeated in an
// input: the sum of its strides, its diagonal).
struct EinsumPlan {
  std::vector<int64_t> out_dims, sum_dims;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;  // [input][dimension]
};
Status PlanEinsum(const Graph& g, const Node& n, EinsumPlan* plan);

// The inputs of a ConvInteger or QLinearConv node by role (value ids; -1: absent).
struct QuantConvInputs {
  int x = -1, w = -1, x_zero = -1, w_zero = -1, x_scale = -1, w_scale = -1, y_scale = -1,
      y_zero = -1, bias = -1;
};
QuantConvInputs QuantConvOf(const Node& n);

// One element of type `t` holding `v` (converted as C converts; bool: v != 0), as bytes.
std::vector<uint8_t> ScalarBytes(DType t, double v);

}  // namespace ops
}  // namespace crosstune::model
