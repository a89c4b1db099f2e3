// `crosstune tune`, `crosstune log summary|best|plot` and `crosstune export`: the tuner's
// command line. The work is in crosstune::tuner (tune_setup.h, tune.h, log_report.h, export.h);
// this file turns flags into its options and prints what it returns.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "connect.h"
#include "crosstune/builder/build_cache.h"
#include "crosstune/crypto.h"
#include "crosstune/model/layout_plan.h"
#include "crosstune/model/tasks.h"
#include "crosstune/timing.h"
#include "crosstune/tuner/export.h"
#include "crosstune/tuner/log_report.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tune_setup.h"
#include "model_load.h"

namespace crosstune::cli {
namespace {

using nlohmann::json;

std::atomic<bool> g_stop{false};
void OnInterrupt(int) {
  if (g_stop.exchange(true)) {
    ::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
    ::raise(SIGINT);
  }
}

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int t = static_cast<int>(std::lround(s));
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string ErrorsText(const std::map<tuner::TrialError, int>& errors) {
  std::string s;
  for (const auto& [kind, n] : errors) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", tuner::TrialErrorName(kind), n);
  }
  return s.empty() ? "none" : s;
}

// The tuner's planning in one line: its cost per proposal, its share of the wall time, and how
// much of it no device measured beside (what the devices waited for).
std::string PlanningLine(const tuner::PlanningTime& p, double wall_s) {
  return fmt::format(
      "planning: {:.2f} ms per proposal ({} proposed; refit {:.2f} s, propose {:.2f} s), {:.1f}% "
      "of wall time; devices waited {:.2f} s for it",
      p.ms_per_proposal(), p.proposed, p.refit_s, p.propose_s,
      wall_s > 0 ? 100 * p.seconds() / wall_s : 0.0, p.waited_s);
}

// --- tune ----------------------------------------------------------------------------------------

// The flags of `crosstune tune`: what to tune and how to show it here; the rest are the fields of
// tuner::TuneSetupOptions (tune_setup.h), whose defaults they show.
struct TuneFlags {
  std::string workload;
  std::string model;                // an ONNX file: its tasks are the workload
  std::string layouts = "blocked";  // the conv layouts of the network's tasks (compile's)
  int round = tuner::WorkloadTuneOptions{}.round;
  std::string template_name;
  // A template's sizes (one value), or with --model NAME=DIMS for a model's inputs.
  std::vector<std::string> shapes;
  tuner::TuneSetupOptions setup;
  std::string auth_token_file;
  // Seconds on the command line, milliseconds in the setup.
  double wait_s = Seconds(tuner::TuneDevices{}.wait);
  double timeout_s = Seconds(tuner::TuneDevices{}.timeout);
  double build_timeout_s = Seconds(tuner::MeasureOptions{}.build_timeout);
  CLI::Option* build_cache_max_flag = nullptr;
  bool no_check = false;
  bool no_default = false;
  bool no_stop_losers = false;
  bool overlap = false;
  CLI::Option* overlap_flag = nullptr;  // given: --overlap or --no-overlap; else by the devices
  TimingOptions timing = tuner::MeasureOptions{}.timing;
  std::vector<CLI::Option*> timing_flags;  // --number, --repeat, ...: given, they decide the timing
  std::vector<std::string> pins;
  bool json_out = false;
  bool quiet = false;
  bool list_options = false;

