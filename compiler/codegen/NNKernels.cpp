//===- NNKernels.cpp - losses, embedding_grad -----------------------------===//
//
//  - cross_entropy: one block per row, f32: max and sum of exp in one
//    sweep (online, rescaled; kRowSoftmaxStats), then the loss. For
//    mean/sum, blocks keep per-block partials (rows in a fixed order) in a
//    __device__ array and the last block to finish (atomic ticket) adds
//    them in a fixed order: deterministic, no atomics on values.
//  - cross_entropy_grad: one block per row, the same one-sweep statistics,
//    then a second sweep storing (softmax - onehot) * scale; for
//    mean a one-block launch first counts the non-ignored targets into a
//    __device__ int that the rows' launch (`_rows`) reads.
//  - embedding_grad: deterministic gather-sum: every table row v adds the
//    gradient rows of the positions holding v in increasing position
//    order into f32 registers (each thread owns columns), rounding once; no
//    atomics, so the bits do not depend on scheduling. Which positions
//    hold v: when the N > 0 keys v * N + p fit 32 bits and 16 K of them fit
//    shared memory (GPT-2 124M: N = 8192 or 16384 tokens), launch 1 (one
//    block) sorts them (bitonic, in shared memory: the positions of each v
//    end up together, in increasing order) and finds where each v's run
//    starts (a binary search per v), and launch 2, a block per row and
//    256 columns, reads its run: the indices are read once, not once per
//    row; the run's keys go through shared memory 256 at a time and 16
//    positions' elements are loaded before they are added (a frequent
//    token's long run is a few blocks' work: memory-level parallelism,
//    not one load after another). Otherwise one
//    block per row scans all the indices (a warp ballot per 32; V * N
//    index loads from L2: 1.0 ms of GPT-2 124M's step on an H200). (A
//    block per 16 rows, scanning 16x less, took 5.2 ms: the hits of 16
//    rows, frequent tokens among them, add up one after another in one
//    block.)
//  - attention, attention_grad: AttentionKernels.cpp.
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
#include <tuple>

namespace step::codegen::detail {

namespace ops = mlir::step;

/// Elements of a row each thread loads per iteration of a cross-entropy
/// kernel: U independent loads in flight per thread (memory-level
/// parallelism), strided by blockDim.x so every load of a warp is
/// coalesced. 16 keeps 32 bytes (bf16) or 64 bytes (f32) per thread in
/// flight, enough to cover DRAM latency with 2048 threads per SM.
static constexpr int64_t kRowUnroll = 16;

/// Device functions of the cross-entropy kernels: (m, s) is a partial
/// softmax statistic, s = sum exp(x - m) over some elements of the row.
/// Every exponential is stepExp2((x - m) * log2(e)) (the prelude's PTX
/// ex2.approx.ftz, 2 ulp): a subtract, a multiply and one MUFU.EX2, where
/// expf is about ten instructions and exp2f four (its subnormal scaling;
/// the ftz form's lost results are below 2^-126 of the row's largest
/// term); the gradient takes two a logit, and GPT-2's 8192 x 50304 logits
/// made the kernel issue-bound (0.92 ms at 1.8 TB/s on an H200). The product's
/// rounding moves the exponent by at most |x - m| * 2^-24 (relative error
/// of exp below 1e-6 for logit gaps under 14).
/// Two of them merge by rescaling to the larger max; the reference point
/// is 0 while the max is -inf (no finite element yet), so a thread or warp
/// that saw only -inf logits contributes exactly 0 instead of NaN. The
/// block merge is a fixed xor-shuffle tree then a fixed tree over the warps
/// (as blockReduce): the same bits whatever the timing.
static const char *kOnlineStatsFns =
    R"(// Online softmax statistics (NNKernels.cpp).
__device__ __forceinline__ void ceMerge(float &m, float &s, float m2, float s2) {
  const float nm = maxNaN(m, m2);
  const float ref = nm == $NEGINF ? 0.0f : nm;
  s = s * stepExp2((m - ref) * 1.44269504f) + s2 * stepExp2((m2 - ref) * 1.44269504f);
  m = nm;
}
__device__ __forceinline__ void ceWarpMerge(float &m, float &s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    ceMerge(m, s, m2, s2);
  }
}
// Every thread gets the row's (max, sum of exp); shm, shs hold 32 values.
__device__ __forceinline__ void ceBlockMerge(float &m, float &s, float *shm, float *shs) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  ceWarpMerge(m, s);
  __syncthreads(); // a previous row may still be reading shm, shs
  if (lane == 0) {
    shm[warp] = m;
    shs[warp] = s;
  }
  __syncthreads();
  const bool in = lane < (int)(blockDim.x >> 5);
  m = in ? shm[lane] : $NEGINF;
  s = in ? shs[lane] : 0.0f;
  ceWarpMerge(m, s);
}
)";

