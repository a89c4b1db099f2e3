// crosstune-bench-builder: the builder's worker pool (in-process clang/LLVM + lld, one worker per
// core) against what a user would do instead — `clang -c` then `ld.lld -shared` as subprocesses on
// the same number of cores — building the same generated aarch64 kernel variants, cache off for
// both, alternating the two sides. Prints one JSON object:
//   {"variants", "workers", "rounds", "pool_builds_per_s", "subprocess_builds_per_s", "speedup",
//   ...}
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"

extern char** environ;

namespace crosstune {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// A tiled float matmul whose tile sizes, unroll and accumulation order vary per variant, the kind
// of candidates a tuner generates.
std::string Variant(int i) {
  int ti = 4 << (i % 4), tj = 4 << ((i / 4) % 4), unroll = 1 + (i / 16) % 4, order = (i / 64) % 4;
  char head[256];
  std::snprintf(
      head, sizeof(head),
      "#define TI %d\n#define TJ %d\n#define UNROLL %d\n#define ORDER %d\n#define VARIANT %d\n", ti,
      tj, unroll, order, i);
  return std::string(head) + R"(
#include <stdint.h>
#include "kernel_abi.h"
static int32_t mm(const ct_arg* args, int32_t num_args) {
  const float* a = (const float*)args[0].value.v_tensor->data;
  const float* b = (const float*)args[1].value.v_tensor->data;
  float* c = (float*)args[2].value.v_tensor->data;
  int64_t n = args[3].value.v_int64;
  for (int64_t i0 = 0; i0 < n; i0 += TI)
    for (int64_t j0 = 0; j0 < n; j0 += TJ)
      for (int64_t i = i0; i < i0 + TI && i < n; ++i) {
        for (int64_t j = j0; j < j0 + TJ && j < n; ++j) {
          float acc = ORDER * 0.0f;
#pragma clang loop unroll_count(UNROLL)
          for (int64_t k = 0; k < n; ++k) acc += a[i * n + k] * b[k * n + j];
          c[i * n + j] = acc + VARIANT * 0.0f;
        }
      }
  return 0;
}
static const ct_function kFns[] = {{"mm", mm, "ttti"}};
CT_DEFINE_MODULE("bench", kFns, 0)
)";
}

int Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct Side {
  double seconds = 0;
  int failures = 0;
};

Side RunPool(builder::Builder& b, const std::vector<builder::BuildRequest>& reqs) {
  auto t0 = SteadyClock::now();
  auto results = b.BuildMany(reqs);
  Side s;
  s.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  for (const auto& r : results) s.failures += r.ok() ? 0 : 1;
  return s;
}

Side RunSubprocess(const std::vector<std::string>& sources, int workers, const std::string& clang,
                   const std::string& lld, const fs::path& dir) {
  for (size_t i = 0; i < sources.size(); ++i) {
    std::ofstream(dir / ("k" + std::to_string(i) + ".c")) << sources[i];
  }
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  auto t0 = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < sources.size(); i = next++) {
        std::string base = (dir / ("k" + std::to_string(i))).string();
        int rc = Spawn({clang, "--target=aarch64-linux-gnu", "-O3", "-ffreestanding", "-fPIC",
                        "-nostdinc", "-isystem", std::string(CT_CLANG_RESOURCE_DIR) + "/include",
                        "-I", builder::KernelIncludeDir(), "-c", base + ".c", "-o", base + ".o"});
        if (rc == 0) rc = Spawn({lld, "-shared", "--threads=1", base + ".o", "-o", base + ".so"});
        if (rc != 0) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  Side s;
  s.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  s.failures = failures;
  return s;
}

}  // namespace
}  // namespace crosstune

int main(int argc, char** argv) {
  using namespace crosstune;
  CLI::App app{"crosstune-bench-builder: worker pool vs clang+ld.lld subprocesses"};
  int variants = 200;
  int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int rounds = 1;
  std::string clang = CT_CLANG, lld = CT_LLD;
  app.add_option("--variants", variants, "kernel variants per round")->capture_default_str();
  app.add_option("--workers", workers, "pool workers = concurrent subprocess pipelines")
      ->capture_default_str();
  app.add_option("--rounds", rounds, "rounds per side, alternating")->capture_default_str();
  app.add_option("--clang", clang, "clang for the baseline")->capture_default_str();
  app.add_option("--lld", lld, "ld.lld for the baseline")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> sources;
  std::vector<builder::BuildRequest> reqs;
  auto target = builder::ParseTarget("llvm -mtriple=aarch64-linux-gnu");
  for (int i = 0; i < variants; ++i) {
    sources.push_back(Variant(i));
    builder::BuildRequest r;
    r.source = sources.back();
    r.target = *target;
    reqs.push_back(std::move(r));
  }
  builder::BuilderOptions bo;
  bo.workers = workers;  // no cache_dir: every build compiles
  auto b = builder::Builder::Create(bo);
  if (!b.ok()) {
    std::fprintf(stderr, "crosstune-bench-builder: error: %s\n", b.status().ToString().c_str());
    return 1;
  }
  fs::path dir =
      fs::temp_directory_path() / ("crosstune-bench-builder-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Side pool, sub;
  for (int r = 0; r < rounds; ++r) {
    Side s = RunSubprocess(sources, workers, clang, lld, dir);
    Side p = RunPool(**b, reqs);
    sub.seconds += s.seconds;
    sub.failures += s.failures;
    pool.seconds += p.seconds;
    pool.failures += p.failures;
  }
  fs::remove_all(dir);
  double total = static_cast<double>(variants) * rounds;
  double pool_rate = pool.seconds > 0 ? total / pool.seconds : 0;
  double sub_rate = sub.seconds > 0 ? total / sub.seconds : 0;
  nlohmann::json j = {{"variants", variants},
                      {"workers", workers},
                      {"rounds", rounds},
                      {"target", target->ToString()},
                      {"pool_builds_per_s", pool_rate},
                      {"subprocess_builds_per_s", sub_rate},
                      {"speedup", sub_rate > 0 ? pool_rate / sub_rate : 0},
                      {"pool_failures", pool.failures},
                      {"subprocess_failures", sub.failures},
                      {"llvm", builder::LlvmVersion()}};
  std::printf("%s\n", j.dump(2).c_str());
  return pool.failures == 0 && sub.failures == 0 ? 0 : 1;
}
