//===- AttentionMmaGrad.cpp - attention_grad on register-level tiles -----===//
//
// The gradient kernels of AttentionMma.cpp (same tiles, same helpers:
// mma.sync m16n8k16 from ldmatrix fragments, cp.async double buffers),
// from the forward's saved result and log-sum-exp, in one of three forms:
//
//   recompute (default)  launch 1 per query tile: the rows' statistics
//                        (lse as saved, dd = rowsum(g * out)) into a
//                        module-scope array, then S = Q K^T, dP = G V^T,
//                        dS and dq += dS K over the key tiles; launch 2 per
//                        key tile: S^T, dP^T, P^T and dS^T again, dv += P^T G
//                        and dk += dS^T Q. The scores are computed twice:
//                        seven tile products per (query, key) tile pair.
//   saved dS             (the op's `step.saved_ds` attribute, stepc
//                        --attention-saved-ds) launch 1 only the statistics
//                        (4 lanes a row, the same sums as above); launch 2
//                        as above and it also stores each dS^T tile rounded
//                        to the element type (the values launch 1 would
//                        round before its dq product) into a module-scope
//                        scratch of 64 x 64 tiles, key-major, only the
//                        tiles a causal mask lets be seen; launch 3 per
//                        query tile: dq += dS K with dS's A fragments read
//                        from the staged tile by transposing ldmatrix.
//                        Five tile products a pair, plus 2 bytes a visible
//                        score written and read back (GPT-2 124M, B = 8:
//                        96 slices x 136 tiles x 8 KB = 107 MB a layer,
//                        about 27 us each way at 4 TB/s, against the two
//                        products of 64 x 64 x 64 a pair saved).
//
//   atomic dq            (the op's `step.atomic_dq` attribute, stepc
//                        --attention-atomic-dq; FlashAttention-2's
//                        backward) launch 1 the statistics as saved dS's,
//                        and it zeroes a module-scope f32 dq accumulator;
//                        launch 2 as above, and per query tile it also
//                        stages dS^T (rounded as above) in shared memory,
//                        then each warp forms its 16 queries' dS K over the
//                        tile's 64 keys and adds it into the accumulator
//                        with atomicAdd; launch 3 rounds the accumulator
//                        into dq. Five tile products a pair, no dS in
//                        global memory, 4 bytes of L2 atomics a (query,
//                        dq column) a key tile.
//
// All give the same dk and dv bits; dq differs only where S^T = K Q^T and
// S = Q K^T round differently in the tensor cores (the same products).
// Summation orders are fixed (deterministic) except atomic dq's: its dq
// adds the key tiles' f32 partials in the order the blocks reach them, so
// its bits may differ from run to run (as FlashAttention-2's and
// PyTorch's do); dk and dv keep theirs.
//
// Cost: recompute 3.5x the forward's FLOPs (causal: half), saved dS 2.5x
// and 4 bytes of traffic a visible score (2 stored, 2 read back); the
// scratch (2 bytes a visible score) lives as long as the module, outside
// the memory plan. Atomic dq 2.5x, a barrier more a tile pair, 9 KiB more
// shared memory for launch 2, and an accumulator of 4 bytes a dq element
// (module memory, as saved dS's scratch).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"

#include <algorithm>

