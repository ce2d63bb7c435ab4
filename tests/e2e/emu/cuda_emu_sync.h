//===- cuda_emu_sync.h - Block-shared state for cuda_emu.h ------*- C++ -*-===//
//
// What the split reductions need beyond tests/e2e/emu/cuda_emu.h: static
// __shared__ arrays shared by the threads of a block (a function-local
// `static`: the emulated blocks run one after another, so one copy serves
// every block), and the completion ticket's atomicAdd and __threadfence
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

#endif
