//===- AttentionKernels.cpp - attention and attention_grad ----------------===//
//
//  - attention: FlashAttention's forward, a block of 16 x 16 threads per
//    (slice, query tile of 64 rows, fewer for a wide head), an online
//    softmax over the key tiles; staged tiles padded by one float per row.
//    A head too wide for 16-row tiles: one block per query row
//    (AttentionOneRow.cpp).
//  - attention_grad: FlashAttention-2's split in two launches (the
//    manifest's `then`): per (slice, query tile) the rows' log-sum-exp and
//    rowsum(P * dP) into a module-scope array, then dq; per (slice, key
//    tile) dk and dv from P and dS recomputed with those statistics.
//    Nothing of size Tq x Tk stored; fixed summation orders. A head too
//    wide for 16-row tiles: one block per slice (AttentionOneRow.cpp).
//    Both on CUDA cores in f32; f16/bf16 heads whose widths are multiples
//    of 16 take the tensor-core variants (AttentionTensorCore.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"
#include "compiler/codegen/Emitters.h"

#include "dialects/step/StepOps.h"

#include <cmath>

namespace step::codegen::detail {

namespace ops = mlir::step;

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

/// s[rr][cc] = sum_x A[ty + 16 rr][x] * B[tx + 16 cc][x] over `width`
/// values: a thread's block of a tile of dot products (q.k, g.v) from two
/// staged tiles (rows of lda, ldb floats).
static const char *kTileDot = R"(template <int R>
static __device__ __forceinline__ void ${NAME}_tileDot(
    float (&s)[R][R], const float *A, int lda, const float *B, int ldb,
    int width, int ty, int tx) {
#pragma unroll
  for (int rr = 0; rr < R; ++rr)
#pragma unroll
    for (int cc = 0; cc < R; ++cc)
      s[rr][cc] = 0.0f;
  for (int x = 0; x < width; ++x) {
    float a[R], b[R];
#pragma unroll
    for (int rr = 0; rr < R; ++rr)
      a[rr] = A[(ty + 16 * rr) * lda + x];
#pragma unroll
    for (int cc = 0; cc < R; ++cc)
      b[cc] = B[(tx + 16 * cc) * ldb + x];
#pragma unroll
    for (int rr = 0; rr < R; ++rr)
#pragma unroll
      for (int cc = 0; cc < R; ++cc)
        s[rr][cc] += a[rr] * b[cc];
  }
}
)";

/// Stages `rows` rows of `width` values (`load`, in terms of the row y and
/// column x) into a shared f32 tile of row stride `stride`; zeros past
/// `limit` rows.
static const char *kStageRows = R"(#define ${NAME}_STAGE(dst, stride, width, rows, limit, load)              \
  for (int e_ = threadIdx.x; e_ < (rows) * (width); e_ += blockDim.x) {    \
    const int y = e_ / (width), x = e_ - y * (width);                      \
    (dst)[y * (stride) + x] = y < (limit) ? (load) : 0.0f;                 \
  }
)";

/// acc[rr][cc] += sum_jj A[ty + 16 rr][jj] * B[jj][tx + 16 cc] over a
/// tile: the P V of the forward and the dS K of the gradient's dq, on CUDA
/// cores; A is the f32 tile (rows of TP floats), B staged rows of ldb.
static const char *kTileAccumulate = R"(template <int R, int C>
static __device__ __forceinline__ void ${NAME}_accumulate(
    float (&acc)[R][C], const float *A, const float *B, int ldb, int width,
    int ty, int tx) {
  for (int jj = 0; jj < $TILE; ++jj) {
    float bv[C];
#pragma unroll
    for (int cc = 0; cc < C; ++cc) {
      const int c = tx + 16 * cc;
      bv[cc] = c < width ? B[jj * ldb + c] : 0.0f;
    }
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      const float a = A[(ty + 16 * rr) * $TP + jj];
#pragma unroll
      for (int cc = 0; cc < C; ++cc)
        acc[rr][cc] += a * bv[cc];
    }
  }
}
)";

