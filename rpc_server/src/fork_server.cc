#include "fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace crosstune::server {
namespace {

// The messages between the server and its fork server: one fixed-size struct per SEQPACKET
// message, so a message is never split or merged with the next.
enum : uint32_t { kSpawn = 1, kKill = 2, kSpawned = 3, kExited = 4 };

struct Request {
  uint32_t kind = 0;
  uint32_t seq = 0;   // kSpawn: echoed in its kSpawned
  int32_t pid = 0;    // kKill
  uint32_t slot = 0;  // kSpawn
  char id[64] = {};
  char workspace[4096] = {};
};

struct Reply {
  uint32_t kind = 0;
  uint32_t seq = 0;
  int32_t pid = 0;    // kSpawned: the child, or -1 when fork failed; kExited: the child
  int32_t value = 0;  // kSpawned: errno of a failed fork; kExited: the wait status
};

int g_sigchld_write = -1;  // the fork server's self-pipe, written by its SIGCHLD handler

void OnSigchld(int) {
  int saved = errno;
  char c = 0;
  [[maybe_unused]] ssize_t n = ::write(g_sigchld_write, &c, 1);
  errno = saved;
}

// The fork server's parent-death signal (catchable, unlike SIGKILL): the server is gone, so the
// poll loop ends and kills every session's process group on its way out.
constexpr int kServerGoneSignal = SIGUSR1;
volatile sig_atomic_t g_server_gone = 0;

void OnServerGone(int sig) {
  g_server_gone = 1;
  OnSigchld(sig);
}

void SetDisposition(int sig, void (*handler)(int), int flags = 0) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

// Sends the whole of `msg` (one SEQPACKET message), with `pass_fd` attached when >= 0.
// Waits for room up to `wait_ms` (-1: no limit).
bool SendMessage(int fd, const void* msg, size_t size, int pass_fd, int wait_ms) {
  iovec iov{const_cast<void*>(msg), size};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  for (;;) {
    ssize_t n = ::sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(size)) return true;
    if (n >= 0) return false;  // SEQPACKET sends all or nothing
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return false;
  }
}

// Receives one request and the descriptor sent with it (-1 if none). Returns recvmsg's result.
ssize_t ReceiveRequest(int fd, Request* req, int* passed_fd) {
  *passed_fd = -1;
  iovec iov{req, sizeof(*req)};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  mh.msg_control = control;
  mh.msg_controllen = sizeof(control);
  ssize_t n = ::recvmsg(fd, &mh, 0);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*passed_fd < 0) {
        *passed_fd = got;
      } else {
        ::close(got);  // more than the one expected: not ours to keep
      }
    }
  }
  return n;
}

// Copies `text` into a fixed field; false when it does not fit (with its NUL).
template <size_t N>
bool CopyField(char (&field)[N], const std::string& text) {
  if (text.size() >= N || text.find('\0') != std::string::npos) return false;
  std::memcpy(field, text.data(), text.size());
  field[text.size()] = '\0';
  return true;
}

template <size_t N>
std::string FieldText(const char (&field)[N]) {
  return std::string(field, ::strnlen(field, N));
}

// The fork server's body: one thread, a poll loop over the server's socket and a SIGCHLD
// self-pipe. It ends (killing its children) when the server's socket closes.
[[noreturn]] void ForkServerMain(int fd, const ForkServer::ChildMain& child_main) {
  char name[17] = {};  // the server's; sessions keep it, this process shows as ct-forkserver
  ::prctl(PR_GET_NAME, name, 0, 0, 0);
  ::prctl(PR_SET_NAME, "ct-forkserver", 0, 0, 0);
  int self_pipe[2];
  if (::pipe2(self_pipe, O_CLOEXEC | O_NONBLOCK) != 0) ::_exit(1);
  g_sigchld_write = self_pipe[1];
  // The server's signal handlers (asio's) would write into the server's own pipe: replace them.
  // Ctrl-C reaches the whole process group; the server decides what ends, not this process.
  SetDisposition(SIGCHLD, OnSigchld, SA_RESTART | SA_NOCLDSTOP);
  SetDisposition(kServerGoneSignal, OnServerGone);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) SetDisposition(sig, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const pid_t self = ::getpid();
  std::set<pid_t> live;

  for (;;) {
    // Reap first: a child's kSpawned always goes out before its kExited.
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (live.erase(pid) == 0) continue;
      ::kill(-pid, SIGKILL);  // whatever its kernels forked and left behind
      Reply r{kExited, 0, pid, status};
      if (!SendMessage(fd, &r, sizeof(r), -1, -1)) ::_exit(0);
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {self_pipe[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents) {
      char buf[64];
      while (::read(self_pipe[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (g_server_gone) break;
    if (!p[0].revents) continue;
    Request req;
    int client = -1;
    ssize_t got = ReceiveRequest(fd, &req, &client);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) break;  // the server closed its end, or is gone
    if (got != static_cast<ssize_t>(sizeof(req))) {
      if (client >= 0) ::close(client);
      continue;
    }
    if (req.kind == kKill) {
      if (live.count(req.pid)) {  // not reaped, so the pid is still this child's
        ::kill(-req.pid, SIGKILL);
        ::kill(req.pid, SIGKILL);
      }
      continue;
    }
    if (req.kind != kSpawn || client < 0) {
      if (client >= 0) ::close(client);
      continue;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fd);
      ::close(self_pipe[0]);
      ::close(self_pipe[1]);
      ::prctl(PR_SET_NAME, name, 0, 0, 0);
      for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, kServerGoneSignal}) {
        SetDisposition(sig, SIG_DFL);
      }
      // A session never outlives its server: after a kill -9 of the server, a restarted one may
      // grant the device to someone else, and an orphaned session would still serve the first
      // user. The server's death ends this fork server the same way, and that ends the session.
      // (qemu-user passes this through to the host kernel.)
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != self) ::_exit(0);  // the fork server died before the line above
      // Its own process group, so that ending the session also ends what its kernels forked.
      ::setpgid(0, 0);
      SessionSpawn spawn{FieldText(req.id), FieldText(req.workspace), req.slot};
      child_main(client, spawn);
      ::_exit(0);
    }
    int err = pid < 0 ? errno : 0;
    ::close(client);
    if (pid > 0) {
      ::setpgid(pid, pid);  // also done by the child: whichever runs first
      live.insert(pid);
    }
    Reply r{kSpawned, req.seq, pid > 0 ? pid : -1, err};
    if (!SendMessage(fd, &r, sizeof(r), -1, -1)) break;
  }
  for (pid_t pid : live) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  ::_exit(0);
}

}  // namespace

