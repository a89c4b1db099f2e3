#include "crosstune/builder/builder.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <msgpack.hpp>
#include <mutex>
#include <regex>
#include <thread>

#include "build_wire.h"
#include "crosstune/builder/backend.h"
#include "crosstune/builder/build_cache.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/builder/sandbox.h"
#include "crosstune/channel.h"
#include "crosstune/cpus.h"
#include "crosstune/crypto.h"
#include "crosstune/kernel_abi.h"

namespace crosstune::builder {
namespace {

using SteadyClock = std::chrono::steady_clock;
using wire::FromWire;
using wire::kMaxWorkerFrame;
using wire::ToWire;
using wire::WireRequest;
using wire::WireResult;

BuildResult Failed(Status st) {
  BuildResult r;
  r.status = std::move(st);
  return r;
}

std::string SignalName(int sig) {
  const char* s = ::sigabbrev_np(sig);
  return s ? std::string("SIG") + s : "signal " + std::to_string(sig);
}

// The worker process: answers build requests on fd until the caller closes it, confined to the
// toolchain and `scratch_dir` (sandbox.h) where Landlock is available. Never returns.
[[noreturn]] void WorkerMain(int fd, const std::string& scratch_dir);

// How the pool tells a worker program its scratch folder (which the pool made and removes).
constexpr const char* kScratchEnv = "CROSSTUNE_BUILD_SCRATCH";

std::string MakeScratchDir() {
  std::error_code ec;
  std::string tmpl =
      (std::filesystem::temp_directory_path(ec) / "crosstune-build-worker-XXXXXX").string();
  if (ec || ::mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

void RemoveScratchDir(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

// Where Landlock is missing the workers build unconfined: said once per process.
void WarnIfUnconfined() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (LandlockAbi() > 0) return;
    std::fprintf(stderr,
                 "crosstune: warning: this kernel has no Landlock (Linux 5.13 or later, with "
                 "landlock among the enabled security modules): build workers run unconfined, "
                 "so a kernel source can make the compiler read any file this user can\n");
  });
}

}  // namespace

std::string InstalledBuildWorkerPath(const std::string& program) {
  namespace fs = std::filesystem;
  // Relative to the program's folder first: an install tree finds its own worker wherever it was
  // installed or moved (a .deb puts it under /usr, whatever prefix this tree was configured with).
  std::vector<std::string> candidates;
  if (!program.empty()) {
    candidates.push_back((fs::path(program).parent_path() / CROSSTUNE_BUILD_WORKER_FROM_BINDIR)
                             .lexically_normal()
                             .string());
  }
  candidates.emplace_back(CROSSTUNE_BUILD_WORKER_INSTALL_PATH);
  for (const std::string& path : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string BuildWorkerPath() {
  if (const char* env = ::getenv("CROSSTUNE_BUILD_WORKER"); env != nullptr && *env) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return InstalledBuildWorkerPath(ec ? std::string() : self.string());
}

void RunBuildWorker(int fd) {
  const char* scratch = ::getenv(kScratchEnv);
  WorkerMain(fd, scratch != nullptr ? scratch : "");
}

namespace {

void WorkerMain(int fd, const std::string& scratch_dir) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::signal(SIGPIPE, SIG_IGN);
  if (fd != 3) {
    ::dup2(fd, 3);
    ::close(fd);
  }
  // Drop every other descriptor of the caller (sockets to servers, other workers' pipes): a worker
  // must not keep them open after the caller closes them.
  ::close_range(4, ~0u, 0);
  // Before the first request: a generated source (a template's parameters) reaches no file either.
  // Without Landlock the pool has warned, and builds run as before.
  if (LandlockAbi() > 0) {
    if (Status boxed = ConfineBuilds(scratch_dir, ""); !boxed.ok()) {
      std::fprintf(stderr, "crosstune-build-worker: error: %s\n", boxed.message().c_str());
      ::_exit(3);
    }
  }
  Channel ch(3);
  ch.set_utf8_strings(false);  // sources, libraries and diagnostics are raw bytes
  for (;;) {
    auto frame = ch.ReadFrame(NoDeadline(), kMaxWorkerFrame);
    if (!frame.ok()) ::_exit(0);
    auto req = frame->As<WireRequest>();
    if (!req.ok()) ::_exit(2);
    BuildRequest r = FromWire(*req);
    if (r.debug_action == BuildRequest::DebugAction::kCrash) {
      ::signal(SIGSEGV, SIG_DFL);  // LLVM's crash handlers may be installed; die like a real fault
      ::raise(SIGSEGV);
    }
    if (r.debug_action == BuildRequest::DebugAction::kHang) {
      for (;;) ::pause();
    }
    if (r.debug_action == BuildRequest::DebugAction::kGarbageThenHang) {
      const unsigned char too_long[4] = {0xff, 0xff, 0xff, 0xff};  // a frame past kMaxWorkerFrame
      (void)ch.WriteBytes(too_long, sizeof(too_long), NoDeadline());
      for (;;) ::pause();
    }
    BuildResult result = BuildInProcess(r);
    if (!ch.Send(Opcode::kResult, frame->request_id, ToWire(result), NoDeadline()).ok()) ::_exit(0);
  }
}

}  // namespace

// --- the pool -----------------------------------------------------------------------------------

// Forks build workers, always from its one thread, which lives as long as the pool. A worker's
// PR_SET_PDEATHSIG fires when the *thread* that forked it ends, not the process: a worker forked
// by a short-lived build thread (BuildMany's, after replacing a crashed or timed-out worker) was
// killed as soon as that thread returned, and the next build on it failed as a "compiler crash".
class WorkerSpawner {
 public:
  // `cpus`: the CPUs the workers run on (empty: wherever this process may run). `program`: the
  // workers' program ("": fork them).
  WorkerSpawner(std::vector<int> cpus, std::string program)
      : cpus_(std::move(cpus)), worker_path_(std::move(program)), thread_([this] { Loop(); }) {}
  ~WorkerSpawner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  WorkerSpawner(const WorkerSpawner&) = delete;
  WorkerSpawner& operator=(const WorkerSpawner&) = delete;

  // A new worker: its pid, the caller's end of its socket and its scratch folder (the caller
  // removes it when the worker has ended).
  struct Spawned {
    pid_t pid = -1;
    int fd = -1;
    std::string scratch_dir;
  };
  Expected<Spawned> Spawn() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = ++requested_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return results_.count(ticket) != 0; });
    Expected<Spawned> r = std::move(results_.at(ticket));
    results_.erase(ticket);
    return r;
  }

 private:
  void Loop() {
    // Workers inherit the affinity of the thread that starts them: this one.
    const Status pinned = cpus_.empty() ? Status::Ok() : PinToCpus(cpus_);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || served_ < requested_; });
      if (served_ == requested_) return;  // stopping, nothing asked
      const uint64_t ticket = ++served_;
      lock.unlock();
      Expected<Spawned> r = pinned.ok()
                                ? Fork()
                                : Expected<Spawned>(Status(
                                      pinned.code(), "build workers' CPUs: " + pinned.message()));
      lock.lock();
      results_.emplace(ticket, std::move(r));
      cv_.notify_all();
    }
  }

  Expected<Spawned> Fork() {
    const std::string scratch = MakeScratchDir();
    if (scratch.empty()) {
      return Status(ErrorCode::kIoError, std::string("cannot create a build worker's scratch "
                                                     "folder: ") +
                                             std::strerror(errno));
    }
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      RemoveScratchDir(scratch);
      return Status(ErrorCode::kInternal, std::string("socketpair: ") + std::strerror(errno));
    }
    if (!worker_path_.empty()) {
      // The worker program, with its end of the socket as fd 3 (dup2 clears FD_CLOEXEC there).
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_adddup2(&actions, sv[1], 3);
      char* argv[] = {worker_path_.data(), nullptr};
      const std::string prefix = std::string(kScratchEnv) + "=";
      std::vector<std::string> env_strings = {prefix + scratch};
      for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, prefix.c_str(), prefix.size()) != 0) env_strings.emplace_back(*e);
      }
      std::vector<char*> envp;
      for (auto& e : env_strings) envp.push_back(e.data());
      envp.push_back(nullptr);
      pid_t pid = -1;
      int rc = ::posix_spawn(&pid, worker_path_.c_str(), &actions, nullptr, argv, envp.data());
      posix_spawn_file_actions_destroy(&actions);
      ::close(sv[1]);
      if (rc != 0) {
        ::close(sv[0]);
        RemoveScratchDir(scratch);
        return Status(ErrorCode::kInternal,
                      "cannot start " + worker_path_ + ": " + std::strerror(rc));
      }
      return Spawned{pid, sv[0], scratch};
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      RemoveScratchDir(scratch);
      return Status(ErrorCode::kInternal, std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) WorkerMain(sv[1], scratch);
    ::close(sv[1]);
    return Spawned{pid, sv[0], scratch};
  }

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t requested_ = 0;
  uint64_t served_ = 0;
  bool stop_ = false;
  std::map<uint64_t, Expected<Spawned>> results_;
  const std::vector<int> cpus_;
  std::string worker_path_;  // "": fork the workers
  std::thread thread_;       // last: starts after the members it uses
};

