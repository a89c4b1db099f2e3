// The model pipeline every front end calls: `crosstune import` / `compile` / `tune --model` and the
// Python package's import_onnx / compile / tune(model) are thin layers over these two functions.
//
//   auto model = Load("r50.onnx", {.shapes = {{"input", {1, 3, 224, 224}}}});
//   auto package = CompileToPackage(*model, {.target = "auto", .device = info,
//                                            .log = "r50.jsonl", .out = "r50.ctpkg"});
//   for (const auto& w : package->warnings) ...;   // values: the caller prints or warns
//
// Load: ONNX import with the shapes given (each checked the same way, whichever front end parsed
// them), then the default passes (passes.h). CompileToPackage: the target (a string, a preset, or
// "auto": the target of `device`), the log read (lines it skips become warnings), each task's
// best record for this target, thread count and kind of device (tuner::DeviceKind of `device`),
// the compile on a builder pool of its own, and the package written. Everything a user should
// hear about and that is not an error comes back in `warnings`, never printed here.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/messages.h"
#include "crosstune/model/compile.h"
#include "crosstune/model/graph.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/package.h"
#include "crosstune/status.h"

namespace crosstune::model {

// The import's memory budget in MiB (`--max-model-mb`, `max_model_mb=`): its default, 4 GiB, and
// its largest value, 1 TiB.
inline constexpr uint64_t kDefaultMaxModelMb = kDefaultMaxModelBytes >> 20;
inline constexpr uint64_t kMaxModelMb = uint64_t{1} << 20;

struct LoadOptions {
  // Input name -> dimensions (`--shape NAME=D1,D2,...`, ParseShapeFlags; Python's `shapes=`):
  // needed for a dynamic dimension, checked against a static one. Every dimension must be an
  // integer in [1, 2^31] and every name an input of the model.
  std::map<std::string, std::vector<int64_t>> shapes;
  // ImportOptions::max_model_bytes in MiB, in [1, kMaxModelMb].
  uint64_t max_model_mb = kDefaultMaxModelMb;
  // The workload name the model's tuning records carry; empty: the file's stem ("r50" for
  // "models/r50.onnx").
  std::string name;
};

// A model as tune and compile take it.
struct LoadedModel {
  std::string path;
  std::string name;           // LoadOptions::name or the file's stem
  size_t imported_nodes = 0;  // nodes as the file holds them
  GraphStats imported;        // Stats of the graph as the file holds it, before the passes
  Graph graph;                // after DefaultPasses
};

// kNotFound for a missing file; kInvalidArgument naming a bad shape or budget, a bad file, or the
// node whose operator or attribute the compiler lacks; kLimitExceeded naming the tensor past the
// budget.
Expected<LoadedModel> Load(const std::string& path, const LoadOptions& options = {});

// `crosstune import --json`'s object, and Python's Model.summary (report.h's ImportReport).
nlohmann::json ImportReport(const LoadedModel& model);

struct PackageOptions {
  // A target string or preset, or "auto": TargetFromDevice of `device` (which it then needs).
  std::string target = "auto";
  // The device compiled for, when the caller has one (`--server`/`--tracker`, Python's
  // `device=`): "auto" takes its target, and each task takes the best record measured on its
  // kind of device (tuner::DeviceKind) where the log has one, else the best of any device.
  std::optional<msg::DeviceInfo> device;
  int threads = 1;  // the tasks' thread count: records are per thread count; [1, 4096]
  std::string log;  // the tuning records; empty: every task takes its default config
  std::string layouts = "blocked";     // "blocked" or "nchw" (ParseLayouts)
  std::string out;                     // the .ctpkg to write (needed)
  std::string library_name = "model";  // the library's file stem in the package
  int workers = 0;                     // build processes of the pool made here; 0: one per core
};

struct CompiledPackage {
  std::string path;        // PackageOptions::out
  CompileOptions options;  // as resolved (target, threads, device kind, layouts); no records
  CompileResult result;
  pkg::Manifest manifest;
  // In order: the log's skipped lines ("m.jsonl:17: not a record (...)"), a log with no record
  // for this target, records of code their template now generates differently, task nodes no
  // template takes (run untuned).
  std::vector<std::string> warnings;
  // `crosstune compile --json`'s object and Python's ModelPackage.report: report.h's
  // CompileReport plus "log" (null without one) and "warnings".
  nlohmann::json report;
};

// Builds on `pool` when given (a caller that starts threads makes its pool before them: builder.h),
// else on SharedBuilder(`workers`). kInvalidArgument for a bad option
// (naming it), "auto" without a device, a target a model cannot compile for, or a log with lines
// and not one record in them; kNotFound for a missing log; the compiler's and the package
// writer's errors otherwise.
Expected<CompiledPackage> CompileToPackage(const LoadedModel& model, const PackageOptions& options,
                                           builder::Builder* pool = nullptr);

// The pool of `workers` build processes that calls given none share: made on first use and kept
// for the process, so a program that compiles many models (Python's crosstune.compile, ONNX's
// node tests through crosstune.onnx_backend: 1,233 compiles) starts its workers once, not at
// every compile. A forked child makes its own (its parent's workers answer the parent).
// Thread-safe.
Expected<builder::Builder*> SharedBuilder(int workers);
// Ends the shared pools' workers (and removes their scratch folders); a later call makes new
// ones. For a program's exit (the Python package calls it from atexit), with no compile running.
void ReleaseSharedBuilders();

}  // namespace crosstune::model
