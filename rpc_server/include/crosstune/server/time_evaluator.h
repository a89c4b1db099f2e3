// The time evaluator of design.md, runs on the device.
//
// One warm-up call, then `repeat` rounds of `number` calls each. A round shorter than
// min_repeat_ms grows `number` to max(number * 1.618, number * min_repeat_ms / elapsed) (at least
// number + 1) and is measured again; the grown number carries over to later rounds. An optional
// cooldown sleeps between rounds; an optional cache flush runs before every measured round. The
// result is each round's seconds per call and the final number. Only run_batch itself is inside
// the timed window: watchdog arming (before_batch/after_batch) happens once per round, outside it,
// so small kernels are not charged for it.
//
// With stop_above_s > 0, a round after which even the fastest round so far took more than that per
// call ends the evaluation when rounds are left (stopped_early): the first round decides at the
// earliest.
//
// The clock, the sleep and the cache flush are injected so the growth logic is testable without
// real time. Not thread-safe; one evaluation at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/timing.h"

namespace crosstune::server {

struct TimeEvaluatorHooks {
  std::function<double()> now_seconds;        // monotonic
  std::function<void(uint32_t ms)> sleep_ms;  // cooldown
  std::function<void()> flush_cache;          // empty the caches of the calls' data
  // Called before the warm-up (number 1) and before each measured round with that round's number
  // (e.g. to arm a watchdog for number calls), outside the timed window.
  std::function<void(uint64_t calls)> before_batch;
  // Called after each batch, once its clock has stopped (e.g. to disarm the watchdog).
  std::function<void()> after_batch;
};

struct TimeEvaluatorResult {
  std::vector<double> seconds_per_call;
  uint64_t number = 0;
  bool stopped_early = false;  // fewer rounds than options.repeat: stop_above_s stopped it
};

// Runs `run_batch(n)` (n calls back to back) as described above. An error from run_batch stops
// the evaluation and is returned.
Expected<TimeEvaluatorResult> RunTimeEvaluator(const TimingOptions& options,
                                               const TimeEvaluatorHooks& hooks,
                                               const std::function<Status(uint64_t n)>& run_batch,
                                               double stop_above_s = 0);

// The next `number` after a round of `elapsed_s` that was shorter than min_repeat_ms.
uint64_t GrowNumber(uint64_t number, double elapsed_s, uint32_t min_repeat_ms);

// Default hooks: steady_clock, nanosleep, and a flush over a buffer twice the largest CPU cache
// sysfs reports (64 MiB when it reports none). The buffer is allocated on first use. The session
// flushes this way only where it cannot evict the timed call's own data (EvictLines).
TimeEvaluatorHooks DefaultTimeEvaluatorHooks();

// Whether this CPU can write back and evict single cache lines from user space: x86-64 (CLFLUSH)
// and aarch64 (DC CIVAC); not 32-bit ARM or RISC-V.
bool CanEvictLines();
// Writes back and evicts every cache line of `bytes` from every cache level, so a call that reads
// them next finds them in memory (a no-op where CanEvictLines() is false). Its cost follows the
// bytes, not the machine's cache: a VM may report a last-level cache of hundreds of MiB, which a
// flush through a buffer twice its size would write through on every round.
void EvictLines(std::span<const char> bytes);

// Upper bound on calls per round, so a zero-cost function and a coarse clock cannot grow forever.
inline constexpr uint64_t kMaxNumber = uint64_t{1} << 32;

}  // namespace crosstune::server
