#include "crosstune/tuner/foreign_records.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <utility>
#include <vector>

#include "crosstune/crypto.h"
#include "crosstune/json_reader.h"
#include "crosstune/protocol.h"
#include "crosstune/tuner/input_file.h"
#include "crosstune/tuner/kernel_tuner_cache.h"

namespace crosstune::tuner {
namespace {

using nlohmann::json;

// A file of another tool's records, at most (the same bound as a Kernel Tuner cache's).
constexpr size_t kMaxForeignBytes = kMaxCacheBytes;

// A config index for a config another tool names by its content (a trace, a Kernel Tuner point):
// the first 64 bits of the SHA-256 of its JSON text, the same on every machine.
uint64_t ContentIndex(const json& config) {
  const std::string hex = Sha256Hex(config.dump(-1, ' ', false, json::error_handler_t::replace));
  return std::stoull(hex.substr(0, 16), nullptr, 16);
}

// Every integer in `v`, depth first, in order (strings, booleans and fractions left out).
void CollectIntegers(const json& v, std::vector<int64_t>& out, int depth = 0) {
  if (depth > 16) return;
  if (v.is_number_integer()) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{INT64_MAX}) {
      out.push_back(v.get<int64_t>());
    }
  } else if (v.is_array()) {
    for (const auto& e : v) CollectIntegers(e, out, depth + 1);
  }
}

// The value of "-NAME=VALUE" in a target string written as options ("llvm -mcpu=skylake").
std::string TargetOption(const std::string& target, const std::string& name) {
  const std::string flag = "-" + name + "=";
  size_t at = 0;
  while ((at = target.find(flag, at)) != std::string::npos) {
    if (at == 0 || target[at - 1] == ' ') {
      const size_t start = at + flag.size();
      return target.substr(start, target.find(' ', start) - start);
    }
    at += flag.size();
  }
  return "";
}

// The device a record names: `kind` ("ARCH/CPU") where the user gave one, else `arch`/`cpu`.
DeviceId DeviceOf(const ForeignOptions& o, const std::string& arch, const std::string& cpu) {
  DeviceId d;
  if (!o.device_kind.empty()) {
    const size_t slash = o.device_kind.find('/');
    d.arch = o.device_kind.substr(0, slash);
    d.cpu = slash == std::string::npos ? "" : o.device_kind.substr(slash + 1);
  } else {
    d.arch = arch.empty() ? "unknown" : arch;
    d.cpu = cpu.empty() ? "unknown" : cpu;
  }
  return d;
}

// The one warning a file gets when its records' device kind was made up from what it holds.
void SayGuessedKind(const ForeignOptions& o, const LogContents& log, const std::string& source,
                    std::string_view what, std::vector<std::string>& warnings) {
  if (!o.device_kind.empty() || log.records.empty()) return;
  std::map<std::string, int> kinds;
  for (const Record& r : log.records) ++kinds[DeviceKind(r)];
  std::string list;
  for (const auto& [kind, n] : kinds) list += (list.empty() ? "" : ", ") + kind;
  warnings.push_back(source + ": " + std::string(what) +
                     " do not say which device measured them: filed under device kind " + list +
                     " (--device-kind names it)");
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

bool Blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Each non-blank line of `text` as JSON, made a record by `read`; a line that is not JSON or not
// a record is a warning naming it ("tune.log:17: ...").
template <typename Read>
LogContents ReadJsonLines(std::string_view text, const std::string& source, const Read& read) {
  LogContents out;
  size_t n = 0;
  for (std::string_view line : Lines(text)) {
    ++n;
    if (Blank(line)) continue;
    auto j = ParseJson(line, {.max_bytes = kMaxRecordBytes});
    Expected<Record> r = j.ok() ? read(*j) : Expected<Record>(j.status());
    if (!r.ok()) {
      out.warnings.push_back(source + ":" + std::to_string(n) + ": " + r.status().message());
      continue;
    }
    out.records.push_back(std::move(*r));
  }
  return out;
}

// The mean of positive finite times; 0 when there is none.
double MeanOf(const std::vector<double>& costs) {
  double sum = 0;
  for (double c : costs) {
    if (!std::isfinite(c) || c <= 0) return 0;
    sum += c;
  }
  return costs.empty() ? 0 : sum / static_cast<double>(costs.size());
}

// --- AutoTVM ------------------------------------------------------------------------------------

// AutoTVM's MeasureErrorNo, by number.
constexpr const char* kAutoTvmErrors[] = {"NO_ERROR",       "INSTANTIATION_ERROR", "COMPILE_HOST",
                                          "COMPILE_DEVICE", "RUNTIME_DEVICE",      "WRONG_ANSWER",
                                          "BUILD_TIMEOUT",  "RUN_TIMEOUT",         "UNKNOWN_ERROR"};

TrialError FromAutoTvmError(int64_t n) {
  switch (n) {
    case 0:
      return TrialError::kOk;
    case 1:
      return TrialError::kInvalidConfig;
    case 2:
    case 3:
      return TrialError::kBuildError;
    case 5:
      return TrialError::kWrongAnswer;
    case 6:
      return TrialError::kBuildTimeout;
    case 7:
      return TrialError::kRunTimeout;
    default:
      return TrialError::kRuntimeError;
  }
}

int ToAutoTvmError(TrialError e) {
  switch (e) {
    case TrialError::kOk:
      return 0;
    case TrialError::kInvalidConfig:
      return 1;
    case TrialError::kBuildError:
      return 2;
    case TrialError::kLoadError:
    case TrialError::kRemoteCrash:
    case TrialError::kRuntimeError:
      return 4;
    case TrialError::kWrongAnswer:
      return 5;
    case TrialError::kBuildTimeout:
      return 6;
    case TrialError::kRunTimeout:
      return 7;
    case TrialError::kDeviceLost:
      return 8;
  }
  return 8;
}

Status NotAutoTvm(const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "not an AutoTVM record (" + what + ")");
}

