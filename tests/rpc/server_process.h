// Runs the real crosstune-server binary as a child process on 127.0.0.1, port 0, and reads the
// port back from its "crosstune-server: listening on HOST:PORT" line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace crosstune::testing {

class ServerProcess {
 public:
  // Starts `binary` (default: the crosstune-server this build made) with `args` added after
  // --host 127.0.0.1 --work-dir <fresh temp dir> and, unless `args` name a port, --port 0. Null
  // (with *error set) on failure.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& args,
                                              std::string* error, const std::string& binary = "");
  ~ServerProcess();  // SIGTERM, then SIGKILL if it lingers; removes the work dir

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  const std::string& work_dir() const { return work_dir_; }
  // Sends SIGTERM and waits (up to 30 s) for the process; returns its wait status, or -1 when it
  // had to be killed.
  int Terminate();
  // Whether the process is still running.
  bool alive();
  // Names of the session workspaces currently under work_dir().
  std::vector<std::string> Workspaces() const;
  // Polls until no session workspace is left (true) or `seconds` pass (false).
  bool WaitForNoWorkspaces(double seconds) const;

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string work_dir_;
  int stdout_fd_ = -1;
};

// A fresh temporary directory (removed by the caller).
std::string MakeTempDir();

}  // namespace crosstune::testing
