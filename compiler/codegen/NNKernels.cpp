//===- NNKernels.cpp - losses, embedding_grad, attention(_grad) -----------===//
//
//  - cross_entropy: one block per row (max, sum of exp, loss), f32. For
//    mean/sum, blocks keep per-block partials (rows in a fixed order) in a
//    __device__ array and the last block to finish (atomic ticket) adds
//    them in a fixed order: deterministic, no atomics on values.
//  - cross_entropy_grad: one block per row, (softmax - onehot) * scale; for
//    mean every block counts the non-ignored targets itself.
//  - embedding_grad: deterministic gather-sum. One block per table row v
//    scans the indices in chunks of 256, finds the positions equal to v with
//    a warp ballot, and adds their gradient rows in increasing position
//    order into f32 registers (each thread owns columns), rounding once.
//    Cost: every block reads all indices (V * N index loads, from L2);
//    no atomics, so the bits do not depend on scheduling.
//  - attention: one block per query row; q in shared memory, one warp per
//    key for the scores (lanes split D), a block softmax over the visible
//    keys, then each thread owns output columns. Scores live in dynamic
//    shared memory: sharedBytes = (Tk + D) * 4.
//  - attention_grad: one block per (batch, head) slice, nothing of size
//    Tq x Tk stored. Pass 1, a warp per query row: the row's log-sum-exp and
//    rowsum(P * dP) in one online pass over the keys, kept in a
//    module-scope array (2 * Tq floats per block), then dq. Pass 2, a warp
//    per key row: P and dS recomputed from the saved statistics, dk and dv
//    summed over the queries that see the key. Lane partials are combined
//    by shuffle trees (deterministic, no atomics). The products run on CUDA
//    cores in f32, not on tensor cores: it trades the decomposed backward's
//    speed for its memory (see docs/codegen.md).
// The cross-entropy kernels read the logits and store through a RowIO
// (Emitters.h), so a reduction fusion can put a prologue and an epilogue
// around them.
// A target or index a kernel cannot use (outside its range) gives NaN
// (cross_entropy, its gradient) or is skipped (embedding_grad): kernels
// cannot report errors; the CPU backend does.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include "dialects/step/StepOps.h"

#include <cmath>

namespace step::codegen::detail {

namespace ops = mlir::step;

/// The part of a cross-entropy row kernel that computes max and sum of
/// exp over row `row` of in0 ([N, C] logits) into `mx`, `sum`.
static const char *kRowSoftmaxStats = R"($XPTR    float mx = $NEGINF;
    for (int j = threadIdx.x; j < $C; j += blockDim.x)
      mx = maxNaN(mx, $X);
    mx = blockReduce(mx, MaxNaNOp(), $NEGINF, sh);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < $C; j += blockDim.x)
      sum += expf($X - mx);
    sum = blockReduce(sum, SumOp(), 0.0f, sh);
)";

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

/// The row-input pieces of the two cross-entropy kernels: XPTR, X and the
/// target logit XT (`t` clamped into the row).
static std::vector<std::pair<std::string, std::string>>
logitVars(Elem e, int64_t c, const RowIO &io) {
  std::string C = std::to_string(c);
  std::string t = "t < 0 || t >= " + C + " ? 0 : t";
  if (io.x)
    return {{"XPTR", ""}, {"X", io.x("row * " + C + " + j")},
            {"XT", io.x("row * " + C + " + (" + t + ")")}};
  return {{"XPTR", "    const " + std::string(cType(e)) +
                       " *x = in0 + row * " + C + ";\n"},
          {"X", toF(e, "x[j]")}, {"XT", toF(e, "x[" + t + "]")}};
}

/// The statement storing float `value` at `idx` of the result.
static std::string storeRow(const RowIO &io, Elem e, const std::string &idx,
                            const std::string &value) {
  return io.store ? io.store(idx, value)
                  : "out0[" + idx + "] = " + fromF(e, value) + ";";
}

