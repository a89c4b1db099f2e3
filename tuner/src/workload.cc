#include "crosstune/tuner/workload.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace crosstune::tuner {
namespace {

// Collects layers, merging repeats of one (template, shape) into a count.
class LayerSet {
 public:
  void Add(const std::string& name, const std::string& template_name, std::vector<int64_t> shape) {
    auto key = std::make_pair(template_name, shape);
    if (auto it = index_.find(key); it != index_.end()) {
      ++layers_[it->second].count;
      return;
    }
    index_[key] = layers_.size();
    layers_.push_back({name, template_name, std::move(shape), 1});
  }
  std::vector<WorkloadLayer> Take() { return std::move(layers_); }

 private:
  std::map<std::pair<std::string, std::vector<int64_t>>, size_t> index_;
  std::vector<WorkloadLayer> layers_;
};

int64_t OutSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}

// conv2d shape N,C,H,W,K,R,S,stride,pad[,residual].
std::vector<int64_t> Conv(int64_t c, int64_t hw, int64_t k, int64_t rs, int64_t stride, int64_t pad,
                          bool residual = false) {
  std::vector<int64_t> s = {1, c, hw, hw, k, rs, rs, stride, pad};
  if (residual) s.push_back(1);
  return s;
}

std::vector<WorkloadLayer> ResNet50() {
  LayerSet set;
  int64_t hw = 224;
  set.Add("conv1", "conv2d", Conv(3, hw, 64, 7, 2, 3));
  hw = OutSize(hw, 7, 2, 3);  // 112
  hw = OutSize(hw, 3, 2, 1);  // the 3x3 stride-2 max pool: 56
  struct Stage {
    int blocks;
    int64_t planes;
    int64_t stride;
  };
  const Stage stages[] = {{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}};
  int64_t channels = 64;
  for (int s = 0; s < 4; ++s) {
    const Stage& st = stages[s];
    const int64_t out = st.planes * 4;
    for (int b = 0; b < st.blocks; ++b) {
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
      const int64_t stride = b == 0 ? st.stride : 1;
      const int64_t out_hw = OutSize(hw, 3, stride, 1);
      set.Add(name + "conv1", "conv2d", Conv(channels, hw, st.planes, 1, 1, 0));
      set.Add(name + "conv2", "conv2d", Conv(st.planes, hw, st.planes, 3, stride, 1));
      set.Add(name + "conv3", "conv2d", Conv(st.planes, out_hw, out, 1, 1, 0, true));
      if (b == 0) set.Add(name + "downsample", "conv2d", Conv(channels, hw, out, 1, stride, 0));
      channels = out;
      hw = out_hw;
    }
  }
  set.Add("fc", "dense", {1, channels, 1000});
  return set.Take();
}

}  // namespace

const std::vector<std::string>& WorkloadNames() {
  static const std::vector<std::string> names = {"resnet50"};
  return names;
}

Expected<std::vector<WorkloadLayer>> MakeWorkload(const std::string& name) {
  if (name == "resnet50") return ResNet50();
  std::string known;
  for (const auto& n : WorkloadNames()) known += (known.empty() ? "" : ", ") + n;
  return Status(ErrorCode::kInvalidArgument,
                "unknown workload '" + name + "' (workloads: " + known + ")");
}

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
