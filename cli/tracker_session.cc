// OpenTrackerSession (connect.h): how every command that talks to a device reaches one through
// --tracker/--key. Apart from tracker_commands.cc so that the compiler module
// (compiler_module.h) links it without the tracker commands.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "connect.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/crypto.h"

namespace crosstune::cli {

using std::chrono::milliseconds;

namespace {

// The tracker connection that holds the lease of this process's session; it lives until exit
// (closing it ends the lease, or the session's end does).
std::unique_ptr<client::TrackerClient>& SessionLeaseHolder() {
  static auto* holder = new std::unique_ptr<client::TrackerClient>();
  return *holder;
}

}  // namespace

void PrintQueueUpdate(const std::string& key, const msg::QueueUpdate& u) {
  std::fprintf(stderr, "crosstune: waiting for a '%s' device: position %u of %u (%s)\n",
               key.c_str(), u.position, u.queue_length, u.note.c_str());
}

milliseconds RenewEvery(milliseconds hold) { return client::RenewInterval(hold); }

Expected<std::unique_ptr<client::Session>> OpenTrackerSession(const ConnectFlags& flags) {
  if (flags.tracker.empty() || flags.key.empty()) {
    return Status(ErrorCode::kInvalidArgument, "--tracker and --key go together");
  }
  client::TrackerOptions to;
  to.tracker = flags.tracker;
  client::ConnectOptions options;
  if (!flags.auth_token_file.empty()) {
    CT_ASSIGN_OR_RETURN(options.auth_secret, ReadSecretFile(flags.auth_token_file));
    to.auth_secret = options.auth_secret;
  }
  auto timeout = milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  options.request_timeout = timeout;
  options.connect_timeout = std::min(timeout, options.connect_timeout);
  client::LeaseRequest req;
  req.key = flags.key;
  std::string key = flags.key;
  req.on_queue_update = [key](const msg::QueueUpdate& u) { PrintQueueUpdate(key, u); };
  CT_ASSIGN_OR_RETURN(client::LeasedSession leased, client::OpenLeasedSession(to, req, options));
  SessionLeaseHolder() = std::move(leased.tracker);
  return std::move(leased.session);
}

}  // namespace crosstune::cli