namespace step::codegen::detail {

// attention_grad from the forward's saved result and log-sum-exp, launch 1:
// per query tile the rows' statistics (lse as saved, dd = rowsum(g * out)
// = rowsum(P * dP)) into the module-scope array, then dq += dS K over the
// key tiles, dS = P * (dP - dd) * scale with P = exp(S * scale - lse).
static const char *kGradDq = R"(  $T *Qh = reinterpret_cast<$T *>(base_ + $OQ);
  $T *Gh = reinterpret_cast<$T *>(base_ + $OG);
  $T *Kb = reinterpret_cast<$T *>(base_ + $OK); // two buffers each
  $T *Vb = reinterpret_cast<$T *>(base_ + $OV);
$QUERY_TILE    const $T *gr = $G_AT, *out = $SO_AT;
    ${NAME}_ASYNC(Gh, $LDV, gr + (long long)i0 * $G_LD, $G_LD, $DV, 64,
                  lq_ - i0)
$FIRST_KEYS    unsigned qa[$ND][4], ga[$NV][4];
    ${NAME}_frags<$ND>(qa, Qh + warp * 16 * $LDT, $LDT);
    ${NAME}_frags<$NV>(ga, Gh + warp * 16 * $LDV, $LDV);
    float d0 = 0.0f, d1 = 0.0f;
    for (int x = t4; x < $DV; x += 4) {
      const $T *gh = Gh + (warp * 16 + g) * $LDV + x;
      if (r0 < lq_)
        d0 += $TOF(gh[0]) * $TOF(out[(long long)r0 * $SO_LD + x]);
      if (r1 < lq_)
        d1 += $TOF(gh[8 * $LDV]) * $TOF(out[(long long)r1 * $SO_LD + x]);
    }
#pragma unroll
    for (int o_ = 1; o_ < 4; o_ <<= 1) {
      d0 += __shfl_xor_sync(0xffffffffu, d0, o_);
      d1 += __shfl_xor_sync(0xffffffffu, d1, o_);
    }
    const float e0 = r0 < lq_ ? $SL_P[b * $TQ + r0] : 0.0f;
    const float e1 = r1 < lq_ ? $SL_P[b * $TQ + r1] : 0.0f;
    if (t4 == 0) {
      if (r0 < $TQ) {
        ${NAME}_stats[(b * $TQ + r0) * 2] = e0;
        ${NAME}_stats[(b * $TQ + r0) * 2 + 1] = d0;
      }
      if (r1 < $TQ) {
        ${NAME}_stats[(b * $TQ + r1) * 2] = e1;
        ${NAME}_stats[(b * $TQ + r1) * 2 + 1] = d1;
      }
    }
    const float f0 = e0 * $LOG2E, f1 = e1 * $LOG2E; // lse in the log2 domain
    float dq[$ND8][4];
    ${NAME}_zero<$ND8>(dq);
$KEY_LOOP      float s[8][4], dp[8][4];
      ${NAME}_abt<$ND>(s, qa, Kh, $LDT);  // S = Q K^T
      ${NAME}_abt<$NV>(dp, ga, Vh, $LDV); // dP = G V^T
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) { // dS; masked after, as in launch 2
          s[nt][e] = stepExp2(fmaf(s[nt][e], $SCALE2, -f0)) *
                     (dp[nt][e] - d0) * $SCALE;
          s[nt][2 + e] = stepExp2(fmaf(s[nt][2 + e], $SCALE2, -f1)) *
                         (dp[nt][2 + e] - d1) * $SCALE;
        }
      if (!${NAME}_WHOLE(i0, j0)) // under a causal mask the diagonal only
        ${NAME}_mask(s, r0, j0, lq_, lk_, 0.0f);
      ${NAME}_ab<$ND8>(dq, s, Kh, $LDT); // dq += dS K
      stepCpAsyncWait();
      __syncthreads(); // the next tile staged; this one free
    }
    ${NAME}_store<$ND8>(dq, $DQ_AT, $DQ_LD, r0, $TQ, 1.0f, 1.0f);
  }
}
)";

