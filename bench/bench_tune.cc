// crosstune-bench-tune: one tuning job end to end on a crosstune-server on this machine, in three
// modes, in one run: pipelined (builds of the next batch hidden behind the device measuring this
// one, on any CPU), serial (build, then measure) and pinned (pipelined, the server on the kernel's
// CPUs and the builds on the others: what `crosstune tune` does without a device when CPUs are
// left). Prints one JSON object: wall time, trials per second, the fraction of wall time the
// device was busy measuring, the best GFLOP/s, per mode, the speed-ups over serial; and for the
// configs two modes both measured (the default and the tuner's first, seeded batch at least), the
// time of each config timed while builds ran beside it over its time timed alone: what overlapping
// costs the measurements on this machine, unpinned and pinned.
//
//   crosstune-bench-tune [--shape 1024,1024,1024] [--trials 64] [--workers 2] [--tuner xgb]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/session.h"
#include "crosstune/cpus.h"
#include "crosstune/guarded_main.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"

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
  bool skip_serial = false;
  app.add_option("--shape", shape_text, "matmul M,N,K")->capture_default_str();
  app.add_option("--trials", trials, "trials per mode")->capture_default_str();
  app.add_option("--workers", workers, "build workers")->capture_default_str();
  app.add_option("--batch", batch, "configs per batch")->capture_default_str();
  app.add_option("--tuner", tuner_name, "search strategy")->capture_default_str();
  app.add_option("--server-bin", server_bin, "crosstune-server binary")->capture_default_str();
  app.add_flag("--skip-serial", skip_serial, "measure the pipelined and pinned modes only");
  CLI11_PARSE(app, argc, argv);

  // The task and target, from a server started for that alone.
  client::LocalServer probe;
  if (Status s =
          probe.Start({server_bin, "--host", "127.0.0.1", "--port", "0"}, std::chrono::seconds(30));
      !s.ok()) {
    std::fprintf(stderr, "crosstune-bench-tune: %s\n", s.ToString().c_str());
    return 1;
  }
  client::ConnectOptions co;
  co.server = probe.address();
  auto session = client::Session::Connect(co);
  if (!session.ok()) return 1;
  auto info = (*session)->Info();
  (*session)->Close().ok();
  probe.Stop();
  if (!info.ok()) return 1;
  auto target = builder::TargetFromDevice(*info);
  auto shape = tuner::ParseShape(shape_text);
  if (!shape.ok()) {
    std::fprintf(stderr, "crosstune-bench-tune: %s\n", shape.status().ToString().c_str());
    return 1;
  }
  auto task = tuner::MakeTask("matmul", *shape, *target);
  if (!target.ok() || !task.ok()) {
    std::fprintf(stderr, "crosstune-bench-tune: %s\n",
                 (target.ok() ? task.status() : target.status()).ToString().c_str());
    return 1;
  }
  const tuner::LocalCpuSplit split = tuner::SplitLocalCpus(1);

  // Each mode's records, in a log of its own, to compare the configs both measured. Each mode has
  // its own server and build workers; the pinned one runs the tuner (its cost model included) on
  // a thread pinned to the build CPUs, as `crosstune tune` pins itself.
  char dir_template[] = "/tmp/crosstune-bench-tune-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return 1;
  const std::filesystem::path dir = dir_template;
  auto run = [&](const std::string& mode, bool overlap, bool pinned) -> nlohmann::json {
    if (pinned && split.build.empty()) return {{"skipped", "no CPU left beside the kernel's"}};
    nlohmann::json result;
    std::thread([&] {
      builder::BuilderOptions bo{.workers = workers};
      std::vector<std::string> argv = {server_bin, "--host", "127.0.0.1", "--port", "0"};
      if (pinned) {
        bo = {.workers = static_cast<int>(split.build.size()), .cpus = split.build};
        argv.insert(argv.end(), {"--cpus", FormatCpuList(split.kernel)});
      }
      auto builder = builder::Builder::Create(bo);
      client::LocalServer server;
      Status started =
          builder.ok() ? server.Start(argv, std::chrono::seconds(30)) : builder.status();
      // The server first (it pins itself), then this thread and those it starts.
      if (started.ok() && pinned) started = PinToCpus(split.build);
      if (!started.ok()) {
        result = {{"error", started.ToString()}};
        return;
      }
      tuner::DeviceSpec device;
      device.name = "local";
      device.server = server.address();
      device.request_timeout = std::chrono::seconds(120);
      tuner::TuneOptions o;
      o.log_path = (dir / (mode + ".jsonl")).string();
      o.tuner = tuner_name;
      o.trials = trials;
      o.batch = batch;
      o.overlap = overlap;
      o.measure.timing.repeat = 3;
      o.measure.timing.min_repeat_ms = 50;
      auto r = tuner::Tune(**task, {device}, **builder, o);
      if (!r.ok()) {
        result = {{"error", r.status().ToString()}};
        return;
      }
      double wall = r->wall_s;
      result = {{"wall_s", wall},
                {"trials", r->measured},
                {"trials_per_s", wall > 0 ? r->measured / wall : 0},
                {"device_busy_fraction", wall > 0 ? r->device_busy_s / wall : 0},
                {"build_s_sum", r->build_s},
                {"build_workers", (*builder)->workers()},
                {"errors", r->errors.size()},
                {"best_gflops", r->has_best ? r->best.gflops() : 0},
                {"best_config", r->has_best ? r->best.config_values : nlohmann::json()}};
      if (pinned) {
        result["cpus"] = {{"kernel", FormatCpuList(split.kernel)},
                          {"build", FormatCpuList(split.build)}};
      }
    }).join();
    return result;
  };
  nlohmann::json out;
  out["task"] = (*task)->id().Key();
  out["target"] = (*task)->target().ToString();
  out["tuner"] = tuner_name;
  out["build_workers"] = workers;
  out["batch"] = batch;
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