static KernelSource emitCrossEntropy(ops::CrossEntropyOp op,
                                     const std::string &name,
                                     const RowIO &io) {
  std::vector<int64_t> s = shapeOf(op.getLogits());
  int64_t n = s[0], c = s[1];
  Elem e = elemOf(op.getLogits().getType());
  KernelSource ks;
  ks.name = name;
  ks.blockX = blockForRow(c, 512);
  PreludeNeeds needs = io.needs;
  needs.reduce = true;
  std::string params = paramList(io.paramsOf ? io.paramsOf : op, ks, needs,
                                 /*restrict=*/true);
  bool none = op.getReduction() == ops::LossReduction::None;
  bool mean = op.getReduction() == ops::LossReduction::Mean;
  int64_t g = none ? std::min<int64_t>(std::max<int64_t>(n, 1), 65535)
                   : std::min<int64_t>(std::max<int64_t>(n, 1), 1024);
  ks.gridX = g;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"T", cType(e)}, {"C", std::to_string(c)}, {"N", std::to_string(n)},
      {"G", std::to_string(g)}, {"NAME", name},
      {"IGN", litI(op.getIgnoreIndexOrDefault())},
      {"NEGINF", litF(-INFINITY)}, {"NAN", "__int_as_float(0x7fc00000)"},
      {"IN1", io.operand(1)},
      {"STORE", storeRow(io, e, "row", "loss")},
      {"STORE_TOTAL",
       storeRow(io, e, "0", mean ? "total / (float)count" : "total")}};
  for (auto &var : logitVars(e, c, io))
    vars.push_back(var);
  std::string head = R"(  __shared__ float sh[32];
  __shared__ int shi[32];
  float part = 0.0f; // thread 0: this block's rows, in order
  int counted = 0;
  for (long long row = blockIdx.x; row < $N; row += gridDim.x) {
    const long long t = (long long)$IN1[row];
    if (t == $IGN) {
)";
  head += none ? "      if (threadIdx.x == 0) " +
                     storeRow(io, e, "row", "0.0f") +
                     "\n      continue;\n    }\n"
               : "      continue;\n    }\n";
  head += kRowSoftmaxStats;
  head += R"(    const float loss = (t < 0 || t >= $C) ? $NAN : mx + logf(sum) - $XT;
)";
  if (none) {
    head += "    if (threadIdx.x == 0) $STORE\n  }\n"
            "  (void)part; (void)counted; (void)shi;\n";
    ks.source = prelude(needs) + io.preamble + signature(ks, params) +
                " {\n" + subst(head, vars) + "}\n";
    return ks;
  }
  head += R"(    part += loss;
    ++counted;
  }
  __shared__ bool amLast;
  if (threadIdx.x == 0) {
    ${NAME}_partial[blockIdx.x] = part;
    ${NAME}_count[blockIdx.x] = counted;
    __threadfence(); // the partials are visible before the ticket
    amLast = atomicAdd(&${NAME}_ticket, 1u) == $G - 1;
  }
  __syncthreads();
  if (!amLast)
    return;
  __threadfence();
  // Each thread adds a fixed set of partials, then a fixed tree: the same
  // bits every launch.
  float total = 0.0f;
  int count = 0;
  for (int b = threadIdx.x; b < $G; b += blockDim.x) {
    total += ((volatile float *)${NAME}_partial)[b];
    count += ((volatile int *)${NAME}_count)[b];
  }
  total = blockReduce(total, SumOp(), 0.0f, sh);
  count = blockReduce(count, SumOp(), 0, shi);
  if (threadIdx.x == 0) {
    $STORE_TOTAL // mean over no rows: 0/0 = NaN, as PyTorch
    ${NAME}_ticket = 0; // ready for the next launch
  }
)";
  ks.source = prelude(needs) + io.preamble +
              subst("__device__ float ${NAME}_partial[$G];\n"
                    "__device__ int ${NAME}_count[$G];\n"
                    "__device__ unsigned int ${NAME}_ticket;\n",
                    vars) +
              signature(ks, params) + " {\n" + subst(head, vars) + "}\n";
  return ks;
}

//===----------------------------------------------------------------------===//
// step.cross_entropy_grad
//===----------------------------------------------------------------------===//

