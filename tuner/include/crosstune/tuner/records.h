// Tuning records: one JSON line per measurement, appended and flushed as it comes.
//
//   {"v":1,"tool":"crosstune 0.1.0","run":"...","tuner":"xgb",
//    "task":{"template":"matmul","shape":[512,512,512],"dtype":"float32"},
//    "target":"llvm -mtriple=x86_64-linux-gnu -mcpu=...","device":{"name":"local","arch":"x86_64",
//    "cpu":"znver4","key":""},"config":{"index":123,"values":{"mr":6,...}},"flops":268435456,
//    "costs":[0.0012,...],"mean":0.0012,"error":"ok","message":"","build_s":0.02,"run_s":0.4,
//    "build_cached":false,"timestamp":"2026-11-30T10:00:00.123Z"}
//
// `error` is "ok" or one of the TrialError names; `message` then holds the whole text (compiler
// diagnostics, the signal and function of a crash). Each record is written with one write(2) on
// a file opened O_APPEND, so a process killed at any point leaves whole lines only, and a reader
// skips (and reports) a torn last line rather than failing.
//
// Thread-safety: a RecordWriter may be shared by threads (appends are serialised); the free
// functions are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/messages_fwd.h"
#include "crosstune/status.h"

namespace crosstune::tuner {

enum class TrialError {
  kOk,
  kInvalidConfig,  // a constraint or a device limit refused it before any compile
  kBuildError,     // the compiler's diagnostics in the message
  kBuildTimeout,
  kLoadError,    // upload or load refused (wrong arch, missing symbol, ...)
  kRemoteCrash,  // the kernel died by a signal: which one, in which function
  kRunTimeout,
  kRuntimeError,  // the kernel returned non-zero
  kWrongAnswer,   // output differs from the reference
  kDeviceLost,    // the device went away mid-measurement (the candidate is requeued)
};
std::string_view TrialErrorName(TrialError e);
std::optional<TrialError> ParseTrialError(std::string_view name);

struct TaskId {
  std::string template_name;
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  // Threads the kernel runs with (its parallel loops; kernel_abi.h). Part of the task: a config's
  // time with 1 thread says little about the same config with 4.
  int threads = 1;
  // "matmul 512,512,512 float32" (" threads=4" when more than one): one task's records share it.
  std::string Key() const;
  bool operator==(const TaskId&) const = default;
};

struct DeviceId {
  std::string name;  // "local", the tracker's device name, or host:port
  std::string arch;
  std::string cpu;
  std::string key;  // tracker key, if any
  // The rest of the device's fingerprint, kept with each record and shown with it (0 or empty:
  // not known, as in logs from before them); records are found by ARCH/CPU (DeviceKind) and the
  // target, which names the CPU features a kernel was built for. `cores`: the CPU's (a GPU's
  // multiprocessors for a CUDA target); `memory_bytes`: the host's (the GPU's own); `features`:
  // the first 16 hex digits of the SHA-256 of the CPU's feature names, sorted, joined by ','
  // (empty for a GPU), so that two CPUs of one model name with other features tell apart.
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
  std::string features{};
  std::string driver{};  // a GPU's: the CUDA driver's version ("13.0")
  bool operator==(const DeviceId&) const = default;
};
// "2 cores, 24.0 GiB, features 0123456789abcdef" or "132 cores, 79.6 GiB, driver 13.0" (what of
// it is known; empty when nothing is).
std::string FingerprintText(const DeviceId& device);

struct Record {
  int version = 1;
  std::string tool;
  std::string run_id;
  std::string tuner;
  TaskId task;
  std::string target;
  DeviceId device;
  uint64_t config_index = 0;
  nlohmann::json config_values = nlohmann::json::object();
  double flops = 0;
  std::vector<double> costs;  // seconds per call, one per round
  double mean = 0;            // seconds; 0 when failed
  TrialError error = TrialError::kOk;
  std::string message;
  double build_s = 0;
  double run_s = 0;
  // Whether the build came from the build cache (`build_cached`); unset for a config refused
  // before any build, and in logs from before the field (then not written).
  std::optional<bool> build_cached;
  // The device stopped timing it after its first rounds (`stopped_early`, written only when
  // true): they were all slower than the best so far by more than the noise allows, so `mean` is
  // "at least": a lower bound on its time. Still ok; never the task's best.
  bool stopped_early = false;
  std::string timestamp;  // UTC ISO 8601
  // GeneratorHash of the code that was measured (16 hex digits); empty in logs from before it.
  // A record whose config the template now generates differently is not that config any more.
  std::string generator;
  // For a task tuned as part of a network (tune --workload): {"name":"resnet50",
  // "layer":"layer1.0.conv2","count":3}. Null otherwise (and then not written).
  nlohmann::json workload;
  // A record another tool measured, imported (foreign_records.h): {"format":"autotvm",...}, with
  // what that tool's file held that ours does not. Null for ours (and then not written).
  nlohmann::json source;

