//===- AttentionTensorCore.cpp - attention(_grad) on tensor cores ---------===//
//
// The f16/bf16 attention kernels, for heads whose widths D and Dv are
// multiples of 16: the same tiling as the CUDA-core kernels
// (AttentionKernels.cpp: a block per 64-row tile, an online softmax, two
// launches for the gradient with the row statistics in between), but every
// tile product runs as 16x16x16 wmma (mma.sync) with f32 accumulators:
//
//   forward     S = Q K^T, O += P V
//   grad, 1     S = Q K^T, dP = G V^T (twice: statistics, then dS), dq += dS K
//   grad, 2     S, dP again per query tile, dv += P^T G, dk += dS^T Q
//
// Tiles are staged in shared memory in the element type with 16-byte
// copies, rows padded by 8 elements (wmma's ldm must be a multiple of 8;
// the pad shifts rows across banks). Score tiles land in f32 shared memory
// where 4 threads per row do the softmax arithmetic in f32; P and dS are
// rounded to the element type for the next product, as FlashAttention-2
// does. The forward's output accumulates in f32 shared memory (it is
// rescaled by the row's max step between tiles); dq, dk and dv accumulate
// in register fragments. Eight warps take the 16 blocks of a 64 x 64
// product two each. Summation orders are fixed (deterministic).
//
// Cost: the same FLOPs as the CUDA-core kernels, on the tensor cores; the
// softmax arithmetic (exp per score, twice in the gradient) on CUDA cores.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"

#include <algorithm>

namespace step::codegen::detail {

// The pieces every kernel uses: a 16-byte staging copy of `rows` rows of
// `width` elements, `lds` apart in src (zeros past `limit`), and the two
// tile products on shared memory.
static const char *kTcHelpers = R"(#include <mma.h>
using namespace nvcuda;
#define ${NAME}_COPY(dst, ldd, src, lds, width, rows, limit)                 \
  for (int e_ = threadIdx.x; e_ < (rows) * ((width) / 8);                    \
       e_ += blockDim.x) {                                                   \
    const int y_ = e_ / ((width) / 8), x_ = (e_ - y_ * ((width) / 8)) * 8;   \
    uint4 w_ = make_uint4(0u, 0u, 0u, 0u);                                   \
    if (y_ < (limit))                                                        \
      w_ = *reinterpret_cast<const uint4 *>((src) +                          \
                                            (long long)y_ * (lds) + x_);     \
    *reinterpret_cast<uint4 *>((dst) + y_ * (ldd) + x_) = w_;                \
  }
// out (16 x 16, f32, ldo) = A (16 rows of k, lda) * B^T (16 rows of k, ldb).
static __device__ __forceinline__ void ${NAME}_abt(const $T *A, int lda,
                                                   const $T *B, int ldb, int k,
                                                   float *out, int ldo) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, $T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, $T, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int kk = 0; kk < k; kk += 16) {
    wmma::load_matrix_sync(fa, A + kk, lda);
    wmma::load_matrix_sync(fb, B + kk, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(out, acc, ldo, wmma::mem_row_major);
}
// The accumulator fragments this warp holds (blocks warp, warp + 8, ... of
// a 64 x 16 NC tile) through the f32 staging Sf to `row` (row y of the
// tile), each of the row's 4 threads a quarter of its W columns, when the
// row exists.
template <int F, int NC, int W>
static __device__ __forceinline__ void ${NAME}_writeTile(
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[F],
    float *Sf, $T *row, bool exists) {
  const int warp = threadIdx.x >> 5, y = threadIdx.x >> 2, qd = threadIdx.x & 3;
  __syncthreads(); // Sf free
#pragma unroll
  for (int t = 0; t < F; ++t) {
    const int f = warp + 8 * t;
    if (f < 4 * NC)
      wmma::store_matrix_sync(Sf + (f / NC) * 16 * $LDS + (f % NC) * 16,
                              acc[t], $LDS, wmma::mem_row_major);
  }
  __syncthreads();
  if (exists)
    for (int c = 0; c < W / 4; ++c) {
      const float p_ = Sf[y * $LDS + qd * (W / 4) + c];
      row[qd * (W / 4) + c] = $TOT;
    }
}
)";

