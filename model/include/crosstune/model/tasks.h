// Tasks of a compiled graph: which nodes the tuner's templates make (conv2d, depthwise_conv2d,
// dense), with the same shapes `crosstune tune <template> --shape` takes, so records carry over
// between `tune --workload`, `tune --model` and `compile`.
//
//   FusedConv, groups 1, square stride, equal pads  conv2d N,C,H,W,K,R,S,stride,pad[,res[,act
//                                                   [,layout]]]
//        res: 1 with a residual add; act: 0 for no activation (the relu default is left out, so
//        "1,64,56,56,64,3,3,1,1" names the task it always named); layout: the conv's
//        tuner::ConvLayout under the layout plan (layout_plan.h), written only when nonzero (then
//        res and act are always there: "1,64,56,56,64,3,3,1,1,0,1,1")
//   FusedConv, depthwise, relu, no residual         depthwise_conv2d N,C,H,W,R,S,stride,pad
//   Dense                                           dense B,IN,OUT
//   QLinearConv of uint8 data, int8 weight (or the  conv2d_int8 N,C,H,W,K,R,S,stride,pad,
//   Conv2dInt8 it becomes: layout_plan.h)           x_zero,y_zero,0 (tuned as ...,0,0,0)
// Every other node is a generated kernel with no knobs.
//
// The built-in networks (`--workload resnet50`) are graphs built here and run through the same
// passes, so a model imported from ONNX and the built-in one give the same tasks.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/model/graph.h"
#include "crosstune/model/layout_plan.h"
#include "crosstune/status.h"
#include "crosstune/tuner/workload.h"

namespace crosstune::model {

struct NodeTask {
  std::string template_name;
  std::vector<int64_t> shape;
  // The task whose records the node takes, when not `shape`'s: a conv2d_int8's zero points only
  // change constants of its code, not its speed, so its records are those of the task with both
  // zero points 0, one task for each conv of the float network.
  std::vector<int64_t> tuned_shape;
  const std::vector<int64_t>& TunedShape() const {
    return tuned_shape.empty() ? shape : tuned_shape;
  }
};

// The task node `n` is compiled as, or nullopt for a generated kernel: a conv rewritten by
// RewriteLayouts with its layout field.
std::optional<NodeTask> TaskOf(const Graph& g, const Node& n);
// The same for a node of a graph not rewritten yet, a conv2d compiled with `conv_layout`
// (LayoutPlan::conv).
std::optional<NodeTask> TaskOf(const Graph& g, const Node& n, int64_t conv_layout);

// The graph's distinct tasks (their TunedShape) in the order they first occur, with how often
// each occurs; a layer's name is its first node's. Convs carry the layout the plan for `layouts`
// gives them: the tasks CompileModel with the same CompileOptions::layouts looks up, for any CPU
// target.
std::vector<tuner::WorkloadLayer> ExtractTasks(const Graph& g, Layouts layouts = Layouts::kBlocked);

// The tasks `tune --model` tunes: ExtractTasks less those no template takes for this target and
// thread count (a size past a template's limits: compile gives them generated kernels). Each
// left-out task is named with the template's reason ("layer1.0.conv1 (conv2d: ...)").
struct TunableTasks {
  std::vector<tuner::WorkloadLayer> layers;
  std::vector<std::string> left_out;
};
TunableTasks SplitTunableTasks(const Graph& g, const builder::Target& target, int threads,
                               Layouts layouts = Layouts::kBlocked);

// Built-in networks ("resnet50": ResNet-50 v1.5, batch 1, 224x224, fp32, the graph
// scripts/make-model.py writes, without weights), after the default passes.
const std::vector<std::string>& BuiltinNetworks();
Expected<Graph> BuiltinGraph(const std::string& name);
// ExtractTasks(BuiltinGraph(name)); kInvalidArgument listing the known names.
Expected<std::vector<tuner::WorkloadLayer>> MakeWorkload(const std::string& name,
                                                         Layouts layouts = Layouts::kBlocked);

}  // namespace crosstune::model