// Launch 2: per key tile (4 warps of 16 keys, the keys' K and V rows as A
// fragments; key tiles in increasing order, within each group of slices
// when itemPlacement groups them) over the query tiles that see it: S^T = K Q^T, dP^T = V G^T,
// P^T and dS^T with the queries' statistics of launch 1 (staged with
// their tile), then dv += P^T G and dk += dS^T Q.
static const char *kGradDkDv =
    R"(  $T *Kh = reinterpret_cast<$T *>(base_ + $OK);
  $T *Vh = reinterpret_cast<$T *>(base_ + $OV);
  $T *Qb = reinterpret_cast<$T *>(base_ + $OQ); // two buffers each
  $T *Gb = reinterpret_cast<$T *>(base_ + $OG);
  float *Rb = reinterpret_cast<float *>(base_ + $OROW);
  for (long long w = blockIdx.x; w < (long long)$SLICES * $KTILES;
       w += gridDim.x) {
    // Key tiles in increasing order across the grid: under a causal mask
    // the first are seen by the most queries.
$ITEM_PRE    const long long b = $ITEM_B;
    const int j0 = (int)($ITEM_RANK) * 64;
    const int c0 = j0 + warp * 16 + g, c1 = c0 + 8; // this thread's keys
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT, *gr = $G_AT;
    // A key tile past the valid keys sees no query (its rows are 0).
    const int iStart = $CAUSAL ? j0 : 0, iEnd = j0 >= lk_ ? 0 : lq_;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_ASYNC(Kh, $LDT, k + (long long)j0 * $K_LD, $K_LD, $D, 64, lk_ - j0)
    ${NAME}_ASYNC(Vh, $LDV, v + (long long)j0 * $V_LD, $V_LD, $DV, 64, lk_ - j0)
    if (iStart < iEnd) {
      ${NAME}_ASYNC(Qb, $LDT, q + (long long)iStart * $Q_LD, $Q_LD, $D, 64,
                    lq_ - iStart)
      ${NAME}_ASYNC(Gb, $LDV, gr + (long long)iStart * $G_LD, $G_LD, $DV, 64,
                    lq_ - iStart)
      ${NAME}_ROWS(Rb, iStart)
    }
    stepCpAsyncWait();
    __syncthreads();
    unsigned ka[$ND][4], va[$NV][4];
    ${NAME}_frags<$ND>(ka, Kh + warp * 16 * $LDT, $LDT);
    ${NAME}_frags<$NV>(va, Vh + warp * 16 * $LDV, $LDV);
    float dk[$ND8][4], dv[$NV8][4];
    ${NAME}_zero<$ND8>(dk);
    ${NAME}_zero<$NV8>(dv);
    for (int i0 = iStart, buf = 0; i0 < iEnd; i0 += 64, buf ^= 1) {
      const $T *Qh = Qb + buf * 64 * $LDT, *Gh = Gb + buf * 64 * $LDV;
      const float *rowL = Rb + buf * 128, *rowD = rowL + 64;
      if (i0 + 64 < iEnd) { // the next query tile, while this one is used
        ${NAME}_ASYNC(Qb + (buf ^ 1) * 64 * $LDT, $LDT,
                      q + (long long)(i0 + 64) * $Q_LD, $Q_LD, $D, 64,
                      lq_ - i0 - 64)
        ${NAME}_ASYNC(Gb + (buf ^ 1) * 64 * $LDV, $LDV,
                      gr + (long long)(i0 + 64) * $G_LD, $G_LD, $DV, 64,
                      lq_ - i0 - 64)
        ${NAME}_ROWS(Rb + (buf ^ 1) * 128, i0 + 64)
      }
      float s[8][4], dp[8][4];
      ${NAME}_abt<$ND>(s, ka, Qh, $LDT);  // S^T = K Q^T
      ${NAME}_abt<$NV>(dp, va, Gh, $LDV); // dP^T = V G^T
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int x = nt * 8 + 2 * t4 + e;
          // Every exponential; the mask after, in tiles not seen whole.
          s[nt][e] = stepExp2(fmaf(s[nt][e], $SCALE2, -rowL[x]));
          s[nt][2 + e] = stepExp2(fmaf(s[nt][2 + e], $SCALE2, -rowL[x]));
          dp[nt][e] = s[nt][e] * (dp[nt][e] - rowD[x]) * $SCALE;
          dp[nt][2 + e] = s[nt][2 + e] * (dp[nt][2 + e] - rowD[x]) * $SCALE;
        }
      if (!${NAME}_WHOLE(i0, j0)) // under a causal mask the diagonal only
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int i = i0 + nt * 8 + 2 * t4 + e;
            if (!${NAME}_SEES(i, c0))
              s[nt][e] = dp[nt][e] = 0.0f;
            if (!${NAME}_SEES(i, c1))
              s[nt][2 + e] = dp[nt][2 + e] = 0.0f;
          }
      ${NAME}_ab<$NV8>(dv, s, Gh, $LDV);  // dv += P^T G
