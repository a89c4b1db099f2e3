// fuse_conv: every Conv becomes a FusedConv (ops/conv.cc) with a bias (zeros when it had none),
// then an Add of a conv's output and another tensor of the same shape becomes the conv's
// residual, and a Relu after it its activation, as does a Clip from 0 to 6 (MobileNet's ReLU6,
// activation relu6) (passes.h). A conv whose output has other users
// keeps it unfused. Of the two operands of a residual Add, the first is the block's main path
// when both are convs (ONNX exports of ResNets write Add(main, shortcut)).
#include <vector>

#include "crosstune/model/passes.h"

namespace crosstune::model {
namespace {

// Rebuilds the node list: nodes with drop[k] left out, replaced[k] put in place of node k.
void Rebuild(Graph& g, std::vector<bool>& drop, std::vector<Node*>& replaced) {
  std::vector<Node> out;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (replaced[k]) {
      out.push_back(*replaced[k]);
    } else if (!drop[k]) {
      out.push_back(std::move(g.nodes[k]));
    }
  }
  g.nodes = std::move(out);
}

}  // namespace

Status FuseConv(Graph& g) {
  // Conv -> FusedConv with a bias.
  for (Node& n : g.nodes) {
    if (n.op != "Conv") continue;
    n.op = "FusedConv";
    n.SetString("activation", "none");
    if (n.inputs.size() < 3 || n.inputs[2] < 0) {
      const int64_t k = g.values[n.inputs[1]].shape[0];
      const int bias = g.AddFloatConstant(g.UniqueValueName(n.name + ".bias"), {k},
                                          std::vector<float>(static_cast<size_t>(k), 0.0f));
      n.inputs.resize(3, -1);
      n.inputs[2] = bias;
    }
  }

  // Residual adds: the fused conv takes the Add's place (its shortcut may be computed after the
  // conv) and output.
  {
    const std::vector<int> producer = g.Producers();
    const std::vector<int> uses = g.UseCounts();
    std::vector<bool> drop(g.nodes.size(), false);
    std::vector<Node> moved;
    moved.reserve(g.nodes.size());
    std::vector<Node*> replaced(g.nodes.size(), nullptr);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& add = g.nodes[k];
      const bool binary_add =
          (add.op == "Add" || add.op == "Sum") && add.inputs.size() == 2 && add.inputs[1] >= 0;
      if (!binary_add || add.inputs[0] == add.inputs[1]) continue;
      const auto& out_shape = g.values[add.outputs[0]].shape;
      for (int side = 0; side < 2; ++side) {
        const int x = add.inputs[side], other = add.inputs[1 - side];
        const int p = producer[x];
        if (p < 0 || drop[p] || replaced[p] || uses[x] != 1) continue;
        const Node& conv = g.nodes[p];
        if (conv.op != "FusedConv" || conv.inputs.size() != 3 ||
            conv.String("activation", "none") != "none" || g.values[other].shape != out_shape ||
            g.values[x].shape != out_shape || g.values[other].dtype != DType::kFloat32) {
          continue;
        }
        Node fused = conv;
        fused.inputs.push_back(other);
        fused.outputs[0] = add.outputs[0];
        moved.push_back(std::move(fused));
        replaced[k] = &moved.back();
        drop[p] = true;
        break;
      }
    }
    Rebuild(g, drop, replaced);
  }

  // Relu, or Clip to [0, 6], after a fused conv: its activation.
  {
    const std::vector<int> producer = g.Producers();
    const std::vector<int> uses = g.UseCounts();
    std::vector<bool> drop(g.nodes.size(), false);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& relu = g.nodes[k];
      std::string activation;
      if (relu.op == "Relu") {
        activation = "relu";
      } else if (relu.op == "Clip" && relu.inputs.size() == 1 && relu.Has("min") &&
                 relu.Has("max") && relu.Float("min", 1) == 0.0 && relu.Float("max", 0) == 6.0) {
        activation = "relu6";
      } else {
        continue;
      }
      const int x = relu.inputs[0];
      const int p = producer[x];
      if (p < 0 || uses[x] != 1) continue;
      Node& conv = g.nodes[p];
      if (conv.op != "FusedConv" || conv.String("activation", "none") != "none") continue;
      conv.SetString("activation", activation);
      conv.outputs[0] = relu.outputs[0];
      drop[k] = true;
    }
    std::vector<Node*> none(g.nodes.size(), nullptr);
    Rebuild(g, drop, none);
  }
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
