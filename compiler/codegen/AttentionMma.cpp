//===- AttentionMma.cpp - attention with register-level tensor-core tiles -===//
//
// The f16/bf16 attention kernels for heads whose widths D and Dv are
// multiples of 16, at most 128 (the gradient: D + Dv <= 160, and only from
// the forward's saved statistics), as FlashAttention-2 arranges them: a
// block of 4 warps per 64-row tile, each warp owning 16 rows, and every
// product a PTX `mma.sync m16n8k16` whose operands and accumulators stay
// in registers.
//
//   forward      per query tile: the warp's Q rows as A fragments, once;
//                per key tile S = Q K^T (8 accumulators of 16 x 8), the
//                online softmax on the accumulators (each thread holds 2
//                rows x 16 keys; the row's max and sum over its 4 threads
//                by two shuffles), then O += P V with P rounded to the
//                element type becoming the A fragments directly (the
//                accumulators of n-tiles 2k, 2k + 1 are the A layout of
//                k-step k)
//   grad, 1      per query tile: Q and G rows as A fragments, lse as saved,
//                dd = rowsum(g * out) into the statistics array; per key
//                tile S = Q K^T, dP = G V^T, dS = P (dP - dd) scale,
//                dq += dS K
//   grad, 2      per key tile: K and V rows as A fragments; per query tile
//                that sees it S^T = K Q^T, dP^T = V G^T, P^T and dS^T with
//                the queries' statistics, dv += P^T G, dk += dS^T Q
// (the gradient's entry points, and its saved-dS form, in
// AttentionMmaGrad.cpp; this file the helpers and the forward).
//
// Fragments come from the staged tiles by `ldmatrix` (four 8 x 8 tiles a
// warp instruction): a B operand is either a staged tile's rows (K for
// Q K^T) or read down its columns (V for P V: the transposing form), and
// the A fragments of Q, G, K, V likewise; rows are padded by 8 elements
// (16 bytes), so the 8 rows of each 8 x 8 tile fall in distinct banks, and
// no tile is ever transposed in memory. The forward's exponentials test
// no score (a masked score is -inf and exp2(-inf) = 0; a row masked so far
// subtracts 0 rather than its -inf max) and its tiles seen whole
// (`WHOLE`: all but the diagonal under a causal mask) skip the mask;
// the gradient's launches take every exponential and mask P and dS after,
// in a block that tiles seen whole skip, and form each exponent with one
// fmaf (sm_90, GPT-2's B = 16, a whole tile: launch 2's loop 734 -> 556
// instructions, 184 -> 226 registers, two 128-thread blocks an SM either
// way; launch 1's 598 -> 462, 137 -> 135 registers). (Earlier tries: every exponential then a select per score
// took launch 1 from 136 to 168 registers with a spill; two copies of
// the gradients' score loops, whole and masked, 136 -> 186 and 182 ->
// 253.) Until 2026-11-27 every fragment
// register was its own shared load (one 32-bit load, or two 16-bit loads
// and a pack down a column) and every score branched on its mask; GPT-2's
// kernels (sm_90, ptxas, static size of the code): the forward 1656 ->
// 1304 instructions, 127 -> 101 registers; launch 1 1480 -> 1232, 168 ->
// 136; launch 2 1744 -> 1192, 231 -> 182; the same products in the same
// order, so the same results. Not yet timed on a GPU.
// The tiles of the inner loop are double-buffered: the next one is copied
// with cp.async (global to shared, no registers held) while this one is
// used, one barrier per tile. Exponents are in the log2 domain (scaled by
// scale * log2(e), in one fmaf), so each exponential is one stepExp2.
// Query tiles run in decreasing order (forward, launch 1) and key tiles in
// increasing order (launch 2), so under a causal mask the heaviest tiles
// go first and the last wave is short. Summation orders are fixed (deterministic).
//
// Where the wmma kernels (AttentionTensorCore.cpp) stage every score tile
// in f32 shared memory and were bound by it (Nsight Compute: L1 85% busy,
// DRAM 3%), these keep the tensor cores fed from registers: on an H200,
// GPT-2 124M's forward went from 4.30 to 1.38 ms a step and its gradient
// from 10.94 to 3.74 ms (docs/gpu-results.md).
//
// `stepMmaBf16/F16`, `stepCpAsync16` and `stepCpAsyncWait` wrap the
// instructions; they are defined once per source under STEP_MMA_DEFINED so
// tests/e2e/emu/cuda_emu.h can supply stand-ins that run on CPU threads
// (the mma warp-collectively, in the PTX fragment layout).
//
// Cost: 2 Tq Tk (D + Dv) FLOPs per slice forward (half for causal), 2.5x
// that for the gradient with the saved statistics, on the tensor cores;
// one exp2 per score (two launches of the gradient: one each); K and V
// read once per query tile, Q and G once per key tile.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"

