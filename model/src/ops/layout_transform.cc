// LayoutTransform (layout_plan.h): a 4-D float32 tensor between NCHW and blocked (NCHWc,
// tuner/conv_layout.h). Attributes: to ("blocked" or "nchw"), block (cb), channels (C, the NCHW
// side's channel count). Not an ONNX operator: RewriteLayouts inserts it.
#include "crosstune/model/layout_plan.h"
#include "crosstune/tuner/conv_layout.h"
#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

Status InferLayoutTransform(OpContext& ctx) {
  const Node& n = ctx.node();
  const std::string to = n.String("to", "");
  const int64_t cb = n.Int("block", 0), c = n.Int("channels", 0);
  const Value& x = ctx.in(0);
  if (to != kToBlocked && to != kToNchw) return ctx.Error("'to' must be blocked or nchw");
  if (cb < 1 || c < 1) return ctx.Error("'block' and 'channels' must be positive");
  if (x.dtype != DType::kFloat32) return ctx.Error("only float32 is supported");
  if (to == kToBlocked) {
    if (x.shape.size() != 4 || x.shape[1] != c) {
      return ctx.Error("data must be NCHW of " + std::to_string(c) + " channels, is " +
                       ShapeText(x.shape));
    }
    ctx.SetOutput(0, DType::kFloat32, tuner::BlockedShape(x.shape, cb));
    return Status::Ok();
  }
  if (x.shape.size() != 5 || x.shape[4] != cb || x.shape[1] != tuner::PaddedChannels(c, cb) / cb) {
    return ctx.Error("data must be blocked " +
                     ShapeText(tuner::BlockedShape({x.shape[0], c, 1, 1}, cb)) + " is " +
                     ShapeText(x.shape));
  }
  ctx.SetOutput(0, DType::kFloat32, {x.shape[0], c, x.shape[2], x.shape[3]});
  return Status::Ok();
}

Status EvalLayoutTransform(OpContext& ctx) {
  const Node& n = ctx.node();
  const int64_t cb = n.Int("block", 1), c = n.Int("channels", 0);
  const auto& x = ctx.in(0).shape;
  const int64_t hw = x[2] * x[3];
  ctx.OutFloats(0) = n.String("to", "") == kToBlocked
                         ? tuner::ToBlocked(ops::FloatsOf(ctx.in(0)), x[0], c, hw, cb)
                         : tuner::FromBlocked(ops::FloatsOf(ctx.in(0)), x[0], c, hw, cb);
  return Status::Ok();
}

}  // namespace

const OpDef kLayoutTransform = {"LayoutTransform",
                                {attr::String("to"), attr::Int("block"), attr::Int("channels")},
                                1,
                                1,
                                1,
                                InferLayoutTransform,
                                EvalLayoutTransform,
                                nullptr,
                                false,
                                kMinOpsetDefault,
                                /*from_passes=*/true};

}  // namespace crosstune::model