static KernelSource emitCrossEntropyGrad(ops::CrossEntropyGradOp op,
                                         const std::string &name,
                                         const RowIO &io) {
  std::vector<int64_t> s = shapeOf(op.getLogits());
  int64_t n = s[0], c = s[1];
  Elem e = elemOf(op.getLogits().getType());
  KernelSource ks;
  ks.name = name;
  ks.blockX = blockForRow(c, 512);
  ks.gridX = std::min<int64_t>(std::max<int64_t>(n, 1), 65535);
  PreludeNeeds needs = io.needs;
  needs.reduce = true;
  std::string params = paramList(io.paramsOf ? io.paramsOf : op, ks, needs,
                                 /*restrict=*/true);
  auto red = op.getReduction();
  Elem ge = elemOf(op.getGrad().getType());
  std::string scale = red == ops::LossReduction::None
                          ? toF(ge, io.operand(2) + "[row]")
                          : toF(ge, io.operand(2) + "[0]");
  if (red == ops::LossReduction::Mean)
    scale += " / (float)count";
  std::string body = R"(  __shared__ float sh[32];
  __shared__ int shi[32];
  int count = 0;
)";
  if (red == ops::LossReduction::Mean)
    body += R"(  for (long long r = threadIdx.x; r < $N; r += blockDim.x)
    count += (long long)$IN1[r] != $IGN;
  count = blockReduce(count, SumOp(), 0, shi);
)";
  body += R"(  for (long long row = blockIdx.x; row < $N; row += gridDim.x) {
    const long long t = (long long)$IN1[row];
    if (t == $IGN) { // ignored rows are exactly zero
      for (int j = threadIdx.x; j < $C; j += blockDim.x)
        $ZERO
      continue;
    }
)";
  body += kRowSoftmaxStats;
  body += R"(    const float s = $SCALE;
    const bool bad = t < 0 || t >= $C;
    for (int j = threadIdx.x; j < $C; j += blockDim.x) {
      const float p = bad ? $NAN : expf($X - mx) / sum - (j == t ? 1.0f : 0.0f);
      $STORE
    }
  }
  (void)count;
  (void)shi;
}
)";
  std::string at = "row * " + std::to_string(c) + " + j";
  std::vector<std::pair<std::string, std::string>> vars = {
      {"T", cType(e)}, {"C", std::to_string(c)}, {"N", std::to_string(n)},
      {"IGN", litI(op.getIgnoreIndexOrDefault())},
      {"NEGINF", litF(-INFINITY)}, {"NAN", "__int_as_float(0x7fc00000)"},
      {"SCALE", scale}, {"IN1", io.operand(1)},
      {"ZERO", storeRow(io, e, at, "0.0f")},
      {"STORE", storeRow(io, e, at, "p * s")}};
  for (auto &var : logitVars(e, c, io))
    vars.push_back(var);
  ks.source = prelude(needs) + io.preamble + signature(ks, params) + " {\n" +
              subst(body, vars);
  return ks;
}

//===----------------------------------------------------------------------===//
// step.embedding_grad
//===----------------------------------------------------------------------===//

static KernelSource emitEmbeddingGrad(ops::EmbeddingGradOp op,
                                      const std::string &name) {
  int64_t n = numelOf(op.getIndices());
  int64_t v = op.getNumEmbeddings();
  int64_t dimD = shapeOf(op.getGrad()).back();
  Elem e = elemOf(op.getGrad().getType());
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  ks.gridX = std::min<int64_t>(v, 65535);
  PreludeNeeds needs;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  int64_t cols = std::max<int64_t>(1, (dimD + 255) / 256);
  ks.source = prelude(needs) + signature(ks, params) + " {\n" + subst(R"(  __shared__ unsigned int hits[8]; // one ballot per warp
  for (long long v = blockIdx.x; v < $V; v += gridDim.x) {
    float acc[$COLS];
#pragma unroll
    for (int q = 0; q < $COLS; ++q)
      acc[q] = 0.0f;
    for (long long c = 0; c < $N; c += 256) {
      const long long p = c + threadIdx.x;
      const bool hit = p < $N && (long long)in0[p] == v;
      const unsigned int m = __ballot_sync(0xffffffffu, hit);
      if ((threadIdx.x & 31) == 0)
        hits[threadIdx.x >> 5] = m;
      __syncthreads();
      for (int w = 0; w < 8; ++w) { // positions in increasing order
        unsigned int bits = hits[w];
        while (bits) {
          const long long pos = c + w * 32 + (__ffs(bits) - 1);
          bits &= bits - 1;
#pragma unroll
          for (int q = 0; q < $COLS; ++q) {
            const int j = threadIdx.x + q * 256;
            if (j < $D)
              acc[q] += $G;
          }
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < $COLS; ++q) {
      const int j = threadIdx.x + q * 256;
      if (j < $D)
        out0[v * $D + j] = $STORE;
    }
  }
}
)",
      {{"V", std::to_string(v)}, {"N", std::to_string(n)},
       {"D", std::to_string(dimD)}, {"COLS", std::to_string(cols)},
       {"G", toF(e, "in1[pos * " + std::to_string(dimD) + " + j]")},
       {"STORE", fromF(e, "acc[q]")}});
  return ks;
}

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

