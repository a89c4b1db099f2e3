// crosstune-bench-workspace: what a workspace of many files costs a server, as one JSON object.
//
// Starts a real crosstune-server (child process, port 0), then in one session uploads --files
// small files one after the other, timing each upload:
//   upload_ms_first          median time of an upload among the first --window files
//   upload_ms_last           the same among the last --window files
//   upload_last_over_first   their ratio: about 1 when an upload does not depend on how many
//                            files the workspace holds (the server once summed the whole
//                            workspace for the quota before every upload)
// Then it closes that session and for --probe-s seconds opens new sessions one after another,
// each answering one ping, while the server removes the closed session's workspace:
//   new_session_max_ms_after_many   the slowest of those (connect to first reply)
//   new_session_max_ms_after_empty  the same after a session that stored nothing: the baseline
//   new_session_many_over_empty     their ratio (large when the removal holds up new sessions,
//                                   as it did while it ran on the thread that accepts them)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/client/session.h"
#include "crosstune/guarded_main.h"
#include "crosstune/testing/server_process.h"

namespace crosstune::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "crosstune-bench-workspace: error: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<client::Session> Open(const std::string& address) {
  client::ConnectOptions o;
  o.server = address;
  o.peer_name = "bench-workspace";
  o.request_timeout = std::chrono::seconds(120);
  auto s = client::Session::Connect(o);
  if (!s.ok()) Die(s.status().ToString());
  return std::move(s).value();
}

// Closes `s`, then opens sessions that each answer a ping for `probe_s` seconds; returns the
// slowest one's ms.
double SlowestNextSessionMs(std::unique_ptr<client::Session> s, const std::string& address,
                            double probe_s) {
  if (Status c = s->Close(); !c.ok()) Die(c.ToString());
  double slowest = 0;
  auto until = Clock::now() + std::chrono::duration<double>(probe_s);
  while (Clock::now() < until) {
    auto t0 = Clock::now();
    auto next = Open(address);
    if (Status p = next->Ping(); !p.ok()) Die(p.ToString());
    slowest = std::max(slowest, Ms(t0));
    (void)next->Close();
  }
  return slowest;
}

}  // namespace
}  // namespace crosstune::bench

static int BenchMain(int argc, char** argv) {
  using namespace crosstune;
  using namespace crosstune::bench;
  CLI::App app{"crosstune-bench-workspace: upload and session costs of a workspace of many files"};
  std::string server_bin = CT_DEFAULT_SERVER;
  int files = 9000;
  int window = 500;
  double probe_s = 2;
  std::string parent = std::filesystem::temp_directory_path();
  app.add_option("--server-bin", server_bin, "crosstune-server to start")->capture_default_str();
  app.add_option("--files", files, "files uploaded in one session")
      ->capture_default_str()
      ->check(CLI::Range(2, 1'000'000));
  app.add_option("--window", window, "uploads at each end whose median is taken")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--probe-s", probe_s, "seconds of new sessions after each close")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--under", parent,
                 "folder the server's work directory is made in (a tmpfs such as /dev/shm leaves "
                 "the disk's own timing out of the figures)")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  window = std::min(window, files / 2);

  std::string work =
      std::filesystem::path(parent) / ("crosstune-bench-workspace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(work);
  ServerProcess server;
  if (Status s =
          server.Start({server_bin, "--host", "127.0.0.1", "--port", "0", "--work-dir", work},
                       std::chrono::seconds(20));
      !s.ok()) {
    Die("start crosstune-server: " + s.ToString());
  }
  const std::string address = "127.0.0.1:" + std::to_string(server.port());

  double empty_ms = SlowestNextSessionMs(Open(address), address, probe_s);
  auto session = Open(address);
  std::vector<double> upload_ms;
  const std::string body(64, 'x');
  for (int i = 0; i < files; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "f%06d.bin", i);
    auto t0 = Clock::now();
    auto up = session->UploadBytes(body, name);
    upload_ms.push_back(Ms(t0));
    if (!up.ok()) Die(std::string(name) + ": " + up.status().ToString());
  }
  double many_ms = SlowestNextSessionMs(std::move(session), address, probe_s);
  server.Stop();
  std::error_code ec;
  std::filesystem::remove_all(work, ec);

  double first = Median({upload_ms.begin(), upload_ms.begin() + window});
  double last = Median({upload_ms.end() - window, upload_ms.end()});
  nlohmann::json out = {
      {"files", files},
      {"window", window},
      {"upload_ms_first", first},
      {"upload_ms_last", last},
      {"upload_last_over_first", last / first},
      {"new_session_max_ms_after_empty", empty_ms},
      {"new_session_max_ms_after_many", many_ms},
      {"new_session_many_over_empty", many_ms / empty_ms},
  };
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-workspace", [&] { return BenchMain(argc, argv); });
}
