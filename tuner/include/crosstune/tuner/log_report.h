// What a record log says, as data: per task and target its trials, errors and best config, the
// estimated time of each network whose layers were tuned (tune --workload), and the best-so-far
// curve of every run as an SVG. `crosstune log summary|plot` prints these; the Python package and
// the model compiler read them.
//
//   auto log = ReadLog("mm.jsonl");
//   LogSummary s = SummarizeLog(log->records);
//   for (const LogTaskSummary& t : s.tasks) ... t.best ...
//
// Thread-safety: free functions of their arguments only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tuner/records.h"

namespace crosstune::tuner {

// One kind of failure among a task's records.
struct LogErrorKind {
  TrialError kind = TrialError::kOk;
  int count = 0;
  // The first line of the message most records of the kind share (compiler diagnostics of one
  // kind group together), and how many share it; ties go to the first in byte order.
  std::string commonest_message;
  int commonest_count = 0;
};

// The records of one task on one target.
struct LogTaskSummary {
  TaskId task;
  std::string target;
  int trials = 0;
  size_t unique_configs = 0;
  int ok = 0;
  std::set<std::string> devices;
  std::set<std::string> tuners;
  std::vector<LogErrorKind> errors;  // by TrialErrorName
  bool has_best = false;
  Record best;  // the lowest mean of the successful records (BestRecords)
  // Set when the task was tuned as a network's layer: its records carry a workload
  // {"name", "layer", "count"} (the first record that has one).
  bool in_network = false;
  std::string network;  // "resnet50"
  std::string layer;    // "layer1.0.conv2"
  int count = 0;        // occurrences in the network
  // count x best / the network's time, and that time, when every task of the network on this
  // target has a best; else share < 0.
  double share = -1;
  double network_seconds = 0;
};

// A network's tasks on one target.
struct LogNetworkSummary {
  std::string name;
  std::string target;
  int tasks = 0;
  int trials = 0;
  int missing = 0;     // tasks without a working config
  double seconds = 0;  // the estimated network time (EstimateNetworkTime); valid when missing == 0
};

struct LogSummary {
  std::vector<LogTaskSummary> tasks;        // in the order the log first shows them
  std::vector<LogNetworkSummary> networks;  // by "NAME  [TARGET]"
  // An array with one object per task, as `crosstune log summary --json` prints it.
  nlohmann::json ToJson() const;
};

LogSummary SummarizeLog(const std::vector<Record>& records);

// The best-so-far GFLOP/s of each run against its trials, one line per task, tuner and run
// (records in file order).
struct BestSoFarPlot {
  std::string svg;
  size_t lines = 0;
  size_t max_trials = 0;  // the longest line's
};
// kInvalidArgument when there are no records.
Expected<BestSoFarPlot> PlotBestSoFar(const std::vector<Record>& records);

}  // namespace crosstune::tuner
