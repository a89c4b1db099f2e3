// MatMul weights packed at compile time (layout_plan.h: PackMatmulWeights).
#include <map>

#include "crosstune/model/layout_plan.h"
#include "crosstune/model/tasks.h"
#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/matmul_layout.h"
#include "crosstune/tuner/task.h"

namespace crosstune::model {

Status PackMatmulWeights(Graph& g, const builder::Target& target, int threads) {
  const int64_t vw = tuner::BlockedChannels(target);
  std::map<int, int> packed_of;  // weight -> its panels
  for (Node& n : g.nodes) {
    if (n.op != "MatMul") continue;
    const auto t = TaskOf(g, n);
    if (!t || t->shape.size() != 5 || t->shape[4] != 1) continue;
    if (!tuner::MakeTask(t->template_name, t->shape, target, {threads}).ok()) continue;
    const int w = n.inputs[1];
    const int64_t k = t->shape[2], cols = t->shape[1];
    if (!packed_of.count(w)) {
      const std::string name = g.UniqueValueName(g.values[w].name + ".panels");
      const int p = g.AddFloatConstant(name, {tuner::MatmulPanels(cols, vw), k, vw},
                                       tuner::PackMatmulPanels(g.values[w].floats(), k, cols, vw));
      g.values[p].layout = "KN" + std::to_string(vw) + "n";
      packed_of[w] = p;
    }
    n.op = "PackedMatMul";
    n.inputs[1] = packed_of[w];
    n.SetInt("k", k);
    n.SetInt("n", cols);
    n.SetInt("vw", vw);
  }
  return Status::Ok();
}

}  // namespace crosstune::model