// attention_grad's row statistics from the forward's saved result and
// log-sum-exp (step.attention_lse): lse as saved, and dd = rowsum(g * out)
// (= rowsum(P * dP)), each of the row's 4 threads summing a quarter of the
// Dv columns of the staged g row.
static const char *kSavedStats = R"(    __syncthreads(); // Gh staged
    float dd = 0.0f;
    if (i < lq_)
      for (int c = 0; c < $DV4; ++c) {
        const int x = qd * $DV4 + c;
        dd += $GX * $OX;
      }
    dd += __shfl_xor_sync(0xffffffffu, dd, 1);
    dd += __shfl_xor_sync(0xffffffffu, dd, 2);
    const float lse = i < lq_ ? $SL_P[b * $TQ + i] : 0.0f;
)";

std::optional<KernelSource> emitAttentionTensorCore(const AttentionIO &io,
                                                    const AttentionShape &a,
                                                    bool causal, bool grad,
                                                    const std::string &name) {
  // 16-byte copies of the staged rows: every row 16-byte aligned.
  if ((a.e != Elem::BF16 && a.e != Elem::F16) || a.d % 16 || a.dv % 16 ||
      a.d == 0 || a.dv == 0 || !io.aligned8())
    return std::nullopt;
  mlir::Operation *op = io.attention;
  constexpr int64_t tile = 64;
  int64_t ldt = a.d + 8, ldv = a.dv + 8, ldp = tile + 8;
  // f32 score tiles, also the staging of the outputs.
  int64_t lds = std::max({tile, a.d, a.dv}) + 4;
  int64_t ldo = a.dv + 4;
  int64_t qTiles = (a.tq + tile - 1) / tile, kTiles = (a.tk + tile - 1) / tile;
  // Regions: staged Q, K, V (and G), P (and dS), f32 scores (and dP), the
  // forward's f32 output, the gradient's row statistics.
  SharedRegions l;
  int64_t oQ = l.add(tile * ldt * 2), oK = l.add(tile * ldt * 2);
  int64_t oV = l.add(tile * ldv * 2), oG = grad ? l.add(tile * ldv * 2) : 0;
  int64_t oP = l.add(tile * ldp * 2), oD = grad ? l.add(tile * ldp * 2) : 0;
  int64_t oS = l.add(tile * lds * 4), oDP = grad ? l.add(tile * lds * 4) : 0;
  int64_t oO = grad ? 0 : l.add(tile * ldo * 4);
  int64_t oRow = grad ? l.add(2 * tile * 4) : 0;
  if (l.bytes > kAttentionMaxShared ||
      (grad && a.slices * a.tq * 8 > (int64_t(1) << 28)))
    return std::nullopt;

  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  ks.gridX = tileGrid(a.slices * qTiles);
  ks.sharedBytes = l.bytes;
  if (grad)
    ks.then.push_back({"_dkdv", tileGrid(a.slices * kTiles), 256, l.bytes});
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(io.launched, ks, needs, /*restrict=*/true);
  int64_t nd = a.d / 16, nv = a.dv / 16;
  // The forward also stores each row's log-sum-exp; the gradient takes the
  // statistics the forward saved.
  bool withLse = mlir::isa<mlir::step::AttentionLseOp>(op);
  bool saved = grad && mlir::cast<mlir::step::AttentionGradOp>(op).getOut();
  auto s = [](int64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name},
      {"T", cType(a.e)},
      {"D", s(a.d)},
      {"DV", s(a.dv)},
      {"D4", s(a.d / 4)},
      {"DV4", s(a.dv / 4)},
      {"ND", s(nd)},
      {"NV", s(nv)},
      {"FQ", s((4 * nd + 7) / 8)},
      {"FV", s((4 * nv + 7) / 8)},
      {"LDT", s(ldt)},
      {"LDV", s(ldv)},
      {"LDP", s(ldp)},
      {"LDS", s(lds)},
      {"LDO", s(ldo)},
      {"TQ", s(a.tq)},
      {"TK", s(a.tk)},
      {"SLICES", s(a.slices)},
      {"QTILES", s(qTiles)},
      {"KTILES", s(kTiles)},
      {"OQ", s(oQ)},
      {"OK", s(oK)},
      {"OV", s(oV)},
      {"OG", s(oG)},
      {"OP", s(oP)},
      {"OD", s(oD)},
      {"OS", s(oS)},
      {"ODP", s(oDP)},
      {"OO", s(oO)},
      {"OROW", s(oRow)},
      {"STATS", s(std::max<int64_t>(a.slices * a.tq * 2, 1))},
      {"CAUSAL", causal ? "true" : "false"},
      {"SCALE", litF(a.scale)},
      {"NEGINF", litF(-INFINITY)},
      {"TOT", fromF(a.e, "p_")},
      {"TOF", toF(a.e, "x_")},
      {"GX", toF(a.e, "Gh[y * " + s(ldv) + " + x]")},
      {"LSESTORE", withLse ? "    if (qd == 0 && i < " + s(a.tq) + ")\n      " +
                                 io.out[1].param + "[b * " + s(a.tq) +
                                 " + i] = i < lq_ && l != 0.0f ? m + logf(l) "
                                 ": 0.0f;\n"
                           : ""},
      {"VALID", validLengths(io, a)}};
  for (auto &v : io.vars())
    vars.push_back(std::move(v));
  if (saved)
    vars.push_back(
        {"OX", toF(a.e, subst("$SO_AT[(long long)i * $SO_LD + x]", vars))});
  // Shared-memory views, in every kernel.
  const char *views = R"(  extern __shared__ __align__(128) float smem[];
  unsigned char *base_ = reinterpret_cast<unsigned char *>(smem);
  $T *Qh = reinterpret_cast<$T *>(base_ + $OQ);
  $T *Kh = reinterpret_cast<$T *>(base_ + $OK);
  $T *Vh = reinterpret_cast<$T *>(base_ + $OV);
  $T *Ph = reinterpret_cast<$T *>(base_ + $OP);
  float *Sf = reinterpret_cast<float *>(base_ + $OS);
  const int warp = threadIdx.x >> 5;
  // The row phases: 4 threads per row, 16 columns each.
  const int y = threadIdx.x >> 2, qd = threadIdx.x & 3;