class Builder::Pool {
 public:
  explicit Pool(const BuilderOptions& options)
      : options_(options),
        program_(options.worker_program.empty() ? BuildWorkerPath() : options.worker_program),
        spawner_(options.cpus, program_) {
    int n = options.workers > 0 ? options.workers
            : !options.cpus.empty()
                ? static_cast<int>(options.cpus.size())
                : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    workers_.resize(static_cast<size_t>(n));
  }

  ~Pool() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Worker& w : workers_) Stop(&w);
  }

  Status Start() {
    WarnIfUnconfined();
    if (!options_.cache_dir.empty() && options_.cache_max_bytes > 0) {
      cache_bytes_ = TrimBuildCache(options_.cache_dir, options_.cache_max_bytes).bytes;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (Worker& w : workers_) CT_RETURN_IF_ERROR(SpawnLocked(&w));
    return Status::Ok();
  }

  int size() const { return static_cast<int>(workers_.size()); }
  BuilderStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  BuildResult Run(const BuildRequest& request) {
    if (Status s = request.target.backend().CheckComplete(request.target); !s.ok()) {
      return Failed(s);
    }
    std::string key = BuildCacheKey(request);
    bool use_cache =
        !options_.cache_dir.empty() && request.debug_action == BuildRequest::DebugAction::kNone;
    std::string damaged;
    if (use_cache) {
      BuildResult hit;
      CacheRead read = LoadCachedBuild(options_.cache_dir, key, &hit, &damaged);
      if (read == CacheRead::kHit) {
        hit.cache_hit = true;
        hit.cache_key = key;
        hit.build_seconds = 0;
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.builds;
        ++stats_.cache_hits;
        return hit;
      }
      if (read == CacheRead::kDamaged) {
        damaged = "build cache: " + damaged + "; rebuilt";
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.cache_damaged;
      }
    }
    auto timeout = request.timeout.count() > 0 ? request.timeout : options_.default_timeout;
    Worker* w = Acquire();
    BuildResult result = RunOn(w, request, timeout);
    Release(w);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.builds;
    }
    result.cache_key = key;
    result.cache_warning = std::move(damaged);
    // Failures are built again next time: a timeout or a crash may pass, and a compile error
    // costs no more to find again than to read back.
    if (use_cache && result.ok()) Store(key, &result);
    return result;
  }

 private:
  struct Worker {
    pid_t pid = -1;
    Channel ch;
    std::string scratch_dir;  // made by the spawner, removed here once the worker has ended
    bool busy = false;
  };

  // Stores a fresh build, and keeps the cache within its budget: what this builder stored is
  // added to what the last trim left; past the budget, a trim brings it to 90% of it.
  void Store(const std::string& key, BuildResult* result) {
    Expected<uint64_t> stored = StoreCachedBuild(options_.cache_dir, key, *result);
    if (!stored.ok()) {
      if (!store_warned_.exchange(true) && result->cache_warning.empty()) {
        result->cache_warning = "build cache: cannot store: " + stored.status().message();
      }
      return;
    }
    if (options_.cache_max_bytes == 0) return;
    std::lock_guard<std::mutex> lock(trim_mu_);
    cache_bytes_ += *stored;
    if (cache_bytes_ > options_.cache_max_bytes) {
      cache_bytes_ = TrimBuildCache(options_.cache_dir, options_.cache_max_bytes / 10 * 9).bytes;
    }
  }

  Worker* Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      for (Worker& w : workers_) {
        if (!w.busy) {
          w.busy = true;
          if (w.pid < 0) {
            Status st = SpawnLocked(&w);
            (void)st;  // RunOn reports a worker that could not start
          }
          return &w;
        }
      }
      cv_.wait(lock);
    }
  }

  void Release(Worker* w) {
    std::lock_guard<std::mutex> lock(mu_);
    w->busy = false;
    cv_.notify_one();
  }

  BuildResult RunOn(Worker* w, const BuildRequest& request, std::chrono::milliseconds timeout) {
    if (w->pid < 0) return Failed(Status(ErrorCode::kInternal, "cannot start a build worker"));
    Deadline deadline = DeadlineIn(timeout);
    uint32_t id = w->ch.NextRequestId();
    Status sent = w->ch.Send(Opcode::kCall, id, ToWire(request), deadline);
    Expected<Frame> reply =
        sent.ok() ? w->ch.ReadFrame(deadline, kMaxWorkerFrame) : Expected<Frame>(sent);
    if (reply.ok()) {
      auto wire = reply->As<WireResult>();
      if (wire.ok()) return FromWire(std::move(*wire));
      reply = wire.status();
    }
    // The worker is lost: timed out, crashed, or spoke garbage. Kill it, say why, start another.
    Status why = reply.status();
    int wstatus = 0;
    bool timed_out = why.code() == ErrorCode::kTimeout;
    if (timed_out) ::kill(w->pid, SIGKILL);
    // A worker whose reply could not be read may still be alive (it spoke garbage): closing its
    // channel makes it exit; one that does not within a second is killed, so this wait is
    // bounded either way.
    w->ch.Close();
    pid_t got = 0;
    for (int i = 0; i < 100 && got == 0; ++i) {
      got = ::waitpid(w->pid, &wstatus, WNOHANG);
      if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    bool killed_live = got == 0 && !timed_out;
    if (got == 0) {
      ::kill(w->pid, SIGKILL);
      got = ::waitpid(w->pid, &wstatus, 0);
    }
    std::string text;
    if (killed_live) {
      why = Status(ErrorCode::kBuildError,
                   "build worker failed: " + why.message() + "; it did not exit and was killed");
    } else if (timed_out) {
      text = "build ran past its timeout of " + std::to_string(timeout.count()) +
             " ms; the worker was killed";
      why = Status(ErrorCode::kTimeout, text);
    } else if (got == w->pid && WIFSIGNALED(wstatus)) {
      why =
          Status(ErrorCode::kBuildError,
                 "the compiler crashed (" + SignalName(WTERMSIG(wstatus)) + "); worker restarted");
    } else {
      why = Status(ErrorCode::kBuildError, "build worker failed: " + why.message());
    }
    std::lock_guard<std::mutex> lock(mu_);
    w->ch.Close();
    w->pid = -1;
    RemoveScratchDir(w->scratch_dir);
    ++stats_.worker_restarts;
    (void)SpawnLocked(w);
    return Failed(why);
  }

  Status SpawnLocked(Worker* w) {
    CT_ASSIGN_OR_RETURN(auto spawned, spawner_.Spawn());
    w->pid = spawned.pid;
    w->ch = Channel(spawned.fd);
    w->scratch_dir = std::move(spawned.scratch_dir);
    w->ch.set_utf8_strings(false);  // libraries and compiler output are raw bytes
    return Status::Ok();
  }

  void Stop(Worker* w) {
    if (w->pid < 0) return;
    w->ch.Close();  // the worker sees EOF and exits
    int st = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(w->pid, &st, WNOHANG) == w->pid) {
        w->pid = -1;
        RemoveScratchDir(w->scratch_dir);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(w->pid, SIGKILL);
    ::waitpid(w->pid, &st, 0);
    w->pid = -1;
    RemoveScratchDir(w->scratch_dir);
  }

  BuilderOptions options_;
  const std::string program_;  // the workers' program; "": they are forks of this process
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Worker> workers_;
  BuilderStats stats_;
  std::atomic<bool> store_warned_{false};
  std::mutex trim_mu_;
  uint64_t cache_bytes_ = 0;  // guarded by trim_mu_ (after Start)
  WorkerSpawner spawner_;     // destroyed after ~Pool() has stopped the workers
};

