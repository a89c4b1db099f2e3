// fold_batchnorm: BatchNormalization(conv(x)) = conv'(x) with weight w * s and bias
// (b - mean) * s + beta, s = scale / sqrt(var + eps), per output channel (passes.h). Only when the
// conv's weight, bias and the BN's parameters are constants and the BN is the conv's only user.
#include <cmath>

#include "crosstune/model/passes.h"

namespace crosstune::model {

Status FoldBatchNorm(Graph& g) {
  const std::vector<int> producer = g.Producers();
  const std::vector<int> uses = g.UseCounts();
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& bn = g.nodes[k];
    if (bn.op != "BatchNormalization") continue;
    const int x = bn.inputs[0];
    const int p = producer[x];
    if (p < 0 || uses[x] != 1) continue;
    Node& conv = g.nodes[p];
    if (conv.op != "Conv" && conv.op != "FusedConv") continue;
    if (conv.op == "FusedConv" &&
        (conv.String("activation", "none") != "none" || conv.inputs.size() > 3)) {
      continue;  // a BN after an activation or a residual add does not fold
    }
    bool constant = g.values[conv.inputs[1]].is_const();
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) {
      constant = constant && g.values[conv.inputs[2]].is_const();
    }
    for (int i = 1; i < 5; ++i) constant = constant && g.values[bn.inputs[i]].is_const();
    if (!constant) continue;

    const Value& w = g.values[conv.inputs[1]];
    const int64_t kout = w.shape[0], per = w.elements() / kout;
    const float* scale = g.values[bn.inputs[1]].floats();
    const float* beta = g.values[bn.inputs[2]].floats();
    const float* mean = g.values[bn.inputs[3]].floats();
    const float* var = g.values[bn.inputs[4]].floats();
    const double eps = bn.Float("epsilon", 1e-5);
    const float* old_b =
        conv.inputs.size() > 2 && conv.inputs[2] >= 0 ? g.values[conv.inputs[2]].floats() : nullptr;
    std::vector<float> nw(static_cast<size_t>(w.elements())), nb(static_cast<size_t>(kout));
    for (int64_t c = 0; c < kout; ++c) {
      const double s = scale[c] / std::sqrt(static_cast<double>(var[c]) + eps);
      for (int64_t e = 0; e < per; ++e)
        nw[c * per + e] = static_cast<float>(w.floats()[c * per + e] * s);
      nb[c] = static_cast<float>(((old_b ? old_b[c] : 0.0) - mean[c]) * s + beta[c]);
    }
    const std::string wname = w.name, shape_name = conv.name;
    const std::vector<int64_t> wshape = w.shape;
    const int nwid = g.AddFloatConstant(g.UniqueValueName(wname + ".bn_folded"), wshape, nw);
    const int nbid =
        g.AddFloatConstant(g.UniqueValueName(shape_name + ".bias_bn_folded"), {kout}, nb);
    Node& c2 = g.nodes[p];  // AddFloatConstant may not move nodes, but re-read for clarity
    c2.inputs.resize(std::max<size_t>(c2.inputs.size(), 3), -1);
    c2.inputs[1] = nwid;
    c2.inputs[2] = nbid;
    // The conv now produces the BN's output (its name, its users).
    c2.outputs[0] = g.nodes[k].outputs[0];
    drop[k] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
  }
  g.nodes = std::move(kept);
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
