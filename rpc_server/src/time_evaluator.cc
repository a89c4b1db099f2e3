#include "crosstune/server/time_evaluator.h"

#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>

namespace crosstune::server {

uint64_t GrowNumber(uint64_t number, double elapsed_s, uint32_t min_repeat_ms) {
  double target = min_repeat_ms / 1000.0;
  double by_ratio = number * 1.618;
  double by_time = elapsed_s > 0 ? number * (target / elapsed_s) : by_ratio * 1000.0;
  double next = std::ceil(std::max(by_ratio, by_time));
  if (!(next < static_cast<double>(kMaxNumber))) return kMaxNumber;
  return std::max<uint64_t>(static_cast<uint64_t>(next), number + 1);
}

Expected<TimeEvaluatorResult> RunTimeEvaluator(const TimingOptions& options,
                                               const TimeEvaluatorHooks& hooks,
                                               const std::function<Status(uint64_t n)>& run_batch,
                                               double stop_above_s) {
  if (options.repeat == 0) {
    return Status(ErrorCode::kInvalidArgument, "repeat must be at least 1");
  }
  auto after = [&] {
    if (hooks.after_batch) hooks.after_batch();
  };
  if (hooks.before_batch) hooks.before_batch(1);
  Status warm = run_batch(1);  // warm-up
  after();
  CT_RETURN_IF_ERROR(warm);

  TimeEvaluatorResult result;
  result.number = std::max<uint32_t>(options.number, 1);
  result.seconds_per_call.reserve(options.repeat);
  for (uint32_t round = 0; round < options.repeat; ++round) {
    if (round > 0 && options.cooldown_ms > 0 && hooks.sleep_ms) hooks.sleep_ms(options.cooldown_ms);
    for (;;) {
      if (options.flush_cache && hooks.flush_cache) hooks.flush_cache();
      if (hooks.before_batch) hooks.before_batch(result.number);
      double t0 = hooks.now_seconds();
      Status ran = run_batch(result.number);
      double elapsed = hooks.now_seconds() - t0;
      after();
      CT_RETURN_IF_ERROR(ran);
      if (options.min_repeat_ms > 0 && elapsed * 1000.0 < options.min_repeat_ms &&
          result.number < kMaxNumber) {
        result.number = GrowNumber(result.number, elapsed, options.min_repeat_ms);
        continue;
      }
      result.seconds_per_call.push_back(elapsed / static_cast<double>(result.number));
      break;
    }
    const bool rounds_left = round + 1 < options.repeat;
    if (stop_above_s > 0 && rounds_left &&
        *std::min_element(result.seconds_per_call.begin(), result.seconds_per_call.end()) >
            stop_above_s) {
      result.stopped_early = true;
      break;
    }
  }
  return result;
}

namespace {

// Largest cache size sysfs reports for cpu0, in bytes (0 when unknown).
uint64_t LargestCacheBytes() {
  uint64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(f >> s) || s.empty()) continue;
    uint64_t mult = 1;
    char unit = s.back();
    if (unit == 'K') mult = 1024;
    if (unit == 'M') mult = 1024 * 1024;
    uint64_t v = std::strtoull(s.c_str(), nullptr, 10) * mult;
    best = std::max(best, v);
  }
  return best;
}

}  // namespace

bool CanEvictLines() {
#if defined(__x86_64__) || defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

void EvictLines(std::span<const char> bytes) {
  if (bytes.empty()) return;
  const char* p = bytes.data();
  const char* end = p + bytes.size();
#if defined(__x86_64__)
  // CLFLUSH is in every x86-64 CPU (SSE2); its line is 64 bytes on all of them.
  for (const char* line = p - reinterpret_cast<uintptr_t>(p) % 64; line < end; line += 64) {
    _mm_clflush(line);
  }
  _mm_mfence();
#elif defined(__aarch64__)
  // DC CIVAC is open to user space on Linux; CTR_EL0 gives the smallest data cache line.
  uint64_t ctr = 0;
  asm volatile("mrs %0, ctr_el0" : "=r"(ctr));
  const uintptr_t line_bytes = uintptr_t{4} << ((ctr >> 16) & 0xF);
  for (const char* line = p - reinterpret_cast<uintptr_t>(p) % line_bytes; line < end;
       line += line_bytes) {
    asm volatile("dc civac, %0" : : "r"(line) : "memory");
  }
  asm volatile("dsb ish" : : : "memory");
#else
  (void)end;
#endif
}

TimeEvaluatorHooks DefaultTimeEvaluatorHooks() {
  TimeEvaluatorHooks h;
  h.now_seconds = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  h.sleep_ms = [](uint32_t ms) {
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1'000'000};
    while (::nanosleep(&ts, &ts) != 0) {
    }
  };
  auto buffer = std::make_shared<std::vector<unsigned char>>();
  h.flush_cache = [buffer] {
    if (buffer->empty()) {
      uint64_t llc = LargestCacheBytes();
      buffer->assign(llc ? llc * 2 : uint64_t{64} << 20, 0);
    }
    // Writes evict whatever the kernel left in every level; volatile keeps the loop.
    volatile unsigned char* p = buffer->data();
    for (size_t i = 0; i < buffer->size(); i += 64) p[i] = static_cast<unsigned char>(p[i] + 1);
  };
  return h;
}

}  // namespace crosstune::server