#include <algorithm>
#include <cmath>

namespace step::codegen::detail {

// The instruction, its operand packing and the tile copies.
static const char *kMmaHelpers = R"(#ifndef STEP_MMA_DEFINED
#define STEP_MMA_DEFINED
// d (16 x 8, f32) += a (16 x 16) * b (16 x 8): PTX mma.sync m16n8k16, the
// operands in its fragment layout (lane = 4 g + t: a rows g and g + 8,
// columns 2t, 2t + 1 and + 8; b column g, rows 2t, 2t + 1 and + 8; d rows
// g and g + 8, columns 2t, 2t + 1).
#define STEP_MMA_FN(fn, ty)                                                  \
  static __device__ __forceinline__ void fn(float (&d)[4], unsigned a0,      \
                                            unsigned a1, unsigned a2,        \
                                            unsigned a3, unsigned b0,        \
                                            unsigned b1) {                   \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." ty "." ty ".f32 "           \
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"  \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                     \
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));             \
  }
STEP_MMA_FN(stepMmaBf16, "bf16")
STEP_MMA_FN(stepMmaF16, "f16")
// 16 bytes from global to shared memory without holding registers
// (cp.async, sm_80+), and the wait for all of this thread's copies.
static __device__ __forceinline__ void stepCpAsync16(void *dst,
                                                     const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d),
               "l"(src)
               : "memory");
}
static __device__ __forceinline__ void stepCpAsyncWait() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::
                   : "memory");
}
// 8 x 8 tiles of 16-bit elements from shared memory into registers, warp-
// collectively (ldmatrix, sm_75+): lane l gives the address of row l % 8
// of tile l / 8 (16-byte aligned); register i of lane l holds tile i's row
// l / 4, columns 2 (l % 4) and + 1 (the first in the low half), which is
// an mma B fragment of a tile stored n-major (A fragments likewise); with
// T (.trans) its column l / 4, rows 2 (l % 4) and + 1: a B fragment of a
// tile stored k-major. Four tiles (lanes 0-31 give addresses) or two
// (lanes 0-15).
#define STEP_LDM_FN(fn, n, trans, ...)                                       \
  static __device__ __forceinline__ void fn(unsigned (&r)[n],                \
                                            const void *row) {               \
    const unsigned a_ = (unsigned)__cvta_generic_to_shared(row);             \
    asm volatile("ldmatrix.sync.aligned.m8n8.x" #n trans ".shared.b16 "     \
                 __VA_ARGS__);                                               \
  }
STEP_LDM_FN(stepLdm4, 4, "", "{%0, %1, %2, %3}, [%4];\n"
            : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a_))
STEP_LDM_FN(stepLdm4T, 4, ".trans", "{%0, %1, %2, %3}, [%4];\n"
            : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a_))
STEP_LDM_FN(stepLdm2, 2, "", "{%0, %1}, [%2];\n"
            : "=r"(r[0]), "=r"(r[1]) : "r"(a_))
STEP_LDM_FN(stepLdm2T, 2, ".trans", "{%0, %1}, [%2];\n"
            : "=r"(r[0]), "=r"(r[1]) : "r"(a_))
