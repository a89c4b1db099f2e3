// The results of Tune() and TuneWorkload() as JSON objects (`crosstune tune --json`).
#include <algorithm>

#include "crosstune/timing.h"
#include "crosstune/tuner/tune.h"

namespace crosstune::tuner {
namespace {

using nlohmann::json;

json ErrorsJson(const std::map<TrialError, int>& errors) {
  json j = json::object();
  for (const auto& [kind, n] : errors) j[std::string(TrialErrorName(kind))] = n;
  return j;
}

// Milliseconds, or null for kNoTime.
json Milliseconds(double seconds) {
  return seconds == TaskScheduler::kNoTime ? json(nullptr) : json(seconds * 1e3);
}

// A run's builds and how many the build cache served; hit_rate is null when nothing was built.
json BuildCacheJson(int builds, int hits) {
  return {{"builds", builds},
          {"hits", hits},
          {"hit_rate", builds > 0 ? json(static_cast<double>(hits) / builds) : json(nullptr)}};
}

// The tuner's planning time of a run (or a network's rounds) of `wall_s` seconds.
json PlanningJson(const PlanningTime& p, double wall_s) {
  return {{"proposed", p.proposed},
          {"refit_s", p.refit_s},
          {"propose_s", p.propose_s},
          {"seconds", p.seconds()},
          {"ms_per_proposal", p.proposed > 0 ? json(p.ms_per_proposal()) : json(nullptr)},
          {"wall_fraction", wall_s > 0 ? p.seconds() / wall_s : 0.0},
          {"waited_s", p.waited_s}};
}

// How the candidates were timed (the time evaluator's options).
json TimingJson(const TimingOptions& t) {
  return {{"number", t.number},
          {"repeat", t.repeat},
          {"min_repeat_ms", t.min_repeat_ms},
          {"cooldown_ms", t.cooldown_ms},
          {"flush_cache", t.flush_cache}};
}

}  // namespace

double TuneSummary::device_busy_fraction() const {
  return wall_s > 0 ? device_busy_s / (wall_s * std::max(1, devices)) : 0;
}

json TuneReport(const Task& task, const TuneOptions& options, const TuneSummary& s) {
  json j = {{"task",
             {{"template", task.id().template_name},
              {"shape", task.id().shape},
              {"dtype", task.id().dtype}}},
            {"target", task.target().ToString()},
            {"tuner", options.tuner},
            {"trials_in_log", s.trials_in_log},
            {"resumed", s.resumed},
            {"stale", s.stale},
            {"measured", s.measured},
            {"errors", ErrorsJson(s.errors)},
            {"wall_s", s.wall_s},
            {"devices", s.devices},
            {"device_busy_fraction", s.device_busy_fraction()},
            {"device_busy_s", s.device_busy_s},
            {"stopped_early", s.stopped_early},
            {"stop_losers", options.stop_losers},
            {"batch", s.batch},
            {"timing", TimingJson(options.measure.timing)},
            {"planning", PlanningJson(s.planning, s.wall_s)},
            {"build_cache", BuildCacheJson(s.builds, s.build_cache_hits)},
            {"stopped", s.stopped},
            {"early_stopped", s.early_stopped},
            {"log", options.log_path}};
  if (!s.farm_kind.empty()) {
    j["farm"] = {{"device_kind", s.farm_kind},
                 {"resumed", s.farm_resumed},
                 {"elsewhere", s.farm_elsewhere},
                 {"unsent", s.farm_unsent}};
    if (!s.warm_kind.empty()) {
      nlohmann::json warm = {{"device_kind", s.warm_kind}, {"records", s.warm_records}};
      if (!s.warm_target.empty()) warm["target"] = s.warm_target;
      if (s.warm_trust) {
        warm["judged"] = s.warm_trust->judged;
        warm["trusted"] = s.warm_trust->trusted;
        warm["compared"] = s.warm_trust->compared;
        warm["kendall_tau"] = s.warm_trust->tau;
      }
      j["farm"]["warm_start"] = warm;
    }
  }
  if (s.has_default) {
    j["default"] = {{"gflops", s.default_record.gflops()},
                    {"mean_s", s.default_record.mean},
                    {"config", s.default_record.config_values},
                    {"error", TrialErrorName(s.default_record.error)}};
  }
  if (s.has_best) {
    j["best"] = {{"gflops", s.best.gflops()},
                 {"mean_s", s.best.mean},
                 {"config", s.best.config_values},
                 {"index", s.best.config_index},
                 {"device", s.best.device.name}};
  }
  return j;
}

json WorkloadReport(const WorkloadTuneOptions& options, const builder::Target& target,
                    const WorkloadSummary& s) {
  json tasks = json::array();
  for (const auto& t : s.tasks) {
    tasks.push_back({{"layer", t.layer.name},
                     {"template", t.layer.template_name},
                     {"shape", t.layer.shape},
                     {"count", t.layer.count},
                     {"trials", t.trials},
                     {"best_ms", Milliseconds(t.best_seconds)},
                     {"share", t.share},
                     {"gflops", t.has_best ? t.best.gflops() : 0.0},
                     {"rounds", t.rounds},
                     {"opened", t.opened},
                     {"error", t.error}});
  }
  return {{"workload", options.name},
          {"target", target.ToString()},
          {"threads", options.threads},
          {"trials_in_log", s.trials_in_log},
          {"measured", s.measured},
          {"network_ms", Milliseconds(s.network_seconds)},
          {"untuned_network_ms", Milliseconds(s.untuned_network_seconds)},
          {"wall_s", s.wall_s},
          {"batch", s.batch},
          {"timing", TimingJson(options.tune.measure.timing)},
          {"planning", PlanningJson(s.planning, s.wall_s)},
          {"build_cache", BuildCacheJson(s.builds, s.build_cache_hits)},
          {"stopped", s.stopped},
          {"tasks", tasks},
          {"log", options.tune.log_path}};
}

}  // namespace crosstune::tuner
