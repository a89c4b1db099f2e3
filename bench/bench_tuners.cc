// crosstune-bench-tuners: how many trials each tuner needs to reach a point within 95% of the
// best, replayed on recorded spaces (no device, no noise): the shared Kernel Tuner cache file of
// pnpoly on an RTX 3090, and a full-space matmul record log of ours (--matmul-space). Random
// search is the baseline, measured in the same run on the same table. Prints one JSON object:
//   {"kernel_tuner": {"tuners": {"random": {"median", "p90", "mean", "reached", ...}, ...},
//                     "xgb_over_random_median", "target_xgb_median", "meets_target", ...},
//    "matmul": {...}}
// A space that is absent is skipped with its reason in the JSON.
//
// "warm_start" replays xgb on pairs of tables of one kernel recorded on two devices (--pair
// TABLE=PRIOR; default: the pairs in tests/tuner/data): cold, warm-started from the other
// device's table (ReplayOptions::prior), and from the table's own costs shuffled (a prior that
// knows nothing), over the same seeds. A pair is "related" (target: warm median at most 0.3x
// cold) or "unrelated"; an unrelated or shuffled prior may not be worse than cold by more than
// the seed noise: two standard errors of the difference of the two medians (bootstrap over the
// seeds). Cold on other seeds (N+1..2N) shows the noise as it is.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
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
  // TABLE=PRIOR[:unrelated]
  std::vector<std::string> pairs;
};

constexpr double kWarmTarget = 0.3;

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

std::optional<double> MedianOf(const Expected<tuner::ReplaySummary>& s) {
  if (!s.ok()) return std::nullopt;
  return s->median;
}

// Each seed's trials to the target (a seed that missed it: the budget and one more).
std::vector<double> TrialsOf(const tuner::ReplaySummary& s) {
  std::vector<double> t;
  for (const auto& r : s.runs) {
    t.push_back(r.reached ? static_cast<double>(r.trials_to_target)
                          : static_cast<double>(s.max_trials + 1));
  }
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Two standard errors of median(b) - median(a), from 1,000 bootstrap resamples of each.
double MedianDifferenceNoise(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) return 0;
  std::mt19937_64 rng(1);
  auto resample = [&](const std::vector<double>& v) {
    std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
    std::vector<double> out(v.size());
    for (double& x : out) x = v[pick(rng)];
    return Median(std::move(out));
  };
  constexpr int kResamples = 1000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < kResamples; ++i) {
    const double d = resample(b) - resample(a);
    sum += d;
    sum2 += d * d;
  }
  const double mean = sum / kResamples;
  return 2 * std::sqrt(std::max(0.0, sum2 / kResamples - mean * mean));
}

