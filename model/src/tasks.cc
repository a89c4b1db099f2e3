// Task extraction (tasks.h).
#include "crosstune/model/tasks.h"

#include <algorithm>
#include <map>
#include <utility>

#include "crosstune/tuner/task.h"

namespace crosstune::model {
namespace {

bool Uniform(const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x != v[0]) return false;
  }
  return true;
}

}  // namespace

std::optional<NodeTask> TaskOf(const Graph& g, const Node& n) {
  return TaskOf(g, n, n.Int("layout", 0));
}

std::optional<NodeTask> TaskOf(const Graph& g, const Node& n, int64_t conv_layout) {
  if (n.op == "Dense") {
    const auto& x = g.values[n.inputs[0]].shape;
    const auto& w = g.values[n.inputs[1]].shape;
    return NodeTask{"dense", {x[0], x[1], w[0]}, {}};
  }
  if (n.op == "PackedMatMul") {
    const int64_t k = n.Int("k", 1);
    return NodeTask{
        "matmul", {NumElements(g.values[n.inputs[0]].shape) / k, n.Int("n", 1), k, 1, 1}, {}};
  }
  if (n.op == "MatMul" && n.inputs.size() == 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0) {
    // fp32 A [..., K] of M rows times a 2-D B [K, N] (a transformer's activations times a
    // weight), or A [..., M, K] times B [..., K, N] with the same leading dimensions (attention's
    // batched products, G of them): the matmul template, G its fourth field. A constant B under
    // an A of three or more dimensions is packed at compile time (PackMatmulWeights: a
    // PackedMatMul node, the fifth field 1). Broadcast leading dimensions are generated kernels.
    const auto& a = g.values[n.inputs[0]];
    const auto& b = g.values[n.inputs[1]];
    const size_t ra = a.shape.size(), rb = b.shape.size();
    if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32 || ra < 2 || rb < 2 ||
        a.shape[ra - 1] != b.shape[rb - 2]) {
      return std::nullopt;
    }
    const int64_t k = b.shape[rb - 2], cols = b.shape[rb - 1];
    if (rb == 2) {
      const int64_t rows = NumElements(a.shape) / k;
      if (ra == 2) return NodeTask{"matmul", {rows, cols, k}, {}};
      if (b.is_const()) return NodeTask{"matmul", {rows, cols, k, 1, 1}, {}};
      return NodeTask{"matmul", {rows, cols, k, 1}, {}};
    }
    if (ra != rb || !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())) {
      return std::nullopt;
    }
    const int64_t groups = NumElements(b.shape) / (k * cols);
    return NodeTask{"matmul", {a.shape[ra - 2], cols, k, groups}, {}};
  }
  std::optional<std::vector<int64_t>> int8;
  if (n.op == "Conv2dInt8") {
    int8 = n.Ints("shape");
  } else {
    int8 = Int8ConvShape(g, n);
  }
  if (int8) {
    std::vector<int64_t> tuned = *int8;
    if (tuned.size() > 10) tuned[9] = tuned[10] = 0;
    return NodeTask{"conv2d_int8", *int8, tuned};
  }
  if (n.op != "FusedConv") return std::nullopt;
  // Blocked and NCHW data keep N, H and W at 0, 2 and 3, a packed weight R and S at 2 and 3; a
  // rewritten conv (layout_plan.h) keeps its C and K in attributes.
  const auto& x = g.values[n.inputs[0]].shape;
  const auto& w = g.values[n.inputs[1]].shape;
  const int64_t c = n.Int("channels", x[1]), k = n.Int("filters", w[0]);
  const auto strides = n.Ints("strides"), pads = n.Ints("pads");
  if (n.Ints("dilations") != std::vector<int64_t>{1, 1} || !Uniform(strides) || !Uniform(pads)) {
    return std::nullopt;
  }
  const bool residual = n.inputs.size() > 3 && n.inputs[3] >= 0;
  // The templates' activation field: 0 none, 1 relu, 2 relu6.
  const std::string activation = n.String("activation", "none");
  const int64_t act = activation == "relu6" ? 2 : activation == "relu" ? 1 : 0;
  const int64_t group = n.Int("group", 1);
  if (group == 1) {
    std::vector<int64_t> shape = {x[0], c, x[2], x[3], k, w[2], w[3], strides[0], pads[0]};
    if (residual || act != 1 || conv_layout != 0) shape.push_back(residual ? 1 : 0);
    if (act != 1 || conv_layout != 0) shape.push_back(act);
    if (conv_layout != 0) shape.push_back(conv_layout);
    return NodeTask{"conv2d", shape, {}};
  }
  // Depthwise: its weight [C, 1, R, S], or packed (layout 1) [C/cb, 1, R, S, cb].
  if (group == c && k == c && w[1] == 1 && !residual) {
    std::vector<int64_t> shape = {x[0], c, x[2], x[3], w[2], w[3], strides[0], pads[0]};
    if (act != 1 || conv_layout != 0) shape.push_back(act);
    if (conv_layout != 0) shape.push_back(conv_layout);
    return NodeTask{"depthwise_conv2d", shape, {}};
  }
  return std::nullopt;
}

std::vector<tuner::WorkloadLayer> ExtractTasks(const Graph& g, Layouts layouts) {
  const LayoutPlan plan = PlanLayouts(g, layouts);
  std::vector<tuner::WorkloadLayer> layers;
  std::map<std::pair<std::string, std::vector<int64_t>>, size_t> index;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    auto t = n.Has("layout") ? TaskOf(g, n) : TaskOf(g, n, plan.conv[k]);
    if (!t) continue;
    auto key = std::make_pair(t->template_name, t->TunedShape());
    if (auto it = index.find(key); it != index.end()) {
      ++layers[it->second].count;
      continue;
    }
    index[key] = layers.size();
    layers.push_back({n.name, t->template_name, t->TunedShape(), 1});
  }
  return layers;
}

TunableTasks SplitTunableTasks(const Graph& g, const builder::Target& target, int threads,
                               Layouts layouts) {
  TunableTasks out;
  for (auto& layer : ExtractTasks(g, layouts)) {
    auto task = tuner::MakeTask(layer.template_name, layer.shape, target, {threads});
    if (task.ok()) {
      out.layers.push_back(std::move(layer));
    } else {
      out.left_out.push_back(layer.name + " (" + task.status().message() + ")");
    }
  }
  return out;
}

Expected<std::vector<tuner::WorkloadLayer>> MakeWorkload(const std::string& name, Layouts layouts) {
  CT_ASSIGN_OR_RETURN(Graph g, BuiltinGraph(name));
  return ExtractTasks(g, layouts);
}

}  // namespace crosstune::model
