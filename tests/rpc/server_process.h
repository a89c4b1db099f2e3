// The real crosstune-server binary as a child process for the rpc tests: a fresh work dir per
// server, --host 127.0.0.1 and --port 0, started through the shared tests/support one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"

namespace crosstune::testing {

class ServerProcess {
 public:
  // Starts `binary` (default: the crosstune-server this build made, or $CROSSTUNE_TEST_SERVER,
  // prefixed by $CROSSTUNE_TEST_SERVER_PREFIX such as "qemu-aarch64 -L /usr/aarch64-linux-gnu")
  // with `args` added after --host 127.0.0.1, --work-dir <fresh temp dir> unless `args` name one,
  // and, unless `args` name a port, --port 0. Null (with *error set) on failure.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& args,
                                              std::string* error, const std::string& binary = "");
  ~ServerProcess();  // stops the server and removes the work dir (a given one too)

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& work_dir() const { return work_dir_; }
  int pid() const { return process_.pid(); }
  // SIGTERM, then waits (up to 30 s); returns its wait status, or -1 when it had to be killed.
  int Terminate() { return process_.Terminate(); }
  // Names of the session workspaces currently under work_dir().
  std::vector<std::string> Workspaces() const;
  // Polls until no session workspace is left (true) or `seconds` pass (false).
  bool WaitForNoWorkspaces(double seconds) const;

 private:
  crosstune::ServerProcess process_;
  uint16_t port_ = 0;
  std::string work_dir_;
};

}  // namespace crosstune::testing
