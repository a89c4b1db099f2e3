// One client session, run synchronously over a blocking Channel: the handshake, then requests
// until Close, a lost connection or a fatal protocol error. In normal operation this runs in the
// forked child that owns the session; with --no-fork it runs inside the server process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

class LoaderRegistry;
struct CallSlot;

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
};

// Serves one connection on `fd` (owned and closed here) with a workspace at `workspace_dir`.
// `slot` (may be null) is written around every kernel call for the parent's crash reports.
// Returns when the session ends; the Status says why (Ok for a clean Close or hang-up).
Status RunSession(int fd, const std::string& workspace_dir, const std::string& session_id,
                  const SessionOptions& options, CallSlot* slot);

}  // namespace crosstune::server
