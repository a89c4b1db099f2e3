#include "crosstune/tracker/tune_runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "crosstune/text.h"
#include "crosstune/tracker/status_page.h"

namespace crosstune::tracker {
namespace {

constexpr size_t kMaxIdBytes = 64;
constexpr size_t kMaxTaskBytes = 256;
constexpr size_t kMaxErrorKinds = 16;
constexpr size_t kMaxErrorKindBytes = 32;
constexpr size_t kMaxLeases = msg::kMaxTuneProgressLeases;

Status BadProgress(const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "tune progress: " + what);
}

Status CheckText(const char* field, const std::string& s, size_t max, bool allow_empty) {
  if (!allow_empty && s.empty()) return BadProgress(std::string(field) + " is empty");
  if (s.size() > max) {
    return BadProgress(fmt::format("{} is {} bytes (at most {})", field, s.size(), max));
  }
  if (!IsValidUtf8(s)) return BadProgress(std::string(field) + " is not UTF-8");
  return Status::Ok();
}

nlohmann::json RunJson(const std::string& run_id, const std::string& holder, const std::string& key,
                       const std::string& task, const std::vector<std::string>& devices,
                       uint32_t trials, uint32_t total, uint32_t measured, double best, double rate,
                       const std::map<std::string, uint32_t>& errors,
                       const std::vector<std::pair<uint32_t, double>>& curve, int64_t started,
                       int64_t updated, bool finished, uint32_t stopped_early,
                       const std::string& warm_from) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [t, g] : curve) points.push_back({t, g});
  return {{"run_id", run_id},
          {"holder", holder},
          {"key", key},
          {"task", task},
          {"devices", devices},
          {"trials", trials},
          {"total", total},
          {"measured", measured},
          {"best_gflops", best},
          {"rate", rate},
          {"errors", errors},
          {"curve", points},
          {"started_unix_ms", started},
          {"updated_unix_ms", updated},
          {"finished", finished},
          {"stopped_early", stopped_early},
          {"warm_from", warm_from}};
}

}  // namespace

Status ValidateTuneProgress(const msg::TuneProgress& p) {
  CT_RETURN_IF_ERROR(CheckText("run id", p.run_id, kMaxIdBytes, false));
  CT_RETURN_IF_ERROR(CheckText("task", p.task, kMaxTaskBytes, false));
  CT_RETURN_IF_ERROR(CheckText("warm start's device kind", p.warm_from, kMaxTaskBytes, true));
  if (p.lease_tokens.empty()) return BadProgress("names no lease");
  if (p.lease_tokens.size() > kMaxLeases) {
    return BadProgress(
        fmt::format("names {} leases (at most {})", p.lease_tokens.size(), kMaxLeases));
  }
  for (const auto& t : p.lease_tokens) CT_RETURN_IF_ERROR(CheckText("lease token", t, 128, false));
  if (p.errors.size() > kMaxErrorKinds) {
    return BadProgress(fmt::format("{} error kinds (at most {})", p.errors.size(), kMaxErrorKinds));
  }
  for (const auto& [kind, n] : p.errors) {
    CT_RETURN_IF_ERROR(CheckText("error kind", kind, kMaxErrorKindBytes, false));
  }
  for (double v : {p.best_gflops, p.rate}) {
    if (!std::isfinite(v) || v < 0) return BadProgress("a figure is negative or not finite");
  }
  if (p.total > 0 && p.trials > p.total + p.total)
    return BadProgress("more trials than twice the goal");
  return Status::Ok();
}