// The shape of an AutoTVM line: {"input": [target, task, args, ...], "config": {"index",
// "entity"}, "result": [costs, error number, ...]}; what is wrong with it, by name.
Status CheckAutoTvmLine(const json& j) {
  if (!j.is_object()) return NotAutoTvm("not a JSON object");
  if (j.contains("i") && j.contains("r")) {
    return NotAutoTvm("AutoTVM's log format 0.1, from TVM before 0.6, is not read");
  }
  if (!j.contains("input") || !j.contains("config") || !j.contains("result")) {
    return NotAutoTvm("no \"input\", \"config\" and \"result\"");
  }
  const json& input = j["input"];
  const json& config = j["config"];
  const json& result = j["result"];
  if (!input.is_array() || input.size() < 3 || !input[0].is_string() || !input[1].is_string() ||
      !input[2].is_array()) {
    return NotAutoTvm("\"input\" is not [target, task name, arguments, ...]");
  }
  if (!config.is_object() || !config.contains("index") || !config.contains("entity") ||
      !config["entity"].is_array()) {
    return NotAutoTvm("\"config\" has no index and entity list");
  }
  const json& index = config["index"];
  if (!index.is_number_integer() || (!index.is_number_unsigned() && index.get<int64_t>() < 0)) {
    return NotAutoTvm("config index " + JsonExcerpt(index));
  }
  for (const auto& e : config["entity"]) {
    if (!e.is_array() || e.size() < 3 || !e[0].is_string()) {
      return NotAutoTvm("config entity " + JsonExcerpt(e));
    }
  }
  if (!result.is_array() || result.size() < 2 || !result[0].is_array() ||
      !result[1].is_number_integer()) {
    return NotAutoTvm("\"result\" is not [costs, error number, ...]");
  }
  return Status::Ok();
}

// A checked line's task (the integers of its arguments, the first tensor's dtype), target,
// device and config into `r`.
void ReadAutoTvmInput(const json& j, const ForeignOptions& o, Record& r) {
  const json& input = j["input"];
  r.task.template_name = "autotvm:" + input[1].get<std::string>();
  r.task.dtype.clear();
  for (const auto& a : input[2]) {
    if (a.is_array() && a.size() >= 3 && a[0] == "TENSOR") {
      CollectIntegers(a[1], r.task.shape);
      if (r.task.dtype.empty() && a[2].is_string()) r.task.dtype = a[2].get<std::string>();
    } else {
      CollectIntegers(a, r.task.shape);
    }
  }
  if (r.task.dtype.empty()) r.task.dtype = "unknown";
  r.target = input[0].get<std::string>();
  std::string cpu = TargetOption(r.target, "mcpu");
  if (cpu.empty()) cpu = TargetOption(r.target, "model");
  if (cpu.empty()) cpu = TargetOption(r.target, "arch");
  r.device = DeviceOf(o, r.target.substr(0, r.target.find(' ')), cpu);
  const json& index = j["config"]["index"];
  r.config_index = index.is_number_unsigned() ? index.get<uint64_t>()
                                              : static_cast<uint64_t>(index.get<int64_t>());
  for (const auto& e : j["config"]["entity"]) r.config_values[e[0].get<std::string>()] = e[2];
}

