//===- cuda_emu.h - Generated CUDA kernels run on CPU threads ---*- C++ -*-===//
//
// The part of CUDA C++ that StepJIT's tiled attention kernels use, defined
// for a host compiler, so tests/e2e/cuda_emulation.py can run a generated
// kernel on a machine without a GPU: a grid runs one block at a time, each
// block as blockDim.x std::threads; __syncthreads is a barrier of the
// block; __shfl_xor_sync goes through a block-wide slot array between two
// barriers, which is exact where every thread of the block reaches the
// shuffle together (the kernels' shuffles are unconditional). Dynamic
// shared memory is one static array. Arithmetic is the host's f32 (expf,
// logf: not the GPU's ulp, well within the test's bounds); bf16 converts
// with round-to-nearest-even like cuda_bf16.h.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_E2E_EMU_CUDA_EMU_H
#define STEP_TESTS_E2E_EMU_CUDA_EMU_H

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using std::max;
using std::min;

struct EmuDim {
  unsigned x = 0, y = 1, z = 1;
};
inline thread_local EmuDim threadIdx;
inline EmuDim blockIdx, blockDim, gridDim;
inline std::barrier<> *emuBarrier = nullptr;
inline float emuSlots[1024];
alignas(16) inline float emuShared[64 * 1024]; // 256 KB, above sm_90's limit

inline void __syncthreads() { emuBarrier->arrive_and_wait(); }
inline void __syncwarp() { __syncthreads(); }
inline float __shfl_xor_sync(unsigned, float v, int lane) {
  unsigned t = threadIdx.x;
  emuSlots[t] = v;
  __syncthreads();
  float r = emuSlots[t ^ unsigned(lane)];
  __syncthreads();
  return r;
}
inline float __int_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN stays NaN
    return __nv_bfloat16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{uint16_t(u >> 16)};
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(n)
#define __shared__
#define smem emuShared

/// Runs `body` (one call of the kernel) as a grid of `grid` blocks of
/// `block` threads, the blocks one after another.
template <class Body> void emuLaunch(unsigned grid, unsigned block, Body body) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    std::barrier<> bar(block);
    emuBarrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&body, t] {
        threadIdx.x = t;
        body();
      });
    for (std::thread &th : threads)
      th.join();
  }
}

#endif