$DSSTORE      ${NAME}_ab<$ND8>(dk, dp, Qh, $LDT); // dk += dS^T Q
$DQATOMIC      stepCpAsyncWait();
      __syncthreads(); // the next tile staged; this one free
    }
    ${NAME}_store<$ND8>(dk, $DK_AT, $DK_LD, c0, $TK, 1.0f, 1.0f);
    ${NAME}_store<$NV8>(dv, $DV_AT, $DV_LD, c0, $TK, 1.0f, 1.0f);
  }
}
)";

// Launch 2's staging of the 64 queries' statistics from i0 (lse in the
// log2 domain, then dd; zeros past the valid rows), by the first 64
// threads.
static const char *kRows =
    R"(#define ${NAME}_ROWS(dst, i0)                                          \
  if (threadIdx.x < 64) {                                                    \
    const bool in_ = (i0) + (int)threadIdx.x < lq_;                         \
    const long long r_ = (b * $TQ + (i0) + threadIdx.x) * 2;                 \
    (dst)[threadIdx.x] = in_ ? ${NAME}_stats[r_] * $LOG2E : 0.0f;            \
    (dst)[64 + threadIdx.x] = in_ ? ${NAME}_stats[r_ + 1] : 0.0f;            \
  }
)";

// The saved-dS form. Launch 1: per query row (4 lanes a row, 8 rows a
// warp) its lse as saved and dd = rowsum(g * out), summed as launch 1 of
// the recomputing form sums it (lane t4 the columns t4, t4 + 4, ..., then
// two shuffles), into the module-scope array.
static const char *kGradStats =
    R"(  for (long long w0 = (long long)blockIdx.x * 32;
       w0 < (long long)$SLICES * $TQ; w0 += (long long)gridDim.x * 32) {
    const long long w = w0 + (threadIdx.x >> 2);
    const bool live = w < (long long)$SLICES * $TQ;
    const long long b = live ? w / $TQ : 0;
    const int r = live ? (int)(w - b * $TQ) : 0;
    const $T *gr = $G_AT, *out = $SO_AT;
    float d = 0.0f;
    if (live && r < lq_)
      for (int x = t4; x < $DV; x += 4)
        d += $TOF(gr[(long long)r * $G_LD + x]) *
             $TOF(out[(long long)r * $SO_LD + x]);
#pragma unroll
    for (int o_ = 1; o_ < 4; o_ <<= 1) // every lane: convergent
      d += __shfl_xor_sync(0xffffffffu, d, o_);
    if (live && t4 == 0) {
      ${NAME}_stats[(b * $TQ + r) * 2] = r < lq_ ? $SL_P[b * $TQ + r] : 0.0f;
      ${NAME}_stats[(b * $TQ + r) * 2 + 1] = d;
    }
  }
}
)";

// Launch 2's store of the tile's dS^T (this warp's keys c0 and c1 = c0 +
// 8, the 64 queries from i0; rounded as the dq product would round it)
// into tile (i0 / 64, j0 / 64) of its slice, key-major.
static const char *kDsStore = R"(      {
        $T *ds_ = reinterpret_cast<$T *>(${NAME}_ds) +
                  (b * $DSTILES + ${NAME}_TILE(i0 >> 6, j0 >> 6)) * 4096LL +
                  (warp * 16 + g) * 64 + 2 * t4;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          *reinterpret_cast<unsigned *>(ds_ + nt * 8) =
              ${NAME}_pack(dp[nt][0], dp[nt][1]);
          *reinterpret_cast<unsigned *>(ds_ + 512 + nt * 8) =
              ${NAME}_pack(dp[nt][2], dp[nt][3]);
        }
      }
)";

