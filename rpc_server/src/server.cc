#include "crosstune/server/server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "crosstune/channel.h"
#include "crosstune/crypto.h"
#include "crosstune/server/call_slot.h"
#include "crosstune/text.h"
#include "fork_server.h"

namespace crosstune::server {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using std::chrono::milliseconds;

// Sends one error frame on a socket the parent holds and closes it. The socket is shut down for
// writing and drained first, so unread client bytes do not turn the close into a reset that would
// destroy the error frame before the client reads it.
void SendErrorAndClose(int fd, uint32_t request_id, const Status& status) {
  Channel ch(fd);
  (void)ch.SendError(request_id, status, DeadlineIn(milliseconds(500)));
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  while (::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

// Closes every socket but `keep`: a session must not hold other clients' connections or the
// tracker link's socket open (their peers would never see them close). Only sockets: under
// qemu-user the emulator's own descriptors are in this table too and must stay.
void CloseOtherSockets(int keep) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  std::vector<int> fds;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    if (fd > 2 && fd != keep && fd != ::dirfd(d)) fds.push_back(static_cast<int>(fd));
  }
  ::closedir(d);
  for (int fd : fds) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) ::close(fd);
  }
}

// Whether process `pid` exists and has not exited (a zombie nobody reaped yet has).
bool ProcessRuns(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;  // no /proc: trust kill()
  auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

// Workspaces are named session-<server pid>-<id>. A server killed with SIGKILL cannot remove
// them (its sessions die with it: see fork_server.h), so a starting server removes those whose
// server is gone. Others' live workspaces in a shared --work-dir are left alone.
void SweepStaleWorkspaces(const std::string& work_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(work_dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("session-", 0) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str() + 8, &end, 10);
    bool alive = end && *end == '-' && pid > 0 && ProcessRuns(static_cast<pid_t>(pid));
    if (alive) continue;
    std::error_code rec;
    std::filesystem::remove_all(e.path(), rec);
    if (rec) {
      spdlog::warn("cannot remove stale workspace {}: {}", e.path().string(), rec.message());
    } else {
      spdlog::info("removed stale workspace {}", e.path().string());
    }
  }
}

// A server given no --work-dir makes $TMPDIR/crosstune-server-<pid>-<hex> and removes it when it
// stops; SIGKILL (the OOM killer, a power cut before /tmp is cleared) leaves it, with every upload
// in it. A starting server removes those of servers that no longer run: directories (never a
// symlink) of that name owned by this user whose pid runs nothing. A pid reused by another
// process keeps its folder until a later start; another user's folders are never touched.
void SweepDeadServerDirs(const std::string& base) {
  static constexpr std::string_view kPrefix = "crosstune-server-";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + kPrefix.size(), &end, 10);
    if (!end || *end != '-' || pid <= 0 || pid == ::getpid()) continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      continue;
    }
    if (ProcessRuns(static_cast<pid_t>(pid))) continue;
    std::error_code rec;
    std::filesystem::remove_all(e.path(), rec);
    if (rec) {
      spdlog::warn("cannot remove the work dir of a server that is gone, {}: {}", e.path().string(),
                   rec.message());
    } else {
      spdlog::info("removed the work dir of a server that is gone: {}", e.path().string());
    }
  }
}

// Removes finished sessions' workspaces on a thread of its own, in the order they come. The
// thread starts with the first removal: the server starts no thread before its fork server.
// Thread-safe.
class WorkspaceRemover {
 public:
  explicit WorkspaceRemover(std::function<void(const std::string&)> remove)
      : remove_(std::move(remove)) {}
  ~WorkspaceRemover() { Finish(); }
  WorkspaceRemover(const WorkspaceRemover&) = delete;
  WorkspaceRemover& operator=(const WorkspaceRemover&) = delete;

  void Remove(std::string path) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(path));
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    cv_.notify_one();
  }
  // Removes what is queued, then ends the thread.
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_, and nothing left
      std::string path = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      remove_(path);
      lock.lock();
    }
  }

  std::function<void(const std::string&)> remove_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stop_ = false;
  std::thread thread_;
};

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) spdlog::warn("cannot remove {}: {}", path, ec.message());
}

}  // namespace

