// A test farm on loopback: the real crosstune-tracker and crosstune-server binaries as child
// processes on port 0, started (and their ports read back) through tests/support's ServerProcess.
#pragma once

#include <signal.h>

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

#include "crosstune/client/session.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/crypto.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"

namespace crosstune::testing {

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

// A multi-session hold of a device of `key`, as `crosstune lease` asks for one.
inline client::LeaseRequest Hold(const std::string& key,
                                 std::chrono::milliseconds wait = std::chrono::seconds(10)) {
  client::LeaseRequest r;
  r.key = key;
  r.wait = wait;
  r.hold = std::chrono::seconds(60);
  r.multi_session = true;
  return r;
}

// A session on a granted server under the grant's token.
inline Expected<std::unique_ptr<client::Session>> LeasedSession(
    const std::string& server, const std::string& token,
    std::chrono::milliseconds request_timeout = std::chrono::seconds(5)) {
  client::ConnectOptions o;
  o.server = server;
  o.lease_token = token;
  o.connect_timeout = std::chrono::seconds(5);
  o.request_timeout = request_timeout;
  return client::Session::Connect(o);
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
    return testing::WriteFile(Path(name), text);
  }

  // Starts the tracker with short timings. With `held_port` it serves on a listening socket this
  // farm holds (--listen-fd), so a restarted tracker comes back on the same port for certain.
  bool StartTracker(std::vector<std::string> extra = {}, bool held_port = false) {
    std::vector<std::string> argv = {TrackerBin(), "--host",
                                     "127.0.0.1",  "--port",
                                     "0",          "--http-port",
                                     "0",          "--heartbeat-ms",
                                     "200",        "--heartbeat-timeout-ms",
                                     "1500",       "--claim-timeout-ms",
                                     "3000",       "--self-check-s",
                                     "1",          "--startup-grace-s",
                                     "0",          "--reattach-s",
                                     "10"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (held_port) {
      if (!listener_.open()) return false;
      argv.insert(argv.end(), {"--listen-fd", "3"});
    }
    tracker_ = std::make_unique<ServerProcess>();
    Status started = tracker_->Start(argv, std::chrono::seconds(10), Path("tracker.log"),
                                     held_port ? listener_.fd() : -1);
    std::smatch m;
    static const std::regex re(R"(listening on 127\.0\.0\.1:(\d+) http 127\.0\.0\.1:(\d+))");
    const std::string& line = tracker_->listening_line();
    if (!started.ok() || !std::regex_search(line, m, re)) {
      std::fprintf(stderr, "tracker did not start: %s '%s'\n%s\n", started.ToString().c_str(),
                   line.c_str(), ReadFile(Path("tracker.log")).c_str());
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
    auto p = std::make_unique<ServerProcess>();
    std::string log = Path("server" + std::to_string(servers_.size()) + ".log");
    if (!p->Start(argv, std::chrono::seconds(10), log).ok()) return -1;
    server_ports_.push_back(p->port());
    servers_.push_back(std::move(p));
    return static_cast<int>(servers_.size()) - 1;
  }
  ServerProcess& server(int i) { return *servers_[i]; }
  uint16_t server_port(int i) const { return server_ports_[i]; }
  std::string server_log(int i) const {
    return ReadFile(Path("server" + std::to_string(i) + ".log"));
  }
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
  ListeningSocket listener_;
  std::unique_ptr<ServerProcess> tracker_;
  uint16_t tracker_port_ = 0, http_port_ = 0;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<uint16_t> server_ports_;
};

}  // namespace crosstune::testing
