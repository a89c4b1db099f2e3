// Runs a generated CUDA kernel on the host, for tests on machines without a GPU: the kernel's
// source is compiled as C++ after this header, each thread of a block is a std::thread, blocks
// run one after another, __shared__ arrays are function statics (so one copy serves the running
// block) and __syncthreads() is a std::barrier over the block's threads. float4 loads and stores
// abort on an address that is not 16-byte aligned, as they would fault on a GPU.
//
// What it checks: indexing, bounds guards, remainders, the use of shared memory across barriers
// (a missing barrier shows as a race and usually a wrong answer). What it cannot: speed, register
// or shared-memory limits, and anything NVRTC alone would refuse (the compile tests cover that).
#pragma once

#include <math.h>

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

struct ct_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local ct_dim3 threadIdx, blockIdx;
inline ct_dim3 blockDim, gridDim;
inline std::barrier<>* ct_block_barrier = nullptr;
inline void __syncthreads() { ct_block_barrier->arrive_and_wait(); }

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
  std::barrier<> bar(threads);
  ct_block_barrier = &bar;
  gridDim = grid;
  blockDim = ct_dim3{threads, 1, 1};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = ct_dim3{t, 0, 0};
      for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
          for (unsigned x = 0; x < grid.x; ++x) {
            blockIdx = ct_dim3{x, y, z};
            kernel();
            bar.arrive_and_wait();  // the block's shared arrays are free for the next one
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
}