Expected<std::unique_ptr<ForkServer>> ForkServer::Start(ChildMain child_main,
                                                        std::vector<int> close_in_fork_server) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status(ErrorCode::kInternal,
                  std::string("cannot make the fork server's socket: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return Status(ErrorCode::kInternal,
                  std::string("cannot fork the session fork server: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(sv[0]);
    // Not SIGKILL: on its server's death the fork server must still kill what the sessions'
    // kernels forked (their process groups), which the sessions' own SIGKILL would leave behind
    // holding the clients' sockets. (It sees its socket close too; the signal is the backstop.)
    ::prctl(PR_SET_PDEATHSIG, kServerGoneSignal);
    if (::getppid() != parent) ::_exit(0);  // the server died before the line above
    for (int fd : close_in_fork_server) ::close(fd);
    ForkServerMain(sv[1], child_main);
  }
  ::close(sv[1]);
  return std::unique_ptr<ForkServer>(new ForkServer(pid, sv[0]));
}

ForkServer::~ForkServer() {
  ::close(fd_);  // the fork server kills its children and exits on EOF
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void ForkServer::MarkReaped() {
  reaped_ = true;
  alive_ = false;
}

bool ForkServer::Receive(int wait_ms, uint32_t* kind, int32_t* pid, int32_t* value, uint32_t* seq) {
  if (!alive_) return false;
  if (wait_ms != 0) {
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno == EINTR) return false;
    if (n <= 0) return false;
  }
  Reply r;
  ssize_t n = ::recv(fd_, &r, sizeof(r), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (n <= 0) {
    alive_ = false;
    return false;
  }
  if (n != static_cast<ssize_t>(sizeof(r))) return false;
  *kind = r.kind;
  *pid = r.pid;
  *value = r.value;
  *seq = r.seq;
  return true;
}

void ForkServer::Handle(uint32_t kind, int32_t pid, int32_t value, const OnExit& on_exit) {
  if (kind == kExited) {
    on_exit(pid, value);
  } else if (kind == kSpawned && pid > 0) {
    Kill(pid);  // the answer to a Spawn that gave up waiting: nobody serves that session
  }
}

Expected<pid_t> ForkServer::Spawn(int client_fd, const SessionSpawn& spawn, const OnExit& on_exit,
                                  std::chrono::milliseconds limit) {
  std::string who = "the session fork server (pid " + std::to_string(pid_) + ")";
  if (!alive_) return Status(ErrorCode::kInternal, who + " is gone");
  auto req = std::make_unique<Request>();
  req->kind = kSpawn;
  req->seq = ++seq_;
  req->slot = spawn.slot;
  if (!CopyField(req->id, spawn.id) || !CopyField(req->workspace, spawn.workspace)) {
    return Status(ErrorCode::kInternal, "the session's workspace path is too long");
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  auto left_ms = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(left.count(), 1));
  };
  if (!SendMessage(fd_, req.get(), sizeof(*req), client_fd, left_ms())) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) alive_ = false;
    return Status(ErrorCode::kInternal, who + " did not take the session: " + std::strerror(errno));
  }
  while (std::chrono::steady_clock::now() < deadline) {
    uint32_t kind = 0, seq = 0;
    int32_t pid = 0, value = 0;
    if (!Receive(left_ms(), &kind, &pid, &value, &seq)) {
      if (!alive_) return Status(ErrorCode::kInternal, who + " died");
      continue;
    }
    if (kind == kSpawned && seq == seq_) {
      if (pid <= 0) {
        return Status(ErrorCode::kBusy,
                      std::string("cannot fork a session process: ") + std::strerror(value));
      }
      return static_cast<pid_t>(pid);
    }
    Handle(kind, pid, value, on_exit);
  }
  return Status(ErrorCode::kInternal,
                who + " did not answer within " + std::to_string(limit.count()) + " ms");
}

void ForkServer::Kill(pid_t pid) {
  if (!alive_) return;
  Request req;
  req.kind = kKill;
  req.pid = pid;
  if (!SendMessage(fd_, &req, sizeof(req), -1, 1000) && errno != EAGAIN) alive_ = false;
}

bool ForkServer::Poll(bool block, const OnExit& on_exit, std::chrono::milliseconds limit) {
  uint32_t kind = 0, seq = 0;
  int32_t pid = 0, value = 0;
  if (block && Receive(static_cast<int>(limit.count()), &kind, &pid, &value, &seq)) {
    Handle(kind, pid, value, on_exit);
  }
  while (Receive(0, &kind, &pid, &value, &seq)) Handle(kind, pid, value, on_exit);
  return alive_;
}

}  // namespace crosstune::server
