// What `crosstune import --json` and `crosstune compile --json` print, and what the Python
// package's Model.summary and ModelPackage.report hold: each object is made here, once.
//
// Thread-safety: free functions, no shared state.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "crosstune/model/compile.h"
#include "crosstune/model/graph.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/package.h"

namespace crosstune::model {

// A model read from `path`: `imported` is the file's Stats before the passes, `graph` the graph
// after them. {"model", "inputs", "outputs" (each {"name", "shape", "dtype"}), "opset", "ops"
// (as written), "compiled_ops" (after the passes), "tasks" ({"layer", "template", "shape",
// "count"}), "params", "params_mb", "flops", "activation_mb"}.
nlohmann::json ImportReport(const std::string& path, const GraphStats& imported,
                            const Graph& graph);

// What the model at `path` uses that the importer does not take (onnx_import.h's
// FindUnsupported), for `crosstune import --json` on a model that does not import: {"model",
// "opset", "supported" (false when anything is listed), "unsupported": [{"kind" ("operator",
// "opset" or "attribute"), "op", "domain", "attribute", "opsets" ([since, until], for "opset"),
// "count", "nodes"}]}.
nlohmann::json UnsupportedJson(const std::string& path, const UnsupportedReport& report);

// A compile of the model at `model_path` written to `package_path`: {"model", "package",
// "target", "threads", "layouts", "device_kind" ("" when no device was named), "nodes", "tasks",
// "tuned", "defaults", "generated", "untemplated", "stale_records", "activation_mb",
// "scratch_mb", "params_mb", "build_id", "build_s"}.
nlohmann::json CompileReport(const std::string& model_path, const std::string& package_path,
                             const CompileOptions& options, const CompileResult& result,
                             const pkg::Manifest& manifest);

}  // namespace crosstune::model