/// The substitutions both tiled CUDA-core kernels use: sizes, tile shape,
/// the padded row strides (DP, DVP, TP), per-thread column blocks (DC,
/// DVC), the staging loads of q, g, k, v and the store of `acc`.
static std::vector<std::pair<std::string, std::string>>
tiledVars(const AttentionIO &io, const AttentionShape &a,
          const std::string &name, bool causal, int64_t tile) {
  auto str = [](int64_t v) { return std::to_string(v); };
  auto ld = [&](const std::vector<AttentionPort> &ports, size_t i) {
    return i < ports.size() ? str(ports[i].ld) : std::string("0");
  };
  std::string d = str(a.d), dv = str(a.dv);
  Elem e = a.e;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name},
      {"T", cType(e)},
      {"D", d},
      {"DV", dv},
      {"DP", str(a.d + 1)},
      {"DVP", str(a.dv + 1)},
      {"DC", str(std::max<int64_t>((a.d + 15) / 16, 1))},
      {"DVC", str(std::max<int64_t>((a.dv + 15) / 16, 1))},
      {"TQ", str(a.tq)},
      {"TK", str(a.tk)},
      {"SLICES", str(a.slices)},
      {"QTILES", str((a.tq + tile - 1) / tile)},
      {"KTILES", str((a.tk + tile - 1) / tile)},
      {"TILE", str(tile)},
      {"TP", str(tile + 1)},
      {"R", str(tile / 16)},
      {"STATS", str(std::max<int64_t>(a.slices * a.tq * 2, 1))},
      {"CAUSAL", causal ? "true" : "false"},
      {"SCALE", litF(a.scale)},
      {"NEGINF", litF(-INFINITY)},
      {"LOADQ", toF(e, "q[(long long)(i0 + y) * " + ld(io.in, 0) + " + x]")},
      {"LOADG", toF(e, "g[(long long)(i0 + y) * " + ld(io.in, 3) + " + x]")},
      {"LOADK", toF(e, "k[(long long)(j0 + y) * " + ld(io.in, 1) + " + x]")},
      {"LOADV", toF(e, "v[(long long)(j0 + y) * " + ld(io.in, 2) + " + x]")},
      {"STORE", fromF(e, "acc")},
      {"VALID", validLengths(io, a)}};
  for (auto &v : io.vars())
    vars.push_back(std::move(v));
  return vars;
}

