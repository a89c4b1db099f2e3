// The model pipeline every front end calls (pipeline.h).
#include "crosstune/model/pipeline.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/target.h"
#include "crosstune/model/kernels.h"
#include "crosstune/model/layout_plan.h"
#include "crosstune/model/passes.h"
#include "crosstune/model/report.h"
#include "crosstune/tuner/records.h"

namespace crosstune::model {
namespace {

constexpr int kMaxThreads = 4096;
constexpr int64_t kMaxDimension = int64_t{1} << 31;

Status Invalid(const std::string& message) { return Status(ErrorCode::kInvalidArgument, message); }

std::string Dims(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s;
}

// The same rule for every front end: ParseShapeFlags' range, and no empty shape (which the
// importer would take as "not given").
Status CheckShapes(const std::map<std::string, std::vector<int64_t>>& shapes) {
  for (const auto& [name, dims] : shapes) {
    if (dims.empty()) return Invalid("shape of '" + name + "': no dimensions given");
    for (int64_t d : dims) {
      if (d < 1 || d > kMaxDimension) {
        return Invalid("shape of '" + name + "' (" + Dims(dims) +
                       "): dimensions are integers from 1 to 2^31");
      }
    }
  }
  return Status::Ok();
}

Expected<builder::Target> ResolveTarget(const PackageOptions& o) {
  if (o.target == "auto") {
    if (!o.device) {
      return Invalid(
          "target 'auto' needs a device to ask for its target (name one, or give a target "
          "string or preset)");
    }
    return builder::TargetFromDevice(*o.device);
  }
  return builder::ParseTarget(o.target);
}

Status CheckPackageOptions(const PackageOptions& o) {
  if (o.out.empty()) return Invalid("no package path to write (out)");
  if (o.threads < 1 || o.threads > kMaxThreads) {
    return Invalid("threads " + std::to_string(o.threads) + ": from 1 to " +
                   std::to_string(kMaxThreads));
  }
  if (o.workers < 0) return Invalid("workers " + std::to_string(o.workers) + ": 0 or more");
  if (o.library_name.empty()) return Invalid("the library needs a name");
  return Status::Ok();
}

// The log's records, its skipped lines as warnings; a file with lines and not one record in them
// is no log (a model or a package given by mistake): an error, not a compile on defaults.
Status ReadRecords(const std::string& path, const std::string& target, CompileOptions* options,
                   std::vector<std::string>* warnings) {
  CT_ASSIGN_OR_RETURN(tuner::LogContents log, tuner::ReadLog(path));
  if (log.records.empty() && !log.warnings.empty()) {
    std::string more;
    if (log.warnings.size() > 1) {
      more = " (and " + std::to_string(log.warnings.size() - 1) + " more lines like it)";
    }
    return Invalid(path + ": not a log of tuning records: " + log.warnings.front() + more);
  }
  *warnings = std::move(log.warnings);
  std::set<std::string> targets;
  for (const auto& r : log.records) targets.insert(r.target);
  if (!log.records.empty() && targets.count(target) == 0) {
    std::string list;
    int shown = 0;
    for (const auto& t : targets) {
      if (shown++ == 3) {
        list += ", ...";
        break;
      }
      list += (list.empty() ? "" : "; ") + t;
    }
    warnings->push_back(path + ": none of its " + std::to_string(log.records.size()) +
                        " records is for " + target + " (its targets: " + list +
                        "): every task takes its default config");
  }
  options->records = std::move(log.records);
  return Status::Ok();
}

}  // namespace

Expected<LoadedModel> Load(const std::string& path, const LoadOptions& options) {
  if (options.max_model_mb < 1 || options.max_model_mb > kMaxModelMb) {
    return Invalid("max model size " + std::to_string(options.max_model_mb) + " MiB: from 1 to " +
                   std::to_string(kMaxModelMb));
  }
  CT_RETURN_IF_ERROR(CheckShapes(options.shapes));
  ImportOptions io;
  io.shapes = options.shapes;
  io.max_model_bytes = options.max_model_mb << 20;
  LoadedModel m;
  CT_ASSIGN_OR_RETURN(m.graph, ImportOnnx(path, io));
  m.imported_nodes = m.graph.nodes.size();
  m.imported = Stats(m.graph);
  CT_RETURN_IF_ERROR(RunPasses(m.graph, DefaultPasses()));
  // What the passes leave is what compiles: a node of a type its kernel does not compute is
  // refused here, by name, not first in compile.
  for (const Node& n : m.graph.nodes) CT_RETURN_IF_ERROR(CheckKernelTypes(m.graph, n));
  m.path = path;
  m.name = options.name.empty() ? std::filesystem::path(path).stem().string() : options.name;
  return m;
}

nlohmann::json ImportReport(const LoadedModel& model) {
  return ImportReport(model.path, model.imported, model.graph);
}

namespace {

struct SharedPools {
  std::mutex mu;
  pid_t owner = 0;
  // Never destroyed in a forked child: its builders' threads and workers are the parent's.
  std::map<int, std::unique_ptr<builder::Builder>>* pools = nullptr;
};
SharedPools& Shared() {
  static SharedPools* s = new SharedPools();  // outlives every caller, exit included
  return *s;
}

}  // namespace

Expected<builder::Builder*> SharedBuilder(int workers) {
  SharedPools& s = Shared();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pools == nullptr || s.owner != ::getpid()) {
    s.pools = new std::map<int, std::unique_ptr<builder::Builder>>();
    s.owner = ::getpid();
  }
  std::unique_ptr<builder::Builder>& slot = (*s.pools)[workers];
  if (slot == nullptr) {
    CT_ASSIGN_OR_RETURN(slot, builder::Builder::Create({.workers = workers}));
  }
  return slot.get();
}