  static double Seconds(std::chrono::milliseconds ms) { return ms.count() / 1000.0; }
};

void RunWorkload(const TuneFlags& f, tuner::TuneSetup& setup);

// Where the builds went, for --build-key runs: "builds: local 40, 127.0.0.1:9290 24".
void PrintBuildFarmLine(const tuner::BuildFarm* farm) {
  if (farm == nullptr) return;
  std::string line = "builds:";
  for (const auto& s : farm->Report()) {
    line += fmt::format(" {} {}{}", s["name"].get<std::string>(), s["builds"].get<uint64_t>(),
                        s["lost"].get<bool>() ? " (lost)" : "");
  }
  std::printf("%s\n", line.c_str());
}

void PrintBuildCacheLine(const TuneFlags& f, int builds, int hits) {
  const std::string& dir = f.setup.build_cache;
  if (dir.empty()) return;
  const builder::BuildCacheUsage u = builder::ReadBuildCacheUsage(dir);
  const double max_mb = f.setup.build_cache_max_mb;
  std::printf(
      "build cache %s: %d of %d builds were hits (%.0f%%); it holds %llu entries, %.1f MB%s\n",
      dir.c_str(), hits, builds, builds > 0 ? 100.0 * hits / builds : 0.0,
      static_cast<unsigned long long>(u.entries), u.bytes / 1048576.0,
      max_mb > 0 ? fmt::format(" of {:g} MB", max_mb).c_str() : "");
}

// `crosstune tune --list-options`: every option of the command (its option groups' included), its
// names and default, as one JSON array (what python/tests/test_tune_options.py compares with
// tune()'s parameters). Options whose default --help leaves out (it is explained in words) are
// captured here: the values they hold now, nothing else being given, are their defaults.
void PrintOptionList(CLI::App* cmd) {
  std::vector<CLI::Option*> options = cmd->get_options();
  for (CLI::App* group : cmd->get_subcommands([](CLI::App* a) { return a->get_name().empty(); })) {
    for (CLI::Option* o : group->get_options()) options.push_back(o);
  }
  json out = json::array();
  for (CLI::Option* o : options) {
    const auto& lnames = o->get_lnames();
    const bool own = std::any_of(lnames.begin(), lnames.end(), [](const std::string& n) {
      return n == "help" || n == "list-options";
    });
    if (own) continue;
    if (o->get_default_str().empty()) o->capture_default_str();
    json names = json::array();
    for (const auto& n : lnames) names.push_back("--" + n);
    for (const auto& n : o->get_snames()) names.push_back("-" + n);
    json entry = {{"names", names},
                  {"positional", o->get_name(true, false)},
                  {"flag", o->get_items_expected_max() == 0},
                  {"default", o->get_default_str()},
                  {"envname", o->get_envname()}};
    if (!o->get_positional()) entry["positional"] = nullptr;
    out.push_back(entry);
  }
  PrintJson(out, 2);
}

void RunTune(const TuneFlags& f) {
  const int sources = !f.template_name.empty() + !f.workload.empty() + !f.model.empty();
  if (sources != 1) {
    Fail("give one of a template (crosstune tune matmul --shape ...), --workload or --model");
  }
  const bool network = f.template_name.empty();
  if (!network && f.shapes.size() != 1) Fail("--shape (once) is required with a template");
  if (!f.workload.empty() && !f.shapes.empty()) Fail("--shape does not apply to --workload");
  if (network && !f.pins.empty()) {
    Fail("--pin holds a knob of one template; it does not apply to --workload or --model");
  }
  if (!f.setup.devices.tracker.empty() || !f.setup.devices.key.empty()) {
    if (f.setup.devices.tracker.empty() || f.setup.devices.key.empty()) {
      Fail("--tracker and --key go together");
    }
  }
  if (!f.setup.build_key.empty() && f.setup.devices.tracker.empty()) {
    Fail("--build-key needs --tracker");
  }
  if (f.setup.build_cache.empty() && f.build_cache_max_flag->count() > 0) {
    Fail("--build-cache-max-mb needs --build-cache DIR");
  }
  if (network && f.setup.tune.log_path.empty()) {
    Fail(fmt::format("{} needs --log (its tasks resume from it)",
                     f.workload.empty() ? "--model" : "--workload"));
  }
  std::vector<int64_t> shape;
  if (!network) shape = Check(tuner::ParseShape(f.shapes.front()));

  tuner::TuneSetupOptions o = f.setup;
  o.network = network;
  o.tune.pins = Check(tuner::ParsePins(f.pins));
  if (!f.auth_token_file.empty()) o.devices.auth_secret = Check(ReadSecretFile(f.auth_token_file));
  o.devices.wait = std::chrono::milliseconds(static_cast<int64_t>(f.wait_s * 1000));
  o.devices.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  o.tune.measure.build_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.build_timeout_s * 1000));
  if (f.overlap_flag->count() > 0) o.overlap = f.overlap;
  if (std::any_of(f.timing_flags.begin(), f.timing_flags.end(),
                  [](const CLI::Option* t) { return t->count() > 0; })) {
    o.timing = f.timing;
  }
  o.tune.measure.check = !f.no_check;
  o.tune.include_default = !f.no_default;
  o.tune.stop_losers = !f.no_stop_losers;
  o.tune.stop = &g_stop;

  const bool tty = ::isatty(STDERR_FILENO) && !f.quiet;
  size_t last_len = 0;
  auto newline = [&] {
    if (tty && last_len) std::fprintf(stderr, "\n");
    last_len = 0;
  };
  o.tune.on_warning = [&](const std::string& w) {
    newline();
    std::fprintf(stderr, "crosstune: warning: %s\n", w.c_str());
  };
  // The progress line (a template's run; a network's prints one line per round): the setup
  // reports to the tracker beside it.
  std::string label;  // the task's, once the target is known
  if (!network) {
    o.tune.on_progress = [&](const tuner::TuneProgress& p) {
      if (f.quiet) return;
      if (!tty && !p.batch_end) return;
      double eta = p.rate > 0 ? (p.total - p.done) / p.rate : NAN;
      std::string line = fmt::format(
          "tune {}: {}/{} trials, best {:.2f} GFLOP/s, errors: {}, devices {}/{} busy, {:.2f} "
          "trials/s, ETA {}",
          label, p.done, p.total, p.best_gflops, ErrorsText(p.errors), p.devices_busy, p.devices,
          p.rate, Duration(eta));
      if (tty) {
        std::string padded = line;
        if (padded.size() < last_len) padded.append(last_len - padded.size(), ' ');
        last_len = line.size();
        std::fprintf(stderr, "\r%s", padded.c_str());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      std::fflush(stderr);
    };
  }
  auto setup = Check(tuner::TuneSetup::Open(std::move(o)));
  if (setup->pinned() && !f.quiet) {
    std::fprintf(stderr, "tune: %s\n", setup->CpuSplitText().c_str());
  }
  ::signal(SIGINT, OnInterrupt);
  if (network) {
    RunWorkload(f, *setup);
    ::signal(SIGINT, SIG_DFL);
    return;
  }

  const builder::Target& target = setup->target();
  auto task = Check(tuner::MakeTask(f.template_name, shape, target, {f.setup.threads}));
  label = task->id().Key();
  auto result = setup->Tune(*task);
  newline();
  ::signal(SIGINT, SIG_DFL);
  if (!result.ok()) Fail(label + ": " + result.status().message());
  const tuner::TuneSummary& s = *result;
  if (f.json_out) {
    nlohmann::json report = tuner::TuneReport(*task, setup->options(), s);
    setup->AddToReport(&report);
    PrintJson(report);
    return;
  }
  std::printf("%s on %s: %d trials in the log (%d measured now, %d resumed), errors: %s\n",
              label.c_str(), target.ToString().c_str(), s.trials_in_log, s.measured, s.resumed,
              ErrorsText(s.errors).c_str());
  if (s.has_default) {
    std::printf(
        "untuned (the template's default config): %.2f GFLOP/s%s\n", s.default_record.gflops(),
        s.default_record.ok()
            ? ""
            : (" (" + std::string(tuner::TrialErrorName(s.default_record.error)) + ")").c_str());
  }
  if (s.has_best) {
    std::printf("best: %.2f GFLOP/s (%.4f ms) on %s, config %s\n", s.best.gflops(),
                s.best.mean * 1e3, s.best.device.name.c_str(), s.best.config_values.dump().c_str());
  }
  std::printf("wall %.1f s, devices busy %.0f%% of it%s\n", s.wall_s,
              s.device_busy_fraction() * 100,
              s.stopped ? " (stopped by Ctrl-C after the batch)"
                        : (s.early_stopped ? " (early stop)" : ""));
  if (s.stopped_early > 0) {
    std::printf(
        "%d of the %d trials measured were stopped after a round as clear losers "
        "(--no-stop-losers times every round)\n",
        s.stopped_early, s.measured);
  }
  if (!s.farm_kind.empty()) {
    std::printf(
        "farm records (%s): %d taken from other runs, %d config(s) left to other runs%s\n",
        s.farm_kind.c_str(), s.farm_resumed, s.farm_elsewhere,
        s.farm_unsent > 0 ? fmt::format(", {} of this run's not sent", s.farm_unsent).c_str() : "");
  }
  if (!s.warm_kind.empty()) {
    std::string trust = "not judged yet";
    if (s.warm_trust && s.warm_trust->judged) {
      trust = fmt::format("{} (Kendall tau {:.2f} over {} configs measured here)",
                          s.warm_trust->trusted ? "trusted" : "set aside", s.warm_trust->tau,
                          s.warm_trust->compared);
    }
    std::printf(
        "warm start: from %d record(s) of %s%s, the nearest kind with records of this task; "
        "%s\n",
        s.warm_records, s.warm_kind.c_str(),
        s.warm_target.empty() ? "" : " (built for another target)", trust.c_str());
  }
  std::printf("%s\n", PlanningLine(s.planning, s.wall_s).c_str());
  PrintBuildCacheLine(f, s.builds, s.build_cache_hits);
  PrintBuildFarmLine(setup->farm());
}

