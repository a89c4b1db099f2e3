// crosstune-tracker: pools the devices of a farm. A thin main over crosstune::tracker.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>

#include "crosstune/crypto.h"
#include "crosstune/flag_checks.h"
#include "crosstune/guarded_main.h"
#include "crosstune/parse_only.h"
#include "crosstune/tracker/grant_policy.h"
#include "crosstune/tracker/tracker.h"

static int TrackerMain(int argc, char** argv) {
  using crosstune::IntegerIn;
  using crosstune::tracker::Ms;
  crosstune::tracker::TrackerOptions o;
  std::string auth_file, server_auth_file, admin_file, log_level = "info";
  int64_t heartbeat_ms = 1000, heartbeat_timeout_ms = 5000, claim_timeout_ms = 5000;
  int64_t aging_s = 30, self_check_s = 10, reattach_s = 30, startup_grace_s = 10;
  int64_t default_lease_s = 1800, default_wait_s = 600;
  int64_t tvm_wait_s = 0, tvm_probe_s = 10;

  CLI::App app{"crosstune-tracker: pools a farm of crosstune-server devices"};
  // A later flag overrides an earlier one (scripts append overrides to a base command line).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "tracker port (0: any free port)")
      ->capture_default_str()
      ->check(IntegerIn<uint16_t>(0, 65535));
  app.add_option("--listen-fd", o.listen_fd,
                 "serve the tracker port on this inherited, listening socket instead of --port "
                 "(socket activation: the port stays bound across restarts)")
      ->check(IntegerIn<int>(0, 1 << 20));
  app.add_option("--http-port", o.http_port,
                 "status page, /api/summary and /metrics (0: any free port; default off)")
      ->check(IntegerIn<int>(0, 65535));
  app.add_option("--db", o.db_path,
                 "SQLite database for session history, active leases and the farm's tuning "
                 "records (default: in memory)");
  app.add_option("--records-db", o.records_db,
                 "keep the farm's tuning records in this PostgreSQL database instead, which "
                 "other trackers may share (postgresql://USER@HOST/DB or libpq's key=value form; "
                 "a password goes in a pgpass file, passfile=...)");
  app.add_option("--auth-token-file", auth_file,
                 "shared secret: clients (and servers, without --server-token-file) must answer "
                 "an HMAC challenge")
      ->check(CLI::ExistingFile);
  app.add_option("--server-token-file", server_auth_file,
                 "secret only servers hold: servers answer the challenge with it, so clients "
                 "cannot register as servers")
      ->check(CLI::ExistingFile);
  app.add_option("--admin-token-file", admin_file, "admin token for drain, undrain and kick")
      ->check(CLI::ExistingFile);
  app.add_option("--heartbeat-ms", heartbeat_ms, "server heartbeat interval")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(10, 3'600'000));
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms, "drop a server silent this long")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(100, 86'400'000));
  app.add_option("--claim-timeout-ms", claim_timeout_ms,
                 "return a one-session grant nobody opens a session with")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(100, 86'400'000));
  app.add_option("--quarantine-after", o.scheduler.quarantine_after,
                 "quarantine after this many infrastructure failures in a row")
      ->capture_default_str()
      ->check(IntegerIn<int>(1, 1000));
  app.add_option("--max-priority", o.scheduler.max_priority,
                 "requests may ask for a priority in -N..N (beyond: refused; TVM's: held to it)")
      ->capture_default_str()
      ->check(IntegerIn<int32_t>(0, 1'000'000));
  app.add_option("--policy", o.scheduler.policy,
                 "who gets a free device first: priority (higher priority first, aging with "
                 "--aging-s) or fair-share (the holder holding fewest of the key's devices)")
      ->capture_default_str()
      ->check([](const std::string& name) {
        auto p = crosstune::tracker::MakeGrantPolicy(name, Ms(1000));
        return p.ok() ? std::string() : p.status().message();
      });
  app.add_option("--aging-s", aging_s, "a waiting request gains one priority level this often")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(1, 86'400));
  app.add_option("--self-check-s", self_check_s, "re-check a quarantined device this often")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(1, 86'400));
  app.add_option("--reattach-s", reattach_s,
                 "after a restart, holders have this long to re-attach their leases")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(0, 86'400));
  app.add_option("--startup-grace-s", startup_grace_s,
                 "after a start, wait this long before calling a request unmatchable")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(0, 3'600));
  app.add_option("--default-lease-s", default_lease_s, "lease length when a client names none")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(1, 7 * 86'400));
  app.add_option("--default-wait-s", default_wait_s, "queue timeout when a client names none")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(1, 7 * 86'400));
  app.add_option("--max-handshakes", o.max_pre_auth_conns,
                 "connections allowed at once before their handshake completes")
      ->capture_default_str()
      ->check(IntegerIn<size_t>(1, size_t{1} << 20));
  app.add_option("--max-handshakes-per-peer", o.max_pre_auth_conns_per_peer,
                 "the same, from one peer address")
      ->capture_default_str()
      ->check(IntegerIn<size_t>(1, size_t{1} << 20));
  app.add_option("--records-per-second", o.records_per_second,
                 "the farm's tuning records one sender may send a second (more are refused: Busy)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  app.add_option("--records-burst", o.records_burst,
                 "the records one sender may send at once before its rate applies")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  app.add_flag("--allow-tvm", o.tvm.allow,
               "accept Apache TVM RPC servers and clients (TVM's tracker protocol, which has no "
               "authentication) on the tracker port");
  app.add_option("--tvm-network", o.tvm.networks,
                 "accept TVM peers only from this CIDR network (repeatable; default: any)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tvm-wait-s", tvm_wait_s,
                 "end a TVM client's wait for a device after this long (0: --default-wait-s)")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(0, 7 * 86'400));
  app.add_option("--tvm-probe-s", tvm_probe_s,
                 "probe an idle TVM server's port this often; after two failures in a row it is "
                 "out of the pool until a probe passes")
      ->capture_default_str()
      ->check(IntegerIn<int64_t>(1, 86'400));
  app.add_flag("--tvm-allow-custom-addr", o.tvm.allow_custom_addr,
               "let a TVM server register an IP address other than the one it connects from "
               "(TVM's custom_addr), if it lies within --tvm-network (required); the tracker "
               "probes that address");
  app.add_option("--tvm-max-conns", o.tvm.max_conns, "TVM connections allowed at once")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--tvm-max-conns-per-peer", o.tvm.max_conns_per_peer,
                 "the same, from one peer address")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  // Options may come from a file too (the Debian package's /etc/crosstune/tracker.conf), named as
  // the long options without "--"; the command line wins, an unknown key is an error.
  app.set_config("--config", "",
                 "read options from this file (TOML: port = 9190); options on the command line "
                 "override it");
  app.allow_config_extras(CLI::config_extras_mode::error);
  if (crosstune::ParseOnlyRequested()) return crosstune::ParseOnly(app, argc, argv);
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
  if (!server_auth_file.empty()) {
    auto s = crosstune::ReadSecretFile(server_auth_file);
    if (!s.ok()) return fail(s.status().message());
    o.server_secret = *s;
    if (o.server_secret == o.auth_secret) {
      return fail("--server-token-file must differ from --auth-token-file");
    }
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
  o.tvm.request_timeout = Ms(tvm_wait_s * 1000);
  o.tvm.probe_interval = Ms(tvm_probe_s * 1000);

  {
    boost::system::error_code ec;
    auto addr = boost::asio::ip::make_address(o.host, ec);
    if (!ec && !addr.is_loopback() && (o.auth_secret.empty() || o.server_secret.empty())) {
      spdlog::warn(
          "crosstune-tracker: WARNING: listening on {} without {}: anyone who can reach this "
          "address can {}",
          o.host, o.auth_secret.empty() ? "--auth-token-file" : "--server-token-file",
          o.auth_secret.empty() ? "register devices, take leases and run code on them"
                                : "register a fake server in place of a device");
    }
  }
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

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-tracker", [&] { return TrackerMain(argc, argv); });
}
