// The liveness-based storage plan (storage_plan.h).
#include "crosstune/model/storage_plan.h"

#include <algorithm>

namespace crosstune::model {

StoragePlan PlanStorage(const Graph& g) {
  StoragePlan plan;
  plan.storage_of.assign(g.values.size(), -1);
  const int end = static_cast<int>(g.nodes.size());
  // Last use of each value: the index of its last consumer, `end` for graph outputs and inputs.
  std::vector<int> last(g.values.size(), -1);
  for (int k = 0; k < end; ++k) {
    for (int i : g.nodes[k].inputs) {
      if (i >= 0) last[i] = std::max(last[i], k);
    }
  }
  for (int o : g.outputs) last[o] = end;
  for (int i : g.inputs) last[i] = end;

  auto new_storage = [&](int64_t bytes, bool param) {
    plan.storage_bytes.push_back(bytes);
    plan.is_param.push_back(param);
    return static_cast<int>(plan.storage_bytes.size()) - 1;
  };
  // Params and inputs first: buffers of their own for the whole run.
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].is_const() && last[v] >= 0) {
      plan.storage_of[v] = new_storage(g.values[v].bytes(), true);
    }
  }
  for (int i : g.inputs) plan.storage_of[i] = new_storage(g.values[i].bytes(), false);

  // The computed values, largest first, each into the smallest buffer whose values all live
  // apart from it (greedy by size: a buffer is as large as its first, largest value).
  std::vector<int> first(g.values.size(), -1);
  for (int k = 0; k < end; ++k) {
    for (int o : g.nodes[k].outputs) first[o] = k;
  }
  std::vector<int> order;
  for (int k = 0; k < end; ++k) {
    for (int o : g.nodes[k].outputs) {
      // An output nobody reads still gets a buffer: it lives at its node only.
      if (last[o] < 0) last[o] = k;
      order.push_back(o);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return g.values[a].bytes() > g.values[b].bytes(); });
  std::vector<std::vector<std::pair<int, int>>> lives;  // per storage id: [first, last] of each
  lives.resize(plan.storage_bytes.size());
  for (int v : order) {
    const int64_t bytes = std::max<int64_t>(g.values[v].bytes(), 1);
    int best = -1;
    for (size_t id = 0; id < plan.storage_bytes.size(); ++id) {
      if (plan.is_param[id] || lives[id].empty()) continue;  // params and inputs keep theirs
      bool apart = true;
      for (const auto& [f, l] : lives[id]) apart = apart && (last[v] < f || l < first[v]);
      if (apart && plan.storage_bytes[id] >= bytes &&
          (best < 0 || plan.storage_bytes[id] < plan.storage_bytes[best])) {
        best = static_cast<int>(id);
      }
    }
    if (best < 0) {
      best = new_storage(bytes, false);
      lives.emplace_back();
    }
    lives[best].emplace_back(first[v], last[v]);
    plan.storage_of[v] = best;
  }
  for (size_t s = 0; s < plan.storage_bytes.size(); ++s) {
    (plan.is_param[s] ? plan.param_bytes : plan.activation_bytes) += plan.storage_bytes[s];
  }
  return plan;
}

}  // namespace crosstune::model
