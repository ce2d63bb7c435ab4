//===- ReduceKernels.cpp - reduce_*, softmax, log_softmax, layer_norm -----===//
//
// Reductions accumulate in f32 (wrapping unsigned integers for integer sums)
// and combine partial results with warp shuffles (`blockReduce`, a fixed
// tree: the result does not depend on timing). Three shapes of work:
//  - row:    the innermost input dim is reduced; one block per output
//            element (grid-stride over outputs), threads stride over the
//            reduced elements, so reads are coalesced;
//  - split:  row case with few outputs (<= 64) and many inputs (>= 65536,
//            e.g. the global gradient norm): S blocks per output each reduce
//            a chunk, write a partial to a __device__ array, and the last
//            block to finish (an atomic ticket per output) combines the S
//            partials in a fixed order and resets its ticket: still
//            deterministic, without scratch buffers from the runtime (so a
//            kernel must not run concurrently with itself);
//  - column: the innermost dim is kept (a bias gradient sums over rows);
//            32 outputs x 8 reduction lanes per block, adjacent threads
//            reading adjacent outputs, lanes combined in shared memory;
//  - split column: the column case when ceil(M / 32) blocks would leave
//            the GPU mostly idle (768 outputs: 24 blocks): the rows are cut
//            into chunks (columnSplit), a block per (32 V outputs, chunk)
//            writes its lane-combined partials to a __device__ array, and
//            the last block of each tile (a ticket per tile) adds the
//            chunks' partials in a fixed order. A thread takes V = 4
//            adjacent outputs where the innermost kept run is a multiple
//            of 4 (its row's 4 elements one vector load: 256 bytes a warp
//            for bf16, against 64 with one output a thread), else V = 1.
//            Where a fused kernel also stores per-element values, the
//            vector loads of kColumnBatch rows are issued before any of
//            the rows is computed (a row's stores would keep the next
//            row's loads back); the rows are added in the same order.
//            Fused and unfused column reductions share this kernel
//            (splitColumnKernel), so their sums are the same bits.
// softmax, log_softmax and layer_norm are row kernels: one block per row,
// passes over the row for the max / mean, the sum / variance and the output;
// how they read the row and store the result is a RowIO (Emitters.h), so a
// reduction fusion can put a prologue and an epilogue around them.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include "dialects/step/StepOps.h"

#include <cmath>
#include <cstdint>

namespace step::codegen::detail {

namespace ops = mlir::step;

namespace {
enum class Kind { Sum, Max, Mean };
} // namespace

//===----------------------------------------------------------------------===//
// The split column kernel (unfused and fused column reductions)
//===----------------------------------------------------------------------===//

/// Head of the kernel: block b takes tile t (outputs t * 32V + [0, 32V),
/// lane tx the V from o4) of row chunk s; the blocks of one chunk are
/// adjacent (they read adjacent memory). Lane ty adds rows ty, ty + 8, ...
/// of the chunk in order into its V accumulators per root.
static const char *kColumnRows =
    R"(  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const $I t = blockIdx.x % $TILES, s = blockIdx.x / $TILES;
  const $I o4 = t * $TW + tx * $V;
$ACCS  if (o4 < $M) {
    long long base = 0;
    { $I r = o4;
$OFFO      (void)r;
    }
    const $I end = (s + 1) * $CCHUNK < $K ? (s + 1) * $CCHUNK : $K;
$ROWS  }
)";
/// Row u_ of a batch: its index kk (the batch ends at `end`) and off4.
static const char *kColumnBatchRow = R"(        const $I kk = k0 + 8 * u_;
        if (kk >= end)
          break;
        long long off4 = base;
        $I r = kk;
$OFFK8        (void)r;
)";
/// The rows of kColumnRows one at a time, unrolled by 8.
static const char *kColumnRowLoop = R"(#pragma unroll 8
    for ($I kk = s * $CCHUNK + ty; kk < end; kk += 8) {
      long long off4 = base;
      $I r = kk;
$OFFK      (void)r;
$LOADS#pragma unroll
      for (int e = 0; e < $V; ++e) {
        const long long off = off4 + e;
$REFS$ELEMENT      }
$STORES    }
)";
/// The rows of kColumnRows $UB at a time: every vector load of the $UB
/// rows first, then each row's elements in order (the same sums). Both
/// loops open with kColumnBatchRow.
static const char *kColumnRowBatches =
    R"(    for ($I k0 = s * $CCHUNK + ty; k0 < end; k0 += 8 * $UB) {