// acc (this warp's 16 queries x N8 * 8 columns) += dS K, dS^T a staged
// key-major 64 x 64 tile (rows of 72), K the tile's 64 staged key rows
// (stride ld). dS's A fragment of k-step kk (the warp's 16 queries x keys
// 16 kk + [0, 16)): transposing ldmatrix of the 8 x 8 tiles (keys + 0 /
// + 8) x (queries + 0 / + 8), lane l giving row l % 8 of tile l / 8.
static const char *kDsK = R"(template <int N8>
static __device__ __forceinline__ void ${NAME}_dsk(float (&acc)[N8][4],
                                                   const $T *Ds, const $T *Kh,
                                                   int ld) {
  const int l = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    unsigned a[4];
    stepLdm4T(a, Ds + (kk * 16 + ((l >> 4) << 3) + (l & 7)) * 72 + warp * 16 +
                     ((l >> 3) & 1) * 8);
    ${NAME}_abk<N8>(acc, a[0], a[1], a[2], a[3], Kh + kk * 16 * ld, ld);
  }
}
)";

// Launch 3: per query tile (decreasing, as launch 1 of the recomputing
// form), dq += dS K over the key tiles it sees, the dS tile and the K tile
// double-buffered (${NAME}_dsk).
static const char *kGradDqFromDs =
    R"(  $T *Kb = reinterpret_cast<$T *>(base_ + $OK); // two buffers each
  $T *Db = reinterpret_cast<$T *>(base_ + $ODS);
  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
$ITEM_PRE    const long long b = $ITEM_B;
    const int i0 = ($QTILES - 1 - (int)($ITEM_RANK)) * 64;
    const int r0 = i0 + warp * 16 + g;
    const $T *k = $K_AT;
    const $T *ds = reinterpret_cast<const $T *>(${NAME}_ds) +
                   (b * $DSTILES + ${NAME}_TILE(i0 >> 6, 0)) * 4096LL;
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + 64) : lk_;
    __syncthreads(); // the previous item is done with shared memory
    if (kEnd > 0) {
      ${NAME}_ASYNC(Kb, $LDT, k, $K_LD, $D, 64, lk_)
      ${NAME}_ASYNC(Db, 72, ds, 64, 64, 64, 64)
    }
    stepCpAsyncWait();
    __syncthreads();
    float dq[$ND8][4];
    ${NAME}_zero<$ND8>(dq);
    for (int j0 = 0, buf = 0; j0 < kEnd; j0 += 64, buf ^= 1) {
      const $T *Kh = Kb + buf * 64 * $LDT, *Dh = Db + buf * 64 * 72;
      if (j0 + 64 < kEnd) {
        ${NAME}_ASYNC(Kb + (buf ^ 1) * 64 * $LDT, $LDT,
                      k + (long long)(j0 + 64) * $K_LD, $K_LD, $D, 64,
                      lk_ - j0 - 64)
        ${NAME}_ASYNC(Db + (buf ^ 1) * 64 * 72, 72,
                      ds + ((j0 >> 6) + 1) * 4096LL, 64, 64, 64, 64)
      }
      ${NAME}_dsk<$ND8>(dq, Dh, Kh, $LDT); // dq += dS K
      stepCpAsyncWait();
      __syncthreads(); // the next tiles staged; these free
    }
    ${NAME}_store<$ND8>(dq, $DQ_AT, $DQ_LD, r0, $TQ, 1.0f, 1.0f);
  }
}
)";

// The atomic-dq form. Launch 1 as kGradStats, and it zeroes the rows'
// accumulator (4 floats a lane a step, 4 lanes a row: 16-byte stores, so
// the accumulator is declared __align__(16); D is a multiple of 16).
static const char *kGradStatsZero =
    R"(  for (long long w0 = (long long)blockIdx.x * 32;
       w0 < (long long)$SLICES * $TQ; w0 += (long long)gridDim.x * 32) {
    const long long w = w0 + (threadIdx.x >> 2);
    const bool live = w < (long long)$SLICES * $TQ;
    if (live)
      for (int x = 4 * t4; x < $D; x += 16)
        *reinterpret_cast<uint4 *>(${NAME}_dqacc + w * $D + x) =
            make_uint4(0u, 0u, 0u, 0u); // four 0.0f
  }
)";

// Launch 2's staging of the tile's dS^T (this warp's keys, the 64 queries
// from i0; rounded as the dq product rounds it) in shared memory, key-major
// with rows of 72.
static const char *kDsShared = R"(      {
        $T *ds_ = Ds + (warp * 16 + g) * 72 + 2 * t4;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          *reinterpret_cast<unsigned *>(ds_ + nt * 8) =
              ${NAME}_pack(dp[nt][0], dp[nt][1]);
          *reinterpret_cast<unsigned *>(ds_ + 8 * 72 + nt * 8) =
              ${NAME}_pack(dp[nt][2], dp[nt][3]);
        }
      }
)";