$VALID)";
  std::string src = io.comment() + prelude(needs) + subst(kTcHelpers, vars);
  if (!grad) {
    src += signature(ks, params) + " {\n" + subst(views, vars) +
           subst(R"(  float *Of = reinterpret_cast<float *>(base_ + $OO);
  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
    const long long b = w / $QTILES;
    const int i0 = (int)(w - b * $QTILES) * 64, i = i0 + y;
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_COPY(Qh, $LDT, q + (long long)i0 * $Q_LD, $Q_LD, $D, 64, lq_ - i0)
    for (int c = 0; c < $DV4; ++c)
      Of[y * $LDO + qd * $DV4 + c] = 0.0f;
    // Causal (top-left): key j is visible to query i iff j <= i; a tile
    // past the valid rows reads no key.
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + 64) : lk_;
    // The row's max (the same in its 4 threads) and this thread's share
    // of the sum of exp.
    float m = $NEGINF, l = 0.0f;
    for (int j0 = 0; j0 < kEnd; j0 += 64) {
      __syncthreads(); // Kh, Vh, Sf, Ph free; Qh, Of ready
      ${NAME}_COPY(Kh, $LDT, k + (long long)j0 * $K_LD, $K_LD, $D, 64, lk_ - j0)
      ${NAME}_COPY(Vh, $LDV, v + (long long)j0 * $V_LD, $V_LD, $DV, 64,
                   lk_ - j0)
      __syncthreads();
      for (int f = warp; f < 16; f += 8)
        ${NAME}_abt(Qh + (f >> 2) * 16 * $LDT, $LDT,
                    Kh + (f & 3) * 16 * $LDT, $LDT, $D,
                    Sf + (f >> 2) * 16 * $LDS + (f & 3) * 16, $LDS);
      __syncthreads();
      float sv[16], tmax = $NEGINF;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const int j = j0 + qd * 16 + c;
        sv[c] = j < lk_ && !($CAUSAL && j > i)
                    ? Sf[y * $LDS + qd * 16 + c] * $SCALE
                    : $NEGINF;
        tmax = maxNaN(tmax, sv[c]);
      }
      tmax = maxNaN(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
      tmax = maxNaN(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
      const float mNew = maxNaN(m, tmax);
      const float alpha = m == $NEGINF ? 0.0f : expf(m - mNew);
      l *= alpha;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const float p_ = sv[c] == $NEGINF ? 0.0f : expf(sv[c] - mNew);
        l += p_;
        Ph[y * $LDP + qd * 16 + c] = $TOT;
      }
      for (int c = 0; c < $DV4; ++c)
        Of[y * $LDO + qd * $DV4 + c] *= alpha;
      m = mNew;
      __syncthreads();
      // O += P V, the accumulators through shared memory (rescaled above).
      for (int f = warp; f < 4 * $NV; f += 8) {
        const int rb = f / $NV, cb = f - rb * $NV;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, $T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, $T, wmma::row_major> fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        float *o = Of + rb * 16 * $LDO + cb * 16;
        wmma::load_matrix_sync(acc, o, $LDO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < 64; kk += 16) {
          wmma::load_matrix_sync(fa, Ph + rb * 16 * $LDP + kk, $LDP);
          wmma::load_matrix_sync(fb, Vh + kk * $LDV + cb * 16, $LDV);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(o, acc, $LDO, wmma::mem_row_major);
      }
    }
    __syncthreads();
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
$LSESTORE    if (i < $TQ)
      for (int c = 0; c < $DV4; ++c) {
        // A row that sees no key (l = 0) stores zeros; a NaN sum (a NaN
        // score) divides, so the row is NaN, as the CPU's.
        const float p_ =
            i < lq_ && l != 0.0f ? Of[y * $LDO + qd * $DV4 + c] / l : 0.0f;
        $O_AT[(long long)i * $O_LD + qd * $DV4 + c] = $TOT;
      }
  }
}
)",
                 vars);
    ks.source = src;
    return ks;
  }

  // The gradient: statistics and dq per query tile, then dk and dv per key
  // tile, reading the statistics of launch 1.
  KernelSource second = ks;
  second.name = name + "_dkdv";
  src += subst(R"(__device__ float ${NAME}_stats[$STATS];
)", vars);
  const char *gradViews = R"(  $T *Gh = reinterpret_cast<$T *>(base_ + $OG);
  $T *Dh = reinterpret_cast<$T *>(base_ + $OD);
  float *DPf = reinterpret_cast<float *>(base_ + $ODP);
  float *rowL = reinterpret_cast<float *>(base_ + $OROW), *rowD = rowL + 64;
  (void)Dh;
  (void)rowL;
  (void)rowD;
)";
  // S = Q K^T and dP = G V^T of the staged tiles into Sf and DPf.
  const char *scores = R"(      for (int f = warp; f < 16; f += 8) {
        ${NAME}_abt(Qh + (f >> 2) * 16 * $LDT, $LDT,
                    Kh + (f & 3) * 16 * $LDT, $LDT, $D,
                    Sf + (f >> 2) * 16 * $LDS + (f & 3) * 16, $LDS);
        ${NAME}_abt(Gh + (f >> 2) * 16 * $LDV, $LDV,
                    Vh + (f & 3) * 16 * $LDV, $LDV, $DV,
                    DPf + (f >> 2) * 16 * $LDS + (f & 3) * 16, $LDS);
      }
      __syncthreads();
)";
  // The row statistics: from the forward's saved result and log-sum-exp,
  // or from a pass over the key tiles.
  std::string pass1 =
      saved
          ? subst(kSavedStats, vars)
          : subst(
                R"(    // Pass 1: per thread the running max, sum of exp and sum of exp * dP
    // over its columns, merged over the row's 4 threads after the loop.
    float m = $NEGINF, l = 0.0f, u = 0.0f;
    for (int j0 = 0; j0 < kEnd; j0 += 64) {
      __syncthreads(); // Kh, Vh, Sf, DPf free
      ${NAME}_COPY(Kh, $LDT, k + (long long)j0 * $K_LD, $K_LD, $D, 64, lk_ - j0)
      ${NAME}_COPY(Vh, $LDV, v + (long long)j0 * $V_LD, $V_LD, $DV, 64,
                   lk_ - j0)
      __syncthreads();
)",
                vars) +
                subst(scores, vars) +
                subst(R"(#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const int x = qd * 16 + c, j = j0 + x;
        if (i >= lq_ || j >= lk_ || ($CAUSAL && j > i))
          continue;
        const float sc = Sf[y * $LDS + x] * $SCALE;
        const float mNew = maxNaN(m, sc);
        const float keep = m == $NEGINF ? 0.0f : expf(m - mNew);
        const float wgt = expf(sc - mNew);
        l = l * keep + wgt;
        u = u * keep + wgt * DPf[y * $LDS + x];
        m = mNew;
      }
    }
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
      const float l2 = __shfl_xor_sync(0xffffffffu, l, o);
      const float u2 = __shfl_xor_sync(0xffffffffu, u, o);
      const float mNew = maxNaN(m, m2);
      const float a1 = m == $NEGINF ? 0.0f : expf(m - mNew);
      const float a2 = m2 == $NEGINF ? 0.0f : expf(m2 - mNew);
      l = l * a1 + l2 * a2;
      u = u * a1 + u2 * a2;
      m = mNew;
    }
    // A row that sees no key (no keys at all) has no gradient.
    const float lse = l > 0.0f ? m + logf(l) : 0.0f;
    const float dd = l > 0.0f ? u / l : 0.0f;
)",
                      vars);
  src +=
      signature(ks, params) + " {\n" + subst(views, vars) +
      subst(gradViews, vars) +
      subst(
          R"(  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
    const long long b = w / $QTILES;
    const int i0 = (int)(w - b * $QTILES) * 64, i = i0 + y;
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT, *g = $G_AT;
    $T *dq = $DQ_AT;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_COPY(Qh, $LDT, q + (long long)i0 * $Q_LD, $Q_LD, $D, 64, lq_ - i0)
    ${NAME}_COPY(Gh, $LDV, g + (long long)i0 * $G_LD, $G_LD, $DV, 64, lq_ - i0)
    // Causal (top-left): key j is visible to query i iff j <= i; a tile
    // past the valid rows reads no key.
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + 64) : lk_;
)",
          vars) +
      pass1 +
      subst(R"(    if (qd == 0 && i < $TQ) {
      ${NAME}_stats[(b * $TQ + i) * 2] = lse;
      ${NAME}_stats[(b * $TQ + i) * 2 + 1] = dd;
    }
    // Pass 2: dS = P * (dP - dd) * scale, dq += dS K.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dqf[$FQ];
