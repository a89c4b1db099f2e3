// `crosstune import` and `crosstune compile`: the model compiler's command line. The work is in
// crosstune::model; this file parses flags and prints.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "connect.h"
#include "crosstune/builder/builder.h"
#include "crosstune/model/graph.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/model/pipeline.h"
#include "crosstune/model/report.h"
#include "crosstune/model/storage_plan.h"
#include "crosstune/model/tasks.h"
#include "model_load.h"

namespace crosstune::cli {

model::LoadedModel LoadModel(const std::string& path, const std::vector<std::string>& shapes,
                             uint64_t max_model_mb) {
  return Check(model::Load(
      path, {.shapes = Check(model::ParseShapeFlags(shapes)), .max_model_mb = max_model_mb}));
}

namespace {

// --max-model-mb: the importer's memory budget (ImportOptions::max_model_bytes) in MiB.
void AddModelBudgetOption(CLI::App* cmd, uint64_t* mb) {
  cmd->add_option("--max-model-mb", *mb,
                  "the import's memory budget in MiB: the model file, every tensor and all "
                  "constants together must fit")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, model::kMaxModelMb));
}

std::string Dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s;
}

// --- import --------------------------------------------------------------------------------------

struct ImportFlags {
  std::string model;
  std::vector<std::string> shapes;
  uint64_t max_model_mb = model::kDefaultMaxModelMb;
  bool json_out = false;
};

void RunImport(const ImportFlags& f) {
  // A model that uses what the importer does not take: with --json, the whole list as JSON
  // (and exit 1), for scripts; the import's own refusal (below) says the same in one line, and
  // names a bad budget.
  if (f.json_out && f.max_model_mb >= 1 && f.max_model_mb <= model::kMaxModelMb) {
    auto found = model::FindUnsupported(f.model, f.max_model_mb << 20);
    if (found.ok() && !found->unsupported.empty()) {
      PrintJson(model::UnsupportedJson(f.model, *found));
      std::exit(1);
    }
  }
  // What the file holds as written, and what compiles: the ops after the passes.
  const model::LoadedModel m = LoadModel(f.model, f.shapes, f.max_model_mb);
  if (f.json_out) {
    // Names from the file need not be UTF-8: PrintJson replaces what is not.
    PrintJson(model::ImportReport(m));
    return;
  }
  const model::Graph& g = m.graph;
  const model::GraphStats& before = m.imported;
  const model::GraphStats after = model::Stats(g);
  const auto tasks = model::ExtractTasks(g);
  const model::StoragePlan plan = model::PlanStorage(g);
  std::printf("%s: opset %d, %zu nodes\n", f.model.c_str(), g.opset, m.imported_nodes);
  for (int v : g.inputs) {
    std::printf("input  %s [%s] %s\n", g.values[v].name.c_str(), Dims(g.values[v].shape).c_str(),
                model::DTypeName(g.values[v].dtype));
  }
  for (int v : g.outputs) {
    std::printf("output %s [%s] %s\n", g.values[v].name.c_str(), Dims(g.values[v].shape).c_str(),
                model::DTypeName(g.values[v].dtype));
  }
  std::string ops;
  for (const auto& [op, n] : before.ops)
    ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", op, n);
  std::printf("ops: %s\n", ops.c_str());
  std::string compiled;
  for (const auto& [op, n] : after.ops) {
    compiled += fmt::format("{}{} {}", compiled.empty() ? "" : ", ", op, n);
  }
  std::printf("after the passes: %s\n", compiled.c_str());
  std::printf("params: %.3f M (%.1f MB); %.3f GFLOP (%.3f GMAC) per run; activations %.2f MB\n",
              after.params / 1e6, after.param_bytes / 1e6, before.flops / 1e9, before.flops / 2e9,
              plan.activation_bytes / 1e6);
  std::printf("%zu tasks:\n%-24s %-18s %-38s %5s\n", tasks.size(), "layer", "template", "shape",
              "count");
  for (const auto& t : tasks) {
    std::printf("%-24s %-18s %-38s %5d\n", t.name.c_str(), t.template_name.c_str(),
                Dims(t.shape).c_str(), t.count);
  }
}

// --- compile -------------------------------------------------------------------------------------