/// The part of a cross-entropy row kernel that computes max and sum of
/// exp over row `row` of in0 ([N, C] logits) into `mx`, `sum` in one
/// sweep: each thread folds $U loaded elements at a time into its running
/// (max, rescaled sum), one rescale per $U elements, then ceBlockMerge.
/// The loads (rowLoads) are $U elements strided by the block, or, for 16-bit
/// logits read plainly, $U / 8 vectors of 8 adjacent elements. The $U
/// elements' max is fmaxf's (one FMNMX; maxNaN is three instructions),
/// which skips a NaN: the NaN's exponential still makes the sum NaN, so
/// the row's loss and every gradient element are NaN as before.
static const char *kRowSoftmaxStats =
    R"($XPTR    float mx = $NEGINF, sum = 0.0f;
    for (int j0 = $J0; j0 < $C; j0 += $U * blockDim.x) {
      float v[$U];
$LOAD_NEGINF      float cm = v[0];
#pragma unroll
      for (int u = 1; u < $U; ++u)
        cm = fmaxf(cm, v[u]);
      const float nm = maxNaN(mx, cm);
      const float ref = nm == $NEGINF ? 0.0f : nm;
      float add = 0.0f;
#pragma unroll
      for (int u = 0; u < $U; ++u)
        add += stepExp2((v[u] - ref) * 1.44269504f);
      sum = sum * stepExp2((mx - ref) * 1.44269504f) + add;
      mx = nm;
    }
    ceBlockMerge(mx, sum, sh, sh2);
)";

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

/// Whether a cross-entropy kernel reads its rows in 16-byte vectors: the
/// logits are read plainly (no prologue, or a widening one) from 16-bit
/// storage, and the rows are whole vectors.
static bool vectorRows(const RowIO &io, Elem e, int64_t c) {
  auto [ptr, elem] = io.plainX(e);
  return !ptr.empty() && elemBytes(elem) == 2 && c % 8 == 0;
}

/// Most bytes of a row the gradient stages in shared memory: two blocks an
/// SM on an H100/H200 (227 KB), e.g. GPT-2's 50304 bf16 logits (98 KB).
static constexpr int64_t kCeStageBytes = 112 * 1024;

/// Whether cross_entropy_grad keeps its row's logits in shared memory
/// between its two sweeps (16-byte vector rows that fit kCeStageBytes):
/// each thread keeps the vectors it loaded, in its own slots, and reads
/// them back for the gradient, so the logits leave DRAM once. Without it
/// the second sweep re-reads the row, from L2 only while every row in
/// flight fits there (GPT-2 124M: 6 blocks an SM x 132 SMs x 98 KB = 78
/// MB, more than an H200's 50 MB L2).
static bool stagedRows(const RowIO &io, Elem e, int64_t c) {
  return vectorRows(io, e, c) && c * 2 <= kCeStageBytes;
}

