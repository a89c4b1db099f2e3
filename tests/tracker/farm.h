// A test farm on loopback: the real crosstune-tracker and crosstune-server binaries as child
// processes on port 0, their ports read back from the "listening on" line each prints.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/client/tracker_client.h"
#include "crosstune/crypto.h"

extern char** environ;

namespace crosstune::testing {

// A child process whose stdout first line is read back; stderr goes to a log file.
class Process {
 public:
  Process(std::vector<std::string> argv, const std::string& log_path) : argv_(std::move(argv)) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char*> args;
    for (auto& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~Process() {
    Kill(SIGTERM);
    if (out_ >= 0) ::close(out_);
  }

  // The first stdout line, waiting at most `timeout`.
  std::string ReadLine(std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string line;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c;
      if (::read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }

  // Sends `sig` and reaps the process.
  void Kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    for (int i = 0; i < 50; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int out_ = -1;
};

// Polls `cond` until it holds or `timeout` passes; returns whether it held. Used to wait for
// events of other processes, never to assert how long they took.
inline bool Eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(15'000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

// The binaries under test: this build's, or $CROSSTUNE_TEST_TRACKER / $CROSSTUNE_TEST_SERVER (e.g.
// an older build, to see a regression test fail against it).
inline std::string TrackerBin() {
  const char* e = std::getenv("CROSSTUNE_TEST_TRACKER");
  return e && *e ? e : CROSSTUNE_TRACKER_BIN;
}
inline std::string ServerBin() {
  const char* e = std::getenv("CROSSTUNE_TEST_SERVER");
  return e && *e ? e : CROSSTUNE_SERVER_BIN;
}

class Farm {
 public:
  Farm() {
    dir_ = std::filesystem::temp_directory_path() / ("crosstune-farm-" + RandomHex(6));
    std::filesystem::create_directories(dir_);
  }
  ~Farm() {
    servers_.clear();
    tracker_.reset();
    std::error_code ec;
    if (!std::getenv("CROSSTUNE_KEEP_FARM")) std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
    return Path(name);
  }

  // Starts (or restarts, on the same ports) the tracker with short timings.
  bool StartTracker(std::vector<std::string> extra = {}, uint16_t port = 0, int http_port = 0) {
    std::vector<std::string> argv = {TrackerBin(),
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port),
                                     "--http-port",
                                     std::to_string(http_port),
                                     "--heartbeat-ms",
                                     "200",
                                     "--heartbeat-timeout-ms",
                                     "1500",
                                     "--claim-timeout-ms",
                                     "3000",
                                     "--self-check-s",
                                     "1",
                                     "--startup-grace-s",
                                     "0",
                                     "--reattach-s",
                                     "10"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    tracker_ = std::make_unique<Process>(argv, Path("tracker.log"));
    std::string line = tracker_->ReadLine();
    std::smatch m;
    static const std::regex re(R"(listening on 127\.0\.0\.1:(\d+) http 127\.0\.0\.1:(\d+))");
    if (!std::regex_search(line, m, re)) {
      std::ifstream log(Path("tracker.log"));
      std::fprintf(stderr, "tracker did not start: '%s'\n%s\n", line.c_str(),
                   std::string(std::istreambuf_iterator<char>(log), {}).c_str());
      return false;
    }
    tracker_port_ = static_cast<uint16_t>(std::stoi(m[1]));
    http_port_ = static_cast<uint16_t>(std::stoi(m[2]));
    return true;
  }
  void KillTracker(int sig = SIGKILL) { tracker_->Kill(sig); }
  pid_t tracker_pid() const { return tracker_ ? tracker_->pid() : -1; }

  // Starts a crosstune-server registered with the tracker; returns its index.
  int StartServer(const std::string& key, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {ServerBin(), "--host",  "127.0.0.1", "--port", "0",
                                     "--tracker", tracker(), "--key",     key};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p =
        std::make_unique<Process>(argv, Path("server" + std::to_string(servers_.size()) + ".log"));
    std::string line = p->ReadLine();
    std::smatch m;
    static const std::regex re(R"(listening on [^:]+:(\d+))");
    if (!std::regex_search(line, m, re)) return -1;
    server_ports_.push_back(static_cast<uint16_t>(std::stoi(m[1])));
    servers_.push_back(std::move(p));
    return static_cast<int>(servers_.size()) - 1;
  }
  Process& server(int i) { return *servers_[i]; }
  std::string server_addr(int i) const { return "127.0.0.1:" + std::to_string(server_ports_[i]); }

  std::string tracker() const { return "127.0.0.1:" + std::to_string(tracker_port_); }
  uint16_t tracker_port() const { return tracker_port_; }
  uint16_t http_port() const { return http_port_; }

  std::unique_ptr<client::TrackerClient> Client(const std::string& name = "tester",
                                                const std::string& secret = "") {
    client::TrackerOptions o;
    o.tracker = tracker();
    o.peer_name = name;
    o.auth_secret = secret;
    auto c = client::TrackerClient::Connect(o);
    return c.ok() ? std::move(c).value() : nullptr;
  }

  nlohmann::json Summary(const std::string& secret = "") {
    auto c = Client("query", secret);
    if (!c) return {};
    auto j = c->Query();
    return j.ok() ? nlohmann::json::parse(*j) : nlohmann::json{};
  }
  // The device entry named `name` in the summary, or null.
  nlohmann::json Device(const std::string& name, const std::string& secret = "") {
    auto s = Summary(secret);
    if (s.is_object()) {
      for (auto& d : s["devices"]) {
        if (d["name"] == name) return d;
      }
    }
    return nullptr;
  }
  bool WaitRegistered(size_t n, const std::string& secret = "") {
    return Eventually([&] {
      auto s = Summary(secret);
      return s.is_object() && s["devices"].size() == n;
    });
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<Process> tracker_;
  uint16_t tracker_port_ = 0, http_port_ = 0;
  std::vector<std::unique_ptr<Process>> servers_;
  std::vector<uint16_t> server_ports_;
};

}  // namespace crosstune::testing
