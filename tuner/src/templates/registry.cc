// MakeTask: a kernel template by name. A template is one file (its task class and factory,
// declared in registry.h) plus one row of kTemplates.
#include "templates/registry.h"

#include "templates/common.h"

namespace crosstune::tuner {
namespace {

struct Entry {
  const char* name;
  const char* shape;
  const char* help;
  templates::TemplateFactory make;
};
constexpr Entry kTemplates[] = {
    {"matmul", "M,N,K[,groups[,packed_b]]",
     "C = A·B, fp32, row-major A [M, K] and B [K, N] (CPU; CUDA); with groups G (CPU), G "
     "products: A [..., M, K] whose leading dimensions multiply to G (or, with G 1, any A "
     "[..., K] of M rows), B [K, N] when G is 1, else [..., K, N] of G matrices, C as A; "
     "packed_b 1 (G 1): B packed in column panels one vector wide, [P, K, vw], as a model's "
     "constant weight is at compile time",
     templates::MakeMatmulTask},
    {"conv2d", "N,C,H,W,K,R,S,stride,pad[,residual[,activation[,layout]]]",
     "out = act(conv(data, weight) + bias (+ residual)), act 1 relu (the default), 2 relu6 or 0 "
     "none, fp32 "
     "NCHW, weight [K, C, R, S] (CPU; CUDA); layout 1: blocked NCHWc tensors and a packed "
     "weight, 2: NCHW data, blocked out (CPU)",
     templates::MakeConv2dTask},
    {"depthwise_conv2d", "N,C,H,W,R,S,stride,pad[,activation[,layout]]",
     "out = act(depthwise conv(data, weight) + bias), act 1 relu (the default), 2 relu6 or 0 "
     "none, fp32 NCHW, weight [C, 1, R, S] (CPU); layout 1: blocked NCHWc tensors, the weight "
     "packed [C/VW, 1, R, S, VW]",
     templates::MakeDepthwiseConv2dTask},
    {"dense", "B,IN,OUT", "out = data·weightᵀ + bias, fp32, weight [OUT, IN] (CPU; CUDA)",
     templates::MakeDenseTask},
    {"conv2d_int8", "N,C,H,W,K,R,S,stride,pad[,in_zero[,out_zero[,relu]]]",
     "out = saturate(rint((bias + conv(data, weight)) * scale) + out_zero), clamped below at "
     "out_zero with relu 1 (the default): uint8 NHWC data (padding reads in_zero) and out, int8 "
     "weight packed [K/L, R, S, C/4, L, 4] (L: the target's int32 lanes, zero past K and C), int32 "
     "bias and float32 scale per output channel, K rounded up to L (CPU)",
     templates::MakeConv2dInt8Task},
};

}  // namespace

const std::vector<TemplateInfo>& Templates() {
  static const std::vector<TemplateInfo> all = [] {
    std::vector<TemplateInfo> out;
    for (const Entry& e : kTemplates) out.push_back({e.name, e.shape, e.help});
    return out;
  }();
  return all;
}

const std::vector<std::string>& TemplateNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& e : kTemplates) out.push_back(e.name);
    return out;
  }();
  return names;
}

std::string templates::ShapeUsage(const std::string& name) {
  for (const Entry& e : kTemplates) {
    if (name == e.name) return name + " takes --shape " + e.shape;
  }
  return name + " takes --shape";
}

Expected<std::unique_ptr<Task>> MakeTask(const std::string& name, const std::vector<int64_t>& shape,
                                         const builder::Target& target,
                                         const TaskOptions& options) {
  if (options.threads < 1 || options.threads > 4096) {
    return Status(ErrorCode::kInvalidArgument,
                  "threads must be 1..4096, not " + std::to_string(options.threads));
  }
  for (const Entry& e : kTemplates) {
    if (name != e.name) continue;
    CT_ASSIGN_OR_RETURN(std::unique_ptr<Task> task, e.make(shape, target, options));
    // Before any host buffer is sized for them (the inputs, the reference's outputs).
    if (std::string big = templates::OversizedArgument(task->args()); !big.empty()) {
      return Status(ErrorCode::kInvalidArgument,
                    templates::ShapeUsage(name) + ": " + big + " would have over 2^32 elements");
    }
    return task;
  }
  std::string known;
  for (const auto& n : TemplateNames()) known += (known.empty() ? "" : ", ") + n;
  return Status(ErrorCode::kInvalidArgument,
                "unknown template '" + name + "' (templates: " + known + ")");
}

}  // namespace crosstune::tuner
