// fold_constants: nodes that can be evaluated at compile time become constants (passes.h).
#include "crosstune/model/ops.h"
#include "crosstune/model/passes.h"

namespace crosstune::model {

Status FoldConstants(Graph& g) {
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool done = true;
    for (int o : n.outputs) done = done && g.values[o].is_const();
    if (!done && CanFold(g, n)) {
      CT_RETURN_IF_ERROR(EvalNode(g, n));
      done = true;
    }
    if (!done) kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
