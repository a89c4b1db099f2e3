// `crosstune tune`, `crosstune log summary|best|plot` and `crosstune export`: the tuner's
// command line. The work is in crosstune::tuner; this file parses flags and prints.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "connect.h"
#include "crosstune/builder/builder.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/crypto.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"

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

json ErrorsJson(const std::map<tuner::TrialError, int>& errors) {
  json j = json::object();
  for (const auto& [kind, n] : errors) j[std::string(tuner::TrialErrorName(kind))] = n;
  return j;
}

// --- tune ----------------------------------------------------------------------------------------

struct TuneFlags {
  int threads = 1;
  std::string workload;
  int round = 16;
  std::string template_name;
  std::string shape;
  std::string target = "auto";
  std::vector<std::string> servers;
  std::string tracker, key, auth_token_file;
  int max_devices = 0;
  double wait_s = 600;
  double timeout_s = 60;
  tuner::TuneOptions tune;
  int workers = 0;
  double build_timeout_s = 30;
  bool no_check = false;
  bool no_default = false;
  std::vector<std::string> pins;
  bool json_out = false;
  bool quiet = false;
};

void RunWorkload(const TuneFlags& f, const builder::Target& target, tuner::TuneOptions options,
                 tuner::DevicePool& pool, builder::Builder& builder);

