// The page through which a session child tells its parent what it is running, so that when the
// child dies the parent can answer the client: "kernel 'vadd' died by SIGSEGV (segmentation
// fault)".
//
// The parent maps the page (MAP_SHARED | MAP_ANONYMOUS) before fork; the child writes it before
// and after each kernel call. The parent reads it after the child is dead (plain fields are then
// stable) and, while the child lives, only the atomics, to kill a call that outlived its deadline
// even if the kernel blocked the child's own timer signal (seq tells it when it raced a new call).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "crosstune/status.h"

namespace crosstune::server {

struct CallSlot {
  std::atomic<uint32_t> in_call{0};     // 1 while a kernel runs
  std::atomic<uint64_t> seq{0};         // bumped by Begin and End
  std::atomic<int64_t> deadline_ns{0};  // steady_clock ns when the armed limit passes; 0: none
  // Set once the client has completed its handshake (Hello, and Auth when asked): until then the
  // parent counts the session against its peer address's --max-handshakes-per-peer.
  std::atomic<uint32_t> handshaken{0};
  uint32_t request_id = 0;  // the request being served
  uint32_t timeout_ms = 0;  // the armed limit for one call (0: none)
  uint64_t calls = 0;       // calls in the current batch (>1 while timing)
  bool timing = false;      // a TimeCall round rather than a Call
  bool loading = false;     // loading a module (its constructors run) rather than a call
  char function[128] = {};  // NUL-terminated, truncated
  // While a model runs: the node in flight, "'layer1.0.conv1' (ct_n3_conv2d)", and `function`
  // holds the model's name. Empty otherwise (Begin clears it).
  char node[128] = {};

  // Child side: record that `function` starts (n calls, each under limit_ms; 0: no limit).
  void Begin(uint32_t request, const std::string& fn, uint32_t limit_ms, uint64_t n,
             bool is_timing);
  // Child side: record that loading the module `name` starts, under limit_ms like one call.
  void BeginLoad(uint32_t request, const std::string& name, uint32_t limit_ms) {
    Begin(request, name, limit_ms, 1, false);
    loading = true;
  }
  // Child side, inside a model run: node `label` starts (a label the executor prepared at load,
  // NUL-terminated and shorter than `node`: one copy, no allocation).
  void SetNode(const char* label, size_t len) {
    std::memcpy(node, label, len);
    node[len] = '\0';
  }
  void End() {
    in_call.store(0, std::memory_order_release);
    seq.fetch_add(1, std::memory_order_acq_rel);
  }
  // Parent side, while the child runs: whether the call in flight is more than `grace_ns` past its
  // deadline at `now_ns`.
  bool Overdue(int64_t now_ns, int64_t grace_ns) const;
};

// Maps a fresh zeroed slot shared with children forked afterwards; nullptr on failure.
CallSlot* MapCallSlot();
void UnmapCallSlot(CallSlot* slot);

// "SIGSEGV (segmentation fault)".
std::string DescribeSignal(int sig);

// The signal the child's call timer delivers (its default action ends the process).
inline constexpr int kCallTimerSignal = 14;  // SIGALRM

// Why the parent killed a session child, if it did.
enum class ParentKill { kNone, kSessionTimeout, kCallOverdue };

// What the parent tells the client about a child that ended with wait status `wait_status`, or Ok
// when there is nothing to say (a normal exit).
Status DescribeChildEnd(const CallSlot& slot, int wait_status, ParentKill killed,
                        int64_t session_timeout_s);

// steady_clock now in ns (the same clock in every process).
int64_t SteadyNowNs();

// Child side: arms (ms > 0) or disarms (ms == 0) the per-call timer. Limits beyond a day are
// clamped to a day.
void ArmCallTimer(uint64_t ms);

// Child side, the watchdog without system calls per call. After InstallCallTimer(slot) the timer
// stays armed across calls: StartCallTimer(), called after slot->Begin(), arms it only when no
// pending expiry comes at or before this call's deadline (so a run of calls under one limit
// arms it about once per limit, not twice per call). When it fires, a SIGALRM handler looks at
// the slot: a call past its deadline ends the process by SIGALRM (DescribeChildEnd reports the
// timeout); a later call still running moves the timer to that call's deadline; no call leaves
// it off. One slot per process.
void InstallCallTimer(CallSlot* slot);
void StartCallTimer(const CallSlot& slot);

}  // namespace crosstune::server