#endif
// Two floats rounded to the element type, the first in the low half.
static __device__ __forceinline__ unsigned ${NAME}_pack(float lo, float hi) {
  return (unsigned)$BITS($LO) | (unsigned)$BITS($HI) << 16;
}
// `rows` rows of `width` elements from global src (row stride lds) into
// shared dst (row stride ldd), 16-byte asynchronous copies
// (stepCpAsyncWait completes them), zeros past `limit` rows.
#define ${NAME}_ASYNC(dst, ldd, src, lds, width, rows, limit)                \
  for (int e_ = threadIdx.x; e_ < (rows) * ((width) / 8);                    \
       e_ += blockDim.x) {                                                   \
    const int y_ = e_ / ((width) / 8), x_ = (e_ - y_ * ((width) / 8)) * 8;   \
    if (y_ < (limit))                                                        \
      stepCpAsync16((dst) + y_ * (ldd) + x_,                                 \
                    (src) + (long long)y_ * (lds) + x_);                     \
    else                                                                     \
      *reinterpret_cast<uint4 *>((dst) + y_ * (ldd) + x_) =                  \
          make_uint4(0u, 0u, 0u, 0u);                                        \
  }
// Whether query row i sees key j: both valid and, if causal, j <= i.
#define ${NAME}_SEES(i, j) ((i) < lq_ && (j) < lk_ && !($CAUSAL && (j) > (i)))
// Whether the 64 x 64 tile of queries from i0 and keys from j0 is seen
// whole (inside both valid lengths and, if causal, its last key not after
// its first query): then its scores need no mask. Under GPT-2's causal
// mask all but the diagonal tiles. The forward only (file header).
#define ${NAME}_WHOLE(i0, j0)                                                \
  ((i0) + 64 <= lq_ && (j0) + 64 <= lk_ && !($CAUSAL && (j0) + 63 > (i0)))
