// A crosstune-server started on this machine as a child process: what `crosstune tune` measures
// on when it is given no device, and how the benchmarks and the tests start their servers.
//
//   client::LocalServer server;
//   if (Status s = server.Start(client::LocalServerOptions{}); !s.ok()) ...
//   auto session = client::Session::Connect({.server = server.address()});
//
// The server listens on 127.0.0.1, port 0; Start() reads the port it bound from the first stdout
// line that says so ("crosstune-server: listening on 127.0.0.1:PORT"). The other Start() runs any
// program that prints such a line (crosstune-tracker prints "listening on 127.0.0.1:PORT http
// 127.0.0.1:HTTP_PORT"; a cross-built server runs under qemu-user) with its argument vector as
// given.
//
// Not thread-safe; one thread owns a LocalServer. The destructor stops the process and every
// child it forked (they share a process group).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::client {

struct LocalServerOptions {
  // The crosstune-server to run; empty: FindServerBinary().
  std::string binary;
  // Flags added after `--host 127.0.0.1 --port 0` (a --port here wins: the last one counts).
  std::vector<std::string> args;
  // The server ends when this process does, however it ends (crosstune-server --exit-with-parent).
  bool exit_with_parent = true;
  // How long to wait for the listening line.
  std::chrono::milliseconds start_timeout{30'000};
  // Where the server's stderr goes (appended); empty: this process's stderr.
  std::string stderr_log;
};

// The crosstune-server beside the running program (an installed tree: bin/), else in a build
// tree's rpc_server/ one or two folders up from it, else "crosstune-server" (looked up in PATH).
std::string FindServerBinary();

class LocalServer {
 public:
  LocalServer() = default;
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  // Starts a crosstune-server as `options` say and waits for it to listen.
  Status Start(const LocalServerOptions& options);
  // Starts `argv` (argv[0]: a path, or a name looked up in PATH) as given and waits up to
  // `timeout` for its listening line; the rest of its stdout is copied to this process's stderr.
  // Its stderr goes to `stderr_log` (appended) when given, else to this process's stderr.
  // `pass_fd` >= 0 is handed to the process as its descriptor 3 (e.g. a listening socket).
  Status Start(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
               const std::string& stderr_log = "", int pass_fd = -1);
  // Stops the process and its children (SIGTERM to the group, then SIGKILL).
  void Stop();
  // SIGTERM to the process alone, so it shuts down as on a user's Ctrl-C, and waits up to `grace`.
  // Returns its wait status, or -1 when it had to be killed. Leftover children are killed too.
  int Terminate(std::chrono::milliseconds grace = std::chrono::seconds(30));
  // Sends `sig` to the whole process group (e.g. SIGKILL: a crash that skips every cleanup) and
  // reaps the process; SIGKILL follows if it is still there after a few seconds.
  void Kill(int sig);

  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // The whole "listening on" line, for the other ports some programs print on it.
  const std::string& listening_line() const { return line_; }
  int pid() const { return pid_; }

 private:
  void CloseOutput();

  int pid_ = -1;
  int stdout_fd_ = -1;
  uint16_t port_ = 0;
  std::string line_;
  std::thread drain_;
};

}  // namespace crosstune::client
