// The generated kernels' table (kernels.h): one row per operator.
#include <set>

#include "kernels/kernels_impl.h"

namespace crosstune::model {
namespace {

struct KernelRow {
  const char* op;
  kernels::Generator generate;
};

const KernelRow kKernels[] = {
    {"Reshape", kernels::Copy},
    {"Flatten", kernels::Copy},
    {"Squeeze", kernels::Copy},
    {"Unsqueeze", kernels::Copy},
    {"Identity", kernels::Copy},
    {"Dropout", kernels::Copy},
    {"Cast", kernels::Copy},      // to its own type only (CheckKernelTypes)
    {"CastLike", kernels::Copy},  // (never reached: Infer makes every CastLike a Cast)
    {"Relu", kernels::Unary},
    {"Sigmoid", kernels::Unary},
    {"LeakyRelu", kernels::Unary},
    {"Clip", kernels::Unary},
    {"Abs", kernels::Unary},
    {"Neg", kernels::Unary},
    {"Exp", kernels::Unary},
    {"Log", kernels::Unary},
    {"Sqrt", kernels::Unary},
    {"Reciprocal", kernels::Unary},
    {"Tanh", kernels::Unary},
    {"Erf", kernels::Unary},
    {"Floor", kernels::Unary},
    {"Ceil", kernels::Unary},
    {"Softplus", kernels::Unary},
    {"Softsign", kernels::Unary},
    {"Elu", kernels::Unary},
    {"Selu", kernels::Unary},
    {"HardSigmoid", kernels::Unary},
    {"HardSwish", kernels::Unary},
    {"Gelu", kernels::Unary},
    {"Add", kernels::Broadcast},
    {"Sub", kernels::Broadcast},
    {"Mul", kernels::Broadcast},
    {"Div", kernels::Broadcast},
    {"Sum", kernels::Broadcast},
    {"Pow", kernels::Broadcast},
    {"Min", kernels::Broadcast},
    {"Max", kernels::Broadcast},
    {"Mean", kernels::Broadcast},
    {"PRelu", kernels::Broadcast},
    {"Equal", kernels::Broadcast},
    {"Less", kernels::Broadcast},
    {"Greater", kernels::Broadcast},
    {"LessOrEqual", kernels::Broadcast},
    {"GreaterOrEqual", kernels::Broadcast},
    {"Not", kernels::Broadcast},
    {"And", kernels::Broadcast},
    {"Or", kernels::Broadcast},
    {"Xor", kernels::Broadcast},
    {"Where", kernels::Broadcast},
    {"BatchNormalization", kernels::BatchNorm},
    {"MaxPool", kernels::Pool},
    {"AveragePool", kernels::Pool},
    {"GlobalAveragePool", kernels::GlobalAvgPool},
    {"Concat", kernels::Concat},
    {"Transpose", kernels::Transpose},
    {"Slice", kernels::Slice},
    {"Gather", kernels::Gather},
    {"LayoutTransform", kernels::LayoutTransform},
    {"Softmax", kernels::Softmax},
    {"LogSoftmax", kernels::Softmax},
    {"ReduceSum", kernels::Reduce},
    {"ReduceMean", kernels::Reduce},
    {"ReduceMax", kernels::Reduce},
    {"ReduceMin", kernels::Reduce},
    {"ReduceProd", kernels::Reduce},
    {"ReduceL1", kernels::Reduce},
    {"ReduceL2", kernels::Reduce},
    {"ReduceLogSum", kernels::Reduce},
    {"ReduceLogSumExp", kernels::Reduce},
    {"ReduceSumSquare", kernels::Reduce},
    {"LayerNormalization", kernels::LayerNorm},
    {"LRN", kernels::Lrn},
    {"Gemm", kernels::MatrixProduct},
    {"MatMul", kernels::MatrixProduct},
    {"Dense", kernels::MatrixProduct},
    {"Conv", kernels::DirectConv},
    {"FusedConv", kernels::DirectConv},
};

}  // namespace

bool HasGeneratedKernel(const std::string& op) {
  for (const KernelRow& r : kKernels) {
    if (op == r.op) return true;
  }
  return false;
}

Status CheckKernelTypes(const Graph& g, const Node& n) {
  if (n.op == "Cast" && g.values[n.inputs[0]].dtype != g.values[n.outputs[0]].dtype) {
    return Status(ErrorCode::kInvalidArgument,
                  n.op + " node '" + n.name + "': a cast from " +
                      DTypeName(g.values[n.inputs[0]].dtype) + " to " +
                      DTypeName(g.values[n.outputs[0]].dtype) +
                      " is computed only where its input is a constant");
  }
  // The comparisons, logic, Where and Gather are written for their arguments' own element types.
  static const std::set<std::string> kTyped = {
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
      "And",   "Or",   "Xor",     "Where",       "Gather"};
  if (kTyped.count(n.op)) return Status::Ok();
  for (const KernelRow& r : kKernels) {
    if (n.op != r.op) continue;
    for (int o : n.outputs) {
      if (g.values[o].dtype != DType::kFloat32 && r.generate != kernels::Copy &&
          r.generate != kernels::Concat && r.generate != kernels::Transpose &&
          r.generate != kernels::Slice) {
        return Status(ErrorCode::kInvalidArgument,
                      n.op + " node '" + n.name + "': only float32 is compiled, not " +
                          DTypeName(g.values[o].dtype) + " (a " + DTypeName(g.values[o].dtype) +
                          " " + n.op + " runs only where its inputs are constants)");
      }
    }
  }
  return Status::Ok();
}

Expected<GeneratedKernel> GenerateKernel(const Graph& g, const Node& n) {
  for (const KernelRow& r : kKernels) {
    if (n.op != r.op) continue;
    CT_RETURN_IF_ERROR(CheckKernelTypes(g, n));
    std::string fn;
    for (char c : n.op) fn += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return r.generate(g, n, fn);
  }
  return Status(ErrorCode::kInvalidArgument,
                n.op + " node '" + n.name + "': no kernel compiles " + n.op);
}

}  // namespace crosstune::model