// A checked line's result: the times of a success, AutoTVM's error of a failure, the seconds the
// measurement took in all and when.
Status ReadAutoTvmResult(const json& result, Record& r) {
  const int64_t error_no = result[1].get<int64_t>();
  r.error = FromAutoTvmError(error_no);
  if (r.ok()) {
    for (const auto& c : result[0]) {
      if (!c.is_number()) return NotAutoTvm("cost " + JsonExcerpt(c));
      r.costs.push_back(c.get<double>());
    }
    r.mean = MeanOf(r.costs);
    if (r.mean <= 0) return NotAutoTvm("a success without a positive time");
  } else {
    r.message = "AutoTVM error " + std::to_string(error_no);
    if (error_no > 0 && error_no < 9) {
      r.message += std::string(" (") + kAutoTvmErrors[error_no] + ")";
    }
    const json& costs = result[0];
    if (!costs.empty() && costs[0].is_string()) r.message += ": " + costs[0].get<std::string>();
  }
  if (result.size() > 2 && result[2].is_number()) {
    const double all = result[2].get<double>();
    if (std::isfinite(all) && all >= 0) r.run_s = all;
  }
  if (result.size() > 3 && result[3].is_number()) {
    r.timestamp = UtcTimestampAt(result[3].get<double>());
  }
  return Status::Ok();
}

Expected<Record> FromAutoTvmLine(const json& j, const ForeignOptions& o) {
  CT_RETURN_IF_ERROR(CheckAutoTvmLine(j));
  Record r;
  r.tool = "AutoTVM";
  if (auto v = j.find("tvm_version"); v != j.end() && v->is_string()) {
    r.tool += " (TVM " + v->get<std::string>() + ")";
  }
  ReadAutoTvmInput(j, o, r);
  CT_RETURN_IF_ERROR(ReadAutoTvmResult(j["result"], r));
  r.source = {{"format", "autotvm"}, {"line", j}};
  return r;
}

// --- MetaSchedule -------------------------------------------------------------------------------

// A target as TVM's JSON form gives it ({"kind":"llvm","mcpu":"znver3",...}) written as options:
// "llvm -mcpu=znver3 -num-cores=2" (keys and tag left out, as are nested targets).
std::string TargetString(const json& t) {
  if (t.is_string()) return t.get<std::string>();
  if (!t.is_object()) return "";
  std::string s = t.value("kind", "unknown");
  for (const auto& [name, v] : t.items()) {
    if (name == "kind" || name == "keys" || name == "tag" || v.is_null() || v.is_object()) continue;
    std::string value;
    if (v.is_string()) {
      value = v.get<std::string>();
    } else if (v.is_array()) {
      for (const auto& e : v) {
        value += (value.empty() ? "" : ",") + (e.is_string() ? e.get<std::string>() : e.dump());
      }
    } else {
      value = v.dump();
    }
    if (!value.empty()) s += " -" + name + "=" + value;
  }
  return s;
}

