// The time evaluator's flags and the summary of its rounds, shared by `bench` (one function) and
// `bench-model` (whole runs of a model).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "crosstune/client/session.h"

namespace crosstune::cli {

// --number, --repeat, --min-repeat-ms, --cooldown-ms and --flush-cache into `t`; `what` names
// what a round repeats ("calls", "runs").
void AddTimeOptions(CLI::App* cmd, client::TimeOptions* t, const char* what);

// Median, mean, min, max and standard deviation of the rounds' seconds.
struct RoundStats {
  double median = 0, mean = 0, min = 0, max = 0, stddev = 0;
};
RoundStats Summarize(std::vector<double> seconds);

}  // namespace crosstune::cli
