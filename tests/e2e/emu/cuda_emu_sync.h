//===- cuda_emu_sync.h - Block-shared state for cuda_emu.h ------*- C++ -*-===//
//
// What the split reductions need beyond tests/e2e/emu/cuda_emu.h: static
// __shared__ arrays shared by the threads of a block (a function-local
// `static`: the emulated blocks run one after another, so one copy serves
// every block), the completion ticket's atomicAdd and __threadfence, and
// check_finite's block vote (__syncthreads_and) and flag (atomicOr,
// atomicExch)
// (emuLaunchOrder, in cuda_emu.h, runs the blocks in a given order, so a
// test can check that the last block to take the ticket combines the same
// partials in the same order whichever block it is).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_E2E_EMU_CUDA_EMU_SYNC_H
#define STEP_TESTS_E2E_EMU_CUDA_EMU_SYNC_H

#include "cuda_emu.h"

#include <atomic>

#undef __shared__
#define __shared__ static

inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
inline unsigned atomicOr(unsigned *p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_or(v);
}
inline unsigned atomicExch(unsigned *p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).exchange(v);
}
// A barrier that also returns whether every thread's predicate holds
// (step.check_finite's block vote): the predicates meet in emuSlots, read
// between two barriers.
inline int __syncthreads_and(int pred) {
  emuSlots[threadIdx.x] = pred ? 1.0f : 0.0f;
  __syncthreads();
  int all = 1;
  for (unsigned t = 0; t < blockDim.x; ++t)
    all &= emuSlots[t] != 0.0f;
  __syncthreads();
  return all;
}

#endif