Status TuneRuns::Update(Clock::time_point now, int64_t unix_ms, const std::string& holder,
                        const std::string& key, const std::vector<std::string>& devices,
                        const msg::TuneProgress& report) {
  auto it = running_.find(report.run_id);
  if (it == running_.end()) {
    if (running_.size() >= kMaxRunning) {
      return Status(ErrorCode::kBusy,
                    fmt::format("tune progress: {} runs are reporting already", kMaxRunning));
    }
    Run run;
    run.run_id = report.run_id;
    run.started_unix_ms = unix_ms;
    run.last_report = now;
    it = running_.emplace(report.run_id, std::move(run)).first;
  }
  Run& run = it->second;
  if (!run.lease_tokens.empty() &&
      std::none_of(report.lease_tokens.begin(), report.lease_tokens.end(), [&](const auto& t) {
        return std::find(run.lease_tokens.begin(), run.lease_tokens.end(), t) !=
               run.lease_tokens.end();
      })) {
    return Status(ErrorCode::kUnauthorized,
                  "tune progress: the run id is another run's (it names none of its leases)");
  }
  double credit =
      std::min(kReportBurst,
               run.report_credit + std::chrono::duration<double>(now - run.last_report).count());
  if (!report.finished && credit < 1) {
    return Status(ErrorCode::kBusy,
                  fmt::format("tune progress: at most one report a second per run (bursts of {})",
                              kReportBurst));
  }
  run.report_credit = std::max(0.0, credit - 1);
  run.last_report = now;
  run.updated_unix_ms = unix_ms;
  run.holder = holder;
  run.key = key;
  run.devices = devices;
  run.lease_tokens = report.lease_tokens;
  run.task = report.task;
  run.trials = report.trials;
  run.total = report.total;
  run.measured = report.measured;
  run.rate = report.rate;
  run.errors = report.errors;
  run.stopped_early = report.stopped_early;
  run.warm_from = report.warm_from;
  run.best_gflops = std::max(run.best_gflops, report.best_gflops);
  if (run.curve.empty() || run.curve.back().first != report.trials ||
      run.curve.back().second != run.best_gflops) {
    run.curve.emplace_back(report.trials, run.best_gflops);
    if (run.curve.size() > kMaxCurvePoints) {
      // Keep every other point, and always the newest.
      std::vector<std::pair<uint32_t, double>> kept;
      for (size_t i = 0; i < run.curve.size(); i += 2) kept.push_back(run.curve[i]);
      if (kept.back() != run.curve.back()) kept.push_back(run.curve.back());
      run.curve = std::move(kept);
    }
  }
  if (report.finished) {
    run.finished = true;
    finished_.push_back(std::move(run));
    running_.erase(it);
    while (finished_.size() > kMaxFinished) finished_.pop_front();
  }
  return Status::Ok();
}

void TuneRuns::Expire(Clock::time_point now) {
  for (auto it = running_.begin(); it != running_.end();) {
    if (now - it->second.last_report >= kSilentAfter) {
      it->second.finished = true;
      finished_.push_back(std::move(it->second));
      it = running_.erase(it);
      while (finished_.size() > kMaxFinished) finished_.pop_front();
    } else {
      ++it;
    }
  }
}

nlohmann::json TuneRuns::ToJson(Clock::time_point) const {
  nlohmann::json out = nlohmann::json::array();
  auto add = [&](const Run& r) {
    out.push_back(RunJson(r.run_id, r.holder, r.key, r.task, r.devices, r.trials, r.total,
                          r.measured, r.best_gflops, r.rate, r.errors, r.curve, r.started_unix_ms,
                          r.updated_unix_ms, r.finished, r.stopped_early, r.warm_from));
  };
  std::vector<const Run*> running;
  for (const auto& [id, r] : running_) running.push_back(&r);
  std::sort(running.begin(), running.end(),
            [](const Run* a, const Run* b) { return a->started_unix_ms > b->started_unix_ms; });
  for (const Run* r : running) add(*r);
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it) add(*it);
  return out;
}

