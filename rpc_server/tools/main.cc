// crosstune-server: serves sessions on a device. A thin main over crosstune::server.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "crosstune/crypto.h"
#include "crosstune/server/server.h"

int main(int argc, char** argv) {
  using crosstune::server::Server;
  using crosstune::server::ServerOptions;
  CLI::App app{"crosstune-server: runs and times uploaded kernels on this device"};
  ServerOptions opt;
  opt.port = 9090;
  double session_timeout_s = 0, call_timeout_s = 60, handshake_timeout_s = 10;
  uint64_t max_upload = opt.session.max_upload_bytes, max_tensor = opt.session.max_tensor_bytes;
  std::string token_file, log_level = "info";
  bool no_fork = false;
  app.add_option("--host", opt.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "port to listen on (0: any free port)")->capture_default_str();
  app.add_option("--port-end", opt.port_end, "try ports --port..--port-end until one is free");
  app.add_option("--work-dir", opt.work_dir,
                 "directory for session workspaces (default: a fresh one under $TMPDIR)");
  app.add_flag("--no-fork", no_fork,
               "serve sessions in this process, one at a time (debugging; a crashing kernel "
               "takes the server down and calls have no timeout)");
  app.add_option("--session-timeout", session_timeout_s,
                 "seconds a session may last (0: no limit)")->check(CLI::NonNegativeNumber);
  app.add_option("--call-timeout", call_timeout_s,
                 "default seconds one kernel call may run")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--handshake-timeout", handshake_timeout_s,
                 "seconds a new connection has to complete the handshake")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-upload-bytes", max_upload, "largest file a client may upload")
      ->capture_default_str();
  app.add_option("--max-sessions", opt.max_sessions, "sessions served at once; more are refused Busy")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-tensor-bytes", max_tensor, "tensor memory one session may allocate")
      ->capture_default_str();
  app.add_option("--auth-token-file", token_file,
                 "file holding a shared secret; clients must answer an HMAC-SHA256 challenge");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  CLI11_PARSE(app, argc, argv);

  auto logger = spdlog::stderr_color_mt("crosstune-server");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%P] [%l] %v");

  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  opt.fork = !no_fork;
  opt.session_timeout = std::chrono::seconds(static_cast<int64_t>(session_timeout_s + 0.999));
  opt.session.call_timeout = ms(call_timeout_s);
  opt.session.handshake_timeout = ms(handshake_timeout_s);
  opt.session.max_upload_bytes = max_upload;
  opt.session.max_tensor_bytes = max_tensor;
  if (!token_file.empty()) {
    auto secret = crosstune::ReadSecretFile(token_file);
    if (!secret.ok()) {
      std::cerr << "crosstune-server: error: " << secret.status().message() << "\n";
      return 1;
    }
    opt.session.auth_secret = *secret;
  }

  Server server(opt);
  auto st = server.Listen();
  if (!st.ok()) {
    std::cerr << "crosstune-server: error: " << st.message() << "\n";
    return 1;
  }
  // Scripts and tests read the port from this line.
  std::printf("crosstune-server: listening on %s:%u\n", server.host().c_str(),
              static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  server.Run();
  return 0;
}
