// The requests waiting for a device, one queue per key, kept in the order the grant policy gives
// them (grant_policy.h). The queue answers timeouts and cancels and tells each client its position.
//
// Thread-safety: none (see scheduler.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/tracker/outbox.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

class GrantPolicy;

struct Waiter {
  uint64_t seq = 0;  // arrival order; a request put back after a failed grant keeps its own
  uint64_t conn = 0;
  uint32_t request_id = 0;
  msg::DeviceRequest req;
  Protocol protocol = Protocol::kCrosstune;
  TimePoint enqueued, deadline;
  uint32_t last_position = 0;
  TimePoint last_update;  // when the client was last told its position
};

class RequestQueue {
 public:
  // How many of the key's devices `holder` holds now (for policies that weigh it).
  using HeldFn = std::function<int(const std::string& key, const std::string& holder)>;
  // `policy` outlives the queue.
  RequestQueue(const GrantPolicy& policy, HeldFn held) : policy_(&policy), held_(std::move(held)) {}

  uint64_t NextSeq() { return next_seq_++; }
  // Adds a request (a new one, or one whose grant fell through).
  void Add(Waiter w);
  // Removes the request; false when it is not waiting.
  bool Remove(uint64_t conn, uint32_t request_id);
  void RemoveConn(uint64_t conn);
  // Removes and returns the requests whose deadline has passed.
  std::vector<Waiter> TakeExpired(TimePoint now);

  // The key's queue in grant order, as the policy arranges it now.
  std::vector<Waiter>& Arranged(const std::string& key);
  // The queues by key, each in the order of its last arrangement (Snapshot arranges a copy).
  const std::map<std::string, std::vector<Waiter>>& queues() const { return queues_; }
  // A copy of the key's queue in grant order.
  std::vector<Waiter> InGrantOrder(const std::string& key) const;
  // Drops the waiters a grant round marked (seq 0).
  void DropGranted(const std::string& key);

  // Tells clients their positions. Between ticks (`full` false) only queues that changed, and of
  // those the front (SchedulerOptions::eager_positions) and anyone never told; `full` tells
  // everyone whose position changed, the far-back at most once per `interval`. `note` says
  // what the waiter waits for.
  void SendPositions(TimePoint now, bool full, uint32_t eager_positions, Ms interval,
                     const std::function<std::string(const Waiter&)>& note, Outbox& out);

 private:
  void Arrange(const std::string& key, std::vector<Waiter>& q) const;

  const GrantPolicy* policy_;
  HeldFn held_;
  uint64_t next_seq_ = 1;
  std::map<std::string, std::vector<Waiter>> queues_;  // by key
  std::set<std::string> dirty_;  // keys whose queue changed since the last position updates
  std::map<std::string, int> unannounced_;  // waiters per key never told their position
};

}  // namespace crosstune::tracker