$BATCH_DECLS#pragma unroll
      for (int u_ = 0; u_ < $UB; ++u_) {
$BATCH_ROW$BATCH_LOADS      }
#pragma unroll
      for (int u_ = 0; u_ < $UB; ++u_) {
$BATCH_ROW$LOADS$BATCH_BINDS#pragma unroll
        for (int e = 0; e < $V; ++e) {
          const long long off = off4 + e;
$REFS$ELEMENT        }
$STORES      }
    }
)";

/// The 8 lanes' accumulators of root R combined in order into lane 0's,
/// through the shared buffer of the root's type (free again after).
static const char *kColumnLanes = R"(#pragma unroll
  for (int e = 0; e < $V; ++e)
    $SH[ty][e][tx] = acc${R}_[e];
  __syncthreads();
  if (ty == 0) {
    for (int y = 1; y < 8; ++y) {
#pragma unroll
      for (int e = 0; e < $V; ++e)
        acc${R}_[e] = $OP(acc${R}_[e], $SH[y][e][tx]);
    }
  }
  __syncthreads();
)";

ColumnKernelText splitColumnKernel(const ColumnCode &code,
                                   const ColumnSplit &col, int64_t m, int64_t k,
                                   const DimList &kept, const DimList &red,
                                   const std::string &I,
                                   const std::string &name) {
  // The vector loads batched only where the row also stores: without
  // stores the compiler's unrolled loop already issues the 8 rows' loads
  // together (GPT-2's bias gradients, 32 registers).
  bool batched = !code.vecLoads.empty() && !code.rowStores.empty();
  std::string rowLoads, decls, loads, binds;
  for (const ColumnCode::VecLoad &l : code.vecLoads) {
    std::string at = "const " + l.type + " " + l.name + " = ";
    if (!batched) {
      rowLoads += "      " + at + l.expr + ";\n";
      continue;
    }
    decls += "      " + l.type + " " + l.name + "_[" +
             std::to_string(kColumnBatch) + "];\n";
    loads += "        " + l.name + "_[u_] = " + l.expr + ";\n";
    binds += "      " + at + l.name + "_[u_];\n";
  }
  std::vector<std::pair<std::string, std::string>> vars = {
      {"I", I},
      {"M", std::to_string(m)},
      {"K", std::to_string(k)},
      {"NAME", name},
      {"V", std::to_string(col.vec)},
      {"TW", std::to_string(32 * col.vec)},
      {"TILES", std::to_string(col.tiles)},
      {"CS", std::to_string(col.chunks)},
      {"CCHUNK", std::to_string(col.chunk)},
      {"OFFO", kept.offset("r", "base")},
      {"OFFK", red.offset("r", "off4")},
      {"OFFK8", indent(red.offset("r", "off4"), "  ")},
      {"UB", std::to_string(kColumnBatch)},
      {"LOADS", rowLoads + code.rowLoads},
      {"ELEMENT", code.element},
      {"STORES", code.rowStores}};
  // One shared buffer per accumulator type; the roots take turns.
  std::vector<std::string> types;
  std::string shared, accs, refs, lanes, partials, combine, bind, globals;
  for (auto [r, root] : llvm::enumerate(code.roots)) {
    auto at = llvm::find(types, root.type);
    if (at == types.end()) {
      types.push_back(root.type);
      shared += "  __shared__ " + root.type + " sh" +
                std::to_string(types.size() - 1) + "[8][" +
                std::to_string(col.vec) + "][33];\n";
      at = types.end() - 1;
    }
    std::string sh = "sh" + std::to_string(at - types.begin());
    std::vector<std::pair<std::string, std::string>> rv = vars;
    rv.insert(rv.end(), {{"R", std::to_string(r)},
                         {"ACC", root.type},
                         {"IDENT", root.ident},
                         {"OP", root.op},
                         {"SH", sh}});
    accs += subst("  $ACC acc${R}_[$V];\n#pragma unroll\n  for (int e = 0; "
                  "e < $V; ++e)\n    acc${R}_[e] = $IDENT;\n",
                  rv);
    refs += subst("        $ACC &acc$R = acc${R}_[e];\n", rv);
    lanes += subst(kColumnLanes, rv);
    partials += subst("#pragma unroll\n      for (int e = 0; e < $V; ++e)\n"
                      "        ${NAME}_partial$R[s * $M + o4 + e] = "
                      "acc${R}_[e];\n",
                      rv);
    combine +=
        subst("#pragma unroll\n  for (int e = 0; e < $V; ++e)\n"
              "    acc${R}_[e] = $IDENT;\n  if (o4 < $M) {\n#pragma unroll 4\n"
              "    for ($I c = ty; c < $CS; c += 8) {\n#pragma unroll\n"
              "      for (int e = 0; e < $V; ++e)\n"
              "        acc${R}_[e] = $OP(acc${R}_[e], "
              "__ldcg(&${NAME}_partial$R[c * $M + o4 + e]));\n    }\n  }\n",
              rv) +
        subst(kColumnLanes, rv);
    bind += subst("        const $ACC acc$R = acc${R}_[e];\n", rv);
    globals += subst("__device__ $ACC ${NAME}_partial$R[$CS * $M];\n", rv);
  }
  vars.insert(vars.end(), {{"ACCS", accs}, {"REFS", refs}});
  vars.insert(
      vars.end(),
      {{"BATCH_DECLS", decls}, {"BATCH_LOADS", loads}, {"BATCH_BINDS", binds}});
  if (!batched) {
    vars.push_back({"ROWS", subst(kColumnRowLoop, vars)});
  } else { // the row's code one level deeper
    vars.push_back({"BATCH_ROW", subst(kColumnBatchRow, vars)});
    auto deeper = vars;
    for (auto &[key, value] : deeper)
      if (key == "LOADS" || key == "ELEMENT" || key == "STORES" ||
          key == "REFS" || key == "BATCH_BINDS")
        value = indent(value, "  ");
    vars.push_back({"ROWS", subst(kColumnRowBatches, deeper)});
  }
  ColumnKernelText text;
  text.globals = globals + subst("__device__ unsigned int "
                                 "${NAME}_ticket[$TILES];\n",
                                 vars);
  auto lit = [&](const std::string &t) { return subst(t, vars); };
  text.body =
      shared + "  __shared__ bool amLast;\n" + lit(kColumnRows) + lanes +
      lit("  if (ty == 0) {\n    if (o4 < $M) {\n") + partials +
      lit("    }\n    __threadfence(); // the partials are visible before "
          "the ticket\n  }\n  __syncthreads();\n  if (threadIdx.x == 0)\n"
          "    amLast = atomicAdd(&${NAME}_ticket[t], 1u) == $CS - 1;\n"
          "  __syncthreads();\n  if (!amLast)\n    return;\n"
          "  // The last block of tile t combines its outputs' $CS partials "
          "in a fixed\n  // order: lane ty adds chunks ty, ty + 8, ..., "
          "then lanes 0..7 in turn.\n  __threadfence();\n") +
      combine +
      lit("  if (ty == 0) {\n    if (o4 < $M) {\n#pragma unroll\n"
          "      for (int e = 0; e < $V; ++e) {\n"
          "        const $I o = o4 + e;\n") +
      bind + code.epilogue +
      lit("      }\n    }\n    if (tx == 0)\n"
          "      ${NAME}_ticket[t] = 0; // ready for the next launch\n"
          "  }\n");
  return text;
}