class Server::Impl {
 public:
  explicit Impl(ServerOptions options)
      : options_(std::move(options)),
        acceptor_(io_),
        signals_(io_, SIGINT, SIGTERM, SIGHUP),
        child_signals_(io_, SIGCHLD),
        backoff_(io_),
        watchdog_(io_),
        remover_(options_.remove_workspace ? options_.remove_workspace : RemoveTree) {}

  ~Impl() {
    try {
      Shutdown();
    } catch (...) {  // a destructor must not throw; what Shutdown could not do is lost anyway
    }
  }

  Status Listen() {
    CT_RETURN_IF_ERROR(PrepareWorkDir());
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options_.host, ec);
    if (ec) {
      // A name rather than an address: resolve it.
      tcp::resolver resolver(io_);
      auto results = resolver.resolve(options_.host, "", ec);
      if (ec || results.empty()) {
        return Status(ErrorCode::kInvalidArgument,
                      "cannot resolve --host '" + options_.host + "': " + ec.message());
      }
      addr = results.begin()->endpoint().address();
    }
    uint16_t first = options_.port;
    uint16_t last = options_.port_end > first ? options_.port_end : first;
    std::string last_error;
    for (uint32_t p = first; p <= last; ++p) {
      boost::system::error_code e;
      tcp::acceptor a(io_);
      tcp::endpoint ep(addr, static_cast<uint16_t>(p));
      a.open(ep.protocol(), e);
      if (!e) a.set_option(asio::socket_base::reuse_address(true), e);
      if (!e) a.bind(ep, e);
      if (!e) a.listen(asio::socket_base::max_listen_connections, e);
      if (!e) {
        acceptor_ = std::move(a);
        port_ = acceptor_.local_endpoint().port();
        if (options_.fork) return StartForkServer();
        return Status::Ok();
      }
      last_error = e.message();
    }
    std::string range = std::to_string(first) + (last != first ? "-" + std::to_string(last) : "");
    return Status(ErrorCode::kIoError,
                  "cannot listen on " + options_.host + ":" + range + ": " + last_error);
  }

  void Run() {
    if (!acceptor_.is_open()) {
      Status s = Listen();
      if (!s.ok()) {
        spdlog::error("{}", s.message());
        return;
      }
    }
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      spdlog::info("signal {}: shutting down", sig);
      Shutdown();
    });
    WaitForChildren();
    WatchForkServer();
    Accept();
    io_.run();
    Shutdown();
  }

  void Stop() {
    asio::post(io_, [this] { Shutdown(); });
  }

  uint16_t port() const { return port_; }
  const std::string& host() const { return options_.host; }
  const std::string& work_dir() const { return options_.work_dir; }
  Status CanStartSessions() const {
    return fork_server_dead_.load() ? ForkServerGone() : Status::Ok();
  }

  size_t active() const { return sessions_.size(); }
  void set_on_session_end(std::function<void(const SessionEnd&)> fn) {
    on_session_end_ = std::move(fn);
  }

  void EndSession(pid_t pid, Status reason) {
    asio::post(io_, [this, pid, reason = std::move(reason)] {
      auto it = sessions_.find(pid);
      if (it == sessions_.end()) return;
      it->second.end_reason = reason;
      KillSession(pid);
    });
  }

 private:
  struct Live {
    std::string id;
    std::string peer_addr;  // the client's address, without the port
    int fd = -1;            // the parent's copy of the client socket, for the crash report
    CallSlot* slot = nullptr;
    uint32_t slot_index = 0;
    std::string workspace;
    std::unique_ptr<asio::steady_timer> timer;
    ParentKill killed = ParentKill::kNone;
    Status end_reason;  // set when the parent ended the session on purpose (EndSession)
  };

  Status PrepareWorkDir() {
    std::error_code ec;
    if (options_.work_dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string base = tmp && *tmp ? tmp : "/tmp";
      options_.work_dir =
          base + "/crosstune-server-" + std::to_string(::getpid()) + "-" + RandomHex(4);
      owns_work_dir_ = true;
      // Made with the first session's workspace, so a server killed before it served anyone
      // (SIGKILL skips the cleanup) leaves nothing behind; those left by servers killed later
      // go now.
      SweepDeadServerDirs(base);
      return Status::Ok();
    }
    std::filesystem::create_directories(options_.work_dir, ec);
    if (ec) {
      return Status(ErrorCode::kIoError,
                    "cannot create --work-dir " + options_.work_dir + ": " + ec.message());
    }
    SweepStaleWorkspaces(options_.work_dir);
    return Status::Ok();
  }

  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || stopping_) return;
      if (ec) {
        // Out of fds and the like: wait before trying again instead of spinning on the error.
        backoff_ms_ = std::min(backoff_ms_ ? backoff_ms_ * 2 : 50, 2000);
        spdlog::warn("accept failed: {}; retrying in {} ms", ec.message(), backoff_ms_);
        backoff_.expires_after(milliseconds(backoff_ms_));
        backoff_.async_wait([this](const boost::system::error_code& e) {
          if (!e && !stopping_) Accept();
        });
        return;
      }
      backoff_ms_ = 0;
      OnConnection(std::move(socket));
      if (!stopping_) Accept();
    });
  }

  void OnConnection(tcp::socket socket) {
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    // A client that vanishes without a FIN (power loss, partition) must not pin a session
    // forever: probe after a minute of silence, give up after another minute.
    socket.set_option(asio::socket_base::keep_alive(true), ec);
    int idle = 60, interval = 10, count = 6;
    ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
    auto peer = socket.remote_endpoint(ec);
    std::string peer_addr = ec ? "?" : peer.address().to_string();
    std::string peer_str = ec ? "?" : peer_addr + ":" + std::to_string(peer.port());
    if (size_t waiting = WaitingForHandshake(peer_addr);
        waiting >= options_.max_handshakes_per_peer) {
      spdlog::warn(
          "refusing {}: {} connections from {} have not completed their handshake "
          "(--max-handshakes-per-peer)",
          peer_str, waiting, peer_addr);
      RefuseLingering(
          std::move(socket),
          Status(ErrorCode::kBusy,
                 "server busy: " + std::to_string(waiting) + " connections from " + peer_addr +
                     " are waiting for their handshake " + "(--max-handshakes-per-peer " +
                     std::to_string(options_.max_handshakes_per_peer) + ")"));
      return;
    }
    if (sessions_.size() >= options_.max_sessions) {
      spdlog::warn("refusing {}: {} sessions already running (--max-sessions)", peer_str,
                   sessions_.size());
      RefuseLingering(std::move(socket),
                      Status(ErrorCode::kBusy, "server busy: " + std::to_string(sessions_.size()) +
                                                   " sessions running (--max-sessions " +
                                                   std::to_string(options_.max_sessions) + ")"));
      return;
    }
    // The server keeps this fd for the crash report; the fork server gets a copy for this session.
    int fd = socket.release(ec);
    if (ec || fd < 0) return;
    std::string id = RandomHex(6);
    std::string ws = options_.work_dir + "/session-" + std::to_string(::getpid()) + "-" + id;
    std::error_code fec;
    std::filesystem::create_directories(ws, fec);
    if (fec) {
      SendErrorAndClose(fd, 0,
                        Status(ErrorCode::kIoError, "cannot create a workspace: " + fec.message()));
      return;
    }
    spdlog::info("session {}: connection from {}", id, peer_str);

    if (!options_.fork) {
      SessionOptions so = options_.session;
      so.guard_calls = false;
      so.session_timeout = options_.session_timeout;
      Status s = RunSession(fd, ws, id, so, nullptr);
      if (!s.ok()) spdlog::info("session {} ended: {}", id, s.ToString());
      remover_.Remove(ws);
      if (on_session_end_) on_session_end_(SessionEnd{id, ::getpid(), Status::Ok()});
      return;
    }

    Status refused;
    if (!fork_server_ || !fork_server_->alive()) {
      refused = ForkServerGone();
    } else if (free_slots_.empty()) {
      refused = Status(ErrorCode::kBusy, "server busy: no call slot free");
    }
    if (!refused.ok()) {
      spdlog::warn("session {}: refused: {}", id, refused.message());
      SendErrorAndClose(fd, 0, refused);
      std::filesystem::remove_all(ws, fec);
      return;
    }
    uint32_t index = free_slots_.back();
    free_slots_.pop_back();
    CallSlot* slot = new (&slots_[index]) CallSlot();  // a fresh page for this session
    auto spawned = fork_server_->Spawn(fd, SessionSpawn{id, ws, index}, on_exit_);
    if (!spawned.ok()) {
      free_slots_.push_back(index);
      spdlog::error("session {}: {}", id, spawned.status().message());
      SendErrorAndClose(fd, 0, spawned.status());
      std::filesystem::remove_all(ws, fec);
      if (!fork_server_->alive()) ForkServerDied();
      return;
    }
    pid_t pid = *spawned;

    Live live;
    live.id = id;
    live.peer_addr = peer_addr;
    live.fd = fd;
    live.slot = slot;
    live.slot_index = index;
    live.workspace = ws;
    if (options_.session_timeout.count() > 0) {
      live.timer = std::make_unique<asio::steady_timer>(io_, options_.session_timeout);
      live.timer->async_wait([this, pid](const boost::system::error_code& e) {
        if (e) return;
        auto it = sessions_.find(pid);
        if (it == sessions_.end()) return;
        spdlog::warn("session {}: ran past {} s, killing it", it->second.id,
                     options_.session_timeout.count());
        it->second.killed = ParentKill::kSessionTimeout;
        KillSession(pid);
      });
    }
    sessions_.emplace(pid, std::move(live));
    if (sessions_.size() == 1) Watch();
  }

  // Live sessions from `peer_addr` whose client has not completed its handshake yet.
  size_t WaitingForHandshake(const std::string& peer_addr) const {
    size_t n = 0;
    for (const auto& [pid, live] : sessions_) {
      if (live.peer_addr == peer_addr && !live.slot->handshaken.load(std::memory_order_acquire)) {
        ++n;
      }
    }
    return n;
  }

  // The backstop for call limits: the child's own timer normally ends an overdue call, but a
  // kernel can block or catch that signal. While sessions run, check their pages a few times a
  // second and kill a call well past its deadline.
  void Watch() {
    watchdog_.expires_after(milliseconds(250));
    watchdog_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_ || sessions_.empty()) return;
      int64_t now = SteadyNowNs();
      constexpr int64_t kGraceNs = 1'000'000'000;
      for (auto& [pid, live] : sessions_) {
        if (live.killed == ParentKill::kNone && live.slot->Overdue(now, kGraceNs)) {
          spdlog::warn("session {}: call '{}' is past its limit and ignored the timer; killing it",
                       live.id, EscapeForLog(live.slot->function));
          live.killed = ParentKill::kCallOverdue;
          KillSession(pid);
        }
      }
      Watch();
    });
  }

  // Answers a connection that is refused before its handshake. The client's Hello is likely still
  // on its way; closing at once would answer it with a reset that can destroy the error frame
  // before the client reads it. So: send, stop sending, read until the client closes or a second
  // passes, then close. Asynchronous, so the acceptor does not wait.
  struct Linger {
    tcp::socket socket;
    asio::steady_timer timer;
    std::array<char, 4096> buf;
  };

  static void Drain(std::shared_ptr<Linger> l) {
    l->socket.async_read_some(asio::buffer(l->buf),
                              [l](const boost::system::error_code& e, size_t) {
                                if (e) {
                                  l->timer.cancel();  // its handler closes the socket
                                  return;
                                }
                                Drain(l);
                              });
  }

  void RefuseLingering(tcp::socket socket, const Status& why) {
    std::string frame = EncodeError(0, why);
    boost::system::error_code ec;
    socket.non_blocking(true, ec);
    ::send(socket.native_handle(), frame.data(), frame.size(), MSG_NOSIGNAL);
    socket.shutdown(tcp::socket::shutdown_send, ec);
    auto l = std::make_shared<Linger>(Linger{std::move(socket), asio::steady_timer(io_), {}});
    l->timer.expires_after(std::chrono::seconds(1));
    l->timer.async_wait([l](const boost::system::error_code&) {
      boost::system::error_code ignored;
      l->socket.close(ignored);
    });
    Drain(l);
  }

  // The body of a session child, forked by the fork server: a copy of this server as it was when
  // the fork server started (before any thread), so no lock can be held here.
  [[noreturn]] void RunChild(int fd, const SessionSpawn& spawn) {
    if (spawn.slot >= slot_count_) ::_exit(1);
    CallSlot* slot = &slots_[spawn.slot];
    // A session must not hold other sockets open (their peers would never see them close). Only
    // sockets: under qemu-user the emulator's own descriptors are in this table too and must stay.
    CloseOtherSockets(fd);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGALRM, SIGSEGV, SIGBUS, SIGILL, SIGFPE}) {
      ::sigaction(sig, &dfl, nullptr);
    }
    ::signal(SIGPIPE, SIG_IGN);
    // Past a file size limit a write should fail (EFBIG, an upload error), not end the session.
    ::signal(SIGXFSZ, SIG_IGN);
    // A crashing kernel is reported, not dumped: a core of a session holding gigabytes of tensors
    // would fill a small board's disk and slow the report down.
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    SessionOptions so = options_.session;
    so.session_timeout = options_.session_timeout;
    Status s = RunSession(fd, spawn.workspace, spawn.id, so, slot);
    if (!s.ok()) spdlog::info("session {} ended: {}", spawn.id, s.ToString());
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(0);
  }

  void WaitForChildren() {
    child_signals_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      Reap();
      if (!stopping_) WaitForChildren();
    });
  }

  // Session children are the fork server's to reap; the only child of this process that matters
  // here is the fork server itself.
  void Reap() {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      if (fork_server_ && pid == fork_server_->pid()) {
        fork_server_->MarkReaped();
        spdlog::warn("the session fork server (pid {}) ended: {}", pid,
                     WIFSIGNALED(status) ? "killed by " + DescribeSignal(WTERMSIG(status))
                                         : "exit status " + std::to_string(WEXITSTATUS(status)));
        ForkServerDied();
      }
    }
  }

  // Forks the fork server (fork_server.h) with a call slot for every session it may serve, mapped
  // here first so that the server, the fork server and each session child share them.
  Status StartForkServer() {
    uint64_t bytes = uint64_t{sizeof(CallSlot)} * options_.max_sessions;
    if (bytes > (uint64_t{1} << 30)) {
      return Status(ErrorCode::kInvalidArgument,
                    "--max-sessions " + std::to_string(options_.max_sessions) + " is too many");
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return Status(ErrorCode::kInternal,
                    std::string("cannot map the call pages: ") + std::strerror(errno));
    }
    slots_ = static_cast<CallSlot*>(p);
    slots_bytes_ = bytes;
    slot_count_ = options_.max_sessions;
    for (uint32_t i = slot_count_; i > 0; --i) free_slots_.push_back(i - 1);
    auto started = ForkServer::Start([this](int fd, const SessionSpawn& s) { RunChild(fd, s); },
                                     {acceptor_.native_handle()});
    if (!started.ok()) return started.status();
    fork_server_ = std::move(started).value();
    fork_server_pid_ = fork_server_->pid();
    on_exit_ = [this](pid_t pid, int status) {
      auto it = sessions_.find(pid);
      if (it == sessions_.end()) return;
      Finish(it->first, it->second, status);
      sessions_.erase(it);
    };
    fork_events_.emplace(io_, ::dup(fork_server_->fd()));
    spdlog::debug("session fork server: pid {}", fork_server_->pid());
    return Status::Ok();
  }

  void WatchForkServer() {
    if (!fork_events_) return;
    fork_events_->async_wait(asio::posix::descriptor_base::wait_read,
                             [this](const boost::system::error_code& ec) {
                               if (ec || stopping_ || !fork_server_) return;
                               if (!fork_server_->Poll(/*block=*/false, on_exit_)) {
                                 ForkServerDied();
                                 return;
                               }
                               WatchForkServer();
                             });
  }

  Status ForkServerGone() const {
    return Status(ErrorCode::kInternal,
                  "crosstune-server cannot start sessions: its session fork server (pid " +
                      std::to_string(fork_server_pid_.load()) + ") died; restart crosstune-server");
  }

  // The fork server is gone, and its session children with it (PR_SET_PDEATHSIG): tell their
  // clients, and refuse new sessions from now on (forking one here, from a process with threads,
  // is what the fork server is there to avoid).
  void ForkServerDied() {
    if (fork_server_finished_) return;
    fork_server_finished_ = true;
    // Only a death while serving makes the server unfit (CanStartSessions): one at shutdown is
    // the end of the run, and the tracker link must not report it as a failure.
    if (!stopping_) fork_server_dead_ = true;
    if (!stopping_) {
      spdlog::error(
          "the session fork server (pid {}) died; its sessions ended, and new ones fail "
          "until crosstune-server restarts",
          fork_server_ ? fork_server_->pid() : -1);
    }
    boost::system::error_code ec;
    if (fork_events_) fork_events_->cancel(ec);
    while (!sessions_.empty()) {
      auto it = sessions_.begin();
      if (it->second.end_reason.ok()) {
        it->second.end_reason = Status(ErrorCode::kInternal,
                                       "the session ended: the server's session fork server died");
      }
      ::kill(-it->first, SIGKILL);
      ::kill(it->first, SIGKILL);
      Finish(it->first, it->second, 0);
      sessions_.erase(it);
    }
  }

  // Ends a session child and everything it started: a session leads its own process group, so a
  // process a kernel forked goes with it.
  void KillSession(pid_t pid) {
    if (fork_server_) fork_server_->Kill(pid);
  }

  void Finish(pid_t pid, Live& live, int status) {
    if (live.timer) live.timer->cancel();
    Status report = !live.end_reason.ok() ? live.end_reason
                                          : DescribeChildEnd(*live.slot, status, live.killed,
                                                             options_.session_timeout.count());
    if (!report.ok() && !stopping_) {
      uint32_t request = live.slot->in_call.load() ? live.slot->request_id : 0;
      spdlog::warn("session {}: {}", live.id, EscapeForLog(report.ToString()));
      SendErrorAndClose(live.fd, request, report);
    } else {
      ::close(live.fd);
    }
    free_slots_.push_back(live.slot_index);
    remover_.Remove(live.workspace);
    spdlog::info("session {} ended", live.id);
    if (on_session_end_) on_session_end_(SessionEnd{live.id, pid, report});
  }

  void Shutdown() {
    if (stopping_) return;
    stopping_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    signals_.cancel(ec);
    child_signals_.cancel(ec);
    backoff_.cancel();
    watchdog_.cancel();
    for (auto& [pid, live] : sessions_) KillSession(pid);
    // Their ends, as the fork server reaps them; a child that does not die (stuck in the kernel)
    // gets a minute, then goes with the fork server.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!sessions_.empty() && fork_server_ && std::chrono::steady_clock::now() < until) {
      if (!fork_server_->Poll(/*block=*/true, on_exit_, std::chrono::seconds(1))) break;
    }
    ForkServerDied();  // finishes what is left without a report (stopping_)
    if (fork_events_) fork_events_->close(ec);
    fork_events_.reset();
    fork_server_.reset();
    if (slots_) ::munmap(slots_, slots_bytes_);
    slots_ = nullptr;
    remover_.Finish();
    if (owns_work_dir_) {
      std::error_code fec;
      std::filesystem::remove_all(options_.work_dir, fec);
    }
    io_.stop();
  }

  ServerOptions options_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::signal_set child_signals_;
  asio::steady_timer backoff_;
  asio::steady_timer watchdog_;
  int backoff_ms_ = 0;
  uint16_t port_ = 0;
  bool owns_work_dir_ = false;
  std::atomic<bool> stopping_{false};
  std::map<pid_t, Live> sessions_;
  std::function<void(const SessionEnd&)> on_session_end_;
  // With fork: the fork server, readiness of its socket, and the sessions' call slots.
  std::unique_ptr<ForkServer> fork_server_;
  std::optional<asio::posix::stream_descriptor> fork_events_;
  // Read by CanStartSessions on other threads.
  std::atomic<bool> fork_server_dead_{false};
  bool fork_server_finished_ = false;  // ForkServerDied ran (io thread only)
  std::atomic<int> fork_server_pid_{-1};
  ForkServer::OnExit on_exit_;
  CallSlot* slots_ = nullptr;
  uint64_t slots_bytes_ = 0;
  uint32_t slot_count_ = 0;
  std::vector<uint32_t> free_slots_;
  WorkspaceRemover remover_;  // last: its thread ends before the members it could touch
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Server::~Server() = default;
Status Server::Listen() { return impl_->Listen(); }
uint16_t Server::port() const { return impl_->port(); }
const std::string& Server::host() const { return impl_->host(); }
const std::string& Server::work_dir() const { return impl_->work_dir(); }
void Server::Run() { impl_->Run(); }
void Server::Stop() { impl_->Stop(); }
void Server::set_on_session_end(std::function<void(const SessionEnd&)> fn) {
  impl_->set_on_session_end(std::move(fn));
}
size_t Server::active_sessions() const { return impl_->active(); }
void Server::EndSession(pid_t pid, Status reason) { impl_->EndSession(pid, std::move(reason)); }
Status Server::CanStartSessions() const { return impl_->CanStartSessions(); }

}  // namespace crosstune::server
