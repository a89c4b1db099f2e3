// TuneWorkload: a network's tasks under one trial budget, steered by the TaskScheduler.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "crosstune/tuner/tune.h"

namespace crosstune::tuner {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Expected<WorkloadSummary> TuneWorkload(const std::vector<WorkloadLayer>& layers,
                                       const builder::Target& target,
                                       const std::vector<DeviceSpec>& devices,
                                       builder::BuildService& builder,
                                       const WorkloadTuneOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.tune.log_path.empty()) {
    return Status(ErrorCode::kInvalidArgument, "a workload needs a log (its tasks resume from it)");
  }
  if (options.round < 1) return Status(ErrorCode::kInvalidArgument, "round must be at least 1");
  std::vector<std::unique_ptr<Task>> tasks;
  std::vector<SchedulerTask> sched_tasks;
  for (const auto& layer : layers) {
    auto task = MakeTask(layer.template_name, layer.shape, target, {options.threads});
    if (!task.ok()) {
      return Status(task.status().code(),
                    options.name + " layer " + layer.name + ": " + task.status().message());
    }
    sched_tasks.push_back(
        {static_cast<double>(layer.count), (*task)->flops(), layer.template_name});
    tasks.push_back(std::move(task).value());
  }
  TaskScheduler scheduler(sched_tasks, options.scheduler);
  // Each task's search, opened at its first round and kept for the next ones.
  std::vector<std::unique_ptr<TuneJob>> jobs(tasks.size());

  WorkloadSummary summary;
  summary.tasks.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    summary.tasks[i].layer = layers[i];
    summary.tasks[i].id = tasks[i]->id();
  }

  // Resume: what the log already holds for each task on this target.
  const std::string target_text = target.ToString();
  auto log = ReadLog(options.tune.log_path);
  int total = 0;
  if (log.ok()) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      int n = 0;
      double best = TaskScheduler::kNoTime;
      for (const auto& r : log->records) {
        if (!(r.task == tasks[i]->id()) || r.target != target_text) continue;
        ++n;
        if (r.ok() && r.mean > 0) best = std::min(best, r.mean);
      }
      if (n > 0) scheduler.Update(i, n, best);
      summary.tasks[i].trials = n;
      total += n;
    }
  }

  std::vector<Record> fresh;
  while (total < options.trials) {
    if (options.tune.stop && options.tune.stop->load()) {
      summary.stopped = true;
      break;
    }
    const int pick = scheduler.Next();
    if (pick < 0) break;  // every task failed every round
    const auto i = static_cast<size_t>(pick);
    WorkloadTaskResult& result = summary.tasks[i];
    TuneOptions o = options.tune;
    o.trials = result.trials + std::min(options.round, options.trials - total);
    o.include_default = result.trials == 0;
    o.transfer_logs = {options.tune.log_path};
    o.workload = {{"name", options.name}, {"layer", layers[i].name}, {"count", layers[i].count}};
    // This round's records, for the other tasks' cost models (`fresh` outlives the jobs, which
    // keep the callback).
    fresh.clear();
    o.on_record = [&](const Record& r) {
      fresh.push_back(r);
      if (options.tune.on_record) options.tune.on_record(r);
    };
    Expected<TuneSummary> run = Status(ErrorCode::kInternal, "not run");
    if (!jobs[i]) {
      auto job = TuneJob::Open(*tasks[i], builder, o);
      ++result.opened;
      if (job.ok()) {
        jobs[i] = std::move(job).value();
      } else {
        run = job.status();
      }
    }
    if (jobs[i]) run = jobs[i]->Run(devices, o.trials, o.include_default);
    ++result.rounds;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (j != i && jobs[j]) jobs[j]->AddTransfer(*tasks[i], fresh);
    }
    double best = TaskScheduler::kNoTime;
    int now = o.trials;
    if (run.ok()) {
      now = run->trials_in_log;
      summary.measured += run->measured;
      summary.builds += run->builds;
      summary.build_cache_hits += run->build_cache_hits;
      summary.batch = std::max(summary.batch, run->batch);
      summary.planning.Add(run->planning);
      if (run->has_best) best = run->best.mean;
      if (run->stopped) summary.stopped = true;
    } else if (run.status().code() == ErrorCode::kDisconnected ||
               run.status().code() == ErrorCode::kNoDevice) {
      return run.status();  // no device left: the log keeps what was measured
    } else {
      result.error = run.status().message();
    }
    total += now - result.trials;
    result.trials = now;
    scheduler.Update(i, now, best);
    if (options.on_round) options.on_round(i, scheduler);
    if (summary.stopped) break;
  }

  // The results, from the log (this run's records and earlier ones).
  auto final_log = ReadLog(options.tune.log_path);
  std::vector<NetworkTask> tuned, untuned;
  for (size_t i = 0; i < tasks.size(); ++i) {
    WorkloadTaskResult& result = summary.tasks[i];
    const uint64_t default_index = tasks[i]->DefaultConfig().index();
    double default_s = TaskScheduler::kNoTime;
    int n = 0;
    if (final_log.ok()) {
      for (const auto& r : final_log->records) {
        if (!(r.task == tasks[i]->id()) || r.target != target_text) continue;
        ++n;
        if (!r.ok() || r.mean <= 0) continue;
        if (!result.has_best || r.mean < result.best.mean) {
          result.best = r;
          result.has_best = true;
        }
        if (r.config_index == default_index) default_s = std::min(default_s, r.mean);
      }
    }
    result.trials = n;
    result.best_seconds = result.has_best ? result.best.mean : TaskScheduler::kNoTime;
    const double count = layers[i].count;
    tuned.push_back({count, result.best_seconds});
    untuned.push_back({count, default_s});
    summary.trials_in_log += n;
  }
  const NetworkTime network = EstimateNetworkTime(tuned);
  if (network.complete()) {
    summary.network_seconds = network.seconds;
    for (size_t i = 0; i < tasks.size(); ++i) summary.tasks[i].share = network.shares[i];
  }
  summary.untuned_network_seconds = EstimateNetworkTime(untuned).seconds;
  summary.wall_s = Since(t0);
  return summary;
}

}  // namespace crosstune::tuner
