//===- AttentionMma.cpp - attention with register-level tensor-core tiles -===//
//
// The f16/bf16 forward attention (step.attention, step.attention_lse) for
// heads whose widths D and Dv are multiples of 16, at most 128, as
// FlashAttention-2 arranges it: a block of 4 warps per 64-row query tile,
// each warp owning 16 query rows, and every product a PTX `mma.sync
// m16n8k16` whose operands and accumulators stay in registers:
//
//   the warp's Q rows     loaded once as A fragments (D/16 of 4 registers)
//   S = Q K^T             8 accumulators of 16 x 8 per 64-key tile, B from
//                         the staged K tile (rows of K are columns of K^T)
//   online softmax        on the accumulators: each thread holds 2 rows x 16
//                         keys, the row's max and sum over its 4 threads
//                         with two shuffles
//   O += P V              P rounded to the element type becomes the A
//                         fragments directly (an accumulator pair of
//                         n-tiles 2k, 2k+1 is the A layout of k-step k),
//                         B from V staged transposed (V^T rows contiguous)
//
// Shared memory holds only the staged Q, K and V^T tiles (16-byte copies,
// rows padded by 8 elements so a fragment load of 8 rows x 4 words hits 32
// banks); nothing of the scores goes through it. Where the CUDA-core and
// wmma kernels (AttentionKernels.cpp, AttentionTensorCore.cpp) stage every
// score tile in f32 shared memory and were found bound by it (Nsight
// Compute, docs/gpu-results.md: L1 85% busy, DRAM 3%), this one keeps the
// tensor cores fed from registers. Causal query tiles run heaviest first
// (the last tiles see the most keys), so the last wave is short.
//
// `stepMmaBf16/F16` wrap the instruction; they are defined once per source
// under STEP_MMA_DEFINED so tests/e2e/emu/cuda_emu.h can supply a
// warp-collective stand-in that runs on CPU threads.
//
// Cost: the FLOPs of the other kernels (2 Tq Tk (D + Dv) per slice, half
// for causal), on the tensor cores; one exp per score on CUDA cores; K and
// V read once per query tile.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"

#include <algorithm>

