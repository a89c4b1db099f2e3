#include "crosstune/tuner/records.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "crosstune/builder/backend.h"
#include "crosstune/crypto.h"
#include "crosstune/json_error.h"
#include "crosstune/json_reader.h"
#include "crosstune/protocol.h"
#include "crosstune/tuner/input_file.h"

namespace crosstune::tuner {

namespace {
constexpr std::pair<TrialError, std::string_view> kErrorNames[] = {
    {TrialError::kOk, "ok"},
    {TrialError::kInvalidConfig, "InvalidConfig"},
    {TrialError::kBuildError, "BuildError"},
    {TrialError::kBuildTimeout, "BuildTimeout"},
    {TrialError::kLoadError, "LoadError"},
    {TrialError::kRemoteCrash, "RemoteCrash"},
    {TrialError::kRunTimeout, "RunTimeout"},
    {TrialError::kRuntimeError, "RuntimeError"},
    {TrialError::kWrongAnswer, "WrongAnswer"},
    {TrialError::kDeviceLost, "DeviceLost"},
};
}  // namespace

std::string_view TrialErrorName(TrialError e) {
  for (const auto& [code, name] : kErrorNames) {
    if (code == e) return name;
  }
  return "?";
}

std::optional<TrialError> ParseTrialError(std::string_view name) {
  for (const auto& [code, n] : kErrorNames) {
    if (n == name) return code;
  }
  return std::nullopt;
}

std::string TaskId::Key() const {
  std::string s = template_name + " ";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  s += " " + dtype;
  if (threads != 1) s += " threads=" + std::to_string(threads);
  return s;
}

nlohmann::json Record::ToJson() const {
  nlohmann::json j;
  j["v"] = version;
  j["tool"] = tool.empty() ? "crosstune " + std::string(kCrosstuneVersion) : tool;
  j["run"] = run_id;
  j["tuner"] = tuner;
  j["task"] = {{"template", task.template_name}, {"shape", task.shape}, {"dtype", task.dtype}};
  if (task.threads != 1) j["task"]["threads"] = task.threads;
  j["target"] = target;
  j["device"] = {
      {"name", device.name}, {"arch", device.arch}, {"cpu", device.cpu}, {"key", device.key}};
  if (device.cores != 0) j["device"]["cores"] = device.cores;
  if (device.memory_bytes != 0) j["device"]["memory_bytes"] = device.memory_bytes;
  if (!device.features.empty()) j["device"]["features"] = device.features;
  if (!device.driver.empty()) j["device"]["driver"] = device.driver;
  j["config"] = {{"index", config_index}, {"values", config_values}};
  if (!generator.empty()) j["generator"] = generator;
  j["flops"] = flops;
  j["costs"] = costs;
  j["mean"] = mean;
  j["error"] = TrialErrorName(error);
  j["message"] = message;
  j["build_s"] = build_s;
  j["run_s"] = run_s;
  if (build_cached) j["build_cached"] = *build_cached;
  if (stopped_early) j["stopped_early"] = true;
  j["timestamp"] = timestamp;
  if (!workload.is_null()) j["workload"] = workload;
  if (!source.is_null()) j["source"] = source;
  return j;
}

namespace {

// An integer field as T: a JSON integer within T's range. Anything else, a float included (even a
// whole one: converting one past T's range is undefined behaviour), is kInvalidArgument naming it.
template <typename T>
Expected<T> Integer(const nlohmann::json& v, const std::string& name) {
  if (v.is_number_unsigned() && std::in_range<T>(v.get<uint64_t>())) {
    return static_cast<T>(v.get<uint64_t>());
  }
  if (v.is_number_integer() && !v.is_number_unsigned() && std::in_range<T>(v.get<int64_t>())) {
    return static_cast<T>(v.get<int64_t>());
  }
  return Status(ErrorCode::kInvalidArgument,
                "not a record (" + name + " " + JsonExcerpt(v) + " is not an integer in range)");
}

}  // namespace

Expected<Record> Record::FromJson(const nlohmann::json& j) {
  try {
    Record r;
    CT_ASSIGN_OR_RETURN(r.version, Integer<int>(j.at("v"), "v"));
    if (r.version != 1) {
      return Status(ErrorCode::kVersionMismatch,
                    "record version " + std::to_string(r.version) + " (this tool reads 1)");
    }
    r.tool = j.value("tool", "");
    r.run_id = j.value("run", "");
    r.tuner = j.value("tuner", "");
    const auto& task = j.at("task");
    r.task.template_name = task.at("template").get<std::string>();
    const auto& shape = task.at("shape");
    if (!shape.is_array()) return Status(ErrorCode::kInvalidArgument, "not a record (task.shape)");
    for (const auto& d : shape) {
      CT_ASSIGN_OR_RETURN(int64_t size, Integer<int64_t>(d, "task.shape"));
      r.task.shape.push_back(size);
    }
    r.task.dtype = task.value("dtype", "float32");
    if (auto t = task.find("threads"); t != task.end()) {
      CT_ASSIGN_OR_RETURN(r.task.threads, Integer<int>(*t, "task.threads"));
    }
    if (r.task.threads < 1 || r.task.threads > 4096) {
      return Status(ErrorCode::kInvalidArgument,
                    "task threads " + std::to_string(r.task.threads) + " (1..4096)");
    }
    r.target = j.value("target", "");
    if (auto d = j.find("device"); d != j.end() && d->is_object()) {
      r.device.name = d->value("name", "");
      r.device.arch = d->value("arch", "");
      r.device.cpu = d->value("cpu", "");
      r.device.key = d->value("key", "");
      if (auto c = d->find("cores"); c != d->end()) {
        CT_ASSIGN_OR_RETURN(r.device.cores, Integer<uint32_t>(*c, "device.cores"));
      }
      if (auto m = d->find("memory_bytes"); m != d->end()) {
        CT_ASSIGN_OR_RETURN(r.device.memory_bytes, Integer<uint64_t>(*m, "device.memory_bytes"));
      }
      r.device.features = d->value("features", "");
      r.device.driver = d->value("driver", "");
    }
    const auto& config = j.at("config");
    CT_ASSIGN_OR_RETURN(r.config_index, Integer<uint64_t>(config.at("index"), "config.index"));
    r.config_values = config.value("values", nlohmann::json::object());
    r.generator = j.value("generator", "");
    r.flops = j.value("flops", 0.0);
    r.costs = j.value("costs", std::vector<double>{});
    r.mean = j.value("mean", 0.0);
    std::string error = j.at("error").get<std::string>();
    auto code = ParseTrialError(error);
    if (!code) return Status(ErrorCode::kInvalidArgument, "unknown error kind '" + error + "'");
    r.error = *code;
    r.message = j.value("message", "");
    r.build_s = j.value("build_s", 0.0);
    r.run_s = j.value("run_s", 0.0);
    if (auto c = j.find("build_cached"); c != j.end()) {
      if (!c->is_boolean()) {
        return Status(ErrorCode::kInvalidArgument,
                      "not a record (build_cached " + JsonExcerpt(*c) + " is not true or false)");
      }
      r.build_cached = c->get<bool>();
    }
    if (auto c = j.find("stopped_early"); c != j.end()) {
      if (!c->is_boolean()) {
        return Status(ErrorCode::kInvalidArgument,
                      "not a record (stopped_early " + JsonExcerpt(*c) + " is not true or false)");
      }
      r.stopped_early = c->get<bool>();
    }
    r.timestamp = j.value("timestamp", "");
    if (auto w = j.find("workload"); w != j.end() && w->is_object()) r.workload = *w;
    if (auto s = j.find("source"); s != j.end() && s->is_object()) r.source = *s;
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, "not a record (" + JsonErrorReason(e) + ")");
  }
}