void RunWorkload(const TuneFlags& f, tuner::TuneSetup& setup) {
  const builder::Target& target = setup.target();
  std::string name = f.workload;
  std::vector<tuner::WorkloadLayer> layers;
  if (f.workload.empty()) {
    // The model's tasks (the same compile takes), less those no template takes yet; its
    // records carry its name (the file's stem).
    const model::LoadedModel m = LoadModel(f.model, f.shapes);
    name = m.name;
    model::TunableTasks tasks = model::SplitTunableTasks(m.graph, target, f.setup.threads,
                                                         Check(model::ParseLayouts(f.layouts)));
    layers = std::move(tasks.layers);
    if (!tasks.left_out.empty() && !f.quiet) {
      std::string refused;
      for (const auto& why : tasks.left_out) refused += (refused.empty() ? "" : "; ") + why;
      std::fprintf(stderr,
                   "tune %s: %zu of the model's tasks are left out (no template takes them yet; "
                   "compile gives them generated kernels): %s\n",
                   name.c_str(), tasks.left_out.size(), refused.c_str());
    }
    if (layers.empty()) Fail(f.model + ": the model has no task a template takes");
  } else {
    layers = Check(model::MakeWorkload(f.workload, Check(model::ParseLayouts(f.layouts))));
  }
  tuner::WorkloadTuneOptions wo = setup.WorkloadOptions(name, f.round);
  wo.on_round = [&](size_t i, const tuner::TaskScheduler& s) {
    if (f.quiet) return;
    int spent = 0;
    for (size_t k = 0; k < s.size(); ++k) spent += s.trials(k);
    double net = s.NetworkSeconds();
    std::fprintf(stderr, "tune %s: %d/%d trials; %s now %d trials, best %s; network %s\n",
                 name.c_str(), spent, wo.trials, layers[i].name.c_str(), s.trials(i),
                 s.best(i) == tuner::TaskScheduler::kNoTime
                     ? "none"
                     : fmt::format("{:.3f} ms", s.best(i) * 1e3).c_str(),
                 net == tuner::TaskScheduler::kNoTime
                     ? "unknown yet"
                     : fmt::format("{:.2f} ms", net * 1e3).c_str());
  };
  auto result = setup.TuneWorkload(layers, wo);
  if (!result.ok()) Fail(name + ": " + result.status().message());
  const tuner::WorkloadSummary& s = *result;
  if (f.json_out) {
    nlohmann::json report = tuner::WorkloadReport(wo, target, s);
    setup.AddToReport(&report);
    PrintJson(report);
    return;
  }
  std::printf("%-22s %-8s %-34s %5s %6s %10s %7s %8s\n", "layer", "template", "shape", "count",
              "trials", "best ms", "share", "GFLOP/s");
  for (const auto& t : s.tasks) {
    std::string shape;
    for (size_t k = 0; k < t.layer.shape.size(); ++k) {
      shape += (k ? "," : "") + std::to_string(t.layer.shape[k]);
    }
    std::printf("%-22s %-8s %-34s %5d %6d %10s %6.1f%% %8.2f%s\n", t.layer.name.c_str(),
                t.layer.template_name.c_str(), shape.c_str(), t.layer.count, t.trials,
                t.has_best ? fmt::format("{:.4f}", t.best_seconds * 1e3).c_str() : "-",
                t.share * 100, t.has_best ? t.best.gflops() : 0.0,
                t.error.empty() ? "" : ("  " + t.error.substr(0, 60)).c_str());
  }
  auto net = [](double sec) {
    return sec == tuner::TaskScheduler::kNoTime ? std::string("unknown (a layer has no time)")
                                                : fmt::format("{:.3f} ms", sec * 1e3);
  };
  std::printf("estimated network time: %s tuned, %s untuned (sum of count x best)\n",
              net(s.network_seconds).c_str(), net(s.untuned_network_seconds).c_str());
  std::printf("%d trials in the log (%d measured now), %.1f s%s\n", s.trials_in_log, s.measured,
              s.wall_s, s.stopped ? " (stopped by Ctrl-C)" : "");
  std::printf("%s\n", PlanningLine(s.planning, s.wall_s).c_str());
  PrintBuildCacheLine(f, s.builds, s.build_cache_hits);
  PrintBuildFarmLine(setup.farm());
}

