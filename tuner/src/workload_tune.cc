// TuneWorkload: a network's tasks under one trial budget, steered by the TaskScheduler.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "crosstune/tuner/tune.h"

namespace crosstune::tuner {
namespace {

// A network's tuning under one budget: a task per layer, the scheduler that picks each round's
// task, each task's search (opened at its first round and kept for the next ones) and the
// summary it fills. TuneWorkload's steps: MakeTasks, Resume, RunRounds, Results.
class NetworkRounds {
 public:
  NetworkRounds(const std::vector<WorkloadLayer>& layers, const builder::Target& target,
                const std::vector<DeviceSpec>& devices, builder::BuildService& builder,
                const WorkloadTuneOptions& options)
      : layers_(layers),
        target_(target),
        target_text_(target.ToString()),
        devices_(devices),
        builder_(builder),
        options_(options) {}

  // A task per layer (an error names the layer whose template cannot make it), the scheduler
  // over them, and their results' layer and id.
  Status MakeTasks() {
    std::vector<SchedulerTask> sched_tasks;
    for (const auto& layer : layers_) {
      auto task = MakeTask(layer.template_name, layer.shape, target_, {options_.threads});
      if (!task.ok()) {
        return Status(task.status().code(),
                      options_.name + " layer " + layer.name + ": " + task.status().message());
      }
      sched_tasks.push_back(
          {static_cast<double>(layer.count), (*task)->flops(), layer.template_name});
      tasks_.push_back(std::move(task).value());
    }
    scheduler_.emplace(sched_tasks, options_.scheduler);
    jobs_.resize(tasks_.size());
    summary_.tasks.resize(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
      summary_.tasks[i].layer = layers_[i];
      summary_.tasks[i].id = tasks_[i]->id();
    }
    return Status::Ok();
  }

  // Resume: what the log already holds for each task on this target.
  void Resume() {
    auto log = ReadLog(options_.tune.log_path);
    if (!log.ok()) return;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      int n = 0;
      double best = TaskScheduler::kNoTime;
      for (const auto& r : log->records) {
        if (!(r.task == tasks_[i]->id()) || r.target != target_text_) continue;
        ++n;
        if (r.ok() && r.mean > 0) best = std::min(best, r.mean);
      }
      if (n > 0) scheduler_->Update(i, n, best);
      summary_.tasks[i].trials = n;
      total_ += n;
    }
  }

  // Rounds for the tasks the scheduler picks until the budget is spent, every task gave up or
  // the run is stopped. An error when no device is left (the log keeps what was measured).
  Status RunRounds() {
    while (total_ < options_.trials) {
      if (options_.tune.stop && options_.tune.stop->load()) {
        summary_.stopped = true;
        break;
      }
      const int pick = scheduler_->Next();
      if (pick < 0) break;  // every task failed every round
      const auto i = static_cast<size_t>(pick);
      const TuneOptions o = RoundOptions(i);
      const Expected<TuneSummary> run = RunRound(i, o);
      CT_RETURN_IF_ERROR(Count(i, o, run));
      if (summary_.stopped) break;
    }
    return Status::Ok();
  }