/// attention as FlashAttention's forward: a block per (slice, query tile),
/// one pass over the key tiles with the online softmax (running row max
/// and sum, the output rescaled when the max grows), nothing of size
/// Tq x Tk stored beyond one tile. Thread (ty, tx) of 16 x 16 holds the
/// scores of rows ty + 16 * rr, columns tx + 16 * cc, and the output
/// columns tx + 16 * cc of its rows. CUDA cores, f32 arithmetic.
static KernelSource emitAttention(const AttentionIO &io,
                                  const std::string &name) {
  mlir::Operation *op = io.attention;
  AttentionShape a = attentionShape(op);
  bool causal = causalOf(op);
  if (auto mma = emitAttentionMma(io, a, causal, name))
    return *mma;
  if (auto tc = emitAttentionTensorCore(io, a, causal, false, name))
    return *tc;
  int64_t tile = 0, shared = 0;
  for (int64_t t : {64, 32, 16}) {
    shared = 4 * (t * (2 * (a.d + 1) + (a.dv + 1)) + t * (t + 1));
    if (shared <= kAttentionMaxShared) {
      tile = t;
      break;
    }
  }
  if (!tile)
    return emitAttentionOneRow(io, name);
  int64_t qTiles = (a.tq + tile - 1) / tile;
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  ks.gridX = tileGrid(a.slices * qTiles);
  ks.sharedBytes = shared;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(io.launched, ks, needs, /*restrict=*/true);
  Elem e = a.e;
  auto vars = tiledVars(io, a, name, causal, tile);
  // attention_lse: each row's log-sum-exp (m is the row's max in all 16 of
  // its threads, l now their total).
  vars.push_back(
      {"LSESTORE", mlir::isa<ops::AttentionLseOp>(op)
                       ? "      if (tx == 0 && i < " + std::to_string(a.tq) +
                             ")\n        " + io.out[1].param + "[b * " +
                             std::to_string(a.tq) +
                             " + i] = i < lq_ && l[rr] != 0.0f ? m[rr] + "
                             "logf(l[rr]) : 0.0f;\n"
                       : ""});
  ks.source = io.comment() + prelude(needs) + subst(kStageRows, vars) +
              subst(kTileDot, vars) + subst(kTileAccumulate, vars) +
              signature(ks, params) + " {\n" +
              subst(R"(  extern __shared__ float smem[];
  float *Qs = smem, *Ks = Qs + $TILE * $DP, *Vs = Ks + $TILE * $DP;
  float *Ps = Vs + $TILE * $DVP;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
$VALID  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
    const long long b = w / $QTILES;
    const int i0 = (int)(w - b * $QTILES) * $TILE;
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_STAGE(Qs, $DP, $D, $TILE, lq_ - i0, $LOADQ)
    // Causal (top-left): key j is visible to query i iff j <= i; a tile
    // past the valid rows reads no key.
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + $TILE) : lk_;
    // Per row: the running max m (the same in the row's 16 threads), this
    // thread's share of the sum of exp, its output columns.
    float m[$R], l[$R], acc[$R][$DVC];
#pragma unroll
    for (int rr = 0; rr < $R; ++rr) {
      m[rr] = $NEGINF;
      l[rr] = 0.0f;
#pragma unroll
      for (int cc = 0; cc < $DVC; ++cc)
        acc[rr][cc] = 0.0f;
    }
    for (int j0 = 0; j0 < kEnd; j0 += $TILE) {
      __syncthreads(); // Ks, Vs, Ps free (and Qs staged)
      ${NAME}_STAGE(Ks, $DP, $D, $TILE, lk_ - j0, $LOADK)
      ${NAME}_STAGE(Vs, $DVP, $DV, $TILE, lk_ - j0, $LOADV)
      __syncthreads();
      float s[$R][$R];
      ${NAME}_tileDot(s, Qs, $DP, Ks, $DP, $D, ty, tx);
#pragma unroll
      for (int rr = 0; rr < $R; ++rr) {
        const int y = ty + 16 * rr, i = i0 + y;
        float tmax = $NEGINF;
#pragma unroll
        for (int cc = 0; cc < $R; ++cc) {
          const int j = j0 + tx + 16 * cc;
          s[rr][cc] = j < lk_ && !($CAUSAL && j > i) ? s[rr][cc] * $SCALE
                                                     : $NEGINF;
          tmax = maxNaN(tmax, s[rr][cc]);
        }
#pragma unroll
        for (int o = 8; o > 0; o >>= 1)
          tmax = maxNaN(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
        const float mNew = maxNaN(m[rr], tmax);
        // A row whose keys are all masked so far keeps m = -inf.
        const float alpha = m[rr] == $NEGINF ? 0.0f : expf(m[rr] - mNew);
        l[rr] *= alpha;
#pragma unroll
        for (int cc = 0; cc < $DVC; ++cc)
          acc[rr][cc] *= alpha;
#pragma unroll
        for (int cc = 0; cc < $R; ++cc) {
          const float p = s[rr][cc] == $NEGINF ? 0.0f : expf(s[rr][cc] - mNew);
          l[rr] += p;
          Ps[y * $TP + tx + 16 * cc] = p;
        }
        m[rr] = mNew;
      }
      __syncthreads();
      ${NAME}_accumulate(acc, Ps, Vs, $DVP, $DV, ty, tx);
    }
#pragma unroll
    for (int rr = 0; rr < $R; ++rr) {
#pragma unroll
      for (int o = 8; o > 0; o >>= 1)
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], o);
      const int i = i0 + ty + 16 * rr;
$LSESTORE#pragma unroll
      for (int cc = 0; cc < $DVC; ++cc) {
        const int c = tx + 16 * cc;
        if (i < $TQ && c < $DV) {
          const float acc1 = i < lq_ ? acc[rr][cc] / l[rr] : 0.0f;
          $O_AT[(long long)i * $O_LD + c] = $STORE1;
        }
      }
    }
  }
}
)",
                    [&] {
                      auto v = vars;
                      v.push_back({"STORE1", fromF(e, "acc1")});
                      return v;
                    }());
  return ks;
}

