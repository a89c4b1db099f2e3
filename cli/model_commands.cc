// run-model, bench-model, params import|export: whole models on a device (client::RemoteModel)
// and TVM's params blob converted both ways with params.bin.
//
//   crosstune run-model m.ctpkg --server board:9090 --input input=x.npy --out logits.npy [--json]
//   crosstune bench-model m.ctpkg --server board:9090 [--profile] [--json]
//   crosstune params import model.params -o params.bin
//   crosstune params export m.ctpkg -o model.params        (or a params.bin)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "connect.h"
#include "crosstune/client/npy.h"
#include "crosstune/client/remote_model.h"
#include "crosstune/client/session.h"
#include "crosstune/client/time_stats.h"
#include "crosstune/graph.h"
#include "crosstune/tensor.h"
#include "crosstune/timing.h"
#include "crosstune/tvm_params.h"
#include "model_files.h"

namespace crosstune::cli {
namespace {

using nlohmann::json;

struct ModelFlags {
  ConnectFlags conn;
  std::string package;
  std::string as;
  std::vector<std::string> inputs;  // NAME=FILE.npy | NAME=random|zeros|ones
  uint64_t seed = 0;
  double call_timeout_s = 0;
  uint32_t threads = 0;
  bool json = false;
};

void AddModelOptions(CLI::App* cmd, ModelFlags* f, const char* input_help) {
  AddConnectOptions(cmd, &f->conn);
  cmd->add_option("package", f->package, "model package (.ctpkg) to upload and load")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--as", f->as, "name in the workspace (default: the file's name)");
  cmd->add_option("--input,-i", f->inputs, input_help);
  cmd->add_option("--seed", f->seed, "seed for random inputs (input i uses seed+i)")
      ->capture_default_str();
  cmd->add_option("--call-timeout", f->call_timeout_s,
                  "seconds one run may take on the device (default: the server's call timeout)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--threads", f->threads,
                  "threads the kernels' parallel loops may use (default: the server's --threads)")
      ->check(CLI::Range(1u, 4096u));
  cmd->add_flag("--json", f->json, "machine-readable output");
}

// "NAME=VALUE" -> {NAME, VALUE}; the name is whatever precedes the first '='.
std::pair<std::string, std::string> SplitAssignment(const std::string& text, const char* flag) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    Fail(fmt::format("{} '{}': expected NAME=VALUE", flag, text));
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

struct LoadedModel {
  std::unique_ptr<client::Session> session;
  client::RemoteModel model;
  msg::DeviceInfo device;
};

// Reads every --input before connecting (a bad file fails fast), uploads and loads the package,
// and sets the inputs. Inputs not given are an error unless `fill_missing`, which makes them
// random.
LoadedModel Load(const ModelFlags& f, bool fill_missing) {
  std::map<std::string, std::string> given;
  for (const auto& text : f.inputs) {
    auto [name, value] = SplitAssignment(text, "--input");
    if (!given.emplace(name, value).second) Fail("--input " + name + " is given twice");
  }
  LoadedModel m;
  m.session = Check(OpenSession(f.conn));
  m.device = Check(m.session->Info());
  std::string remote = f.as.empty() ? std::filesystem::path(f.package).filename().string() : f.as;
  Check(m.session->Upload(f.package, remote).status());
  m.model = Check(client::RemoteModel::Load(m.session.get(), remote));
  // Names are strict: a name the model does not have is an error, never ignored.
  for (const auto& [name, value] : given) {
    if (m.model.FindInput(name) == nullptr) {
      std::string names;
      for (const auto& in : m.model.info().inputs) names += (names.empty() ? "" : ", ") + in.name;
      Fail(fmt::format("{}: the model has no input '{}' (its inputs: {})", f.package, name, names));
    }
  }
  const auto& inputs = m.model.info().inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const msg::TensorInfo& in = inputs[i];
    auto it = given.find(in.name);
    std::string value = it == given.end() ? "" : it->second;
    if (value.empty()) {
      if (!fill_missing) {
        Fail(fmt::format("{}: input '{}' ({} {}) is not given; pass --input {}=FILE.npy", f.package,
                         in.name, ShapeString(in.shape), in.dtype, in.name));
      }
      value = "random";
    }
    ArgSpec spec;
    const DLDataType dtype = Check(ParseDType(in.dtype));
    if (value == "random" || value == "zeros" || value == "ones") {
      spec.kind = ArgSpec::Kind::kGenerated;
      spec.shape = in.shape;
      spec.dtype = dtype;
      spec.fill = value == "random"  ? ArgSpec::Fill::kRandom
                  : value == "zeros" ? ArgSpec::Fill::kZeros
                                     : ArgSpec::Fill::kOnes;
    } else {
      spec.kind = ArgSpec::Kind::kNpy;
      spec.path = value;
    }
    client::NpyArray host = Check(MakeHostTensor(spec, f.seed + i));
    if (host.shape != in.shape || !(host.dtype == dtype)) {
      Fail(fmt::format("input '{}' is {} {}, {} holds {} {}", in.name, ShapeString(in.shape),
                       in.dtype, value, ShapeString(host.shape), graph::TvmDTypeName(host.dtype)));
    }
    Check(m.model.SetInput(in.name, host.shape, host.dtype, host.data.data(), host.data.size()));
  }
  return m;
}

json TensorJson(const msg::TensorInfo& t) {
  return {{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"nbytes", t.nbytes}};
}

json ModelJson(const msg::ModelInfo& info) {
  json in = json::array(), out = json::array();
  for (const auto& t : info.inputs) in.push_back(TensorJson(t));
  for (const auto& t : info.outputs) out.push_back(TensorJson(t));
  return {{"inputs", in},
          {"outputs", out},
          {"nodes", info.nodes},
          {"params", info.params},
          {"params_bytes", info.params_bytes},
          {"activation_bytes", info.storage_bytes},
          {"flops", info.flops}};
}

// --- run-model ----------------------------------------------------------------------------------

void RegisterRunModel(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    std::vector<std::string> outs;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "run-model", "Upload a model package, set its inputs, run it once, save its outputs");
  AddModelOptions(cmd, &f->model,
                  "an input: NAME=FILE.npy, or NAME=random|zeros|ones (every input is needed)");
  cmd->add_option("--out,-o", f->outs,
                  "save an output: FILE (the only output) or NAME=FILE; without --out every "
                  "output is summarized");
  cmd->callback([f] {
    const ModelFlags& mf = f->model;
    LoadedModel m = Load(mf, false);
    const msg::ModelInfo& info = m.model.info();
    std::map<std::string, std::string> outs;
    for (const auto& text : f->outs) {
      if (text.find('=') == std::string::npos) {
        if (info.outputs.size() != 1) {
          Fail(fmt::format("{}: the model has {} outputs; name one: --out NAME={}", mf.package,
                           info.outputs.size(), text));
        }
        outs[info.outputs[0].name] = text;
        continue;
      }
      auto [name, path] = SplitAssignment(text, "--out");
      if (m.model.FindOutput(name) == nullptr) {
        std::string names;
        for (const auto& o : info.outputs) names += (names.empty() ? "" : ", ") + o.name;
        Fail(fmt::format("{}: the model has no output '{}' (its outputs: {})", mf.package, name,
                         names));
      }
      outs[name] = path;
    }
    msg::RunModelReply r = Check(m.model.Run(TimeoutMs(mf.call_timeout_s), mf.threads));
    json saved = json::array();
    if (!mf.json) {
      std::printf("model     %s on %s (%s), %u nodes\n", mf.package.c_str(),
                  m.session->server().c_str(), m.device.arch.c_str(), info.nodes);
      std::printf("time      %.3f ms (%u threads)\n", r.seconds * 1e3, r.threads);
    }
    for (const auto& out : info.outputs) {
      const DLDataType dtype = Check(ParseDType(out.dtype));
      std::vector<uint8_t> data(out.nbytes);
      Check(m.model.GetOutput(out.name, data.data(), data.size()));
      json o = TensorJson(out);
      auto it = outs.find(out.name);
      if (it != outs.end()) {
        Check(client::WriteNpy(it->second, out.shape, dtype, data.data(), data.size()));
        o["path"] = it->second;
      }
      if (!mf.json) {
        std::string where = it == outs.end() ? "" : " -> " + it->second;
        std::string head;
        if (dtype.code == kDLFloat && dtype.bits == 32) {
          const auto* v = reinterpret_cast<const float*>(data.data());
          const size_t n = std::min<size_t>(data.size() / 4, 5);
          for (size_t i = 0; i < n; ++i) head += fmt::format("{}{:.6g}", i ? " " : "", v[i]);
          if (data.size() / 4 > n) head += " ...";
          head = "  [" + head + "]";
        }
        std::printf("output    %s %s %s%s%s\n", out.name.c_str(), ShapeString(out.shape).c_str(),
                    out.dtype.c_str(), where.c_str(), head.c_str());
      }
      saved.push_back(std::move(o));
    }
    if (mf.json) {
      json j = {{"package", mf.package}, {"server", m.session->server()},
                {"arch", m.device.arch}, {"seconds", r.seconds},
                {"threads", r.threads},  {"model", ModelJson(info)},
                {"outputs", saved}};
      PrintJson(j);
    }
  });
}

// --- bench-model --------------------------------------------------------------------------------

void RegisterBenchModel(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    client::TimeOptions time;
    bool profile = false;
  };
  auto b = std::make_shared<Flags>();
  b->time.timing.number = 10;
  b->time.timing.repeat = 5;
  auto* cmd = app.add_subcommand(
      "bench-model",
      "Time whole runs of a model on the device; --profile times every node within whole runs "
      "and on its own");
  AddModelOptions(cmd, &b->model,
                  "an input: NAME=FILE.npy or NAME=random|zeros|ones (default: random)");
  AddTimingFlags(cmd, &b->time.timing, "runs");
  cmd->add_flag("--profile", b->profile,
                "also time every node within whole runs and on its own (same rules) and print the "
                "per-node table");
  cmd->callback([b] {
    const ModelFlags& mf = b->model;
    LoadedModel m = Load(mf, true);
    const msg::ModelInfo& info = m.model.info();
    client::TimeOptions options = b->time;
    options.timeout_ms = TimeoutMs(mf.call_timeout_s);
    options.threads = mf.threads;
    msg::TimeReply r = Check(m.model.Time(options));
    if (r.seconds_per_call.empty()) Fail("the server returned no measurements");
    const client::TimeStats e2e = client::SummarizeTimes(r);
    std::vector<msg::NodeProfile> nodes;
    if (b->profile) nodes = Check(m.model.Profile(options));
    // The nodes' times within whole runs add up to a run less the executor's own work; their times
    // alone (warm, as the tuner measures them) are the column beside.
    double node_sum = 0, alone_sum = 0;
    for (const auto& n : nodes) {
      node_sum += n.in_run_median_seconds;
      alone_sum += n.median_seconds;
    }
    const double gflops =
        info.flops > 0 && e2e.median > 0 ? static_cast<double>(info.flops) / e2e.median / 1e9 : 0;
    if (mf.json) {
      json j = {{"package", mf.package},
                {"server", m.session->server()},
                {"arch", m.device.arch},
                {"model", ModelJson(info)},
                {"threads", r.threads},
                {"number", r.number},
                {"repeat", r.seconds_per_call.size()},
                {"seconds_per_run", r.seconds_per_call},
                {"median_s", e2e.median},
                {"mean_s", e2e.mean},
                {"min_s", e2e.min},
                {"max_s", e2e.max},
                {"std_s", e2e.std}};
      if (gflops > 0) j["gflops"] = gflops;
      if (b->profile) {
        json rows = json::array();
        for (const auto& n : nodes) {
          json row = {{"name", n.name},
                      {"op_type", n.op_type},
                      {"function", n.function},
                      {"shapes", n.shapes},
                      {"median_us", n.in_run_median_seconds * 1e6},
                      {"alone_median_us", n.median_seconds * 1e6},
                      {"alone_min_us", n.min_seconds * 1e6},
                      {"number", n.number},
                      {"flops", n.flops},
                      {"share", node_sum > 0 ? n.in_run_median_seconds / node_sum : 0}};
          if (n.flops > 0 && n.in_run_median_seconds > 0) {
            row["gflops"] = static_cast<double>(n.flops) / n.in_run_median_seconds / 1e9;
          }
          rows.push_back(std::move(row));
        }
        j["nodes"] = rows;
        j["node_sum_s"] = node_sum;
        j["alone_sum_s"] = alone_sum;
        // What a run costs beyond its kernels: the executor's loop, the watchdog, the clock.
        j["overhead_s"] = e2e.median - node_sum;
      }
      PrintJson(j);
      return;
    }
    std::printf("model     %s on %s (%s), %u nodes, %u threads\n", mf.package.c_str(),
                m.session->server().c_str(), m.device.arch.c_str(), info.nodes, r.threads);
    std::printf("memory    params %.1f MiB, activations %.1f MiB\n",
                static_cast<double>(info.params_bytes) / (1 << 20),
                static_cast<double>(info.storage_bytes) / (1 << 20));
    std::printf("rounds    %zu x %u runs\n", r.seconds_per_call.size(), r.number);
    std::printf("time      median %.4f ms  mean %.4f ms  min %.4f ms  max %.4f ms  std %.4f ms\n",
                e2e.median * 1e3, e2e.mean * 1e3, e2e.min * 1e3, e2e.max * 1e3, e2e.std * 1e3);
    if (gflops > 0) std::printf("speed     %.3g GFLOP/s (median)\n", gflops);
    if (!b->profile) return;
    std::printf("\n%-4s %-28s %-12s %-26s %-34s %11s %11s %9s %6s\n", "#", "node", "op", "kernel",
                "shapes", "in-run us", "alone us", "GFLOP/s", "share");
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto& n = nodes[i];
      const double s = n.in_run_median_seconds;
      std::string gf = n.flops > 0 && s > 0
                           ? fmt::format("{:.3g}", static_cast<double>(n.flops) / s / 1e9)
                           : "-";
      std::printf("%-4zu %-28s %-12s %-26s %-34s %11.2f %11.2f %9s %5.1f%%\n", i, n.name.c_str(),
                  n.op_type.empty() ? "-" : n.op_type.c_str(), n.function.c_str(), n.shapes.c_str(),
                  s * 1e6, n.median_seconds * 1e6, gf.c_str(),
                  node_sum > 0 ? 100 * s / node_sum : 0.0);
    }
    std::printf(
        "\nnodes     sum of in-run medians %.4f ms (alone %.4f ms); per-run overhead %.4f ms "
        "(end-to-end median minus the in-run sum)\n",
        node_sum * 1e3, alone_sum * 1e3, (e2e.median - node_sum) * 1e3);
  });
}