struct CompileFlags {
  std::string model;
  std::vector<std::string> shapes;
  std::string log;
  std::string target = "auto";
  int threads = 1;
  std::string out;
  int workers = 0;
  std::string layouts = "blocked";
  uint64_t max_model_mb = model::kDefaultMaxModelMb;
  ConnectFlags connect;
  bool json_out = false;
};

void RunCompile(const CompileFlags& f) {
  const model::LoadedModel m = LoadModel(f.model, f.shapes, f.max_model_mb);
  // Workers are processes: the pool comes before any thread (a tracker lease renews on one).
  auto pool = Check(builder::Builder::Create({.workers = f.workers}));
  model::PackageOptions o;
  o.target = f.target;
  o.threads = f.threads;
  o.log = f.log;
  o.layouts = f.layouts;
  o.out = f.out;
  o.workers = f.workers;
  if (f.target == "auto") {
    // The device compiled for: its target, and its kind picks the records. A target string
    // asks no device (as Python's compile with a target string).
    if (f.connect.server.empty() && f.connect.tracker.empty()) {
      Fail("--target auto asks the device: give --server or --tracker/--key, or a target string");
    }
    auto session = Check(OpenSession(f.connect));
    o.device = Check(session->Info());
  }
  const model::CompiledPackage p = Check(model::CompileToPackage(m, o, pool.get()));
  for (const auto& w : p.warnings) std::fprintf(stderr, "crosstune: warning: %s\n", w.c_str());
  if (f.json_out) {
    PrintJson(p.report);
    return;
  }
  const model::CompileResult& result = p.result;
  const int tasks = result.tuned + result.defaults;
  if (f.log.empty()) {
    std::printf("no --log: every task (%d) uses its template's default config\n", tasks);
  } else {
    std::printf("%d of %d tasks tuned from %s; %d on their template's default config\n",
                result.tuned, tasks, f.log.c_str(), result.defaults);
  }
  std::printf(
      "%s: %zu nodes (%d generated kernels) for %s, one library; activations %.2f MB, "
      "scratch %.2f MB, params %.1f MB; %.1f s\n",
      f.out.c_str(), result.nodes.size(), result.generated, p.options.target.ToString().c_str(),
      result.plan.activation_bytes / 1e6, result.scratch_bytes / 1e6, result.plan.param_bytes / 1e6,
      result.build_seconds);
}

}  // namespace

void RegisterImportCommand(CLI::App& app) {
  auto f = std::make_shared<ImportFlags>();
  auto* cmd = app.add_subcommand("import", CompilerCommandHelp("import"));
  cmd->add_option("model", f->model, "the .onnx file")->required();
  cmd->add_option("--shape", f->shapes,
                  "NAME=D1,D2,... for an input (needed for a dynamic dimension; repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  AddModelBudgetOption(cmd, &f->max_model_mb);
  cmd->add_flag("--json", f->json_out, "one JSON object");
  cmd->callback([f] { RunImport(*f); });
}

void RegisterCompileCommand(CLI::App& app) {
  auto f = std::make_shared<CompileFlags>();
  auto* cmd = app.add_subcommand("compile", CompilerCommandHelp("compile"));
  cmd->add_option("model", f->model, "the .onnx file")->required();
  cmd->add_option("--shape", f->shapes, "NAME=D1,D2,... for an input (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--log", f->log,
                  "tuning records: each task's best for this target and thread count (without: "
                  "every task's default config)");
  cmd->add_option("--target", f->target,
                  "target string, preset, or auto (ask the device of --server/--tracker)")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "threads the tasks run with (their records' count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("-o,--out", f->out, "the .ctpkg to write")->required();
  cmd->add_option("--workers", f->workers, "build processes (0: one per core)")
      ->capture_default_str();
  cmd->add_option("--layouts", f->layouts,
                  "blocked: activations NCHWc between convs, weights packed here; nchw: NCHW "
                  "everywhere (tune with the same --layouts: the conv tasks differ)")
      ->capture_default_str()
      ->check(CLI::IsMember({"blocked", "nchw"}));
  AddModelBudgetOption(cmd, &f->max_model_mb);
  AddConnectOptions(cmd, &f->connect);
  cmd->add_flag("--json", f->json_out, "one JSON object");
  cmd->callback([f] { RunCompile(*f); });
}

}  // namespace crosstune::cli
