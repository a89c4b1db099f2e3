#include "crosstune/client/time_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace crosstune::client {

TimeStats SummarizeTimes(const msg::TimeReply& reply) {
  TimeStats t;
  t.seconds_per_call = reply.seconds_per_call;
  t.number = reply.number;
  t.threads = reply.threads;
  std::vector<double> s = reply.seconds_per_call;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  t.min = s.front();
  t.max = s.back();
  t.mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  t.median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  double var = 0;
  for (double x : s) var += (x - t.mean) * (x - t.mean);
  t.std = std::sqrt(var / static_cast<double>(n));
  return t;
}

}  // namespace crosstune::client
