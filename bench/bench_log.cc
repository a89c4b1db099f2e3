// crosstune-bench-log: how `crosstune log summary` grows with the number of tasks in a log,
// against `crosstune log best` on the same log in the same rounds (one pass over the records:
// the baseline). Writes a log of N tasks (one record each, distinct shapes) for each size of
// --tasks, runs both commands --runs times alternating, and prints one JSON object:
//   {"cli", "runs", "sizes": [{"tasks", "log_bytes", "summary_ms", "best_ms",
//    "summary_over_best"}], "summary_over_best_growth"}
// where the growth is summary_over_best at the largest size over that at the smallest: about 1
// when summary is linear in the tasks, about the size ratio when it is quadratic (summary once
// looked up each task's best by walking every best record: 20,000 tasks took 49 s against 0.7 s
// for log best). --cli times another crosstune binary (an older build) the same way.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/guarded_main.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/records.h"

namespace crosstune::bench {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "crosstune-bench-log: error: %s\n", what.c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A log of `tasks` matmul tasks of distinct shapes, one successful record each.
void WriteLog(const std::string& path, int tasks) {
  std::ofstream out(path, std::ios::trunc);
  for (int i = 0; i < tasks; ++i) {
    tuner::Record r;
    r.task = tuner::TaskId{"matmul", {64 + i, 64, 64}, "float32"};
    r.target = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64";
    r.device = tuner::DeviceId{"local", "x86_64", "cpu", ""};
    r.tuner = "random";
    r.config_index = static_cast<uint64_t>(i);
    r.config_values = {{"mr", 4}, {"nv", 2}};
    r.flops = 2.0 * (64 + i) * 64 * 64;
    r.costs = {1e-3, 1e-3};
    r.mean = 1e-3;
    r.timestamp = "2026-01-01T00:00:00.000Z";
    out << r.ToJson().dump() << '\n';
  }
  if (!out) Die(path + ": cannot write");
}

// One run of `crosstune <command> LOG`, its output discarded; ms from spawn to exit.
double TimeCommand(const std::string& cli, const std::string& command, const std::string& log) {
  auto t0 = Clock::now();
  auto r = testing::RunCommand(cli + " " + command + " " + log + " > /dev/null");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (r.exit_code != 0) Die(command + " exited with " + std::to_string(r.exit_code) + ": " + r.err);
  return ms;
}

}  // namespace
}  // namespace crosstune::bench

static int BenchMain(int argc, char** argv) {
  using namespace crosstune;
  using namespace crosstune::bench;
  CLI::App app{"crosstune-bench-log: log summary against log best as a log's tasks grow"};
  std::string cli = CT_DEFAULT_CLI;
  std::vector<int> sizes = {2000, 20000};
  int runs = 3;
  app.add_option("--cli", cli, "the crosstune binary to time")->capture_default_str();
  app.add_option("--tasks", sizes, "log sizes in tasks, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 10'000'000));
  app.add_option("--runs", runs, "runs of each command at each size")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  std::sort(sizes.begin(), sizes.end());

  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("crosstune-bench-log-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json out = {{"cli", cli}, {"runs", runs}, {"sizes", nlohmann::json::array()}};
  std::vector<double> ratios;
  for (int n : sizes) {
    const std::string log = (dir / ("tasks-" + std::to_string(n) + ".jsonl")).string();
    WriteLog(log, n);
    std::vector<double> summary, best;
    for (int i = 0; i < runs; ++i) {  // alternating, so a noisy machine slows both alike
      summary.push_back(TimeCommand(cli, "log summary --json", log));
      best.push_back(TimeCommand(cli, "log best --json", log));
    }
    const double s = Median(summary), b = Median(best);
    ratios.push_back(s / b);
    out["sizes"].push_back({{"tasks", n},
                            {"log_bytes", std::filesystem::file_size(log)},
                            {"summary_ms", s},
                            {"best_ms", b},
                            {"summary_over_best", s / b}});
  }
  out["summary_over_best_growth"] = ratios.back() / ratios.front();
  std::filesystem::remove_all(dir);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-log", [&] { return BenchMain(argc, argv); });
}
