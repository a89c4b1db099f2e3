// Networks as task sets, and a scheduler that spends one trial budget across a network's tasks.
//
// A workload is a network's distinct tunable layers, each with how often it occurs:
//   auto layers = model::MakeWorkload("resnet50");   // conv2d and dense tasks with counts
// (the built-in networks are graphs of the model compiler, model/tasks.h: `tune --workload`,
// `tune --model` and `compile` take their tasks from one place).
// The estimated network time is the sum over layers of count x best time.
//
// TaskScheduler decides which task gets the next round of trials, as Ansor's gradient-based task
// scheduler does: after one warm-up round per task, the task whose next trials are expected to
// shorten the network time most. The expected gain of task i is
//   count_i * (alpha * backward_i + (1 - alpha) * forward_i)
// where backward_i is the time its best config lost per trial over its last `window` rounds,
// and forward_i = max(best_i / trials_i, best_i - beta * flops_i / V), an optimistic guess: the
// 1/t decay of a search that keeps improving, or the gap to the throughput V the fastest similar
// task (same template) already reached. Tasks with no working config yet go first.
//
// Thread-safety: none; one scheduler per tuning job.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::tuner {

struct WorkloadLayer {
  std::string name;  // the first occurrence in the network, e.g. "layer2.0.conv2"
  std::string template_name;
  std::vector<int64_t> shape;  // as `crosstune tune <template> --shape` takes it
  int count = 1;               // occurrences in the network
};

struct SchedulerTask {
  double weight = 1;  // occurrences in the network
  double flops = 0;   // per call
  std::string group;  // tasks of one group (template) compare throughputs
};

struct SchedulerOptions {
  double alpha = 0.2;  // weight of the observed (backward) gain against the optimistic guess
  double beta = 2.0;   // slack on the throughput of the best similar task
  int window = 3;      // rounds the backward gain looks back
  // A task whose first this-many rounds all failed is left alone (its time stays unknown).
  int max_failed_rounds = 3;
};

class TaskScheduler {
 public:
  static constexpr double kNoTime = std::numeric_limits<double>::infinity();

  TaskScheduler(std::vector<SchedulerTask> tasks, SchedulerOptions options = {});

  // Task i has had `trials` trials in all, and its best config now takes `best_seconds`
  // (kNoTime while none has worked). Call after every round (and once per task to resume).
  void Update(size_t i, int trials, double best_seconds);

  // The task for the next round, or -1 when every task has given up (all failed).
  int Next() const;
  // The gain Next() maximised, per trial, for reports (0 before the warm-up ends).
  double ExpectedGain(size_t i) const;

  // sum of weight x best; kNoTime while some task has no time.
  double NetworkSeconds() const;
  int trials(size_t i) const { return state_[i].trials; }
  double best(size_t i) const { return state_[i].best; }
  size_t size() const { return tasks_.size(); }

 private:
  struct State {
    int trials = 0;
    double best = kNoTime;
    int rounds = 0;
    std::vector<std::pair<int, double>> history;  // (trials, best) after each round
  };
  bool GaveUp(size_t i) const;

  std::vector<SchedulerTask> tasks_;
  SchedulerOptions options_;
  std::vector<State> state_;
};

// --- The estimated network time ---------------------------------------------------------------

// A task of a network: how often it occurs, and its best time (kNoTime while none has worked).
struct NetworkTask {
  double count = 1;
  double seconds = TaskScheduler::kNoTime;
};

struct NetworkTime {
  double seconds = TaskScheduler::kNoTime;  // sum of count x seconds; kNoTime while incomplete
  int missing = 0;                          // tasks without a time
  std::vector<double> shares;  // per task, count x seconds / the sum; empty while incomplete
  bool complete() const { return missing == 0; }
};

// The estimated time of a network: the sum over its tasks, in the order given, of count x best
// time, and each task's share of it. The one definition that the scheduler, TuneWorkload and
// log summaries use.
NetworkTime EstimateNetworkTime(const std::vector<NetworkTask>& tasks);

}  // namespace crosstune::tuner
