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
#include "crosstune/handshake.h"
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

// The worker process: answers the pool's handshake stating `version`, then build requests on fd
// until the caller closes it, confined to the toolchain and `scratch_dir` (sandbox.h) where
// Landlock is available. Never returns.
[[noreturn]] void WorkerMain(int fd, const std::string& scratch_dir,
                             const BuildWorkerVersion& version);

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

std::string BuildWorkerPath() {
  if (const char* env = ::getenv("CROSSTUNE_BUILD_WORKER"); env != nullptr && *env) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return InstalledBuildWorkerPath(ec ? std::string() : self.string());
}

void RunBuildWorker(int fd, const BuildWorkerVersion& version) {
  const char* scratch = ::getenv(kScratchEnv);
  WorkerMain(fd, scratch != nullptr ? scratch : "", version);
}

namespace {

// The worker's side of the handshake: the pool's Hello is answered with `version`, and the pool
// decides whether it can use this worker; or, when `unusable` is an error (the worker could not
// confine its builds), with that error. A first frame that is not a Hello comes from a pool of a
// crosstune from before the handshake: its build is answered with an error naming this worker's
// version (such a pool reports it as the build's error), and the worker ends.
Status AnswerPoolHello(Channel& ch, const BuildWorkerVersion& version, const Status& unusable) {
  auto first = ch.ReadFrame(NoDeadline(), kMaxWorkerFrame);
  if (!first.ok()) return first.status();
  if (first->op != Opcode::kHello) {
    Status old(ErrorCode::kVersionMismatch,
               "crosstune-build-worker of crosstune " + version.release + " (protocol " +
                   std::to_string(version.major) + "." + std::to_string(version.minor) +
                   ") got a build before the pool's handshake: the pool is an older crosstune's, "
                   "which must run its own release's worker");
    (void)ch.SendError(first->request_id, old, NoDeadline());
    return old;
  }
  auto hello = CheckHello(*first);  // another protocol major is refused here, by the worker
  if (!hello.ok()) {
    (void)ch.SendError(first->request_id, hello.status(), NoDeadline());
    return hello.status();
  }
  if (!unusable.ok()) {
    (void)ch.SendError(first->request_id, unusable, NoDeadline());
    return unusable;
  }
  msg::HelloReply reply = MakeHelloReply("", /*auth_required=*/false);
  reply.major = version.major;
  reply.minor = version.minor;
  reply.version = version.release;
  return ch.Send(Opcode::kResult, first->request_id, reply, NoDeadline());
}

void WorkerMain(int fd, const std::string& scratch_dir, const BuildWorkerVersion& version) {
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
  // Without Landlock the pool has warned, and builds run as before. A worker that cannot be
  // confined says so in its handshake, and ends.
  const Status boxed = LandlockAbi() > 0 ? ConfineBuilds(scratch_dir, "") : Status::Ok();
  Channel ch(3);
  ch.set_utf8_strings(false);                    // sources, libraries and diagnostics are raw bytes
  ch.set_max_send_frame_bytes(kMaxWorkerFrame);  // a whole network's library
  if (!AnswerPoolHello(ch, version, boxed).ok()) ::_exit(boxed.ok() ? 2 : 3);
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
    Status sent = ch.Send(Opcode::kResult, frame->request_id, ToWire(result), NoDeadline());
    if (sent.code() == ErrorCode::kLimitExceeded) {  // a library past the pool's frame limit
      sent = ch.SendError(frame->request_id,
                          Status(sent.code(), "the built library is too large: " + sent.message()),
                          NoDeadline());
    }
    if (!sent.ok()) ::_exit(0);
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
    if (pid == 0) WorkerMain(sv[1], scratch, BuildWorkerVersion{});
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Worker& w : workers_) CT_RETURN_IF_ERROR(SpawnLocked(&w));
    }
    // All are started before the first is greeted: the wait is about one start-up, not n.
    for (Worker& w : workers_) {
      if (Status greeted = Greet(&w); !greeted.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        Refuse(&w, greeted);
        return greeted;
      }
    }
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
    Expected<Worker*> w = Acquire();
    if (!w.ok()) return Failed(w.status());
    BuildResult result = RunOn(*w, request, timeout);
    Release(*w);
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
    bool greeted = false;  // its handshake was answered and accepted
    bool refused = false;  // a worker of this slot was refused: the slot stays empty
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

  // A free slot with a worker started, or the refusal that emptied the last slot.
  Expected<Worker*> Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (stats_.workers_refused == workers_.size()) return refusal_;
      for (Worker& w : workers_) {
        if (!w.busy && !w.refused) {
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
    // A refused slot wakes every waiter: where it was the last, each must see the refusal.
    if (w->refused) {
      cv_.notify_all();
    } else {
      cv_.notify_one();
    }
  }

  BuildResult RunOn(Worker* w, const BuildRequest& request, std::chrono::milliseconds timeout) {
    if (w->pid < 0) return Failed(Status(ErrorCode::kInternal, "cannot start a build worker"));
    if (!w->greeted) {  // a replacement, started after a crash or a timeout
      if (Status greeted = Greet(w); !greeted.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        Refuse(w, greeted);
        return Failed(greeted);
      }
    }
    Deadline deadline = DeadlineIn(timeout);
    uint32_t id = w->ch.NextRequestId();
    Status sent = w->ch.Send(Opcode::kCall, id, ToWire(request), deadline);
    if (sent.code() == ErrorCode::kLimitExceeded) {  // nothing was sent: the worker serves on
      return Failed(Status(sent.code(), "the build request is too large: " + sent.message()));
    }
    Expected<Frame> reply =
        sent.ok() ? w->ch.ReadFrame(deadline, kMaxWorkerFrame) : Expected<Frame>(sent);
    if (reply.ok() && reply->op == Opcode::kError) return Failed(reply->AsStatus());
    if (reply.ok()) {
      auto wire = reply->As<WireResult>();
      if (wire.ok()) return FromWire(std::move(*wire));
      reply = wire.status();
    }
    // The worker is lost: timed out, crashed, or spoke garbage. Kill it, say why, start another.
    Status why = reply.status();
    int wstatus = 0;  // as EndLost found it
    bool timed_out = why.code() == ErrorCode::kTimeout;
    if (timed_out) ::kill(w->pid, SIGKILL);
    const bool killed_live = !EndLost(w, &wstatus) && !timed_out;
    std::string text;
    if (killed_live) {
      why = Status(ErrorCode::kBuildError,
                   "build worker failed: " + why.message() + "; it did not exit and was killed");
    } else if (timed_out) {
      text = "build ran past its timeout of " + std::to_string(timeout.count()) +
             " ms; the worker was killed";
      why = Status(ErrorCode::kTimeout, text);
    } else if (WIFSIGNALED(wstatus)) {
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

  // Ends a lost worker (its reply could not be read, or it never answered): closing its channel
  // makes a live one exit; one that does not within a second is killed, so this wait is bounded
  // either way. False when it had to be killed. `wstatus`: how it ended (0 where waitpid failed).
  static bool EndLost(Worker* w, int* wstatus) {
    w->ch.Close();
    *wstatus = 0;
    pid_t got = 0;
    for (int i = 0; i < 100 && got == 0; ++i) {
      got = ::waitpid(w->pid, wstatus, WNOHANG);
      if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (got != 0) {
      if (got != w->pid) *wstatus = 0;
      return true;
    }
    ::kill(w->pid, SIGKILL);
    if (::waitpid(w->pid, wstatus, 0) != w->pid) *wstatus = 0;
    return false;
  }

  // The pool's side of a new worker's handshake (handshake.h): the worker must be this release's,
  // speaking this protocol, or its builds could differ from what this process asks for and
  // caches. On failure the worker has been ended; the Status names it and both versions. Runs
  // without mu_, on a worker its caller holds (Start's, or a busy one).
  Status Greet(Worker* w) {
    msg::Hello hello;
    hello.role = static_cast<uint8_t>(PeerRole::kClient);
    hello.peer_name = "build pool";
    Expected<msg::HelloReply> reply =
        w->ch.Call<msg::HelloReply>(Opcode::kHello, hello, DeadlineIn(kGreetTimeout));
    const std::string ours = "crosstune " + std::string(kCrosstuneVersion) + " (protocol " +
                             std::to_string(kProtocolMajor) + "." + std::to_string(kProtocolMinor) +
                             ")";
    const std::string who = "build worker " + (program_.empty() ? "(forked)" : program_);
    const std::string fix =
        ": the pool runs only its own release's worker (install crosstune and its worker from "
        "one build, or name this release's worker with CROSSTUNE_BUILD_WORKER)";
    if (reply.ok() && reply->major == kProtocolMajor && reply->minor == kProtocolMinor &&
        reply->version == kCrosstuneVersion) {
      w->greeted = true;
      return Status::Ok();
    }
    // Refused or silent: closing its channel ends it (one that does not answer is killed first).
    if (!reply.ok() && reply.status().code() == ErrorCode::kTimeout) ::kill(w->pid, SIGKILL);
    int wstatus = 0;
    const bool ended = EndLost(w, &wstatus);
    if (reply.ok()) {
      return Status(ErrorCode::kVersionMismatch, who + " is crosstune " + reply->version +
                                                     " (protocol " + std::to_string(reply->major) +
                                                     "." + std::to_string(reply->minor) +
                                                     "); this is " + ours + fix);
    }
    const Status& failed = reply.status();
    if (failed.code() == ErrorCode::kVersionMismatch) {  // the worker refused this pool
      return Status(ErrorCode::kVersionMismatch, who + " refused the handshake of " + ours + " (" +
                                                     failed.message() + ")" + fix);
    }
    if (failed.code() == ErrorCode::kInternal) {  // it started, but cannot build (its sandbox)
      return Status(ErrorCode::kInternal, who + " cannot serve builds: " + failed.message());
    }
    if (failed.code() == ErrorCode::kTimeout) {
      return Status(ErrorCode::kTimeout, who + " did not answer the pool's handshake within " +
                                             std::to_string(kGreetTimeout.count() / 1000) + " s");
    }
    // It ended, or answered with something other than a reply: not a worker of this protocol (a
    // crosstune-build-worker from before the handshake reads the Hello as a malformed build
    // request and exits with status 2).
    const std::string how = !ended                 ? "was killed"
                            : WIFSIGNALED(wstatus) ? "ended by " + SignalName(WTERMSIG(wstatus))
                            : WIFEXITED(wstatus)
                                ? "exited with status " + std::to_string(WEXITSTATUS(wstatus))
                                : "ended";
    return Status(ErrorCode::kVersionMismatch,
                  who + " did not answer the handshake of " + ours + " (" + failed.message() +
                      "; it " + how +
                      "): not a crosstune build worker, or one older than the handshake" + fix);
  }

  // Called with mu_ held, after a failed Greet: the slot stays empty from now on.
  void Refuse(Worker* w, const Status& why) {
    w->ch.Close();
    w->pid = -1;
    w->refused = true;
    RemoveScratchDir(w->scratch_dir);
    ++stats_.workers_refused;
    refusal_ = why;
  }

  Status SpawnLocked(Worker* w) {
    CT_ASSIGN_OR_RETURN(auto spawned, spawner_.Spawn());
    w->greeted = false;
    w->pid = spawned.pid;
    w->ch = Channel(spawned.fd);
    w->scratch_dir = std::move(spawned.scratch_dir);
    w->ch.set_utf8_strings(false);                    // libraries and compiler output are raw bytes
    w->ch.set_max_send_frame_bytes(kMaxWorkerFrame);  // a link request carries every object
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

  static constexpr std::chrono::milliseconds kGreetTimeout{30'000};  // a worker's start-up

  BuilderOptions options_;
  const std::string program_;  // the workers' program; "": they are forks of this process
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Worker> workers_;
  BuilderStats stats_;
  Status refusal_;  // the last refused worker's Status (guarded by mu_)
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
