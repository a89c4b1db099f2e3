// The client side of crosstune-tracker: ask for a device and wait in its queue, renew and release
// leases, query the farm, the farm's tuning records (put, query, claim), and the admin operations
// (drain, undrain, kick).
//
// Thread-safety: one TrackerClient may be used from several threads; calls are serialised on its
// connection. RequestDevice blocks its caller (and every other call) until the grant comes;
// CancelRequest() may be called from any thread (or a signal-safe flag setter) to give up.
// The auto-renew thread is the client's own; it stops in StopAutoRenew() and the destructor.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/channel.h"
#include "crosstune/client/session.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::client {

struct TrackerOptions {
  std::string tracker;      // "host:port"
  std::string auth_secret;  // the farm's shared secret (HMAC challenge); empty: none
  std::string peer_name;    // shown as the lease holder; default user@host
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{30'000};
  // RequestDevice: how long to keep reconnecting when the tracker connection drops mid-wait.
  std::chrono::milliseconds reconnect_window{30'000};
};

struct LeaseRequest {
  std::string key;
  std::vector<std::string> constraints;  // "soc=bcm2711", "memory_mb>=2048", "+neon", ...
  int32_t priority = 0;
  std::chrono::milliseconds wait{600'000};    // queue timeout
  std::chrono::milliseconds hold{1'800'000};  // lease length; renew before it runs out
  bool multi_session = false;  // true: hold the device across sessions until released
  std::function<void(const msg::QueueUpdate&)> on_queue_update;
};

// "user@host" of this process.
std::string DefaultPeerName();

class TrackerClient {
 public:
  static Expected<std::unique_ptr<TrackerClient>> Connect(const TrackerOptions& options);
  // Stops renewing and closes the connection, which ends every lease this connection holds
  // except one-session leases whose session is running (those end with the session).
  ~TrackerClient();

  // Waits in the key's queue until a device is granted. Timeout when `wait` passes; NoDevice when
  // no registered device could ever match; Busy after CancelRequest().
  Expected<msg::Grant> RequestDevice(const LeaseRequest& request);
  void CancelRequest() { cancel_.store(true); }

  // Extends a lease by `lease_ms` (0: its own length) from now; also re-attaches a lease to this
  // connection (after a tracker restart).
  Expected<msg::LeaseInfo> Renew(const std::string& token, uint32_t lease_ms = 0);
  Status Release(const std::string& token, msg::Outcome outcome = msg::Outcome::kOk,
                 const std::string& message = "");
  // The /api/summary JSON.
  Expected<std::string> Query();
  // A tune run's progress for the tracker's status page and metrics (at most one report a
  // second per run; the tracker refuses more with Busy, and reports on leases not active).
  Status ReportTuneProgress(const msg::TuneProgress& progress);
  // The farm's tuning records (tracker/records.h). PutRecords sends at most
  // kMaxRecordsPerMessage a message (more are split) and waits out the tracker's Busy (a sender
  // over its rate) with backoff, up to request_timeout; the totals of every message come back.
  Expected<msg::RecordsPutReply> PutRecords(const std::string& run_id,
                                            const std::vector<msg::FarmRecord>& records);
  Expected<msg::RecordsReply> QueryRecords(const msg::RecordsQuery& query);
  Expected<msg::RecordsClaimReply> ClaimRecords(const msg::RecordsClaim& claim);
  // What the farm's records hold per task, target and device kind (one page; RecordsList).
  Expected<msg::RecordsListReply> ListRecords(const msg::RecordsList& list);
  // drain, undrain or kick `device`; `admin_secret` is the tracker's --admin-token-file content.
  Status Admin(const std::string& action, const std::string& device,
               const std::string& admin_secret);

  // Renews `token` every `interval` on a thread of its own until StopAutoRenew(). When the
  // tracker goes away it reconnects (with backoff) and re-attaches the lease.
  void StartAutoRenew(const std::string& token, std::chrono::milliseconds interval);
  void StopAutoRenew();
  // The last renewal's result (Ok before the first).
  Status renew_status() const;

 private:
  TrackerClient() = default;
  Status Open();  // connects and handshakes (under mu_)
  template <typename Reply, typename Req>
  Expected<Reply> Call(Opcode op, const Req& req);

  TrackerOptions options_;
  mutable std::mutex mu_;
  Channel channel_;
  msg::HelloReply hello_;
  std::atomic<bool> cancel_{false};
  std::thread renewer_;
  mutable std::mutex renew_mu_;
  std::condition_variable renew_cv_;
  bool stop_renew_ = false;
  Status renew_status_;
};

// A session on a device a tracker granted. The tracker connection holds the lease and renews it
// on its own thread; destroying it (after the session) ends the lease, as does the session's end
// for a one-session lease.
struct LeasedSession {
  msg::Grant grant;
  std::unique_ptr<TrackerClient> tracker;
  std::unique_ptr<Session> session;
};

// How often to renew a lease held for `hold`: a third of it, at most every 20 s (so the tracker
// counts the holder alive), at least every 200 ms.
std::chrono::milliseconds RenewInterval(std::chrono::milliseconds hold);

// Requests a device of `request.key` on a tracker connection of its own, connects to the granted
// address with the lease token (`options.server` and `lease_token` are set here) and renews the
// lease every RenewInterval(request.hold). A device whose address does not answer is released as
// unreachable (it counts towards its quarantine) and the next grant is tried, three in all.
// Errors name the device, its address and the tracker.
Expected<LeasedSession> OpenLeasedSession(const TrackerOptions& tracker,
                                          const LeaseRequest& request, ConnectOptions options);

}  // namespace crosstune::client