Expected<Record> FromMetaScheduleLine(const json& j, const std::vector<std::string>& workloads,
                                      const ForeignOptions& o) {
  auto bad = [](const std::string& what) {
    return Status(ErrorCode::kInvalidArgument, "not a MetaSchedule tuning record (" + what + ")");
  };
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_array() ||
      j[1].size() < 4) {
    return bad("not [workload, [trace, run seconds, target, arguments]]");
  }
  const int64_t w = j[0].get<int64_t>();
  if (w < 0 || static_cast<size_t>(w) >= workloads.size()) {
    return bad("workload " + std::to_string(w) + " of " + std::to_string(workloads.size()));
  }
  const json& body = j[1];
  const json& trace = body[0];
  const json& run_secs = body[1];
  const json& target = body[2];
  const json& args = body[3];
  if (!trace.is_array()) return bad("the trace is not a list");
  if (!target.is_object() && !target.is_string()) return bad("target " + JsonExcerpt(target));
  if (!args.is_array()) return bad("the arguments are not a list");

  Record r;
  r.tool = "MetaSchedule";
  r.task.template_name = "metaschedule:" + workloads[static_cast<size_t>(w)];
  r.task.dtype.clear();
  for (const auto& a : args) {
    if (a.is_array() && a.size() >= 3 && a[0] == "TENSOR") {
      CollectIntegers(a[2], r.task.shape);
      if (r.task.dtype.empty() && a[1].is_string()) r.task.dtype = a[1].get<std::string>();
    }
  }
  if (r.task.dtype.empty()) r.task.dtype = "unknown";
  r.target = TargetString(target);
  std::string cpu;
  for (const char* name : {"mcpu", "arch", "model"}) {
    if (cpu.empty() && target.is_object() && target.contains(name) && target[name].is_string()) {
      cpu = target[name].get<std::string>();
    }
  }
  r.device = DeviceOf(o, r.target.substr(0, r.target.find(' ')), cpu);
  r.config_values = {{"trace", trace}};
  r.config_index = ContentIndex(trace);
  // MetaSchedule keeps a failed candidate with no times, or with 1e10 s (its mark of a failure).
  if (run_secs.is_array()) {
    for (const auto& c : run_secs) {
      if (c.is_number()) r.costs.push_back(c.get<double>());
    }
  }
  r.mean = MeanOf(r.costs);
  if (r.mean <= 0 || r.mean >= 1e9 || r.costs.size() != run_secs.size()) {
    r.costs.clear();
    r.mean = 0;
    r.error = TrialError::kRuntimeError;
    r.message = "MetaSchedule recorded no run time for it (a failed candidate)";
  }
  r.source = {{"format", "metaschedule"},
              {"workload", workloads[static_cast<size_t>(w)]},
              {"target", target},
              {"args_info", args}};
  return r;
}

// --- Kernel Tuner -------------------------------------------------------------------------------

// A knob value as scripts/log-to-kernel-tuner.py wrote it: a list joined by '-' ("3-96") is the
// list again; anything else as it is.
json UnjoinValue(const json& v) {
  if (!v.is_string()) return v;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.find('-') == std::string::npos || s.front() == '-') return v;
  json list = json::array();
  size_t start = 0;
  for (;;) {
    const size_t dash = s.find('-', start);
    const std::string part = s.substr(start, dash - start);
    char* end = nullptr;
    const long long n = std::strtoll(part.c_str(), &end, 10);
    if (!part.empty() && end && *end == '\0') {
      list.push_back(n);
    } else {
      list.push_back(part);
    }
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return list;
}

}  // namespace

std::string_view RecordsFormatName(RecordsFormat f) {
  switch (f) {
    case RecordsFormat::kAuto:
      return "auto";
    case RecordsFormat::kCrosstune:
      return "crosstune";
    case RecordsFormat::kAutoTvm:
      return "autotvm";
    case RecordsFormat::kMetaSchedule:
      return "metaschedule";
    case RecordsFormat::kKernelTuner:
      return "kernel-tuner";
  }
  return "auto";
}

std::string_view RecordsFormatTool(RecordsFormat f) {
  switch (f) {
    case RecordsFormat::kAutoTvm:
      return "AutoTVM";
    case RecordsFormat::kMetaSchedule:
      return "MetaSchedule";
    case RecordsFormat::kKernelTuner:
      return "Kernel Tuner";
    default:
      return "crosstune";
  }
}

std::optional<RecordsFormat> ParseRecordsFormat(std::string_view name) {
  for (RecordsFormat f : {RecordsFormat::kAuto, RecordsFormat::kCrosstune, RecordsFormat::kAutoTvm,
                          RecordsFormat::kMetaSchedule, RecordsFormat::kKernelTuner}) {
    if (RecordsFormatName(f) == name) return f;
  }
  return std::nullopt;
}

LogContents ParseAutoTvmLog(std::string_view text, const std::string& source,
                            const ForeignOptions& options) {
  LogContents out =
      ReadJsonLines(text, source, [&](const json& j) { return FromAutoTvmLine(j, options); });
  SayGuessedKind(options, out, source, "AutoTVM logs", out.warnings);
  return out;
}

Expected<LogContents> ParseMetaScheduleDatabase(std::string_view records,
                                                std::string_view workloads,
                                                const std::string& source,
                                                const ForeignOptions& options) {
  // The workload file: one [structural hash, serialized module] per line, numbered from 0.
  std::vector<std::string> hashes;
  size_t n = 0;
  for (std::string_view line : Lines(workloads)) {
    ++n;
    if (Blank(line)) continue;
    auto j = ParseJson(line, {.max_bytes = kMaxForeignBytes});
    if (!j.ok() || !j->is_array() || j->empty() ||
        !((*j)[0].is_string() || (*j)[0].is_number_integer())) {
      return Status(ErrorCode::kInvalidArgument,
                    source + ": workload line " + std::to_string(n) +
                        " is not [structural hash, module]: not a MetaSchedule database");
    }
    hashes.push_back((*j)[0].is_string() ? (*j)[0].get<std::string>() : (*j)[0].dump());
  }
  LogContents out = ReadJsonLines(
      records, source, [&](const json& j) { return FromMetaScheduleLine(j, hashes, options); });
  SayGuessedKind(options, out, source, "MetaSchedule databases", out.warnings);
  return out;
}

