// The model compiler: a graph (after its passes) to one package for one target.
//
//   auto result = CompileModel(graph, {.target = t, .threads = 1, .records = log}, builder);
//   WriteModelPackage(*result, "m.ctpkg");
//
// Every tunable node (tasks.h) gets its task's best record for this target and thread count
// (apply-history-best), else the template's default config (counted and reported); every other
// node a generated kernel (kernels.h). Each node is its own translation unit with its own
// statics, compiled on the builder's pool to an object; one more source holds the library's
// module table, one uniquely named function per node ("ct_n12_conv2d"), and links them all into
// ONE shared library. Before that the graph is rewritten to the layout plan (layout_plan.h):
// activations blocked between convs, each conv's weight packed once here. The values live in a
// liveness-based storage plan (storage_plan.h); the weights go to params.bin as each kernel reads
// them (packed convs' weights with Value::layout naming their order). The graph's inputs and
// outputs keep their names and NCHW shapes. graph.json follows formats/graph.h, with each node's
// provenance (task, config index, record time, or default).
//
// Thread-safety: CompileModel may run on any thread; it uses the builder's pool.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/target.h"
#include "crosstune/model/graph.h"
#include "crosstune/model/layout_plan.h"
#include "crosstune/model/storage_plan.h"
#include "crosstune/model/tasks.h"
#include "crosstune/status.h"
#include "crosstune/tuner/records.h"

namespace crosstune::model {

struct CompileOptions {
  builder::Target target;
  int threads = 1;  // the tasks' thread count: records are per thread count
  // Tuning records (e.g. ReadLog(--log)); empty: every task takes its default config.
  std::vector<tuner::Record> records;
  // The device compiled for (tuner::DeviceKind: "aarch64/Cortex-A72"), when known: a task takes
  // the best record measured on that kind of device where it has one (the devices of one tracker
  // key can differ), else the best of any device.
  std::string device_kind;
  std::string name = "model";  // the library's file stem in the package
  // Activations blocked between convs (the layout plan, layout_plan.h, with the target's block
  // tuner::BlockedChannels) or NCHW everywhere. Tasks tuned for one do not serve the other: tune
  // with the same choice (ExtractTasks' layouts).
  Layouts layouts = Layouts::kBlocked;
};

struct CompiledNode {
  int node = -1;          // in CompileResult::graph
  std::string function;   // "ct_n12_conv2d"
  std::string op_type;    // "conv2d", "maxpool", ...
  std::string signature;  // 't' per argument
  bool has_task = false;
  NodeTask task;
  std::string task_key;  // tuner::TaskId::Key(), for provenance
  bool tuned = false;    // a record's config (else the default, or a generated kernel)
  uint64_t config_index = 0;
  std::string record_timestamp;
  int64_t scratch_bytes = 0;
  double flops = 0;
};

struct CompileResult {
  Graph graph;
  StoragePlan plan;
  std::vector<CompiledNode> nodes;
  int tuned = 0;      // task nodes with a record
  int defaults = 0;   // task nodes on their template's default config
  int generated = 0;  // nodes with a generated kernel
  // Of those, nodes that are tasks no template takes yet (TaskOf names one, MakeTask refuses its
  // shape: a size past its limits): they run a generated kernel, untuned.
  int untemplated = 0;
  // Records of this target skipped because their template now generates other code for their
  // config (tuner::MadeByThisGenerator): their tasks take another record or the default.
  int stale_records = 0;
  // The largest node's working memory: the executor's one scratch buffer, which every node uses
  // in turn (templates' packed copies and panels; no node keeps its own in the library).
  int64_t scratch_bytes = 0;
  builder::BuildRequest request;  // of the library (its name and target)
  builder::BuildResult library;
  double build_seconds = 0;  // wall time of the compile
};

Expected<CompileResult> CompileModel(Graph graph, const CompileOptions& options,
                                     builder::Builder& builder);

// graph.json text for a compiled model (formats/graph.h's schema), without the build id (the
// package writer stamps it).
std::string GraphJson(const CompileResult& result);
// params.bin bytes: every constant the graph uses, by value name.
Expected<std::string> ParamsBin(const CompileResult& result);
// The .ctpkg: library + graph.json + params.bin, through the builder's package writer.
Expected<pkg::Manifest> WriteModelPackage(const CompileResult& result, const std::string& path);

}  // namespace crosstune::model