namespace step::codegen::detail {

namespace {
/// Byte offsets of the shared-memory regions (each a multiple of 128).
struct Regions {
  int64_t bytes = 0;
  int64_t add(int64_t n) {
    int64_t at = bytes;
    bytes += (n + 127) / 128 * 128;
    return at;
  }
};
} // namespace

// The instruction, its operand packing and the tile copies.
static const char *kMmaHelpers = R"(#ifndef STEP_MMA_DEFINED
#define STEP_MMA_DEFINED
// d (16 x 8, f32) += a (16 x 16) * b (16 x 8): PTX mma.sync m16n8k16, the
// operands in its fragment layout (lane = 4 g + t: a rows g and g + 8,
// columns 2t, 2t + 1 and + 8; b column g, rows 2t, 2t + 1 and + 8; d rows
// g and g + 8, columns 2t, 2t + 1).
static __device__ __forceinline__ void stepMmaBf16(float (&d)[4], unsigned a0,
                                                   unsigned a1, unsigned a2,
                                                   unsigned a3, unsigned b0,
                                                   unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void stepMmaF16(float (&d)[4], unsigned a0,
                                                  unsigned a1, unsigned a2,
                                                  unsigned a3, unsigned b0,
                                                  unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif
// Two adjacent elements of a staged row (the lower column in the low half).
static __device__ __forceinline__ unsigned ${NAME}_ld(const $T *p) {
  return *reinterpret_cast<const unsigned *>(p);
}
// Two floats rounded to the element type, the first in the low half.
static __device__ __forceinline__ unsigned ${NAME}_pack(float lo, float hi) {
  return (unsigned)$BITS($LO) | (unsigned)$BITS($HI) << 16;
}
// `rows` rows of `width` elements from global src into shared dst (row
// stride ldd), 16 bytes a copy, zeros past `limit` rows; ${NAME}_TCOPY
// stores them transposed (dst[x * ldd + y]).
#define ${NAME}_COPY(dst, ldd, src, width, rows, limit)                      \
  for (int e_ = threadIdx.x; e_ < (rows) * ((width) / 8);                    \
       e_ += blockDim.x) {                                                   \
    const int y_ = e_ / ((width) / 8), x_ = (e_ - y_ * ((width) / 8)) * 8;   \
    uint4 w_ = make_uint4(0u, 0u, 0u, 0u);                                   \
    if (y_ < (limit))                                                        \
      w_ = *reinterpret_cast<const uint4 *>((src) +                          \
                                            (long long)y_ * (width) + x_);   \
    *reinterpret_cast<uint4 *>((dst) + y_ * (ldd) + x_) = w_;                \
  }
#define ${NAME}_TCOPY(dst, ldd, src, width, rows, limit)                     \
  for (int e_ = threadIdx.x; e_ < (rows) * ((width) / 8);                    \
       e_ += blockDim.x) {                                                   \
    const int y_ = e_ / ((width) / 8), x_ = (e_ - y_ * ((width) / 8)) * 8;   \
    uint4 w_ = make_uint4(0u, 0u, 0u, 0u);                                   \
    if (y_ < (limit))                                                        \
      w_ = *reinterpret_cast<const uint4 *>((src) +                          \
                                            (long long)y_ * (width) + x_);   \
    const $T *h_ = reinterpret_cast<const $T *>(&w_);                        \
    for (int c_ = 0; c_ < 8; ++c_)                                           \
      (dst)[(x_ + c_) * (ldd) + y_] = h_[c_];                                \
  }
)";

static const char *kForward =
    R"(  extern __shared__ __align__(128) float smem[];
  unsigned char *base_ = reinterpret_cast<unsigned char *>(smem);
  $T *Qh = reinterpret_cast<$T *>(base_ + $OQ);
  $T *Kh = reinterpret_cast<$T *>(base_ + $OK);
  $T *Vt = reinterpret_cast<$T *>(base_ + $OV);
  const int warp = threadIdx.x >> 5, g = (threadIdx.x >> 2) & 7,
            t4 = threadIdx.x & 3;
$VALID  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
    // Query tiles in decreasing order across the grid: under a causal mask
    // the last see the most keys.
    const long long b = w % $SLICES;
    const int i0 = ($QTILES - 1 - (int)(w / $SLICES)) * 64;
    const int r0 = i0 + warp * 16 + g, r1 = r0 + 8; // this thread's rows
    const $T *q = in0 + b * $TQ * $D, *k = in1 + b * $TK * $D;
    const $T *v = in2 + b * $TK * $DV;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_COPY(Qh, $LDT, q + (long long)i0 * $D, $D, 64, lq_ - i0)
    __syncthreads();
    unsigned qa[$ND][4];
#pragma unroll
    for (int kk = 0; kk < $ND; ++kk) {
      const $T *p = Qh + (warp * 16 + g) * $LDT + kk * 16 + 2 * t4;
      qa[kk][0] = ${NAME}_ld(p);
      qa[kk][1] = ${NAME}_ld(p + 8 * $LDT);
      qa[kk][2] = ${NAME}_ld(p + 8);
      qa[kk][3] = ${NAME}_ld(p + 8 * $LDT + 8);
    }
    float o[$NV8][4];
#pragma unroll
    for (int n = 0; n < $NV8; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // Per row: the running max (the same in the row's 4 threads) and this
    // thread's share of the sum of exp.
    float m0 = $NEGINF, m1 = $NEGINF, l0 = 0.0f, l1 = 0.0f;
    // Causal (top-left): key j is visible to query i iff j <= i; a tile
    // past the valid rows reads no key.
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + 64) : lk_;
    for (int j0 = 0; j0 < kEnd; j0 += 64) {
      __syncthreads(); // Kh, Vt free
      ${NAME}_COPY(Kh, $LDT, k + (long long)j0 * $D, $D, 64, lk_ - j0)
      ${NAME}_TCOPY(Vt, 72, v + (long long)j0 * $DV, $DV, 64, lk_ - j0)
      __syncthreads();
      float s[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < $ND; ++kk) {
          const $T *p = Kh + (nt * 8 + g) * $LDT + kk * 16 + 2 * t4;
          stepMma$MMA(s[nt], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3],
                      ${NAME}_ld(p), ${NAME}_ld(p + 8));
        }
      }
      float x0 = $NEGINF, x1 = $NEGINF;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = j0 + nt * 8 + 2 * t4 + e;
          const bool key = j < lk_;
          s[nt][e] = key && r0 < lq_ && !($CAUSAL && j > r0)
                         ? s[nt][e] * $SCALE
                         : $NEGINF;
          s[nt][2 + e] = key && r1 < lq_ && !($CAUSAL && j > r1)
                             ? s[nt][2 + e] * $SCALE
                             : $NEGINF;
          x0 = maxNaN(x0, s[nt][e]);
          x1 = maxNaN(x1, s[nt][2 + e]);
        }