// One pair: xgb cold (two seed sets), warm from the prior, warm from the shuffled table.
nlohmann::json WarmPair(const std::string& spec, const Flags& f) {
  std::string table_path = spec, prior_path, relation = "related";
  if (const size_t eq = spec.find('='); eq != std::string::npos) {
    table_path = spec.substr(0, eq);
    prior_path = spec.substr(eq + 1);
  }
  if (const size_t colon = prior_path.rfind(':'); colon != std::string::npos) {
    relation = prior_path.substr(colon + 1);
    prior_path.resize(colon);
  }
  auto stem = [](const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    return name.substr(0, name.find('.'));
  };
  nlohmann::json out = {{"name", stem(table_path) + " from " + stem(prior_path)},
                        {"space", table_path},
                        {"prior", prior_path},
                        {"relation", relation}};
  if (prior_path.empty() || (relation != "related" && relation != "unrelated")) {
    out["skipped"] = "a pair is TABLE=PRIOR[:related|:unrelated]";
    return out;
  }
  auto table = tuner::ReplayTable::Load(table_path);
  auto other = tuner::ReplayTable::Load(prior_path);
  if (!table.ok() || !other.ok()) {
    out["skipped"] = (!table.ok() ? table.status() : other.status()).message();
    return out;
  }
  auto prior = (*table)->PriorFrom(**other);
  if (!prior.ok()) {
    out["skipped"] = prior.status().message();
    return out;
  }
  tuner::ReplayOptions o;
  o.tuner = "xgb";
  o.batch = f.batch;
  o.target_fraction = f.target_fraction;
  auto cold = tuner::SummariseReplay(**table, o, f.seeds);
  auto cold_again = tuner::SummariseReplay(**table, o, f.seeds, f.seeds + 1);
  o.prior = *prior;
  auto warm = tuner::SummariseReplay(**table, o, f.seeds);
  auto self = (*table)->PriorFrom(**table);
  o.prior = self.ok() ? *self : std::vector<tuner::TrialResult>{};
  o.shuffle_prior = true;
  auto shuffled = tuner::SummariseReplay(**table, o, f.seeds);
  const auto c = MedianOf(cold), c2 = MedianOf(cold_again), w = MedianOf(warm),
             sh = MedianOf(shuffled);
  auto json_of = [](const Expected<tuner::ReplaySummary>& s) {
    return s.ok() ? tuner::ReplaySummaryJson(*s) : nlohmann::json{{"error", s.status().message()}};
  };
  out["cold"] = json_of(cold);
  out["cold_other_seeds"] = json_of(cold_again);
  out["warm"] = json_of(warm);
  out["warm_shuffled"] = json_of(shuffled);
  auto ratio = [](std::optional<double> a, std::optional<double> b) -> nlohmann::json {
    return a && b && *b > 0 ? nlohmann::json(*a / *b) : nlohmann::json(nullptr);
  };
  out["warm_over_cold_median"] = ratio(w, c);
  out["shuffled_over_cold_median"] = ratio(sh, c);
  out["cold_median_other_seeds_over_cold"] = ratio(c2, c);
  // A missing median is +inf.
  const double inf = std::numeric_limits<double>::infinity();
  const double cold_m = c.value_or(inf);
  double warm_noise = 0, shuffled_noise = 0;
  if (cold.ok() && warm.ok() && shuffled.ok()) {
    warm_noise = MedianDifferenceNoise(TrialsOf(*cold), TrialsOf(*warm));
    shuffled_noise = MedianDifferenceNoise(TrialsOf(*cold), TrialsOf(*shuffled));
  }
  out["warm_minus_cold_median_noise"] = warm_noise;
  out["shuffled_minus_cold_median_noise"] = shuffled_noise;
  const bool shuffled_ok = sh.value_or(inf) <= cold_m + shuffled_noise;
  const bool warm_ok = relation == "related" ? w.value_or(inf) <= kWarmTarget * cold_m
                                             : w.value_or(inf) <= cold_m + warm_noise;
  out["meets_target"] = warm_ok && shuffled_ok;
  return out;
}

// Every pair, and the worst ratios over them (what the smoke test bounds).
nlohmann::json WarmStart(const Flags& f) {
  nlohmann::json out = {{"target_related_warm_over_cold_median", kWarmTarget},
                        {"seeds", f.seeds},
                        {"pairs", nlohmann::json::array()}};
  double related_worst = 0, wrong_worst = 0;
  bool all = true;
  int counted = 0;
  for (const std::string& spec : f.pairs) {
    nlohmann::json p = WarmPair(spec, f);
    if (!p.contains("skipped")) {
      ++counted;
      all = all && p["meets_target"].get<bool>();
      auto worst = [](double* w, const nlohmann::json& v) {
        *w = v.is_number() ? std::max(*w, v.get<double>()) : INFINITY;
      };
      worst(p["relation"] == "related" ? &related_worst : &wrong_worst, p["warm_over_cold_median"]);
      worst(&wrong_worst, p["shuffled_over_cold_median"]);
    }
    out["pairs"].push_back(std::move(p));
  }
  if (counted == 0) {
    out["skipped"] = "absent: no pair of tables could be read";
    return out;
  }
  out["related_warm_over_cold_worst"] = related_worst;
  out["wrong_prior_over_cold_worst"] = wrong_worst;
  out["meets_target"] = all;
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
  const std::string data = CT_DEFAULT_PAIRS_DIR;
  // Related: the same CPU at one and two threads, and the emulated aarch64 and riscv64 boards
  // (qemu on one host: what is fast follows the instructions emulated). Unrelated: that CPU and
  // an emulated board (tests/tuner/data/README.md).
  auto pair = [&](const char* table, const char* prior, const char* relation) {
    return data + "/matmul-256-" + table + ".json=" + data + "/matmul-256-" + prior +
           ".json:" + relation;
  };
  f.pairs = {pair("xeon-2t", "xeon-1t", "related"), pair("xeon-1t", "xeon-2t", "related"),
             pair("xeon-1t", "qemu-aarch64", "unrelated"),
             pair("qemu-aarch64", "xeon-1t", "unrelated"),
             pair("qemu-aarch64", "qemu-riscv64", "related")};
  app.add_option("--pair", f.pairs,
                 "warm start: TABLE=PRIOR[:related|:unrelated], the same kernel's tables on two "
                 "devices (repeatable; 'none': no pairs)")
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
  if (f.pairs == std::vector<std::string>{"none"}) f.pairs.clear();
  out["warm_start"] = WarmStart(f);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace crosstune

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-tuners",
                                [&] { return crosstune::Main(argc, argv); });
}
