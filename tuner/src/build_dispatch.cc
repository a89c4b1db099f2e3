#include "crosstune/tuner/build_dispatch.h"

#include <atomic>
#include <thread>

namespace crosstune::tuner {

BuildDispatcher::BuildDispatcher(std::vector<Service> services,
                                 std::function<void(size_t, const Status&)> on_lost)
    : services_(std::move(services)), on_lost_(std::move(on_lost)) {
  in_flight_.assign(services_.size(), 0);
  for (const auto& s : services_) {
    ServiceStats st;
    st.name = s.name;
    st.slots = std::max(1, s.service->slots());
    stats_.push_back(st);
  }
}

size_t BuildDispatcher::Pick() {
  // Lowest in_flight / slots, compared as in_flight[i] * slots[j] < in_flight[j] * slots[i];
  // ties go to the earlier service (the local pool first).
  size_t best = 0;
  for (size_t i = 1; i < services_.size(); ++i) {
    if (stats_[i].lost) continue;
    if (int64_t{in_flight_[i]} * stats_[best].slots < int64_t{in_flight_[best]} * stats_[i].slots) {
      best = i;
    }
  }
  ++in_flight_[best];
  return best;
}

builder::BuildResult BuildDispatcher::Build(const builder::BuildRequest& request) {
  for (;;) {
    size_t i;
    {
      std::lock_guard<std::mutex> lock(mu_);
      i = Pick();
    }
    builder::BuildResult r = services_[i].service->Build(request);
    bool lost_now = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_[i];
      if (i == 0 || r.status.code() != ErrorCode::kDisconnected) {
        ++stats_[i].builds;
        return r;
      }
      ++rerun_;
      if (!stats_[i].lost) {
        stats_[i].lost = true;
        stats_[i].lost_reason = r.status.message();
        lost_now = true;
      }
    }
    if (lost_now && on_lost_) on_lost_(i, r.status);
  }
}

std::vector<builder::BuildResult> BuildDispatcher::BuildMany(
    const std::vector<builder::BuildRequest>& requests) {
  std::vector<builder::BuildResult> results(requests.size());
  std::atomic<size_t> next{0};
  const size_t n = std::min(requests.size(), static_cast<size_t>(std::max(1, slots())));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < n; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < requests.size(); i = next++) results[i] = Build(requests[i]);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

int BuildDispatcher::slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& s : stats_) {
    if (!s.lost) n += s.slots;
  }
  return n;
}

std::vector<BuildDispatcher::ServiceStats> BuildDispatcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

uint64_t BuildDispatcher::rerun_builds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rerun_;
}

}  // namespace crosstune::tuner
