// `crosstune build`: a thin wrapper over crosstune::builder (in the compiler module,
// compiler_module.h).
//
//   crosstune build kernel.c --target "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72" -o k.ctpkg
//   crosstune build kernel.cu --target "cuda -arch=sm_90" -o k_gpu.ctpkg
//   crosstune build kernel.c --target auto --server board:9090 -o k.ctpkg
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler_module.h"
#include "connect.h"
#include "crosstune/builder/backend.h"
#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/package.h"

namespace crosstune::cli {
namespace {

std::string ReadFileOrFail(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Fail(path + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), {});
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
  std::string cache_dir = builder::DefaultCacheDir();
  bool no_cache = false;
  double build_timeout_s = 120;
  ConnectFlags conn;
};

void RunBuild(const BuildOpts& o) {
  const builder::TargetKind source_kind = builder::SourceKind(o.source);
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
    auto t = builder::TargetFromDevice(*info, source_kind);
    if (!t.ok()) Fail(t.status().message());
    req.target = *t;
    std::fprintf(stderr, "crosstune: target from the device: %s\n", req.target.ToString().c_str());
  } else {
    auto t = builder::ParseTarget(o.target);
    if (!t.ok()) Fail(t.status().message());
    req.target = *t;
  }
  if (source_kind != req.target.kind) {
    const builder::TargetBackend& want = builder::BackendFor(source_kind);
    Fail(o.source + ": " + std::string(want.source_language()) + " source needs a " +
         std::string(want.kind()) + " target (e.g. --target " + std::string(want.example_target()) +
         ")");
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

}  // namespace

void RegisterBuildCommand(CLI::App& app) {
  auto o = std::make_shared<BuildOpts>();
  auto* build = app.add_subcommand("build", CompilerCommandHelp("build"));
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
}

}  // namespace crosstune::cli
