// The server's side of the tracker: registers this device, heartbeats, takes the lease token the
// tracker pushes, reports sessions starting and ending, answers self-checks, and reconnects with
// backoff, forever, when the tracker goes away. A server that can no longer serve (its `health`
// fails) withdraws: it drops the registration and does not register again.
//
// Lease tokens are pushed, not asked for: the tracker sends the current token over the
// registration connection before it tells the client, and the server keeps the token it was last
// told. A tracker restart therefore never blocks sessions of a running lease; when the tracker is
// back, this link re-registers with that token and the tracker re-adopts the lease.
//
// Thread-safety: the link runs its own thread. AcceptHello runs in forked session children (and in
// the server with --no-fork): it reads a MAP_SHARED page with atomics only, takes no lock, and is
// safe after fork(). OnSessionEnd may be called from any thread of the server process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

struct TrackerLinkOptions {
  std::string tracker;  // "host:port"
  std::string key;
  std::map<std::string, std::string> tags;
  std::string custom_addr;  // what clients should dial; empty: the address the tracker sees
  // The secret the tracker asks servers for (its --server-token-file; older trackers: the farm's
  // shared --auth-token-file); empty: none.
  std::string auth_secret;
  msg::DeviceInfo info;
  // Runs when the tracker asks a quarantined device to check itself; Ok re-admits it (after the
  // tracker also reaches the device's address).
  std::function<Status()> self_check;
  // Whether this server can serve at all (e.g. Server::CanStartSessions), checked before every
  // registration and while registered: while it fails, the link stays away from the tracker, so
  // the device leaves the pool at once instead of being granted to clients who are then refused.
  // Cheap: it runs every few tens of milliseconds. Empty: always fit.
  std::function<Status()> health;
  // Ends the session of process `pid` whose lease was revoked (expired, kicked, released) while it
  // ran, e.g. Server::EndSession; called on the link's thread. Default: SIGKILL the process.
  std::function<void(int pid)> end_session;
  // Runs on the link's thread each time the tracker accepts a registration (the first one and
  // every one after a reconnect), with the device's name there (HOST:PORT).
  std::function<void(const std::string& device)> on_registered;
  std::chrono::milliseconds max_backoff{30'000};
};

class TrackerLink {
 public:
  explicit TrackerLink(TrackerLinkOptions options);
  ~TrackerLink();  // Stop()
  TrackerLink(const TrackerLink&) = delete;
  TrackerLink& operator=(const TrackerLink&) = delete;

  // Starts registering; `port` is the server's session port.
  void Start(uint16_t port);
  void Stop();

  // For SessionOptions::accept_hello: admits a Hello only with the current lease token, and
  // records the claim (by pid) for the tracker.
  Status AcceptHello(const msg::Hello& hello);
  // For Server::set_on_session_end: the session of process `pid` ended with `reported`.
  void OnSessionEnd(int pid, const Status& reported);

  std::string current_token() const;
  bool registered() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The command line of a program that registers with a tracker (crosstune-server,
// crosstune-build-worker, crosstune-sim-device), checked the same way in each.

// --tracker needs --key; every --tag is key=value with a key; the key, the tags and the custom
// address are valid UTF-8 (the tracker refuses anything else). Returns the tags as a map (a
// repeated key: the last one wins), or an error naming the flag.
Expected<std::map<std::string, std::string>> ParseTrackerFlags(
    const std::string& tracker, const std::string& key, const std::string& custom_addr,
    const std::vector<std::string>& tags);

// --exit-with-parent: this process gets SIGTERM when the one that started it dies, even by
// SIGKILL. Call it before the first thread. False when the parent is gone already (exit then).
bool ExitWithParent();

}  // namespace crosstune::server
