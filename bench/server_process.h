// Runs a crosstune-server (native, or a cross-built one under qemu-user) as a child process on
// 127.0.0.1 with --port 0, and reads the port it bound from its first stdout line:
//   crosstune-server: listening on 127.0.0.1:PORT
// Used by crosstune-bench-rpc and the integration tests (rpc, builder, cli, qemu).
//
// Not thread-safe; one thread owns a ServerProcess. The destructor stops the server and every
// session child it forked (they share a process group).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/status.h"

namespace crosstune {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // argv[0] is the program (a path, or a name looked up in PATH). Waits up to `timeout` for the
  // listening line; the rest of the server's stdout is copied to this process's stderr.
  Status Start(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);
  // Stops the server and its session children (SIGTERM to the group, then SIGKILL).
  void Stop();
  // SIGTERM to the server alone, so it shuts down as on a user's Ctrl-C, and waits up to `grace`.
  // Returns its wait status, or -1 when it had to be killed. Leftover children are killed too.
  int Terminate(std::chrono::milliseconds grace = std::chrono::seconds(30));

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int pid() const { return pid_; }

 private:
  void CloseOutput();

  int pid_ = -1;
  int stdout_fd_ = -1;
  uint16_t port_ = 0;
  std::thread drain_;
};

}  // namespace crosstune