// A tile of query rows r0, r1 = r0 + 8 and keys from j0 (the forward's
// scores, launch 1's dS) set to `to` where masked; a tile seen whole skips
// it.
static __device__ __forceinline__ void ${NAME}_mask(float (&s)[8][4], int r0,
                                                    int j0, int lq_, int lk_,
                                                    float to) {
  const int t4 = threadIdx.x & 3, r1 = r0 + 8;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = j0 + nt * 8 + 2 * t4 + e;
      if (!${NAME}_SEES(r0, j))
        s[nt][e] = to;
      if (!${NAME}_SEES(r1, j))
        s[nt][2 + e] = to;
    }
}
// The A fragments of this warp's 16 rows (`rows`: the warp's first,
// stride ld) over NK k-steps of 16 columns: per k-step one ldmatrix of
// the tiles (rows 0-7, 8-15) x (columns 0-7, 8-15).
template <int NK>
static __device__ __forceinline__ void ${NAME}_frags(unsigned (&a)[NK][4],
                                                     const $T *rows, int ld) {
  const int l = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < NK; ++kk)
    stepLdm4(a[kk], rows + (l & 15) * ld + kk * 16 + (l >> 4) * 8);
}
// acc (the warp's 16 rows x 64 columns) = A B^T, B the 64 staged rows of
// Bh (stride ld): scores from the row fragments and a staged tile. The B
// fragments of n-tile nt for two k-steps are one ldmatrix (its 8 rows,
// columns 32 kk2 + [0, 32) as four tiles).
template <int NK>
static __device__ __forceinline__ void ${NAME}_abt(float (&acc)[8][4],
                                                   const unsigned (&a)[NK][4],
                                                   const $T *Bh, int ld) {
  const int l = threadIdx.x & 31;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    const $T *p = Bh + (nt * 8 + (l & 7)) * ld + (l >> 3) * 8;
#pragma unroll
    for (int kk = 0; kk < NK; kk += 2) {
      if (kk + 1 < NK) {
        unsigned b[4];
        stepLdm4(b, p + kk * 16);
        stepMma$MMA(acc[nt], a[kk][0], a[kk][1], a[kk][2], a[kk][3], b[0],
                    b[1]);
        stepMma$MMA(acc[nt], a[kk + 1][0], a[kk + 1][1], a[kk + 1][2],
                    a[kk + 1][3], b[2], b[3]);
      } else { // an odd last k-step: two tiles, lanes 0-15's addresses
        unsigned b[2];
        stepLdm2(b, p + kk * 16);
        stepMma$MMA(acc[nt], a[kk][0], a[kk][1], a[kk][2], a[kk][3], b[0],
                    b[1]);
      }
    }
  }
}
// acc (16 rows x N8 * 8 columns) += A B for one k-step of 16: A the
// fragment (a0..a3), B rows 16 kk + [0, 16) of a staged tile whose row
// 16 kk is at Bk (stride ld), read down its columns: the B fragments of
// two n-tiles are one transposing ldmatrix (those rows x columns
// 8 n + [0, 16) as four tiles).
template <int N8>
static __device__ __forceinline__ void
${NAME}_abk(float (&acc)[N8][4], unsigned a0, unsigned a1, unsigned a2,
            unsigned a3, const $T *Bk, int ld) {
  const int l = threadIdx.x & 31;
  const $T *p = Bk + (l & 15) * ld + (l >> 4) * 8;
#pragma unroll
  for (int n = 0; n < N8; n += 2) {
    if (n + 1 < N8) {
      unsigned b[4];
      stepLdm4T(b, p + n * 8);
      stepMma$MMA(acc[n], a0, a1, a2, a3, b[0], b[1]);
      stepMma$MMA(acc[n + 1], a0, a1, a2, a3, b[2], b[3]);
    } else { // an odd last n-tile: two tiles, lanes 0-15's addresses
      unsigned b[2];
      stepLdm2T(b, p + n * 8);
      stepMma$MMA(acc[n], a0, a1, a2, a3, b[0], b[1]);
    }
  }
}
// acc (16 rows x N8 * 8 columns) += X B, X the 16 x 64 tile in the
// accumulators x (rounded to the element type: the accumulators of
// n-tiles 2kk and 2kk + 1 are the A fragment of k-step kk), B the 64
// staged rows of Bh (stride ld). Each acc[n] adds its k-steps in
// increasing order.
template <int N8>
static __device__ __forceinline__ void ${NAME}_ab(float (&acc)[N8][4],
                                                  const float (&x)[8][4],
                                                  const $T *Bh, int ld) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ${NAME}_abk<N8>(acc, ${NAME}_pack(x[2 * kk][0], x[2 * kk][1]),
                    ${NAME}_pack(x[2 * kk][2], x[2 * kk][3]),
                    ${NAME}_pack(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                    ${NAME}_pack(x[2 * kk + 1][2], x[2 * kk + 1][3]),
                    Bh + kk * 16 * ld, ld);
}
// Accumulator tiles set to 0.
template <int N8>
static __device__ __forceinline__ void ${NAME}_zero(float (&acc)[N8][4]) {
#pragma unroll
  for (int n = 0; n < N8; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}
// The accumulator rows r0 and r1 = r0 + 8 (scaled by s0, s1) into rows
// `ld` elements apart at out, where they are below `rows`.
template <int N8>
static __device__ __forceinline__ void ${NAME}_store(const float (&acc)[N8][4],
                                                     $T *out, int ld, int r0,
                                                     int rows, float s0,
                                                     float s1) {
  const int t4 = threadIdx.x & 3;
#pragma unroll
  for (int n = 0; n < N8; ++n) {
    const int c = n * 8 + 2 * t4;
    if (r0 < rows)
      *reinterpret_cast<unsigned *>(out + (long long)r0 * ld + c) =
          ${NAME}_pack(acc[n][0] * s0, acc[n][1] * s0);
    if (r0 + 8 < rows)
      *reinterpret_cast<unsigned *>(out + (long long)(r0 + 8) * ld + c) =
          ${NAME}_pack(acc[n][2] * s1, acc[n][3] * s1);
  }
}
)";

// Every kernel's start: the shared-memory base, this thread's place in its
// warp's fragments, the valid lengths.
static const char *kViews = R"(  extern __shared__ __align__(128) float smem[];
  unsigned char *base_ = reinterpret_cast<unsigned char *>(smem);
  const int warp = threadIdx.x >> 5, g = (threadIdx.x >> 2) & 7,
            t4 = threadIdx.x & 3;