// Then, every warp's dS^T staged: this warp's 16 queries' dq partial over
// the tile's 64 keys, dS K (dS's A fragments by transposing ldmatrix, as
// the saved-dS dq launch reads them; K staged for the item), added into
// the accumulator rows of the valid queries.
static const char *kDqAtomic = R"(      __syncthreads(); // every warp's dS^T staged
      {
        const int q0 = i0 + warp * 16 + g;
        float dq[$ND8][4];
        ${NAME}_zero<$ND8>(dq);
        ${NAME}_dsk<$ND8>(dq, Ds, Kh, $LDT); // dq += dS K
        float *acc0 = ${NAME}_dqacc + (b * $TQ + q0) * $D + 2 * t4;
#pragma unroll
        for (int n = 0; n < $ND8; ++n) {
          if (q0 < lq_) {
            atomicAdd(acc0 + n * 8, dq[n][0]);
            atomicAdd(acc0 + n * 8 + 1, dq[n][1]);
          }
          if (q0 + 8 < lq_) {
            atomicAdd(acc0 + 8 * $D + n * 8, dq[n][2]);
            atomicAdd(acc0 + 8 * $D + n * 8 + 1, dq[n][3]);
          }
        }
      }
)";

// Launch 3 of the atomic-dq form: the accumulator rounded into dq, two
// elements a thread a step (rows past the valid length hold the zeros
// launch 1 wrote).
static const char *kDqFromAcc =
    R"(  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
       e < (long long)$SLICES * $TQ * ($D / 2);
       e += (long long)gridDim.x * blockDim.x) {
    const long long row = e / ($D / 2);
    const long long b = row / $TQ;
    const int r = (int)(row - b * $TQ), x = 2 * (int)(e - row * ($D / 2));
    const float *acc = ${NAME}_dqacc + row * $D + x;
    *reinterpret_cast<unsigned *>($DQ_AT + (long long)r * $DQ_LD + x) =
        ${NAME}_pack(acc[0], acc[1]);
  }
}
)";