// --- params import | export ---------------------------------------------------------------------

void RegisterParams(CLI::App& app) {
  auto* params = app.add_subcommand(
      "params", "Convert TVM's params blob (relay.save_param_dict) to and from params.bin");
  params->require_subcommand(1);

  struct Flags {
    std::string in, out;
    bool json = false;
  };
  auto imp = std::make_shared<Flags>();
  auto* import = params->add_subcommand("import", "TVM params blob -> params.bin");
  import->add_option("blob", imp->in, "the TVM params file")->required()->check(CLI::ExistingFile);
  import->add_option("-o,--out", imp->out, "params.bin to write")->required();
  import->add_flag("--json", imp->json, "machine-readable output");
  import->callback([imp] {
    std::string blob = Check(ReadSmallFile(imp->in, kMaxTvmBlobBytes));
  pkg::ParamsWriter w;
  Status s = pkg::ImportTvmParams(blob, &w);
  if (!s.ok()) Fail(imp->in + ": " + s.message());
  blob.clear();
  Check(w.Write(imp->out));
  auto written = Check(pkg::ParamsFile::Open(imp->out));
  PrintParamsSummary(imp->in, imp->out, *written, imp->json);
});

auto exp = std::make_shared<Flags>();
auto* export_cmd = params->add_subcommand("export", "params.bin (or a package's) -> TVM blob");
export_cmd->add_option("params", exp->in, "a params.bin, or a .ctpkg whose params.bin to export")
    ->required()
    ->check(CLI::ExistingFile);
export_cmd->add_option("-o,--out", exp->out, "TVM params file to write")->required();
export_cmd->add_flag("--json", exp->json, "machine-readable output");
export_cmd->callback([exp] {
  MappedParams p = Check(OpenParamsOf(exp->in));
  std::string blob = pkg::ExportTvmParams(*p.file);
  std::ofstream out(exp->out, std::ios::binary | std::ios::trunc);
  out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
  out.close();
  if (!out) Fail(exp->out + ": write failed");
  PrintParamsSummary(exp->in, exp->out, *p.file, exp->json);
});
}  // namespace

}  // namespace crosstune::cli

void RegisterModelCommands(CLI::App& app) {
  RegisterRunModel(app);
  RegisterBenchModel(app);
  RegisterParams(app);
}

}  // namespace crosstune::cli
