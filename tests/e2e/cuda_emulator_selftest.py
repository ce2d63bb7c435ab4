#!/usr/bin/env python3
"""The CUDA emulator (tests/e2e/emu/cuda_emu.h) checked on kernels written
here, whose right answers are known, before the codegen tests trust it.

The emulator runs a block's threads as fibers that switch only at
barriers, in thread order in even blocks and in reverse in odd ones, and
aborts where live threads wait at a barrier that ended threads never
reach. Each property is what a test of generated kernels leans on:

- a neighbour exchange through shared memory with a barrier between the
  write and the read gives every thread its neighbour's value, in both
  thread orders (the switches resume each fiber where it yielded, with its
  locals; several barriers a thread, 256 threads, 4 blocks);
- the same exchange without the barrier gives a wrong value in one of the
  two orders (a missing barrier shows);
- an exchange across warps with only a warp barrier between the write and
  the read gives wrong values: a warp runs on alone to its next block
  barrier, so a block barrier that is missing or replaced by __syncwarp
  shows (the attention gradient's staged dS^T leans on this);
- a warp sum through __shfl_xor_sync (five shuffles, each two warp
  barriers) equals the lanes' sum in every warp;
- a thread that returns before a barrier the others wait at aborts the
  program with the emulator's message instead of hanging;
- an ldmatrix row or a cp.async destination off a 16-byte boundary aborts,
  where a GPU would fault;
- a cp.async copy lands only at its thread's stepCpAsyncWait: a read of
  the destination before it sees the old bytes (a missing wait shows).

Usage: cuda_emulator_selftest.py --cxx CXX
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run  # noqa: E402

# out[b * n + t] = the value thread (t + 1) % n wrote, ROUNDS times over
# (each round a write, a barrier, a read, a barrier); BARRIER is the first
# barrier of the round or nothing.
EXCHANGE = r"""
extern "C" __global__ void exchange(int *out) {
  __shared__ int slot[256];
  const int t = threadIdx.x, n = blockDim.x;
  int got = 0;
  for (int round = 0; round < 3; ++round) {
    slot[t] = 1000 * round + t + 7 * (int)blockIdx.x;
    BARRIER
    got += slot[(t + 1) % n];
    __syncthreads();
  }
  out[blockIdx.x * n + t] = got;
}
"""

# out[t] = the value thread (t + 32) % n wrote, with only a warp barrier
# between the write and the read.
ACROSS_WARPS = r"""
extern "C" __global__ void acrossWarps(int *out) {
  __shared__ int slot[256];
  const int t = threadIdx.x, n = blockDim.x;
  slot[t] = t + 1;
  __syncwarp();
  out[blockIdx.x * n + t] = slot[(t + 32) % n];
}
"""

# MISALIGNED_LOAD from 16-byte aligned shared memory, 8 bytes in.
MISALIGNED = r"""
extern "C" __global__ void misaligned(int *out) {
  __shared__ __align__(16) unsigned short tile[64 * 8 + 8];
  for (int i = threadIdx.x; i < 64 * 8 + 8; i += blockDim.x)
    tile[i] = (unsigned short)i;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  unsigned r[4];
  MISALIGNED_LOAD
  out[threadIdx.x] = (int)r[0];
}
"""

# Block 0 only: threads 0-7 copy 16 bytes each with cp.async from a global
# row the block wrote, read the destination before their wait (out[t]) and
# after it (out[8 + t]).
LATE_COPY = r"""
extern "C" __global__ void lateCopy(int *out) {
  __shared__ __align__(16) int tile[32];
  if (blockIdx.x != 0)
    return;
  const int t = threadIdx.x;
  tile[t] = -1;
  out[64 + t] = 100 + t;
  __syncthreads();
  if (t < 8) {
    stepCpAsync16(tile + 4 * t, out + 64 + 4 * t);
    out[t] = tile[4 * t];
    stepCpAsyncWait();
    out[8 + t] = tile[4 * t];
  }
}
"""

# Every lane's warp sum of lane * lane + warp.
WARP_SUM = r"""
extern "C" __global__ void warpSum(float *out) {
  const int t = threadIdx.x;
  float v = (float)((t & 31) * (t & 31) + (t >> 5));
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  out[blockIdx.x * blockDim.x + t] = v;
}
"""

# Thread 5 leaves before the barrier the others wait at.
SKIP = r"""
extern "C" __global__ void skip(int *out) {
  if (threadIdx.x == 5)
    return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
"""

# cuda_emu_sync.h: __shared__ arrays shared by the block's threads.
HARNESS = r"""
#include "cuda_emu_sync.h"
#include "kernel.inc"
#include <cstdio>
#include <vector>
int main() {
  const unsigned grid = GRID, block = BLOCK;
  std::vector<TYPE> out(grid * block, 0);
  emuLaunch(grid, block, [&] { KERNEL(out.data()); });
  std::FILE *f = std::fopen("out.txt", "w");
  for (TYPE v : out)
    std::fprintf(f, "%g\n", (double)v);
  std::fclose(f);
}
"""


def run(cxx, tmp, name, source, kernel, typ, grid, block):
    work = os.path.join(tmp, name)
    os.makedirs(work)
    harness = (HARNESS.replace("GRID", str(grid))
               .replace("BLOCK", str(block))
               .replace("TYPE", typ).replace("KERNEL", kernel))
    build_and_run(cxx, work, source, harness)
    with open(os.path.join(work, "out.txt")) as f:
        return [float(line) for line in f]


def expected_exchange(grid, n):
    return [sum(1000 * r + (t + 1) % n + 7 * b for r in range(3))
            for b in range(grid) for t in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    grid, n = 4, 256
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-self-") as tmp:
        want = expected_exchange(grid, n)
        got = run(args.cxx, tmp, "barrier",
                  EXCHANGE.replace("BARRIER", "__syncthreads();"),
                  "exchange", "int", grid, n)
        if got != want:
            bad = next(i for i in range(len(want)) if got[i] != want[i])
            sys.exit(f"FAIL: with the barrier, element {bad}: got "
                     f"{got[bad]}, want {want[bad]}")
        print(f"exchange with a barrier: {grid} blocks of {n} threads right")

        got = run(args.cxx, tmp, "nobarrier", EXCHANGE.replace("BARRIER", ""),
                  "exchange", "int", grid, n)
        wrong = [b for b in range(grid)
                 if got[b * n:(b + 1) * n] != want[b * n:(b + 1) * n]]
        if not wrong:
            sys.exit("FAIL: without the barrier every block still got its "
                     "neighbours' values: a missing barrier would not show")
        print(f"exchange without the barrier: blocks {wrong} wrong (shows)")

        got = run(args.cxx, tmp, "acrosswarps", ACROSS_WARPS, "acrossWarps",
                  "int", 2, 128)
        want = [float((t + 32) % 128 + 1) for _ in range(2)
                for t in range(128)]
        if got == want:
            sys.exit("FAIL: warps exchanging through shared memory with only "
                     "__syncwarp between got every value: warps run in "
                     "lockstep, a missing block barrier would not show")
        print("an exchange across warps without a block barrier shows")

        got = run(args.cxx, tmp, "warp", WARP_SUM, "warpSum", "float", 2,
                  128)
        want = [float(sum(k * k for k in range(32)) + 32 * (t >> 5))
                for _ in range(2) for t in range(128)]
        if got != want:
            bad = next(i for i in range(len(want)) if got[i] != want[i])
            sys.exit(f"FAIL: warp sum, thread {bad}: got {got[bad]}, want "
                     f"{want[bad]}")
        print("warp sums through __shfl_xor_sync right")

        try:
            run(args.cxx, tmp, "skip", SKIP, "skip", "int", 1, 32)
        except subprocess.CalledProcessError:
            pass
        else:
            sys.exit("FAIL: a thread skipping a barrier did not abort")
        print("a skipped barrier aborts")

        aligned = "stepLdm4(r, tile + 8 * lane);"
        got = run(args.cxx, tmp, "ldm", MISALIGNED.replace(
            "MISALIGNED_LOAD", aligned), "misaligned", "int", 1, 32)
        # Lane 0's first register: row 0 (lane 0's address), columns 0, 1.
        if got[0] != float(0 | 1 << 16):
            sys.exit(f"FAIL: aligned ldmatrix, lane 0 got {got[0]}")
        for name, load in (("ldm-off", "stepLdm4(r, tile + 4 + 8 * lane);"),
                           ("cpasync-off", "stepCpAsync16(tile + 4, out); "
                            "r[0] = 0;")):
            try:
                run(args.cxx, tmp, name, MISALIGNED.replace(
                    "MISALIGNED_LOAD", load), "misaligned", "int", 1, 32)
            except subprocess.CalledProcessError:
                pass
            else:
                sys.exit(f"FAIL: {name}: an address off a 16-byte boundary "
                         "did not abort")
        print("ldmatrix and cp.async off a 16-byte boundary abort")

        got = run(args.cxx, tmp, "latecopy", LATE_COPY, "lateCopy", "int", 4,
                  32)
        want = [-1.0] * 8 + [100.0 + 4 * t for t in range(8)]
        if got[:16] != want:
            sys.exit(f"FAIL: cp.async before and after its wait: got "
                     f"{got[:16]}, want {want}")
        print("a cp.async copy lands at its thread's wait")
    print("ok")


if __name__ == "__main__":
    main()
