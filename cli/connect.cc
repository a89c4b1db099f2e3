#include "connect.h"

#include <algorithm>
#include <cstdlib>

#include "crosstune/crypto.h"

namespace crosstune::cli {

void AddConnectOptions(CLI::App* cmd, ConnectFlags* flags) {
  auto* group = cmd->add_option_group("connection", "where the device is and how to reach it");
  group->add_option("--server,-s", flags->server, "crosstune-server as HOST:PORT")
      ->envname("CROSSTUNE_SERVER");
  group->add_option("--tracker", flags->tracker, "crosstune-tracker as HOST:PORT");
  group->add_option("--key", flags->key, "device key to request from the tracker");
  group
      ->add_option("--auth-token-file", flags->auth_token_file,
                   "file holding the server's shared secret (HMAC challenge)")
      ->envname("CROSSTUNE_AUTH_TOKEN_FILE");
  group->add_option("--timeout", flags->timeout_s, "seconds to wait for each reply")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

void AddTrackerFlags(CLI::App* cmd, TrackerFlags* f) {
  cmd->add_option("--tracker", f->tracker, "crosstune-tracker as HOST:PORT")
      ->envname("CROSSTUNE_TRACKER")
      ->required();
  cmd->add_option("--auth-token-file", f->auth_token_file,
                  "file holding the farm's shared secret (HMAC challenge)")
      ->envname("CROSSTUNE_AUTH_TOKEN_FILE");
}

Expected<std::unique_ptr<client::TrackerClient>> ConnectTracker(const TrackerFlags& flags) {
  client::TrackerOptions o;
  o.tracker = flags.tracker;
  if (!flags.auth_token_file.empty()) {
    CT_ASSIGN_OR_RETURN(o.auth_secret, ReadSecretFile(flags.auth_token_file));
  }
  return client::TrackerClient::Connect(o);
}

Expected<std::unique_ptr<client::Session>> OpenSession(const ConnectFlags& flags) {
  // --tracker/--key win over --server (which may come from CROSSTUNE_SERVER).
  if (!flags.tracker.empty() || !flags.key.empty()) return OpenTrackerSession(flags);
  if (flags.server.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  "no device given: pass --server HOST:PORT (or set CROSSTUNE_SERVER)");
  }
  client::ConnectOptions options;
  options.server = flags.server;
  // Set by `crosstune lease` for the command it runs (with CROSSTUNE_SERVER).
  if (const char* lease = std::getenv("CROSSTUNE_LEASE"); lease && *lease) {
    options.lease_token = lease;
  }
  if (!flags.auth_token_file.empty()) {
    CT_ASSIGN_OR_RETURN(options.auth_secret, ReadSecretFile(flags.auth_token_file));
  }
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  options.request_timeout = timeout;
  options.connect_timeout = std::min(timeout, options.connect_timeout);
  auto session = client::Session::Connect(options);
  if (!session.ok()) {
    const Status& st = session.status();
    // Name the server once, whether or not the client library's message already does.
    if (st.message().find(flags.server) != std::string::npos) return st;
    return Status(st.code(), flags.server + ": " + st.message());
  }
  return std::move(session).value();
}

}  // namespace crosstune::cli
