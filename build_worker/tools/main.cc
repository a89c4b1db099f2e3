// crosstune-build-worker: builds kernels for others. Two ways to run:
//  - started by the builder's pool (builder.h) with no arguments and its end of a socket as fd 3:
//    one worker of a tuner's local pool;
//  - with flags: a build worker of the farm, serving builds over the network (build_worker.h),
//    registered with a tracker under a build key when --tracker is given.
// A thin main over crosstune::build_worker.
#include <fcntl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "crosstune/build_worker/build_worker.h"
#include "crosstune/builder/builder.h"
#include "crosstune/crypto.h"
#include "crosstune/flag_checks.h"
#include "crosstune/guarded_main.h"
#include "crosstune/numbers.h"
#include "crosstune/parse_only.h"
#include "crosstune/protocol.h"
#include "crosstune/server/server.h"
#include "crosstune/server/tracker_link.h"

namespace {

int Fail(const std::string& what) {
  std::cerr << "crosstune-build-worker: error: " << what << "\n";
  return 1;
}

int WorkerMain(int argc, char** argv) {
  namespace bw = crosstune::build_worker;
  CLI::App app{
      "crosstune-build-worker: serves kernel builds to tuners on other hosts (with no arguments "
      "and fd 3 open: one worker of a tuner's local build pool)"};
  bw::BuildWorkerOptions o;
  o.port = 9290;
  std::string token_file, tracker_token_file, cache_dir, log_level = "info";
  std::vector<std::string> tags;
  double build_timeout_s = 60;
  uint64_t max_build_mb = o.max_request_bytes >> 20;
  uint64_t session_memory_mb = o.session_memory_bytes >> 20;
  bool exit_with_parent = false;
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint16_t>(0, 65535));
  app.add_option("--work-dir", o.work_dir,
                 "directory for the sessions' scratch space (default: a fresh one under $TMPDIR)");
  app.add_option("--cores", o.cores, "builds at once (0: every CPU this process may run on)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<int>(0, 4096));
  app.add_option("--target", o.targets,
                 "a target kind this worker builds, named to the tracker (repeatable; default: "
                 "cpu and cuda, the builder's backends)");
  app.add_option("--build-timeout", build_timeout_s,
                 "seconds a build may run when its request gives no limit")
      ->capture_default_str()
      ->check(crosstune::SecondsIn(0.01, 86400));
  app.add_option("--cache-dir", cache_dir,
                 "build cache directory (shared with other workers and tuners on a shared file "
                 "system); default: none");
  app.add_option("--auth-token-file", token_file,
                 "file holding a shared secret; clients must answer an HMAC-SHA256 challenge");
  app.add_option("--tracker", o.tracker,
                 "register with this tracker (host:port) and accept only sessions holding its "
                 "current lease token");
  app.add_option("--tracker-token-file", tracker_token_file,
                 "the tracker's --server-token-file (default: --auth-token-file)")
      ->check(CLI::ExistingFile);
  app.add_option("--key", o.key, "the build key tuners ask the tracker for (e.g. builders)");
  app.add_option("--tag", tags, "k=v tag for the tracker (repeatable)");
  app.add_option("--custom-addr", o.custom_addr,
                 "address clients should dial (host or host:port), when the tracker would see "
                 "another one");
  app.add_option("--max-build-mb", max_build_mb,
                 "largest build request (source and link objects) in MiB, refused before it is "
                 "read")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint64_t>(1, crosstune::Limits::kMaxBuildJobBytes >> 20));
  app.add_option("--session-memory-mb", session_memory_mb,
                 "address space of each session process in MiB (the worker's memory is bounded "
                 "by sessions times this; 0: unbounded)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint64_t>(0, uint64_t{1} << 30));
  app.add_flag("--allow-unconfined-builds", o.allow_unconfined_builds,
               "start even where the kernel has no Landlock, building unconfined (a client's "
               "source can then make the compiler read any file this user can)");
  app.add_flag("--insecure-allow-any-client", o.insecure_allow_any_client,
               "listen on a non-loopback address without --auth-token-file (tagged "
               "insecure=any-client at the tracker)");
  app.add_flag("--exit-with-parent", exit_with_parent,
               "end (SIGTERM) when the process that started this worker dies, even by SIGKILL");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  // Every option may come from a file instead (the Debian package's
  // /etc/crosstune/build-worker.conf), as crosstune-server's --config: the command line wins,
  // and an unknown key is an error.
  app.set_config("--config", "",
                 "read options from this file (TOML: cache-dir = \"/var/cache/x\"); options on "
                 "the command line override it");
  app.allow_config_extras(CLI::config_extras_mode::error);
  if (crosstune::ParseOnlyRequested()) return crosstune::ParseOnly(app, argc, argv);
  CLI11_PARSE(app, argc, argv);
  // Before the first thread.
  if (exit_with_parent && !crosstune::server::ExitWithParent()) return 0;
  std::signal(SIGPIPE, SIG_IGN);
  auto parsed_tags = crosstune::server::ParseTrackerFlags(o.tracker, o.key, o.custom_addr, tags);
  if (!parsed_tags.ok()) return Fail(parsed_tags.status().message());
  o.tags = std::move(*parsed_tags);
  if (!token_file.empty()) {
    auto secret = crosstune::ReadSecretFile(token_file);
    if (!secret.ok()) return Fail(secret.status().message());
    o.auth_secret = *secret;
  }
  if (!tracker_token_file.empty()) {
    auto secret = crosstune::ReadSecretFile(tracker_token_file);
    if (!secret.ok()) return Fail(secret.status().message());
    o.tracker_secret = *secret;
  }
  o.default_timeout = crosstune::SecondsToMs(build_timeout_s);
  o.max_request_bytes = max_build_mb << 20;
  o.session_memory_bytes = session_memory_mb << 20;
  o.cache_dir = cache_dir;

  auto logger = spdlog::stderr_color_mt("crosstune-build-worker");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern(crosstune::server::kLogPattern);
  crosstune::Status st = bw::ServeBuilds(o, bw::CompileHere(cache_dir));
  if (!st.ok()) return Fail(st.message());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The pool's worker: no arguments and its socket as fd 3.
  if (argc == 1 && ::fcntl(3, F_GETFD) >= 0) crosstune::builder::RunBuildWorker(3);
  return crosstune::GuardedMain("crosstune-build-worker", [&] { return WorkerMain(argc, argv); });
}
