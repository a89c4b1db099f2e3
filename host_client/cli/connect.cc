#include "connect.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace crosstune::cli {

void AddConnectOptions(CLI::App* cmd, ConnectFlags* flags) {
  auto* group = cmd->add_option_group("connection", "where the device is and how to reach it");
  group->add_option("--server,-s", flags->server, "crosstune-server as HOST:PORT")
      ->envname("CROSSTUNE_SERVER");
  group->add_option("--tracker", flags->tracker, "crosstune-tracker as HOST:PORT");
  group->add_option("--key", flags->key, "device key to request from the tracker");
  group->add_option("--auth-token-file", flags->auth_token_file,
                    "file holding the server's shared secret (HMAC challenge)")
      ->envname("CROSSTUNE_AUTH_TOKEN_FILE");
  group->add_option("--timeout", flags->timeout_s, "seconds to wait for each reply")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

Expected<std::string> ReadAuthToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kIoError, path + ": cannot read the auth token file");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  const char* ws = " \t\r\n";
  token.erase(0, token.find_first_not_of(ws));
  auto end = token.find_last_not_of(ws);
  token.erase(end == std::string::npos ? 0 : end + 1);
  if (token.empty()) return Status(ErrorCode::kInvalidArgument, path + ": the auth token file is empty");
  return token;
}

Expected<std::unique_ptr<client::Session>> OpenSession(const ConnectFlags& flags) {
  if (!flags.tracker.empty() || !flags.key.empty()) {
    if (!flags.server.empty()) {
      return Status(ErrorCode::kInvalidArgument, "give either --server or --tracker/--key, not both");
    }
    return Status(ErrorCode::kNoDevice,
                  "--tracker/--key: connecting through a tracker is not available yet; "
                  "use --server HOST:PORT");
  }
  if (flags.server.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  "no device given: pass --server HOST:PORT (or set CROSSTUNE_SERVER)");
  }
  client::ConnectOptions options;
  options.server = flags.server;
  if (!flags.auth_token_file.empty()) {
    CT_ASSIGN_OR_RETURN(options.auth_secret, ReadAuthToken(flags.auth_token_file));
  }
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  options.request_timeout = timeout;
  options.connect_timeout = std::min(timeout, options.connect_timeout);
  auto session = client::Session::Connect(options);
  if (!session.ok()) {
    return Status(session.status().code(), flags.server + ": " + session.status().message());
  }
  return std::move(session).value();
}

}  // namespace crosstune::cli
