#include "crosstune/tuner/log_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "crosstune/tuner/workload.h"

namespace crosstune::tuner {
namespace {

using nlohmann::json;

std::string TaskTargetKey(const Record& r) { return r.task.Key() + "|" + r.target; }

// The network a record's workload names, when it names one as TuneWorkload writes it.
bool ReadWorkload(const json& w, LogTaskSummary& t) {
  if (!w.is_object() || !w.contains("name") || !w.contains("count")) return false;
  const json& name = w["name"];
  const json& count = w["count"];
  const json layer = w.value("layer", json(""));
  if (!name.is_string() || !count.is_number_integer() || !layer.is_string()) return false;
  t.network = name.get<std::string>();
  t.layer = layer.get<std::string>();
  t.count = count.get<int>();
  return true;
}

// Each kind of failure with its count and commonest first message line, by the kind's name.
std::vector<LogErrorKind> ErrorKinds(
    const std::map<TrialError, int>& errors,
    const std::map<TrialError, std::map<std::string, int>>& messages) {
  std::vector<LogErrorKind> out;
  for (const auto& [kind, n] : errors) {
    const auto& msgs = messages.at(kind);
    auto top = std::max_element(msgs.begin(), msgs.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    out.push_back({kind, n, top->first, top->second});
  }
  std::sort(out.begin(), out.end(), [](const LogErrorKind& a, const LogErrorKind& b) {
    return TrialErrorName(a.kind) < TrialErrorName(b.kind);
  });
  return out;
}

// A network's tasks on a target (`members`, indices into `tasks`): their count, trials and the
// network's estimated time; each task's share of it, when every task has a time.
LogNetworkSummary SummarizeNetwork(const std::vector<size_t>& members,
                                   std::vector<LogTaskSummary>& tasks) {
  LogNetworkSummary n;
  n.name = tasks[members.front()].network;
  n.target = tasks[members.front()].target;
  std::vector<NetworkTask> times;
  for (size_t i : members) {
    const LogTaskSummary& t = tasks[i];
    n.tasks++;
    n.trials += t.trials;
    times.push_back(
        {static_cast<double>(t.count), t.has_best ? t.best.mean : TaskScheduler::kNoTime});
  }
  const NetworkTime time = EstimateNetworkTime(times);
  n.missing = time.missing;
  n.seconds = time.seconds;
  if (time.complete()) {
    for (size_t k = 0; k < members.size(); ++k) {
      tasks[members[k]].share = time.shares[k];
      tasks[members[k]].network_seconds = time.seconds;
    }
  }
  return n;
}

}  // namespace

LogSummary SummarizeLog(const std::vector<Record>& records) {
  struct Group {
    LogTaskSummary summary;
    std::set<uint64_t> configs;
    std::map<TrialError, int> errors;
    std::map<TrialError, std::map<std::string, int>> messages;
    json workload;
  };
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  for (const auto& r : records) {
    const std::string key = TaskTargetKey(r);
    auto [it, fresh] = groups.try_emplace(key);
    Group& g = it->second;
    if (fresh) {
      order.push_back(key);
      g.summary.task = r.task;
      g.summary.target = r.target;
      g.workload = r.workload;
    }
    g.summary.trials++;
    g.configs.insert(r.config_index);
    g.summary.devices.insert(r.device.name);
    g.summary.tuners.insert(r.tuner);
    if (g.workload.is_null() && !r.workload.is_null()) g.workload = r.workload;
    if (r.ok()) {
      g.summary.ok++;
    } else {
      g.errors[r.error]++;
      g.messages[r.error][r.message.substr(0, r.message.find('\n'))]++;
    }
  }
  for (const auto& b : BestRecords(records)) {  // the fastest device kind's, per task and target
    LogTaskSummary& t = groups.at(TaskTargetKey(b)).summary;
    if (!t.has_best || b.mean < t.best.mean) t.best = b;
    t.has_best = true;
  }

  LogSummary out;
  // Each network's tasks on a target, in log order, by "NAME  [TARGET]": indices into out.tasks.
  std::map<std::string, std::vector<size_t>> networks;
  for (const auto& key : order) {
    Group& g = groups.at(key);
    LogTaskSummary& t = g.summary;
    t.unique_configs = g.configs.size();
    t.errors = ErrorKinds(g.errors, g.messages);
    t.in_network = ReadWorkload(g.workload, t);
    if (t.in_network) networks[t.network + "  [" + t.target + "]"].push_back(out.tasks.size());
    out.tasks.push_back(std::move(t));
  }
  for (const auto& [name_target, members] : networks) {
    out.networks.push_back(SummarizeNetwork(members, out.tasks));
  }
  return out;
}

json LogSummary::ToJson() const {
  json out = json::array();
  for (const auto& t : tasks) {
    json j = {{"task", t.task.Key()}, {"target", t.target},
              {"trials", t.trials},   {"unique_configs", t.unique_configs},
              {"ok", t.ok},           {"devices", t.devices},
              {"tuners", t.tuners}};
    json errors = json::object();
    for (const auto& e : t.errors) {
      errors[std::string(TrialErrorName(e.kind))] = {{"count", e.count},
                                                     {"commonest_message", e.commonest_message},
                                                     {"commonest_count", e.commonest_count}};
    }
    j["errors"] = errors;
    if (t.has_best) {
      j["best"] = {{"gflops", t.best.gflops()},
                   {"mean_s", t.best.mean},
                   {"config", t.best.config_values},
                   {"index", t.best.config_index},
                   {"device", t.best.device.name}};
    }
    if (t.in_network) {
      j["workload"] = {{"name", t.network}, {"layer", t.layer}, {"count", t.count}};
      if (t.share >= 0) {
        j["workload"]["share"] = t.share;
        j["workload"]["network_ms"] = t.network_seconds * 1e3;
      }
    }
    out.push_back(j);
  }
  return out;
}

Expected<BestSoFarPlot> PlotBestSoFar(const std::vector<Record>& records) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> series;
  for (const auto& r : records) {
    std::string key = r.task.Key() + " " + r.tuner + " " + r.run_id;
    auto [it, fresh] = series.try_emplace(key);
    if (fresh) order.push_back(key);
    double prev = it->second.empty() ? 0 : it->second.back();
    it->second.push_back(std::max(prev, r.gflops()));
  }
  if (order.empty()) return Status(ErrorCode::kInvalidArgument, "no records to plot");
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
  return BestSoFarPlot{std::move(svg), order.size(), max_n};
}

}  // namespace crosstune::tuner
