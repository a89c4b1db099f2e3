// crosstune-server: serves sessions on a device. A thin main over crosstune::server.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "crosstune/cpus.h"
#include "crosstune/crypto.h"
#include "crosstune/flag_checks.h"
#include "crosstune/guarded_main.h"
#include "crosstune/parse_only.h"
#include "crosstune/server/device_info.h"
#include "crosstune/server/server.h"
#include "crosstune/server/systemd.h"
#include "crosstune/server/tracker_link.h"

namespace {

// What the tracker asks before it re-admits a quarantined device: the work dir takes files and a
// session process can be forked.
crosstune::Status SelfCheck(const std::string& work_dir) {
  using crosstune::ErrorCode;
  using crosstune::Status;
  std::string probe = work_dir + "/.self-check";
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);  // a default work dir appears lazily
  {
    std::ofstream f(probe);
    f << "ok";
    if (!f) return Status(ErrorCode::kIoError, "cannot write to the work dir " + work_dir);
  }
  std::filesystem::remove(probe, ec);
  pid_t pid = ::fork();
  if (pid < 0) return Status(ErrorCode::kBusy, "cannot fork a session process");
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return Status::Ok();
}

}  // namespace

static int ServerMain(int argc, char** argv) {
  using crosstune::server::Server;
  using crosstune::server::ServerOptions;
  CLI::App app{"crosstune-server: runs and times uploaded kernels on this device"};
  ServerOptions opt;
  opt.port = 9090;
  double session_timeout_s = 0, call_timeout_s = 60, handshake_timeout_s = 10, idle_timeout_s = 600;
  uint64_t max_upload = opt.session.max_upload_bytes, max_tensor = opt.session.max_tensor_bytes;
  uint64_t max_workspace = opt.session.max_workspace_bytes;
  std::string token_file, tracker_token_file, log_level = "info";
  bool no_fork = false;
  crosstune::server::TrackerLinkOptions link;
  std::vector<std::string> tags;
  app.add_option("--host", opt.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint16_t>(0, 65535));
  app.add_option("--port-end", opt.port_end, "try ports --port..--port-end until one is free")
      ->check(crosstune::IntegerIn<uint16_t>(0, 65535));
  app.add_option("--work-dir", opt.work_dir,
                 "directory for session workspaces (default: a fresh one under $TMPDIR)");
  app.add_flag("--no-fork", no_fork,
               "serve sessions in this process, one at a time (debugging; a crashing kernel "
               "takes the server down and calls have no timeout)");
  // Every number is range-checked on its text (flag_checks.h): past these bounds a value would
  // wrap or round to 0 ("no limit") further down, and NaN would pass any comparison.
  constexpr double kMonth = 30 * 86400.0;
  constexpr uint64_t kMaxBytes = uint64_t{1} << 60;
  app.add_option("--session-timeout", session_timeout_s, "seconds a session may last (0: no limit)")
      ->check(crosstune::SecondsIn(0, kMonth));
  app.add_option("--idle-timeout", idle_timeout_s,
                 "seconds a session may go without a request before it ends (0: no limit)")
      ->capture_default_str()
      ->check(crosstune::SecondsIn(0, kMonth));
  app.add_option("--call-timeout", call_timeout_s,
                 "default seconds one kernel call (or loading a module) may run (0: no limit)")
      ->capture_default_str()
      ->check(crosstune::SecondsIn(0, 86400));
  app.add_option("--handshake-timeout", handshake_timeout_s,
                 "seconds a new connection has to complete the handshake")
      ->capture_default_str()
      ->check(crosstune::SecondsIn(0.01, 3600));
  app.add_option("--max-workspace-bytes", max_workspace,
                 "what one session's workspace may hold in all")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint64_t>(1, kMaxBytes));
  app.add_option("--max-upload-bytes", max_upload, "largest file a client may upload")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint64_t>(1, kMaxBytes));
  app.add_option("--max-sessions", opt.max_sessions,
                 "sessions served at once; more are refused Busy")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint32_t>(1, 65536));
  app.add_option("--max-handshakes-per-peer", opt.max_handshakes_per_peer,
                 "connections from one address that may wait for their handshake at once; more "
                 "are refused Busy")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint32_t>(1, 65536));
  app.add_option("--max-tensor-bytes", max_tensor, "tensor memory one session may allocate")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint64_t>(1, kMaxBytes));
  app.add_option("--threads", opt.session.threads,
                 "threads a kernel's parallel loops use when the call does not say (0: every CPU "
                 "this process may run on)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint32_t>(0, 4096));
  app.add_option("--max-threads", opt.session.max_threads,
                 "most threads one call may ask for (0: the CPUs, or --threads if more)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint32_t>(0, 4096));
  std::string cpus;
  app.add_option("--cpus", cpus,
                 "run on these CPUs only, e.g. 0 or 2-3 (a Linux CPU list; default: every CPU this "
                 "process may use); kernels' threads and the server's children run there too");
  int64_t busy_poll_us = opt.session.busy_poll.count();
  app.add_option("--busy-poll-us", busy_poll_us,
                 "microseconds a session polls its socket for the next request before it sleeps "
                 "(0: never; off anyway when the server may use only one CPU)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<int64_t>(0, 100'000));
  app.add_option("--auth-token-file", token_file,
                 "file holding a shared secret; clients must answer an HMAC-SHA256 challenge");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--tracker", link.tracker,
                 "register with this tracker (host:port) and accept "
                 "only sessions holding its current lease token");
  app.add_option("--tracker-token-file", tracker_token_file,
                 "the tracker's --server-token-file (default: --auth-token-file)")
      ->check(CLI::ExistingFile);
  app.add_option("--key", link.key, "the device key clients ask the tracker for (e.g. rpi4)");
  app.add_option("--tag", tags, "k=v device tag for the tracker (repeatable)");
  app.add_option("--custom-addr", link.custom_addr,
                 "address clients should dial (host or host:port), when the tracker would see "
                 "another one");
  bool exit_with_parent = false;
  app.add_flag("--exit-with-parent", exit_with_parent,
               "end (SIGTERM) when the process that started this server dies, even by SIGKILL");
  crosstune::server::UnitLimits unit_limits;
  std::string apply_limits_unit;
  app.add_option("--systemd-tasks-max", unit_limits.tasks_max,
                 "tasks (processes and threads) the systemd unit may run in all (0: as the unit "
                 "says); applied by --apply-systemd-limits")
      ->check(CLI::Range(uint64_t{0}, uint64_t{4'194'304}));
  app.add_option("--systemd-memory-max", unit_limits.memory_max_bytes,
                 "bytes of memory the systemd unit may use in all (0: as the unit says); applied "
                 "by --apply-systemd-limits");
  app.add_option("--apply-systemd-limits", apply_limits_unit,
                 "set the --systemd-* limits on this unit with systemctl, then exit (the unit's "
                 "ExecStartPre)");
  // Every option may come from a file instead (the Debian package's /etc/crosstune/server.conf):
  // `key = value` lines named as the long options without "--" (`tag = ["soc=x", "mem=4G"]` for
  // a repeatable one); what the command line gives wins. An unknown key is an error, not a typo
  // that silently leaves a limit unset.
  app.set_config("--config", "",
                 "read options from this file (TOML: work-dir = \"/var/lib/crosstune\"); "
                 "options on the command line override it");
  app.allow_config_extras(CLI::config_extras_mode::error);
  if (crosstune::ParseOnlyRequested()) return crosstune::ParseOnly(app, argc, argv);
  CLI11_PARSE(app, argc, argv);
  if (!apply_limits_unit.empty()) {
    auto st = crosstune::server::ApplyUnitLimits(apply_limits_unit, unit_limits);
    if (!st.ok()) {
      std::cerr << "crosstune-server: error: " << st.message() << "\n";
      return 1;
    }
    return 0;
  }
  // Before the first thread.
  if (exit_with_parent && !crosstune::server::ExitWithParent()) return 0;
  if (!cpus.empty()) {
    // Before the first thread, so every thread and child inherits it.
    auto list = crosstune::ParseCpuList(cpus);
    crosstune::Status st = list.ok() ? crosstune::PinToCpus(*list) : list.status();
    if (!st.ok()) {
      std::cerr << "crosstune-server: error: --cpus: " << st.message() << "\n";
      return 1;
    }
  }
  // A closed stderr or stdout pipe (the script that started us went away) must not kill the server.
  std::signal(SIGPIPE, SIG_IGN);
  auto parsed_tags =
      crosstune::server::ParseTrackerFlags(link.tracker, link.key, link.custom_addr, tags);
  if (!parsed_tags.ok()) {
    std::cerr << "crosstune-server: error: " << parsed_tags.status().message() << "\n";
    return 1;
  }
  link.tags = std::move(*parsed_tags);

  // Under systemd (Type=notify) the unit waits for READY=1; find out now, not after start-up, if
  // it could never come.
  if (auto st = crosstune::server::NotifySystemd("STATUS=starting"); !st.ok()) {
    std::cerr << "crosstune-server: error: " << st.message() << "\n";
    return 1;
  }

  auto logger = spdlog::stderr_color_mt("crosstune-server");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern(crosstune::server::kLogPattern);

  using crosstune::SecondsToMs;
  opt.fork = !no_fork;
  opt.session_timeout = std::chrono::seconds(static_cast<int64_t>(std::ceil(session_timeout_s)));
  opt.session.call_timeout = SecondsToMs(call_timeout_s);
  opt.session.handshake_timeout = SecondsToMs(handshake_timeout_s);
  opt.session.idle_timeout = SecondsToMs(idle_timeout_s);
  opt.session.busy_poll = std::chrono::microseconds(busy_poll_us);
  opt.session.max_upload_bytes = max_upload;
  opt.session.max_workspace_bytes = max_workspace;
  opt.session.max_tensor_bytes = max_tensor;
  if (!token_file.empty()) {
    auto secret = crosstune::ReadSecretFile(token_file);
    if (!secret.ok()) {
      std::cerr << "crosstune-server: error: " << secret.status().message() << "\n";
      return 1;
    }
    opt.session.auth_secret = *secret;
  }

  // The tracker link's thread starts only after Listen() has forked the session fork server (a
  // fork server with threads would hand their held locks to every session). The device is
  // described by a probe process: the parent itself never loads the CUDA driver.
  std::unique_ptr<crosstune::server::TrackerLink> tracker;
  std::string work_dir;  // known after Listen(); read by the self-check on the link thread later
  crosstune::server::Server* running = nullptr;  // set before the link thread starts
  if (!link.tracker.empty()) {
    // A session whose lease the tracker revokes (expired, kicked, released) ends at once.
    link.end_session = [&running](int pid) {
      if (running) {
        running->EndSession(pid, crosstune::Status(crosstune::ErrorCode::kUnauthorized,
                                                   "the lease ended at the tracker (expired, "
                                                   "released or kicked)"));
      }
    };
    link.self_check = [&work_dir, &running]() -> crosstune::Status {
      // A server whose session fork server died takes no sessions: not fit for re-admission.
      if (running) CT_RETURN_IF_ERROR(running->CanStartSessions());
      return SelfCheck(work_dir);
    };
    // Without its fork server the server takes no sessions: it leaves the pool at once.
    link.health = [&running]() -> crosstune::Status {
      return running ? running->CanStartSessions() : crosstune::Status::Ok();
    };
    link.auth_secret = opt.session.auth_secret;
    if (!tracker_token_file.empty()) {
      auto secret = crosstune::ReadSecretFile(tracker_token_file);
      if (!secret.ok()) {
        std::cerr << "crosstune-server: error: " << secret.status().message() << "\n";
        return 1;
      }
      link.auth_secret = *secret;
    }
    // Ready (for systemd) only once the device is in the pool: listening and registered.
    link.on_registered = [tracker_addr = link.tracker](const std::string& device) {
      auto st = crosstune::server::NotifySystemd("READY=1\nSTATUS=registered with " + tracker_addr +
                                                 " as " + device);
      if (!st.ok()) spdlog::error("{}", st.message());
    };
    link.info = crosstune::server::CollectDeviceInfoInChild();
    tracker = std::make_unique<crosstune::server::TrackerLink>(link);
    opt.session.accept_hello = [t = tracker.get()](const crosstune::msg::Hello& hello) {
      return t->AcceptHello(hello);
    };
  }

  Server server(opt);
  running = &server;
  auto st = server.Listen();
  if (!st.ok()) {
    std::cerr << "crosstune-server: error: " << st.message() << "\n";
    return 1;
  }
  work_dir = server.work_dir();
  if (tracker) {
    server.set_on_session_end([t = tracker.get()](const crosstune::server::SessionEnd& end) {
      t->OnSessionEnd(end.pid, end.reported);
    });
  }
  // Scripts and tests read the port from this line.
  std::printf("crosstune-server: listening on %s:%u\n", server.host().c_str(),
              static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  if (tracker) {
    tracker->Start(server.port());
  } else if (auto ready = crosstune::server::NotifySystemd("READY=1\nSTATUS=listening on port " +
                                                           std::to_string(server.port()));
             !ready.ok()) {
    spdlog::error("{}", ready.message());
  }
  server.Run();
  (void)crosstune::server::NotifySystemd("STOPPING=1");
  if (tracker) tracker->Stop();
  return 0;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-server", [&] { return ServerMain(argc, argv); });
}
