// The layout plan and its rewrite (layout_plan.h).
#include "crosstune/model/layout_plan.h"

#include <algorithm>
#include <map>
#include <utility>

#include "crosstune/model/tasks.h"
#include "crosstune/tuner/conv_layout.h"

namespace crosstune::model {
namespace {

using tuner::ConvLayout;

bool IsFourDFloat(const Value& v) { return v.dtype == DType::kFloat32 && v.shape.size() == 4; }

// Node k reads input slot i blocked under the plan.
bool ReadsBlocked(const LayoutPlan& plan, size_t k, size_t i) {
  if (plan.conv[k] != 0) {
    return (i == 0 && plan.conv[k] == static_cast<int64_t>(ConvLayout::kBlocked)) || i == 3;
  }
  return i == 0 && plan.reads_block[k];
}

std::vector<float> Floats(const Value& v) {
  return std::vector<float>(v.floats(), v.floats() + v.elements());
}

}  // namespace

Expected<Layouts> ParseLayouts(const std::string& text) {
  if (text == "blocked") return Layouts::kBlocked;
  if (text == "nchw") return Layouts::kNchw;
  return Status(ErrorCode::kInvalidArgument,
                "layouts '" + text + "' is not known (blocked: NCHWc between convs, or nchw)");
}

const char* LayoutsName(Layouts l) { return l == Layouts::kBlocked ? "blocked" : "nchw"; }

LayoutPlan PlanLayouts(const Graph& g, Layouts layouts) {
  LayoutPlan plan;
  plan.blocked.assign(g.values.size(), false);
  plan.conv.assign(g.nodes.size(), 0);
  plan.reads_block.assign(g.nodes.size(), false);
  if (layouts == Layouts::kNchw) return plan;
  const std::vector<int> producer = g.Producers();
  std::vector<bool> is_input(g.values.size(), false);
  for (int i : g.inputs) is_input[i] = true;
  auto is_param = [&](int v) { return producer[v] < 0 && !is_input[v]; };
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 || n.Has("block")) continue;
    const bool in_blocked = plan.blocked[n.inputs[0]];
    if (n.op == "FusedConv") {
      // The weight is packed and the bias padded at compile time: both must be parameters (not
      // computed, not graph inputs; a built-in network's have shapes only). A depthwise conv
      // stays blocked where its input is (a blocked conv before it).
      const auto t = TaskOf(g, n);
      const bool bias_param = n.inputs.size() < 3 || n.inputs[2] < 0 || is_param(n.inputs[2]);
      const bool depthwise = t && t->template_name == "depthwise_conv2d" && in_blocked;
      if (!t || (t->template_name != "conv2d" && !depthwise) || !is_param(n.inputs[1]) ||
          !bias_param) {
        continue;
      }
      plan.conv[k] =
          static_cast<int64_t>(in_blocked ? ConvLayout::kBlocked : ConvLayout::kNchwToBlocked);
      plan.reads_block[k] = in_blocked;
      plan.blocked[n.outputs[0]] = true;
    } else if (n.op == "MaxPool" && in_blocked && IsFourDFloat(g.values[n.outputs[0]])) {
      plan.reads_block[k] = true;
      plan.blocked[n.outputs[0]] = true;
    } else if (n.op == "GlobalAveragePool" && in_blocked && IsFourDFloat(g.values[n.outputs[0]])) {
      plan.reads_block[k] = true;
    }
  }
  return plan;
}