void TuneRuns::AppendMetrics(std::string* out) const {
  auto family = [&](const char* name, const char* type, const char* help) {
    *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("crosstune_tune_runs_running", "gauge", "Tune runs reporting progress now.");
  *out += fmt::format("crosstune_tune_runs_running {}\n", running_.size());
  auto labels = [](const Run& r) {
    std::string devices;
    for (const auto& d : r.devices) devices += (devices.empty() ? "" : ",") + d;
    return fmt::format("run=\"{}\",task=\"{}\",key=\"{}\",devices=\"{}\"",
                       PrometheusLabel(r.run_id), PrometheusLabel(r.task), PrometheusLabel(r.key),
                       PrometheusLabel(devices));
  };
  family("crosstune_tune_trials", "gauge", "Trials of a running tune run's task in its log.");
  for (const auto& [id, r] : running_) {
    *out += fmt::format("crosstune_tune_trials{{{}}} {}\n", labels(r), r.trials);
  }
  family("crosstune_tune_best_gflops", "gauge", "The best GFLOP/s a running tune run has found.");
  for (const auto& [id, r] : running_) {
    *out += fmt::format("crosstune_tune_best_gflops{{{}}} {}\n", labels(r), r.best_gflops);
  }
  family("crosstune_tune_trials_per_second", "gauge", "A running tune run's measuring rate.");
  for (const auto& [id, r] : running_) {
    *out += fmt::format("crosstune_tune_trials_per_second{{{}}} {}\n", labels(r), r.rate);
  }
  family("crosstune_tune_errors", "gauge", "A running tune run's failed trials, by kind.");
  for (const auto& [id, r] : running_) {
    for (const auto& [kind, n] : r.errors) {
      *out += fmt::format("crosstune_tune_errors{{{},kind=\"{}\"}} {}\n", labels(r),
                          PrometheusLabel(kind), n);
    }
  }
}

double UsageHistory::UsedSince(const Series* s, double busy) {
  // A device seen for the first time registered within this bucket, and one whose count
  // restarted (re-registered) restarted within it: all its count is this bucket's.
  return s == nullptr || busy < s->last_busy ? busy : busy - s->last_busy;
}

void UsageHistory::Sample(Clock::time_point now, const std::map<std::string, double>& busy) {
  if (!started_) {
    started_ = true;
    last_ = now;
    for (const auto& [name, b] : busy) series_[name].last_busy = b;
    return;
  }
  double dt = std::chrono::duration<double>(now - last_).count();
  if (dt < static_cast<double>(kBucket.count())) return;
  last_ = now;
  for (const auto& [name, b] : busy) {
    auto it = series_.find(name);
    double used = UsedSince(it == series_.end() ? nullptr : &it->second, b);
    Series& s = series_[name];
    s.last_busy = b;
    s.fractions.push_back(std::clamp(used / dt, 0.0, 1.0));
    while (s.fractions.size() > kBuckets) s.fractions.pop_front();
  }
  // Devices gone for an hour leave the chart.
  for (auto it = series_.begin(); it != series_.end();) {
    if (!busy.count(it->first)) {
      it->second.fractions.push_back(0);
      while (it->second.fractions.size() > kBuckets) it->second.fractions.pop_front();
      bool idle = std::all_of(it->second.fractions.begin(), it->second.fractions.end(),
                              [](double f) { return f == 0; });
      if (idle && it->second.fractions.size() == kBuckets) {
        it = series_.erase(it);
        continue;
      }
    }
    ++it;
  }
}

nlohmann::json UsageHistory::ToJson() const {
  nlohmann::json devices = nlohmann::json::object();
  for (const auto& [name, s] : series_) {
    devices[name] = std::vector<double>(s.fractions.begin(), s.fractions.end());
  }
  return {{"bucket_seconds", kBucket.count()}, {"devices", devices}};
}

nlohmann::json UsageHistory::ToJson(Clock::time_point now,
                                    const std::map<std::string, double>& busy) const {
  nlohmann::json j = ToJson();
  double dt = started_ ? std::chrono::duration<double>(now - last_).count() : 0;
  if (dt < 1) return j;  // too short a share to mean anything
  for (const auto& [name, b] : busy) {
    auto it = series_.find(name);
    double used = UsedSince(it == series_.end() ? nullptr : &it->second, b);
    if (!j["devices"].contains(name)) j["devices"][name] = nlohmann::json::array();
    j["devices"][name].push_back(std::clamp(used / dt, 0.0, 1.0));
  }
  j["open_bucket_seconds"] = dt;
  return j;
}

}  // namespace crosstune::tracker
