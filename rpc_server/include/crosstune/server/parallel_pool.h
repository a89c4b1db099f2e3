// The threads behind a module's parallel launches (kernel_abi.h's ct_runtime).
//
// One pool per session: the calling thread plus up to max_threads - 1 workers, started by the
// first launch that needs them and kept for the session. A launch hands out tasks from a shared
// counter, so uneven tasks balance; the caller works too and returns once every task is done.
// Between launches the workers spin for a fraction of a millisecond (so the back-to-back launches
// of one kernel cost no system call) and then sleep on a futex.
//
// Workers block asynchronous signals: the call timer's SIGALRM and the server's SIGTERM reach
// the session thread as before. A crash in a worker kills the session process like a crash in the
// session thread, and the parent reports it the same way.
//
//   ParallelPool pool(8);
//   pool.SetThreads(4);                          // this call may use 4 threads
//   module_global = pool.runtime();              // what a module's crosstune_runtime_v1 points at
//
// Thread-safety: SetThreads and Launch are called from the session thread only (a launch from
// inside a task runs serially on that task's thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "crosstune/kernel_abi.h"

namespace crosstune::server {

class ParallelPool {
 public:
  // At most kMaxThreads.
  explicit ParallelPool(int max_threads);
  static constexpr int kMaxThreads = 4096;
  ~ParallelPool();
  ParallelPool(const ParallelPool&) = delete;
  ParallelPool& operator=(const ParallelPool&) = delete;

  int max_threads() const { return max_threads_; }
  // Threads the next launches use, clamped to 1..max_threads().
  void SetThreads(int n);
  int threads() const { return threads_; }

  // body(t, num_tasks, closure) for t in [0, num_tasks); 0 or the first non-zero return.
  int32_t Launch(ct_parallel_body body, void* closure, int32_t num_tasks);

  // The ABI view of this pool; valid while the pool lives.
  const ct_runtime* runtime() const { return &abi_.rt; }

 private:
  struct Abi {
    ct_runtime rt;  // first member: a ct_runtime* is an Abi*
    ParallelPool* pool;
  };
  static int32_t AbiNumThreads(const ct_runtime* rt);
  static int32_t AbiLaunch(const ct_runtime* rt, ct_parallel_body body, void* closure,
                           int32_t num_tasks);
  void StartWorkers(int count);
  void WorkerLoop(int worker, uint64_t seen);
  void RunTasks();

  const int max_threads_;
  int threads_ = 1;
  Abi abi_{};
  std::vector<std::thread> workers_;

  // The current launch. Written by the session thread before `launch_` is published, read by the
  // workers that take part once they see it; not rewritten until they are all done (running_).
  ct_parallel_body body_ = nullptr;
  void* closure_ = nullptr;
  int32_t num_tasks_ = 0;
  std::atomic<int32_t> next_task_{0};
  std::atomic<int32_t> first_error_{0};
  std::atomic<int> running_{0};  // workers still inside this launch
  // (launch number << 16) | workers that take part, in one word, so a worker that wakes late
  // never pairs one launch's number with another's participants. Launch number 0 means stop.
  std::atomic<uint64_t> launch_{1 << 16};
};

}  // namespace crosstune::server
