// Connection flags shared by every command that talks to a device, in one place: where the
// device is (--server, or --tracker with --key), how to authenticate, how long to wait.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "crosstune/client/session.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::cli {

struct ConnectFlags {
  std::string server;           // host:port of a crosstune-server; env CROSSTUNE_SERVER
  std::string tracker;          // host:port of a crosstune-tracker
  std::string key;              // device key to request from the tracker
  std::string auth_token_file;  // shared secret for the server's HMAC challenge; env
                                // CROSSTUNE_AUTH_TOKEN_FILE
  double timeout_s = 60;        // per request (kernels' own run time comes on top)
};

// Adds --server, --tracker, --key, --auth-token-file and --timeout to `cmd`. `flags` must outlive
// the parse.
void AddConnectOptions(CLI::App* cmd, ConnectFlags* flags);

// Connects as the flags say: straight to --server, or through the tracker (--tracker/--key).
Expected<std::unique_ptr<client::Session>> OpenSession(const ConnectFlags& flags);

// The flags of a command that talks to the tracker itself (query, lease, drain, records ...):
// --tracker (required) and --auth-token-file, and its connection as they say.
struct TrackerFlags {
  std::string tracker;          // host:port; env CROSSTUNE_TRACKER
  std::string auth_token_file;  // env CROSSTUNE_AUTH_TOKEN_FILE
};
void AddTrackerFlags(CLI::App* cmd, TrackerFlags* flags);
Expected<std::unique_ptr<client::TrackerClient>> ConnectTracker(const TrackerFlags& flags);

// Requests a --key device from --tracker, connects with the lease token and keeps the lease
// renewed until the process exits (tracker_session.cc).
Expected<std::unique_ptr<client::Session>> OpenTrackerSession(const ConnectFlags& flags);

// Shared with `crosstune lease`: the line printed while waiting in a tracker's queue, and how
// often to renew a lease held for `hold` (a third of it, and often enough to count as alive).
void PrintQueueUpdate(const std::string& key, const msg::QueueUpdate& u);
std::chrono::milliseconds RenewEvery(std::chrono::milliseconds hold);

}  // namespace crosstune::cli