//===----------------------------------------------------------------------===//
// step.reduce_sum, step.reduce_max, step.reduce_mean
//===----------------------------------------------------------------------===//

static KernelSource emitReduce(mlir::Operation *op, const std::string &name,
                               Kind kind, llvm::ArrayRef<int64_t> reducedDims) {
  std::vector<int64_t> in = shapeOf(op->getOperand(0));
  std::vector<int64_t> strides = stridesOf(in);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t d : reducedDims)
    reduced[d] = true;
  DimList kept, red;
  for (size_t d = 0; d < in.size(); ++d)
    (reduced[d] ? red : kept).add(in[d], strides[d]);
  int64_t m = kept.count(), k = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (reduced[d])
      k *= in[d];
  if (k == 1)
    return emitCopy(op, name); // nothing to combine: same values

  Elem e = elemOf(op->getOperand(0).getType());
  // What an element read as `raw` (a storage expression) adds.
  std::string acc, ident, opName, widen;
  auto loadOf = [&](const std::string &raw) {
    return isFloat(e) ? toF(e, raw) : widen + raw;
  };
  if (isFloat(e)) {
    acc = "float";
    ident = kind == Kind::Max ? litF(-INFINITY) : "0.0f";
    opName = kind == Kind::Max ? "MaxNaNOp()" : "SumOp()";
  } else if (e == Elem::I1) { // max of i1 is any()
    acc = "int", ident = "0", opName = "MaxOp()";
    widen = "(int)";
  } else {
    bool wide = e == Elem::I64;
    if (kind == Kind::Sum) { // wraps, as the elementwise add
      acc = wide ? "unsigned long long" : "unsigned int";
      ident = "0", opName = "SumOp()";
      widen = "(" + acc + ")";
    } else {
      acc = cType(e), opName = "MaxOp()";
      ident = wide ? litI(INT64_MIN) : "(-2147483647 - 1)";
    }
  }
  std::string load = loadOf("in0[off]");
  std::string result = "acc";
  if (kind == Kind::Mean)
    result = "acc / " + litF(static_cast<double>(k)); // 0/0 = NaN when empty
  Elem outE = elemOf(op->getResult(0).getType());
  std::string store = isFloat(outE) ? fromF(outE, result)
                                    : "(" + std::string(cType(outE)) + ")" +
                                          result;

  KernelSource ks;
  ks.name = name;
  PreludeNeeds needs;
  needs.reduce = true;
  bool innermostReduced = !in.empty() && reduced.back() && in.back() != 1;
  bool split = innermostReduced && m <= 64 && k >= 65536;
  ColumnSplit col =
      innermostReduced ? ColumnSplit() : columnSplit(m, k, kept.innerRun());
  int64_t splits = split ? std::min<int64_t>(256, k / 16384) : 1;
  RowMapping rowMap = rowMapping(m, k);
  ks.blockX = split ? blockForRow(k / splits)
              : innermostReduced ? rowMap.block
                                 : 256;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  std::string I = idxType(std::max(m, k) + 1);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"ACC", acc},
      {"IDENT", ident},
      {"OP", opName},
      {"LOAD", load},
      {"STORE", store},
      {"I", I},
      {"M", std::to_string(m)},
      {"K", std::to_string(k)},
      {"NAME", name},
      {"S", std::to_string(splits)},
      {"CHUNK", std::to_string((k + splits - 1) / splits)},
      {"OFFO", kept.offset("r", "base")},
      {"OFFK", red.offset("r", "off")}};
  std::string body;
  if (split) {
    ks.gridX = m * splits;
    body = R"(  __shared__ $ACC sh[32];
  __shared__ bool amLast;
  const $I o = blockIdx.x / $S, s = blockIdx.x % $S;
  long long base = 0;
  { $I r = o;
$OFFO    (void)r;
  }
  $ACC acc = $IDENT;
  const $I end = (s + 1) * $CHUNK < $K ? (s + 1) * $CHUNK : $K;
  for ($I kk = s * $CHUNK + threadIdx.x; kk < end; kk += blockDim.x) {
    long long off = base;
    $I r = kk;
$OFFK    (void)r;
    acc = $OP(acc, $LOAD);
  }
  acc = blockReduce(acc, $OP, ($ACC)($IDENT), sh);
  if (threadIdx.x == 0) {
    ${NAME}_partial[o * $S + s] = acc;
    __threadfence(); // the partial is visible before the ticket
    amLast = atomicAdd(&${NAME}_ticket[o], 1u) == $S - 1;
  }
  __syncthreads();
  if (amLast) { // combine the partials in a fixed order
    __threadfence();
    acc = threadIdx.x < $S ? ((volatile $ACC *)${NAME}_partial)[o * $S + threadIdx.x] : $IDENT;
    acc = blockReduce(acc, $OP, ($ACC)($IDENT), sh);
    if (threadIdx.x == 0) {
      out0[o] = $STORE;
      ${NAME}_ticket[o] = 0; // ready for the next launch
    }
  }
)";
    ks.source = prelude(needs) +
                subst("__device__ $ACC ${NAME}_partial[$M * $S];\n"
                      "__device__ unsigned int ${NAME}_ticket[$M];\n",
                      vars);
  } else if (innermostReduced) {
    ks.gridX = rowMap.grid;
    for (auto &v : rowMap.vars(I, m))
      vars.push_back(v);
    body = R"(  __shared__ $ACC sh[32];
  (void)sh;
$ROWS_FOR    const $I o = row;
    long long base = 0;
    { $I r = o;
$OFFO      (void)r;
    }
    $ACC acc = $IDENT;
    for ($I kk = $TID; live_ && kk < $K; kk += $NTH) {
      long long off = base;
      $I r = kk;
$OFFK      (void)r;
      acc = $OP(acc, $LOAD);
    }
    acc = rowReduce<$PW>(acc, $OP, ($ACC)($IDENT), sh);
    if ($LEAD)
      out0[o] = $STORE;
  }
)";
    ks.source = prelude(needs);
  } else if (col.chunks > 1) {
    ks.gridX = col.tiles * col.chunks;
    ColumnCode code;
    code.roots = {{acc, ident, opName}};
    std::string x = load;
    if (col.vec > 1 && elemBytes(e) <= 4) { // the row's V elements at once
      needs.vec = true;
      std::string vt =
          "Vec<" + std::string(cType(e)) + ", " + std::to_string(col.vec) + ">";
      code.vecLoads.push_back({"xv", vt,
                               "reinterpret_cast<const " + vt +
                                   " *>(in0)[off4 / " +
                                   std::to_string(col.vec) + "]"});
      x = loadOf("xv.v[e]");
    }
    code.element = "        acc0 = " + opName + "(acc0, " + x + ");\n";
    code.epilogue = "        { const " + acc + " acc = acc0;\n" +
                    "          out0[o] = " + store + ";\n        }\n";
    ColumnKernelText text =
        splitColumnKernel(code, col, m, k, kept, red, I, name);
    body = text.body;
    ks.source = prelude(needs) + text.globals;
  } else {
    ks.gridX = gridFor(m, 32);
    body = R"(  __shared__ $ACC sh[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for ($I t = blockIdx.x; t < ($M + 31) / 32; t += gridDim.x) {
    const $I o = t * 32 + tx;
    $ACC acc = $IDENT;
    if (o < $M) {
      long long base = 0;
      { $I r = o;
$OFFO        (void)r;
      }
      for ($I kk = ty; kk < $K; kk += 8) {
        long long off = base;
        $I r = kk;
$OFFK        (void)r;
        acc = $OP(acc, $LOAD);
      }
    }
    sh[ty][tx] = acc;
    __syncthreads();
    if (ty == 0) {
      for (int y = 1; y < 8; ++y)
        acc = $OP(acc, sh[y][tx]);
      if (o < $M)
        out0[o] = $STORE;
    }
    __syncthreads();
  }
)";
    ks.source = prelude(needs);
  }
  ks.source += signature(ks, params) + " {\n" + subst(body, vars) + "}\n";
  return ks;
}

