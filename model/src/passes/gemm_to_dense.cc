// gemm_to_dense: Gemm(x, W, b) with alpha = beta = 1, no transposed x, a weight that is
// constant or read transposed, and a bias of [OUT] (or none) becomes Dense(x, W', b) with W' the
// weight as [OUT, IN] (transposed at compile time when the Gemm reads it as [IN, OUT]) (passes.h).
#include "crosstune/model/passes.h"

namespace crosstune::model {

Status GemmToDense(Graph& g) {
  for (Node& n : g.nodes) {
    if (n.op != "Gemm") continue;
    if (n.Float("alpha", 1) != 1 || n.Float("beta", 1) != 1 || n.Int("transA", 0) != 0) continue;
    const Value& w = g.values[n.inputs[1]];
    // A weight read as [OUT, IN] needs no data here (a built-in graph's weights have none).
    if (!w.is_const() && n.Int("transB", 0) == 0) continue;
    const int64_t out = g.values[n.outputs[0]].shape[1];
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
    if (has_bias) {
      if (g.values[n.inputs[2]].shape != std::vector<int64_t>{out}) continue;
    }
    int weight = n.inputs[1];
    if (n.Int("transB", 0) == 0) {
      const int64_t in = w.shape[0];
      std::vector<float> t(static_cast<size_t>(w.elements()));
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) t[o * in + i] = w.floats()[i * out + o];
      weight = g.AddFloatConstant(g.UniqueValueName(w.name + ".transposed"), {out, in}, t);
    }
    int bias = has_bias ? n.inputs[2] : -1;
    if (!has_bias) {
      bias = g.AddFloatConstant(g.UniqueValueName(n.name + ".bias"), {out},
                                std::vector<float>(static_cast<size_t>(out), 0.0f));
    }
    n.op = "Dense";
    n.attrs.clear();
    n.inputs = {n.inputs[0], weight, bias};
  }
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
