// The builder: compiles kernel sources for a target in a pool of worker processes, with a
// content-addressed cache, and packages the results as .ctpkg files.
//
//   auto builder = Builder::Create({.workers = 0, .cache_dir = "~/.cache/crosstune"});
//   std::vector<BuildResult> results = (*builder)->BuildMany(requests);   // in request order
//   WriteBuildPackage(requests[0], results[0], "kernel.ctpkg");
//
// Each worker is a long-lived child process, the crosstune-build-worker program (BuildWorkerPath
// below), that compiles one request at a time with the in-process compilers of compiler.h. A
// compiler crash or a build past its timeout costs one worker, which is killed and respawned; the
// caller gets a failed BuildResult, never a crash or a hang.
//
// Thread-safety: Build and BuildMany may be called from any number of threads at once; requests
// queue for the next free worker. Builder must outlive those calls. Only where no worker program
// is found are the workers forks of the calling process: then create the Builder before starting
// threads that hold locks across fork (a worker respawn forks too; it then only runs the worker
// loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/package.h"
#include "crosstune/protocol.h"
#include "crosstune/status.h"

namespace crosstune::builder {

struct BuildRequest {
  std::string source;  // kernel source text (C for llvm targets, CUDA C for cuda)
  Target target;
  std::vector<std::string> flags;  // see CompileCpu / CompileCuda
  std::string name = "kernel";     // library file stem in the package
  std::string source_name;         // what diagnostics call the source; default kernel.c / kernel.cu
  std::chrono::milliseconds timeout{0};  // 0: BuilderOptions::default_timeout
  // CPU only. object_only: compile `source` to a relocatable object (BuildResult::library holds
  // its bytes; no module table is needed or read). link_objects: objects of earlier object_only
  // builds, linked into this build's shared library beside `source`, whose module table is the
  // library's (how one library holds a whole network: compiler.h).
  bool object_only = false;
  std::vector<std::string> link_objects;

  // Test hooks, applied inside the worker: kCrash dies by SIGSEGV, kHang never answers,
  // kGarbageThenHang sends a reply that cannot be read and then ignores its closed channel.
  enum class DebugAction : uint8_t { kNone = 0, kCrash = 1, kHang = 2, kGarbageThenHang = 3 };
  DebugAction debug_action = DebugAction::kNone;
};

struct BuildResult {
  Status status;            // kBuildError (message = diagnostics), kTimeout, kInvalidArgument
  std::string diagnostics;  // compiler warnings/errors, also on success
  std::string library;      // .so / .cubin bytes
  std::string ptx;          // CUDA only
  std::vector<pkg::Function> functions;
  std::vector<std::string> required_features;
  double build_seconds = 0;  // wall time in the worker (0 for cache hits)
  bool cache_hit = false;
  std::string cache_key;  // SHA-256 hex
  // Set when the cache was used but not cleanly: a damaged entry was found and rebuilt, or the
  // first store that failed (later failures of the same builder are not repeated).
  std::string cache_warning;
  bool ok() const { return status.ok(); }
};

// Where builds run: the seam between the measure pipeline and whatever compiles its candidates.
// The Builder below (a local pool of worker processes) is one; a service that spreads builds over
// remote build workers too, or one that stands in for them in a simulation, are others.
// Build and BuildMany may be called from any number of threads at once.
class BuildService {
 public:
  virtual ~BuildService() = default;
  virtual BuildResult Build(const BuildRequest& request) = 0;
  // Builds every request, in parallel where the service can; results[i] answers requests[i].
  virtual std::vector<BuildResult> BuildMany(const std::vector<BuildRequest>& requests) = 0;
  // How many builds it runs at once.
  virtual int slots() const = 0;
};

// The user's build cache: $XDG_CACHE_HOME/crosstune/builds, else ~/.cache/crosstune/builds; empty
// when neither variable is set.
std::string DefaultCacheDir();

struct BuilderOptions {
  int workers = 0;        // 0: one per core (per CPU of `cpus` when given)
  std::vector<int> cpus;  // the CPUs the workers run on; empty: wherever this process may run
  std::string cache_dir;  // empty: no cache (DefaultCacheDir() is the usual one); build_cache.h
  // The cache's budget: past it, the least recently used entries are removed (at Create and as
  // builds are stored). 0: unbounded.
  uint64_t cache_max_bytes = 0;
  std::chrono::milliseconds default_timeout{60'000};
  // The workers' program; empty: BuildWorkerPath(). Whichever it is must answer the pool's
  // handshake as this release's worker (see BuildWorkerPath).
  std::string worker_program;
};

struct BuilderStats {
  uint64_t builds = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_damaged = 0;    // entries that failed their checks (then rebuilt)
  uint64_t worker_restarts = 0;  // crashes and timeouts
  uint64_t workers_refused = 0;  // replacements refused at the handshake (another release's)
};

class Builder : public BuildService {
 public:
  static Expected<std::unique_ptr<Builder>> Create(const BuilderOptions& options = {});
  ~Builder() override;  // stops the workers
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  BuildResult Build(const BuildRequest& request) override;
  // Builds all requests in parallel on the pool; results[i] answers requests[i].
  std::vector<BuildResult> BuildMany(const std::vector<BuildRequest>& requests) override;

