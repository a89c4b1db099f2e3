// remove_identity: Identity and Dropout (inference) nodes pass their input through (passes.h).
#include <algorithm>

#include "crosstune/model/passes.h"

namespace crosstune::model {

Status RemoveIdentity(Graph& g) {
  auto is_graph_edge = [&](int v) {
    return std::count(g.inputs.begin(), g.inputs.end(), v) ||
           std::count(g.outputs.begin(), g.outputs.end(), v);
  };
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    if (n.op != "Identity" && n.op != "Dropout") {
      kept.push_back(std::move(n));
      continue;
    }
    const int in = n.inputs[0], out = n.outputs[0];
    if (is_graph_edge(out)) {
      // The model's output keeps its name: the input takes it, unless the input is itself a
      // graph edge or a constant (then the copy stays).
      if (is_graph_edge(in) || g.values[in].is_const()) {
        kept.push_back(std::move(n));
        continue;
      }
      std::replace(g.outputs.begin(), g.outputs.end(), out, in);
      g.values[in].name = g.values[out].name;
      g.values[out].name += ".removed";
    }
    for (Node& m : g.nodes) std::replace(m.inputs.begin(), m.inputs.end(), out, in);
    for (Node& m : kept) std::replace(m.inputs.begin(), m.inputs.end(), out, in);
  }
  g.nodes = std::move(kept);
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