$VALID)";

// The forward's and launch 1's walk over query tiles: this block's next
// tile (decreasing order across the grid: under a causal mask the last see
// the most keys), its rows, the keys it sees, and Q staged.
static const char *kQueryTile =
    R"(  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
$ITEM_PRE    const long long b = $ITEM_B;
    const int i0 = ($QTILES - 1 - (int)($ITEM_RANK)) * 64;
    const int r0 = i0 + warp * 16 + g, r1 = r0 + 8; // this thread's rows
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT;
    // Causal (top-left): key j is visible to query i iff j <= i; a tile
    // past the valid rows reads no key.
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + 64) : lk_;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_ASYNC(Qh, $LDT, q + (long long)i0 * $Q_LD, $Q_LD, $D, 64, lq_ - i0)
)";

// The first key tile into buffer 0, and everything staged so far waited
// for.
static const char *kFirstKeys = R"(    if (kEnd > 0) {
      ${NAME}_ASYNC(Kb, $LDT, k, $K_LD, $D, 64, lk_)
      ${NAME}_ASYNC(Vb, $LDV, v, $V_LD, $DV, 64, lk_)
    }
    stepCpAsyncWait();
    __syncthreads();
)";

// The loop over the key tiles: this one (Kh, Vh) in use while the next
// one loads into the other buffer; the body ends with stepCpAsyncWait()
// and a barrier.
static const char *kKeyLoop =
    R"(    for (int j0 = 0, buf = 0; j0 < kEnd; j0 += 64, buf ^= 1) {
      const $T *Kh = Kb + buf * 64 * $LDT, *Vh = Vb + buf * 64 * $LDV;
      if (j0 + 64 < kEnd) {
        ${NAME}_ASYNC(Kb + (buf ^ 1) * 64 * $LDT, $LDT,
                      k + (long long)(j0 + 64) * $K_LD, $K_LD, $D, 64,
                      lk_ - j0 - 64)
        ${NAME}_ASYNC(Vb + (buf ^ 1) * 64 * $LDV, $LDV,
                      v + (long long)(j0 + 64) * $V_LD, $V_LD, $DV, 64,
                      lk_ - j0 - 64)
      }
)";

// The forward. Scores stay unscaled (max and mask); each exponent is one
// fmaf into the log2 domain (scale * log2(e)), so every exponential is one
// stepExp2 (MUFU.EX2). The log-sum-exp is (m * scale log2 e + log2 l) ln 2:
// m scaled with the same rounding as the exponents' offset, so it matches
// the sum l exactly.
static const char *kForward = R"(  $T *Qh = reinterpret_cast<$T *>(base_ + $OQ);
  $T *Kb = reinterpret_cast<$T *>(base_ + $OK); // two buffers each
  $T *Vb = reinterpret_cast<$T *>(base_ + $OV);
$QUERY_TILE$FIRST_KEYS    unsigned qa[$ND][4];
    ${NAME}_frags<$ND>(qa, Qh + warp * 16 * $LDT, $LDT);
    float o[$NV8][4];
    ${NAME}_zero<$NV8>(o);
    // Per row: the running max (the same in the row's 4 threads) and this
    // thread's share of the sum of exp.
    float m0 = $NEGINF, m1 = $NEGINF, l0 = 0.0f, l1 = 0.0f;
$KEY_LOOP      float s[8][4];
      ${NAME}_abt<$ND>(s, qa, Kh, $LDT);
      if (!${NAME}_WHOLE(i0, j0))
        ${NAME}_mask(s, r0, j0, lq_, lk_, $NEGINF);
      // The tile's max by fmaxf (one FMNMX where maxNaN takes three): a NaN
      // score still makes its row NaN, through its exponential in the sum.
      float x0 = $NEGINF, x1 = $NEGINF;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          x0 = fmaxf(x0, s[nt][e]);
          x1 = fmaxf(x1, s[nt][2 + e]);
        }