  int workers() const;
  int slots() const override { return workers(); }
  BuilderStats stats() const;

 private:
  class Pool;
  explicit Builder(std::unique_ptr<Pool> pool);
  std::unique_ptr<Pool> pool_;
};

// The cache key of a request: SHA-256 over source, target, flags, name and compiler versions
// (build_cache.h lists what it covers).
std::string BuildCacheKey(const BuildRequest& request);

// Builds in this process, without the pool (what a worker runs).
BuildResult BuildInProcess(const BuildRequest& request);

// The pool's workers are processes of their own program, crosstune-build-worker, started with
// posix_spawn: never a fork of the caller, whose other threads may hold locks (malloc's, a
// logger's) that a forked child would inherit held. Where the program is, as for any installed
// program:
//   1. $CROSSTUNE_BUILD_WORKER, when set: a program named explicitly. This is how the build tree's
//      own tests, benchmarks and scripts run the tree's worker (their CTest ENVIRONMENT), and how
//      the Python package runs the one in its crosstune/bin;
//   2. the installed one, libexec/crosstune/crosstune-build-worker: first beside the running
//      program's install tree (bin/../libexec/crosstune, so a tree installed with another prefix,
//      or moved, runs its own), then under the prefix this library was configured with.
// Never the build tree's worker unless named so: a program of the build tree run by hand finds
// the installed worker, or none. "" when none exists; the pool then forks its workers.
//
// Every worker answers the pool's handshake first (handshake.h's Hello and HelloReply): one of
// another protocol (major or minor) or another crosstune release is refused with a
// kVersionMismatch that names its path and both versions. A request field it does not know would
// be skipped silently, and the build cache files its builds under this release's name. Refused
// at Builder::Create, Create fails; a replacement refused later (the program was upgraded under a
// running pool) fails the build it was started for and leaves its slot empty, and the pool goes
// on with its other workers.
std::string BuildWorkerPath();
// The installed worker for a program at `program` (step 2 above), "" when neither exists.
std::string InstalledBuildWorkerPath(const std::string& program);

// What a worker says of itself in the handshake. A worker states its own; a test may start the
// worker program stating another's, to stand for an older or newer crosstune's worker.
struct BuildWorkerVersion {
  uint16_t major = kProtocolMajor;
  uint16_t minor = kProtocolMinor;
  std::string release{kCrosstuneVersion};
};
// The worker program's body: answers the pool's handshake, then build requests on `fd`, until the
// pool closes it.
[[noreturn]] void RunBuildWorker(int fd, const BuildWorkerVersion& version = {});

// Writes a .ctpkg for a successful build: lib/<name>.so or lib/<name>.cubin (+ lib/<name>.ptx),
// optional graph.json text and params.bin bytes (stamped with the library's build id), and the
// manifest's `tuning` object (a JSON text naming the task, config and record of a tuned build).
Expected<pkg::Manifest> WriteBuildPackage(const BuildRequest& request, const BuildResult& result,
                                          const std::string& out_path,
                                          const std::string& graph_json = "",
                                          const std::string& params_bin = "",
                                          const std::string& tuning_json = "");

}  // namespace crosstune::builder
