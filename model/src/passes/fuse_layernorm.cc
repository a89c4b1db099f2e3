// fuse_layernorm: LayerNormalization as exporters before opset 17 write it (passes.h),
//   mean = ReduceMean(x, trailing axes), d = Sub(x, mean), Pow(d, 2) or Mul(d, d),
//   var = ReduceMean(that, the same axes), Sqrt(Add(var, eps)), y = Div(d, that)
//   [, Mul(y, gamma)] [, Add(that, beta)],
// becomes one LayerNormalization node (axis = the first of the axes, epsilon = eps), where every
// value between x and y is read only by the pattern and none is a graph output.
#include <algorithm>
#include <map>
#include <optional>

#include "crosstune/model/passes.h"

namespace crosstune::model {
namespace {

struct Uses {
  std::map<int, std::vector<int>> readers;  // value -> indices of the nodes that read it
  std::vector<int> outputs;

  explicit Uses(const Graph& g) : outputs(g.outputs) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int v : g.nodes[i].inputs) {
        if (v >= 0) readers[v].push_back(static_cast<int>(i));
      }
    }
  }
  // The one node that reads `v` (and `v` is no graph output), or -1.
  int Only(int v) const {
    if (std::count(outputs.begin(), outputs.end(), v)) return -1;
    auto it = readers.find(v);
    return it != readers.end() && it->second.size() == 1 ? it->second[0] : -1;
  }
};

// A scalar constant's value.
std::optional<double> ScalarOf(const Graph& g, int v) {
  const Value& c = g.values[v];
  if (!c.is_const() || c.elements() != 1) return std::nullopt;
  return c.AsDoubles()[0];
}

// A ReduceMean's axes, normalised and sorted, when they run to the last axis without gaps and it
// keeps the dimensions; else empty.
std::vector<int64_t> TrailingAxes(const Graph& g, const Node& n) {
  if (n.op != "ReduceMean" || n.Int("keepdims", 1) != 1) return {};
  const int64_t rank = static_cast<int64_t>(g.values[n.inputs[0]].shape.size());
  std::vector<int64_t> axes = n.Ints("axes");
  if (axes.empty() && n.inputs.size() > 1 && n.inputs[1] >= 0 && g.values[n.inputs[1]].is_const()) {
    axes = g.values[n.inputs[1]].AsInts();
  }
  if (axes.empty()) return {};
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) return {};
  }
  return axes;
}

// The other input of a binary node than `v`, or -1.
int Other(const Node& n, int v) {
  if (n.inputs.size() != 2) return -1;
  return n.inputs[0] == v ? n.inputs[1] : (n.inputs[1] == v ? n.inputs[0] : -1);
}

}  // namespace

Status FuseLayerNorm(Graph& g) {
  std::vector<bool> drop(g.nodes.size(), false);
  bool changed = false;
  const Uses uses(g);
  for (size_t mi = 0; mi < g.nodes.size(); ++mi) {
    const Node& mean = g.nodes[mi];
    const std::vector<int64_t> axes = TrailingAxes(g, mean);
    if (axes.empty() || drop[mi]) continue;
    const int x = mean.inputs[0];
    if (g.values[x].dtype != DType::kFloat32) continue;
    // Sub(x, mean): the deviation, read by the square and the division.
    const int si = uses.Only(mean.outputs[0]);
    if (si < 0 || g.nodes[si].op != "Sub" ||
        g.nodes[si].inputs != std::vector<int>{x, mean.outputs[0]}) {
      continue;
    }
    const int d = g.nodes[si].outputs[0];
    if (std::count(g.outputs.begin(), g.outputs.end(), d)) continue;
    std::vector<int> readers = uses.readers.count(d) ? uses.readers.at(d) : std::vector<int>();
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    if (readers.size() != 2) continue;
    int qi = -1, div = -1;
    for (int r : readers) {
      const Node& n = g.nodes[r];
      if ((n.op == "Pow" && n.inputs[0] == d && ScalarOf(g, n.inputs[1]) == 2.0) ||
          (n.op == "Mul" && n.inputs[0] == d && n.inputs[1] == d)) {
        qi = r;
      } else if (n.op == "Div" && n.inputs[0] == d) {
        div = r;
      }
    }
    if (qi < 0 || div < 0) continue;
    const int vi = uses.Only(g.nodes[qi].outputs[0]);
    if (vi < 0 || TrailingAxes(g, g.nodes[vi]) != axes) continue;
    const int ai = uses.Only(g.nodes[vi].outputs[0]);
    if (ai < 0 || g.nodes[ai].op != "Add") continue;
    const int eps_v = Other(g.nodes[ai], g.nodes[vi].outputs[0]);
    const std::optional<double> eps = eps_v >= 0 ? ScalarOf(g, eps_v) : std::nullopt;
    if (!eps || *eps < 0) continue;
    const int ri = uses.Only(g.nodes[ai].outputs[0]);
    if (ri < 0 || g.nodes[ri].op != "Sqrt") continue;
    if (uses.Only(g.nodes[ri].outputs[0]) != div ||
        g.nodes[div].inputs[1] != g.nodes[ri].outputs[0]) {
      continue;
    }
    // The optional scale and bias: constants of the normalized dimensions' shape.
    const std::vector<int64_t> norm(g.values[x].shape.end() - static_cast<long>(axes.size()),
                                    g.values[x].shape.end());
    auto fits = [&](int v) {
      if (v < 0 || !g.values[v].is_const() || g.values[v].dtype != DType::kFloat32) return false;
      std::vector<int64_t> s = g.values[v].shape;
      while (s.size() > norm.size() && s.front() == 1) s.erase(s.begin());
      return s == norm;
    };
    int last = div, gamma = -1, beta = -1;
    std::vector<int> pattern = {static_cast<int>(mi), si, qi, vi, ai, ri, div};
    if (const int mul = uses.Only(g.nodes[last].outputs[0]); mul >= 0 && g.nodes[mul].op == "Mul") {
      const int s = Other(g.nodes[mul], g.nodes[last].outputs[0]);
      if (fits(s)) {
        gamma = s;
        last = mul;
        pattern.push_back(mul);
      }
    }
    if (const int add = uses.Only(g.nodes[last].outputs[0]); add >= 0 && g.nodes[add].op == "Add") {
      const int b = Other(g.nodes[add], g.nodes[last].outputs[0]);
      if (fits(b)) {
        beta = b;
        last = add;
        pattern.push_back(add);
      }
    }
    bool taken = false;
    for (int p : pattern) taken = taken || drop[p];
    if (taken) continue;
    if (gamma < 0) {
      gamma = g.AddFloatConstant(g.UniqueValueName(g.nodes[div].name + ".scale"), norm,
                                 std::vector<float>(static_cast<size_t>(NumElements(norm)), 1.0f));
    }
    Node fused;
    fused.op = "LayerNormalization";
    fused.name = g.nodes[div].name + ".layernorm";
    fused.inputs = {x, gamma};
    if (beta >= 0) fused.inputs.push_back(beta);
    fused.outputs = {g.nodes[last].outputs[0]};
    fused.SetInt("axis", axes.front());
    fused.SetFloat("epsilon", *eps);
    for (int p : pattern) drop[p] = true;
    drop[last] = false;
    g.nodes[last] = std::move(fused);
    changed = true;
  }
  if (!changed) return Status::Ok();
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