namespace {
/// The sizes of an attention (or its gradient) over q [S..., Tq, D],
/// k [S..., Tk, D], v [S..., Tk, Dv]: `slices` is the product of S.
struct AttentionShape {
  int64_t slices, tq, tk, d, dv;
  double scale;
  Elem e;
};

template <typename AttentionLikeOp>
AttentionShape attentionShape(AttentionLikeOp op) {
  std::vector<int64_t> qs = shapeOf(op.getQuery());
  size_t r = qs.size();
  AttentionShape a;
  a.slices = 1;
  for (size_t i = 0; i + 2 < r; ++i)
    a.slices *= qs[i];
  a.tq = qs[r - 2];
  a.d = qs[r - 1];
  a.tk = shapeOf(op.getKey())[r - 2];
  a.dv = shapeOf(op.getValue())[r - 1];
  a.scale = op.getScale() ? op.getScale()->convertToDouble()
                          : 1.0 / std::sqrt(static_cast<double>(a.d));
  a.e = elemOf(op.getQuery().getType());
  return a;
}
} // namespace

static KernelSource emitAttention(ops::AttentionOp op,
                                  const std::string &name) {
  AttentionShape a = attentionShape(op);
  int64_t tq = a.tq, d = a.d, tk = a.tk, dv = a.dv;
  int64_t rows = a.slices * tq;
  double scale = a.scale;
  Elem e = a.e;
  KernelSource ks;
  ks.name = name;
  ks.blockX = 128;
  ks.gridX = std::min<int64_t>(std::max<int64_t>(rows, 1), 65535);
  ks.sharedBytes = (tk + d) * 4;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  ks.source = prelude(needs) + signature(ks, params) + " {\n" + subst(R"(  extern __shared__ float smem[];
  float *qrow = smem, *p = smem + $D; // q row, then one score per key
  __shared__ float sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long row = blockIdx.x; row < $ROWS; row += gridDim.x) {
    const long long b = row / $TQ;
    const int i = (int)(row - b * $TQ);
    const $T *k = in1 + b * $TK * $D;
    const $T *v = in2 + b * $TK * $DV;
    __syncthreads(); // the previous row is done with qrow and p
    for (int c = threadIdx.x; c < $D; c += blockDim.x)
      qrow[c] = $Q;
    __syncthreads();
    // Causal (top-left): key j is visible to query i iff j <= i.
    const int visible = $CAUSAL ? (i + 1 < $TK ? i + 1 : $TK) : $TK;
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
    for (int c = threadIdx.x; c < $DV; c += blockDim.x) {
      float acc = 0.0f;
      for (int j = 0; j < visible; ++j)
        acc += p[j] * $V;
      out0[row * $DV + c] = $STORE;
    }
  }
}
)",
      {{"D", std::to_string(d)}, {"DV", std::to_string(dv)},
       {"TQ", std::to_string(tq)}, {"TK", std::to_string(tk)},
       {"ROWS", std::to_string(rows)}, {"T", cType(e)},
       {"CAUSAL", op.getCausal() ? "true" : "false"},
       {"SCALE", litF(scale)}, {"NEGINF", litF(-INFINITY)},
       {"Q", toF(e, "in0[row * " + std::to_string(d) + " + c]")},
       {"K", toF(e, "k[(long long)j * " + std::to_string(d) + " + c]")},
       {"V", toF(e, "v[(long long)j * " + std::to_string(dv) + " + c]")},
       {"STORE", fromF(e, "acc / sum")}});
  return ks;
}

//===----------------------------------------------------------------------===//
// step.attention_grad
//===----------------------------------------------------------------------===//