/// Threads per block of a cross-entropy kernel over rows of `c` logits:
/// at most 256, so an SM holds three blocks of the gradient (80 registers
/// a thread then) rather than one of 512, which stalled on every row's
/// block merges (ncu on an H200, 2026-11-26: 25% occupancy, 0.81 TB/s;
/// capping the registers at 64 instead spills). Rows the gradient stages
/// (stagedRows: its shared memory holds an SM to two blocks) take up to
/// 512, so 32 warps still load; the loss alone takes the same, so a fused
/// loss (step-fuse-loss) merges its statistics as the loss kernel does,
/// bit for bit.
static int64_t ceBlock(const RowIO &io, Elem e, int64_t c) {
  return blockForRow((c + kRowUnroll - 1) / kRowUnroll,
                     stagedRows(io, e, c) ? 512 : 256);
}

/// A sweep's elements into v[$U], $FILL past the row: $U loads strided by
/// the block, or $U / 8 vectors of 8 adjacent elements (vectorRows).
static const char *kRowLoads = R"(#pragma unroll
      for (int u = 0; u < $U; ++u) {
        const int j = j0 + u * (int)blockDim.x;
        v[u] = j < $C ? $X : $FILL;
      }
)";
static const char *kRowVectorLoads = R"(#pragma unroll
      for (int h = 0; h < $U / 8; ++h) {
        const int j = j0 + h * 8 * (int)blockDim.x;
        uint4 w_ = make_uint4(0u, 0u, 0u, 0u);
        if (j < $C) {
          w_ = $READ;
$KEEP        }
        const $XT_ *h_ = reinterpret_cast<const $XT_ *>(&w_);
#pragma unroll
        for (int u = 0; u < 8; ++u)
          v[h * 8 + u] = j < $C ? $HX : $FILL;
      }
)";

/// The gradient's v[$U] stored element by element ($STORE of v[u]).
static const char *kRowStores = R"(#pragma unroll
      for (int u = 0; u < $U; ++u) {
        const int j = $JU;
        if (j < $C)
          $STORE
      }
)";
/// The gradient's v[$U] stored as 16-byte vectors of the 16-bit result
/// type at $OP (the columns kRowVectorLoads read), each one $HV
/// (packedRowVector). By __stcs (st.global.cs: STG.E.EF.128, a weak
/// store marked evict-first, as a gradient of logits many times L2's size
/// should be): NVVM split the plain uint4 assignment here into four 32-bit
/// stores (st.global.u32 x 4 in the PTX of GPT-2's gradient; a small
/// kernel storing the same way got st.global.v4; __stwb would be
/// STG.E.128.STRONG.SM).
static const char *kRowVectorStores = R"(#pragma unroll
      for (int h = 0; h < $U / 8; ++h) {
        const int j = j0 + h * 8 * (int)blockDim.x;
        if (j >= $C)
          continue;
        __stcs(reinterpret_cast<uint4 *>($OP + row * $C + j), $HV);
      }
)";

/// The 16-byte value kRowVectorStores writes: v[h * 8 + 0..7] rounded to
/// the 16-bit `out` and packed two a word, by value.
static std::string packedRowVector(Elem out) {
  std::string bits =
      out == Elem::BF16 ? "__bfloat16_as_ushort" : "__half_as_ushort";
  auto word = [&](int u) {
    auto half = [&](int k) {
      return "(unsigned)" + bits + "(" +
             fromF(out, "v[h * 8 + " + std::to_string(k) + "]") + ")";
    };
    return half(u) + " | " + half(u + 1) + " << 16";
  };
  return "make_uint4(" + word(0) + ",\n                       " + word(2) +
         ",\n                       " + word(4) +
         ",\n                       " + word(6) + ")";
}