void emitAttentionMmaGrad(
    KernelSource &ks, const AttentionShape &a, bool causal, DqForm form,
    const std::string &src, const std::string &views, const std::string &params,
    std::vector<std::pair<std::string, std::string>> vars) {
  const MmaTiles t(a);
  const int64_t tile = MmaTiles::kRows, qBytes = t.qBytes, vBytes = t.vBytes;
  // Causal: query tile i sees key tiles 0..i, packed row after row.
  int64_t dsTiles =
      causal ? t.qTiles * (t.qTiles + 1) / 2 : t.qTiles * t.kTiles;
  // Module scratch past the cap: the recomputing form.
  if ((form == DqForm::SavedDs &&
       a.slices * dsTiles * tile * tile * 2 > kAttentionMaxScratch) ||
      (form == DqForm::Atomic && a.slices * a.tq * a.d * 4 > kAttentionMaxScratch))
    form = DqForm::Recompute;
  const bool savedDs = form == DqForm::SavedDs, atomic = form == DqForm::Atomic;
  auto s = [](int64_t v) { return std::to_string(v); };
  // Launch 2: K and V staged once, Q and G twice, the queries' statistics;
  // atomic dq: one dS^T tile too.
  SharedRegions r2;
  int64_t oK2 = r2.add(qBytes), oV2 = r2.add(vBytes);
  int64_t oQ2 = r2.add(2 * qBytes), oG2 = r2.add(2 * vBytes);
  int64_t oRow = r2.add(2 * 2 * tile * 4);
  int64_t oDs2 = atomic ? r2.add(tile * 72 * 2) : 0;
  // Launch 3: K and the dS tile, twice each.
  SharedRegions r3;
  int64_t oK3 = r3.add(2 * qBytes), oDs = r3.add(2 * tile * 72 * 2);
  vars.insert(vars.end(),
              {{"OROW", s(oRow)},
               {"DSTILES", s(dsTiles)},
               {"ODS", s(oDs)},
               {"DSVEC", s(std::max<int64_t>(a.slices * dsTiles * 512, 1))},
               {"DQACC", s(std::max<int64_t>(a.slices * a.tq * a.d, 1))}});
  vars.push_back({"DSSTORE", savedDs  ? subst(kDsStore, vars)
                             : atomic ? subst(kDsShared, vars)
                                      : ""});
  vars.push_back({"DQATOMIC", atomic ? subst(kDqAtomic, vars) : ""});
  // `vars` with the shared-memory offsets of a launch and the placement of
  // its items: launch 2 streams each slice's Q and G rows, saved dS's
  // launch 3 its K.
  auto with = [&](std::initializer_list<std::pair<const char *, int64_t>> kv,
                  std::vector<std::pair<std::string, std::string>> more) {
    auto v = vars;
    for (auto [key, value] : kv)
      more.push_back({key, s(value)});
    for (auto &[key, value] : more)
      for (auto &[k, x] : v)
        if (k == key)
          x = value;
    return v;
  };
  // Atomic dq's launch 2 also adds into its slices' f32 dq accumulator
  // rows, read and written in L2 by every key tile: they count too.
  const int64_t streamed2 =
      a.tq * (a.d + a.dv) * 2 + (atomic ? a.tq * a.d * 4 : 0);
  auto vars2 = with({{"OQ", oQ2}, {"OG", oG2}, {"OK", oK2}, {"OV", oV2}},
                    itemPlacement(a.slices, t.kTiles, streamed2));
  auto vars3 =
      with({{"OK", oK3}}, itemPlacement(a.slices, t.qTiles, a.tk * a.d * 2));

  std::string globals = "__device__ float ${NAME}_stats[$STATS];\n";
  if (atomic)
    globals += "__device__ __align__(16) float ${NAME}_dqacc[$DQACC];\n";
  if (savedDs)
    globals += "__device__ uint4 ${NAME}_ds[$DSVEC]; // 8 elements each\n"
               "#define ${NAME}_TILE(it, jt) \\\n"
               "  ($CAUSAL ? (it) * ((it) + 1) / 2 + (jt) : (it) * $KTILES + "
               "(jt))\n";
  KernelSource second = ks, third = ks;
  second.name = ks.name + "_dkdv";
  third.name = ks.name + "_dq";
  ks.then.push_back({"_dkdv", tileGrid(a.slices * t.kTiles), 128, r2.bytes});
  std::string first;
  if (savedDs || atomic) {
    ks.gridX = tileGrid((a.slices * a.tq + 31) / 32);
    ks.sharedBytes = 0;
    first = subst(kGradStats, vars);
    if (atomic) // the zeroing before the statistics' closing brace
      first.insert(first.rfind('}'), subst(kGradStatsZero, vars));
  } else {
    first = subst(kGradDq, vars);
  }
  if (savedDs)
    ks.then.push_back({"_dq", tileGrid(a.slices * t.qTiles), 128, r3.bytes});
  if (atomic)
    ks.then.push_back(
        {"_dq", tileGrid((a.slices * a.tq * (a.d / 2) + 127) / 128), 128, 0});
  std::string dkdv = kGradDkDv;
  if (atomic) // the dS^T tile's place in launch 2's shared memory
    dkdv.insert(dkdv.find("  for (long long w"),
                "  $T *Ds = reinterpret_cast<$T *>(base_ + " + s(oDs2) +
                    ");\n");
  if (savedDs || atomic)
    globals += kDsK;
  ks.source = src + subst(globals, vars) + subst(kRows, vars) +
              signature(ks, params) + " {\n" + views + first +
              signature(second, params) + " {\n" + views +
              subst(dkdv, vars2);
  if (savedDs)
    ks.source +=
        signature(third, params) + " {\n" + views + subst(kGradDqFromDs, vars3);
  if (atomic)
    ks.source += signature(third, params) + " {\n" + views +
                 subst(kDqFromAcc, vars);
}

} // namespace step::codegen::detail