//===----------------------------------------------------------------------===//
// step.softmax, step.log_softmax
//===----------------------------------------------------------------------===//

static KernelSource emitSoftmax(mlir::Operation *op, const std::string &name,
                                int64_t dim, bool log, const RowIO &io) {
  std::vector<int64_t> s = shapeOf(op->getOperand(0));
  int64_t outer = 1, inner = 1, size = s[dim];
  for (int64_t d = 0; d < dim; ++d)
    outer *= s[d];
  for (size_t d = dim + 1; d < s.size(); ++d)
    inner *= s[d];
  int64_t rows = outer * inner;
  Elem e = elemOf(op->getOperand(0).getType());
  KernelSource ks;
  ks.name = name;
  RowMapping map = rowMapping(rows, size, 512);
  ks.blockX = map.block;
  ks.gridX = map.grid;
  PreludeNeeds needs = io.needs;
  needs.reduce = true;
  std::string params = paramList(io.paramsOf ? io.paramsOf : op, ks, needs,
                                 /*restrict=*/true);
  std::string out = log ? "x - mx - lse" : "expf(x - mx) / sum";
  std::string at = "base + (long long)j * " + std::to_string(inner);
  std::vector<std::pair<std::string, std::string>> vars =
      map.vars("long long", rows);
  vars.insert(vars.end(), {{"INNER", std::to_string(inner)},
       {"SIZE", std::to_string(size)}, {"NEGINF", litF(-INFINITY)},
       {"LOAD", io.x ? io.x(at) : toF(e, "in0[" + at + "]")},
       {"STORE", io.store ? io.store(at, out)
                          : "out0[" + at + "] = " + fromF(e, out) + ";"}});
  ks.source = prelude(needs) + io.preamble + signature(ks, params) + " {\n" + subst(R"(  __shared__ float sh[32];
  (void)sh;
$ROWS_FOR    const long long base = (row / $INNER) * $SIZE * $INNER + row % $INNER;
    // The max first keeps expf from overflowing; a NaN in the row gives NaN.
    float mx = $NEGINF;
    for (int j = $TID; live_ && j < $SIZE; j += $NTH)
      mx = maxNaN(mx, $LOAD);
    mx = rowReduce<$PW>(mx, MaxNaNOp(), $NEGINF, sh);
    float sum = 0.0f;
    for (int j = $TID; live_ && j < $SIZE; j += $NTH)
      sum += expf($LOAD - mx);
    sum = rowReduce<$PW>(sum, SumOp(), 0.0f, sh);
    const float lse = logf(sum);
    (void)lse;
    for (int j = $TID; live_ && j < $SIZE; j += $NTH) {
      const float x = $LOAD;
      $STORE
    }
  }
}
)", vars);
  return ks;
}

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