/// The row-input pieces of the two cross-entropy kernels: XPTR, the target
/// logit XT (`t` clamped into the row), the sweep's first column J0 and
/// the column JU of its element u, and LOAD_NEGINF / LOAD_ZERO filling
/// v[$U] with the sweep's elements (the fill past the row).
static std::vector<std::pair<std::string, std::string>>
logitVars(Elem e, int64_t c, const RowIO &io, bool staged = false) {
  std::string C = std::to_string(c);
  std::string t = "t < 0 || t >= " + C + " ? 0 : t";
  std::vector<std::pair<std::string, std::string>> vars;
  std::string x;
  if (io.x) {
    x = io.x("row * " + C + " + j");
    vars = {{"XPTR", ""}, {"XT", io.x("row * " + C + " + (" + t + ")")}};
  } else {
    x = toF(e, "x[j]");
    vars = {{"XPTR", "    const " + std::string(cType(e)) +
                         " *x = in0 + row * " + C + ";\n"},
            {"XT", toF(e, "x[" + t + "]")}};
  }
  auto [xPtr, xElem] = io.plainX(e);
  bool vec = vectorRows(io, e, c);
  vars.push_back({"J0", vec ? "threadIdx.x * 8" : "threadIdx.x"});
  vars.push_back({"JU", vec ? "j0 + (u >> 3) * 8 * (int)blockDim.x + (u & 7)"
                            : "j0 + u * (int)blockDim.x"});
  // The first sweep (-inf past the row) reads global memory and, staged,
  // keeps each vector in the thread's slot of the row in shared memory
  // (`row_`, 16-byte vectors), where the second (0 past the row) reads it.
  std::string global =
      "*reinterpret_cast<const uint4 *>(" + xPtr + " + row * " + C + " + j)";
  for (auto [key, fill, second] :
       {std::tuple<const char *, double, bool>{"LOAD_NEGINF", -INFINITY, false},
        {"LOAD_ZERO", 0.0, true}})
    vars.push_back(
        {key,
         subst(vec ? kRowVectorLoads : kRowLoads,
               {{"U", std::to_string(kRowUnroll)},
                {"C", C},
                {"X", x},
                {"READ", staged && second ? "row_[j >> 3]" : global},
                {"KEEP",
                 staged && !second ? "          row_[j >> 3] = w_;\n" : ""},
                {"XT_", cType(xElem)},
                {"HX", toF(xElem, "h_[u]")},
                {"FILL", litF(fill)}})});
  return vars;
}

/// The statement storing float `value` at `idx` of the result.
static std::string storeRow(const RowIO &io, Elem e, const std::string &idx,
                            const std::string &value) {
  return io.store ? io.store(idx, value)
                  : "out0[" + idx + "] = " + fromF(e, value) + ";";
}

/// The end of a kernel summing row losses (cross_entropy's, or
/// cross_entropy_grad's keeping its loss) with a mean or sum reduction:
/// thread 0 of each block holds `part` (its rows' losses, in order) and
/// `counted` (its rows not ignored); the last block to finish (atomic
/// ticket) adds the $G blocks' partials in a fixed order and stores
/// $STORE_TOTAL of `total` and `rows`: deterministic, no atomics on values.
static const char *kLossTotal = R"(  __shared__ bool amLast;
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
  int rows = 0;
  for (int b = threadIdx.x; b < $G; b += blockDim.x) {
    total += ((volatile float *)${NAME}_partial)[b];
    rows += ((volatile int *)${NAME}_count)[b];
  }
  total = blockReduce(total, SumOp(), 0.0f, sh);
  rows = blockReduce(rows, SumOp(), 0, shi);
  if (threadIdx.x == 0) {
    $STORE_TOTAL // mean over no rows: 0/0 = NaN, as PyTorch
    ${NAME}_ticket = 0; // ready for the next launch
  }
)";
static const char *kLossGlobals = "__device__ float ${NAME}_partial[$G];\n"
                                  "__device__ int ${NAME}_count[$G];\n"
                                  "__device__ unsigned int ${NAME}_ticket;\n";