//===----------------------------------------------------------------------===//
// step.attention_grad
//===----------------------------------------------------------------------===//

/// attention_grad's key tile j0 staged (K, V) and scored against the staged
/// query tile: s = q.k * scale and dp = g.v (both passes of launch 1).
static const char *kStageScores = R"(      ${NAME}_STAGE(Ks, $DP, $D, $TILE, lk_ - j0, $LOADK)
      ${NAME}_STAGE(Vs, $DVP, $DV, $TILE, lk_ - j0, $LOADV)
      __syncthreads();
      float s[$R][$R], dp[$R][$R];
      ${NAME}_scores(Qs, Gs, Ks, Vs, ty, tx, s, dp);
)";

/// attention_grad's row statistics, one online pass over the key tiles:
/// per row the running max m, the sum of exp l and of exp * dp u, each
/// thread over its columns (kStatsLoop), then over the row's 16 threads by
/// a shuffle tree (kStatsRow: lse and dd of row rr).
static const char *kStatsLoop =
    R"(    // Pass 1: per row the running max m, sum of exp l and sum of
    // exp * dp u over this thread's columns, then over the row's 16
    // threads (one half-warp) by a shuffle tree.
    float m[$R], l[$R], u[$R];
#pragma unroll
    for (int rr = 0; rr < $R; ++rr) {
      m[rr] = $NEGINF;
      l[rr] = u[rr] = 0.0f;
    }
    for (int j0 = 0; j0 < kEnd; j0 += $TILE) {
      __syncthreads(); // Ks, Vs free (and Qs, Gs staged)
$STAGE_SCORES#pragma unroll
      for (int rr = 0; rr < $R; ++rr)
#pragma unroll
        for (int cc = 0; cc < $R; ++cc) {
          const int i = i0 + ty + 16 * rr, j = j0 + tx + 16 * cc;
          if (i >= lq_ || j >= lk_ || ($CAUSAL && j > i))
            continue;
          const float mNew = maxNaN(m[rr], s[rr][cc]);
          const float keep = m[rr] == $NEGINF ? 0.0f : expf(m[rr] - mNew);
          const float wgt = expf(s[rr][cc] - mNew);
          l[rr] = l[rr] * keep + wgt;
          u[rr] = u[rr] * keep + wgt * dp[rr][cc];
          m[rr] = mNew;
        }
    }
)";
static const char *kStatsRow = R"(#pragma unroll
      for (int o = 8; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m[rr], o);
        const float l2 = __shfl_xor_sync(0xffffffffu, l[rr], o);
        const float u2 = __shfl_xor_sync(0xffffffffu, u[rr], o);
        const float mNew = maxNaN(m[rr], m2);
        const float a1 = m[rr] == $NEGINF ? 0.0f : expf(m[rr] - mNew);
        const float a2 = m2 == $NEGINF ? 0.0f : expf(m2 - mNew);
        l[rr] = l[rr] * a1 + l2 * a2;
        u[rr] = u[rr] * a1 + u2 * a2;
        m[rr] = mNew;
      }
      // A row that sees no key (no keys at all) has no gradient.
      const float lse = l[rr] > 0.0f ? m[rr] + logf(l[rr]) : 0.0f;
      const float dd = l[rr] > 0.0f ? u[rr] / l[rr] : 0.0f;
)";