static KernelSource emitLayerNorm(ops::LayerNormOp op, const std::string &name,
                                  const RowIO &io) {
  int64_t group = numelOf(op.getWeight());
  int64_t rows = group ? numelOf(op.getOperand()) / group : 0;
  Elem e = elemOf(op.getOperand().getType());
  KernelSource ks;
  ks.name = name;
  RowMapping map = rowMapping(rows, group, 512);
  ks.blockX = map.block;
  ks.gridX = map.grid;
  PreludeNeeds needs = io.needs;
  needs.reduce = true;
  std::string params = paramList(io.paramsOf ? io.paramsOf : op, ks, needs,
                                 /*restrict=*/true);
  std::string at = "row * " + std::to_string(group) + " + j";
  std::string x = io.x ? io.x(at) : toF(e, "x[j]");
  // A warp's row (map.perWarp) stays in registers: xv[c] is element
  // lane + 32 c, read (and its prologue computed) once.
  std::string affine =
      " - mean) * rstd * " +
      toF(elemOf(op.getWeight().getType()), io.operand(1) + "[j]") + " + " +
      toF(elemOf(op.getBias().getType()), io.operand(2) + "[j]");
  std::string y = "(" + (map.perWarp ? std::string("xv[c]") : x) + affine;
  // A warp's row hands its registers to a store that also writes x.
  std::string store = map.perWarp && io.storeX ? io.storeX(at, y, "xv[c]")
                      : io.store               ? io.store(at, y)
                                 : "out0[" + at + "] = " + fromF(e, y) + ";";
  std::vector<std::pair<std::string, std::string>> vars =
      map.vars("long long", rows);
  vars.insert(
      vars.end(),
      {{"G", std::to_string(group)},
       {"PER", std::to_string((group + 31) / 32)},
       {"GF", litF(static_cast<double>(group))},
       {"T", cType(e)},
       {"X", x},
       {"EPS", litF(op.getEpsilon().convertToDouble())},
       {"XPTR", io.x ? ""
                     : subst("    const $T *x = in0 + row * $G;\n",
                             {{"T", cType(e)}, {"G", std::to_string(group)}})},
       {"STORE", store}});
  // The same sums in the same order either way: lane l adds elements
  // l, l + 32, ... of its row.
  const char *warpRow = R"(  __shared__ float sh[32];
  (void)sh;
$ROWS_FOR$XPTR    float xv[$PER], s = 0.0f;
#pragma unroll
    for (int c = 0; c < $PER; ++c) {
      const int j = $TID + 32 * c;
      if (live_ && j < $G) {
        xv[c] = $X;
        s += xv[c];
      }
    }
    const float mean = rowReduce<$PW>(s, SumOp(), 0.0f, sh) / $GF;
    // Two passes (mean, then squared deviations), as the CPU reference:
    // no cancellation from E[x^2] - E[x]^2. Biased variance.
    float q = 0.0f;
#pragma unroll
    for (int c = 0; c < $PER; ++c) {
      const int j = $TID + 32 * c;
      if (live_ && j < $G) {
        const float d = xv[c] - mean;
        q += d * d;
      }
    }
    const float var = rowReduce<$PW>(q, SumOp(), 0.0f, sh) / $GF;
    const float rstd = 1.0f / sqrtf(var + $EPS);
#pragma unroll
    for (int c = 0; c < $PER; ++c) {
      const int j = $TID + 32 * c;
      if (live_ && j < $G) {
        $STORE
      }
    }
  }
}
)";
  if (map.perWarp) {
    ks.source = prelude(needs) + io.preamble + signature(ks, params) +
                " {\n" + subst(warpRow, vars);
    return ks;
  }
  ks.source = prelude(needs) + io.preamble + signature(ks, params) + " {\n" + subst(R"(  __shared__ float sh[32];
  (void)sh;
$ROWS_FOR$XPTR    float s = 0.0f;
    for (int j = $TID; live_ && j < $G; j += $NTH)
      s += $X;
    const float mean = rowReduce<$PW>(s, SumOp(), 0.0f, sh) / $GF;
    // Two passes (mean, then squared deviations), as the CPU reference:
    // no cancellation from E[x^2] - E[x]^2. Biased variance.
    float q = 0.0f;
    for (int j = $TID; live_ && j < $G; j += $NTH) {
      const float d = $X - mean;
      q += d * d;
    }
    const float var = rowReduce<$PW>(q, SumOp(), 0.0f, sh) / $GF;
    const float rstd = 1.0f / sqrtf(var + $EPS);
    for (int j = $TID; live_ && j < $G; j += $NTH)
      $STORE
  }
}
)", vars);
  return ks;
}

