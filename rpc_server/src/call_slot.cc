#include "crosstune/server/call_slot.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

namespace crosstune::server {

static_assert(kCallTimerSignal == SIGALRM);

void CallSlot::Begin(uint32_t request, const std::string& fn, uint32_t limit_ms, uint64_t n,
                     bool is_timing) {
  request_id = request;
  timeout_ms = limit_ms;
  calls = n;
  timing = is_timing;
  loading = false;
  size_t len = std::min(fn.size(), sizeof(function) - 1);
  std::memcpy(function, fn.data(), len);
  function[len] = '\0';
  node[0] = '\0';
  seq.fetch_add(1, std::memory_order_acq_rel);
  int64_t total_ms = static_cast<int64_t>(std::min<uint64_t>(uint64_t{limit_ms} * n, 86'400'000));
  deadline_ns.store(limit_ms ? SteadyNowNs() + total_ms * 1'000'000 : 0, std::memory_order_relaxed);
  in_call.store(1, std::memory_order_release);
}

bool CallSlot::Overdue(int64_t now_ns, int64_t grace_ns) const {
  uint64_t before = seq.load(std::memory_order_acquire);
  bool running = in_call.load(std::memory_order_acquire) != 0;
  int64_t deadline = deadline_ns.load(std::memory_order_relaxed);
  uint64_t after = seq.load(std::memory_order_acquire);
  return before == after && running && deadline != 0 && now_ns > deadline + grace_ns;
}

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

CallSlot* MapCallSlot() {
  void* p =
      ::mmap(nullptr, sizeof(CallSlot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) CallSlot();
}

void UnmapCallSlot(CallSlot* slot) {
  if (!slot) return;
  slot->~CallSlot();
  ::munmap(slot, sizeof(CallSlot));
}

std::string DescribeSignal(int sig) {
  const char* name = nullptr;
  const char* what = nullptr;
  switch (sig) {
    case SIGSEGV:
      name = "SIGSEGV";
      what = "segmentation fault";
      break;
    case SIGBUS:
      name = "SIGBUS";
      what = "bus error";
      break;
    case SIGILL:
      name = "SIGILL";
      what = "illegal instruction";
      break;
    case SIGFPE:
      name = "SIGFPE";
      what = "arithmetic exception";
      break;
    case SIGABRT:
      name = "SIGABRT";
      what = "aborted";
      break;
    case SIGKILL:
      name = "SIGKILL";
      what = "killed; out of memory?";
      break;
    case SIGTERM:
      name = "SIGTERM";
      what = "terminated";
      break;
    case SIGALRM:
      name = "SIGALRM";
      what = "alarm";
      break;
    case SIGTRAP:
      name = "SIGTRAP";
      what = "trace trap";
      break;
    case SIGSYS:
      name = "SIGSYS";
      what = "bad system call";
      break;
    case SIGPIPE:
      name = "SIGPIPE";
      what = "broken pipe";
      break;
    case SIGXCPU:
      name = "SIGXCPU";
      what = "CPU time limit exceeded";
      break;
    default:
      break;
  }
  if (!name) {
    const char* d = ::strsignal(sig);
    return "signal " + std::to_string(sig) + (d ? std::string(" (") + d + ")" : "");
  }
  return std::string(name) + " (" + what + ")";
}

Status DescribeChildEnd(const CallSlot& slot, int wait_status, ParentKill killed,
                        int64_t session_timeout_s) {
  bool in_call = slot.in_call.load(std::memory_order_acquire) != 0;
  std::string fn = slot.function;
  if (killed == ParentKill::kSessionTimeout) {
    std::string s = "session ran past its " + std::to_string(session_timeout_s) + " s limit";
    if (in_call) s += " in '" + fn + "'";
    return Status(ErrorCode::kTimeout, s);
  }
  // What ran: a kernel, a node of a model, or a module's own code while it was being loaded.
  const std::string node(slot.node, ::strnlen(slot.node, sizeof(slot.node)));
  std::string what = slot.loading    ? "loading '" + fn + "'"
                     : !node.empty() ? "node " + node + " of model '" + fn + "'"
                                     : "kernel '" + fn + "'";
  if (WIFEXITED(wait_status)) {
    if (!in_call) return Status::Ok();
    // The kernel called exit(): the session is gone, and the client should hear why.
    return Status(ErrorCode::kRemoteCrash, what + " ended the session process (exit status " +
                                               std::to_string(WEXITSTATUS(wait_status)) + ")");
  }
  if (!WIFSIGNALED(wait_status)) return Status::Ok();
  int sig = WTERMSIG(wait_status);
  if (in_call && (sig == kCallTimerSignal || killed == ParentKill::kCallOverdue)) {
    if (slot.loading) {
      return Status(ErrorCode::kTimeout,
                    what + " ran past " + std::to_string(slot.timeout_ms) + " ms");
    }
    if (!node.empty()) {
      std::string limit = std::to_string(slot.timeout_ms) + " ms";
      if (slot.timing) {
        limit += " per call (" + std::to_string(slot.calls) + " calls in a round)";
      }
      return Status(ErrorCode::kTimeout, std::string(slot.timing ? "timing " : "") + "model '" +
                                             fn + "' ran past " + limit + ", in node " + node);
    }
    if (slot.timing) {
      return Status(ErrorCode::kTimeout, "timing '" + fn + "' ran past " +
                                             std::to_string(slot.timeout_ms) + " ms per call (" +
                                             std::to_string(slot.calls) + " calls in a round)");
    }
    return Status(ErrorCode::kTimeout,
                  "call '" + fn + "' ran past " + std::to_string(slot.timeout_ms) + " ms");
  }
  if (in_call) {
    return Status(ErrorCode::kRemoteCrash, what + " died by " + DescribeSignal(sig));
  }
  return Status(ErrorCode::kRemoteCrash,
                "session process died by " + DescribeSignal(sig) + " outside a kernel call");
}

namespace {

CallSlot* g_timer_slot = nullptr;
// steady_clock ns at which the pending expiry fires; 0: none pending. Read and written by the
// handler too, so lock-free.
std::atomic<int64_t> g_armed_until{0};
static_assert(std::atomic<int64_t>::is_always_lock_free);

void SetTimerNs(int64_t ns) {
  itimerval t{};
  if (ns > 0) {
    t.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    t.it_value.tv_usec = static_cast<suseconds_t>((ns % 1'000'000'000) / 1000);
    if (t.it_value.tv_sec == 0 && t.it_value.tv_usec == 0) t.it_value.tv_usec = 1;
  }
  ::setitimer(ITIMER_REAL, &t, nullptr);
}

// Async-signal-safe: atomics, clock_gettime, setitimer, signal, raise.
void OnCallTimer(int) {
  const int saved_errno = errno;
  const CallSlot* slot = g_timer_slot;
  const int64_t now = SteadyNowNs();
  const bool running = slot && slot->in_call.load(std::memory_order_acquire) != 0;
  const int64_t deadline = slot ? slot->deadline_ns.load(std::memory_order_relaxed) : 0;
  if (running && deadline != 0 && now >= deadline) {
    // The default action ends the process as soon as the handler returns.
    ::signal(SIGALRM, SIG_DFL);
    ::raise(SIGALRM);
  } else if (running && deadline != 0) {
    g_armed_until.store(deadline, std::memory_order_relaxed);
    SetTimerNs(deadline - now);
  } else {
    g_armed_until.store(0, std::memory_order_relaxed);
  }
  errno = saved_errno;
}

}  // namespace

void InstallCallTimer(CallSlot* slot) {
  g_timer_slot = slot;
  g_armed_until.store(0, std::memory_order_relaxed);
  struct sigaction sa {};
  sa.sa_handler = OnCallTimer;
  sigemptyset(&sa.sa_mask);
  // Interrupted reads and writes restart; poll() returns EINTR, which the channel retries.
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGALRM, &sa, nullptr);
}

void StartCallTimer(const CallSlot& slot) {
  const int64_t deadline = slot.deadline_ns.load(std::memory_order_relaxed);
  if (deadline == 0) return;  // no limit for this call
  const int64_t armed = g_armed_until.load(std::memory_order_relaxed);
  if (armed != 0 && armed <= deadline) return;  // fires in time; the handler moves it on
  g_armed_until.store(deadline, std::memory_order_relaxed);
  SetTimerNs(deadline - SteadyNowNs());
}

void ArmCallTimer(uint64_t ms) {
  constexpr uint64_t kDayMs = 24ull * 3600 * 1000;
  ms = std::min(ms, kDayMs);
  itimerval t{};
  t.it_value.tv_sec = static_cast<time_t>(ms / 1000);
  t.it_value.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  ::setitimer(ITIMER_REAL, &t, nullptr);
}

}  // namespace crosstune::server