void RunTune(const TuneFlags& f) {
  if (f.workload.empty() == f.template_name.empty()) {
    Fail("give a template (crosstune tune matmul --shape ...) or --workload, not both");
  }
  if (f.workload.empty() && f.shape.empty()) Fail("--shape is required with a template");
  if (!f.workload.empty() && !f.pins.empty()) {
    Fail("--pin holds a knob of one template; it does not apply to --workload");
  }
  std::vector<int64_t> shape;
  if (f.workload.empty()) shape = Check(tuner::ParseShape(f.shape));
  const nlohmann::json pins = Check(tuner::ParsePins(f.pins));
  // Workers are forked: the builder comes before any thread (server output, lease renewal).
  auto builder = Check(builder::Builder::Create({.workers = f.workers}));

  // Devices: a tracker's free devices of the key, given servers, or a server started here.
  std::string secret;
  if (!f.auth_token_file.empty()) secret = Check(ReadSecretFile(f.auth_token_file));
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  std::unique_ptr<client::LocalServer> local;
  std::unique_ptr<tuner::DevicePool> pool;
  if (!f.tracker.empty() || !f.key.empty()) {
    if (f.tracker.empty() || f.key.empty()) Fail("--tracker and --key go together");
    client::TrackerOptions to;
    to.tracker = f.tracker;
    to.auth_secret = secret;
    pool = Check(tuner::DevicePool::FromTracker(
        to, f.key, f.max_devices, std::chrono::milliseconds(static_cast<int64_t>(f.wait_s * 1000)),
        secret, timeout));
  } else if (!f.servers.empty()) {
    pool = tuner::DevicePool::FromServers(f.servers, secret, timeout);
  } else {
    local = std::make_unique<client::LocalServer>();
    Check(local->Start(client::LocalServerOptions{}));
    pool = tuner::DevicePool::FromServers({local->address()}, "", timeout, {"local"});
  }

  // The target: "auto" asks the first device for its CPU, "cuda" for its first GPU.
  builder::Target target;
  if (f.target == "auto" || f.target == "cuda") {
    const tuner::DeviceSpec& d = pool->devices().front();
    client::ConnectOptions co;
    co.server = d.server;
    co.auth_secret = d.auth_secret;
    co.lease_token = d.lease_token;
    co.request_timeout = timeout;
    auto session = Check(client::Session::Connect(co));
    auto info = Check(session->Info());
    target = Check(builder::TargetFromDevice(info, f.target == "cuda"));
  } else {
    target = Check(builder::ParseTarget(f.target));
  }
  std::unique_ptr<tuner::Task> task;
  if (f.workload.empty())
    task = Check(tuner::MakeTask(f.template_name, shape, target, {f.threads}));

  tuner::TuneOptions options = f.tune;
  options.measure.check = !f.no_check;
  options.include_default = !f.no_default;
  options.pins = pins;
  options.measure.build_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.build_timeout_s * 1000));
  if (options.run_id.empty()) {
    options.run_id = fmt::format("{}-{:08x}", tuner::UtcTimestamp(), std::random_device{}());
  }
  if (!options.log_path.empty()) options.transfer_logs.push_back(options.log_path);
  options.stop = &g_stop;
  ::signal(SIGINT, OnInterrupt);
  if (!f.workload.empty()) {
    RunWorkload(f, target, options, *pool, *builder);
    ::signal(SIGINT, SIG_DFL);
    return;
  }

  const bool tty = ::isatty(STDERR_FILENO) && !f.quiet;
  const std::string label = task->id().Key();
  size_t last_len = 0;
  options.on_progress = [&](const tuner::TuneProgress& p) {
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
  auto newline = [&] {
    if (tty && last_len) std::fprintf(stderr, "\n");
    last_len = 0;
  };
  options.on_warning = [&](const std::string& w) {
    newline();
    std::fprintf(stderr, "crosstune: warning: %s\n", w.c_str());
  };
  options.on_device_lost = [&](const tuner::DeviceSpec& d, const Status& why) {
    pool->Lost(d, why);
  };

  auto result = tuner::Tune(*task, pool->devices(), *builder, options);
  newline();
  ::signal(SIGINT, SIG_DFL);
  if (!result.ok()) Fail(label + ": " + result.status().message());
  const tuner::TuneSummary& s = *result;
  double busy_fraction = s.wall_s > 0 ? s.device_busy_s / (s.wall_s * std::max(1, s.devices)) : 0;
  if (f.json_out) {
    json j = {{"task",
               {{"template", task->id().template_name},
                {"shape", task->id().shape},
                {"dtype", task->id().dtype}}},
              {"target", target.ToString()},
              {"tuner", options.tuner},
              {"trials_in_log", s.trials_in_log},
              {"resumed", s.resumed},
              {"measured", s.measured},
              {"errors", ErrorsJson(s.errors)},
              {"wall_s", s.wall_s},
              {"devices", s.devices},
              {"device_busy_fraction", busy_fraction},
              {"stopped", s.stopped},
              {"early_stopped", s.early_stopped},
              {"log", options.log_path}};
    if (s.has_default) {
      j["default"] = {{"gflops", s.default_record.gflops()},
                      {"mean_s", s.default_record.mean},
                      {"config", s.default_record.config_values},
                      {"error", tuner::TrialErrorName(s.default_record.error)}};
    }
    if (s.has_best) {
      j["best"] = {{"gflops", s.best.gflops()},
                   {"mean_s", s.best.mean},
                   {"config", s.best.config_values},
                   {"index", s.best.config_index},
                   {"device", s.best.device.name}};
    }
    std::printf("%s\n", j.dump().c_str());
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
  std::printf("wall %.1f s, devices busy %.0f%% of it%s\n", s.wall_s, busy_fraction * 100,
              s.stopped ? " (stopped by Ctrl-C after the batch)"
                        : (s.early_stopped ? " (early stop)" : ""));
}

void RunWorkload(const TuneFlags& f, const builder::Target& target, tuner::TuneOptions options,
                 tuner::DevicePool& pool, builder::Builder& builder) {
  auto layers = Check(tuner::MakeWorkload(f.workload));
  if (options.log_path.empty()) Fail("--workload needs --log (its tasks resume from it)");
  tuner::WorkloadTuneOptions wo;
  wo.name = f.workload;
  wo.trials = options.trials;
  wo.round = f.round;
  wo.threads = f.threads;
  options.on_progress = nullptr;  // one line per round instead
  wo.tune = options;
  wo.on_round = [&](size_t i, const tuner::TaskScheduler& s) {
    if (f.quiet) return;
    int spent = 0;
    for (size_t k = 0; k < s.size(); ++k) spent += s.trials(k);
    double net = s.NetworkSeconds();
    std::fprintf(stderr, "tune %s: %d/%d trials; %s now %d trials, best %s; network %s\n",
                 f.workload.c_str(), spent, wo.trials, layers[i].name.c_str(), s.trials(i),
                 s.best(i) == tuner::TaskScheduler::kNoTime
                     ? "none"
                     : fmt::format("{:.3f} ms", s.best(i) * 1e3).c_str(),
                 net == tuner::TaskScheduler::kNoTime
                     ? "unknown yet"
                     : fmt::format("{:.2f} ms", net * 1e3).c_str());
  };
  auto result = tuner::TuneWorkload(layers, target, pool.devices(), builder, wo);
  if (!result.ok()) Fail(f.workload + ": " + result.status().message());
  const tuner::WorkloadSummary& s = *result;
  auto ms = [](double sec) -> json {
    return sec == tuner::TaskScheduler::kNoTime ? json(nullptr) : json(sec * 1e3);
  };
  if (f.json_out) {
    json tasks = json::array();
    for (const auto& t : s.tasks) {
      tasks.push_back({{"layer", t.layer.name},
                       {"template", t.layer.template_name},
                       {"shape", t.layer.shape},
                       {"count", t.layer.count},
                       {"trials", t.trials},
                       {"best_ms", ms(t.best_seconds)},
                       {"share", t.share},
                       {"gflops", t.has_best ? t.best.gflops() : 0.0},
                       {"error", t.error}});
    }
    std::printf("%s\n", json{{"workload", f.workload},
                             {"target", target.ToString()},
                             {"threads", f.threads},
                             {"trials_in_log", s.trials_in_log},
                             {"measured", s.measured},
                             {"network_ms", ms(s.network_seconds)},
                             {"untuned_network_ms", ms(s.untuned_network_seconds)},
                             {"wall_s", s.wall_s},
                             {"stopped", s.stopped},
                             {"tasks", tasks},
                             {"log", options.log_path}}
                            .dump()
                            .c_str());
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
}

void RegisterTune(CLI::App& app) {
  auto f = std::make_shared<TuneFlags>();
  auto* cmd = app.add_subcommand("tune", CompilerCommandHelp("tune"));
  std::string templates;
  for (const auto& name : tuner::TemplateNames()) {
    templates += (templates.empty() ? "" : ", ") + name;
  }
  cmd->add_option("template", f->template_name, "kernel template (" + templates + ")");
  cmd->add_option("--shape", f->shape,
                  "the task's sizes, e.g. 512,512,512 (matmul: M,N,K; conv2d: "
                  "N,C,H,W,K,R,S,stride,pad[,residual]; depthwise_conv2d: N,C,H,W,R,S,stride,pad; "
                  "dense: B,IN,OUT)");
  cmd->add_option("--workload", f->workload,
                  "tune a network's distinct layers as tasks under one budget (resnet50); "
                  "--trials is then the network's, and --log is required");
  cmd->add_option("--round", f->round, "with --workload: trials per round for the chosen task")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--target", f->target,
                  "target string, preset, auto (ask the device for its CPU) or cuda (for its GPU)")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads,
                  "threads the kernel runs with (part of the task: its records and best config "
                  "are per thread count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  auto* dev = cmd->add_option_group("devices",
                                    "where to measure (default: a crosstune-server "
                                    "started on this machine)");
  dev->add_option("--server,-s", f->servers, "crosstune-server HOST:PORT (repeatable)");
  dev->add_option("--tracker", f->tracker, "crosstune-tracker HOST:PORT")
      ->envname("CROSSTUNE_TRACKER");
  dev->add_option("--key", f->key, "device key: every free device of it measures in parallel");
  dev->add_option("--devices", f->max_devices, "at most this many devices of the key (0: all)");
  dev->add_option("--wait", f->wait_s, "seconds to wait for the first device")
      ->capture_default_str();
  dev->add_option("--auth-token-file", f->auth_token_file, "shared secret file (HMAC challenge)")
      ->envname("CROSSTUNE_AUTH_TOKEN_FILE");
  dev->add_option("--timeout", f->timeout_s, "seconds to wait for each reply")
      ->capture_default_str();
  cmd->add_option("--trials", f->tune.trials,
                  "trials for the task in the log, earlier ones included")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--tuner", f->tune.tuner, "random, grid, ga or xgb")->capture_default_str();
  cmd->add_option("--batch", f->tune.batch, "configs per batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--early-stop", f->tune.early_stop, "stop after N trials without a better config")
      ->check(CLI::Range(0, 10'000'000));
  cmd->add_option("--log", f->tune.log_path, "JSON-lines record log; an existing one is resumed");
  cmd->add_option("--transfer", f->tune.transfer_logs,
                  "other logs whose records of this template warm-start the cost model");
  cmd->add_option("--seed", f->tune.tuner_options.seed, "tuner seed")->capture_default_str();
  cmd->add_option("--objective", f->tune.tuner_options.objective,
                  "xgb cost model: mixed (an ndcg and a pairwise model, half a batch each), "
                  "ndcg (rank:ndcg), rank (rank:pairwise) or reg")
      ->check(CLI::IsMember({"mixed", "ndcg", "rank", "reg"}))
      ->capture_default_str();
  cmd->add_option("--workers", f->workers, "build workers (0: one per core)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--number", f->tune.measure.number, "calls per round")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--repeat", f->tune.measure.repeat, "rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--min-repeat-ms", f->tune.measure.min_repeat_ms, "grow a round to at least this")
      ->capture_default_str()
      ->check(CLI::Range(0, 60'000));
  cmd->add_option("--cooldown-ms", f->tune.measure.cooldown_ms, "pause between rounds")
      ->check(CLI::Range(0, 60'000));
  cmd->add_flag("--flush-cache", f->tune.measure.flush_cache, "flush CPU caches before each round");
  cmd->add_option("--run-timeout-ms", f->tune.measure.run_timeout_ms, "limit per kernel call")
      ->capture_default_str()
      ->check(CLI::Range(1, 3'600'000));
  cmd->add_option("--build-timeout", f->build_timeout_s, "seconds per build")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--no-check", f->no_check, "skip the output check against the reference");
  cmd->add_option("--pin", f->pins,
                  "hold a knob at one value, KNOB=VALUE (JSON, e.g. unroll_k=4 or "
                  "'order=[\"ir\",\"jr\"]'); repeatable: only the other knobs are searched");
  cmd->add_flag("--no-default", f->no_default,
                "do not measure the template's default config first");
  cmd->add_flag("--json", f->json_out, "print one JSON object at the end");
  cmd->add_flag("--quiet,-q", f->quiet, "no progress lines");
  cmd->callback([f] { RunTune(*f); });
}

// --- log summary / best / plot -----------------------------------------------------------------

tuner::LogContents ReadLogOrFail(const std::string& path) {
  auto log = Check(tuner::ReadLog(path));
  for (const auto& w : log.warnings) std::fprintf(stderr, "crosstune: warning: %s\n", w.c_str());
  return log;
}

std::string TaskTargetKey(const tuner::Record& r) { return r.task.Key() + "|" + r.target; }

void RunLogSummary(const std::string& path, bool as_json) {
  auto log = ReadLogOrFail(path);
  struct Group {
    tuner::Record first;
    std::set<uint64_t> configs;
    int trials = 0, ok = 0;
    std::map<tuner::TrialError, int> errors;
    std::map<tuner::TrialError, std::map<std::string, int>> messages;
    std::set<std::string> devices, tuners;
  };
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  for (const auto& r : log.records) {
    std::string key = TaskTargetKey(r);
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh) {
      order.push_back(key);
      it->second.first = r;
    }
    Group& g = it->second;
    g.trials++;
    g.configs.insert(r.config_index);
    g.devices.insert(r.device.name);
    g.tuners.insert(r.tuner);
    if (g.first.workload.is_null() && !r.workload.is_null()) g.first.workload = r.workload;
    if (r.ok()) {
      g.ok++;
    } else {
      g.errors[r.error]++;
      // The first line of the message, so compiler diagnostics of one kind group together.
      g.messages[r.error][r.message.substr(0, r.message.find('\n'))]++;
    }
  }
  auto best = tuner::BestRecords(log.records);
  json out = json::array();
  for (const auto& key : order) {
    const Group& g = groups[key];
    json j = {{"task", g.first.task.Key()},
              {"target", g.first.target},
              {"trials", g.trials},
              {"unique_configs", g.configs.size()},
              {"ok", g.ok},
              {"devices", g.devices},
              {"tuners", g.tuners}};
    json errors = json::object();
    for (const auto& [kind, n] : g.errors) {
      const auto& msgs = g.messages.at(kind);
      auto top = std::max_element(msgs.begin(), msgs.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
      errors[std::string(tuner::TrialErrorName(kind))] = {
          {"count", n}, {"commonest_message", top->first}, {"commonest_count", top->second}};
    }
    j["errors"] = errors;
    for (const auto& b : best) {
      if (TaskTargetKey(b) != key) continue;
      j["best"] = {{"gflops", b.gflops()},
                   {"mean_s", b.mean},
                   {"config", b.config_values},
                   {"index", b.config_index},
                   {"device", b.device.name}};
    }
    out.push_back(j);
  }
  // Tasks tuned as a network's layers: each one's share of the estimated network time (sum of
  // count x best over the network's tasks on one target).
  struct Network {
    double seconds = 0;
    int trials = 0, tasks = 0, missing = 0;
  };
  std::map<std::string, Network> networks;  // "name [target]"
  auto network_key = [](const json& j) {
    return j["workload"]["name"].get<std::string>() + "  [" + j["target"].get<std::string>() + "]";
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const tuner::Record& first = groups[order[i]].first;
    const json& w = first.workload;
    if (!w.is_object() || !w.contains("name") || !w.contains("count")) continue;
    json& j = out[i];
    j["workload"] = {{"name", w["name"]}, {"layer", w.value("layer", "")}, {"count", w["count"]}};
    Network& n = networks[network_key(j)];
    n.tasks++;
    n.trials += j["trials"].get<int>();
    if (j.contains("best")) {
      n.seconds += w["count"].get<double>() * j["best"]["mean_s"].get<double>();
    } else {
      n.missing++;
    }
  }
  for (auto& j : out) {
    if (!j.contains("workload")) continue;
    const Network& n = networks[network_key(j)];
    if (n.missing == 0 && n.seconds > 0 && j.contains("best")) {
      j["workload"]["share"] =
          j["workload"]["count"].get<double>() * j["best"]["mean_s"].get<double>() / n.seconds;
      j["workload"]["network_ms"] = n.seconds * 1e3;
    }
  }
  if (as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  for (const auto& j : out) {
    std::printf("%s  [%s]\n", j["task"].get<std::string>().c_str(),
                j["target"].get<std::string>().c_str());
    std::printf("  trials %d (%zu configs), ok %d\n", j["trials"].get<int>(),
                j["unique_configs"].get<size_t>(), j["ok"].get<int>());
    for (const auto& [kind, e] : j["errors"].items()) {
      std::printf("  %-13s %4d  commonest (%d): %s\n", kind.c_str(), e["count"].get<int>(),
                  e["commonest_count"].get<int>(),
                  e["commonest_message"].get<std::string>().c_str());
    }
    if (j.contains("best")) {
      std::printf("  best %.2f GFLOP/s (%.4f ms) on %s: %s\n", j["best"]["gflops"].get<double>(),
                  j["best"]["mean_s"].get<double>() * 1e3,
                  j["best"]["device"].get<std::string>().c_str(),
                  j["best"]["config"].dump().c_str());
    } else {
      std::printf("  no successful trial\n");
    }
    if (j.contains("workload") && j["workload"].contains("share")) {
      std::printf("  %s layer %s x%d: %.1f%% of the network's time\n",
                  j["workload"]["name"].get<std::string>().c_str(),
                  j["workload"]["layer"].get<std::string>().c_str(),
                  j["workload"]["count"].get<int>(), j["workload"]["share"].get<double>() * 100);
    }
  }
  for (const auto& [name, n] : networks) {
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
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  for (const auto& b : best) {
    std::printf("%s  %.2f GFLOP/s  %.4f ms  %s  %s\n", b.task.Key().c_str(), b.gflops(),
                b.mean * 1e3, b.device.name.c_str(), b.config_values.dump().c_str());
  }
}

// Best-so-far GFLOP/s against trials, one line per run and tuner (records in file order).
void RunLogPlot(const std::string& path, const std::string& out_path) {
  auto log = ReadLogOrFail(path);
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> series;
  for (const auto& r : log.records) {
    std::string key = r.task.Key() + " " + r.tuner + " " + r.run_id;
    auto [it, fresh] = series.try_emplace(key);
    if (fresh) order.push_back(key);
    double prev = it->second.empty() ? 0 : it->second.back();
    it->second.push_back(std::max(prev, r.gflops()));
  }
  if (order.empty()) Fail(path + ": no records to plot");
  size_t max_n = 1;
  double max_y = 1e-9;
  for (const auto& [k, v] : series) {
    max_n = std::max(max_n, v.size());
    for (double y : v) max_y = std::max(max_y, y);
  }
  const double W = 720, H = 420, L = 70, R = 20, T = 30, B = 50;
  auto X = [&](double i) { return L + (W - L - R) * (i / std::max<double>(1, max_n - 1)); };
  auto Y = [&](double v) { return H - B - (H - T - B) * (v / (max_y * 1.05)); };
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, H - B,
                     W - R, H - B);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, T, L,
                     H - B);
  for (int t = 0; t <= 4; ++t) {
    double v = max_y * 1.05 * t / 4;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1f}</text>\n", L - 6,
                       Y(v) + 4, v);
    double n = (max_n - 1) * t / 4.0;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", X(n),
                       H - B + 18, n + 1);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">trials</text>\n",
                     (L + W - R) / 2, H - 10);
  svg += fmt::format(
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">best "
      "GFLOP/s so far</text>\n",
      (T + H - B) / 2, (T + H - B) / 2);
  for (size_t s = 0; s < order.size(); ++s) {
    const auto& v = series[order[s]];
    std::string pts;
    for (size_t i = 0; i < v.size(); ++i) pts += fmt::format("{:.1f},{:.1f} ", X(i), Y(v[i]));
    const char* c = colours[s % 6];
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       c, pts);
    std::string name = order[s];
    for (char ch : {'&', '<', '>'}) std::replace(name.begin(), name.end(), ch, '_');
    svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", L + 10, T + 14 * (s + 1),
                       c, name);
  }
  svg += "</svg>\n";
  std::ofstream out(out_path);
  out << svg;
  if (!out) Fail(out_path + ": cannot write");
  std::printf("%s: %zu line(s), %zu trials at most\n", out_path.c_str(), order.size(), max_n);
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
  auto* best = log->add_subcommand("best", "the best record per task and target");
  best->add_option("log", o->path, "record log (JSON lines)")->required();
  best->add_flag("--json", o->json_out, "JSON output (the records themselves)");
  best->callback([o] { RunLogBest(o->path, o->json_out); });
  auto* plot = log->add_subcommand("plot", "SVG of best-so-far GFLOP/s against trials");
  plot->add_option("log", o->path, "record log (JSON lines)")->required();
  plot->add_option("-o,--output", o->out, "SVG file to write")->required();
  plot->callback([o] { RunLogPlot(o->path, o->out); });
}

