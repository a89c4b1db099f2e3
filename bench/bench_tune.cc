// crosstune-bench-tune: one tuning job end to end on a crosstune-server on this machine, in three
// modes, in one run: pipelined (builds of the next batch hidden behind the device measuring this
// one, on any CPU), serial (build, then measure) and pinned (pipelined, the server on the kernel's
// CPUs and the builds on the others: what `crosstune tune` does without a device when CPUs are
// left). Each mode's run is set up by tuner::TuneSetup, as `crosstune tune` and Python's tune()
// set up theirs. Prints one JSON object: wall time, trials per second, the fraction of wall time
// the device was busy measuring, the best GFLOP/s, the overlap decision and the CPU split, per
// mode, the speed-ups over serial; and for the
// configs two modes both measured (the default and the tuner's first, seeded batch at least), the
// time of each config timed while builds ran beside it over its time timed alone: what overlapping
// costs the measurements on this machine, unpinned and pinned.
//
// With --losers, instead: two pinned runs of the same seed and trials, one stopping clear losers
// after a round (TuneOptions::stop_losers, the default) and one timing every round: device-seconds
// per trial, trials stopped early and the best GFLOP/s of each, and their ratios.
//
//   crosstune-bench-tune [--shape 1024,1024,1024] [--trials 64] [--workers 2] [--tuner xgb]
//   crosstune-bench-tune --losers [--shape 512,512,512] [--trials 48]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/guarded_main.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tune_setup.h"

using namespace crosstune;

// For the configs measured ok in both logs: count, and the median, min and max over them of the
// overlapped run's mean time over the serial run's.
static nlohmann::json SameConfigTimes(const std::string& pipelined, const std::string& serial) {
  auto a = tuner::ReadLog(pipelined);
  auto b = tuner::ReadLog(serial);
  if (!a.ok() || !b.ok()) return {{"error", (a.ok() ? b.status() : a.status()).ToString()}};
  std::map<uint64_t, double> alone;
  for (const auto& r : b->records) {
    if (r.ok() && r.mean > 0) alone[r.config_index] = r.mean;
  }
  std::vector<double> ratios;
  for (const auto& r : a->records) {
    auto it = alone.find(r.config_index);
    if (r.ok() && r.mean > 0 && it != alone.end()) ratios.push_back(r.mean / it->second);
  }
  if (ratios.empty()) return {{"configs", 0}};
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const double median = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  return {{"configs", n},
          {"median_overlapped_over_serial_time", median},
          {"min", ratios.front()},
          {"max", ratios.back()}};
}

