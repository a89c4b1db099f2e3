// `crosstune records ls / import / export / best`: the farm's tuning records, kept by the tracker
// (tuner/farm_records.h).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "connect.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/records_json.h"
#include "crosstune/tuner/farm_records.h"
#include "crosstune/tuner/foreign_records.h"

namespace crosstune::cli {
namespace {

// Which records: a task on a target, on a device kind (or the nearest the farm has).
struct Which {
  std::string task, target, device_kind;
};

void AddWhich(CLI::App* cmd, Which* w) {
  cmd->add_option("--task", w->task, "the task as records name it: \"matmul 512,512,512 float32\"")
      ->required();
  cmd->add_option("--target", w->target, "the target string the records were built for")
      ->required();
  cmd->add_option("--device-kind", w->device_kind,
                  "ARCH/CPU as records name it (x86_64/znver4); the nearest kind with records "
                  "when the farm has none of this one");
}

tuner::FarmRecords Fetch(const TrackerFlags& f, const Which& w, bool best_only) {
  auto tracker = Check(ConnectTracker(f));
  auto got = Check(tuner::FetchRecords(*tracker, w.task, w.target, w.device_kind, best_only));
  for (const auto& warning : got.warnings) std::fprintf(stderr, "crosstune: %s\n", warning.c_str());
  if (!got.exact) {
    std::fprintf(stderr, "crosstune: the farm has no records of %s on %s: these are %s's\n",
                 w.task.c_str(), w.device_kind.empty() ? "(no kind given)" : w.device_kind.c_str(),
                 got.device_kind.empty() ? "no kind" : got.device_kind.c_str());
  }
  return got;
}

void RegisterImport(CLI::App* records) {
  struct Opts {
    TrackerFlags f;
    std::vector<std::string> logs;
    std::string run_id;
    std::string format = "auto";
    tuner::ForeignOptions foreign;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = records->add_subcommand(
      "import",
      "send tuning records to the farm's records: our logs, AutoTVM logs, MetaSchedule databases, "
      "Kernel Tuner caches");
  cmd->add_option("log", o->logs,
                  "files of records: our logs (`tune --log`), AutoTVM JSON logs, a MetaSchedule "
                  "database (its folder or tuning-record file), Kernel Tuner caches (.json[.gz])")
      ->required();
  AddTrackerFlags(cmd, &o->f);
  cmd->add_option("--run-id", o->run_id, "the run the records are filed under (default: import)");
  cmd->add_option("--format", o->format, "the files' format (default: found from the content)")
      ->check(CLI::IsMember({"auto", "crosstune", "autotvm", "metaschedule", "kernel-tuner"}));
  cmd->add_option("--device-kind", o->foreign.device_kind,
                  "ARCH/CPU that measured records whose file does not say (AutoTVM, MetaSchedule, "
                  "Kernel Tuner); default: made from the file's target or device name");
  cmd->add_option("--target", o->foreign.target,
                  "the target a Kernel Tuner cache's kernel was built for (it does not say)");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o] {
    o->foreign.format = *tuner::ParseRecordsFormat(o->format);
    auto tracker = Check(ConnectTracker(o->f));
    auto got = Check(
        tuner::ImportLogs(*tracker, o->logs, o->run_id.empty() ? "import" : o->run_id, o->foreign));
    for (const auto& w : got.warnings) std::fprintf(stderr, "crosstune: %s\n", w.c_str());
    if (o->json) {
      nlohmann::json files = nlohmann::json::array();
      for (const auto& [path, format] : got.files) {
        files.push_back({{"path", path}, {"format", tuner::RecordsFormatName(format)}});
      }
      PrintJson({{"read", got.read},
                 {"added", got.added},
                 {"duplicates", got.duplicates},
                 {"files", files}});
      return;
    }
    for (const auto& [path, format] : got.files) {
      std::printf("%s: read as %s records\n", path.c_str(),
                  std::string(tuner::RecordsFormatTool(format)).c_str());
    }
    std::printf("%d record(s) read, %d new to the farm, %d it had already\n", got.read, got.added,
                got.duplicates);
  });
}

void RegisterExport(CLI::App* records) {
  struct Opts {
    TrackerFlags f;
    Which w;
    std::string out;
    std::string format = "crosstune";
    bool best = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = records->add_subcommand(
      "export",
      "write a task's farm records as a tuning log: ours (JSON lines, as `tune --log`) or "
      "AutoTVM's");
  AddTrackerFlags(cmd, &o->f);
  AddWhich(cmd, &o->w);
  cmd->add_option("-o,--output", o->out, "log file to write")->required();
  cmd->add_option("--format", o->format,
                  "crosstune (default) or autotvm: AutoTVM's JSON log, which "
                  "autotvm.apply_history_best reads; records imported from one are written back "
                  "as they were")
      ->check(CLI::IsMember({"crosstune", "autotvm"}));
  cmd->add_flag("--best", o->best, "only the best record (per generator)");
  cmd->callback([o] {
    auto got = Fetch(o->f, o->w, o->best);
    std::ofstream out(o->out, std::ios::trunc);
    const bool autotvm = o->format == "autotvm";
    for (const auto& r : got.records) {
      const nlohmann::json line = autotvm ? tuner::ToAutoTvmJson(r) : r.ToJson();
      out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    }
    if (!out) Fail(o->out + ": cannot write");
    std::printf("%s: %zu record(s) of %s on %s%s\n", o->out.c_str(), got.records.size(),
                o->w.task.c_str(), got.device_kind.empty() ? "no kind" : got.device_kind.c_str(),
                autotvm ? ", in AutoTVM's format" : "");
  });
}

void RegisterBest(CLI::App* records) {
  struct Opts {
    TrackerFlags f;
    Which w;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = records->add_subcommand("best", "the farm's best record of a task on a device kind");
  AddTrackerFlags(cmd, &o->f);
  AddWhich(cmd, &o->w);
  cmd->add_flag("--json", o->json, "JSON output (the records themselves)");
  cmd->callback([o] {
    auto got = Fetch(o->f, o->w, true);
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : got.records) j.push_back(r.ToJson());
      PrintJson({{"device_kind", got.device_kind}, {"exact", got.exact}, {"records", j}});
      return;
    }
    if (got.records.empty()) {
      std::printf("no successful record of %s in the farm\n", o->w.task.c_str());
      return;
    }
    for (const auto& r : got.records) {
      const std::string fingerprint = tuner::FingerprintText(r.device);
      std::printf("%s on %s%s: %.4f ms (%.2f GFLOP/s), config %s, by run %s\n",
                  r.task.Key().c_str(), tuner::DeviceKind(r).c_str(),
                  fingerprint.empty() ? "" : (" (" + fingerprint + ")").c_str(), r.mean * 1e3,
                  r.gflops(), r.config_values.dump().c_str(), r.run_id.c_str());
    }
  });
}

void RegisterLs(CLI::App* records) {
  struct Opts {
    TrackerFlags f;
    std::string prefix;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = records->add_subcommand(
      "ls",
      "what the farm's records hold: per task, target and device kind, the records and the best");
  AddTrackerFlags(cmd, &o->f);
  cmd->add_option("--task", o->prefix, "only tasks whose name starts with this (\"matmul\")");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o] {
    auto tracker = Check(ConnectTracker(o->f));
    const auto rows = Check(tuner::ListFarmRecords(*tracker, o->prefix));
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : rows) {
        j.push_back(RecordsSummaryRowJson(r));
      }
      PrintJson({{"rows", j}});
      return;
    }
    if (rows.empty()) {
      std::printf("the farm holds no tuning records%s\n",
                  o->prefix.empty() ? "" : (" of tasks named " + o->prefix + "...").c_str());
      return;
    }
    // The target last: it is long (a CPU's whole feature list).
    std::printf("%-8s %12s  %-14s %-32s %-36s %s\n", "RECORDS", "BEST_MS", "BEST_BY_RUN",
                "DEVICE_KIND", "TASK", "TARGET");
    for (const auto& r : rows) {
      const std::string best = r.best_mean > 0 ? fmt::format("{:.4f}", r.best_mean * 1e3) : "-";
      std::printf("%-8llu %12s  %-14s %-32s %-36s %s\n", static_cast<unsigned long long>(r.records),
                  best.c_str(), r.best_run_id.empty() ? "-" : r.best_run_id.c_str(),
                  r.device_kind.c_str(), r.task.c_str(), r.target.c_str());
    }
  });
}

}  // namespace

void RegisterRecordsCommand(CLI::App& app) {
  auto* records = app.add_subcommand("records", CompilerCommandHelp("records"));
  records->require_subcommand(1);
  RegisterLs(records);
  RegisterImport(records);
  RegisterExport(records);
  RegisterBest(records);
}

}  // namespace crosstune::cli