void RegisterTune(CLI::App& app) {
  auto f = std::make_shared<TuneFlags>();
  auto* cmd = app.add_subcommand("tune", CompilerCommandHelp("tune"));
  std::string templates, shapes;
  for (const auto& t : tuner::Templates()) {
    templates += (templates.empty() ? "" : ", ") + t.name;
    shapes += (shapes.empty() ? "" : "; ") + t.name + ": " + t.shape;
  }
  cmd->add_option("template", f->template_name, "kernel template (" + templates + ")");
  cmd->add_option("--shape", f->shapes,
                  "the task's sizes, e.g. 512,512,512 (" + shapes +
                      "); with --model: NAME=D1,D2,... for an input (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--workload", f->workload,
                  "tune a network's distinct layers as tasks under one budget (resnet50); "
                  "--trials is then the network's, and --log is required");
  cmd->add_option("--model", f->model,
                  "tune an ONNX model's distinct tasks (those `crosstune compile` looks up in "
                  "--log) under one budget, as --workload does")
      ->check(CLI::ExistingFile);
  cmd->add_option("--layouts", f->layouts,
                  "with --workload or --model: the conv tasks of `crosstune compile --layouts` "
                  "(blocked: NCHWc between convs; nchw)")
      ->capture_default_str()
      ->check(CLI::IsMember({"blocked", "nchw"}));
  cmd->add_option("--round", f->round,
                  "with --workload or --model: trials per round for the chosen task")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--target", f->setup.target,
                  "target string, preset, auto (ask the device for its CPU) or cuda (for its GPU)")
      ->capture_default_str();
  cmd->add_option("--threads", f->setup.threads,
                  "threads the kernel runs with (part of the task: its records and best config "
                  "are per thread count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  auto* dev = cmd->add_option_group("devices",
                                    "where to measure (default: a crosstune-server "
                                    "started on this machine)");
  dev->add_option("--server,-s", f->setup.devices.servers,
                  "crosstune-server HOST:PORT (repeatable)");
  dev->add_option("--tracker", f->setup.devices.tracker, "crosstune-tracker HOST:PORT")
      ->envname("CROSSTUNE_TRACKER");
  dev->add_option("--key", f->setup.devices.key,
                  "device key: every free device of it measures in parallel");
  dev->add_option("--build-key", f->setup.build_key,
                  "also build on every free build worker of this key (crosstune-build-worker "
                  "registered with --tracker), beside this machine's pool");
  dev->add_option("--devices", f->setup.devices.max_devices,
                  "at most this many devices of the key (0: all)");
  dev->add_option("--wait", f->wait_s, "seconds to wait for the first device")
      ->capture_default_str();
  dev->add_option("--auth-token-file", f->auth_token_file, "shared secret file (HMAC challenge)")
      ->envname("CROSSTUNE_AUTH_TOKEN_FILE");
  dev->add_option("--timeout", f->timeout_s, "seconds to wait for each reply")
      ->capture_default_str();
  cmd->add_option("--records", f->setup.records,
                  "share the farm's tuning records: 'tracker' (--tracker's) or a tracker "
                  "HOST:PORT; resume from them, claim each config before timing it, send each "
                  "record");
  cmd->add_option("--trials", f->setup.tune.trials,
                  "trials for the task in the log, earlier ones included")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--tuner", f->setup.tune.tuner, "random, grid, ga or xgb")->capture_default_str();
  cmd->add_option("--batch", f->setup.tune.batch,
                  "configs per batch (default: 8, or twice the devices when that is more, "
                  "rounded up to a multiple of them)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--early-stop", f->setup.tune.early_stop,
                  "stop after N trials without a better config")
      ->check(CLI::Range(0, 10'000'000));
  cmd->add_option("--log", f->setup.tune.log_path,
                  "JSON-lines record log; an existing one is resumed");
  cmd->add_option("--transfer", f->setup.tune.transfer_logs,
                  "other logs whose records of this template warm-start the cost model");
  cmd->add_option("--seed", f->setup.tune.tuner_options.seed, "tuner seed")->capture_default_str();
  cmd->add_option("--objective", f->setup.tune.tuner_options.objective,
                  "xgb cost model: mixed (an ndcg and a pairwise model, half a batch each), "
                  "ndcg (rank:ndcg), rank (rank:pairwise) or reg")
      ->check(CLI::IsMember({"mixed", "ndcg", "rank", "reg"}))
      ->capture_default_str();
  cmd->add_option("--workers", f->setup.workers,
                  "build workers (0: one per core, or per CPU left beside the timed kernel's)")
      ->check(CLI::Range(0, 256));
  f->overlap_flag = cmd->add_flag("--overlap,!--no-overlap", f->overlap,
                                  "build the next batch while this one is timed (default: yes "
                                  "for remote devices and for the server started here when CPUs "
                                  "are left beside the kernel's, which it then gets to itself; no "
                                  "for servers given on this machine)");
  AddTimingFlags(cmd, &f->timing, "calls");
  for (const char* name :
       {"--number", "--repeat", "--min-repeat-ms", "--cooldown-ms", "--flush-cache"}) {
    f->timing_flags.push_back(cmd->get_option(name));
  }
  cmd->add_option("--run-timeout-ms", f->setup.tune.measure.run_timeout_ms, "limit per kernel call")
      ->capture_default_str()
      ->check(CLI::Range(1, 3'600'000));
  cmd->add_option("--build-cache", f->setup.build_cache,
                  "build cache directory, local or shared by a farm's tuners: a config built "
                  "before for the same target and compiler is not compiled again");
  f->build_cache_max_flag =
      cmd->add_option("--build-cache-max-mb", f->setup.build_cache_max_mb,
                      "the cache's budget: past it, least recently used entries go (0: none)")
          ->capture_default_str();
  cmd->add_option("--build-timeout", f->build_timeout_s, "seconds per build")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--no-check", f->no_check, "skip the output check against the reference");
  cmd->add_option("--pin", f->pins,
                  "hold a knob at one value, KNOB=VALUE (JSON, e.g. unroll_k=4 or "
                  "'order=[\"ir\",\"jr\"]'); repeatable: only the other knobs are searched");
  cmd->add_flag("--no-default", f->no_default,
                "do not measure the template's default config first");
  cmd->add_flag("--no-stop-losers", f->no_stop_losers,
                "time every candidate for every round: by default the device stops after a "
                "round once a candidate is slower than its best so far by more than the "
                "rounds' noise allows (recorded as stopped_early, its time a lower bound)");
  cmd->add_flag("--json", f->json_out, "print one JSON object at the end");
  cmd->add_flag("--quiet,-q", f->quiet, "no progress lines");
  cmd->add_flag("--list-options", f->list_options,
                "print every option of tune, its names and default, as JSON, and exit")
      ->group("");  // hidden: for the tests that keep Python's tune() in step
  cmd->callback([f, cmd] {
    if (f->list_options) {
      PrintOptionList(cmd);
      return;
    }
    RunTune(*f);
  });
}