// --- export --------------------------------------------------------------------------------------

void RunExport(const std::string& path, const std::string& out, const std::string& task_key) {
  auto log = ReadLogOrFail(path);
  auto best = tuner::BestRecords(log.records);
  std::vector<tuner::Record> pick;
  for (const auto& b : best) {
    if (task_key.empty() || b.task.Key() == task_key || TaskTargetKey(b) == task_key) {
      pick.push_back(b);
    }
  }
  if (pick.empty()) {
    Fail(path + (task_key.empty() ? ": no successful record to export"
                                  : ": no successful record of task '" + task_key + "'"));
  }
  if (pick.size() > 1) {
    std::string keys;
    for (const auto& b : pick) keys += "\n  " + b.task.Key() + " [" + b.target + "]";
    Fail(path + ": several tasks; choose one with --task:" + keys);
  }
  const tuner::Record& r = pick.front();
  auto target = Check(builder::ParseTarget(r.target));
  auto task = Check(tuner::MakeTask(r.task.template_name, r.task.shape, target, {r.task.threads}));
  auto config = Check(task->space().FromJson(r.config_values));
  builder::BuildRequest req;
  req.source = task->Generate(config);
  req.target = target;
  req.name = task->function();
  req.source_name = task->function() + (target.is_cuda() ? ".cu" : ".c");
  builder::BuildResult built = builder::BuildInProcess(req);
  Check(built.status);
  json tuning = {
      {"task",
       {{"template", r.task.template_name}, {"shape", r.task.shape}, {"dtype", r.task.dtype}}},
      {"config", {{"index", config.index()}, {"values", r.config_values}}},
      {"record", r.ToJson()},
      {"log", path}};
  auto manifest = Check(builder::WriteBuildPackage(req, built, out, "", "", tuning.dump()));
  std::printf("%s: %s best config (%.2f GFLOP/s on %s), function %s, build %s\n", out.c_str(),
              r.task.Key().c_str(), r.gflops(), r.device.name.c_str(), task->function().c_str(),
              manifest.build_id.substr(0, 12).c_str());
}

void RegisterExport(CLI::App& app) {
  struct Opts {
    std::string path, out, task;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", CompilerCommandHelp("export"));
  cmd->add_option("log", o->path, "record log (JSON lines)")->required();
  cmd->add_option("-o,--output", o->out, "package to write (.ctpkg)")->required();
  cmd->add_option("--task", o->task,
                  "task key (\"matmul 512,512,512 float32\") when the log has several");
  cmd->callback([o] { RunExport(o->path, o->out, o->task); });
}

}  // namespace

void RegisterTuneCommand(CLI::App& app) { RegisterTune(app); }
void RegisterLogCommand(CLI::App& app) { RegisterLog(app); }
void RegisterExportCommand(CLI::App& app) { RegisterExport(app); }

}  // namespace crosstune::cli