Expected<LogContents> ParseKernelTunerRecords(std::string text, const std::string& source,
                                              const ForeignOptions& options) {
  CT_ASSIGN_OR_RETURN(KernelTunerCache cache, ParseKernelTunerCache(std::move(text), source));
  const json& h = cache.header;
  const json ours = h.contains("crosstune") && h["crosstune"].is_object() ? h["crosstune"] : json();
  const bool is_ours = ours.is_object() && ours.contains("target") && ours["target"].is_string();
  const std::string kernel = h.value("kernel_name", std::string("kernel"));
  const std::string device_name = h.value("device_name", std::string());
  LogContents out;

  Record base;
  base.tool = "Kernel Tuner";
  if (h.contains("problem_size")) CollectIntegers(h["problem_size"], base.task.shape);
  if (is_ours) {
    base.task.template_name = kernel;
    base.task.dtype = ours.value("dtype", std::string("float32"));
    base.task.threads = ours.value("threads", 1);
    if (base.task.threads < 1 || base.task.threads > 4096) base.task.threads = 1;
    base.target = ours["target"].get<std::string>();
    std::string arch = ours.value("arch", std::string());
    if (arch.empty()) {
      const std::string triple = TargetOption(base.target, "mtriple");
      arch = triple.substr(0, triple.find('-'));
    }
    base.device = DeviceOf(options, arch, device_name);
    base.tool = ours.value("tool", std::string("crosstune")) + " (a Kernel Tuner cache)";
  } else {
    base.task.template_name = "kernel_tuner:" + kernel;
    base.task.dtype = "unknown";
    base.target = options.target.empty() ? "kernel_tuner" : options.target;
    base.device = DeviceOf(options, "unknown", device_name);
  }
  base.source = {{"format", "kernel-tuner"}, {"kernel_name", kernel}, {"device_name", device_name}};

  for (const ReplayPoint& p : cache.points) {
    Record r = base;
    r.config_values = json::object();
    if (is_ours && ours.contains("fixed") && ours["fixed"].is_object()) {
      r.config_values = ours["fixed"];
    }
    for (const auto& [name, v] : p.values.items()) {
      r.config_values[name] = is_ours ? UnjoinValue(v) : v;
    }
    r.config_index = ContentIndex(r.config_values);
    if (p.ok) {
      r.costs = !p.times_s.empty()
                    ? p.times_s
                    : (p.kernel_s ? std::vector<double>{*p.kernel_s} : std::vector<double>{});
      r.mean = p.kernel_s ? *p.kernel_s : MeanOf(r.costs);
      if (r.mean <= 0) {
        out.warnings.push_back(source + ": entry " + JsonExcerpt(p.values, 200) +
                               " has no time (its objective is not one): not imported");
        continue;
      }
    } else {
      r.error = p.failure == "CompilationFailedConfig" ? TrialError::kBuildError
                : p.failure == "InvalidConfig"         ? TrialError::kInvalidConfig
                                                       : TrialError::kRuntimeError;
      r.message = "Kernel Tuner: " + p.failure;
    }
    r.build_s = p.build_s.value_or(0);
    r.run_s = p.run_s.value_or(0);
    r.timestamp = p.timestamp;
    r.stopped_early = p.ok && p.stopped_early;
    out.records.push_back(std::move(r));
  }
  if (!is_ours && options.target.empty() && !out.records.empty()) {
    out.warnings.push_back(source +
                           ": a Kernel Tuner cache does not say what its kernel was built for: "
                           "filed under target \"kernel_tuner\" (--target names it)");
  }
  if (!is_ours) {
    SayGuessedKind(options, out, source, "Kernel Tuner caches", out.warnings);
  }
  return out;
}

