#include "crosstune/tuner/workload.h"

#include <algorithm>
#include <cmath>

namespace crosstune::tuner {

TaskScheduler::TaskScheduler(std::vector<SchedulerTask> tasks, SchedulerOptions options)
    : tasks_(std::move(tasks)), options_(options), state_(tasks_.size()) {}

void TaskScheduler::Update(size_t i, int trials, double best_seconds) {
  State& s = state_.at(i);
  s.trials = trials;
  s.best = std::min(s.best, best_seconds > 0 ? best_seconds : kNoTime);
  ++s.rounds;
  s.history.emplace_back(trials, s.best);
}

bool TaskScheduler::GaveUp(size_t i) const {
  const State& s = state_[i];
  return s.best == kNoTime && s.rounds >= options_.max_failed_rounds;
}

double TaskScheduler::ExpectedGain(size_t i) const {
  const State& s = state_[i];
  if (s.best == kNoTime || s.trials <= 0) return 0;
  // Observed: seconds gained per trial over the last `window` rounds.
  double backward = 0;
  if (s.history.size() >= 2) {
    size_t back = s.history.size() > static_cast<size_t>(options_.window)
                      ? s.history.size() - 1 - static_cast<size_t>(options_.window)
                      : 0;
    const auto& [t0, g0] = s.history[back];
    int dt = s.trials - t0;
    if (dt > 0 && g0 != kNoTime) backward = std::max(0.0, (g0 - s.best) / dt);
  }
  // Optimistic: the 1/t decay, or the gap to the best throughput among similar tasks.
  double best_rate = 0;
  for (size_t k = 0; k < tasks_.size(); ++k) {
    if (tasks_[k].group == tasks_[i].group && state_[k].best != kNoTime && tasks_[k].flops > 0) {
      best_rate = std::max(best_rate, tasks_[k].flops / state_[k].best);
    }
  }
  double forward = s.best / s.trials;
  if (best_rate > 0 && tasks_[i].flops > 0) {
    forward = std::max(forward, s.best - options_.beta * tasks_[i].flops / best_rate);
  }
  return tasks_[i].weight * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

int TaskScheduler::Next() const {
  // Warm-up: every task once, then the ones with no working config yet (a few rounds each).
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].rounds == 0) return static_cast<int>(i);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].best == kNoTime && !GaveUp(i)) return static_cast<int>(i);
  }
  int pick = -1;
  double best_gain = -1;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (GaveUp(i)) continue;
    double g = ExpectedGain(i);
    if (g > best_gain) {
      best_gain = g;
      pick = static_cast<int>(i);
    }
  }
  return pick;
}

double TaskScheduler::NetworkSeconds() const {
  std::vector<NetworkTask> tasks;
  for (size_t i = 0; i < tasks_.size(); ++i) tasks.push_back({tasks_[i].weight, state_[i].best});
  return EstimateNetworkTime(tasks).seconds;
}

NetworkTime EstimateNetworkTime(const std::vector<NetworkTask>& tasks) {
  NetworkTime t;
  double total = 0;
  for (const NetworkTask& task : tasks) {
    if (task.seconds == TaskScheduler::kNoTime) {
      t.missing++;
    } else {
      total += task.count * task.seconds;
    }
  }
  if (t.missing > 0) return t;
  t.seconds = total;
  for (const NetworkTask& task : tasks) t.shares.push_back(task.count * task.seconds / total);
  return t;
}

}  // namespace crosstune::tuner
