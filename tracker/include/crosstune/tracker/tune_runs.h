// What the status page shows of the tuning that uses the farm: each running and recently
// finished tune run (its progress and best-so-far curve, from the run's own reports), and each
// device's utilisation over the last hour (sampled from the scheduler's busy time).
//
// Reports are bounded (ValidateTuneProgress) and come once a second per run on average (short
// bursts allowed: kReportBurst); a run is
// identified by its run id and the leases it names, each of which must be active (a lease token
// is the holder's secret, so a run can report only on leases it holds). A running run's id is
// its own: a later report must name one of the leases of its last report, so nobody who learns
// a run id from the status page can write into that run.
//
// Not thread-safe: the tracker calls it from its io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

// Checks a report's bounds before anything is kept: ids and names, the number of leases and of
// error kinds, and that every number is finite and not negative.
Status ValidateTuneProgress(const msg::TuneProgress& p);

class TuneRuns {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxCurvePoints = 240;  // a longer curve keeps every other point
  static constexpr size_t kMaxRunning = 64;
  static constexpr size_t kMaxFinished = 16;
  // A run that stops reporting for this long counts as finished.
  static constexpr std::chrono::seconds kSilentAfter{60};
  // A run reports at most once a second on average, in bursts of up to kReportBurst (a token
  // bucket: one credit a second, kReportBurst at most); a report with no credit left is refused,
  // the final one excepted. A tuner that sends once a second by its own clock, each report after
  // the last one's answer, never needs more than 2 credits however late its reports arrive (a
  // report delayed in a busy tracker, then the next sent on time: two within a few ms); a minimum
  // gap between arrivals refused such a tuner whenever one report took over 0.1 s to arrive.
  static constexpr double kReportBurst = 3;

  // Takes a validated report of `holder` whose leases are on `devices` (of `key`).
  Status Update(Clock::time_point now, int64_t unix_ms, const std::string& holder,
                const std::string& key, const std::vector<std::string>& devices,
                const msg::TuneProgress& report);
  // Moves runs silent for kSilentAfter to the finished list.
  void Expire(Clock::time_point now);

  // Running runs first (newest first), then the finished ones (newest first).
  nlohmann::json ToJson(Clock::time_point now) const;
  // Prometheus samples: runs running, and per run its trials, best GFLOP/s and errors by kind.
  void AppendMetrics(std::string* out) const;

 private:
  struct Run {
    std::string run_id, holder, key, task;
    std::vector<std::string> devices;
    std::vector<std::string> lease_tokens;  // of the last report
    uint32_t trials = 0, total = 0, measured = 0;
    double best_gflops = 0, rate = 0;
    std::map<std::string, uint32_t> errors;
    uint32_t stopped_early = 0;  // trials stopped early as clear losers
    std::string warm_from;       // the device kind whose farm records it started from
    std::vector<std::pair<uint32_t, double>> curve;  // (trials, best GFLOP/s so far)
    Clock::time_point last_report;
    double report_credit = kReportBurst;  // at last_report
    int64_t started_unix_ms = 0, updated_unix_ms = 0;
    bool finished = false;
  };
  std::map<std::string, Run> running_;
  std::deque<Run> finished_;  // newest last
};

// Each device's share of time leased, per bucket over the last hour.
class UsageHistory {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kBucket{30};
  static constexpr size_t kBuckets = 120;  // one hour

  // Called often (every tracker tick); closes a bucket once kBucket has passed since the last.
  void Sample(Clock::time_point now, const std::map<std::string, double>& busy_seconds);
  // {"bucket_seconds": 30, "devices": {"NAME": [fraction, ...oldest first]}}: the closed buckets.
  nlohmann::json ToJson() const;
  // The same with the bucket still open as each device's last entry (its share so far, given
  // the devices' busy seconds now), and "open_bucket_seconds": how long it has been open. So a
  // farm started a few seconds ago shows its devices at once rather than after 30 s.
  nlohmann::json ToJson(Clock::time_point now,
                        const std::map<std::string, double>& busy_seconds) const;

 private:
  struct Series {
    double last_busy = 0;
    std::deque<double> fractions;
  };
  // The busy seconds of a device (its series, or null if it has none yet) in the open bucket.
  static double UsedSince(const Series* s, double busy_seconds);
  bool started_ = false;
  Clock::time_point last_;
  std::map<std::string, Series> series_;
};

}  // namespace crosstune::tracker
