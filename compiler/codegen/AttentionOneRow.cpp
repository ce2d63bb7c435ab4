//===- AttentionOneRow.cpp - attention(_grad) for very wide heads ---------===//
//
// The kernels AttentionKernels.cpp falls back to when even 16-row tiles of
// a head would not fit the shared memory (kAttentionMaxShared):
//  - attention: one block per query row; q in shared memory, one warp per
//    key for the scores (lanes split D), a block softmax over the visible
//    keys, then each thread owns output columns. Scores live in dynamic
//    shared memory: (Tk + D) * 4 bytes.
//  - attention_grad: one block per (batch, head) slice; pass 1, a warp per
//    query row: the row's log-sum-exp and rowsum(P * dP) in one online
//    pass over the keys (a module-scope array, 2 Tq floats per block), then
//    dq; pass 2, a warp per key row: dk and dv from P and dS recomputed.
//    Lane partials meet in shuffle trees (deterministic, no atomics).
// Both on CUDA cores in f32, far slower than the tiled kernels: 96 blocks
// for GPT-2 small's attention_grad took 106 ms a layer on an H200.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"
#include "compiler/codegen/Emitters.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

KernelSource emitAttentionOneRow(const AttentionIO &io,
                                 const std::string &name) {
  mlir::Operation *op = io.attention;
  AttentionShape a = attentionShape(op);
  int64_t tq = a.tq, d = a.d, tk = a.tk, dv = a.dv;
  int64_t rows = a.slices * tq;
  // attention_lse: each row's log-sum-exp too.
  bool lse = mlir::isa<ops::AttentionLseOp>(op);
  double scale = a.scale;
  Elem e = a.e;
  KernelSource ks;
  ks.name = name;
  ks.blockX = 128;
  ks.gridX = tileGrid(rows);
  ks.sharedBytes = (tk + d) * 4;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(io.launched, ks, needs, /*restrict=*/true);
  auto vars = io.vars();
  std::string qld = std::to_string(io.in[0].ld);
  std::string kld = std::to_string(io.in[1].ld);
  std::string vld = std::to_string(io.in[2].ld);
  std::string lseOut = lse ? io.out[1].param : "";
  for (auto kv : std::vector<std::pair<std::string, std::string>>{
           {"D", std::to_string(d)},
           {"DV", std::to_string(dv)},
           {"TQ", std::to_string(tq)},
           {"TK", std::to_string(tk)},
           {"ROWS", std::to_string(rows)},
           {"T", cType(e)},
           {"CAUSAL", causalOf(op) ? "true" : "false"},
           {"SCALE", litF(scale)},
           {"NEGINF", litF(-INFINITY)},
           {"LSESTORE", lse ? "    if (threadIdx.x == 0)\n      " + lseOut +
                                  "[row] = visible > 0 ? mx + logf(sum) : "
                                  "0.0f;\n"
                            : ""},
           {"LSEZERO", lse ? "      if (threadIdx.x == 0)\n        " + lseOut +
                                 "[row] = 0.0f;\n"
                           : ""},
           {"Q", toF(e, "q[(long long)i * " + qld + " + c]")},
           {"K", toF(e, "k[(long long)j * " + kld + " + c]")},
           {"V", toF(e, "v[(long long)j * " + vld + " + c]")},
           {"STORE", fromF(e, "acc / sum")},
           {"ZERO", fromF(e, "0.0f")},
           {"VALID", validLengths(io, a)}})
    vars.push_back(kv);
  ks.source = io.comment() + prelude(needs) + signature(ks, params) + " {\n" +
              subst(R"(  extern __shared__ float smem[];
  float *qrow = smem, *p = smem + $D; // q row, then one score per key
  __shared__ float sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
$VALID  for (long long row = blockIdx.x; row < $ROWS; row += gridDim.x) {
    const long long b = row / $TQ;
    const int i = (int)(row - b * $TQ);
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT;
    $T *o = $O_AT + (long long)i * $O_LD;
    if (i >= lq_) { // a padded row: 0, no work
      for (int c = threadIdx.x; c < $DV; c += blockDim.x)
        o[c] = $ZERO;
$LSEZERO      continue;
    }
    __syncthreads(); // the previous row is done with qrow and p
    for (int c = threadIdx.x; c < $D; c += blockDim.x)
      qrow[c] = $Q;
    __syncthreads();
    // Causal (top-left): key j is visible to query i iff j <= i.
    const int visible = $CAUSAL ? (i + 1 < lk_ ? i + 1 : lk_) : lk_;
    for (int j = warp; j < visible; j += blockDim.x >> 5) {
      float s = 0.0f;
      for (int c = lane; c < $D; c += 32)
        s += qrow[c] * $K;
      s = warpReduce(s, SumOp());
      if (lane == 0)
        p[j] = s * $SCALE;
    }
    __syncthreads();
    float mx = $NEGINF;
    for (int j = threadIdx.x; j < visible; j += blockDim.x)
      mx = maxNaN(mx, p[j]);
    mx = blockReduce(mx, MaxNaNOp(), $NEGINF, sh);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < visible; j += blockDim.x) {
      const float w = expf(p[j] - mx);
      p[j] = w;
      sum += w;
    }
    sum = blockReduce(sum, SumOp(), 0.0f, sh); // also publishes p
$LSESTORE    for (int c = threadIdx.x; c < $DV; c += blockDim.x) {
      float acc = 0.0f;
      for (int j = 0; j < visible; ++j)
        acc += p[j] * $V;
      o[c] = $STORE;
    }
  }
}
)",
                    vars);
  return ks;
}