  // The results, from the log (this run's records and earlier ones).
  WorkloadSummary Results() {
    auto final_log = ReadLog(options_.tune.log_path);
    std::vector<NetworkTask> tuned, untuned;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      WorkloadTaskResult& result = summary_.tasks[i];
      const uint64_t default_index = tasks_[i]->DefaultConfig().index();
      double default_s = TaskScheduler::kNoTime;
      int n = 0;
      if (final_log.ok()) {
        for (const auto& r : final_log->records) {
          if (!(r.task == tasks_[i]->id()) || r.target != target_text_) continue;
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
      const double count = layers_[i].count;
      tuned.push_back({count, result.best_seconds});
      untuned.push_back({count, default_s});
      summary_.trials_in_log += n;
    }
    const NetworkTime network = EstimateNetworkTime(tuned);
    if (network.complete()) {
      summary_.network_seconds = network.seconds;
      for (size_t i = 0; i < tasks_.size(); ++i) summary_.tasks[i].share = network.shares[i];
    }
    summary_.untuned_network_seconds = EstimateNetworkTime(untuned).seconds;
    return std::move(summary_);
  }

 private:
  // Task i's next round: up to `round` more trials, its default config at its first, the log
  // for transfer, the network in its records, and its records into fresh_.
  TuneOptions RoundOptions(size_t i) {
    const WorkloadTaskResult& result = summary_.tasks[i];
    TuneOptions o = options_.tune;
    o.trials = result.trials + std::min(options_.round, options_.trials - total_);
    o.include_default = result.trials == 0;
    o.transfer_logs = {options_.tune.log_path};
    o.workload = {{"name", options_.name}, {"layer", layers_[i].name}, {"count", layers_[i].count}};
    // This round's records, for the other tasks' cost models (fresh_ outlives the jobs, which
    // keep the callback).
    fresh_.clear();
    o.on_record = [this](const Record& r) {
      fresh_.push_back(r);
      if (options_.tune.on_record) options_.tune.on_record(r);
    };
    return o;
  }

  // Runs task i's round (opening its job at its first) and gives its records to the other jobs.
  Expected<TuneSummary> RunRound(size_t i, const TuneOptions& o) {
    WorkloadTaskResult& result = summary_.tasks[i];
    Expected<TuneSummary> run = Status(ErrorCode::kInternal, "not run");
    if (!jobs_[i]) {
      auto job = TuneJob::Open(*tasks_[i], builder_, o);
      ++result.opened;
      if (job.ok()) {
        jobs_[i] = std::move(job).value();
      } else {
        run = job.status();
      }
    }
    if (jobs_[i]) run = jobs_[i]->Run(devices_, o.trials, o.include_default);
    ++result.rounds;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      if (j != i && jobs_[j]) jobs_[j]->AddTransfer(*tasks_[i], fresh_);
    }
    return run;
  }

  // A round's outcome into the summary and the scheduler. A task's failure is its result's
  // error; no device left is the run's.
  Status Count(size_t i, const TuneOptions& o, const Expected<TuneSummary>& run) {
    WorkloadTaskResult& result = summary_.tasks[i];
    double best = TaskScheduler::kNoTime;
    int now = o.trials;
    if (run.ok()) {
      now = run->trials_in_log;
      summary_.measured += run->measured;
      summary_.builds += run->builds;
      summary_.build_cache_hits += run->build_cache_hits;
      summary_.batch = std::max(summary_.batch, run->batch);
      summary_.planning.Add(run->planning);
      if (run->has_best) best = run->best.mean;
      if (run->stopped) summary_.stopped = true;
    } else if (run.status().code() == ErrorCode::kDisconnected ||
               run.status().code() == ErrorCode::kNoDevice) {
      return run.status();  // no device left: the log keeps what was measured
    } else {
      result.error = run.status().message();
    }
    total_ += now - result.trials;
    result.trials = now;
    scheduler_->Update(i, now, best);
    if (options_.on_round) options_.on_round(i, *scheduler_);
    return Status::Ok();
  }

  const std::vector<WorkloadLayer>& layers_;
  const builder::Target& target_;
  const std::string target_text_;
  const std::vector<DeviceSpec>& devices_;
  builder::BuildService& builder_;
  const WorkloadTuneOptions& options_;
  std::vector<std::unique_ptr<Task>> tasks_;
  std::optional<TaskScheduler> scheduler_;  // made with the tasks
  std::vector<Record> fresh_;  // the last round's records (before jobs_: it outlives them)
  std::vector<std::unique_ptr<TuneJob>> jobs_;
  WorkloadSummary summary_;
  int total_ = 0;  // trials of the network in the log
};

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
  NetworkRounds rounds(layers, target, devices, builder, options);
  CT_RETURN_IF_ERROR(rounds.MakeTasks());
  rounds.Resume();
  CT_RETURN_IF_ERROR(rounds.RunRounds());
  WorkloadSummary summary = rounds.Results();
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace crosstune::tuner
