// The generated kernels' table (kernels.h): one row per operator.
#include "kernels/kernels_impl.h"

namespace crosstune::model {
namespace {

struct KernelRow {
  const char* op;
  kernels::Generator generate;
  // The kernel is written for its arguments' own element types (copies, layout moves,
  // arithmetic, comparisons, logic, Where, Gather, ...); the others compute float32 only.
  bool any_type = false;
};

const KernelRow kKernels[] = {
    {"Reshape", kernels::Copy, true},
    {"Flatten", kernels::Copy, true},
    {"Squeeze", kernels::Copy, true},
    {"Unsqueeze", kernels::Copy, true},
    {"Identity", kernels::Copy, true},
    {"Dropout", kernels::Copy, true},
    {"Cast", kernels::Cast, true},
    {"CastLike", kernels::Cast, true},  // (never reached: Infer makes every CastLike a Cast)
    {"QuantizeLinear", kernels::Quantize, true},
    {"DequantizeLinear", kernels::Quantize, true},
    {"DynamicQuantizeLinear", kernels::DynamicQuantize, true},
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
    {"Round", kernels::Unary},
    {"Sin", kernels::Unary},
    {"Cos", kernels::Unary},
    {"Tan", kernels::Unary},
    {"Asin", kernels::Unary},
    {"Acos", kernels::Unary},
    {"Atan", kernels::Unary},
    {"Sinh", kernels::Unary},
    {"Cosh", kernels::Unary},
    {"Asinh", kernels::Unary},
    {"Acosh", kernels::Unary},
    {"Atanh", kernels::Unary},
    {"Ceil", kernels::Unary},
    {"Softplus", kernels::Unary},
    {"Softsign", kernels::Unary},
    {"Elu", kernels::Unary},
    {"Selu", kernels::Unary},
    {"HardSigmoid", kernels::Unary},
    {"HardSwish", kernels::Unary},
    {"Gelu", kernels::Unary},
    {"Add", kernels::Broadcast, true},
    {"Sub", kernels::Broadcast, true},
    {"Mul", kernels::Broadcast, true},
    {"Div", kernels::Broadcast, true},
    {"Sum", kernels::Broadcast, true},
    {"Pow", kernels::Broadcast, true},
    {"Min", kernels::Broadcast, true},
    {"Max", kernels::Broadcast, true},
    {"Mean", kernels::Broadcast, true},
    {"PRelu", kernels::Broadcast, true},
    {"Mod", kernels::Broadcast, true},
    {"Equal", kernels::Broadcast, true},
    {"Less", kernels::Broadcast, true},
    {"Greater", kernels::Broadcast, true},
    {"LessOrEqual", kernels::Broadcast, true},
    {"GreaterOrEqual", kernels::Broadcast, true},
    {"Not", kernels::Broadcast, true},
    {"And", kernels::Broadcast, true},
    {"Or", kernels::Broadcast, true},
    {"Xor", kernels::Broadcast, true},
    {"Where", kernels::Broadcast, true},
    {"BatchNormalization", kernels::BatchNorm},
    {"MaxPool", kernels::Pool},
    {"AveragePool", kernels::Pool},
    {"GlobalAveragePool", kernels::GlobalAvgPool},
    {"Concat", kernels::Concat, true},
    {"Transpose", kernels::Transpose, true},
    {"Slice", kernels::Slice, true},
    {"Gather", kernels::Gather, true},
    {"Expand", kernels::Remap, true},
    {"Tile", kernels::Remap, true},
    {"Pad", kernels::Remap, true},
    {"Split", kernels::Split, true},
    {"Resize", kernels::Resize},
    {"Upsample", kernels::Resize},
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
    {"RMSNormalization", kernels::LayerNorm},
    {"Einsum", kernels::Einsum, true},
    {"ConvInteger", kernels::QuantConv, true},
    {"QLinearConv", kernels::QuantConv, true},  // float32 and float64 (its Infer)
    {"Conv2dInt8", kernels::Conv2dInt8, true},
    {"InstanceNormalization", kernels::InstanceNorm},
    {"LRN", kernels::Lrn},
    {"Gemm", kernels::MatrixProduct},
    {"MatMul", kernels::MatrixProduct},
    {"MatMulInteger", kernels::MatrixProduct, true},
    {"QLinearMatMul", kernels::MatrixProduct, true},
    {"Dense", kernels::MatrixProduct},
    {"PackedMatMul", kernels::MatrixProduct},
    {"Conv", kernels::DirectConv},
    {"ConvTranspose", kernels::ConvTranspose},
    {"Attention", kernels::Attention, true},
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
  for (const KernelRow& r : kKernels) {
    if (n.op != r.op || r.any_type) continue;
    for (int o : n.outputs) {
      if (g.values[o].dtype != DType::kFloat32) {
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