static KernelSource emitCrossEntropy(ops::CrossEntropyOp op,
                                     const std::string &name,
                                     const RowIO &io) {
  std::vector<int64_t> s = shapeOf(op.getLogits());
  int64_t n = s[0], c = s[1];
  Elem e = elemOf(op.getLogits().getType());
  KernelSource ks;
  ks.name = name;
  ks.blockX = ceBlock(io, e, c);
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
      {"T", cType(e)},
      {"C", std::to_string(c)},
      {"N", std::to_string(n)},
      {"G", std::to_string(g)},
      {"NAME", name},
      {"IGN", litI(op.getIgnoreIndexOrDefault())},
      {"NEGINF", litF(-INFINITY)},
      {"NAN", "__int_as_float(0x7fc00000)"},
      {"U", std::to_string(kRowUnroll)},
      {"IN1", io.operand(1)},
      {"STORE", storeRow(io, e, "row", "loss")},
      {"STORE_TOTAL",
       storeRow(io, e, "0", mean ? "total / (float)rows" : "total")}};
  for (auto &var : logitVars(e, c, io))
    vars.push_back(var);
  std::string head = R"(  __shared__ float sh[32], sh2[32];
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
    ks.source = prelude(needs) + io.preamble + subst(kOnlineStatsFns, vars) +
                signature(ks, params) + " {\n" + subst(head, vars) + "}\n";
    return ks;
  }
  head += R"(    part += loss;
    ++counted;
  }
)";
  head += kLossTotal;
  ks.source = prelude(needs) + io.preamble + subst(kOnlineStatsFns, vars) +
              subst(kLossGlobals, vars) + signature(ks, params) + " {\n" +
              subst(head, vars) + "}\n";
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
  bool staged = stagedRows(io, e, c);
  auto red = op.getReduction();
  const bool mean = red == ops::LossReduction::Mean;
  KernelSource ks;
  ks.name = name;
  ks.blockX = ceBlock(io, e, c);
  ks.gridX = std::min<int64_t>(std::max<int64_t>(n, 1), 65535);
  ks.sharedBytes = staged ? (c * 2 + 15) / 16 * 16 : 0;
  PreludeNeeds needs = io.needs;
  needs.reduce = true;
  std::string params = paramList(io.paramsOf ? io.paramsOf : op, ks, needs,
                                 /*restrict=*/true);
  // A mean divides by the targets not ignored. They are counted once, by a
  // one-block launch of their own (`name`) into a __device__ int that the
  // rows' launch (`name` + "_rows") reads: counted by every row's block,
  // GPT-2's B = 16 gradient (16,384 blocks) read 16,384 targets each, 1
  // GiB from L2 and 32 loads a thread before its row.
  KernelSource rows = ks;
  if (mean) {
    rows.name = name + "_rows";
    ks.gridX = 1;
    ks.blockX = 256;
    ks.sharedBytes = 0;
    ks.then.push_back({"_rows", rows.gridX, rows.blockX, rows.sharedBytes});
  }
  Elem ge = elemOf(op.getGrad().getType());
  std::string scale = red == ops::LossReduction::None
                          ? toF(ge, io.operand(2) + "[row]")
                          : toF(ge, io.operand(2) + "[0]");
  if (mean)
    scale += " / (float)count";
  std::string body = R"(  __shared__ float sh[32], sh2[32];
  __shared__ int shi[32];
)";
  body += mean ? "  const int count = ${NAME}_live[0];\n" : "  int count = 0;\n";
  if (staged) // each thread's vectors of the row, kept between the sweeps
    body += "  extern __shared__ __align__(16) float smem[];\n"
            "  uint4 *row_ = reinterpret_cast<uint4 *>(smem);\n";
  // With the loss (step-fuse-loss): thread 0 keeps each row's loss, the
  // unfused loss kernel's expression of the same statistics, and stores
  // it (none) or sums the block's rows (kLossTotal adds the blocks).
  bool loss = bool(io.lossStore);
  bool lossRows = loss && red == ops::LossReduction::None;
  bool lossTotal = loss && !lossRows;
  if (lossTotal)
    body += "  float part = 0.0f; // thread 0: this block's rows, in order\n"
            "  int counted = 0;\n";
  body += R"(  for (long long row = blockIdx.x; row < $N; row += gridDim.x) {
    const long long t = (long long)$IN1[row];
    if (t == $IGN) { // ignored rows are exactly zero
      for (int j = threadIdx.x; j < $C; j += blockDim.x)
        $ZERO
)";
  if (lossRows)
    body += "      if (threadIdx.x == 0)\n        $LOSS_ROW_ZERO\n";
  body += "      continue;\n    }\n";
  body += kRowSoftmaxStats;
  // The second sweep reads the row again (from shared memory when staged,
  // else from L2 where it is still there) with the same $U loads in
  // flight; the reciprocal is taken once.
  // Per element one fma: p * (inv * s), minus s at the target; an out-of-
  // range target (bad) makes every element NaN through the factor and
  // matches no column, so the loop has no per-element select for it.
  body += R"(    const float s = $SCALE;
    const bool bad = t < 0 || t >= $C;
    const float inv = 1.0f / sum;
    const float ps = bad ? $NAN : inv * s;
    const int tc = bad ? -1 : (int)t; // the target's column, in range
)";
  if (lossRows)
    body += "    if (threadIdx.x == 0)\n      $LOSS_ROW\n";
  if (lossTotal)
    body += R"(    if (threadIdx.x == 0) {
      part += bad ? $NAN : mx + logf(sum) - $XT;
      ++counted;
    }
)";
  body += R"(    for (int j0 = $J0; j0 < $C; j0 += $U * blockDim.x) {
      float v[$U];
