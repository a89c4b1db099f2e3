// crosstune-bench-peak: this machine's fp32 FMA peak, for the benchmarks that report a result as
// a fraction of it (crosstune-bench-model). Each thread runs independent chains of vector FMAs
// (enough of them to cover the FMA units' latency), with the widest ISA the CPU has: AVX-512F,
// AVX2+FMA, or scalar fmaf elsewhere. The best of --rounds rounds, for each thread count.
//   crosstune-bench-peak [--threads 1,2] [--rounds 5] [--seconds 0.2]
// Prints one JSON object: {"isa", "per_threads": [{"threads", "gflops"}, ...]}.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/guarded_main.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

// Each kernel runs `iters` iterations and returns the flops it did; the sum it writes to *sink
// keeps the chains alive.
using Kernel = double (*)(int64_t iters, float* sink);

#if defined(__x86_64__)
__attribute__((target("avx512f"))) double FmaAvx512(int64_t iters, float* sink) {
  constexpr int kChains = 16;  // 2 FMA units x 4-cycle latency, with room
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k) * 1e-3f);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], b, c);
  }
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  alignas(64) float lanes[16];  // (GCC 12's _mm512_reduce_add_ps warns inside its own header)
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  *sink = total;
  return static_cast<double>(iters) * kChains * 16 * 2;
}

__attribute__((target("avx2,fma"))) double FmaAvx2(int64_t iters, float* sink) {
  constexpr int kChains = 12;  // 16 ymm registers: 12 chains and the two operands
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k) * 1e-3f);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], b, c);
  }
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  *sink = total;
  return static_cast<double>(iters) * kChains * 8 * 2;
}
#endif

double FmaScalar(int64_t iters, float* sink) {
  constexpr int kChains = 8;
  float acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = static_cast<float>(k) * 1e-3f;
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 8
    for (int k = 0; k < kChains; ++k) acc[k] = std::fmaf(acc[k], 0.999999f, 1e-7f);
  }
  float total = 0;
  for (float v : acc) total += v;
  *sink = total;
  return static_cast<double>(iters) * kChains * 2;
}

struct Isa {
  const char* name;
  Kernel kernel;
};

Isa Widest() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", FmaAvx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2+fma", FmaAvx2};
#endif
  return {"scalar", FmaScalar};
}

// GFLOP/s of `threads` threads each running `iters` iterations at once (wall time of all).
double Round(Kernel kernel, int threads, int64_t iters) {
  std::vector<float> sinks(static_cast<size_t>(threads) * 16);
  std::vector<double> flops(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { flops[t] = kernel(iters, &sinks[static_cast<size_t>(t) * 16]); });
  }
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / s / 1e9;
}

int BenchMain(int argc, char** argv) {
  CLI::App app{"This machine's fp32 FMA peak (GFLOP/s) at each thread count, as JSON"};
  std::vector<int> threads{1, 2};
  int rounds = 5;
  double seconds = 0.2;
  app.add_option("--threads", threads, "thread counts")->delimiter(',')->check(CLI::Range(1, 1024));
  app.add_option("--rounds", rounds, "rounds per thread count (the best is kept)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--seconds", seconds, "length of one round")->check(CLI::Range(0.01, 60.0));
  CLI11_PARSE(app, argc, argv);

  const Isa isa = Widest();
  // Iterations for about --seconds on one thread, from a short calibration run.
  int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
    isa.kernel(iters, &sink);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= seconds / 8 || iters > (int64_t{1} << 40)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / s));
      break;
    }
    iters *= 4;
  }
  nlohmann::json per = nlohmann::json::array();
  for (int n : threads) {
    double best = 0;
    for (int r = 0; r < rounds; ++r) best = std::max(best, Round(isa.kernel, n, iters));
    per.push_back({{"threads", n}, {"gflops", best}});
  }
  std::printf("%s\n", nlohmann::json{{"isa", isa.name}, {"per_threads", per}}.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-bench-peak", [&] { return BenchMain(argc, argv); });
}