#pragma unroll
      for (int o_ = 1; o_ < 4; o_ <<= 1) {
        x0 = maxNaN(x0, __shfl_xor_sync(0xffffffffu, x0, o_));
        x1 = maxNaN(x1, __shfl_xor_sync(0xffffffffu, x1, o_));
      }
      const float n0 = maxNaN(m0, x0), n1 = maxNaN(m1, x1);
      const float a0 = m0 == $NEGINF ? 0.0f : stepExp2((m0 - n0) * $SCALE2);
      const float a1 = m1 == $NEGINF ? 0.0f : stepExp2((m1 - n1) * $SCALE2);
      m0 = n0;
      m1 = n1;
      l0 *= a0;
      l1 *= a1;
      // A masked score is -inf and exp2(-inf) = 0, so no score is tested;
      // a row masked so far (max -inf) subtracts 0 instead, not -inf. The
      // scale into the log2 domain in the exponent's fmaf.
      const float z0 = n0 == $NEGINF ? 0.0f : n0 * $SCALE2;
      const float z1 = n1 == $NEGINF ? 0.0f : n1 * $SCALE2;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[nt][e] = stepExp2(fmaf(s[nt][e], $SCALE2, -z0));
          s[nt][2 + e] = stepExp2(fmaf(s[nt][2 + e], $SCALE2, -z1));
          l0 += s[nt][e];
          l1 += s[nt][2 + e];
        }
#pragma unroll
      for (int n = 0; n < $NV8; ++n) {
        o[n][0] *= a0;
        o[n][1] *= a0;
        o[n][2] *= a1;
        o[n][3] *= a1;
      }
      ${NAME}_ab<$NV8>(o, s, Vh, $LDV); // O += P V
      stepCpAsyncWait();
      __syncthreads(); // the next tile staged; this one free
    }
#pragma unroll
    for (int o_ = 1; o_ < 4; o_ <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, o_);
      l1 += __shfl_xor_sync(0xffffffffu, l1, o_);
    }
    // A row with no visible key (l = 0) stores zeros; a NaN sum (a NaN
    // score) passes, so the row and its log-sum-exp are NaN.
    const bool ok0 = r0 < lq_ && l0 != 0.0f, ok1 = r1 < lq_ && l1 != 0.0f;
$LSESTORE    ${NAME}_store<$NV8>(o, $O_AT, $O_LD, r0, $TQ,
                        ok0 ? 1.0f / l0 : 0.0f, ok1 ? 1.0f / l1 : 0.0f);
  }
}
)";

