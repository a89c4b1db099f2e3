// crosstune-bench-cli: how long a `crosstune` command takes from exec to exit when it needs no
// compiler (`--help`, `query --help`, `query` against a port that refuses), against a
// command that loads the compiler module (`build --help`), which is what every command paid
// before the split (compiler_module.h). The commands alternate run by run, so a noisy machine
// slows every side alike. Optionally an older, single-binary crosstune (--old-cli) is timed on
// the same commands in the same rounds. Prints one JSON object:
//   {"runs", "cli", "commands": {CMD: {"median_ms", "p10_ms", "p90_ms", "mean_ms"}}, where CMD is
//    "--help", "query --help", "query (refused)" or "build --help",
//    "baseline": "build --help", "speedup": {CMD: baseline median / CMD median}, "old_cli": ...}
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "crosstune/guarded_main.h"
#include "crosstune/testing/support.h"

extern char** environ;

namespace crosstune {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Seconds from spawn to exit of `argv`, its output to /dev/null; negative if it could not run.
double TimeRun(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  auto start = SteadyClock::now();
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

nlohmann::json Summary(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  auto at = [&](double q) { return s[static_cast<size_t>(std::lround(q * (s.size() - 1)))] * 1e3; };
  double sum = 0;
  for (double x : s) sum += x;
  return {{"median_ms", at(0.5)},
          {"p10_ms", at(0.1)},
          {"p90_ms", at(0.9)},
          {"mean_ms", sum / s.size() * 1e3}};
}

int Main(int argc, char** argv) {
  int runs = 200;
  std::string cli = CT_DEFAULT_CLI;
  std::string old_cli;
  CLI::App app{
      "crosstune-bench-cli: start-up time of crosstune commands, with and without the "
      "compiler module"};
  app.add_option("--runs", runs, "runs of each command")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--cli", cli, "the crosstune binary")->capture_default_str();
  app.add_option("--old-cli", old_cli, "also time this crosstune (e.g. one from before the split)");
  CLI11_PARSE(app, argc, argv);

  testing::ClosedPort closed;  // `query` there fails at once: connection refused
  const std::string baseline = "build --help";
  struct Command {
    std::string label;  // the key in the JSON
    std::string args;
  };
  const std::vector<Command> commands = {{"--help", "--help"},
                                         {"query --help", "query --help"},
                                         {"query (refused)", "query --tracker " + closed.address()},
                                         {baseline, baseline}};
  struct Side {
    std::string binary;
    std::map<std::string, std::vector<double>> seconds;
  };
  std::vector<Side> sides = {{cli, {}}};
  if (!old_cli.empty()) sides.push_back({old_cli, {}});
  for (auto& side : sides) {  // one untimed round: page cache, ld.so cache
    for (const auto& c : commands) {
      std::vector<std::string> args = {side.binary};
      for (auto& w : Words(c.args)) args.push_back(w);
      if (TimeRun(args) < 0) {
        std::fprintf(stderr, "crosstune-bench-cli: error: cannot run %s\n", side.binary.c_str());
        return 1;
      }
    }
  }
  for (int r = 0; r < runs; ++r) {
    for (auto& side : sides) {
      for (const auto& c : commands) {
        std::vector<std::string> args = {side.binary};
        for (auto& w : Words(c.args)) args.push_back(w);
        side.seconds[c.label].push_back(TimeRun(args));
      }
    }
  }
  auto report = [&](const Side& side) {
    nlohmann::json j = {{"cli", side.binary}, {"commands", nlohmann::json::object()}};
    for (const auto& c : commands) j["commands"][c.label] = Summary(side.seconds.at(c.label));
    return j;
  };
  nlohmann::json out = report(sides[0]);
  out["runs"] = runs;
  out["baseline"] = baseline;
  out["speedup"] = nlohmann::json::object();
  const double base = out["commands"][baseline]["median_ms"];
  for (const auto& c : commands) {
    if (c.label == baseline) continue;
    out["speedup"][c.label] = base / out["commands"][c.label]["median_ms"].get<double>();
  }
  if (sides.size() > 1) out["old_cli"] = report(sides[1]);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace crosstune

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-cli", [&] { return crosstune::Main(argc, argv); });
}