Status RewriteLayouts(Graph& g, const LayoutPlan& plan, int64_t cb) {
  const size_t num_values = g.values.size();
  if (plan.blocked.size() != num_values || plan.conv.size() != g.nodes.size()) {
    return Status(ErrorCode::kInternal, "the layout plan is of another graph");
  }
  // Which values need the other layout too: a blocked value read as NCHW (or leaving the graph),
  // an NCHW value read blocked (a conv's residual).
  std::vector<bool> need_nchw(num_values, false), need_blocked(num_values, false);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int v = n.inputs[i];
      if (v < 0) continue;
      const bool blocked = ReadsBlocked(plan, k, i);
      if (blocked && !plan.blocked[v]) need_blocked[v] = true;
      if (!blocked && plan.blocked[v]) need_nchw[v] = true;
    }
  }
  for (int o : g.outputs) {
    if (plan.blocked[o]) need_nchw[o] = true;
  }
  for (size_t v = 0; v < num_values; ++v) {
    if ((plan.blocked[v] || need_blocked[v]) && !IsFourDFloat(g.values[v])) {
      return Status(ErrorCode::kInvalidArgument, "value '" + g.values[v].name +
                                                     "' cannot be blocked: it is not 4-D float32 " +
                                                     ShapeText(g.values[v].shape));
    }
  }

  // The blocked version of each value that has one: a value of its own.
  std::vector<int> blocked_id(num_values, -1);
  auto make_blocked = [&](int v) {
    Value b;
    b.name = g.UniqueValueName(g.values[v].name + ".blocked");
    b.dtype = DType::kFloat32;
    b.shape = tuner::BlockedShape(g.values[v].shape, cb);
    blocked_id[v] = g.AddValue(std::move(b));
  };
  auto transform = [&](int from, int to, const std::string& direction) {
    Node t;
    t.name = g.values[to].name + ".to_" + direction;
    t.op = "LayoutTransform";
    t.inputs = {from};
    t.outputs = {to};
    t.SetString("to", direction);
    t.SetInt("block", cb);
    t.SetInt("channels", g.values[direction == kToBlocked ? from : to].shape[1]);
    return t;
  };

  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size() + 4);
  // Inputs and constants read blocked: converted before anything runs.
  const std::vector<int> producer = g.Producers();
  for (size_t v = 0; v < num_values; ++v) {
    if (need_blocked[v] && producer[v] < 0) {
      make_blocked(static_cast<int>(v));
      nodes.push_back(transform(static_cast<int>(v), blocked_id[v], kToBlocked));
    }
  }
  std::map<int, int> packed_of;  // weight -> its packed constant
  std::map<int, int> padded_of;  // bias -> its padded constant
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node n = g.nodes[k];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] >= 0 && ReadsBlocked(plan, k, i)) n.inputs[i] = blocked_id[n.inputs[i]];
    }
    if (plan.conv[k] != 0 || plan.reads_block[k]) {
      const Value& x = g.values[g.nodes[k].inputs[0]];
      n.SetInt("block", cb);
      n.SetInt("channels", x.shape[1]);
    }
    if (plan.conv[k] != 0) {
      const int w = g.nodes[k].inputs[1];
      const std::vector<int64_t> kcrs = g.values[w].shape;
      const int64_t filters = kcrs[0];
      n.SetInt("layout", plan.conv[k]);
      n.SetInt("filters", filters);
      const int bias = n.inputs.size() > 2 ? n.inputs[2] : -1;
      for (int p : {w, bias}) {
        if (p >= 0 && !g.values[p].is_const()) {
          return Status(ErrorCode::kInvalidArgument, n.op + " node '" + n.name + "': '" +
                                                         g.values[p].name +
                                                         "' has no data to pack at compile time");
        }
      }
      if (plan.conv[k] == static_cast<int64_t>(ConvLayout::kBlocked)) {
        if (!packed_of.count(w) && n.Int("group", 1) > 1) {
          // Depthwise: [C, 1, R, S] blocked as [C/cb, 1, R, S, cb] (conv_layout.h).
          const std::string name = g.UniqueValueName(g.values[w].name + ".packed");
          const int p = g.AddFloatConstant(
              name, {tuner::PaddedChannels(kcrs[0], cb) / cb, 1, kcrs[2], kcrs[3], cb},
              tuner::ToBlocked(Floats(g.values[w]), 1, kcrs[0], kcrs[2] * kcrs[3], cb));
          g.values[p].layout = "C1RS" + std::to_string(cb) + "c";
          packed_of[w] = p;
        } else if (!packed_of.count(w)) {
          const std::string name = g.UniqueValueName(g.values[w].name + ".packed");
          const int p = g.AddFloatConstant(
              name, tuner::PackedWeightShape(kcrs, cb),
              tuner::PackWeight(Floats(g.values[w]), kcrs[0], kcrs[1], kcrs[2], kcrs[3], cb));
          g.values[p].layout = "KCRS" + std::to_string(cb) + "k";
          packed_of[w] = p;
        }
        n.inputs[1] = packed_of[w];
      }
      // The bias of K channels, zeros past K up to the block.
      const int64_t padded = tuner::PaddedChannels(filters, cb);
      if (bias < 0 || padded != filters) {
        std::vector<float> b(static_cast<size_t>(padded), 0.0f);
        if (bias >= 0) {
          const Value& bv = g.values[bias];
          std::copy(bv.floats(), bv.floats() + filters, b.begin());
        }
        if (bias < 0 || !padded_of.count(bias)) {
          const std::string base = bias >= 0 ? g.values[bias].name : n.name + ".bias";
          const int p = g.AddFloatConstant(g.UniqueValueName(base + ".padded"), {padded}, b);
          if (bias >= 0) padded_of[bias] = p;
          n.inputs.resize(std::max<size_t>(n.inputs.size(), 3), -1);
          n.inputs[2] = p;
        } else {
          n.inputs[2] = padded_of[bias];
        }
      }
    }
    for (int& o : n.outputs) {
      if (plan.blocked[o]) {
        make_blocked(o);
        o = blocked_id[o];
      }
    }
    nodes.push_back(std::move(n));
    for (int o : g.nodes[k].outputs) {
      if (need_nchw[o]) nodes.push_back(transform(blocked_id[o], o, kToNchw));
      if (need_blocked[o]) {
        make_blocked(o);
        nodes.push_back(transform(o, blocked_id[o], kToBlocked));
      }
    }
  }
  g.nodes = std::move(nodes);
  // Blocked values' NCHW originals nobody reads, and weights replaced by packed ones, go.
  g.Compact();
  return Status::Ok();
}

}  // namespace crosstune::model