// --- log summary / best / plot -----------------------------------------------------------------

// A log with no record is an error: a wrong path or an empty file is not a summary of nothing.
tuner::LogContents ReadLogOrFail(const std::string& path) {
  auto log = Check(tuner::ReadLog(path));
  for (const auto& w : log.warnings) std::fprintf(stderr, "crosstune: warning: %s\n", w.c_str());
  if (log.records.empty()) {
    Fail(path + (log.warnings.empty() ? ": the log is empty (no records)"
                                      : ": no records (every line was skipped)"));
  }
  return log;
}

void RunLogSummary(const std::string& path, bool as_json) {
  const tuner::LogSummary summary = tuner::SummarizeLog(ReadLogOrFail(path).records);
  if (as_json) {
    PrintJson(summary.ToJson(), 2);
    return;
  }
  for (const auto& t : summary.tasks) {
    std::printf("%s  [%s]\n", t.task.Key().c_str(), t.target.c_str());
    std::printf("  trials %d (%zu configs), ok %d\n", t.trials, t.unique_configs, t.ok);
    for (const auto& e : t.errors) {
      std::printf("  %-13s %4d  commonest (%d): %s\n",
                  std::string(tuner::TrialErrorName(e.kind)).c_str(), e.count, e.commonest_count,
                  e.commonest_message.c_str());
    }
    if (t.has_best) {
      std::printf("  best %.2f GFLOP/s (%.4f ms) on %s: %s\n", t.best.gflops(), t.best.mean * 1e3,
                  t.best.device.name.c_str(), t.best.config_values.dump().c_str());
    } else {
      std::printf("  no successful trial\n");
    }
    if (t.in_network && t.share >= 0) {
      std::printf("  %s layer %s x%d: %.1f%% of the network's time\n", t.network.c_str(),
                  t.layer.c_str(), t.count, t.share * 100);
    }
  }
  for (const auto& n : summary.networks) {
    const std::string name = n.name + "  [" + n.target + "]";
    if (n.missing > 0) {
      std::printf(
          "network %s: %d tasks, %d trials; %d task(s) without a working config, so no "
          "network time\n",
          name.c_str(), n.tasks, n.trials, n.missing);
    } else {
      std::printf("network %s: %d tasks, %d trials, estimated time %.3f ms (sum of count x best)\n",
                  name.c_str(), n.tasks, n.trials, n.seconds * 1e3);
    }
  }
}

