// `crosstune replay SPACE --tuner random,ga,xgb --seeds 50 [--json]`: compares tuners on a table
// of measured points (a full-space record log of ours or a Kernel Tuner cache file) instead of a
// device.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/tuner.h"

namespace crosstune::cli {

namespace {

std::string Cell(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", *v);
  return buf;
}

}  // namespace

void RegisterReplayCommand(CLI::App& app) {
  struct Opts {
    std::string space;
    std::vector<std::string> tuners{"random", "ga", "xgb"};
    int seeds = 50;
    int batch = 8;
    uint64_t max_trials = 0;
    double target_fraction = 0.95;
    std::string task;
    std::string objective = "mixed";
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("replay", CompilerCommandHelp("replay"));
  cmd->add_option("SPACE", o->space,
                  "a full-space record log (.jsonl) or a Kernel Tuner cache "
                  "file (.json, .json.gz)")
      ->required();
  cmd->add_option("--tuner", o->tuners, "tuners to compare, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seeds", o->seeds, "runs per tuner (seeds 1..N)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "points per batch, the same for every tuner")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-trials", o->max_trials, "trial budget per run (default: the whole table)");
  cmd->add_option("--target-fraction", o->target_fraction,
                  "a point within this fraction of the best counts as found (best/cost)")
      ->check(CLI::Range(1e-9, 1.0))
      ->capture_default_str();
  cmd->add_option("--task", o->task, "the task of a record log (its key, as `log summary` shows)");
  cmd->add_option("--objective", o->objective,
                  "xgb's cost model: mixed (ndcg and pairwise, half a batch each), ndcg, rank "
                  "(pairwise) or reg")
      ->check(CLI::IsMember({"mixed", "ndcg", "rank", "reg"}))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] {
    for (const std::string& t : o->tuners) {
      const auto& names = tuner::TunerNames();
      if (std::find(names.begin(), names.end(), t) == names.end()) {
        std::string valid;
        for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
        Fail("unknown tuner '" + t + "' (tuners: " + valid + ")");
      }
    }
    auto table = tuner::ReplayTable::Load(o->space, o->task);
    if (!table.ok()) Fail(table.status().message());
    for (const std::string& w : (*table)->warnings()) {
      std::fprintf(stderr, "crosstune: warning: %s\n", w.c_str());
    }
    if (!(*table)->best()) Fail(o->space + ": every point of the table failed; nothing to find");
    nlohmann::json out = {
        {"space", (*table)->source()},
        {"space_size", (*table)->space().size()},
        {"valid_count", (*table)->valid_count()},
        {"ok_count", (*table)->ok_count()},
        {"best", *(*table)->best()},
        {"within_target", (*table)->CountWithin(o->target_fraction)},
        {"target_fraction", o->target_fraction},
        {"batch", o->batch},
        {"seeds", o->seeds},
        {"tuners", nlohmann::json::object()},
    };
    std::vector<tuner::ReplaySummary> summaries;
    for (const std::string& t : o->tuners) {
      tuner::ReplayOptions ro;
      ro.tuner = t;
      ro.batch = o->batch;
      ro.max_trials = o->max_trials;
      ro.target_fraction = o->target_fraction;
      ro.tuner_options.objective = o->objective;
      auto s = tuner::SummariseReplay(**table, ro, o->seeds);
      if (!s.ok()) Fail(s.status().message());
      if (s->warnings) {
        std::fprintf(stderr, "crosstune: warning: %s: %zu warnings, the first: %s\n", t.c_str(),
                     s->warnings, s->first_warning.c_str());
      }
      out["tuners"][t] = tuner::ReplaySummaryJson(*s);
      summaries.push_back(std::move(s).value());
    }
    if (o->json) {
      PrintJson(out, 2);
      return;
    }
    std::printf(
        "space %s: %llu points, %llu in the table (%zu measured ok), best %g, %zu within "
        "%g of it\n",
        (*table)->source().c_str(), static_cast<unsigned long long>((*table)->space().size()),
        static_cast<unsigned long long>((*table)->valid_count()), (*table)->ok_count(),
        *(*table)->best(), (*table)->CountWithin(o->target_fraction), o->target_fraction);
    std::printf("trials to a point within %g of the best (batch %d, budget %llu):\n\n",
                o->target_fraction, o->batch,
                static_cast<unsigned long long>(summaries.front().max_trials));
    std::printf("%-8s %8s %8s %8s %8s %9s\n", "TUNER", "MEDIAN", "P90", "MEAN", "REACHED",
                "WALL_S");
    for (const auto& s : summaries) {
      std::printf("%-8s %8s %8s %8s %4d/%-3d %9.2f\n", s.tuner.c_str(), Cell(s.median).c_str(),
                  Cell(s.p90).c_str(), Cell(s.mean).c_str(), s.reached, s.seeds, s.wall_s);
    }
  });
}

}  // namespace crosstune::cli