#pragma unroll
    for (int t = 0; t < $FQ; ++t)
      wmma::fill_fragment(dqf[t], 0.0f);
    for (int j0 = 0; j0 < kEnd; j0 += 64) {
      __syncthreads(); // Kh, Vh, Sf, DPf, Ph free
      ${NAME}_COPY(Kh, $LDT, k + (long long)j0 * $K_LD, $K_LD, $D, 64, lk_ - j0)
      ${NAME}_COPY(Vh, $LDV, v + (long long)j0 * $V_LD, $V_LD, $DV, 64,
                   lk_ - j0)
      __syncthreads();
)",
            vars) +
      subst(scores, vars) +
      subst(R"(#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const int x = qd * 16 + c, j = j0 + x;
        const bool seen = i < lq_ && j < lk_ && !($CAUSAL && j > i);
        const float pr = seen ? expf(Sf[y * $LDS + x] * $SCALE - lse) : 0.0f;
        const float p_ = pr * (DPf[y * $LDS + x] - dd) * $SCALE;
        Ph[y * $LDP + x] = $TOT;
      }
      __syncthreads();
#pragma unroll
      for (int t = 0; t < $FQ; ++t) {
        const int f = warp + 8 * t;
        if (f >= 4 * $ND)
          break;
        const int rb = f / $ND, cb = f - rb * $ND;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, $T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, $T, wmma::row_major> fb;
#pragma unroll
        for (int kk = 0; kk < 64; kk += 16) {
          wmma::load_matrix_sync(fa, Ph + rb * 16 * $LDP + kk, $LDP);
          wmma::load_matrix_sync(fb, Kh + kk * $LDT + cb * 16, $LDT);
          wmma::mma_sync(dqf[t], fa, fb, dqf[t]);
        }
      }
    }
    ${NAME}_writeTile<$FQ, $ND, $D>(dqf, Sf, dq + (long long)i * $DQ_LD,
                                    i < $TQ);
  }
}
)",
            vars);
  src +=
      signature(second, params) + " {\n" + subst(views, vars) +
      subst(gradViews, vars) +
      subst(
          R"(  for (long long w = blockIdx.x; w < (long long)$SLICES * $KTILES;
       w += gridDim.x) {
    const long long b = w / $KTILES;
    const int j0 = (int)(w - b * $KTILES) * 64;
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT, *g = $G_AT;
    $T *dk = $DK_AT, *dv = $DV_AT;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_COPY(Kh, $LDT, k + (long long)j0 * $K_LD, $K_LD, $D, 64, lk_ - j0)
    ${NAME}_COPY(Vh, $LDV, v + (long long)j0 * $V_LD, $V_LD, $DV, 64, lk_ - j0)
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dkf[$FQ], dvf[$FV];
#pragma unroll
    for (int t = 0; t < $FQ; ++t)
      wmma::fill_fragment(dkf[t], 0.0f);
#pragma unroll
    for (int t = 0; t < $FV; ++t)
      wmma::fill_fragment(dvf[t], 0.0f);
    // A key tile past the valid keys sees no query (its rows are 0).
    const int iEnd = j0 >= lk_ ? 0 : lq_;
    for (int i0 = $CAUSAL ? j0 : 0; i0 < iEnd; i0 += 64) {
      __syncthreads(); // Qh, Gh, Sf, DPf, Ph, Dh, rows free
      ${NAME}_COPY(Qh, $LDT, q + (long long)i0 * $Q_LD, $Q_LD, $D, 64, lq_ - i0)
      ${NAME}_COPY(Gh, $LDV, g + (long long)i0 * $G_LD, $G_LD, $DV, 64,
                   lq_ - i0)
      if (threadIdx.x < 64) {
        const bool in = i0 + (int)threadIdx.x < lq_;
        const long long r = (b * $TQ + i0 + threadIdx.x) * 2;
        rowL[threadIdx.x] = in ? ${NAME}_stats[r] : 0.0f;
        rowD[threadIdx.x] = in ? ${NAME}_stats[r + 1] : 0.0f;
      }
      __syncthreads();
)",
          vars) +
      subst(scores, vars) +
      subst(R"(      const int i = i0 + y;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const int x = qd * 16 + c, j = j0 + x;
        const bool seen = i < lq_ && j < lk_ && !($CAUSAL && j > i);
        const float pr =
            seen ? expf(Sf[y * $LDS + x] * $SCALE - rowL[y]) : 0.0f;
        float p_ = pr;
        Ph[y * $LDP + x] = $TOT;
        p_ = pr * (DPf[y * $LDS + x] - rowD[y]) * $SCALE;
        Dh[y * $LDP + x] = $TOT;
      }
      __syncthreads();
      // dv += P^T G and dk += dS^T Q: P and dS read transposed.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, $T, wmma::col_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, $T, wmma::row_major> fb;
