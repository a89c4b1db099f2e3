// Small helpers the tests share: temporary directories, whole-file reads and writes, waiting for
// a condition, running a command line, and a loopback port where nothing listens.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace crosstune::testing {

// A fresh directory under $TMPDIR (or /tmp); "" on failure. The caller removes it.
std::string MakeTempDir(const std::string& prefix = "crosstune-test");

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when this object goes
// (a function-local static one at the process's exit). path() is "" when it could not be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "crosstune-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The build cache one test run shares (builder/build_cache.h): scripts/test.sh points
// CROSSTUNE_TEST_BUILD_CACHE at a directory it empties at the start of the run, so a kernel that
// several tests build (a model's convs, a template's default config) is compiled once per run,
// by the first test that needs it. "" (no cache) when the variable is unset, as in a test run
// by hand. For the builders of tests that check kernels' answers; never for a test of the
// builder or its cache.
std::string SharedTestBuildCache();

std::string ReadFile(const std::string& path);
// Writes `bytes` to `path` (truncating) and returns `path`.
std::string WriteFile(const std::string& path, const std::string& bytes);

// Polls `cond` until it holds or `timeout` passes; returns whether it held. For waiting on
// events of other processes, never for asserting how long they took.
bool Eventually(const std::function<bool()>& cond,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(15'000));

struct CommandResult {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
};
// Runs `command` with /bin/sh (test-controlled text only), capturing stdout and stderr apart.
CommandResult RunCommand(const std::string& command);

// A loopback TCP port that is bound but never listens, held for this object's lifetime: a
// connection to it is refused at once, and no other process can take the port meanwhile.
class ClosedPort {
 public:
  ClosedPort();
  ~ClosedPort();
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A loopback TCP socket, bound to a free port and listening, held by this object: hand it to a
// server (e.g. crosstune-tracker --listen-fd) and the port outlives that server's restarts.
class ListeningSocket {
 public:
  ListeningSocket() = default;
  ~ListeningSocket();
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;
  // Opens the socket the first time; true while it is open.
  bool open();
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A process as /proc shows it (Linux only): its parent, process group and thread count.
struct ProcessInfo {
  int pid = 0;
  int ppid = 0;
  int pgrp = 0;
  int threads = 0;
};
// Every process now running (zombies left out).
std::vector<ProcessInfo> ListProcesses();
// The session processes below server process `server_pid`: its descendants that lead their own
// process group, as crosstune-server's session children do.
std::vector<ProcessInfo> SessionProcesses(int server_pid);
// `pid`'s entry, or pid 0 when it is gone.
ProcessInfo Process(int pid);
// The CPUs `pid` may run on, as /proc/PID/status's Cpus_allowed_list says ("0-1"); "" when gone.
std::string CpusAllowedList(int pid);

}  // namespace crosstune::testing
