// crosstune-bench-tuners: how many trials each tuner needs to reach a point within 95% of the
// best, replayed on recorded spaces (no device, no noise): the shared Kernel Tuner cache file of
// pnpoly on an RTX 3090, and a full-space matmul record log of ours (--matmul-space). Random
// search is the baseline, measured in the same run on the same table. Prints one JSON object:
//   {"kernel_tuner": {"tuners": {"random": {"median", "p90", "mean", "reached", ...}, ...},
//                     "xgb_over_random_median", "target_xgb_median", "meets_target", ...},
//    "matmul": {...}}
// A space that is absent is skipped with its reason in the JSON.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/guarded_main.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "record_space.h"

namespace crosstune {
namespace {

struct Flags {
  std::string kt_space = CT_DEFAULT_KT_SPACE;
  std::string matmul_space;
  std::string task;
  std::vector<std::string> tuners{"random", "ga", "xgb"};
  int seeds = 50;
  int random_seeds = 200;
  int batch = 8;
  double target_fraction = 0.95;
};

nlohmann::json Skipped(const std::string& path, const std::string& why) {
  return {{"space", path}, {"skipped", why}};
}

// Every tuner on one table; `check` adds the issue's target for the space.
nlohmann::json ReplaySpace(const std::string& path, const std::string& task, const Flags& f) {
  if (path.empty()) {
    return Skipped(path,
                   "no --matmul-space given (a full-space log: crosstune tune matmul ... "
                   "--tuner grid over the whole space)");
  }
  if (!std::filesystem::exists(path)) return Skipped(path, "absent: " + path);
  auto table = tuner::ReplayTable::Load(path, task);
  if (!table.ok()) return Skipped(path, table.status().message());
  nlohmann::json out = {
      {"space", path},
      {"space_size", (*table)->space().size()},
      {"valid_count", (*table)->valid_count()},
      {"ok_count", (*table)->ok_count()},
      {"best", (*table)->best().value_or(0)},
      {"within_target", (*table)->CountWithin(f.target_fraction)},
      {"tuners", nlohmann::json::object()},
  };
  for (const std::string& name : f.tuners) {
    tuner::ReplayOptions o;
    o.tuner = name;
    o.batch = f.batch;
    o.target_fraction = f.target_fraction;
    // Random is cheap: more seeds make the baseline's median steady.
    int seeds = name == "random" ? std::max(f.seeds, f.random_seeds) : f.seeds;
    auto s = tuner::SummariseReplay(**table, o, seeds);
    if (!s.ok()) {
      out["tuners"][name] = {{"error", s.status().message()}};
      continue;
    }
    out["tuners"][name] = tuner::ReplaySummaryJson(*s);
  }
  auto median = [&](const std::string& name) -> std::optional<double> {
    const auto& t = out["tuners"];
    if (!t.contains(name) || !t[name].contains("median") || t[name]["median"].is_null()) {
      return std::nullopt;
    }
    return t[name]["median"].get<double>();
  };
  for (const std::string& name : f.tuners) {
    if (name == "random") continue;
    auto m = median(name), r = median("random");
    out[name + "_over_random_median"] =
        (m && r && *r > 0) ? nlohmann::json(*m / *r) : nlohmann::json(nullptr);
  }
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{"crosstune-bench-tuners: trials to 95% of the best, per tuner, on recorded spaces"};
  Flags f;
  app.add_option("--kt-space", f.kt_space, "a Kernel Tuner cache file")->capture_default_str();
  app.add_option("--matmul-space", f.matmul_space, "a full-space matmul record log of ours");
  app.add_option("--task", f.task, "the task of the matmul log (default: its first)");
  app.add_option("--tuner", f.tuners, "tuners, comma-separated")->delimiter(',');
  app.add_option("--seeds", f.seeds, "seeds per tuner")->capture_default_str();
  app.add_option("--random-seeds", f.random_seeds, "seeds for random (at least --seeds)")
      ->capture_default_str();
  app.add_option("--batch", f.batch, "points per batch, every tuner")->capture_default_str();
  app.add_option("--target-fraction", f.target_fraction, "best / cost that counts as found")
      ->capture_default_str();
  bool record = false;
  // The recorded space: 512^3, where cache blocking matters, with four knobs expected to matter
  // least there held at the template's defaults (8,316 configs; ~30 min on 2 cores). At 64^3
  // every tile fits in L1 and 2.8% of the space was within 5% of the best; here it is 0.75%.
  std::string record_shape = "512,512,512";
  std::string server_bin = CT_DEFAULT_SERVER;
  app.add_flag("--record", record,
               "record --matmul-space first when it is absent (every valid config of a matmul "
               "task, measured on a crosstune-server started here)");
  app.add_option("--record-shape", record_shape, "the recorded matmul's M,N,K")
      ->capture_default_str();
  std::vector<std::string> record_pins = {R"(order=["ir","jr"])", "unroll_k=4", "prefetch=0",
                                          "pack_a=1"};
  app.add_option("--record-pin", record_pins,
                 "hold a knob of the recorded task at one value, KNOB=VALUE (repeatable; "
                 "'none': no pins)")
      ->capture_default_str();
  app.add_option("--server-bin", server_bin, "crosstune-server for --record")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (record && !f.matmul_space.empty() && !std::filesystem::exists(f.matmul_space)) {
    auto shape = tuner::ParseShape(record_shape);
    if (record_pins == std::vector<std::string>{"none"}) record_pins.clear();
    auto pins = tuner::ParsePins(record_pins);
    Status s = !shape.ok()  ? shape.status()
               : !pins.ok() ? pins.status()
                            : bench::RecordMatmulSpace(f.matmul_space, *shape, *pins, server_bin);
    if (!s.ok()) {
      std::fprintf(stderr, "crosstune-bench-tuners: recording %s: %s\n", f.matmul_space.c_str(),
                   s.ToString().c_str());
      return 1;
    }
  }

  nlohmann::json out = {{"batch", f.batch},
                        {"seeds", f.seeds},
                        {"random_seeds", std::max(f.seeds, f.random_seeds)},
                        {"target_fraction", f.target_fraction}};
  nlohmann::json kt = ReplaySpace(f.kt_space, "", f);
  if (!kt.contains("skipped")) {
    // The issue's figures for this file: random needs a median of 80 trials (p90 260); Kernel
    // Tuner 1.5's best strategy (firefly) 37, counted the same way.
    kt["reference"] = {
        {"random_median", 80}, {"random_p90", 260}, {"kernel_tuner_firefly_median", 37}};
    kt["target_xgb_median"] = 37;
    const auto& x = kt["tuners"].value("xgb", nlohmann::json::object());
    kt["meets_target"] =
        x.contains("median") && x["median"].is_number() && x["median"].get<double>() <= 37;
  }
  out["kernel_tuner"] = kt;
  nlohmann::json mm = ReplaySpace(f.matmul_space, f.task, f);
  if (!mm.contains("skipped")) {
    mm["target_xgb_over_random_median"] = 0.30;
    mm["meets_target"] = mm.contains("xgb_over_random_median") &&
                         mm["xgb_over_random_median"].is_number() &&
                         mm["xgb_over_random_median"].get<double>() <= 0.30;
  }
  out["matmul"] = mm;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace crosstune

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-tuners",
                                [&] { return crosstune::Main(argc, argv); });
}
