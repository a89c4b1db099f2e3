// Comparisons and logic with numpy broadcasting: Equal, Less, Greater, LessOrEqual,
// GreaterOrEqual (any element type the importer takes, both inputs of one type; a bool output),
// Not, And, Or, Xor (bool), and Where (a bool condition choosing between two values of one type).
#include <cstring>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace {

// The output shape all inputs broadcast to, or an error naming the two that do not.
Status BroadcastAll(OpContext& ctx, std::vector<int64_t>* shape) {
  *shape = ctx.in(0).shape;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    std::vector<int64_t> out;
    if (!ops::BroadcastShapes(*shape, ctx.in(i).shape, &out)) {
      return ctx.Error("shapes " + ShapeText(*shape) + " and " + ShapeText(ctx.in(i).shape) +
                       " do not broadcast");
    }
    *shape = out;
  }
  return Status::Ok();
}

Status InferCompare(OpContext& ctx) {
  if (ctx.in(0).dtype != ctx.in(1).dtype) return ctx.Error("inputs of different types");
  std::vector<int64_t> shape;
  CT_RETURN_IF_ERROR(BroadcastAll(ctx, &shape));
  ctx.SetOutput(0, DType::kBool, shape);
  return Status::Ok();
}

Status InferLogic(OpContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.in(i).dtype != DType::kBool) return ctx.Error("inputs must be bool");
  }
  std::vector<int64_t> shape;
  CT_RETURN_IF_ERROR(BroadcastAll(ctx, &shape));
  ctx.SetOutput(0, DType::kBool, shape);
  return Status::Ok();
}

Status InferWhere(OpContext& ctx) {
  if (ctx.in(0).dtype != DType::kBool) return ctx.Error("the condition must be bool");
  if (ctx.in(1).dtype != ctx.in(2).dtype) return ctx.Error("X and Y are of different types");
  std::vector<int64_t> shape;
  CT_RETURN_IF_ERROR(BroadcastAll(ctx, &shape));
  ctx.SetOutput(0, ctx.in(1).dtype, shape);
  return Status::Ok();
}

template <typename F>
Status EvalBool(OpContext& ctx, F f) {
  const auto& shape = ctx.out(0).shape;
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> v;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    idx.push_back(ops::BroadcastIndex(ctx.in(i).shape, shape));
    v.push_back(ctx.in(i).AsDoubles());
  }
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  for (size_t e = 0; e < y.size(); ++e) {
    const double a = v[0][idx[0][e]];
    const double b = ctx.num_inputs() > 1 ? v[1][idx[1][e]] : 0;
    y[e] = f(a, b) ? 1 : 0;
  }
  return Status::Ok();
}

Status EvalEqual(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a == b; });
}
Status EvalLess(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a < b; });
}
Status EvalGreater(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a > b; });
}
Status EvalLessOrEqual(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a <= b; });
}
Status EvalGreaterOrEqual(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a >= b; });
}
Status EvalNot(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double) { return a == 0; });
}
Status EvalAnd(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a != 0 && b != 0; });
}
Status EvalOr(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return a != 0 || b != 0; });
}
Status EvalXor(OpContext& ctx) {
  return EvalBool(ctx, [](double a, double b) { return (a != 0) != (b != 0); });
}

Status EvalWhere(OpContext& ctx) {
  const auto& shape = ctx.out(0).shape;
  const size_t es = static_cast<size_t>(DTypeBytes(ctx.out(0).dtype));
  const auto ic = ops::BroadcastIndex(ctx.in(0).shape, shape);
  const auto ix = ops::BroadcastIndex(ctx.in(1).shape, shape);
  const auto iy = ops::BroadcastIndex(ctx.in(2).shape, shape);
  std::vector<uint8_t>& out = ctx.OutBytes(0);
  const uint8_t* c = ctx.in(0).data->data();
  const uint8_t* x = ctx.in(1).data->data();
  const uint8_t* y = ctx.in(2).data->data();
  for (size_t e = 0; e < ic.size(); ++e) {
    const uint8_t* from = c[ic[e]] ? x + ix[e] * es : y + iy[e] * es;
    std::memcpy(out.data() + e * es, from, es);
  }
  return Status::Ok();
}

double LogicFlops(const Graph& g, const Node& n) {
  return static_cast<double>(g.values[n.outputs[0]].elements());
}

}  // namespace

const OpDef kEqual = {"Equal", {}, 2, 2, 1, InferCompare, EvalEqual, LogicFlops};
const OpDef kLess = {"Less", {}, 2, 2, 1, InferCompare, EvalLess, LogicFlops};
const OpDef kGreater = {"Greater", {}, 2, 2, 1, InferCompare, EvalGreater, LogicFlops};
const OpDef kLessOrEqual = {"LessOrEqual",   {},         2,     2, 1, InferCompare,
                            EvalLessOrEqual, LogicFlops, false, 12};
const OpDef kGreaterOrEqual = {"GreaterOrEqual",   {},         2,     2, 1, InferCompare,
                               EvalGreaterOrEqual, LogicFlops, false, 12};
const OpDef kNot = {"Not", {}, 1, 1, 1, InferLogic, EvalNot, LogicFlops, false, 1};
const OpDef kAnd = {"And", {}, 2, 2, 1, InferLogic, EvalAnd, LogicFlops};
const OpDef kOr = {"Or", {}, 2, 2, 1, InferLogic, EvalOr, LogicFlops};
const OpDef kXor = {"Xor", {}, 2, 2, 1, InferLogic, EvalXor, LogicFlops};
const OpDef kWhere = {"Where", {}, 3, 3, 1, InferWhere, EvalWhere, LogicFlops, false, 9};

}  // namespace crosstune::model
