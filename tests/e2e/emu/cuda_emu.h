//===- cuda_emu.h - Generated CUDA kernels run on the CPU -------*- C++ -*-===//
//
// The part of CUDA C++ that StepJIT's tiled attention kernels use, defined
// for a host compiler, so tests/e2e/cuda_emulation.py can run a generated
// kernel on a machine without a GPU: a grid runs one block at a time, each
// block as blockDim.x fibers switched at barriers; __syncthreads is a
// barrier of the block, __syncwarp one of the thread's warp (32 threads);
// __shfl_xor_sync
// goes through a slot array between two warp barriers, which is exact
// where every thread of the warp reaches the shuffle together (the
// kernels' shuffles are warp-uniform; warps may loop apart). Dynamic
// shared memory is one static array. Arithmetic is the host's f32 (expf,
// logf: not the GPU's ulp, well within the test's bounds); bf16 converts
// with round-to-nearest-even like cuda_bf16.h, f16 through _Float16.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_E2E_EMU_CUDA_EMU_H
#define STEP_TESTS_E2E_EMU_CUDA_EMU_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <setjmp.h>
#include <type_traits>
#include <ucontext.h>
#include <vector>

using std::max;
using std::min;

struct EmuDim {
  unsigned x = 0, y = 1, z = 1;
};
inline EmuDim threadIdx, blockIdx, blockDim, gridDim;
inline float emuSlots[1024];

// The threads of a block are fibers on the launching thread, switched only
// at barriers: emuLaunchOrder resumes each runnable fiber in turn until it
// waits at a barrier or ends; a barrier whose last thread arrives releases
// its waiters. No OS threads, no futexes: a barrier costs a context switch
// per thread. Each warp runs alone up to its next block barrier (warps
// drift apart); threads and warps run in order in even blocks of a launch,
// in reverse in odd ones (a missing barrier shows). A fiber starts on its own
// stack through makecontext/swapcontext; after that every switch is an
// _setjmp/_longjmp pair, which saves registers only (swapcontext also
// saves and restores the signal mask: two system calls a switch, and the
// shuffles of a warp reduction switch ten times a thread).
struct EmuFiber {
  ucontext_t ctx;
  jmp_buf resume; // where the fiber yielded
  bool started = false;
  enum State { Run, WaitBlock, WaitWarp, Done } state = Run;
};
inline ucontext_t emuScheduler;
inline jmp_buf emuSchedulerJmp; // the scheduler's loop, set before a resume
inline std::vector<EmuFiber> emuFibers;
inline std::vector<unsigned> emuWarpArrived; // per warp
inline unsigned emuBlockArrived = 0;
inline void (*emuEntryBody)(void *) = nullptr;
inline void *emuEntryArg = nullptr;

/// Yields to the scheduler until this fiber may run again.
inline void emuYield() {
  EmuFiber &f = emuFibers[threadIdx.x];
  if (!_setjmp(f.resume))
    _longjmp(emuSchedulerJmp, 1);
}
// The kernels are extern "C" and declare it inside as `extern __shared__
// float smem[]`: a block-scope declaration with C linkage, so the
// definition has C linkage too (clang insists). One translation unit per
// harness, so a plain definition in the header is fine.
extern "C" {
alignas(16) float emuShared[64 * 1024]; // 256 KB, above sm_90's limit
}

inline void __syncthreads() {
  emuFibers[threadIdx.x].state = EmuFiber::WaitBlock;
  if (++emuBlockArrived == emuFibers.size()) { // the last: release all
    emuBlockArrived = 0;
    for (EmuFiber &f : emuFibers)
      f.state = EmuFiber::Run;
  }
  emuYield();
}
inline void __syncwarp() {
  const unsigned w = threadIdx.x / 32, first = w * 32;
  const unsigned n = std::min<unsigned>(32, unsigned(emuFibers.size()) - first);
  emuFibers[threadIdx.x].state = EmuFiber::WaitWarp;
  if (++emuWarpArrived[w] == n) {
    emuWarpArrived[w] = 0;
    for (unsigned t = first; t < first + n; ++t)
      emuFibers[t].state = EmuFiber::Run;
  }
  emuYield();
}
inline float __shfl_xor_sync(unsigned, float v, int lane) {
  unsigned t = threadIdx.x;
  emuSlots[t] = v;
  __syncwarp();
  float r = emuSlots[t ^ unsigned(lane)];
  __syncwarp();
  return r;
}
// The warp's predicates as a mask, lane k in bit k (every lane of the
// warp takes part, as the kernels call it).
inline unsigned __ballot_sync(unsigned, bool pred) {
  unsigned t = threadIdx.x;
  emuSlots[t] = pred ? 1.0f : 0.0f;
  __syncwarp();
  unsigned m = 0, first = t & ~31u;
  for (unsigned k = 0; k < 32 && first + k < blockDim.x; ++k)
    m |= (emuSlots[first + k] != 0.0f ? 1u : 0u) << k;
  __syncwarp();
  return m;
}
inline int __ffs(unsigned x) { return __builtin_ffs(int(x)); }
// A load through L2 only (another block's partials): a plain load here.
template <class T> T __ldcg(const T *p) { return *p; }
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
// Rounded once (to nearest even) from double: to float rounding to odd
// (toward zero, the last bit set when inexact), then to bf16; 24 bits are
// enough for the second rounding to be the one direct rounding.
inline __nv_bfloat16 __double2bfloat16(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(d) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d))
      f = std::nextafter(f, 0.0f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= 1u;
    std::memcpy(&f, &u, 4);
  }
  return __float2bfloat16(f);
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }

// f16 through the host's _Float16 (IEEE binary16, round to nearest even).
struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) {
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return float(f);
}
inline __half __float2half_rn(float x) {
  const _Float16 f = static_cast<_Float16>(x);
  __half h;
  std::memcpy(&h.bits, &f, 2);
  return h;
}
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline __half __double2half(double x) { // one rounding, as the host does
  const _Float16 f = static_cast<_Float16>(x);
  __half h;
  std::memcpy(&h.bits, &f, 2);
  return h;
}

// 16-byte vector copies.
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}
// A streaming store (st.global.cs).
inline void __stcs(uint4 *p, uint4 v) { *p = v; }
#define __align__(n)

// The prelude's stepExp2 (PTX ex2.approx.ftz): subnormal inputs count as
// 0, results below 2^-126 are 0 (the host's exp2f is the more exact).
#define STEP_EXP2_DEFINED
inline float stepExp2(float x) {
  const float tiny = 1.17549435e-38f; // 2^-126
  if (x > -tiny && x < tiny)
    x = 0.0f;
  const float y = exp2f(x);
  return y < tiny ? 0.0f : y;
}
// rcp.approx.ftz: a subnormal input counts as a zero of its sign, a
// subnormal result is a zero of its sign (the GPU's 1-ulp error aside).
inline float stepRcp(float x) {
  const float tiny = 1.17549435e-38f; // 2^-126
  if (x > -tiny && x < tiny)
    x = std::copysign(0.0f, x);
  const float y = 1.0f / x;
  return y > -tiny && y < tiny ? std::copysign(0.0f, y) : y;
}

#define STEP_PREFETCH_DEFINED
// A cache hint: nothing to do on the CPU.
inline void stepPrefetchL2(const void *) {}

// A float added in place: fibers switch only at barriers, so nothing
// comes between the read and the write (atomic dq's accumulator).
inline float atomicAdd(float *p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}

// wmma (mma.h), 16x16x16 only, at the API's level: every thread of a warp
// holds the whole fragment (the hardware spreads it over the lanes, in an
// unspecified layout that the kernels never touch); loads read it all,
// mma_sync computes it all in f32, lane 0 stores it (the kernels
// synchronize before anyone reads a stored tile).
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  float v[16][16];
};
inline float emuToFloat(float x) { return x; }
inline float emuToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float emuToFloat(__half x) { return __half2float(x); }
// Element (r, c) of a 16x16 operand: matrix_a is r = m, c = k; matrix_b is
// r = k, c = n.
template <class Use, class T, class Layout, class P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const P *p,
                      unsigned ldm) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.v[r][c] = emuToFloat(std::is_same_v<Layout, row_major>
                                 ? p[r * ldm + c]
                                 : p[c * ldm + r]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ldm, layout_t l) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.v[r][c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}
inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t l) {
  if (threadIdx.x % 32 != 0)
    return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.v[r][c];
}
template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float x) {
  for (auto &row : f.v)
    for (float &e : row)
      e = x;
}
template <class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, TA, LA> &a,
              const fragment<matrix_b, 16, 16, 16, TB, LB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  float out[16][16];
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float s = c.v[m][n];
      for (int k = 0; k < 16; ++k)
        s += a.v[m][k] * b.v[k][n];
      out[m][n] = s;
    }
  std::memcpy(d.v, out, sizeof out);
}
} // namespace nvcuda::wmma