/// attention_grad's row statistics from the forward's saved result and
/// log-sum-exp (step.attention_lse): lse as saved, and dd = rowsum(g * out)
/// (= rowsum(P * dP)); thread (ty, tx) sums columns tx + 16 * cc of row rr
/// of the staged g, then the row's 16 threads by a shuffle tree.
static const char *kSavedRow = R"(      float dd = 0.0f;
#pragma unroll
      for (int cc = 0; cc < $DVC; ++cc) {
        const int c = tx + 16 * cc;
        if (i < lq_ && c < $DV)
          dd += Gs[y * $DVP + c] * $OX;
      }
#pragma unroll
      for (int o = 8; o > 0; o >>= 1)
        dd += __shfl_xor_sync(0xffffffffu, dd, o);
      const float lse = i < lq_ ? $SL_P[b * $TQ + i] : 0.0f;
)";

namespace {
/// The tiled attention_grad's shape of work: query and key tiles of `tile`
/// rows, 256 threads as 16 x 16, each thread a (tile/16) x (tile/16) block
/// of the tile's scores; rows of the staged tiles padded by one float.
struct GradTiling {
  int64_t tile = 0, sharedA = 0, sharedB = 0;
};

/// The largest tile (64, 32 or 16) whose staging fits kAttentionMaxShared bytes,
/// or tile 0 when none does (a very wide head: the one-block kernel).
GradTiling gradTiling(int64_t d, int64_t dv) {
  for (int64_t t : {64, 32, 16}) {
    int64_t staged = t * (2 * (d + 1) + 2 * (dv + 1)); // Q, G, K, V
    GradTiling g{t, 4 * (staged + t * (t + 1) + 2 * t),
                 4 * (staged + 2 * t * (t + 1) + 2 * t)};
    if (g.sharedB <= kAttentionMaxShared)
      return g;
  }
  return {};
}
} // namespace