Builder::Builder(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}
Builder::~Builder() = default;

Expected<std::unique_ptr<Builder>> Builder::Create(const BuilderOptions& options) {
  auto pool = std::make_unique<Pool>(options);
  CT_RETURN_IF_ERROR(pool->Start());
  return std::unique_ptr<Builder>(new Builder(std::move(pool)));
}

BuildResult Builder::Build(const BuildRequest& request) { return pool_->Run(request); }

std::vector<BuildResult> Builder::BuildMany(const std::vector<BuildRequest>& requests) {
  std::vector<BuildResult> results(requests.size());
  std::atomic<size_t> next{0};
  size_t nthreads = std::min(requests.size(), static_cast<size_t>(pool_->size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < nthreads; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < requests.size(); i = next++) results[i] = Build(requests[i]);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

int Builder::workers() const { return pool_->size(); }
BuilderStats Builder::stats() const { return pool_->stats(); }

std::string BuildCacheKey(const BuildRequest& r) {
  Sha256 h;
  auto add = [&h](std::string_view s) {
    uint64_t n = s.size();
    h.Update(&n, sizeof(n));  // length-prefixed, so field boundaries cannot shift
    h.Update(s.data(), s.size());
  };
  add("crosstune-build-v2");  // v2: entries in build_cache.h's checked envelope
  add(kCrosstuneVersion);
  const TargetBackend& backend = r.target.backend();
  add(std::string(backend.compiler()) + " " + backend.compiler_version());
  add(r.target.ToString());
  add(r.source);
  for (const auto& f : r.flags) add(f);
  add(r.name);
  add(r.source_name);
  // Kept out of the key when unused, so single-kernel builds keep their cache entries.
  if (r.object_only) add("object");
  for (const auto& o : r.link_objects) add(o);
  return h.FinalHex();
}

BuildResult BuildInProcess(const BuildRequest& request) {
  auto start = SteadyClock::now();
  Expected<CompileOutput> out = Status(ErrorCode::kInternal, "not built");
  try {
    out = request.target.backend().Compile(request);
  } catch (const std::exception& e) {
    out = Status(ErrorCode::kBuildError, std::string("compiler threw: ") + e.what());
  }
  BuildResult r;
  r.build_seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  if (!out.ok()) {
    r.status = out.status();
    if (r.status.code() == ErrorCode::kBuildError) r.diagnostics = r.status.message();
    return r;
  }
  r.library = std::move(out->library);
  r.ptx = std::move(out->ptx);
  r.functions = std::move(out->functions);
  r.required_features = std::move(out->required_features);
  r.diagnostics = std::move(out->diagnostics);
  return r;
}

Expected<pkg::Manifest> WriteBuildPackage(const BuildRequest& request, const BuildResult& result,
                                          const std::string& out_path,
                                          const std::string& graph_json,
                                          const std::string& params_bin,
                                          const std::string& tuning_json) {
  if (!result.ok()) return result.status;
  static const std::regex kName("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$");
  if (!std::regex_match(request.name, kName)) {
    return Status(ErrorCode::kInvalidArgument,
                  "library name '" + request.name + "' must be 1-64 of [A-Za-z0-9_.-]");
  }
  const Target& t = request.target;
  const TargetBackend& backend = t.backend();
  pkg::Manifest m;
  m.kind = backend.kind();
  m.target = t.ToString();
  m.triple = backend.ManifestTriple(t);
  m.arch = t.Arch();
  m.cpu = backend.ManifestCpu(t);
  m.required_features = result.required_features;
  m.abi_version = CT_ABI_VERSION;
  m.builder_version = std::string(kCrosstuneVersion);
  m.compiler = backend.compiler();
  m.compiler_version = backend.compiler_version();
  m.library = "lib/" + request.name + std::string(backend.library_extension());
  m.functions = result.functions;
  m.tuning = tuning_json;
  std::vector<pkg::PackageInput> files = {{m.library, result.library, ""}};
  if (!result.ptx.empty()) {
    m.ptx = "lib/" + request.name + ".ptx";
    files.push_back({m.ptx, result.ptx, ""});
  }
  if (!graph_json.empty()) files.push_back({std::string(pkg::kGraphPath), graph_json, ""});
  if (!params_bin.empty()) files.push_back({std::string(pkg::kParamsPath), params_bin, ""});
  return pkg::WritePackage(out_path, std::move(m), files);
}

std::string DefaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    return std::string(x) + "/crosstune/builds";
  }
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/crosstune/builds";
  return "";
}

}  // namespace crosstune::builder
