#include "crosstune/tuner/export.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "crosstune/builder/backend.h"
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

std::vector<Record> WithoutStaleRecords(const std::vector<Record>& records, int* stale) {
  std::map<std::string, std::unique_ptr<Task>> tasks;  // by task key and target; null: none
  std::vector<Record> out;
  int skipped = 0;
  for (const auto& r : records) {
    if (r.generator.empty()) {
      out.push_back(r);
      continue;
    }
    const std::string key = r.task.Key() + "|" + r.target;
    auto it = tasks.find(key);
    if (it == tasks.end()) {
      std::unique_ptr<Task> task;
      if (auto target = builder::ParseTarget(r.target); target.ok()) {
        if (auto t = MakeTask(r.task.template_name, r.task.shape, *target, {r.task.threads});
            t.ok()) {
          task = std::move(t).value();
        }
      }
      it = tasks.emplace(key, std::move(task)).first;
    }
    if (it->second && !MadeByThisGenerator(*it->second, r)) {
      ++skipped;
      continue;
    }
    out.push_back(r);
  }
  if (stale != nullptr) *stale = skipped;
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
  req.source_name = task->function() + std::string(target.backend().source_extension());
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
