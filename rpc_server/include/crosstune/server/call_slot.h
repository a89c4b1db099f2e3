// The page through which a session child tells its parent what it is running, so that when the
// child dies the parent can answer the client: "kernel 'vadd' died by SIGSEGV (segmentation fault)".
//
// The parent maps the page (MAP_SHARED | MAP_ANONYMOUS) before fork; the child writes it before
// and after each kernel call; the parent reads it only after the child is dead, so plain stores
// suffice (in_call is atomic so the order of the other stores before it is kept).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "crosstune/status.h"

namespace crosstune::server {

struct CallSlot {
  std::atomic<uint32_t> in_call{0};  // 1 while a kernel runs
  uint32_t request_id = 0;           // the request being served
  uint32_t timeout_ms = 0;           // the armed limit for one call (0: none)
  uint64_t calls = 0;                // calls in the current batch (>1 while timing)
  bool timing = false;               // a TimeCall round rather than a Call
  char function[128] = {};           // NUL-terminated, truncated

  // Child side: record that `function` starts (calls times, each under timeout_ms).
  void Begin(uint32_t request, const std::string& fn, uint32_t limit_ms, uint64_t n, bool is_timing);
  void End() { in_call.store(0, std::memory_order_release); }
};

// Maps a fresh zeroed slot shared with children forked afterwards; nullptr on failure.
CallSlot* MapCallSlot();
void UnmapCallSlot(CallSlot* slot);

// "SIGSEGV (segmentation fault)".
std::string DescribeSignal(int sig);

// The signal the child's call timer delivers (its default action ends the process).
inline constexpr int kCallTimerSignal = 14;  // SIGALRM

// What the parent tells the client about a child that ended with wait status `wait_status`, or Ok
// when there is nothing to say (a normal exit). `session_timed_out` is set when the parent itself
// killed the child for running past `session_timeout_s`.
Status DescribeChildEnd(const CallSlot& slot, int wait_status, bool session_timed_out,
                        int64_t session_timeout_s);

// Child side: arms (ms > 0) or disarms (ms == 0) the per-call timer. Limits beyond a day are
// clamped to a day.
void ArmCallTimer(uint64_t ms);

}  // namespace crosstune::server