$LOAD_ZERO#pragma unroll
      for (int u = 0; u < $U; ++u) {
        const int j = $JU;
        v[u] = fmaf(stepExp2((v[u] - mx) * 1.44269504f), ps, j == tc ? -s : 0.0f);
      }
$STORES    }
  }
  (void)count;
)";
  body += lossTotal ? kLossTotal : "  (void)shi;\n";
  body += "}\n";
  std::string at = "row * " + std::to_string(c) + " + j";
  // The stores of v[$U]: 16-byte vectors where the store only rounds into
  // a 16-bit result (and the loads are vectors: the same columns).
  auto [outPtr, outElem] = io.plainOut(e);
  bool vecStores =
      vectorRows(io, e, c) && !outPtr.empty() && elemBytes(outElem) == 2;
  const char *stores = vecStores ? kRowVectorStores : kRowStores;
  // clang-format off
  std::vector<std::pair<std::string, std::string>> vars = {
      {"T", cType(e)}, {"C", std::to_string(c)}, {"N", std::to_string(n)},
      {"IGN", litI(op.getIgnoreIndexOrDefault())},
      {"NEGINF", litF(-INFINITY)}, {"NAN", "__int_as_float(0x7fc00000)"},
      {"SCALE", scale}, {"IN1", io.operand(1)},
      {"U", std::to_string(kRowUnroll)},
      {"ZERO", storeRow(io, e, at, "0.0f")},
      {"STORE", storeRow(io, e, at, "v[u]")},
      {"HV", vecStores ? packedRowVector(outElem) : ""},
      {"OP", outPtr}, {"NAME", name}, {"G", std::to_string(rows.gridX)}};
  // clang-format on
  for (auto &var : logitVars(e, c, io, staged))
    vars.push_back(var);
  if (loss) {
    const auto &lossStore = io.lossStore;
    vars.push_back({"LOSS_ROW_ZERO", lossStore("row", "0.0f")});
    vars.push_back(
        {"LOSS_ROW",
         subst(lossStore("row", "bad ? $NAN : mx + logf(sum) - $XT"), vars)});
    vars.push_back(
        {"STORE_TOTAL",
         lossStore("0", red == ops::LossReduction::Mean ? "total / (float)rows"
                                                        : "total")});
  }
  vars.push_back({"STORES", subst(stores, vars)});
  ks.source = prelude(needs) + io.preamble + subst(kOnlineStatsFns, vars) +
              (lossTotal ? subst(kLossGlobals, vars) : "");
  if (mean)
    ks.source += subst(R"(__device__ int ${NAME}_live[1];
)" + signature(ks, params) + R"( {
  __shared__ int shi[32];
  int count = 0;
  for (long long r = threadIdx.x; r < $N; r += blockDim.x)
    count += (long long)$IN1[r] != $IGN;
  count = blockReduce(count, SumOp(), 0, shi);
  if (threadIdx.x == 0)
    ${NAME}_live[0] = count;
}
)",
                       vars);
  // Rows kept in shared memory: two blocks an SM is the plan (up to 112 KB
  // each), so the registers are bounded for two (64 a thread at 512).
  ks.source += signature(rows, params, staged && rows.blockX == 512 ? 2 : 0) +
               " {\n" + subst(body, vars);
  return ks;
}