static KernelSource emitAttentionGrad(ops::AttentionGradOp op,
                                      const std::string &name) {
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
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  auto idx = [](const std::string &row, int64_t width) {
    return "(long long)" + row + " * " + std::to_string(width) + " + c";
  };
  ks.source = prelude(needs) +
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
                     {"STATS", std::to_string(std::max<int64_t>(
                                   ks.gridX * 2 * tq, 1))}}) +
              signature(ks, params) + " {\n" + subst(R"(  extern __shared__ float smem[];
  float *lse = ${NAME}_stats + (long long)blockIdx.x * 2 * $TQ;
  float *dd = lse + $TQ;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  float *rowA = smem + warp * ($D + $DV), *rowB = rowA + $D;
  for (long long b = blockIdx.x; b < $SLICES; b += gridDim.x) {
    const $T *q = in0 + b * $TQ * $D, *k = in1 + b * $TK * $D;
    const $T *v = in2 + b * $TK * $DV, *g = in3 + b * $TQ * $DV;
    $T *dq = out0 + b * $TQ * $D, *dk = out1 + b * $TK * $D;
    $T *dv = out2 + b * $TK * $DV;
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
      // Causal (top-left): key j is visible to query i iff j <= i.
      const int visible = $CAUSAL ? (i + 1 < $TK ? i + 1 : $TK) : $TK;
      float m = $NEGINF, l = 0.0f, u = 0.0f;
      for (int j = lane; j < visible; j += 32) {
        float s = ${NAME}_dot(rowA, k + (long long)j * $D, $D);
        const float dp = ${NAME}_dot(rowB, v + (long long)j * $DV, $DV);
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
      const float lseI = m + logf(l), ddI = u / l;
      if (lane == 0) {
        lse[i] = lseI;
        dd[i] = ddI;
      }
      float acc[$D1];
#pragma unroll
      for (int c = 0; c < $D; ++c)
        acc[c] = 0.0f;
      for (int j = lane; j < visible; j += 32) {
        float s = ${NAME}_dot(rowA, k + (long long)j * $D, $D);
        const float dp = ${NAME}_dot(rowB, v + (long long)j * $DV, $DV);
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
      for (int i = ($CAUSAL ? j : 0) + lane; i < $TQ; i += 32) {
        const float s = ${NAME}_dot(rowA, q + (long long)i * $D, $D);
        const float dp = ${NAME}_dot(rowB, g + (long long)i * $DV, $DV);
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
      {{"D", std::to_string(d)}, {"DV", std::to_string(dv)},
       {"D1", std::to_string(std::max<int64_t>(d, 1))},
       {"DV1", std::to_string(std::max<int64_t>(dv, 1))},
       {"TQ", std::to_string(tq)}, {"TK", std::to_string(tk)},
       {"SLICES", std::to_string(slices)}, {"T", cType(e)},
       {"NAME", name},
       {"CAUSAL", op.getCausal() ? "true" : "false"},
       {"SCALE", litF(scale)}, {"NEGINF", litF(-INFINITY)},
       {"QI", toF(e, "q[" + idx("i", d) + "]")},
       {"GI", toF(e, "g[" + idx("i", dv) + "]")},
       {"KJ", toF(e, "k[" + idx("j", d) + "]")},
       {"VJ", toF(e, "v[" + idx("j", dv) + "]")},
       {"QIDX", idx("i", d)}, {"KIDX", idx("j", d)}, {"VIDX", idx("j", dv)},
       {"STORE_T", fromF(e, "t")}});
  return ks;
}

std::optional<KernelSource> emitLossKernel(mlir::Operation *op,
                                           const std::string &name,
                                           const RowIO &io) {
  if (auto c = mlir::dyn_cast<ops::CrossEntropyOp>(op))
    return emitCrossEntropy(c, name, io);
  if (auto c = mlir::dyn_cast<ops::CrossEntropyGradOp>(op))
    return emitCrossEntropyGrad(c, name, io);
  return std::nullopt;
}

std::optional<KernelSource> emitNNFamily(mlir::Operation *op,
                                         const std::string &name) {
  if (auto ks = emitLossKernel(op, name, RowIO()))
    return ks;
  if (auto g = mlir::dyn_cast<ops::EmbeddingGradOp>(op))
    return emitEmbeddingGrad(g, name);
  if (auto a = mlir::dyn_cast<ops::AttentionOp>(op))
    return emitAttention(a, name);
  if (auto a = mlir::dyn_cast<ops::AttentionGradOp>(op))
    return emitAttentionGrad(a, name);
  return std::nullopt;
}

} // namespace step::codegen::detail
