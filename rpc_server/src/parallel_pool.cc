#include "crosstune/server/parallel_pool.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstddef>

namespace crosstune::server {
namespace {

// Set on a thread while it runs tasks: a launch from inside a task runs serially.
thread_local bool t_in_launch = false;

// Spins before sleeping: long enough to bridge the gap between a kernel's consecutive launches,
// short enough that an idle pool gives its CPUs back at once.
constexpr int kSpinRounds = 4000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7)
  asm volatile("yield");
#endif
}

}  // namespace

// The runtime is the first member of the pool's Abi record (standard layout), so the pointer the
// module passes back leads to the pool.
int32_t ParallelPool::AbiNumThreads(const ct_runtime* rt) {
  return t_in_launch ? 1 : reinterpret_cast<const Abi*>(rt)->pool->threads();
}

int32_t ParallelPool::AbiLaunch(const ct_runtime* rt, ct_parallel_body body, void* closure,
                                int32_t num_tasks) {
  return reinterpret_cast<const Abi*>(rt)->pool->Launch(body, closure, num_tasks);
}

ParallelPool::ParallelPool(int max_threads)
    : max_threads_(std::clamp(max_threads, 1, kMaxThreads)) {
  static_assert(offsetof(Abi, rt) == 0);
  abi_.rt.version = CT_RUNTIME_VERSION;
  abi_.rt.num_threads = &AbiNumThreads;
  abi_.rt.parallel_launch = &AbiLaunch;
  abi_.pool = this;
}

ParallelPool::~ParallelPool() {
  launch_.store(0, std::memory_order_release);
  launch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ParallelPool::SetThreads(int n) { threads_ = std::clamp(n, 1, max_threads_); }

void ParallelPool::StartWorkers(int count) {
  // Workers start with every asynchronous signal blocked; they inherit the mask of the thread
  // that creates them.
  while (static_cast<int>(workers_.size()) < count) {
    sigset_t all, old;
    sigfillset(&all);
    for (int sync : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) {
      sigdelset(&all, sync);
    }
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int index = static_cast<int>(workers_.size());
    // The worker waits for the launch after the current one, however late it starts.
    uint64_t seen = launch_.load(std::memory_order_acquire);
    workers_.emplace_back([this, index, seen] { WorkerLoop(index, seen); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
}

void ParallelPool::RunTasks() {
  t_in_launch = true;
  for (;;) {
    int32_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    int32_t r = body_(t, num_tasks_, closure_);
    if (r != 0) {
      int32_t none = 0;
      first_error_.compare_exchange_strong(none, r, std::memory_order_relaxed);
    }
  }
  t_in_launch = false;
}

int32_t ParallelPool::Launch(ct_parallel_body body, void* closure, int32_t num_tasks) {
  if (num_tasks <= 0) return 0;
  if (t_in_launch || threads_ <= 1 || num_tasks == 1) {
    const bool nested = t_in_launch;
    t_in_launch = true;
    int32_t result = 0;
    for (int32_t t = 0; t < num_tasks && result == 0; ++t) result = body(t, num_tasks, closure);
    t_in_launch = nested;
    return result;
  }
  // Threads start at the first launch that needs them, not when a call sets its count, so a
  // session whose kernels never launch has none. (This began as a guard: qemu-user 7.2 aborts
  // when a child forked from a multi-threaded process starts a thread. Sessions now come from the
  // single-threaded fork server, and a 2-thread kernel ran under qemu-aarch64 with a tracker link.)
  const int active = std::min(threads_ - 1, static_cast<int>(num_tasks) - 1);
  StartWorkers(active);
  body_ = body;
  closure_ = closure;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  first_error_.store(0, std::memory_order_relaxed);
  running_.store(active, std::memory_order_relaxed);
  uint64_t number = (launch_.load(std::memory_order_relaxed) >> 16) + 1;
  if ((number & 0xffffffffffffULL) == 0) number = 1;  // never 0, which means stop
  launch_.store((number << 16) | static_cast<uint64_t>(active), std::memory_order_release);
  launch_.notify_all();
  RunTasks();
  // Every task has been taken; wait for the workers still finishing theirs.
  for (int spin = 0; running_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinRounds) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  return first_error_.load(std::memory_order_relaxed);
}

void ParallelPool::WorkerLoop(int worker, uint64_t seen) {
  for (;;) {
    uint64_t now = seen;
    for (int spin = 0; spin < kSpinRounds && now == seen; ++spin) {
      CpuRelax();
      now = launch_.load(std::memory_order_acquire);
    }
    while (now == seen) {
      launch_.wait(seen, std::memory_order_acquire);
      now = launch_.load(std::memory_order_acquire);
    }
    seen = now;
    if (now == 0) return;
    if (worker >= static_cast<int>(now & 0xffff)) continue;
    RunTasks();
    running_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace crosstune::server
