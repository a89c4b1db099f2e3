// `crosstune build` and `crosstune inspect`: thin wrappers over crosstune::builder and common's
// package checks.
//
//   crosstune build kernel.c --target "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72" -o k.ctpkg
//   crosstune build kernel.cu --target "cuda -arch=sm_90" -o k_gpu.ctpkg
//   crosstune build kernel.c --target auto --server board:9090 -o k.ctpkg
//   crosstune inspect k.ctpkg [--json]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "connect.h"
#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/package.h"

namespace crosstune::cli {
namespace {

using nlohmann::json;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string ReadFileOrFail(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Fail(path + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string DefaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/crosstune/builds";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/crosstune/builds";
  return "";
}

std::string Stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  base = base.substr(0, base.find('.'));
  std::string out;
  for (char c : base)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out.empty() ? "kernel" : out;
}

struct BuildOpts {
  std::string source;
  std::string target;
  std::string output;
  std::string name;
  std::vector<std::string> flags;
  std::string graph;
  std::string params;
  std::string cache_dir = DefaultCacheDir();
  bool no_cache = false;
  double build_timeout_s = 120;
  ConnectFlags conn;
};

void RunBuild(const BuildOpts& o) {
  const bool cuda_source = EndsWith(o.source, ".cu");
  builder::BuildRequest req;
  req.source = ReadFileOrFail(o.source);
  req.flags = o.flags;
  req.name = o.name.empty() ? Stem(o.source) : o.name;
  req.source_name = o.source.substr(o.source.find_last_of('/') + 1);
  req.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.build_timeout_s * 1000));
  if (o.target == "auto") {
    if (o.conn.server.empty() && o.conn.tracker.empty()) {
      Fail(
          "--target auto needs a device: pass --server HOST:PORT or --tracker HOST:PORT --key KEY");
    }
    auto session = OpenSession(o.conn);
    if (!session.ok()) Fail(session.status().message());
    auto info = (*session)->Info();
    if (!info.ok()) Fail(info.status().message());
    auto t = builder::TargetFromDevice(*info, cuda_source);
    if (!t.ok()) Fail(t.status().message());
    req.target = *t;
    std::fprintf(stderr, "crosstune: target from the device: %s\n", req.target.ToString().c_str());
  } else {
    auto t = builder::ParseTarget(o.target);
    if (!t.ok()) Fail(t.status().message());
    req.target = *t;
  }
  if (cuda_source != req.target.is_cuda()) {
    Fail(o.source + (cuda_source
                         ? ": CUDA source needs a cuda target (e.g. --target \"cuda -arch=sm_90\")"
                         : ": C source needs an llvm target (e.g. --target rpi4)"));
  }
  builder::BuilderOptions bo;
  bo.workers = 1;
  if (!o.no_cache) bo.cache_dir = o.cache_dir;
  auto b = builder::Builder::Create(bo);
  if (!b.ok()) Fail(b.status().message());
  builder::BuildResult r = (*b)->Build(req);
  if (!r.diagnostics.empty() && r.ok()) std::fprintf(stderr, "%s", r.diagnostics.c_str());
  if (!r.ok()) {
    // Compiler diagnostics are several lines; print them, then the one error line.
    if (r.status.code() == ErrorCode::kBuildError) {
      std::fprintf(stderr, "%s", r.status.message().c_str());
      if (!r.status.message().empty() && r.status.message().back() != '\n')
        std::fprintf(stderr, "\n");
      Fail(o.source + ": build failed for " + req.target.ToString());
    }
    Fail(o.source + ": " + r.status.message());
  }
  std::string graph = o.graph.empty() ? "" : ReadFileOrFail(o.graph);
  std::string params = o.params.empty() ? "" : ReadFileOrFail(o.params);
  auto m = builder::WriteBuildPackage(req, r, o.output, graph, params);
  if (!m.ok()) Fail(o.output + ": " + m.status().message());
  std::string fns;
  for (const auto& f : m->functions)
    fns += (fns.empty() ? "" : ", ") + f.name + "(" + f.signature + ")";
  std::printf("wrote %s: %s, functions %s, %s in %.0f ms\n", o.output.c_str(), m->target.c_str(),
              fns.c_str(), r.cache_hit ? "cached" : "built", r.build_seconds * 1000);
}