std::string UtcTimestamp() {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return UtcTimestampAt(static_cast<double>(ms) / 1000.0);
}

std::string UtcTimestampAt(double unix_seconds) {
  if (!std::isfinite(unix_seconds) || unix_seconds < 0 || unix_seconds > 253402300799.0) return "";
  const auto whole = static_cast<std::time_t>(unix_seconds);
  const int ms = static_cast<int>(
      std::min(999L, std::lround((unix_seconds - static_cast<double>(whole)) * 1000.0)));
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, ms);
  return out;
}

RecordWriter::~RecordWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status(ErrorCode::kIoError, path + ": " + std::strerror(errno));
  }
  // A log whose last line was torn by a kill gets a newline first, so the next record starts a
  // line of its own instead of extending the broken one.
  off_t end = ::lseek(fd, 0, SEEK_END);
  if (end > 0) {
    int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    char last = '\n';
    if (rfd >= 0) {
      if (::pread(rfd, &last, 1, end - 1) != 1) last = '\n';
      ::close(rfd);
    }
    if (last != '\n' && ::write(fd, "\n", 1) != 1) {
      ::close(fd);
      return Status(ErrorCode::kIoError, path + ": " + std::strerror(errno));
    }
  }
  std::unique_ptr<RecordWriter> w(new RecordWriter());
  w->fd_ = fd;
  w->path_ = path;
  return w;
}

Status RecordWriter::Append(const Record& record) {
  std::string line = record.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::lock_guard<std::mutex> lock(mu_);
  // One write: O_APPEND makes it atomic against other appenders, and a kill leaves the line
  // either whole or absent (short writes only happen on a full disk, reported below).
  ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    return Status(ErrorCode::kIoError, path_ + ": record not written: " +
                                           (n < 0 ? std::strerror(errno) : "short write"));
  }
  return Status::Ok();
}

Status CheckInputFile(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return Status(ErrorCode::kNotFound, path + ": no such file");
  }
  if (ec) return Status(ErrorCode::kIoError, path + ": " + ec.message());
  if (st.type() == std::filesystem::file_type::directory) {
    return Status(ErrorCode::kInvalidArgument, path + ": is a directory");
  }
  if (st.type() != std::filesystem::file_type::regular &&
      st.type() != std::filesystem::file_type::fifo) {
    return Status(ErrorCode::kInvalidArgument, path + ": not a regular file or a pipe");
  }
  return Status::Ok();
}

