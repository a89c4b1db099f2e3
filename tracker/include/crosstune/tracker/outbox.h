// The scheduler's outbox: the one way its parts (device registry, request queue, leases) act on the
// outside world. They append Actions; the tracker drains them with Scheduler::TakeActions() and
// carries them out (frames to send, rows to write). Also the small vocabulary every part shares.
//
// Thread-safety: none (see scheduler.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

using TimePoint = std::chrono::steady_clock::time_point;
using Ms = std::chrono::milliseconds;

// The protocol a device's server and a request's client speak. A device is granted only to
// requests of its own protocol: a crosstune client cannot open a session on a TVM RPC server,
// nor the other way round. Both share the per-key queues (grant policy, timeouts).
enum class Protocol { kCrosstune, kTvm };
const char* ProtocolName(Protocol p);

// What the caller must do. Fields not named for a kind are empty.
struct Action {
  enum class Kind {
    kPushToken,     // send SetLease{token} to the server on `conn` (device `device`)
    kGrant,         // answer request `request_id` on client `conn` with `grant`
    kQueueUpdate,   // send `update` for request `request_id` to client `conn`
    kFail,          // answer request `request_id` on client `conn` with `status`
    kSelfCheck,     // probe device `device` (server on `conn`), report SelfCheckResult
    kCloseConn,     // close connection `conn` (a replaced or timed-out registration)
    kLeaseStarted,  // persist `lease`
    kLeaseRenewed,  // persist the new expiry of `lease`
    kLeaseEnded,    // history row for `lease` with `outcome`; remove it from active leases
  };
  Kind kind;
  uint64_t conn = 0;
  uint32_t request_id = 0;
  std::string device;
  std::string token;
  std::string holder;
  msg::Grant grant;
  msg::QueueUpdate update;
  Status status;
  std::string outcome;
  struct LeaseRecord {
    std::string token, device, key, holder;
    int64_t granted_unix_ms = 0, expires_unix_ms = 0;
    uint32_t lease_ms = 0;
    bool multi_session = false;
  } lease;
};
using LeaseRecord = Action::LeaseRecord;

class Outbox {
 public:
  void Push(Action a) { actions_.push_back(std::move(a)); }
  std::vector<Action> Take() {
    std::vector<Action> out;
    out.swap(actions_);
    return out;
  }
  bool empty() const { return actions_.empty(); }

 private:
  std::vector<Action> actions_;
};

}  // namespace crosstune::tracker