Expected<RecordsFile> ReadRecordsFile(const std::string& path, const ForeignOptions& options) {
  RecordsFile file;
  RecordsFormat format = options.format;
  struct stat st {};
  const bool is_dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string name = path.substr(path.find_last_of('/') + 1);
  if (format == RecordsFormat::kAuto) {
    if (is_dir || name.find("tuning_record") != std::string::npos) {
      format = RecordsFormat::kMetaSchedule;
    } else {
      CT_ASSIGN_OR_RETURN(std::string head, ReadMaybeGz(path, kMaxRecordBytes + 1, true));
      size_t start = head.find_first_not_of(" \t\r\n");
      std::string first = start == std::string::npos ? "" : head.substr(start);
      first = first.substr(0, first.find('\n'));
      auto j = ParseJson(first, {.max_bytes = kMaxRecordBytes});
      if (j.ok() && j->is_object() && j->contains("task") && j->contains("config")) {
        format = RecordsFormat::kCrosstune;
      } else if (j.ok() && j->is_object() &&
                 ((j->contains("input") && j->contains("result")) ||
                  (j->contains("i") && j->contains("r")))) {
        format = RecordsFormat::kAutoTvm;
      } else if (j.ok() && j->is_array()) {
        format = RecordsFormat::kMetaSchedule;
      } else if (start != std::string::npos && head[start] == '{') {
        format = RecordsFormat::kKernelTuner;
      } else {
        return Status(ErrorCode::kInvalidArgument,
                      path +
                          ": not a file of tuning records that crosstune reads (our log, an "
                          "AutoTVM log, a MetaSchedule database or a Kernel Tuner cache)");
      }
    }
  }
  file.format = format;
  switch (format) {
    case RecordsFormat::kAuto:
    case RecordsFormat::kCrosstune: {
      CT_ASSIGN_OR_RETURN(file.log, ReadLog(path));
      return file;
    }
    case RecordsFormat::kAutoTvm: {
      CT_ASSIGN_OR_RETURN(std::string text, ReadMaybeGz(path, kMaxForeignBytes));
      file.log = ParseAutoTvmLog(text, path, options);
      return file;
    }
    case RecordsFormat::kMetaSchedule: {
      std::string records = path, workloads;
      if (is_dir) {
        records = path + "/database_tuning_record.json";
        workloads = path + "/database_workload.json";
      } else {
        const std::string dir = path.substr(0, path.size() - name.size());
        const size_t at = name.rfind("tuning_record");
        workloads = at == std::string::npos
                        ? dir + "database_workload.json"
                        : dir + name.substr(0, at) + "workload" + name.substr(at + 13);
      }
      CT_ASSIGN_OR_RETURN(std::string record_text, ReadMaybeGz(records, kMaxForeignBytes));
      auto workload_text = ReadMaybeGz(workloads, kMaxForeignBytes);
      if (!workload_text.ok()) {
        return Status(workload_text.status().code(),
                      path + ": a MetaSchedule database needs its workload file beside it: " +
                          workload_text.status().message());
      }
      CT_ASSIGN_OR_RETURN(file.log,
                          ParseMetaScheduleDatabase(record_text, *workload_text, records, options));
      return file;
    }
    case RecordsFormat::kKernelTuner: {
      CT_ASSIGN_OR_RETURN(std::string text, ReadMaybeGz(path, kMaxForeignBytes));
      CT_ASSIGN_OR_RETURN(file.log, ParseKernelTunerRecords(std::move(text), path, options));
      return file;
    }
  }
  return file;
}

json ToAutoTvmJson(const Record& r) {
  if (r.source.is_object() && r.source.value("format", "") == "autotvm" &&
      r.source.contains("line") && r.source["line"].is_object()) {
    return r.source["line"];
  }
  json args = json::array({r.task.shape, r.task.dtype, r.task.threads});
  json entity = json::array();
  for (const auto& [name, v] : r.config_values.items()) {
    entity.push_back(json::array({name, "ot", v}));
  }
  json costs = json::array();
  if (r.ok()) {
    for (double c : r.costs) costs.push_back(c);
    if (costs.empty()) costs.push_back(r.mean);
  } else {
    costs.push_back(1e9);  // AutoTVM's own mark of a failed measurement
  }
  double when = 0;
  if (std::tm tm{}; strptime(r.timestamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) != nullptr) {
    when = static_cast<double>(timegm(&tm));
  }
  return {
      {"input", json::array({r.target, "crosstune." + r.task.template_name, args, json::object()})},
      {"config", {{"index", r.config_index}, {"code_hash", nullptr}, {"entity", entity}}},
      {"result", json::array({costs, ToAutoTvmError(r.error), r.build_s + r.run_s, when})},
      {"version", 0.2},
      {"tvm_version", "crosstune " + std::string(kCrosstuneVersion)}};
}

}  // namespace crosstune::tuner
