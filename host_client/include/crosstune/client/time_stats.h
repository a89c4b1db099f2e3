// What a timing reply says, summarised: the statistics `crosstune bench` prints and the Python
// package's Module.time() returns.
#pragma once

#include <cstdint>
#include <vector>

#include "crosstune/messages_fwd.h"

namespace crosstune::client {

struct TimeStats {
  std::vector<double> seconds_per_call;  // one per round, as measured
  uint32_t number = 0;                   // calls per round (after growth)
  uint32_t threads = 0;
  // Over the rounds, in seconds per call; 0 when there are none. std is the population's.
  double median = 0, mean = 0, min = 0, max = 0, std = 0;
  // Floating-point operations per second at the median, given the operations in one call.
  double Gflops(double flops) const { return flops > 0 && median > 0 ? flops / median / 1e9 : 0; }
};

TimeStats SummarizeTimes(const msg::TimeReply& reply);

}  // namespace crosstune::client