std::optional<KernelSource> emitNormKernel(mlir::Operation *op,
                                           const std::string &name,
                                           const RowIO &io) {
  if (auto s = mlir::dyn_cast<ops::SoftmaxOp>(op))
    return emitSoftmax(op, name, s.getDimension(), /*log=*/false, io);
  if (auto s = mlir::dyn_cast<ops::LogSoftmaxOp>(op))
    return emitSoftmax(op, name, s.getDimension(), /*log=*/true, io);
  if (auto l = mlir::dyn_cast<ops::LayerNormOp>(op))
    return emitLayerNorm(l, name, io);
  return std::nullopt;
}

std::optional<KernelSource> emitReduceFamily(mlir::Operation *op,
                                             const std::string &name) {
  if (auto r = mlir::dyn_cast<ops::ReduceSumOp>(op))
    return emitReduce(op, name, Kind::Sum, r.getDims());
  if (auto r = mlir::dyn_cast<ops::ReduceMaxOp>(op))
    return emitReduce(op, name, Kind::Max, r.getDims());
  if (auto r = mlir::dyn_cast<ops::ReduceMeanOp>(op))
    return emitReduce(op, name, Kind::Mean, r.getDims());
  return emitNormKernel(op, name, RowIO());
}

} // namespace step::codegen::detail
