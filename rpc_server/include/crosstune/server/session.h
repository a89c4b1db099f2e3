// One client session, run synchronously over a blocking Channel: the handshake, then requests
// until Close, a lost connection or a fatal protocol error. In normal operation this runs in the
// forked child that owns the session; with --no-fork it runs inside the server process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "crosstune/channel.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

class LoaderRegistry;
struct CallSlot;

// What a handler of requests the session does not serve itself (SessionOptions::handle_request)
// gets from the session: its connection and its watchdog. Valid during the handler's call only.
class SessionRequestIo {
 public:
  virtual ~SessionRequestIo() = default;
  virtual Channel& channel() = 0;
  // The deadline for a peer that stalls mid-request: the session's io timeout plus a floor rate
  // of 1 MiB/s for `bytes` of bulk data, never past the session's end.
  virtual Deadline IoDeadline(uint64_t bytes = 0) const = 0;
  // Work between BeginGuarded and EndGuarded runs under the watchdog of a kernel call: past
  // `limit_ms` (0: none) the session process ends and the client is told it timed out, and a
  // crash inside is reported naming `what`. The process ends; the server goes on serving.
  virtual void BeginGuarded(uint32_t request_id, const std::string& what, uint32_t limit_ms) = 0;
  virtual void EndGuarded(uint32_t limit_ms) = 0;
  // The session's workspace folder (removed by the server when the session ends): a handler's
  // scratch space.
  virtual const std::string& workspace_dir() const = 0;
};

struct SessionOptions {
  std::string auth_secret;  // empty: no authentication
  // Runs after authentication with the client's Hello (its lease_token); a non-Ok Status refuses
  // the session with that status. The tracker integration fills this in. Runs in the session
  // process.
  std::function<Status(const msg::Hello&)> accept_hello;
  // Adds loaders besides the built-in ones (packages, CUDA); runs in the session process before
  // the first LoadModule.
  std::function<void(LoaderRegistry&)> add_loaders;
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds call_timeout{60'000};  // default per-call limit
  std::chrono::milliseconds session_timeout{0};    // 0: none (the parent enforces it too)
  std::chrono::milliseconds io_timeout{60'000};    // a stalled peer mid-request
  // A session that receives no request for this long ends (0: never), so idle clients cannot
  // hold every --max-sessions slot.
  std::chrono::milliseconds idle_timeout{600'000};
  uint64_t max_upload_bytes = uint64_t{4} << 30;
  // What one session's workspace may hold in all (uploads; a file replaced counts once).
  uint64_t max_workspace_bytes = uint64_t{16} << 30;
  uint64_t max_tensor_bytes = uint64_t{8} << 30;
  // Threads a call's parallel launches use when the call does not say (0: the CPUs this process
  // may run on), and the most a call may ask for (0: the CPUs, or `threads` if that is more).
  uint32_t threads = 0;
  uint32_t max_threads = 0;
  // Before blocking for the next request, poll the socket this long (Channel::set_busy_poll):
  // a client on another CPU gets its reply without two cross-CPU wake-ups. 0: off.
  std::chrono::microseconds busy_poll{50};
  // Kill-on-timeout needs a process to kill: in-process sessions (--no-fork) run calls unguarded.
  bool guard_calls = true;
  // Requests of a program that serves more than a device's (crosstune-build-worker's Build: the
  // same acceptor, handshake, auth, limits and tracker link as crosstune-server, one seam). It
  // sees every request after the handshake, before the session's own dispatch: std::nullopt
  // leaves the request to the session; otherwise it has sent exactly one reply to the frame's
  // request id and returns Ok, or the Status that ends the session (the connection broke or fell
  // out of step). Runs in the session process.
  std::function<std::optional<Status>(const Frame&, SessionRequestIo&)> handle_request;
  // false: the session refuses the device's own requests (files, modules, calls, tensors,
  // models) as a protocol error and serves only Ping, Info, Close and `handle_request`'s; a build
  // worker runs no uploaded code.
  bool device_requests = true;
  // Set: what Info answers instead of this machine's description (a build worker names the
  // targets it builds and the builds it runs at once).
  std::optional<msg::DeviceInfo> info;
};

// Serves one connection on `fd` (owned and closed here) with a workspace at `workspace_dir`.
// `slot` (may be null) is written around every kernel call for the parent's crash reports.
// Returns when the session ends; the Status says why (Ok for a clean Close or hang-up).
Status RunSession(int fd, const std::string& workspace_dir, const std::string& session_id,
                  const SessionOptions& options, CallSlot* slot);

}  // namespace crosstune::server
