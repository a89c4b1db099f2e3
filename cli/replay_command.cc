// `crosstune replay SPACE --tuner random,ga,xgb --seeds 50 [--warm-from OTHER] [--json]`: compares
// tuners on a table of measured points (a full-space record log of ours or a Kernel Tuner cache
// file) instead of a device; with --warm-from, each also warm-started from the same kernel's
// table measured on another device.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "crosstune/tuner/replay.h"

namespace crosstune::cli {

namespace {

std::string Cell(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v.get<double>());
  return buf;
}

}  // namespace

void RegisterReplayCommand(CLI::App& app) {
  auto o = std::make_shared<tuner::ReplayComparison>();
  auto json = std::make_shared<bool>(false);
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
  cmd->add_option("--warm-from", o->warm_from,
                  "the same kernel's table measured on another device (a log or a Kernel Tuner "
                  "cache): each tuner runs cold and again warm-started from it");
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([o, json] {
    auto got = tuner::CompareTuners(*o);
    if (!got.ok()) Fail(got.status().message());
    const nlohmann::json& out = *got;
    for (const auto& w : out["warnings"]) {
      std::fprintf(stderr, "crosstune: warning: %s\n", w.get<std::string>().c_str());
    }
    // Rows: each tuner cold, then warm-started (+warm) when asked.
    std::vector<std::pair<std::string, const nlohmann::json*>> rows;
    for (const std::string& t : o->tuners) {
      rows.emplace_back(t, &out["tuners"][t]);
      if (out.contains("warm")) rows.emplace_back(t + "+warm", &out["warm"][t]);
    }
    for (const auto& [name, s] : rows) {
      if (s->value("warnings", 0) > 0) {
        std::fprintf(stderr, "crosstune: warning: %s: %d warnings, the first: %s\n", name.c_str(),
                     (*s)["warnings"].get<int>(), s->value("first_warning", std::string()).c_str());
      }
    }
    if (*json) {
      PrintJson(out, 2);
      return;
    }
    std::printf(
        "space %s: %llu points, %llu in the table (%llu measured ok), best %g, %llu within "
        "%g of it\n",
        out["space"].get<std::string>().c_str(), out["space_size"].get<unsigned long long>(),
        out["valid_count"].get<unsigned long long>(), out["ok_count"].get<unsigned long long>(),
        out["best"].get<double>(), out["within_target"].get<unsigned long long>(),
        o->target_fraction);
    if (out.contains("warm_from")) {
      const auto& w = out["warm_from"];
      std::printf("warm start (+warm): %llu points of %s (%llu not in this space)\n",
                  w["points"].get<unsigned long long>(), w["space"].get<std::string>().c_str(),
                  w["not_in_space"].get<unsigned long long>());
    }
    std::printf("trials to a point within %g of the best (batch %d, budget %llu):\n\n",
                o->target_fraction, o->batch,
                rows.front().second->at("max_trials").get<unsigned long long>());
    std::printf("%-12s %8s %8s %8s %8s %9s%s\n", "TUNER", "MEDIAN", "P90", "MEAN", "REACHED",
                "WALL_S", out.contains("warm") ? "  PRIOR_TRUSTED" : "");
    for (const auto& [name, s] : rows) {
      if (s->value("ignores_prior", false)) {
        std::printf("%-12s %s\n", name.c_str(), "(ignores the prior: as its cold run)");
        continue;
      }
      std::string trusted;
      if (s->contains("prior")) {
        trusted = "  " + std::to_string((*s)["prior"]["trusted_at_end"].get<int>()) + "/" +
                  std::to_string(o->seeds);
      }
      std::printf("%-12s %8s %8s %8s %4d/%-3d %9.2f%s\n", name.c_str(),
                  Cell((*s)["median"]).c_str(), Cell((*s)["p90"]).c_str(),
                  Cell((*s)["mean"]).c_str(), (*s)["reached"].get<int>(), o->seeds,
                  (*s)["wall_s"].get<double>(), trusted.c_str());
    }
  });
}

}  // namespace crosstune::cli