std::optional<KernelSource> emitAttentionMma(const AttentionIO &io,
                                             const AttentionShape &a,
                                             bool causal,
                                             const std::string &name) {
  mlir::Operation *op = io.attention;
  auto gradOp = mlir::dyn_cast<mlir::step::AttentionGradOp>(op);
  // The gradient only from the forward's saved statistics (the wmma
  // kernels of AttentionTensorCore.cpp make their own pass), and for heads
  // with D + Dv <= 160: launch 2 holds K and V fragments, S^T, dP^T, dk and
  // dv in registers (about 210 a thread at 64/64 on sm_90; 96/96 spills).
  // cp.async copies 16-byte pieces of rows: every row 16-byte aligned.
  if ((a.e != Elem::BF16 && a.e != Elem::F16) || a.d % 16 || a.dv % 16 ||
      a.d == 0 || a.dv == 0 || a.d > 128 || a.dv > 128 || !io.aligned8() ||
      (gradOp && (!gradOp.getOut() || a.d + a.dv > 160 ||
                  a.slices * a.tq * 8 > (int64_t(1) << 28))))
    return std::nullopt;
  MmaTiles t(a);
  // Staged rows of Q (and G) once, K and V twice (the tile in use and the
  // next); the gradient's other launches lay out their own.
  SharedRegions r;
  int64_t oQ = r.add(t.qBytes), oG = gradOp ? r.add(t.vBytes) : 0;
  int64_t oK = r.add(2 * t.qBytes), oV = r.add(2 * t.vBytes);

  KernelSource ks;
  ks.name = name;
  ks.blockX = 128;
  ks.gridX = tileGrid(a.slices * t.qTiles);
  ks.sharedBytes = r.bytes;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(io.launched, ks, needs, /*restrict=*/true);
  auto s = [](int64_t v) { return std::to_string(v); };
  std::string tq = s(a.tq);
  bool withLse = mlir::isa<mlir::step::AttentionLseOp>(op);
  const double log2e = 1.4426950408889634;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name},
      {"T", cType(a.e)},
      {"MMA", a.e == Elem::BF16 ? "Bf16" : "F16"},
      {"BITS", a.e == Elem::BF16 ? "__bfloat16_as_ushort" : "__half_as_ushort"},
      {"LO", fromF(a.e, "lo")},
      {"HI", fromF(a.e, "hi")},
      {"TOF", a.e == Elem::BF16 ? "__bfloat162float" : "__half2float"},
      {"D", s(a.d)},
      {"DV", s(a.dv)},
      {"ND", s(a.d / 16)},
      {"NV", s(a.dv / 16)},
      {"ND8", s(a.d / 8)},
      {"NV8", s(a.dv / 8)},
      {"LDT", s(t.ldt)},
      {"LDV", s(t.ldv)},
      {"TQ", tq},
      {"TK", s(a.tk)},
      {"SLICES", s(a.slices)},
      {"QTILES", s(t.qTiles)},
      {"KTILES", s(t.kTiles)},
      {"OQ", s(oQ)},
      {"OG", s(oG)},
      {"OK", s(oK)},
      {"OV", s(oV)},
      {"STATS", s(std::max<int64_t>(a.slices * a.tq * 2, 1))},
      {"CAUSAL", causal ? "true" : "false"},
      {"SCALE", litF(a.scale)},
      {"SCALE2", litF(a.scale * log2e)},
      {"LOG2E", litF(log2e)},
      {"NEGINF", litF(-INFINITY)},
      {"LSESTORE", withLse
                       ? "    if (t4 == 0) {\n"
                         "      if (r0 < " +
                             tq + ")\n        " + io.out[1].param + "[b * " +
                             tq + " + r0] = ok0 ? (m0 * " + litF(a.scale * log2e) + " + log2f(l0)) * " +
                             litF(std::log(2.0)) + " : 0.0f;\n"
                             "      if (r1 < " +
                             tq + ")\n        " + io.out[1].param + "[b * " +
                             tq + " + r1] = ok1 ? (m1 * " + litF(a.scale * log2e) + " + log2f(l1)) * " +
                             litF(std::log(2.0)) + " : 0.0f;\n    }\n"
                       : ""},
      {"VALID", validLengths(io, a)}};
  for (auto &v : io.vars())
    vars.push_back(std::move(v));
  // The gradient's launch 1 streams each slice's K and V rows; the forward
  // as well, but it took twice B = 8's time at B = 16: no grouping there.
  for (auto &v : itemPlacement(a.slices, t.qTiles,
                               gradOp ? a.tk * (a.d + a.dv) * 2 : 0))
    vars.push_back(std::move(v));
  for (auto [key, snippet] : {std::pair{"QUERY_TILE", kQueryTile},
                              {"FIRST_KEYS", kFirstKeys},
                              {"KEY_LOOP", kKeyLoop}})
    vars.push_back({key, subst(snippet, vars)});
  std::string src = io.comment() + prelude(needs) + subst(kMmaHelpers, vars);
  std::string views = subst(kViews, vars);
  if (!gradOp) {
    ks.source =
        src + signature(ks, params) + " {\n" + views + subst(kForward, vars);
    return ks;
  }
  // Atomic dq before saved dS where a step asks for both.
  DqForm form = gradOp->hasAttr(mlir::step::kAtomicDqAttr) ? DqForm::Atomic
                : gradOp->hasAttr(mlir::step::kSavedDsAttr) ? DqForm::SavedDs
                                                             : DqForm::Recompute;
  emitAttentionMmaGrad(ks, a, causal, form, src, views, params,
                       std::move(vars));
  return ks;
}

} // namespace step::codegen::detail