KernelSource emitAttentionGradOneBlock(const AttentionIO &io,
                                       const std::string &name) {
  auto op = mlir::cast<ops::AttentionGradOp>(io.attention);
  AttentionShape a = attentionShape(op);
  int64_t tq = a.tq, d = a.d, tk = a.tk, dv = a.dv, slices = a.slices;
  double scale = a.scale;
  Elem e = a.e;
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  // At most 1024 blocks (a grid-stride loop takes the other slices), which
  // bounds the statistics array below.
  ks.gridX = std::min<int64_t>(std::max<int64_t>(slices, 1), 1024);
  // Per warp one staged row of D and one of Dv values. The two statistics
  // per query row (log-sum-exp, rowsum(P * dP)) go to a module-scope
  // array, one 2 * Tq slice per block, so no Tq is too long for shared
  // memory.
  ks.sharedBytes = (ks.blockX / 32) * (d + dv) * 4;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(io.launched, ks, needs, /*restrict=*/true);
  auto idx = [](const std::string &row, const AttentionPort &port) {
    return "(long long)" + row + " * " + std::to_string(port.ld) + " + c";
  };
  auto vars = io.vars();
  for (auto kv : std::vector<std::pair<std::string, std::string>>{
           {"D", std::to_string(d)},
           {"DV", std::to_string(dv)},
           {"D1", std::to_string(std::max<int64_t>(d, 1))},
           {"DV1", std::to_string(std::max<int64_t>(dv, 1))},
           {"TQ", std::to_string(tq)},
           {"TK", std::to_string(tk)},
           {"SLICES", std::to_string(slices)},
           {"T", cType(e)},
           {"NAME", name},
           {"CAUSAL", op.getCausal() ? "true" : "false"},
           {"SCALE", litF(scale)},
           {"NEGINF", litF(-INFINITY)},
           {"QI", toF(e, "q[" + idx("i", io.in[0]) + "]")},
           {"GI", toF(e, "g[" + idx("i", io.in[3]) + "]")},
           {"KJ", toF(e, "k[" + idx("j", io.in[1]) + "]")},
           {"VJ", toF(e, "v[" + idx("j", io.in[2]) + "]")},
           {"QIDX", idx("i", io.out[0])},
           {"KIDX", idx("j", io.out[1])},
           {"VIDX", idx("j", io.out[2])},
           {"STORE_T", fromF(e, "t")},
           {"VALID", validLengths(io, a)}})
    vars.push_back(kv);
  ks.source =
      io.comment() + prelude(needs) +
      subst(R"(__device__ float ${NAME}_stats[$STATS];
// sum_c staged[c] * row[c] over n values, in order: the one dot product of
// both passes (q . k and g . v), so pass 2 repeats pass 1's bits.
static __device__ __forceinline__ float ${NAME}_dot(const float *staged,
                                                    const $T *row, int n) {
  float s = 0.0f;
  for (int c = 0; c < n; ++c)
    s += staged[c] * $ROWC;
  return s;
}
)",
            {{"NAME", name},
             {"T", cType(e)},
             {"ROWC", toF(e, "row[c]")},
             {"STATS",
              std::to_string(std::max<int64_t>(ks.gridX * 2 * tq, 1))}}) +
      signature(ks, params) + " {\n" +
      subst(R"(  extern __shared__ float smem[];
  float *lse = ${NAME}_stats + (long long)blockIdx.x * 2 * $TQ;
  float *dd = lse + $TQ;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  float *rowA = smem + warp * ($D + $DV), *rowB = rowA + $D;
$VALID  for (long long b = blockIdx.x; b < $SLICES; b += gridDim.x) {
    const $T *q = $Q_AT, *k = $K_AT, *v = $V_AT, *g = $G_AT;
    $T *dq = $DQ_AT, *dk = $DK_AT, *dv = $DV_AT;
    // Pass 1, a warp per query row i (q_i, g_i staged): the softmax
    // statistics and u = sum_j P_ij dP_ij in one online pass over the keys
    // (lanes take every 32nd key, combined by a shuffle tree), then
    // dq_i = sum_j dS_ij k_j * scale.
    for (int i = warp; i < $TQ; i += warps) {
      __syncwarp();
      for (int c = lane; c < $D; c += 32)
        rowA[c] = $QI;
      for (int c = lane; c < $DV; c += 32)
        rowB[c] = $GI;
      __syncwarp();
      // Causal (top-left): key j is visible to query i iff j <= i; a
      // padded row sees none (its dq row is 0).
      const int visible =
          i >= lq_ ? 0 : $CAUSAL ? (i + 1 < lk_ ? i + 1 : lk_) : lk_;
      float m = $NEGINF, l = 0.0f, u = 0.0f;
      for (int j = lane; j < visible; j += 32) {
        float s = ${NAME}_dot(rowA, k + (long long)j * $K_LD, $D);
        const float dp = ${NAME}_dot(rowB, v + (long long)j * $V_LD, $DV);
        s *= $SCALE;
        const float mNew = maxNaN(m, s);
        const float keep = m == $NEGINF ? 0.0f : expf(m - mNew);
        const float w = expf(s - mNew);
        l = l * keep + w;
        u = u * keep + w * dp;
        m = mNew;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float l2 = __shfl_xor_sync(0xffffffffu, l, o);
        const float u2 = __shfl_xor_sync(0xffffffffu, u, o);
        const float mNew = maxNaN(m, m2);
        const float a = m == $NEGINF ? 0.0f : expf(m - mNew);
        const float a2 = m2 == $NEGINF ? 0.0f : expf(m2 - mNew);
        l = l * a + l2 * a2;
        u = u * a + u2 * a2;
        m = mNew;
      }
      const float lseI = l > 0.0f ? m + logf(l) : 0.0f;
      const float ddI = l > 0.0f ? u / l : 0.0f;
      if (lane == 0) {
        lse[i] = lseI;
        dd[i] = ddI;
      }
      float acc[$D1];
#pragma unroll
      for (int c = 0; c < $D; ++c)
        acc[c] = 0.0f;
      for (int j = lane; j < visible; j += 32) {
        float s = ${NAME}_dot(rowA, k + (long long)j * $K_LD, $D);
        const float dp = ${NAME}_dot(rowB, v + (long long)j * $V_LD, $DV);
        const float p = expf(s * $SCALE - lseI);
        const float ds = p * (dp - ddI) * $SCALE;
#pragma unroll
        for (int c = 0; c < $D; ++c)
          acc[c] += ds * $KJ;
      }
#pragma unroll
      for (int c = 0; c < $D; ++c) {
        const float t = warpReduce(acc[c], SumOp());
        if (lane == 0)
          dq[$QIDX] = $STORE_T;
      }
    }
    __syncthreads(); // every row's lse and dd are written (block scope)
    // Pass 2, a warp per key row j (k_j, v_j staged): lanes take every 32nd
    // query that sees j, recompute P_ij and dS_ij (the same products in
    // the same order as pass 1, so the same bits) and add dS_ij q_i * scale
    // into dk_j and P_ij g_i into dv_j.
    for (int j = warp; j < $TK; j += warps) {
      __syncwarp();
      for (int c = lane; c < $D; c += 32)
        rowA[c] = $KJ;
      for (int c = lane; c < $DV; c += 32)
        rowB[c] = $VJ;
      __syncwarp();
      float ak[$D1], av[$DV1];
#pragma unroll
      for (int c = 0; c < $D; ++c)
        ak[c] = 0.0f;
#pragma unroll
      for (int c = 0; c < $DV; ++c)
        av[c] = 0.0f;
      // A padded key sees no query (its rows are 0).
      const int iEnd = j >= lk_ ? 0 : lq_;
      for (int i = ($CAUSAL ? j : 0) + lane; i < iEnd; i += 32) {
        const float s = ${NAME}_dot(rowA, q + (long long)i * $Q_LD, $D);
        const float dp = ${NAME}_dot(rowB, g + (long long)i * $G_LD, $DV);
        const float p = expf(s * $SCALE - lse[i]);
        const float ds = p * (dp - dd[i]) * $SCALE;
#pragma unroll
        for (int c = 0; c < $D; ++c)
          ak[c] += ds * $QI;
#pragma unroll
        for (int c = 0; c < $DV; ++c)
          av[c] += p * $GI;
      }
#pragma unroll
      for (int c = 0; c < $D; ++c) {
        const float t = warpReduce(ak[c], SumOp());
        if (lane == 0)
          dk[$KIDX] = $STORE_T;
      }
#pragma unroll
      for (int c = 0; c < $DV; ++c) {
        const float t = warpReduce(av[c], SumOp());
        if (lane == 0)
          dv[$VIDX] = $STORE_T;
      }
    }
    __syncthreads(); // the next slice overwrites lse and dd
  }
}
)",
            vars);
  return ks;
}

} // namespace step::codegen::detail
