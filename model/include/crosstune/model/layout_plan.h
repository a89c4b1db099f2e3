// The layout plan: which activations stay blocked ("NCHWc", tuner/conv_layout.h) between layers,
// shared by task extraction (tasks.h) and the compiler (compile.h), so both name the same conv2d
// tasks (their layout field).
//
//   FusedConv that TaskOf makes a conv2d task   outputs blocked: layout 1 (ConvLayout::kBlocked)
//   (its weight and bias constants)             when its data is blocked, else 2 (kNchwToBlocked);
//                                               a residual is read blocked
//   MaxPool (4-D) of blocked data               outputs blocked
//   GlobalAveragePool (4-D) of blocked data     reads blocked, writes NCHW [N, C, 1, 1]
//   every other node                            reads and writes NCHW
//
// Where a producer and a consumer disagree, one LayoutTransform node (attributes "to": "blocked"
// or "nchw", "block": cb) converts the value once for all its consumers; a blocked graph output
// is converted back before it leaves. The decisions never depend on the block cb, so tasks
// extracted without a target are those a compile for any CPU target looks up.
//
// RewriteLayouts applies a plan for one cb: blocked values get values of their own
// (BlockedShape, named "<name>.blocked"), each conv's weight becomes a new constant packed with
// PackWeight (layout 1; Value::layout "packed:cb") and its bias is padded to PaddedChannels(K);
// the graph's input and output values keep their names and NCHW shapes. Rewritten nodes carry
// attributes the host interpreter and the kernels read:
//   FusedConv   layout (1 or 2), block, channels (C), filters (K)
//   MaxPool     block, channels          (blocked in and out)
//   GlobalAveragePool  block, channels   (blocked in, NCHW out)
//
// int8 convs keep their own layout, outside the plan: a QLinearConv (uint8 data and output, int8
// weight of zero point 0, constant scales, one group, no dilation, the same stride and pad on
// both axes; what fuse_qdq_conv makes of a QDQ model's convs) is a conv2d_int8 task
// (Int8ConvShape: N,C,H,W,K,R,S,stride,pad,x_zero,y_zero,0), and RewriteInt8Convs makes each
// one the template takes on the target a Conv2dInt8 node (attribute "shape": the task's) of
// NHWC uint8 data and output, its weight packed with PackInt8Weight (Value::layout "int8:l"),
// its bias less x_zero times the weight's sums (int32) and its scales x_scale * w_scale / y_scale
// (float32), both padded to the packed channels. A Transpose to NHWC precedes it and one back to
// NCHW follows; a conv reading another's output reads its NHWC value, so the pair between them
// goes. Elementwise nodes whose 4-D operands all have NHWC values (DequantizeLinear and
// QuantizeLinear of one scale and zero point; Add, Sub, Mul, Relu of same-shape operands or
// one-element constants: a residual block's add) compute on those too, so an int8 ResNet keeps
// NHWC from its first conv to its global pool.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/model/graph.h"
#include "crosstune/status.h"

namespace crosstune::model {

// Whether the compiler keeps activations blocked (the plan above) or NCHW everywhere (every conv
// layout 0, no transforms: the compiler before blocked layouts, to compare against).
enum class Layouts { kBlocked, kNchw };
// "blocked" / "nchw"; kInvalidArgument naming both for anything else.
Expected<Layouts> ParseLayouts(const std::string& text);
const char* LayoutsName(Layouts l);

struct LayoutPlan {
  std::vector<bool> blocked;      // per value: computed (and stored) blocked
  std::vector<int64_t> conv;      // per node: its tuner::ConvLayout (0 for every non-conv2d node)
  std::vector<bool> reads_block;  // per node: reads its data input blocked
};

// The plan for a graph after its passes; with kNchw nothing is blocked.
LayoutPlan PlanLayouts(const Graph& g, Layouts layouts = Layouts::kBlocked);

// Rewrites the graph to the plan with block cb (see above). kInvalidArgument when a value the
// plan blocks is not 4-D float32.
Status RewriteLayouts(Graph& g, const LayoutPlan& plan, int64_t cb);

// conv2d_int8's shape for a QLinearConv it can compute (above), else nullopt.
std::optional<std::vector<int64_t>> Int8ConvShape(const Graph& g, const Node& n);
// Rewrites each such QLinearConv whose task the template makes for `target` and `threads`.
// kInvalidArgument when a folded bias overflows int32.
Status RewriteInt8Convs(Graph& g, const builder::Target& target, int threads);

// Each MatMul whose task is the matmul template's with a packed B (TaskOf: a constant [K, N]
// weight under an A of three or more dimensions), where the template makes that task for `target`
// and `threads`, becomes a PackedMatMul: its weight is replaced by the weight's column panels
// (tuner/matmul_layout.h), packed here once (a weight two nodes share, once), so the kernel packs
// nothing per call; the node keeps K, N and the panels' width as attributes k, n and vw. Where
// the template does not make it (a CUDA target) the MatMul stays, a generated kernel.
Status PackMatmulWeights(Graph& g, const builder::Target& target, int threads);

// The LayoutTransform nodes' attribute "to".
inline constexpr const char* kToBlocked = "blocked";
inline constexpr const char* kToNchw = "nchw";

}  // namespace crosstune::model
