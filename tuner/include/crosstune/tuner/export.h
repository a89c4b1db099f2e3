// A tuned config as a deployable package: the kernel of a record's task and config, built
// in-process for the record's target and written as a .ctpkg whose manifest keeps the tuning
// (task, config, the record itself and the log it came from). `crosstune export` runs it on the
// best record of a log's task.
//
//   auto best = BestRecordsOf(log->records, "matmul 512,512,512 float32");
//   auto package = ExportRecord(best.front(), "matmul.ctpkg", "mm.jsonl");
//
// Thread-safety: free functions; ExportRecord compiles in the calling thread.
#pragma once

#include <string>
#include <vector>

#include "crosstune/package.h"
#include "crosstune/status.h"
#include "crosstune/tuner/records.h"

namespace crosstune::tuner {

// The best successful record of each task, target and device kind (BestRecords) whose task is
// `task_key`, given as TaskId::Key() or as "KEY|TARGET" (every task's when empty), measured on
// `device`: a device kind ("aarch64/cortex-a72"), its CPU or arch alone, or a device's name
// (every device's when empty).
std::vector<Record> BestRecordsOf(const std::vector<Record>& records, const std::string& task_key,
                                  const std::string& device = "");

// `records` less those that measured code their template now generates differently for their
// config (MadeByThisGenerator; each task is made once per template, shape, threads and target);
// `*stale` counts them. Records whose task cannot be made here are kept (nothing to compare).
std::vector<Record> WithoutStaleRecords(const std::vector<Record>& records, int* stale);

struct ExportedPackage {
  pkg::Manifest manifest;
  std::string function;  // what the package's library exports
};

// Builds `record`'s config of its task for its target and writes the package to `out_path`.
// `log_path` is noted in the manifest's tuning entry. Errors: the record's target, task or config
// no longer parse (a config naming a value its knob lacks: kNotFound); the build fails (its
// diagnostics); the file cannot be written.
Expected<ExportedPackage> ExportRecord(const Record& record, const std::string& out_path,
                                       const std::string& log_path);

}  // namespace crosstune::tuner