#pragma unroll
      for (int t = 0; t < $FV; ++t) {
        const int f = warp + 8 * t;
        if (f >= 4 * $NV)
          break;
        const int rb = f / $NV, cb = f - rb * $NV;
#pragma unroll
        for (int kk = 0; kk < 64; kk += 16) {
          wmma::load_matrix_sync(fa, Ph + kk * $LDP + rb * 16, $LDP);
          wmma::load_matrix_sync(fb, Gh + kk * $LDV + cb * 16, $LDV);
          wmma::mma_sync(dvf[t], fa, fb, dvf[t]);
        }
      }
#pragma unroll
      for (int t = 0; t < $FQ; ++t) {
        const int f = warp + 8 * t;
        if (f >= 4 * $ND)
          break;
        const int rb = f / $ND, cb = f - rb * $ND;
#pragma unroll
        for (int kk = 0; kk < 64; kk += 16) {
          wmma::load_matrix_sync(fa, Dh + kk * $LDP + rb * 16, $LDP);
          wmma::load_matrix_sync(fb, Qh + kk * $LDT + cb * 16, $LDT);
          wmma::mma_sync(dkf[t], fa, fb, dkf[t]);
        }
      }
    }
    // dk, then dv, staged through Sf.
    const int j = j0 + y;
    ${NAME}_writeTile<$FQ, $ND, $D>(dkf, Sf, dk + (long long)j * $DK_LD,
                                    j < $TK);
    ${NAME}_writeTile<$FV, $NV, $DV>(dvf, Sf, dv + (long long)j * $DV_LD,
                                     j < $TK);
  }
}
)",
            vars);
  ks.source = src;
  return ks;
}

} // namespace step::codegen::detail
