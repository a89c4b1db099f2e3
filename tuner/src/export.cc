#include "crosstune/tuner/export.h"

#include <nlohmann/json.hpp>

#include "crosstune/builder/builder.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {

std::vector<Record> BestRecordsOf(const std::vector<Record>& records, const std::string& task_key,
                                  const std::string& device) {
  std::vector<Record> out;
  for (auto& b : BestRecords(records)) {
    const bool task =
        task_key.empty() || b.task.Key() == task_key || b.task.Key() + "|" + b.target == task_key;
    const bool on = device.empty() || DeviceKind(b) == device || b.device.cpu == device ||
                    b.device.arch == device || b.device.name == device;
    if (task && on) out.push_back(std::move(b));
  }
  return out;
}

Expected<ExportedPackage> ExportRecord(const Record& r, const std::string& out_path,
                                       const std::string& log_path) {
  CT_ASSIGN_OR_RETURN(builder::Target target, builder::ParseTarget(r.target));
  CT_ASSIGN_OR_RETURN(auto task,
                      MakeTask(r.task.template_name, r.task.shape, target, {r.task.threads}));
  CT_ASSIGN_OR_RETURN(Config config, task->space().FromJson(r.config_values));
  builder::BuildRequest req;
  req.source = task->Generate(config);
  req.target = target;
  req.name = task->function();
  req.source_name = task->function() + (target.is_cuda() ? ".cu" : ".c");
  builder::BuildResult built = builder::BuildInProcess(req);
  CT_RETURN_IF_ERROR(built.status);
  const nlohmann::json tuning = {
      {"task",
       {{"template", r.task.template_name}, {"shape", r.task.shape}, {"dtype", r.task.dtype}}},
      {"config", {{"index", config.index()}, {"values", r.config_values}}},
      {"record", r.ToJson()},
      {"log", log_path}};
  CT_ASSIGN_OR_RETURN(pkg::Manifest manifest,
                      builder::WriteBuildPackage(req, built, out_path, "", "", tuning.dump()));
  return ExportedPackage{std::move(manifest), task->function()};
}

}  // namespace crosstune::tuner
