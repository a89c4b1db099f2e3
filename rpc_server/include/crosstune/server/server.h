// crosstune-server's process model: a parent that accepts connections and has one child forked per
// session (session.h runs in the child), turns a child's death into an error for its client,
// enforces the session limit and timeout, and removes each session's workspace. The children are
// forked by a fork server (src/fork_server.h) that Listen() starts while the process has one
// thread, so a session never inherits a lock another thread held.
//
// Thread-safety: Run() runs the server on the calling thread; Stop() may be called from any
// thread. Everything else is for the thread that calls Run().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "crosstune/server/session.h"
#include "crosstune/status.h"

namespace crosstune::server {

// The log line pattern of crosstune-server (the session child re-creates its logger with it).
inline constexpr const char* kLogPattern = "[%Y-%m-%d %H:%M:%S.%e] [%P] [%l] %v";

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;      // 0: ephemeral
  uint16_t port_end = 0;  // > port: try port..port_end until one binds
  // Session workspaces are made under here (created if missing). Empty: a fresh directory under
  // $TMPDIR (or /tmp), removed at shutdown.
  std::string work_dir;
  bool fork = true;  // false: sessions in-process, one at a time (debugging; no crash isolation)
  std::chrono::seconds session_timeout{0};  // 0: none
  uint32_t max_sessions = 16;
  // Sessions from one peer address that have not completed their handshake: more are refused
  // Busy at once, so idle connections from one address cannot take every session slot.
  uint32_t max_handshakes_per_peer = 4;
  SessionOptions session;  // what each session gets (auth, limits, hooks)
  // Removes a finished session's workspace (default: the whole tree). It runs on the server's
  // remover thread, never on the thread that accepts connections: a workspace of thousands of
  // files takes seconds to remove. Shutdown waits for the removals queued before it.
  std::function<void(const std::string& path)> remove_workspace;
};

// What the parent knows when a session ends; see Server::set_on_session_end.
struct SessionEnd {
  std::string session_id;
  pid_t pid = 0;
  Status reported;  // what the client was told about an abnormal end; Ok for a normal one
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; afterwards port() is the bound port. With fork, also starts the fork server:
  // call it before this process starts any thread, on a thread that lives as long as the server
  // (the fork server gets SIGKILL when the thread that forked it ends).
  Status Listen();
  uint16_t port() const;
  const std::string& host() const;
  // Where session workspaces go (valid after Listen()).
  const std::string& work_dir() const;

  // Serves until Stop() or SIGINT/SIGTERM/SIGHUP; then kills live sessions and removes their
  // workspaces (and the work dir when it made it).
  void Run();
  void Stop();

  // Called in the parent after each session ends (e.g. to tell the tracker the lease is free).
  void set_on_session_end(std::function<void(const SessionEnd&)> fn);
  // Ends the session served by process `pid` (e.g. its lease was revoked) and tells its client
  // `reason` instead of a crash report. Thread-safe; does nothing for an unknown pid.
  void EndSession(pid_t pid, Status reason);
  // Live sessions right now.
  size_t active_sessions() const;
  // Ok while new sessions can start; Internal once the session fork server has died (the server
  // then refuses every connection: see fork_server.h). Thread-safe (the tracker link's self-check).
  Status CanStartSessions() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crosstune::server