//===----------------------------------------------------------------------===//
// step.embedding_grad
//===----------------------------------------------------------------------===//

/// A row's sum: acc[q] += the gradient row at `pos` (in increasing
/// position order), then stored rounded once.
static const char *kEmbeddingRowSum = R"(    float acc[$COLS];
#pragma unroll
    for (int q = 0; q < $COLS; ++q)
      acc[q] = 0.0f;
$FIND_POSITIONS#pragma unroll
    for (int q = 0; q < $COLS; ++q) {
      const int j = threadIdx.x + q * 256;
      if (j < $D)
        out0[v * $D + j] = $STORE;
    }
)";

/// The scanning kernel's positions of row v: the indices in chunks of 256,
/// a warp ballot each, the hits in increasing position order (the loop
/// body, kEmbeddingAdd, and the closing braces follow).
static const char *kEmbeddingScan =
    R"(    for (long long c = 0; c < $N; c += 256) {
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
)";

/// The sorted kernel's launch 2: work item w is row v = w / $COLS, columns
/// [c * 256, c * 256 + 256) for c = w % $COLS, a column a thread. The run's
/// keys go through shared memory 256 at a time (one coalesced load) and
/// 16 positions' elements are loaded before the first of them is added,
/// so that 16 loads a thread are in flight instead of one key's and then
/// one element's: a frequent token's run is the work of $COLS blocks, not
/// of one (a byte text's ' ' holds a sixth of GPT-2's 8192 positions:
/// its row took 0.4 ms hit by hit on an H200, 0.34 ms with 8 loads in
/// flight in one block). Each column adds in increasing position order,
/// so the bits are those of one hit at a time.
static const char *kEmbeddingRows =
    R"(  __shared__ unsigned run_[256]; // a chunk of row v's run
  for (long long w = blockIdx.x; w < (long long)$V * $COLS; w += gridDim.x) {
    const long long v = w / $COLS;
    const int j = (int)(w % $COLS) * 256 + (int)threadIdx.x;
    const bool live_ = j < $D;
    float acc = 0.0f;
    const int beg = ${NAME}_start[v], end = ${NAME}_start[v + 1];
    for (int c = beg; c < end; c += 256) {
      const int m = min(256, end - c);
      __syncthreads(); // the last chunk's keys are read
      if (threadIdx.x < m)
        run_[threadIdx.x] = ${NAME}_keys[c + threadIdx.x] - (unsigned)(v * $N);
      __syncthreads();
      int s = 0;
      for (; s + 16 <= m; s += 16) {
        float g_[16];
#pragma unroll
        for (int u = 0; u < 16; ++u) {
          const long long pos = run_[s + u];
          g_[u] = live_ ? $G : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 16; ++u)
          acc += g_[u];
      }
      for (; s < m; ++s) {
        const long long pos = run_[s];
        if (live_)
          acc += $G;
      }
    }
    if (live_)
      out0[v * $D + j] = $STORE1;
  }
}
)";

/// Adds the gradient row at position `pos` into acc.
static const char *kEmbeddingAdd = R"(#pragma unroll
          for (int q = 0; q < $COLS; ++q) {
            const int j = threadIdx.x + q * 256;
            if (j < $D)
              acc[q] += $G;
          }
)";