void ReleaseSharedBuilders() {
  SharedPools& s = Shared();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pools != nullptr && s.owner == ::getpid()) s.pools->clear();
}

Expected<CompiledPackage> CompileToPackage(const LoadedModel& model, const PackageOptions& options,
                                           builder::Builder* pool) {
  CT_RETURN_IF_ERROR(CheckPackageOptions(options));
  CompiledPackage out;
  out.path = options.out;
  CompileOptions& co = out.options;
  CT_ASSIGN_OR_RETURN(co.layouts, ParseLayouts(options.layouts));
  CT_ASSIGN_OR_RETURN(co.target, ResolveTarget(options));
  co.threads = options.threads;
  co.name = options.library_name;
  if (options.device) co.device_kind = tuner::DeviceKind(*options.device, co.target);
  if (!options.log.empty()) {
    CT_RETURN_IF_ERROR(ReadRecords(options.log, co.target.ToString(), &co, &out.warnings));
  }
  if (pool == nullptr) {
    CT_ASSIGN_OR_RETURN(pool, SharedBuilder(options.workers));
  }
  CT_ASSIGN_OR_RETURN(out.result, CompileModel(model.graph, co, *pool));
  co.records.clear();
  co.records.shrink_to_fit();
  CT_ASSIGN_OR_RETURN(out.manifest, WriteModelPackage(out.result, options.out));
  const CompileResult& r = out.result;
  if (r.stale_records > 0) {
    out.warnings.push_back(std::to_string(r.stale_records) +
                           " record(s) measured code their template now generates differently "
                           "(another generator): not used");
  }
  if (r.untemplated > 0) {
    out.warnings.push_back(std::to_string(r.untemplated) +
                           " task node(s) their template refuses (sizes past its limits) run "
                           "generated kernels, untuned");
  }
  out.report = CompileReport(model.path, options.out, co, r, out.manifest);
  out.report["log"] = options.log.empty() ? nlohmann::json() : nlohmann::json(options.log);
  out.report["warnings"] = out.warnings;
  return out;
}

}  // namespace crosstune::model