/// attention_grad in two launches, FlashAttention-2's split: `name`, a
/// block per (slice, query tile), computes the tile's softmax statistics
/// (log-sum-exp and rowsum(P * dP), one online pass over the key tiles) into
/// a module-scope array, then dq in a second pass; `name`_dkdv, a block per
/// (slice, key tile), reads the statistics of every query that sees its keys
/// and sums dk and dv over the query tiles. Scores are recomputed, never
/// stored beyond one tile; every sum runs in a fixed order (deterministic,
/// no atomics). CUDA cores, f32 arithmetic.
static KernelSource emitAttentionGrad(const AttentionIO &io,
                                      const std::string &name) {
  auto op = mlir::cast<ops::AttentionGradOp>(io.attention);
  AttentionShape a = attentionShape(op);
  if (auto mma = emitAttentionMma(io, a, op.getCausal(), name))
    return *mma;
  if (auto tc = emitAttentionTensorCore(io, a, op.getCausal(), true, name))
    return *tc;
  GradTiling t = gradTiling(a.d, a.dv);
  // The statistics array holds 2 floats per query row of every slice.
  if (!t.tile || a.slices * a.tq * 8 > (int64_t(1) << 28))
    return emitAttentionGradOneBlock(io, name);
  int64_t tile = t.tile;
  int64_t qTiles = (a.tq + tile - 1) / tile, kTiles = (a.tk + tile - 1) / tile;
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  ks.gridX = tileGrid(a.slices * qTiles);
  ks.sharedBytes = t.sharedA;
  ks.then.push_back({"_dkdv", tileGrid(a.slices * kTiles), 256, t.sharedB});
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(io.launched, ks, needs, /*restrict=*/true);
  KernelSource second = ks;
  second.name = name + "_dkdv";
  auto vars = tiledVars(io, a, name, op.getCausal(), tile);
  vars.push_back({"STAGE_SCORES", subst(kStageScores, vars)});
  // The row statistics: from the forward's saved result and log-sum-exp
  // (step.attention_lse), or from a pass over the key tiles.
  if (op.getOut()) {
    vars.push_back(
        {"OX", toF(a.e, subst("$SO_AT[(long long)i * $SO_LD + c]", vars))});
    vars.push_back({"STATS_LOOP", "    __syncthreads(); // Gs staged\n"});
    vars.push_back({"STATS_ROW", subst(kSavedRow, vars)});
  } else {
    vars.push_back({"STATS_LOOP", subst(kStatsLoop, vars)});
    vars.push_back({"STATS_ROW", subst(kStatsRow, vars)});
  }
  // Shared helpers: staging a tile of rows (zeros past the end) and one
  // tile of scores s = q.k * scale and dp = g.v, thread (ty, tx) holding
  // rows ty + 16 * rr and columns tx + 16 * cc.
  std::string helpers = subst(kStageRows, vars) + subst(kTileDot, vars) +
                        subst(kTileAccumulate, vars) + subst(R"(__device__ float ${NAME}_stats[$STATS];
static __device__ __forceinline__ void ${NAME}_scores(
    const float *Qs, const float *Gs, const float *Ks, const float *Vs,
    int ty, int tx, float (&s)[$R][$R], float (&dp)[$R][$R]) {
  ${NAME}_tileDot(s, Qs, $DP, Ks, $DP, $D, ty, tx);
  ${NAME}_tileDot(dp, Gs, $DVP, Vs, $DVP, $DV, ty, tx);
#pragma unroll
  for (int rr = 0; rr < $R; ++rr)
#pragma unroll
    for (int cc = 0; cc < $R; ++cc)
      s[rr][cc] *= $SCALE;
}
)", vars);
  std::string first = signature(ks, params) + " {\n" +
                      subst(R"(  extern __shared__ float smem[];
  float *Qs = smem, *Gs = Qs + $TILE * $DP, *Ks = Gs + $TILE * $DVP;
  float *Vs = Ks + $TILE * $DP, *Ps = Vs + $TILE * $DVP;
  float *rowL = Ps + $TILE * $TP, *rowD = rowL + $TILE;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
$VALID  for (long long w = blockIdx.x; w < (long long)$SLICES * $QTILES;
       w += gridDim.x) {
    const long long b = w / $QTILES;
    const int i0 = (int)(w - b * $QTILES) * $TILE;
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT, *g = $G_AT;
    $T *dq = $DQ_AT;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_STAGE(Qs, $DP, $D, $TILE, lq_ - i0, $LOADQ)
    ${NAME}_STAGE(Gs, $DVP, $DV, $TILE, lq_ - i0, $LOADG)
    // Causal (top-left): key j is visible to query i iff j <= i; a tile
    // past the valid rows reads no key.
    const int kEnd = i0 >= lq_ ? 0 : $CAUSAL ? min(lk_, i0 + $TILE) : lk_;
$STATS_LOOP#pragma unroll
    for (int rr = 0; rr < $R; ++rr) {
      const int y = ty + 16 * rr, i = i0 + y;
$STATS_ROW      if (tx == 0) {
        rowL[y] = lse;
        rowD[y] = dd;
        if (i < $TQ) {
          ${NAME}_stats[(b * $TQ + i) * 2] = lse;
          ${NAME}_stats[(b * $TQ + i) * 2 + 1] = dd;
        }
      }
    }
    // Pass 2: dS = P * (dP - dd) * scale per tile, then
    // dq_i += sum_j dS_ij k_j; thread (ty, tx) owns rows ty + 16 * rr and
    // columns tx + 16 * cc of dq.
    float accq[$R][$DC];
#pragma unroll
    for (int rr = 0; rr < $R; ++rr)
#pragma unroll
      for (int cc = 0; cc < $DC; ++cc)
        accq[rr][cc] = 0.0f;
    for (int j0 = 0; j0 < kEnd; j0 += $TILE) {
      __syncthreads(); // Ks, Vs, Ps free; rowL, rowD written
$STAGE_SCORES#pragma unroll
      for (int rr = 0; rr < $R; ++rr)
#pragma unroll
        for (int cc = 0; cc < $R; ++cc) {
          const int y = ty + 16 * rr, i = i0 + y, j = j0 + tx + 16 * cc;
          const bool seen = i < lq_ && j < lk_ && !($CAUSAL && j > i);
          const float p = seen ? expf(s[rr][cc] - rowL[y]) : 0.0f;
          Ps[y * $TP + tx + 16 * cc] = p * (dp[rr][cc] - rowD[y]) * $SCALE;
        }
      __syncthreads();
      ${NAME}_accumulate(accq, Ps, Ks, $DP, $D, ty, tx);
    }
#pragma unroll
    for (int rr = 0; rr < $R; ++rr)
#pragma unroll
      for (int cc = 0; cc < $DC; ++cc) {
        const int i = i0 + ty + 16 * rr, c = tx + 16 * cc;
        if (i < $TQ && c < $D) {
          const float acc = accq[rr][cc];
          dq[(long long)i * $DQ_LD + c] = $STORE;
        }
      }
  }
}
)",
                            vars);
  std::string dkdv = signature(second, params) + " {\n" +
                     subst(R"(  extern __shared__ float smem[];
  float *Qs = smem, *Gs = Qs + $TILE * $DP, *Ks = Gs + $TILE * $DVP;
  float *Vs = Ks + $TILE * $DP, *Ps = Vs + $TILE * $DVP;
  float *Ds = Ps + $TILE * $TP, *rowL = Ds + $TILE * $TP, *rowD = rowL + $TILE;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
$VALID  for (long long w = blockIdx.x; w < (long long)$SLICES * $KTILES;
       w += gridDim.x) {
    const long long b = w / $KTILES;
    const int j0 = (int)(w - b * $KTILES) * $TILE;
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT, *g = $G_AT;
    $T *dk = $DK_AT, *dv = $DV_AT;
    __syncthreads(); // the previous item is done with shared memory
    ${NAME}_STAGE(Ks, $DP, $D, $TILE, lk_ - j0, $LOADK)
    ${NAME}_STAGE(Vs, $DVP, $DV, $TILE, lk_ - j0, $LOADV)
    // dk_j = sum_i dS_ij q_i, dv_j = sum_i P_ij g_i over the query tiles
    // that see a key of this tile; thread (ty, tx) owns key rows
    // ty + 16 * rr and columns tx + 16 * cc.
    float acck[$R][$DC], accv[$R][$DVC];
#pragma unroll
    for (int rr = 0; rr < $R; ++rr) {
#pragma unroll
      for (int cc = 0; cc < $DC; ++cc)
        acck[rr][cc] = 0.0f;
#pragma unroll
      for (int cc = 0; cc < $DVC; ++cc)
        accv[rr][cc] = 0.0f;
    }
    // A key tile past the valid keys sees no query (its rows are 0).
    const int iEnd = j0 >= lk_ ? 0 : lq_;
    for (int i0 = $CAUSAL ? j0 : 0; i0 < iEnd; i0 += $TILE) {
      __syncthreads(); // Qs, Gs, Ps, Ds free (and Ks, Vs staged)
      ${NAME}_STAGE(Qs, $DP, $D, $TILE, lq_ - i0, $LOADQ)
      ${NAME}_STAGE(Gs, $DVP, $DV, $TILE, lq_ - i0, $LOADG)
      for (int y = threadIdx.x; y < $TILE; y += blockDim.x) {
        const bool in = i0 + y < lq_;
        rowL[y] = in ? ${NAME}_stats[(b * $TQ + i0 + y) * 2] : 0.0f;
        rowD[y] = in ? ${NAME}_stats[(b * $TQ + i0 + y) * 2 + 1] : 0.0f;
      }
      __syncthreads();
      float s[$R][$R], dp[$R][$R];
      ${NAME}_scores(Qs, Gs, Ks, Vs, ty, tx, s, dp);
#pragma unroll
      for (int rr = 0; rr < $R; ++rr)
#pragma unroll
        for (int cc = 0; cc < $R; ++cc) {
          const int y = ty + 16 * rr, i = i0 + y, x = tx + 16 * cc;
          const int j = j0 + x;
          const bool seen = i < lq_ && j < lk_ && !($CAUSAL && j > i);
          const float p = seen ? expf(s[rr][cc] - rowL[y]) : 0.0f;
          Ps[y * $TP + x] = p;
          Ds[y * $TP + x] = p * (dp[rr][cc] - rowD[y]) * $SCALE;
        }
      __syncthreads();
      for (int ii = 0; ii < $TILE; ++ii) {
        float qv[$DC], gv[$DVC];
#pragma unroll
        for (int cc = 0; cc < $DC; ++cc) {
          const int c = tx + 16 * cc;
          qv[cc] = c < $D ? Qs[ii * $DP + c] : 0.0f;
        }
#pragma unroll
        for (int cc = 0; cc < $DVC; ++cc) {
          const int c = tx + 16 * cc;
          gv[cc] = c < $DV ? Gs[ii * $DVP + c] : 0.0f;
        }
#pragma unroll
        for (int rr = 0; rr < $R; ++rr) {
          const float p = Ps[ii * $TP + ty + 16 * rr];
          const float ds = Ds[ii * $TP + ty + 16 * rr];
#pragma unroll
          for (int cc = 0; cc < $DC; ++cc)
            acck[rr][cc] += ds * qv[cc];
#pragma unroll
          for (int cc = 0; cc < $DVC; ++cc)
            accv[rr][cc] += p * gv[cc];
        }
      }
    }
#pragma unroll
    for (int rr = 0; rr < $R; ++rr) {
      const int j = j0 + ty + 16 * rr;
      if (j >= $TK)
        continue;
#pragma unroll
      for (int cc = 0; cc < $DC; ++cc) {
        const int c = tx + 16 * cc;
        if (c < $D) {
          const float acc = acck[rr][cc];
          dk[(long long)j * $DK_LD + c] = $STORE;
        }
      }
#pragma unroll
      for (int cc = 0; cc < $DVC; ++cc) {
        const int c = tx + 16 * cc;
        if (c < $DV) {
          const float acc = accv[rr][cc];
          dv[(long long)j * $DV_LD + c] = $STORE;
        }
      }
    }
  }
}
)",
                           vars);
  ks.source = io.comment() + prelude(needs) + helpers + first + dkdv;
  return ks;
}