static int BenchMain(int argc, char** argv) {
  CLI::App app{"crosstune-bench-tune: a tuning job, pipelined against serial, same run"};
  std::string shape_text = "1024,1024,1024", tuner_name = "xgb", server_bin = CT_DEFAULT_SERVER;
  int trials = 64, workers = 2, batch = 8;
  bool skip_serial = false, losers = false;
  app.add_option("--shape", shape_text, "matmul M,N,K")->capture_default_str();
  app.add_option("--trials", trials, "trials per mode")->capture_default_str();
  app.add_option("--workers", workers, "build workers")->capture_default_str();
  app.add_option("--batch", batch, "configs per batch")->capture_default_str();
  app.add_option("--tuner", tuner_name, "search strategy")->capture_default_str();
  app.add_option("--server-bin", server_bin, "crosstune-server binary")->capture_default_str();
  app.add_flag("--skip-serial", skip_serial, "measure the pipelined and pinned modes only");
  app.add_flag("--losers", losers,
               "compare stopping clear losers after a round with timing every round (two pinned "
               "runs, same seed and trials) instead of the modes");
  CLI11_PARSE(app, argc, argv);

  auto shape = tuner::ParseShape(shape_text);
  if (!shape.ok()) {
    std::fprintf(stderr, "crosstune-bench-tune: %s\n", shape.status().ToString().c_str());
    return 1;
  }

  // Each mode's records, in a log of its own, to compare the configs both measured. Each mode has
  // its own server and build workers, set up as `crosstune tune` sets up a run (tune_setup.h):
  // pinned is exactly its run without a device; pipelined and serial are that run with the CPUs
  // shared (--overlap unpinned, --no-overlap).
  char dir_template[] = "/tmp/crosstune-bench-tune-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return 1;
  const std::filesystem::path dir = dir_template;
  std::string task_key, target_text;
  auto run = [&](const std::string& mode, bool overlap, bool pinned,
                 bool stop_losers = true) -> nlohmann::json {
    tuner::TuneSetupOptions o;
    o.devices.server_binary = server_bin;
    o.devices.timeout = std::chrono::seconds(120);
    o.workers = pinned ? 0 : workers;  // pinned: one per build CPU
    if (pinned) {
      o.overlap.reset();  // decided as `crosstune tune` decides
    } else {
      o.overlap = overlap;
      o.split_local_cpus = false;
    }
    o.tune.log_path = (dir / (mode + ".jsonl")).string();
    o.tune.tuner = tuner_name;
    o.tune.trials = trials;
    o.tune.batch = batch;
    o.tune.stop_losers = stop_losers;
    auto setup = tuner::TuneSetup::Open(o);
    if (!setup.ok()) return {{"error", setup.status().ToString()}};
    if (pinned && !(*setup)->pinned()) return {{"skipped", "no CPU left beside the kernel's"}};
    auto task = tuner::MakeTask("matmul", *shape, (*setup)->target());
    if (!task.ok()) return {{"error", task.status().ToString()}};
    task_key = (*task)->id().Key();
    target_text = (*task)->target().ToString();
    auto r = (*setup)->Tune(**task);
    if (!r.ok()) return {{"error", r.status().ToString()}};
    double wall = r->wall_s;
    nlohmann::json result = {
        {"wall_s", wall},
        {"trials", r->measured},
        {"trials_per_s", wall > 0 ? r->measured / wall : 0},
        {"device_busy_fraction", wall > 0 ? r->device_busy_s / wall : 0},
        {"device_s_per_trial", r->measured > 0 ? r->device_busy_s / r->measured : 0},
        {"stopped_early", r->stopped_early},
        {"build_s_sum", r->build_s},
        {"build_workers", pinned ? static_cast<int>((*setup)->cpus().build.size()) : workers},
        {"errors", r->errors.size()},
        {"best_gflops", r->has_best ? r->best.gflops() : 0},
        {"best_config", r->has_best ? r->best.config_values : nlohmann::json()}};
    (*setup)->AddToReport(&result);  // overlap, and the CPUs of the split
    if (pinned) {
      std::fprintf(stderr, "crosstune-bench-tune: %s\n", (*setup)->CpuSplitText().c_str());
    }
    return result;
  };
  nlohmann::json out;
  out["tuner"] = tuner_name;
  out["build_workers"] = workers;
  out["batch"] = batch;
  if (losers) {
    out["trials"] = trials;
    out["losers_stopped"] = run("losers_stopped", true, true, true);
    out["losers_timed"] = run("losers_timed", true, true, false);
    const nlohmann::json& a = out["losers_stopped"];
    const nlohmann::json& b = out["losers_timed"];
    const double a_dev = a.value("device_s_per_trial", 0.0),
                 b_dev = b.value("device_s_per_trial", 0.0);
    const double a_best = a.value("best_gflops", 0.0), b_best = b.value("best_gflops", 0.0);
    // Device time per trial timing every round over stopping losers (the target is 1.5 or more),
    // and the best found stopping them over the best timing every round (1 within noise).
    out["timed_over_stopped_device_s_per_trial"] = a_dev > 0 ? b_dev / a_dev : 0;
    out["stopped_over_timed_best_gflops"] = b_best > 0 ? a_best / b_best : 0;
    out["task"] = task_key;
    out["target"] = target_text;
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    std::printf("%s\n", out.dump(2).c_str());
    const bool failed = a.contains("error") || b.contains("error") || a.contains("skipped");
    return failed ? 1 : 0;
  }
  out["pipelined"] = run("pipelined", true, false);
  out["pinned"] = run("pinned", true, true);
  if (!skip_serial) {
    out["serial"] = run("serial", false, false);
    const double serial = out["serial"].value("wall_s", 0.0);
    for (const char* mode : {"pipelined", "pinned"}) {
      const double wall = out[mode].value("wall_s", 0.0);
      out[std::string("serial_over_") + mode + "_wall"] = wall > 0 ? serial / wall : 0;
      // How much more of the wall time the device spent measuring than it did serially: what
      // pipelining exists to give, and steadier than the wall times at a few trials (the
      // tuner's fixed costs fall on both sides of the wall ratio alike).
      const double busy = out[mode].value("device_busy_fraction", 0.0);
      const double serial_busy = out["serial"].value("device_busy_fraction", 0.0);
      out[std::string(mode) + "_over_serial_device_busy"] =
          serial_busy > 0 ? busy / serial_busy : 0;
    }
    out["same_configs"] =
        SameConfigTimes((dir / "pipelined.jsonl").string(), (dir / "serial.jsonl").string());
    if (!out["pinned"].contains("skipped")) {
      out["same_configs_pinned"] =
          SameConfigTimes((dir / "pinned.jsonl").string(), (dir / "serial.jsonl").string());
    }
  }
  out["task"] = task_key;
  out["target"] = target_text;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  // Not measured here: TVM 0.27 MetaSchedule needed 341 s for 64 trials of this task on this
  // machine (issue 7); the target is a fifth of that.
  out["target_wall_s_for_64_trials"] = 341.0 / 5;
  out["target_device_busy_fraction"] = 0.7;
  std::printf("%s\n", out.dump(2).c_str());
  for (const char* mode : {"pipelined", "pinned", "serial"}) {
    if (out.contains(mode) && out[mode].contains("error")) return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-tune", [&] { return BenchMain(argc, argv); });
}
