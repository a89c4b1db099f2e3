// info, upload, download, ls, rm, run, bench: the commands that talk to one crosstune-server.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
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
#include "crosstune/client/session.h"
#include "crosstune/client/time_stats.h"
#include "crosstune/tensor.h"
#include "crosstune/timing.h"

namespace crosstune::cli {
namespace {

using nlohmann::json;

std::unique_ptr<client::Session> Open(const ConnectFlags& flags) {
  return Check(OpenSession(flags));
}

json DeviceJson(const msg::DeviceInfo& d) {
  json gpus = json::array();
  for (const auto& g : d.gpus) {
    gpus.push_back({{"name", g.name},
                    {"arch", g.arch},
                    {"memory_bytes", g.memory_bytes},
                    {"multiprocessors", g.multiprocessors},
                    {"max_threads_per_block", g.max_threads_per_block},
                    {"max_shared_per_block", g.max_shared_per_block},
                    {"max_shared_per_block_optin", g.max_shared_per_block_optin},
                    {"max_registers_per_block", g.max_registers_per_block},
                    {"warp_size", g.warp_size}});
  }
  return {{"arch", d.arch},
          {"triple", d.triple},
          {"cpu_model", d.cpu_model},
          {"cpu_features", d.cpu_features},
          {"cores", d.cores},
          {"memory_bytes", d.memory_bytes},
          {"max_tensor_bytes", d.max_tensor_bytes},
          {"os", d.os},
          {"gpus", gpus},
          {"gpu_status", d.gpu_status},
          {"version", d.version},
          {"protocol", fmt::format("{}.{}", d.protocol_major, d.protocol_minor)}};
}

json FileJson(const msg::FileEntry& f) {
  return {{"path", f.path}, {"size", f.size}, {"sha256", f.sha256_hex}};
}

// --- info, upload, download, ls, rm -------------------------------------------------------------

void RegisterInfo(CLI::App& app) {
  struct Opts {
    ConnectFlags conn;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("info", "Describe a device: arch, cpu, cores, memory, GPUs");
  AddConnectOptions(cmd, &o->conn);
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->callback([o] {
    auto session = Open(o->conn);
    msg::DeviceInfo d = Check(session->Info());
    if (o->json) {
      json j = DeviceJson(d);
      j["server"] = session->server();
      PrintJson(j, 2);
      return;
    }
    std::string features;
    for (const auto& f : d.cpu_features) features += (features.empty() ? "" : " ") + f;
    std::string gpus;
    for (const auto& g : d.gpus) {
      gpus += (gpus.empty() ? "" : ", ") +
              fmt::format("{} ({}, {})", g.name, g.arch, ByteSize(g.memory_bytes));
    }
    if (gpus.empty()) gpus = d.gpu_status.empty() ? "none" : "none (" + d.gpu_status + ")";
    std::printf("server    %s\n", session->server().c_str());
    std::printf("arch      %s (%s)\n", d.arch.c_str(), d.triple.c_str());
    std::printf("cpu       %s, %u cores\n", d.cpu_model.empty() ? "unknown" : d.cpu_model.c_str(),
                d.cores);
    std::printf("features  %s\n", features.empty() ? "-" : features.c_str());
    std::printf("memory    %s\n", ByteSize(d.memory_bytes).c_str());
    if (d.max_tensor_bytes > 0) {
      std::printf("tensors   %s per session\n", ByteSize(d.max_tensor_bytes).c_str());
    }
    std::printf("os        %s\n", d.os.c_str());
    std::printf("gpus      %s\n", gpus.c_str());
    std::printf("version   crosstune %s, protocol %u.%u\n", d.version.c_str(), d.protocol_major,
                d.protocol_minor);
  });
}

void RegisterFileCommands(CLI::App& app) {
  // Each crosstune invocation is one session, and a session's workspace ends with it.
  const char* kWorkspaceNote =
      "Note: the server gives each session a fresh workspace and removes it when the session "
      "ends; `crosstune run` and `bench` upload their module themselves.";

  struct UploadOpts {
    ConnectFlags conn;
    std::string file, as;
    bool json = false;
  };
  auto up = std::make_shared<UploadOpts>();
  auto* upload = app.add_subcommand("upload", "Upload a file to a device (SHA-256 checked)");
  upload->footer(kWorkspaceNote);
  AddConnectOptions(upload, &up->conn);
  upload->add_option("file", up->file, "local file")->required()->check(CLI::ExistingFile);
  upload->add_option("--as", up->as, "name in the workspace (default: the file's name)");
  upload->add_flag("--json", up->json, "machine-readable output");
  upload->callback([up] {
    auto session = Open(up->conn);
    std::string remote =
        up->as.empty() ? std::filesystem::path(up->file).filename().string() : up->as;
    msg::FileEntry f = Check(session->Upload(up->file, remote));
    if (up->json) {
      PrintJson(FileJson(f));
    } else {
      std::printf("uploaded %s -> %s (%s, sha256 %s)\n", up->file.c_str(), f.path.c_str(),
                  ByteSize(f.size).c_str(), f.sha256_hex.c_str());
    }
  });

  struct DownloadOpts {
    ConnectFlags conn;
    std::string remote, local;
  };
  auto down = std::make_shared<DownloadOpts>();
  auto* download = app.add_subcommand("download", "Download a file from a device workspace");
  download->footer(kWorkspaceNote);
  AddConnectOptions(download, &down->conn);
  download->add_option("remote", down->remote, "path in the workspace")->required();
  download->add_option("local", down->local, "local file (default: the remote file's name)");
  download->callback([down] {
    auto session = Open(down->conn);
    std::string local =
        down->local.empty() ? std::filesystem::path(down->remote).filename().string() : down->local;
    msg::FileEntry f = Check(session->Download(down->remote, local));
    std::printf("downloaded %s -> %s (%s)\n", f.path.c_str(), local.c_str(),
                ByteSize(f.size).c_str());
  });

  struct LsOpts {
    ConnectFlags conn;
    bool json = false;
  };
  auto ls_o = std::make_shared<LsOpts>();
  auto* ls = app.add_subcommand("ls", "List the files in a device workspace");
  ls->footer(kWorkspaceNote);
  AddConnectOptions(ls, &ls_o->conn);
  ls->add_flag("--json", ls_o->json, "machine-readable output");
  ls->callback([ls_o] {
    auto session = Open(ls_o->conn);
    auto files = Check(session->ListFiles());
    if (ls_o->json) {
      json j = json::array();
      for (const auto& f : files) j.push_back(FileJson(f));
      PrintJson(j);
      return;
    }
    for (const auto& f : files)
      std::printf("%12llu  %s\n", static_cast<unsigned long long>(f.size), f.path.c_str());
  });

  struct RmOpts {
    ConnectFlags conn;
    std::vector<std::string> paths;
  };
  auto rm_o = std::make_shared<RmOpts>();
  auto* rm = app.add_subcommand("rm", "Remove files from a device workspace");
  rm->footer(kWorkspaceNote);
  AddConnectOptions(rm, &rm_o->conn);
  rm->add_option("paths", rm_o->paths, "paths in the workspace")->required();
  rm->callback([rm_o] {
    auto session = Open(rm_o->conn);
    for (const auto& p : rm_o->paths) Check(session->RemoveFile(p));
  });
}

// --- run, bench ---------------------------------------------------------------------------------

struct CallFlags {
  ConnectFlags conn;
  std::string module_file;
  std::string as;
  std::string function;
  std::vector<std::string> args;
  std::vector<std::string> outs;
  uint64_t seed = 0;
  double call_timeout_s = 0;
  uint32_t threads = 0;
  bool json = false;
};

void AddCallOptions(CLI::App* cmd, CallFlags* f) {
  AddConnectOptions(cmd, &f->conn);
  cmd->add_option("module", f->module_file, "kernel module (.so or .ctpkg) to upload and load")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--as", f->as, "name in the workspace (default: the file's name)");
  cmd->add_option("--func,-f", f->function, "function to call")->required();
  cmd->add_option("--arg,-a", f->args,
                  "argument, in order: FILE.npy, SHAPExDTYPE:random|zeros|ones, an integer "
                  "(42, i:42) or a float (2.5, f:2)");
  cmd->add_option("--out,-o", f->outs,
                  "save a tensor argument after the call: FILE (the last tensor) or N=FILE "
                  "(argument N, 0-based)");
  cmd->add_option("--seed", f->seed, "seed for :random tensors (argument i uses seed+i)")
      ->capture_default_str();
  cmd->add_option("--call-timeout", f->call_timeout_s,
                  "seconds one call may run on the device (default: the server's)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--threads", f->threads,
                  "threads the module's parallel loops may use (default: the server's --threads)")
      ->check(CLI::Range(1u, 4096u));
  cmd->add_flag("--json", f->json, "machine-readable output");
}

// A prepared call: the session, the loaded module, the remote tensors and the wire arguments.
struct PreparedCall {
  std::unique_ptr<client::Session> session;
  client::RemoteModule module;
  msg::DeviceInfo device;
  std::vector<ArgSpec> specs;
  std::vector<client::RemoteTensor> tensors;  // per argument; unused for scalars
  std::vector<bool> is_bool;
  std::vector<msg::Arg> args;
  std::map<int, std::string> outs;
};

PreparedCall Prepare(const CallFlags& f) {
  PreparedCall c;
  for (const auto& text : f.args) c.specs.push_back(Check(ParseArgSpec(text)));
  c.outs = Check(ParseOutSpecs(f.outs, c.specs));
  // What the tensors take, known before anything is read or generated: a missing file fails
  // before connecting, and tensors the device cannot hold fail before the host allocates them.
  const uint64_t tensor_bytes = Check(ArgTensorBytes(c.specs));

  c.session = Open(f.conn);
  c.device = Check(c.session->Info());
  Check(CheckTensorsFit(tensor_bytes, c.device, /*on_gpu=*/false, "--arg"));
  std::vector<client::NpyArray> host(c.specs.size());
  for (size_t i = 0; i < c.specs.size(); ++i) {
    if (c.specs[i].is_tensor()) host[i] = Check(MakeHostTensor(c.specs[i], f.seed + i));
  }
  std::string remote =
      f.as.empty() ? std::filesystem::path(f.module_file).filename().string() : f.as;
  Check(c.session->Upload(f.module_file, remote).status());
  auto module = c.session->LoadModule(remote);
  if (!module.ok() && module.status().message().find(remote) == std::string::npos) {
    Fail(f.module_file + ": " + module.status().message());
  }
  c.module = Check(std::move(module));

  const auto& fns = c.module.info().functions;
  auto fn =
      std::find_if(fns.begin(), fns.end(), [&](const auto& x) { return x.name == f.function; });
  if (fn == fns.end()) {
    std::string names;
    for (const auto& x : fns) names += (names.empty() ? "" : ", ") + x.name;
    Fail(f.module_file + ": no function '" + f.function + "' (it has: " + names + ")");
  }
  Check(MatchSignature(f.function, fn->signature, &c.specs));

  c.tensors.resize(c.specs.size());
  c.is_bool.assign(c.specs.size(), false);
  for (size_t i = 0; i < c.specs.size(); ++i) {
    const ArgSpec& s = c.specs[i];
    if (s.is_tensor()) {
      c.tensors[i] = Check(c.session->AllocTensor(host[i].shape, host[i].dtype));
      Check(c.tensors[i].CopyFrom(host[i].data.data(), host[i].data.size()));
      c.is_bool[i] = host[i].is_bool;
      host[i].data = {};
      c.args.push_back(client::CallArg::Tensor(c.tensors[i]));
    } else if (s.kind == ArgSpec::Kind::kInt) {
      c.args.push_back(client::CallArg::Int(s.i));
    } else {
      c.args.push_back(client::CallArg::Float(s.f));
    }
  }
  return c;
}

json SaveOutputs(PreparedCall& c, bool quiet) {
  json saved = json::array();
  for (const auto& [index, path] : c.outs) {
    const client::RemoteTensor& t = c.tensors[index];
    std::vector<uint8_t> data(t.nbytes());
    Check(t.CopyTo(data.data(), data.size()));
    Check(client::WriteNpy(path, t.shape(), t.dtype(), data.data(), data.size(), c.is_bool[index]));
    saved.push_back(
        {{"arg", index}, {"path", path}, {"shape", t.shape()}, {"dtype", DTypeName(t.dtype())}});
    if (!quiet) {
      std::printf("saved     arg %d (%sx%s) -> %s\n", index, ShapeString(t.shape()).c_str(),
                  DTypeName(t.dtype()).c_str(), path.c_str());
    }
  }
  return saved;
}

void RegisterRun(CLI::App& app) {
  auto f = std::make_shared<CallFlags>();
  auto* cmd = app.add_subcommand("run", "Upload a module, call one function once, save outputs");
  AddCallOptions(cmd, f.get());
  cmd->callback([f] {
    PreparedCall c = Prepare(*f);
    msg::CallReply r =
        Check(c.module.Call(f->function, c.args, TimeoutMs(f->call_timeout_s), f->threads));
    if (!f->json) {
      std::printf("function  %s on %s (%s)\n", f->function.c_str(), c.session->server().c_str(),
                  c.device.arch.c_str());
      std::printf("time      %.6f s (%u threads)\n", r.seconds, r.threads);
    }
    json saved = SaveOutputs(c, f->json);
    if (f->json) {
      json j = {{"function", f->function}, {"server", c.session->server()}, {"arch", c.device.arch},
                {"seconds", r.seconds},    {"threads", r.threads},          {"ret", r.ret},
                {"outputs", saved}};
      PrintJson(j);
    }
  });
}

void RegisterBench(CLI::App& app) {
  struct BenchFlags {
    CallFlags call;
    client::TimeOptions time;
    double flops = 0;
  };
  auto b = std::make_shared<BenchFlags>();
  b->time.timing.number = 10;
  b->time.timing.repeat = 5;
  auto* cmd =
      app.add_subcommand("bench", "Time a function on the device (the server's time evaluator)");
  AddCallOptions(cmd, &b->call);
  AddTimingFlags(cmd, &b->time.timing, "calls");
  cmd->add_option("--flops", b->flops, "floating-point operations per call, to report GFLOP/s");
  cmd->callback([b] {
    CallFlags& f = b->call;
    PreparedCall c = Prepare(f);
    client::TimeOptions options = b->time;
    options.timeout_ms = TimeoutMs(f.call_timeout_s);
    options.threads = f.threads;
    msg::TimeReply r = Check(c.module.Time(f.function, c.args, options));
    if (r.seconds_per_call.empty()) Fail("the server returned no measurements");
    const client::TimeStats t = client::SummarizeTimes(r);
    const std::vector<double>& s = r.seconds_per_call;
    const size_t rounds = s.size();
    const double mean = t.mean, median = t.median, stddev = t.std;
    const double gflops = t.Gflops(b->flops);
    json saved = SaveOutputs(c, f.json);
    if (f.json) {
      json j = {{"function", f.function}, {"server", c.session->server()},
                {"arch", c.device.arch},  {"number", r.number},
                {"repeat", s.size()},     {"seconds_per_call", r.seconds_per_call},
                {"mean_s", mean},         {"median_s", median},
                {"min_s", t.min},         {"max_s", t.max},
                {"std_s", stddev},        {"threads", r.threads},
                {"outputs", saved}};
      if (gflops > 0) j["gflops"] = gflops;
      PrintJson(j);
      return;
    }
    std::printf("function  %s on %s (%s)\n", f.function.c_str(), c.session->server().c_str(),
                c.device.arch.c_str());
    std::printf("rounds    %zu x %u calls, %u threads\n", rounds, r.number, r.threads);
    std::printf("time      median %.4f ms  mean %.4f ms  min %.4f ms  max %.4f ms  std %.4f ms\n",
                median * 1e3, mean * 1e3, t.min * 1e3, t.max * 1e3, stddev * 1e3);
    if (gflops > 0) std::printf("speed     %.2f GFLOP/s (median)\n", gflops);
  });
}

}  // namespace

void RegisterSessionCommands(CLI::App& app) {
  RegisterInfo(app);
  RegisterFileCommands(app);
  RegisterRun(app);
  RegisterBench(app);
}

}  // namespace crosstune::cli