  bool ok() const { return error == TrialError::kOk; }
  double gflops() const { return ok() && mean > 0 ? flops / mean / 1e9 : 0; }
  nlohmann::json ToJson() const;
  static Expected<Record> FromJson(const nlohmann::json& j);
  // Every field equal (doubles exactly): what a round trip through ToJson/FromJson keeps.
  bool operator==(const Record&) const = default;
};

// "2026-11-30T10:00:00.123Z" for now.
std::string UtcTimestamp();
// The same for `unix_seconds` since the epoch (to the millisecond); empty for one that is no time
// (negative, not finite, past the year 9999).
std::string UtcTimestampAt(double unix_seconds);

class RecordWriter {
 public:
  ~RecordWriter();
  static Expected<std::unique_ptr<RecordWriter>> Open(const std::string& path);
  Status Append(const Record& record);
  const std::string& path() const { return path_; }

 private:
  RecordWriter() = default;
  std::mutex mu_;
  int fd_ = -1;
  std::string path_;
};

// One record (one line of a log) as JSON text, at most: 10,000 costs fit in it several times.
inline constexpr size_t kMaxRecordBytes = 1u << 20;

struct LogContents {
  std::vector<Record> records;
  // "mm.jsonl:17: not a record (...)": lines skipped, a torn last line among them.
  std::vector<std::string> warnings;
};

// Reads every record of a log: NotFound, or CheckInputFile's error (input_file.h). Bad lines, and
// lines over kMaxRecordBytes (read in bounded memory), are skipped with a warning, never an error.
Expected<LogContents> ReadLog(const std::string& path);

// The kind of device a record was measured on: "ARCH/CPU" ("aarch64/cortex-a72"), empty when the
// record names neither.
std::string DeviceKind(const DeviceId& device);
inline std::string DeviceKind(const Record& record) { return DeviceKind(record.device); }

// The device that runs a kernel for `target` when it runs on `device`, as its records name it
// (the target's backend says what: the CPU for a CPU target, the first GPU for a CUDA one), with
// the name and tracker key the record gives it.
DeviceId DeviceIdOf(const msg::DeviceInfo& device, const builder::Target& target,
                    std::string name = "", std::string key = "");
// Its kind: the one function that tells, from what a server reports, which records were
// measured on this kind of device ("x86_64/AMD EPYC 9R14"; "sm_90/NVIDIA H100" for a CUDA
// target). model::CompileOptions::device_kind takes it.
std::string DeviceKind(const msg::DeviceInfo& device, const builder::Target& target);

// The best (lowest mean) successful record per task, target and device kind, in first-seen order:
// the devices of one tracker key can differ (a Pi 4 and a Pi 5 under "rpi"), and the config
// fastest on one is not the one to ship to the other.
std::vector<Record> BestRecords(const std::vector<Record>& records);

}  // namespace crosstune::tuner
