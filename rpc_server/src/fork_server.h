// The session fork server: a small process the server forks while it still has one thread, and
// which forks every session child from then on. A child forked from a multi-threaded process
// inherits whatever locks the other threads held at that moment (malloc's, spdlog's, OpenSSL's,
// the tracker link's), locked forever; the fork server has only ever had one thread, so its
// children start with every lock free.
//
// The server sends it each accepted connection's socket (SCM_RIGHTS over a unix socketpair) with
// the session's id, workspace and call-slot index; it forks the child, answers with the child's
// pid, reaps it, and reports its wait status. It kills a child (and its process group) when asked,
// and only while that child is not yet reaped, so a kill never reaches a reused pid.
//
// Lifetimes: the fork server dies with its server (PR_SET_PDEATHSIG; it also ends when the socket
// closes), and each session child dies with the fork server, so a kill -9 of the server ends every
// session. PR_SET_PDEATHSIG follows the thread that forked: Start() must run on a thread that lives
// as long as the server (crosstune-server: its main thread).
//
// Thread-safety: a ForkServer object is for one thread of the server process (the one that runs
// the server's io loop).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::server {

// What one session child needs to know; the server's own state is already there (the child is a
// copy of the server as it was when the fork server started).
struct SessionSpawn {
  std::string id;
  std::string workspace;
  uint32_t slot = 0;  // index of the session's call slot
};

class ForkServer {
 public:
  // Runs in each session child with the connection's socket; must not return (it may _exit).
  using ChildMain = std::function<void(int fd, const SessionSpawn& spawn)>;
  // Called with (pid, wait status) for every session child that ended.
  using OnExit = std::function<void(pid_t pid, int wait_status)>;

  // Forks the fork server now. Call while this process has one thread. `close_in_fork_server`:
  // descriptors the fork server (and so every session) must not hold, e.g. the listening socket.
  static Expected<std::unique_ptr<ForkServer>> Start(ChildMain child_main,
                                                     std::vector<int> close_in_fork_server);
  // Closes the socket, kills the fork server (and with it any session left) and reaps it.
  ~ForkServer();
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  pid_t pid() const { return pid_; }
  // Readable when the fork server has something to say (a child ended, or it died: EOF).
  int fd() const { return fd_; }
  // Whether the fork server still answers; false after it died (EOF or an error on its socket).
  bool alive() const { return alive_; }

  // Has the fork server fork a session child serving `client_fd` (the caller keeps its copy) and
  // returns its pid. Children that end meanwhile are reported to `on_exit` first. Fails (and
  // marks the fork server dead when it is) if it cannot answer within `limit`.
  Expected<pid_t> Spawn(int client_fd, const SessionSpawn& spawn, const OnExit& on_exit,
                        std::chrono::milliseconds limit = std::chrono::seconds(10));
  // SIGKILLs session child `pid` and its process group, unless it was already reaped.
  void Kill(pid_t pid);
  // Reports the children that ended to `on_exit`: those already told (block = false) or, with
  // block, waits up to `limit` for at least one report. False when the fork server is gone.
  bool Poll(bool block, const OnExit& on_exit,
            std::chrono::milliseconds limit = std::chrono::seconds(10));
  // The server reaped the fork server itself (its SIGCHLD handler waits for any child): the pid
  // is no longer its to kill.
  void MarkReaped();

 private:
  ForkServer(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  // One message from the fork server, waiting up to wait_ms (0: only one already there): true
  // with the fields set, false when none came (or the fork server is gone: then alive_ is false).
  bool Receive(int wait_ms, uint32_t* kind, int32_t* pid, int32_t* value, uint32_t* seq);
  // Acts on a message that is not the answer being waited for.
  void Handle(uint32_t kind, int32_t pid, int32_t value, const OnExit& on_exit);

  pid_t pid_ = -1;
  int fd_ = -1;
  bool alive_ = true;
  bool reaped_ = false;
  uint32_t seq_ = 0;  // of the last Spawn
};

}  // namespace crosstune::server
