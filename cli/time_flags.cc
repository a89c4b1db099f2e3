#include "time_flags.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace crosstune::cli {

void AddTimeOptions(CLI::App* cmd, client::TimeOptions* t, const char* what) {
  cmd->add_option("--number", t->number,
                  std::string(what) + " per round (grows to reach --min-repeat-ms)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeat", t->repeat, "rounds")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, Limits::kMaxTimeRepeat));
  cmd->add_option("--min-repeat-ms", t->min_repeat_ms, "shortest round in ms")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{0}, Limits::kMaxTimeRoundMs));
  cmd->add_option("--cooldown-ms", t->cooldown_ms, "pause between rounds in ms")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{0}, Limits::kMaxTimeRoundMs));
  cmd->add_flag("--flush-cache", t->flush_cache, "flush the CPU caches before each round");
}

RoundStats Summarize(std::vector<double> s) {
  RoundStats r;
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  const double n = static_cast<double>(s.size());
  r.mean = std::accumulate(s.begin(), s.end(), 0.0) / n;
  r.median = s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
  r.min = s.front();
  r.max = s.back();
  double var = 0;
  for (double x : s) var += (x - r.mean) * (x - r.mean);
  r.stddev = std::sqrt(var / n);
  return r;
}

}  // namespace crosstune::cli