#pragma unroll
      for (int o_ = 1; o_ < 4; o_ <<= 1) {
        x0 = maxNaN(x0, __shfl_xor_sync(0xffffffffu, x0, o_));
        x1 = maxNaN(x1, __shfl_xor_sync(0xffffffffu, x1, o_));
      }
      const float n0 = maxNaN(m0, x0), n1 = maxNaN(m1, x1);
      const float a0 = m0 == $NEGINF ? 0.0f : expf(m0 - n0);
      const float a1 = m1 == $NEGINF ? 0.0f : expf(m1 - n1);
      m0 = n0;
      m1 = n1;
      l0 *= a0;
      l1 *= a1;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[nt][e] = s[nt][e] == $NEGINF ? 0.0f : expf(s[nt][e] - n0);
          s[nt][2 + e] =
              s[nt][2 + e] == $NEGINF ? 0.0f : expf(s[nt][2 + e] - n1);
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
      // O += P V: the accumulators of key n-tiles 2kk and 2kk + 1 are the
      // A fragment of k-step kk.
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const unsigned p0 = ${NAME}_pack(s[2 * kk][0], s[2 * kk][1]);
        const unsigned p1 = ${NAME}_pack(s[2 * kk][2], s[2 * kk][3]);
        const unsigned p2 = ${NAME}_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        const unsigned p3 = ${NAME}_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int n = 0; n < $NV8; ++n) {
          const $T *p = Vt + (n * 8 + g) * 72 + kk * 16 + 2 * t4;
          stepMma$MMA(o[n], p0, p1, p2, p3, ${NAME}_ld(p), ${NAME}_ld(p + 8));
        }
      }
    }
#pragma unroll
    for (int o_ = 1; o_ < 4; o_ <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, o_);
      l1 += __shfl_xor_sync(0xffffffffu, l1, o_);
    }
    const bool ok0 = r0 < lq_ && l0 > 0.0f, ok1 = r1 < lq_ && l1 > 0.0f;
$LSESTORE    const float inv0 = ok0 ? 1.0f / l0 : 0.0f, inv1 = ok1 ? 1.0f / l1 : 0.0f;
#pragma unroll
    for (int n = 0; n < $NV8; ++n) {
      const int c = n * 8 + 2 * t4;
      if (r0 < $TQ) {
        $T *dst = out0 + (b * $TQ + r0) * $DV + c;
        *reinterpret_cast<unsigned *>(dst) =
            ${NAME}_pack(o[n][0] * inv0, o[n][1] * inv0);
      }
      if (r1 < $TQ) {
        $T *dst = out0 + (b * $TQ + r1) * $DV + c;
        *reinterpret_cast<unsigned *>(dst) =
            ${NAME}_pack(o[n][2] * inv1, o[n][3] * inv1);
      }
    }
  }
}
)";

std::optional<KernelSource> emitAttentionMma(mlir::Operation *op,
                                             const AttentionShape &a,
                                             bool causal,
                                             const std::string &name) {
  if ((a.e != Elem::BF16 && a.e != Elem::F16) || a.d % 16 || a.dv % 16 ||
      a.d == 0 || a.dv == 0 || a.d > 128 || a.dv > 128)
    return std::nullopt;
  constexpr int64_t tile = 64;
  int64_t ldt = a.d + 8;
  Regions r;
  int64_t oQ = r.add(tile * ldt * 2), oK = r.add(tile * ldt * 2);
  int64_t oV = r.add(a.dv * (tile + 8) * 2);
  int64_t qTiles = (a.tq + tile - 1) / tile;

  KernelSource ks;
  ks.name = name;
  ks.blockX = 128;
  ks.gridX = std::min<int64_t>(std::max<int64_t>(a.slices * qTiles, 1), 65535);
  ks.sharedBytes = r.bytes;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  auto s = [](int64_t v) { return std::to_string(v); };
  std::string tq = s(a.tq);
  bool withLse = mlir::isa<mlir::step::AttentionLseOp>(op);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name},
      {"T", cType(a.e)},
      {"MMA", a.e == Elem::BF16 ? "Bf16" : "F16"},
      {"BITS", a.e == Elem::BF16 ? "__bfloat16_as_ushort" : "__half_as_ushort"},
      {"LO", fromF(a.e, "lo")},
      {"HI", fromF(a.e, "hi")},
      {"D", s(a.d)},
      {"DV", s(a.dv)},
      {"ND", s(a.d / 16)},
      {"NV8", s(a.dv / 8)},
      {"LDT", s(ldt)},
      {"TQ", tq},
      {"TK", s(a.tk)},
      {"SLICES", s(a.slices)},
      {"QTILES", s(qTiles)},
      {"OQ", s(oQ)},
      {"OK", s(oK)},
      {"OV", s(oV)},
      {"CAUSAL", causal ? "true" : "false"},
      {"SCALE", litF(a.scale)},
      {"NEGINF", litF(-INFINITY)},
      {"LSESTORE", withLse ? "    if (t4 == 0) {\n"
                             "      if (r0 < " +
                                 tq + ")\n        out1[b * " + tq +
                                 " + r0] = ok0 ? m0 + logf(l0) : 0.0f;\n"
                                 "      if (r1 < " +
                                 tq + ")\n        out1[b * " + tq +
                                 " + r1] = ok1 ? m1 + logf(l1) : 0.0f;\n    }\n"
                           : ""},
      {"VALID", validLengths(op, a)}};
  ks.source = prelude(needs) + subst(kMmaHelpers, vars) +
              signature(ks, params) + " {\n" + subst(kForward, vars);
  return ks;
}

} // namespace step::codegen::detail