Expected<LogContents> ReadLog(const std::string& path) {
  if (Status s = CheckInputFile(path); !s.ok()) {
    if (s.code() == ErrorCode::kNotFound)
      return Status(ErrorCode::kNotFound, path + ": no such log");
    return s;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kIoError, path + ": cannot open: " + std::strerror(errno));
  LogContents out;
  auto take = [&](const std::string& line, int line_no) {
    // Bounded (ParseJson): a record's workload, config values and shape are copied around.
    auto j = ParseJson(line, {.max_bytes = kMaxRecordBytes});
    if (!j.ok()) {
      const std::string why = j.status().message();
      out.warnings.push_back(path + ":" + std::to_string(line_no) +
                             (why.rfind("not JSON", 0) == 0
                                  ? ": skipped a line that is not JSON (torn by a kill?)"
                                  : ": skipped a line: " + why));
      return;
    }
    auto r = Record::FromJson(*j);
    if (!r.ok()) {
      out.warnings.push_back(path + ":" + std::to_string(line_no) + ": " + r.status().message());
      return;
    }
    out.records.push_back(std::move(r).value());
  };
  // Lines are read whole only up to the limit; the rest of a longer one is passed over, so
  // memory stays bounded whatever the file holds.
  std::string line;
  bool overlong = false;
  int line_no = 1;
  auto end_line = [&] {
    if (overlong) {
      out.warnings.push_back(path + ":" + std::to_string(line_no) +
                             ": skipped a line longer than " + std::to_string(kMaxRecordBytes) +
                             " bytes (the limit for one record)");
    } else if (!line.empty()) {
      take(line, line_no);
    }
    line.clear();
    overlong = false;
    ++line_no;
  };
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    size_t pos = 0;
    while (pos < n) {
      const char* nl = static_cast<const char*>(std::memchr(buf.data() + pos, '\n', n - pos));
      const size_t stop = nl ? static_cast<size_t>(nl - buf.data()) : n;
      if (!overlong) {
        if (line.size() + (stop - pos) > kMaxRecordBytes) {
          overlong = true;
          line.clear();
        } else {
          line.append(buf.data() + pos, stop - pos);
        }
      }
      pos = stop;
      if (nl) {
        end_line();
        ++pos;
      }
    }
  }
  if (in.bad()) return Status(ErrorCode::kIoError, path + ": cannot read");
  if (overlong || !line.empty()) end_line();
  return out;
}

std::string DeviceKind(const DeviceId& device) {
  if (device.arch.empty() && device.cpu.empty()) return "";
  return device.arch + "/" + device.cpu;
}

DeviceId DeviceIdOf(const msg::DeviceInfo& device, const builder::Target& target, std::string name,
                    std::string key) {
  builder::Hardware hw = target.backend().RunsOn(device);
  DeviceId id{std::move(name), std::move(hw.arch), std::move(hw.model), std::move(key)};
  const msg::GpuInfo* gpu = device.gpus.empty() ? nullptr : &device.gpus.front();
  if (gpu && id.arch == gpu->arch && id.cpu == gpu->name) {
    id.cores = gpu->multiprocessors;
    id.memory_bytes = gpu->memory_bytes;
    id.driver = gpu->driver;
  } else {
    id.cores = device.cores;
    id.memory_bytes = device.memory_bytes;
    if (!device.cpu_features.empty()) {
      std::vector<std::string> names = device.cpu_features;
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      std::string joined;
      for (const auto& n : names) joined += (joined.empty() ? "" : ",") + n;
      id.features = Sha256Hex(joined).substr(0, 16);
    }
  }
  return id;
}

std::string FingerprintText(const DeviceId& device) {
  std::vector<std::string> parts;
  if (device.cores != 0) {
    parts.push_back(fmt::format("{} core{}", device.cores, device.cores == 1 ? "" : "s"));
  }
  if (device.memory_bytes != 0) {
    parts.push_back(fmt::format(
        "{:.1f} GiB", static_cast<double>(device.memory_bytes) / static_cast<double>(1ull << 30)));
  }
  if (!device.features.empty()) parts.push_back("features " + device.features);
  if (!device.driver.empty()) parts.push_back("driver " + device.driver);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string DeviceKind(const msg::DeviceInfo& device, const builder::Target& target) {
  return DeviceKind(DeviceIdOf(device, target));
}

std::vector<Record> BestRecords(const std::vector<Record>& records) {
  std::vector<Record> best;
  std::map<std::string, size_t> slot;
  for (const auto& r : records) {
    if (!r.ok() || r.mean <= 0 || r.stopped_early) continue;  // a lower bound: not a measurement
    std::string key = r.task.Key() + "|" + r.target + "|" + DeviceKind(r);
    auto it = slot.find(key);
    if (it == slot.end()) {
      slot[key] = best.size();
      best.push_back(r);
    } else if (r.mean < best[it->second].mean) {
      best[it->second] = r;
    }
  }
  return best;
}

}  // namespace crosstune::tuner
