// Tuning records of other tools, read as ours (`crosstune records import`) and ours written in
// AutoTVM's log format (`crosstune records export --format autotvm`):
//
//   auto got = ReadRecordsFile("resnet.log", {});   // the format found from the file's content
//   for (const Record& r : got->log.records) ...    // r.source: the format and what it held
//
// Formats:
//   crosstune     our logs (JSON lines, records.h).
//   autotvm       AutoTVM's JSON logs (one {"input","config","result","version"} per line; format
//                 0.2, TVM 0.6 and later). Task "autotvm:<task name>", shape the integers of its
//                 arguments in order (tensor shapes, strides, padding...), dtype the first
//                 tensor's; the config's knobs as values, its index as ours; the line itself kept
//                 in `source`, so exporting it in AutoTVM's format writes it back unchanged.
//   metaschedule  a MetaSchedule JSON database: its folder, or its tuning-record file (the workload
//                 file beside it: "database_workload.json", or the record file's name with
//                 "tuning_record" replaced by "workload"). Task "metaschedule:<workload hash>",
//                 shape and dtype from the record's argument info; the schedule's trace is the
//                 config (`{"trace": ...}`), its index the first 16 hex digits of its SHA-256; the
//                 target written as a string ("llvm -mcpu=znver3 -num-cores=2").
//   kernel-tuner  a Kernel Tuner cache file (.json or .json.gz). One written from our own log
//                 (scripts/log-to-kernel-tuner.py: it has a "crosstune" block) gives back our task,
//                 target and knob values; any other is task "kernel_tuner:<kernel name>", shape
//                 its problem size, dtype "unknown".
// AutoTVM's and MetaSchedule's files do not say which device measured them, nor a Kernel Tuner
// cache which architecture: the records' device kind is ForeignOptions::device_kind where given,
// else one made from what the file holds ("llvm/znver3", "unknown/NVIDIA A100"), and a warning
// says so.
//
// Thread-safety: the functions are thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "crosstune/status.h"
#include "crosstune/tuner/records.h"

namespace crosstune::tuner {

enum class RecordsFormat { kAuto, kCrosstune, kAutoTvm, kMetaSchedule, kKernelTuner };
// "auto", "crosstune", "autotvm", "metaschedule", "kernel-tuner".
std::string_view RecordsFormatName(RecordsFormat f);
std::optional<RecordsFormat> ParseRecordsFormat(std::string_view name);
// How the docs and messages name the tool: "AutoTVM", "MetaSchedule", "Kernel Tuner".
std::string_view RecordsFormatTool(RecordsFormat f);

struct ForeignOptions {
  RecordsFormat format = RecordsFormat::kAuto;
  std::string device_kind;  // "ARCH/CPU" for records whose file does not say (empty: guessed)
  std::string target;       // a Kernel Tuner cache's target, which it does not hold
};

struct RecordsFile {
  RecordsFormat format = RecordsFormat::kCrosstune;  // what the file was read as
  LogContents log;  // its records; lines or entries that are not records skipped with a warning
};

// Reads `path` (a file, or a MetaSchedule database's folder) as `options.format`, or as the format
// its content shows (kAuto). kInvalidArgument naming the file when it is none of them, NotFound
// or CheckInputFile's error when it cannot be read. A line or entry that is not a record is
// skipped with a warning naming it ("tune.log:17: ..."), as ReadLog does.
Expected<RecordsFile> ReadRecordsFile(const std::string& path, const ForeignOptions& options);

// The parsers ReadRecordsFile uses, on text (fuzz/ drives them): `source` names the text in
// warnings and errors. A MetaSchedule database is two files: `workloads` the workload file's text.
LogContents ParseAutoTvmLog(std::string_view text, const std::string& source,
                            const ForeignOptions& options);
Expected<LogContents> ParseMetaScheduleDatabase(std::string_view records,
                                                std::string_view workloads,
                                                const std::string& source,
                                                const ForeignOptions& options);
Expected<LogContents> ParseKernelTunerRecords(std::string text, const std::string& source,
                                              const ForeignOptions& options);

// `r` as a line of an AutoTVM log: the line it was imported from where it came from one, else
// ours in AutoTVM's form: task "crosstune.<template>" with arguments [shape, dtype, threads],
// every knob an "ot" (other option) entity, AutoTVM's error number for ours.
nlohmann::json ToAutoTvmJson(const Record& r);

}  // namespace crosstune::tuner