void RunLogBest(const std::string& path, bool as_json) {
  auto log = ReadLogOrFail(path);
  auto best = tuner::BestRecords(log.records);
  if (as_json) {
    json out = json::array();
    for (const auto& b : best) out.push_back(b.ToJson());
    PrintJson(out);
    return;
  }
  for (const auto& b : best) {
    std::printf("%s  %.2f GFLOP/s  %.4f ms  %s (%s)  %s\n", b.task.Key().c_str(), b.gflops(),
                b.mean * 1e3, b.device.name.c_str(), tuner::DeviceKind(b).c_str(),
                b.config_values.dump().c_str());
  }
}

// Best-so-far GFLOP/s against trials, one line per run and tuner (records in file order).
void RunLogPlot(const std::string& path, const std::string& out_path) {
  auto plot = tuner::PlotBestSoFar(ReadLogOrFail(path).records);
  if (!plot.ok()) Fail(path + ": " + plot.status().message());
  std::ofstream out(out_path);
  out << plot->svg;
  if (!out) Fail(out_path + ": cannot write");
  std::printf("%s: %zu line(s), %zu trials at most\n", out_path.c_str(), plot->lines,
              plot->max_trials);
}

void RegisterLog(CLI::App& app) {
  auto* log = app.add_subcommand("log", CompilerCommandHelp("log"));
  log->require_subcommand(1);
  struct Opts {
    std::string path, out;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* summary = log->add_subcommand("summary", "per task: trials, errors by kind, best config");
  summary->add_option("log", o->path, "record log (JSON lines)")->required();
  summary->add_flag("--json", o->json_out, "JSON output");
  summary->callback([o] { RunLogSummary(o->path, o->json_out); });
  auto* best = log->add_subcommand("best", "the best record per task, target and device kind");
  best->add_option("log", o->path, "record log (JSON lines)")->required();
  best->add_flag("--json", o->json_out, "JSON output (the records themselves)");
  best->callback([o] { RunLogBest(o->path, o->json_out); });
  auto* plot = log->add_subcommand("plot", "SVG of best-so-far GFLOP/s against trials");
  plot->add_option("log", o->path, "record log (JSON lines)")->required();
  plot->add_option("-o,--output", o->out, "SVG file to write")->required();
  plot->callback([o] { RunLogPlot(o->path, o->out); });
}

// --- export --------------------------------------------------------------------------------------

void RunExport(const std::string& path, const std::string& out, const std::string& task_key,
               const std::string& device) {
  int stale = 0;
  const auto current = tuner::WithoutStaleRecords(ReadLogOrFail(path).records, &stale);
  if (stale > 0) {
    std::fprintf(stderr,
                 "crosstune: %d record(s) measured code their template now generates differently "
                 "(another generator): not exported\n",
                 stale);
  }
  auto pick = tuner::BestRecordsOf(current, task_key, device);
  if (pick.empty()) {
    Fail(path + ": no successful record" + (task_key.empty() ? "" : " of task '" + task_key + "'") +
         (device.empty() ? "" : " on device '" + device + "'") + " to export");
  }
  if (pick.size() > 1) {
    std::string keys;
    for (const auto& b : pick) {
      keys += "\n  " + b.task.Key() + " [" + b.target + "] on " + tuner::DeviceKind(b);
    }
    Fail(path + ": several tasks or devices; choose with --task and --device:" + keys);
  }
  const tuner::Record& r = pick.front();
  auto exported = Check(tuner::ExportRecord(r, out, path));
  std::printf("%s: %s best config (%.2f GFLOP/s on %s), function %s, build %s\n", out.c_str(),
              r.task.Key().c_str(), r.gflops(), r.device.name.c_str(), exported.function.c_str(),
              exported.manifest.build_id.substr(0, 12).c_str());
}

void RegisterExport(CLI::App& app) {
  struct Opts {
    std::string path, out, task, device;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", CompilerCommandHelp("export"));
  cmd->add_option("log", o->path, "record log (JSON lines)")->required();
  cmd->add_option("-o,--output", o->out, "package to write (.ctpkg)")->required();
  cmd->add_option("--task", o->task,
                  "task key (\"matmul 512,512,512 float32\") when the log has several");
  cmd->add_option("--device", o->device,
                  "the device kind the config was tuned on (\"aarch64/cortex-a72\", its CPU or "
                  "arch, or a device name) when the log has several");
  cmd->callback([o] { RunExport(o->path, o->out, o->task, o->device); });
}

}  // namespace

void RegisterTuneCommand(CLI::App& app) { RegisterTune(app); }
void RegisterLogCommand(CLI::App& app) { RegisterLog(app); }
void RegisterExportCommand(CLI::App& app) { RegisterExport(app); }

}  // namespace crosstune::cli
