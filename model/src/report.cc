// The import and compile reports (report.h).
#include "crosstune/model/report.h"

#include <vector>

#include "crosstune/model/storage_plan.h"
#include "crosstune/model/tasks.h"

namespace crosstune::model {
namespace {

using nlohmann::json;

json Edges(const Graph& g, const std::vector<int>& ids) {
  json out = json::array();
  for (int v : ids) {
    out.push_back({{"name", g.values[v].name},
                   {"shape", g.values[v].shape},
                   {"dtype", DTypeName(g.values[v].dtype)}});
  }
  return out;
}

}  // namespace

json ImportReport(const std::string& path, const GraphStats& imported, const Graph& graph) {
  const GraphStats after = Stats(graph);
  const StoragePlan plan = PlanStorage(graph);
  json tasks = json::array();
  for (const auto& t : ExtractTasks(graph)) {
    tasks.push_back(
        {{"layer", t.name}, {"template", t.template_name}, {"shape", t.shape}, {"count", t.count}});
  }
  return {{"model", path},
          {"inputs", Edges(graph, graph.inputs)},
          {"outputs", Edges(graph, graph.outputs)},
          {"opset", graph.opset},
          {"ops", imported.ops},
          {"compiled_ops", after.ops},
          {"tasks", tasks},
          {"params", after.params},
          {"params_mb", after.param_bytes / 1e6},
          {"flops", imported.flops},
          {"activation_mb", plan.activation_bytes / 1e6}};
}

json CompileReport(const std::string& model_path, const std::string& package_path,
                   const CompileOptions& options, const CompileResult& result,
                   const pkg::Manifest& manifest) {
  return {{"model", model_path},
          {"package", package_path},
          {"target", options.target.ToString()},
          {"threads", options.threads},
          {"layouts", LayoutsName(options.layouts)},
          {"device_kind", options.device_kind},
          {"nodes", result.nodes.size()},
          {"tasks", result.tuned + result.defaults},
          {"tuned", result.tuned},
          {"defaults", result.defaults},
          {"generated", result.generated},
          {"untemplated", result.untemplated},
          {"stale_records", result.stale_records},
          {"activation_mb", result.plan.activation_bytes / 1e6},
          {"scratch_mb", result.scratch_bytes / 1e6},
          {"params_mb", result.plan.param_bytes / 1e6},
          {"build_id", manifest.build_id},
          {"build_s", result.build_seconds}};
}

nlohmann::json UnsupportedJson(const std::string& path, const UnsupportedReport& report) {
  nlohmann::json list = nlohmann::json::array();
  for (const Unsupported& u : report.unsupported) {
    nlohmann::json j = {{"kind", u.kind},          {"op", u.op},
                        {"domain", u.domain},      {"attribute", u.attribute},
                        {"count", u.nodes.size()}, {"nodes", u.nodes}};
    if (u.kind == "opset") j["opsets"] = {u.since_opset, u.until_opset};
    list.push_back(std::move(j));
  }
  return {{"model", path},
          {"opset", report.opset},
          {"supported", report.unsupported.empty()},
          {"unsupported", std::move(list)}};
}

}  // namespace crosstune::model