/// Launch 1 of the sorted embedding_grad (one block of 1024 threads, the
/// keys in dynamic shared memory): keys v * N + p (an index outside
/// [0, V) as V, past every row), padded to P with 0xffffffff, sorted by a
/// bitonic network (each pass a barrier); then each row's first key.
static const char *kEmbeddingSort =
    R"(  extern __shared__ __align__(16) float smem[];
  unsigned *keys_ = reinterpret_cast<unsigned *>(smem);
  for (int p = threadIdx.x; p < $P; p += blockDim.x) {
    unsigned key = 0xffffffffu;
    if (p < $N) {
      const long long id = (long long)in0[p];
      key = (unsigned)((id >= 0 && id < $V ? id : $V) * $N + p);
    }
    keys_[p] = key;
  }
  __syncthreads();
  for (int k = 2; k <= $P; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < $P / 2; t += blockDim.x) {
        // i: t with a 0 inserted at bit j (j a power of two).
        const int i = ((t & ~(j - 1)) << 1) | (t & (j - 1)), l = i + j;
        const unsigned a = keys_[i], b = keys_[l];
        if ((a > b) == ((i & k) == 0)) { // ascending where bit k is clear
          keys_[i] = b;
          keys_[l] = a;
        }
      }
      __syncthreads();
    }
  for (int p = threadIdx.x; p < $N; p += blockDim.x)
    ${NAME}_keys[p] = keys_[p];
  // Row v's run starts at the first key >= v * N (row V: past the last).
  for (long long v = threadIdx.x; v <= $V; v += blockDim.x) {
    const unsigned want = (unsigned)(v * $N);
    int lo = 0, hi = $N;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (keys_[mid] < want)
        lo = mid + 1;
      else
        hi = mid;
    }
    ${NAME}_start[v] = lo;
  }
}
)";

static KernelSource emitEmbeddingGrad(ops::EmbeddingGradOp op,
                                      const std::string &name) {
  int64_t n = numelOf(op.getIndices());
  int64_t v = op.getNumEmbeddings();
  int64_t dimD = shapeOf(op.getGrad()).back();
  Elem e = elemOf(op.getGrad().getType());
  int64_t p = 1;
  while (p < n)
    p <<= 1;
  bool sorted = n > 0 && (v + 1) * n < (int64_t(1) << 32) && p <= 16384;
  KernelSource ks;
  ks.name = name;
  ks.blockX = sorted ? 1024 : 256;
  ks.gridX = sorted ? 1 : std::min<int64_t>(v, 65535);
  ks.sharedBytes = sorted ? p * 4 : 0;
  int64_t colBlocks = std::max<int64_t>(1, (dimD + 255) / 256);
  if (sorted)
    ks.then.push_back(
        {"_rows", std::min<int64_t>(v * colBlocks, int64_t(1) << 20), 256, 0});
  PreludeNeeds needs;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name},
      {"V", std::to_string(v)},
      {"N", std::to_string(n)},
      {"P", std::to_string(p)},
      {"D", std::to_string(dimD)},
      {"COLS", std::to_string(colBlocks)},
      {"STORE1", fromF(e, "acc")},
      {"G", toF(e, "in1[pos * " + std::to_string(dimD) + " + j]")},
      {"STORE", fromF(e, "acc[q]")}};
  std::string add = subst(kEmbeddingAdd, vars);
  if (!sorted) {
    vars.push_back({"FIND_POSITIONS", subst(kEmbeddingScan, vars) + add +
                                          "        }\n      }\n"
                                          "      __syncthreads();\n    }\n"});
    ks.source = prelude(needs) + signature(ks, params) + " {\n" +
                "  __shared__ unsigned int hits[8]; // one ballot per warp\n"
                "  for (long long v = blockIdx.x; v < " +
                std::to_string(v) + "; v += gridDim.x) {\n" +
                subst(kEmbeddingRowSum, vars) + "  }\n}\n";
    return ks;
  }
  KernelSource rows = ks;
  rows.name = name + "_rows";
  rows.blockX = 256;
  ks.source = prelude(needs) +
              subst("__device__ unsigned ${NAME}_keys[$N];\n"
                    "__device__ int ${NAME}_start[$V + 1];\n",
                    vars) +
              signature(ks, params) + " {\n" + subst(kEmbeddingSort, vars) +
              signature(rows, params) + " {\n" + subst(kEmbeddingRows, vars);
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
  if (mlir::isa<ops::AttentionOp, ops::AttentionLseOp, ops::AttentionGradOp>(
          op))
    return emitAttentionFamily(op, name);
  return std::nullopt;
}

} // namespace step::codegen::detail
