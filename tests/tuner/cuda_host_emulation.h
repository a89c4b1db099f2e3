// Runs a generated CUDA kernel on the host, for tests on machines without a GPU: the kernel's
// source is compiled as C++ after this header. Each thread of a block is a fiber (ucontext) on
// the calling thread; blocks run one after another; __shared__ arrays are function statics (so
// one copy serves the running block) and __syncthreads() hands over to the block's next fiber,
// so a barrier round runs thread 0 up to its barrier, then thread 1 up to its, and so on. float4
// loads and stores abort on an address that is not 16-byte aligned, as they would fault on a GPU.
// (Each thread was an OS thread with a std::barrier until 2026-12-07: 256 threads on 2 cores spent
// most of the test's time in the scheduler.)
//
// What it checks: indexing, bounds guards, remainders, the use of shared memory across barriers.
// A missing barrier is a wrong answer every time, not a race that may pass: thread 0 runs ahead
// of all the others until it meets a barrier (reading shared values they have not written yet,
// or overwriting ones they have not read). What it cannot: speed, register or shared-memory
// limits, and anything NVRTC alone would refuse (the compile tests cover that).
#pragma once

#include <math.h>
#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

struct ct_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline ct_dim3 threadIdx, blockIdx, blockDim, gridDim;

// The running block's fibers and the scheduler's context (ct_launch).
struct ct_fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;  // ct_stack_bytes, not zeroed
  bool done = false;
};
inline constexpr size_t ct_stack_bytes = 64 * 1024;  // a kernel's locals are a few KiB
inline ucontext_t ct_scheduler;
inline std::vector<ct_fiber>* ct_fibers = nullptr;
inline unsigned ct_current = 0;
inline const std::function<void()>* ct_kernel = nullptr;

// Back to the scheduler, which resumes this fiber once every other thread of the block has come
// to its barrier (or returned).
inline void __syncthreads() {
  const unsigned me = ct_current;
  swapcontext(&(*ct_fibers)[me].ctx, &ct_scheduler);
  threadIdx = ct_dim3{me, 0, 0};
}
inline void ct_fiber_main() {
  (*ct_kernel)();
  (*ct_fibers)[ct_current].done = true;  // then uc_link: back to the scheduler
}

struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

inline void ct_check_aligned(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    std::fprintf(stderr, "misaligned float4 access at %p\n", p);
    std::abort();
  }
}
inline float4 ct_load4(const float* p) {
  ct_check_aligned(p);
  return *reinterpret_cast<const float4*>(p);
}
inline void ct_store4(float* p, float4 v) {
  ct_check_aligned(p);
  *reinterpret_cast<float4*>(p) = v;
}
#define LOAD4(p) ct_load4(p)
#define STORE4(p, v) ct_store4(p, v)

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

// kernel() for every thread of every block of `grid`, `threads` threads a block.
inline void ct_launch(ct_dim3 grid, unsigned threads, const std::function<void()>& kernel) {
  gridDim = grid;
  blockDim = ct_dim3{threads, 1, 1};
  std::vector<ct_fiber> fibers(threads);
  for (auto& f : fibers) f.stack.reset(new char[ct_stack_bytes]);
  ct_fibers = &fibers;
  ct_kernel = &kernel;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = ct_dim3{x, y, z};
        for (auto& f : fibers) {
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.get();
          f.ctx.uc_stack.ss_size = ct_stack_bytes;
          f.ctx.uc_link = &ct_scheduler;
          f.done = false;
          makecontext(&f.ctx, ct_fiber_main, 0);
        }
        // One barrier round a pass: each unfinished thread runs to its next barrier or its end.
        for (bool running = true; running;) {
          running = false;
          for (unsigned t = 0; t < threads; ++t) {
            if (fibers[t].done) continue;
            ct_current = t;
            threadIdx = ct_dim3{t, 0, 0};
            swapcontext(&ct_scheduler, &fibers[t].ctx);
            running = running || !fibers[t].done;
          }
        }
      }
    }
  }
  ct_fibers = nullptr;
}