// mma.sync m16n8k16 (AttentionMma.cpp's stepMmaBf16/F16), warp-collective
// as on the GPU: each lane posts its fragment registers, and after a warp
// barrier computes its own four results from its warp's posts in the PTX
// fragment layout (lane 4g + t: A rows g, g + 8 and columns 2t, 2t + 1,
// + 8; B column g, rows 2t, 2t + 1, + 8; D rows g, g + 8, columns 2t,
// 2t + 1). Exact where the whole warp calls it together, as the kernels do.
#define STEP_MMA_DEFINED
inline unsigned emuMmaA[1024][4], emuMmaB[1024][2];
inline float emuHalfBits(unsigned h, bool bf16) {
  return bf16 ? __bfloat162float(__nv_bfloat16{uint16_t(h)})
              : __half2float(__half{uint16_t(h)});
}
inline void emuMma(float (&d)[4], const unsigned (&a)[4],
                   const unsigned (&b)[2], bool bf16) {
  const unsigned t = threadIdx.x, warp0 = t & ~31u, lane = t & 31u;
  std::memcpy(emuMmaA[t], a, sizeof a);
  std::memcpy(emuMmaB[t], b, sizeof b);
  __syncwarp();
  auto elemA = [&](unsigned m, unsigned k) {
    unsigned src = warp0 + 4 * (m % 8) + (k % 8) / 2;
    unsigned reg = (m >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return emuHalfBits(emuMmaA[src][reg] >> (16 * (k % 2)), bf16);
  };
  auto elemB = [&](unsigned k, unsigned n) {
    unsigned src = warp0 + 4 * n + (k % 8) / 2;
    return emuHalfBits(emuMmaB[src][k >= 8 ? 1 : 0] >> (16 * (k % 2)), bf16);
  };
  const unsigned g = lane / 4, c = 2 * (lane % 4);
  for (int r = 0; r < 4; ++r) {
    const unsigned m = g + (r >= 2 ? 8 : 0), n = c + r % 2;
    float acc = d[r];
    for (unsigned k = 0; k < 16; ++k)
      acc += elemA(m, k) * elemB(k, n);
    d[r] = acc;
  }
  __syncwarp();
}
/// Aborts with a message where a GPU would fault: `what`'s address `p`
/// is not 16-byte aligned (cp.async's 16-byte copies, ldmatrix's rows).
inline void emuNeedAlign16(const void *p, const char *what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0)
    return;
  std::fprintf(stderr, "cuda_emu: thread %u of block %u: %s at %p is not "
               "16-byte aligned\n", threadIdx.x, blockIdx.x, what, p);
  std::abort();
}
// cp.async as the GPU may do it at the latest: each thread's copies wait
// in its queue until its stepCpAsyncWait (cp.async.wait_all), so a staged
// tile read before its copier's wait and the barrier after it shows the
// old bytes. A launch's blocks start with empty queues.
struct EmuCopy {
  void *dst;
  const void *src;
};
inline std::vector<EmuCopy> emuCopies[1024];
inline void stepCpAsync16(void *dst, const void *src) {
  emuNeedAlign16(dst, "cp.async's shared destination");
  emuNeedAlign16(src, "cp.async's global source");
  emuCopies[threadIdx.x].push_back({dst, src});
}
inline void stepCpAsyncWait() {
  for (const EmuCopy &c : emuCopies[threadIdx.x])
    std::memcpy(c.dst, c.src, 16);
  emuCopies[threadIdx.x].clear();
}
inline void stepMmaBf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                        unsigned a3, unsigned b0, unsigned b1) {
  emuMma(d, {a0, a1, a2, a3}, {b0, b1}, true);
}
inline void stepMmaF16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                       unsigned a3, unsigned b0, unsigned b1) {
  emuMma(d, {a0, a1, a2, a3}, {b0, b1}, false);
}
// ldmatrix (AttentionMma.cpp's stepLdm4/4T/2/2T), warp-collective as on
// the GPU: each lane posts its row address and, after a warp barrier,
// takes register i from tile i (the rows posted by lanes 8i .. 8i + 7):
// its row l / 4, columns 2 (l % 4) and + 1, or transposed its column
// l / 4, rows 2 (l % 4) and + 1 (the first element in the low half).
inline const uint16_t *emuLdmRows[1024];
template <int N>
inline void emuLdm(unsigned (&r)[N], const void *row, bool trans) {
  const unsigned t = threadIdx.x, warp0 = t & ~31u, lane = t & 31u;
  emuNeedAlign16(row, "an ldmatrix row");
  emuLdmRows[t] = static_cast<const uint16_t *>(row);
  __syncwarp();
  const unsigned g = lane / 4, c = 2 * (lane % 4);
  for (int i = 0; i < N; ++i) {
    const uint16_t *const *rows = emuLdmRows + warp0 + 8 * i;
    const uint16_t lo = trans ? rows[c][g] : rows[g][c];
    const uint16_t hi = trans ? rows[c + 1][g] : rows[g][c + 1];
    r[i] = unsigned(lo) | unsigned(hi) << 16;
  }
  __syncwarp();
}
inline void stepLdm4(unsigned (&r)[4], const void *row) {
  emuLdm(r, row, false);
}
inline void stepLdm4T(unsigned (&r)[4], const void *row) {
  emuLdm(r, row, true);
}
inline void stepLdm2(unsigned (&r)[2], const void *row) {
  emuLdm(r, row, false);
}
inline void stepLdm2T(unsigned (&r)[2], const void *row) {
  emuLdm(r, row, true);
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__
#define smem emuShared

/// Runs `body` (one call of the kernel) as a grid of order.size() blocks of
/// `block` threads, the blocks one after another in `order` (a permutation
/// of the grid), each block's threads as fibers (above). A block whose
/// threads all wait while some have ended (a barrier some thread skips)
/// aborts with a message, where a GPU would hang or misbehave.
template <class Body>
void emuLaunchOrder(const std::vector<unsigned> &order, unsigned block,
                    Body body) {
  gridDim.x = unsigned(order.size());
  blockDim.x = block;
  constexpr size_t kStack = 256 * 1024;
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < block)
    stacks.push_back(std::unique_ptr<char[]>(new char[kStack]));
  emuEntryArg = &body;
  emuEntryBody = [](void *b) { (*static_cast<Body *>(b))(); };
  for (size_t at = 0; at < order.size(); ++at) {
    const unsigned b = order[at];
    blockIdx.x = b;
    // Every other block resumes its threads last first: a read of another
    // thread's write with no barrier between sees the write in one order
    // and not in the other, so a missing barrier changes some result.
    const bool down = at % 2 == 1;
    emuFibers.assign(block, EmuFiber{});
    for (unsigned t = 0; t < block; ++t)
      emuCopies[t].clear();
    emuWarpArrived.assign((block + 31) / 32, 0);
    emuBlockArrived = 0;
    for (unsigned t = 0; t < block; ++t) {
      ucontext_t &c = emuFibers[t].ctx;
      getcontext(&c);
      c.uc_stack.ss_sp = stacks[t].get();
      c.uc_stack.ss_size = kStack;
      c.uc_link = nullptr; // a fiber never returns: it jumps back
      makecontext(&c, [] {
        emuEntryBody(emuEntryArg);
        emuFibers[threadIdx.x].state = EmuFiber::Done;
        _longjmp(emuSchedulerJmp, 1);
      }, 0);
    }
    // A round resumes the warps one at a time (in reverse in odd blocks);
    // a warp's runnable threads are resumed again and again, so the warp
    // passes its warp barriers and runs on alone up to its next block
    // barrier or its end before the next warp starts. Warps thus drift
    // as far apart as CUDA lets them: a read of another warp's write
    // with no block barrier between sees it in one order and not the other.
    const unsigned warps = (block + 31) / 32;
    for (unsigned done = 0; done < block;) {
      bool ran = false;
      for (unsigned wk = 0; wk < warps; ++wk) {
        const unsigned w = down ? warps - 1 - wk : wk;
        const unsigned lo = w * 32, n = std::min(block, lo + 32) - lo;
        for (bool again = true; again;) {
          again = false;
          for (unsigned k = 0; k < n; ++k) {
            const unsigned t = lo + (down ? n - 1 - k : k);
            if (emuFibers[t].state != EmuFiber::Run)
              continue;
            threadIdx.x = t;
            if (!_setjmp(emuSchedulerJmp)) {
              EmuFiber &f = emuFibers[t];
              if (!f.started) {
                f.started = true;
                swapcontext(&emuScheduler, &f.ctx);
              } else {
                _longjmp(f.resume, 1);
              }
            }
            ran = again = true;
          }
        }
      }
      done = 0;
      for (const EmuFiber &f : emuFibers)
        done += f.state == EmuFiber::Done;
      if (!ran && done < block) {
        std::fprintf(stderr,
                     "cuda_emu: block %u: every live thread waits at a "
                     "barrier that ended threads never reach\n",
                     b);
        std::abort();
      }
    }
  }
}

/// The blocks in increasing order.
template <class Body> void emuLaunch(unsigned grid, unsigned block, Body body) {
  std::vector<unsigned> order(grid);
  for (unsigned b = 0; b < grid; ++b)
    order[b] = b;
  emuLaunchOrder(order, block, body);
}

#endif
