// A build worker on the farm: crosstune-build-worker serving builds to tuners on other hosts.
//
//   crosstune-build-worker --host 0.0.0.0 --port 9190 --tracker tracker:9190 --key builders
//
// It is crosstune-server's acceptor, handshake, auth, limits and tracker link (rpc_server/) with
// one more request, Build (common/build_job.h), through SessionOptions::handle_request; it serves
// none of a device's requests (no uploads, no calls). Each connection is a session process of its
// own, in which its builds run one at a time: a compiler that crashes or runs past the build's
// limit ends that session only (its client hears why) and the worker goes on serving. A client
// runs `cores` builds at once over that many sessions (host_client's RemoteBuilder).
//
// Why a folder of its own: the serving code needs both the server library (rpc_server/, which
// depends on common only, for the boards) and the builder (the compiler); it cannot live in
// either without one pointing at the other. Here it sits above both, beside the tool, and the
// farm simulation (bench/) reuses ServeBuilds with a build function of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/status.h"

namespace crosstune::build_worker {

struct BuildWorkerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  // Sessions' scratch directories go under here; empty: a fresh one under $TMPDIR.
  std::string work_dir;
  std::string auth_secret;  // clients answer an HMAC challenge with it; empty: none
  // Builds at once, which is the sessions served at once (a few more are let in for pings and
  // the tracker's checks); 0: the CPUs this process may run on.
  int cores = 0;
  // The target kinds Info and the tracker name; empty: every backend's kind ("cpu", "cuda").
  std::vector<std::string> targets;
  // A build's limit when its job gives none.
  std::chrono::milliseconds default_timeout{60'000};
  // Register with this tracker ("host:port") under `key`; empty: no tracker.
  std::string tracker;
  std::string key;
  std::string tracker_secret;  // the tracker's --server-token-file; empty: auth_secret
  std::map<std::string, std::string> tags;
  std::string custom_addr;  // what clients should dial, when the tracker would see another one
  // Without auth_secret the worker refuses a non-loopback `host` (anyone who reaches it could
  // use its cores) unless this is set; it then warns and registers tagged insecure=any-client.
  bool insecure_allow_any_client = false;

  // The build box (builder/sandbox.h): each session process confines itself before its first
  // build, to the toolchain, its workspace and `cache_dir`. Where the kernel has no Landlock,
  // ServeBuilds refuses to start unless allow_unconfined_builds (it then warns). Off: builds are
  // not compiled here (a simulation's build function).
  bool confine_builds = true;
  bool allow_unconfined_builds = false;
  std::string cache_dir;  // the build cache the build function uses (read-write in the box)
  // A build request's bytes past this are refused (kLimitExceeded) before anything is allocated;
  // at most Limits::kMaxBuildJobBytes.
  uint64_t max_request_bytes = uint64_t{256} << 20;
  // Each session process's address space (RLIMIT_AS), so the worker's memory is bounded by its
  // sessions times this; 0: unbounded. Not applied in sanitizer builds (their shadow memory).
  uint64_t session_memory_bytes = uint64_t{4096} << 20;
  // Called once listening, with the bound address; empty: prints
  // "crosstune-build-worker: listening on HOST:PORT" to stdout (scripts and tests read it).
  std::function<void(const std::string& host, uint16_t port)> on_listening;
};

// Builds one request; runs in a session process (a crash or a hang ends that session only).
using BuildFunction = std::function<builder::BuildResult(const builder::BuildRequest&)>;

// Serves Build requests with `build` until SIGINT, SIGTERM or SIGHUP. Call it before this
// process starts any thread: it forks the sessions' fork server first (server.h). Errors: the
// address cannot be bound, a flag is inconsistent (a tracker without a key), a non-loopback host
// without a secret (and without insecure_allow_any_client), no Landlock to confine the builds
// (without allow_unconfined_builds).
Status ServeBuilds(const BuildWorkerOptions& options, BuildFunction build);

// The real worker's build: the builder's in-process compile (builder.h BuildInProcess), through
// the build cache in `cache_dir` when it is not empty (build_cache.h; shared with other workers
// and tuners on a shared file system). Honours BuildRequest::debug_action as the pool's workers
// do (kCrash dies by SIGSEGV, kHang never returns), so the tests can crash a remote build.
BuildFunction CompileHere(const std::string& cache_dir);

}  // namespace crosstune::build_worker