json InspectJson(const pkg::Manifest& m, bool valid, const std::string& error) {
  json j = json::parse(pkg::ManifestToJson(m));
  j["valid"] = valid;
  if (!error.empty()) j["error"] = error;
  return j;
}

void RunInspect(const std::string& path, bool as_json) {
  auto p = pkg::OpenPackage(path);
  if (!p.ok()) {
    if (as_json)
      std::printf("%s\n", json{{"valid", false}, {"error", p.status().message()}}.dump(2).c_str());
    Fail(path + ": " + p.status().message());
  }
  const pkg::Manifest& m = p->manifest;
  if (as_json) {
    std::printf("%s\n", InspectJson(m, true, "").dump(2).c_str());
    return;
  }
  std::string features;
  for (const auto& f : m.required_features) features += (features.empty() ? "" : " ") + f;
  std::printf("package   %s (valid: hashes, format v%u, ABI v%u)\n", path.c_str(), m.format_version,
              m.abi_version);
  std::printf("kind      %s\n", m.kind.c_str());
  std::printf("target    %s\n", m.target.c_str());
  std::printf("arch      %s (%s)%s%s\n", m.arch.c_str(), m.triple.c_str(),
              m.cpu.empty() ? "" : ", cpu ", m.cpu.c_str());
  std::printf("features  %s\n", features.empty() ? "(baseline only)" : features.c_str());
  std::printf("built by  crosstune %s, %s %s\n", m.builder_version.c_str(), m.compiler.c_str(),
              m.compiler_version.c_str());
  std::printf("build id  %s\n", m.build_id.c_str());
  std::printf("functions\n");
  for (const auto& f : m.functions) {
    std::string launch;
    if (!f.grid.empty()) {
      auto dims = [](const std::vector<std::string>& d) {
        std::string s;
        for (const auto& x : d) s += (s.empty() ? "" : ",") + x;
        return s;
      };
      launch = "  grid=" + dims(f.grid) + " block=" + dims(f.block);
    }
    std::printf("  %-24s %s%s\n", f.name.c_str(), f.signature.c_str(), launch.c_str());
  }
  std::printf("files\n");
  for (const auto& f : m.files) {
    std::printf("  %-24s %10llu  sha256:%s\n", f.path.c_str(),
                static_cast<unsigned long long>(f.size), f.sha256.c_str());
  }
}

}  // namespace

void RegisterBuildCommands(CLI::App& app) {
  auto o = std::make_shared<BuildOpts>();
  auto* build = app.add_subcommand("build", "Compile a kernel for a target into a .ctpkg package");
  build->add_option("source", o->source, "kernel source: .c (llvm targets) or .cu (cuda targets)")
      ->required()
      ->check(CLI::ExistingFile);
  std::string presets;
  for (const auto& [name, str] : builder::Presets())
    presets += (presets.empty() ? "" : ", ") + name;
  build
      ->add_option("-t,--target", o->target,
                   "\"llvm -mtriple=... -mcpu=... -mattr=...\", \"cuda -arch=sm_XX\", auto, or a "
                   "preset: " +
                       presets)
      ->required();
  build->add_option("-o,--output", o->output, "the package to write (.ctpkg)")->required();
  build->add_option("--name", o->name,
                    "library name inside the package (default: the source's stem)");
  build->add_option("--flag", o->flags, "extra compiler flag, repeatable (-DN=4, -O2, -ffast-math)")
      ->allow_extra_args(false);
  build->add_option("--graph", o->graph, "graph.json to ship in the package")
      ->check(CLI::ExistingFile);
  build->add_option("--params", o->params, "params.bin to ship in the package")
      ->check(CLI::ExistingFile);
  build->add_option("--cache-dir", o->cache_dir, "build cache directory")->capture_default_str();
  build->add_flag("--no-cache", o->no_cache, "always compile");
  build->add_option("--build-timeout", o->build_timeout_s, "seconds one build may take")
      ->capture_default_str();
  AddConnectOptions(build, &o->conn);
  build->callback([o] { RunBuild(*o); });

  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto* inspect = app.add_subcommand(
      "inspect", "Validate a .ctpkg and show its target, functions, files and versions");
  inspect->add_option("package", *path, "the .ctpkg file")->required();
  inspect->add_flag("--json", *as_json, "machine-readable output");
  inspect->callback([path, as_json] { RunInspect(*path, *as_json); });
}

}  // namespace crosstune::cli