std::optional<KernelSource> emitAttentionFamily(mlir::Operation *op,
                                                const std::string &name) {
  auto fusion = mlir::dyn_cast<ops::FusionOp>(op);
  if (!ops::isAttentionOp(op) &&
      !(fusion && fusion.getKind() == ops::kAttentionFusion))
    return std::nullopt;
  AttentionIO io = attentionIO(op);
  if (mlir::isa<ops::AttentionGradOp>(io.attention))
    return emitAttentionGrad(io, name);
  return emitAttention(io, name);
}

std::vector<std::pair<std::string, std::string>>
itemPlacement(int64_t slices, int64_t tiles, int64_t sliceBytes) {
  int64_t group = sliceBytes > 0
                      ? std::max<int64_t>(1, kAttentionL2Bytes / sliceBytes)
                      : slices;
  std::string n = std::to_string(slices);
  if (group >= slices || tiles < 1)
    return {{"ITEM_PRE", ""}, {"ITEM_B", "w % " + n}, {"ITEM_RANK", "w / " + n}};
  // wg_: the group, ws_: its first slice, wn_: its slices, wr_: the item's
  // place in it (names no macro of the kernels declares).
  std::string g = std::to_string(group), per = std::to_string(group * tiles);
  return {{"ITEM_PRE",
           "    // slices " + g + " at a time (their rows fit L2 together), "
           "tile rank first\n"
           "    const long long wg_ = w / " + per + ", ws_ = wg_ * " + g +
               ";\n"
               "    const long long wn_ = " + n + " - ws_ < " + g + " ? " + n +
               " - ws_ : " + g + ", wr_ = w - wg_ * " + per + ";\n"},
          {"ITEM_B", "ws_ + wr_ % wn_"},
          {"ITEM_RANK", "wr_ / wn_"}};
}

} // namespace step::codegen::detail
