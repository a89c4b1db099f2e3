// crosstune-tracker: pools the devices of a farm. A thin main over crosstune::tracker.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>

#include "crosstune/crypto.h"
#include "crosstune/tracker/tracker.h"

int main(int argc, char** argv) {
  using crosstune::tracker::Ms;
  crosstune::tracker::TrackerOptions o;
  std::string auth_file, admin_file, log_level = "info";
  int64_t heartbeat_ms = 1000, heartbeat_timeout_ms = 5000, claim_timeout_ms = 5000;
  int64_t aging_s = 30, self_check_s = 10, reattach_s = 30, startup_grace_s = 10;
  int64_t default_lease_s = 1800, default_wait_s = 600;

  CLI::App app{"crosstune-tracker: pools a farm of crosstune-server devices"};
  // A later flag overrides an earlier one (scripts append overrides to a base command line).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "tracker port (0: any free port)")->capture_default_str();
  app.add_option("--listen-fd", o.listen_fd,
                 "serve the tracker port on this inherited, listening socket instead of --port "
                 "(socket activation: the port stays bound across restarts)");
  app.add_option("--http-port", o.http_port,
                 "status page, /api/summary and /metrics (0: any free port; default off)");
  app.add_option("--db", o.db_path,
                 "SQLite database for session history and active leases (default: in memory)");
  app.add_option("--auth-token-file", auth_file,
                 "shared secret: servers and clients must answer an HMAC challenge")
      ->check(CLI::ExistingFile);
  app.add_option("--admin-token-file", admin_file, "admin token for drain, undrain and kick")
      ->check(CLI::ExistingFile);
  app.add_option("--heartbeat-ms", heartbeat_ms, "server heartbeat interval")
      ->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms, "drop a server silent this long")
      ->capture_default_str();
  app.add_option("--claim-timeout-ms", claim_timeout_ms,
                 "return a one-session grant nobody opens a session with")
      ->capture_default_str();
  app.add_option("--quarantine-after", o.scheduler.quarantine_after,
                 "quarantine after this many infrastructure failures in a row")
      ->capture_default_str();
  app.add_option("--aging-s", aging_s, "a waiting request gains one priority level this often")
      ->capture_default_str();
  app.add_option("--self-check-s", self_check_s, "re-check a quarantined device this often")
      ->capture_default_str();
  app.add_option("--reattach-s", reattach_s,
                 "after a restart, holders have this long to re-attach their leases")
      ->capture_default_str();
  app.add_option("--startup-grace-s", startup_grace_s,
                 "after a start, wait this long before calling a request unmatchable")
      ->capture_default_str();
  app.add_option("--default-lease-s", default_lease_s, "lease length when a client names none")
      ->capture_default_str();
  app.add_option("--default-wait-s", default_wait_s, "queue timeout when a client names none")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Logs go to stderr: stdout carries only the "listening on" line scripts read.
  spdlog::set_default_logger(spdlog::stderr_color_mt("crosstune-tracker"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "crosstune-tracker: error: %s\n", what.c_str());
    return 1;
  };
  if (!auth_file.empty()) {
    auto s = crosstune::ReadSecretFile(auth_file);
    if (!s.ok()) return fail(s.status().message());
    o.auth_secret = *s;
  }
  if (!admin_file.empty()) {
    auto s = crosstune::ReadSecretFile(admin_file);
    if (!s.ok()) return fail(s.status().message());
    o.admin_secret = *s;
  }
  auto& so = o.scheduler;
  so.heartbeat_interval = Ms(heartbeat_ms);
  so.heartbeat_timeout = Ms(heartbeat_timeout_ms);
  so.claim_timeout = Ms(claim_timeout_ms);
  so.aging_step = Ms(aging_s * 1000);
  so.self_check_interval = Ms(self_check_s * 1000);
  so.reattach_window = Ms(reattach_s * 1000);
  so.startup_grace = Ms(startup_grace_s * 1000);
  so.default_lease = Ms(default_lease_s * 1000);
  so.default_queue_timeout = Ms(default_wait_s * 1000);

  boost::asio::io_context io;
  crosstune::tracker::Tracker tracker(io, o);
  if (auto s = tracker.Start(); !s.ok()) return fail(s.message());
  std::string http =
      tracker.http_port() ? o.host + ":" + std::to_string(tracker.http_port()) : std::string("off");
  std::printf("crosstune-tracker: listening on %s:%u http %s\n", o.host.c_str(), tracker.port(),
              http.c_str());
  std::fflush(stdout);

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    spdlog::info("crosstune-tracker: stopping");
    tracker.Stop();
    io.stop();
  });
  io.run();
  return 0;
}
