// Runs a crosstune-server or crosstune-tracker (native, or a cross-built server under qemu-user)
// as a child process listening on port 0, and reads the port it bound from the first stdout line
// that says so:
//   crosstune-server: listening on 127.0.0.1:PORT
//   crosstune-tracker: listening on 127.0.0.1:PORT http 127.0.0.1:HTTP_PORT
// The one way tests and benchmarks start a server and find its port.
//
// Not thread-safe; one thread owns a ServerProcess. The destructor stops the process and every
// child it forked (they share a process group).
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
  // listening line; the rest of the process's stdout is copied to this process's stderr. Its
  // stderr goes to `stderr_log` (appended) when given, else to this process's stderr.
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
  // The whole "listening on" line, for the other ports some binaries print on it.
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

}  // namespace crosstune
