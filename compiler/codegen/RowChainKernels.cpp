//===- RowChainKernels.cpp - One kernel per row_chain step.fusion ---------===//
//
// A row_chain fusion (step-fuse-row-chains; dialects/step/Fusion.h,
// RowChain) runs as one row kernel: rows map to warps or blocks exactly as
// in the row strategy of a reduce_* kernel (RowMapping with the same
// rowMapping(rows, cols) arguments, lane l accumulating elements l,
// l + NTH, ... of its row, then rowReduce), and each row goes through the
// chain's stages in turn:
//  - stage s: one pass over the row, every reduction of the stage
//    accumulating its operand, computed (FusionExpr) at the element read
//    with the per-row values of earlier stages bound as uniform locals;
//    the combined results, rounded to their types as the reduce kernel's
//    store, are then known to every thread of the row, and so are the
//    per-row ops computed from them (rsqrt(var + eps): once per row);
//  - last: one pass storing every per-element result, and the row's lead
//    thread storing every per-row result; column reductions (C7: rows of
//    a warp each) add the pass's values into the warp's own row of a
//    [warps, K] array in dynamic shared memory (lane l: columns l, l + 32,
//    ..., the same every row; no bank conflicts, no registers held across
//    the rows: GPT-2's layer-norm gradient took 87 registers with them in
//    registers, two blocks an SM).
// An input of one value a row that the body reads only through broadcasts
// across the row (a layer norm's saved mean and rstd) is loaded once a row
// into a uniform local, not at every element.
// A lane with at most kChainUnrollMax elements of its row runs each pass
// unrolled, its loads in flight together; then the inputs that two or
// more passes read at the element are loaded once a row into per-lane
// register arrays rc<n>_[NJ] (the most-read first, up to kChainCacheMax
// registers; found from a first emission's reads) that every pass
// reads instead of memory; an input that a later pass reads at the element
// and the first does not (not cached: the layer-norm gradient's incoming
// residual gradient, read only by the stores) has its rows' 128-byte lines
// asked into L2 (PTX prefetch.L2) a row ahead, so that pass waits on L2
// rather than a second DRAM latency after the stages' reductions (no
// registers; its loads lose the .nc path: NVVM no longer proves them
// read-only once the asm takes the address, and __ldg instead cost 24
// address computations a row and a spill in ptxas). With column
// reductions the grid is at most kChainColumnBlocks blocks
// (kChainCachedColumnBlocks, with launch bounds for three blocks an SM,
// when rows are cached); each adds its warps' rows in warp order into row
// blockIdx.x of a [G, cols] partial array, and the second phase `_cols` adds each column's G partials in a fixed
// order (lanes y, y + 8, ..., then the lanes in turn) and stores the
// result rounded once: the same bits whatever the block schedule.
// So each row reduction's result is bitwise the one a reduction fusion (or a
// bare reduce kernel) computes for the same values, and every stored
// element is bitwise what the chain of loop and reduction kernels it
// replaces stores; a column reduction sums in another order than the
// column kernel it replaces (f32 rounding differs, not the result's
// type). Cost: one launch (two with column reductions: the second reads
// G x cols partials); a cached input is read from memory once a row, any
// other once per pass that reads it (a warp's row of 768 f32 is 3 KB, so
// the passes after the first read L1/L2, not DRAM; a prefetch is one
// instruction a lane a 32 lines of the row); per-element values a
// stage needs are recomputed in each pass that needs them (ALU work, no
// memory); emission runs twice when some input is cached.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/FusionKernels.h"

#include "compiler/codegen/Emitters.h"
#include "dialects/step/Fusion.h"
#include "runtime/Tensor.h"

#include <algorithm>

namespace step::codegen::detail {

namespace ops = mlir::step;

static_assert(kWarpRowsPerBlock == ops::kRowChainWarps,
              "C7's shared-memory cap counts kRowChainWarps warps a block");

namespace {

/// "acc<r>": the accumulator local that `a.result` reads.
std::string accName(const Acc &a) { return "acc" + std::to_string(a.index); }

/// One shared buffer per accumulator type among `cols`, reused by each
/// column reduction in turn (so the shared memory does not grow with their
/// number): its name for `a`, and the declarations (`dims` after the name).
struct SharedByType {
  std::vector<std::string> types;
  std::string name(const Acc &a) {
    auto it = std::find(types.begin(), types.end(), a.type);
    if (it == types.end())
      it = types.insert(types.end(), a.type);
    return "csh" + std::to_string(it - types.begin()) + "_";
  }
  std::string decls(const std::string &dims) const {
    std::string s;
    for (size_t t = 0; t < types.size(); ++t)
      s += "  __shared__ " + types[t] + " csh" + std::to_string(t) + "_" +
           dims + ";\n";
    return s;
  }
};

/// Bytes of one accumulator of C type `type`.
int64_t accBytes(const std::string &type) {
  if (type == "double" || type == "unsigned long long" || type == "long long")
    return 8;
  if (type == "__half" || type == "__nv_bfloat16")
    return 2;
  return 4;
}

/// The column accumulators: `cs<r>_`, [warps][K] in dynamic shared memory
/// (each warp's lanes add its rows' values into its own row), set to the
/// identity before the rows. Returns the declarations; `bytes` gets the
/// dynamic shared memory they take (each array 16-byte aligned).
std::string columnArrays(const std::vector<Acc> &cols, int64_t warps, int64_t k,
                         int64_t &bytes) {
  std::string s =
      "  extern __shared__ __align__(16) float smem[];\n"
      "  unsigned char *const cdyn_ = reinterpret_cast<unsigned char "
      "*>(smem);\n";
  bytes = 0;
  for (const Acc &a : cols) {
    std::string C = "c" + accName(a) + "_";
    s += "  " + a.type + " *const " + C + " = reinterpret_cast<" + a.type +
         " *>(cdyn_ + " + std::to_string(bytes) + ");\n" +
         "  for (int i_ = threadIdx.x; i_ < " + std::to_string(warps * k) +
         "; i_ += blockDim.x)\n    " + C + "[i_] = " + a.ident + ";\n";
    bytes += (warps * k * accBytes(a.type) + 15) / 16 * 16;
  }
  return s +
         "  __syncthreads();\n"
         "  const int cw_ = (int)(threadIdx.x >> 5) * $K; // the warp's row\n";
}

/// After the rows: the block's column partials into ${NAME}_cacc<r>, row
/// `blockIdx.x` of a [G, K] array, its warps' rows added in warp order
/// (the lanes of every warp hold the same columns: C7 keeps a column
/// reduction's rows to a warp each).
std::string columnPartials(const std::vector<Acc> &cols, int64_t warps) {
  std::string body = "  __syncthreads(); // every warp's rows are added\n";
  for (const Acc &a : cols) {
    std::string A = accName(a), C = "c" + A + "_";
    body += "  for (int c_ = threadIdx.x; c_ < $K; c_ += blockDim.x) {\n"
            "    " +
            a.type + " v_ = " + C +
            "[c_];\n"
            "    for (int w_ = 1; w_ < " +
            std::to_string(warps) +
            "; ++w_)\n"
            "      v_ = " +
            a.op + "(v_, " + C +
            "[w_ * $K + c_]);\n"
            "    ${NAME}_c" +
            A + "[blockIdx.x * $K + c_] = v_;\n  }\n";
  }
  return body;
}

/// The second kernel, ${NAME}_cols: column c of every result the sum (max)
/// of its G partials, blocks of 32 columns x 8 lanes, lane y adding
/// partials y, y + 8, ... in turn (unrolled by 8: 8 loads in flight, not a
/// chain of G / 8 L2 latencies), then the lanes in order: a fixed order,
/// so the result does not depend on timing. Stored rounded once. One
/// column reduction after another (a shared buffer per type).
std::string columnTotals(ops::FusionOp f, const std::vector<Acc> &cols,
                         const std::string &params) {
  SharedByType sh;
  std::string body;
  for (const Acc &a : cols) {
    std::string A = accName(a), R = std::to_string(a.index), S = sh.name(a);
    mlir::Value out = a.root->getResult(0);
    std::string store = "    const " + FusionExpr::localType(out) + " res" + R +
                        " = " + a.result + ";\n";
    for (auto [j, y] : llvm::enumerate(f.getYield()->getOperands()))
      if (y == out)
        store += "    out" + std::to_string(j) +
                 "[c_] = " + FusionExpr::toStorage(y, "res" + R) + ";\n";
    body += "  {\n  " + a.type + " " + A + " = " + a.ident +
            ";\n"
            "  if (c_ < $K)\n#pragma unroll 8\n"
            "    for (int b_ = ty; b_ < $G; b_ += 8)\n"
            "      " +
            A + " = " + a.op + "(" + A + ", ${NAME}_c" + A +
            "[b_ * $K + c_]);\n"
            "  " +
            S + "[ty][tx] = " + A +
            ";\n"
            "  __syncthreads();\n"
            "  if (ty == 0 && c_ < $K) {\n"
            "    for (int y_ = 1; y_ < 8; ++y_)\n"
            "      " +
            A + " = " + a.op + "(" + A + ", " + S + "[y_][tx]);\n" + store +
            "  }\n  __syncthreads(); // before the buffer's next use\n"
            "  }\n";
  }
  return "extern \"C\" __global__ void __launch_bounds__(256) ${NAME}_cols(" +
         params +
         ") {\n"
         "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n"
         "  const int c_ = blockIdx.x * 32 + tx;\n" +
         sh.decls("[8][33]") + body + "}\n";
}

/// One emission of a row_chain kernel: the kernel, and the inputs each
/// pass over the row (the stages', then the stores') reads at the element,
/// for choosing the inputs to keep in registers.
struct ChainEmission {
  KernelSource ks;
  std::vector<std::set<unsigned>> passReads;
  int64_t perLane = 0; ///< elements of a row a lane takes
  bool unrolled = false;
};

/// The row_chain kernel of `f`, the inputs numbered in `cached` loaded
/// into registers once per row (unrolled passes only: arrays indexed by
/// the unrolled j_ are registers) and read from there by every pass, and
/// the rows of those in `prefetched` asked into L2 a row ahead.
ChainEmission emitChain(ops::FusionOp f, const ops::RowChain *rc,
                        const std::string &name,
                        const std::vector<unsigned> &cached,
                        const std::vector<unsigned> &prefetched) {
  int64_t m = rc->rows, k = rc->cols;
  ChainEmission em;

  KernelSource ks;
  ks.name = name;
  PreludeNeeds needs;
  needs.reduce = true;
  FusionExpr x(f, needs);
  x.splitIndex("off", "o", "kk", k);    // off = base + kk, base = o * K
  RowMapping rowMap = rowMapping(m, k); // the reduce kernels' mapping
  ks.blockX = rowMap.block;
  ks.gridX = rowMap.grid;
  bool columns = !rc->columns.empty();
  // A lane's elements of its row: kk = lane + j * NTH for j < NJ, the
  // same columns every row. With few enough, each pass over the row is
  // unrolled, so a lane's loads are all in flight at once (rather than one
  // DRAM latency per element) and its column accumulators are registers.
  int64_t nth = rowMap.perWarp ? 32 : rowMap.block,
          perLane = (k + nth - 1) / nth;
  // Three blocks an SM where the cache leaves a thread enough registers.
  int64_t cachedRegs = static_cast<int64_t>(cached.size()) * perLane;
  bool threeAnSM =
      columns && cachedRegs > 0 && cachedRegs <= kChainCachedForThree;
  if (columns) // every block adds a partial per column: fewer blocks
    ks.gridX = std::min<int64_t>(ks.gridX, threeAnSM ? kChainCachedColumnBlocks
                                                     : kChainColumnBlocks);
  std::string nj = std::to_string(perLane);
  bool unrolled = perLane <= kChainUnrollMax;
  em.perLane = perLane;
  em.unrolled = unrolled;
  // The cached inputs: rc<n>_[j_] holds in<n> at the lane's j_-th element,
  // bound at the start of every pass's scope.
  mlir::Block &blk = f.getBlock();
  auto bindCached = [&] {
    for (unsigned n : cached)
      x.bind(blk.getArgument(n), "off", "rc" + std::to_string(n) + "_[j_]");
  };
  auto rowPass = [&](const std::string &inner) {
    em.passReads.push_back(x.takeArgReads("off"));
    std::string head =
        unrolled ? "#pragma unroll\n    for (int j_ = 0; j_ < " + nj +
                       "; ++j_) {\n"
                       "      const $I kk = $TID + j_ * $NTH;\n"
                       "      if (!live_ || kk >= $K)\n"
                       "        continue;\n"
                 : "    for ($I kk = $TID; live_ && kk < $K; kk += $NTH) {\n";
    return head + "      const long long off = base + kk;\n" + inner +
           "    }\n";
  };
  std::string params = paramList(f, ks, needs, /*restrict=*/true);
  std::string I = idxType(std::max(m, k) + 1);
  std::vector<std::pair<std::string, std::string>> vars = rowMap.vars(I, m);
  vars.insert(vars.end(), {{"I", I}, {"K", std::to_string(k)}});

  std::string shared, body;
  if (!cached.empty()) { // one load of each cached input per row
    std::string decls, loads;
    for (unsigned n : cached) {
      mlir::Value a = blk.getArgument(n);
      needs.add(elemOf(a.getType()));
      std::string R = "rc" + std::to_string(n) + "_",
                  T = FusionExpr::localType(a);
      decls += "    " + T + " " + R + "[" + nj + "];\n";
      loads +=
          "      " + R + "[j_] = live_ && kk < $K ? " +
          FusionExpr::toLocal(a, "in" + std::to_string(n) + "[base + kk]") +
          " : (" + T + ")0;\n";
    }
    body += "    // the row's elements of the inputs every pass reads\n" +
            decls + "#pragma unroll\n    for (int j_ = 0; j_ < " + nj +
            "; ++j_) {\n      const $I kk = $TID + j_ * $NTH;\n" + loads +
            "    }\n";
  }
  // Inputs of one value a row (a saved mean or rstd), read through a
  // broadcast across the row: loaded once a row, not at every element.
  for (auto [n, a] : llvm::enumerate(blk.getArguments())) {
    auto at = mlir::dyn_cast<mlir::RankedTensorType>(a.getType());
    if (!at || !at.hasStaticShape() || at.getNumElements() != m ||
        at.getRank() > rc->lead || a.use_empty())
      continue;
    bool perRow = llvm::all_of(a.getUsers(), [&](mlir::Operation *u) {
      auto bc = mlir::dyn_cast<ops::BroadcastInDimOp>(u);
      if (!bc || bc.getType().getRank() != static_cast<int64_t>(
                                               rc->domain.size()))
        return false;
      // a's dims onto the result's leading (row) dims, in order, the
      // result's row dims those of the chain
      llvm::ArrayRef<int64_t> dims = bc.getBroadcastDimensions();
      for (auto [i, d] : llvm::enumerate(dims))
        if (d != static_cast<int64_t>(i) + rc->lead - at.getRank())
          return false;
      return bc.getType().getShape() == llvm::ArrayRef<int64_t>(rc->domain);
    });
    if (!perRow)
      continue;
    needs.add(elemOf(a.getType()));
    std::string P = "pr" + std::to_string(n) + "_";
    body += "    const " + FusionExpr::localType(a) + " " + P + " = " +
            FusionExpr::toLocal(a, "in" + std::to_string(n) + "[o]") +
            "; // a row's value\n";
    for (mlir::Operation *u : a.getUsers())
      x.bindUniform(u->getResult(0), P);
  }
  unsigned r = 0; // accumulators numbered across stages
  for (auto [s, roots] : llvm::enumerate(rc->stages)) {
    std::vector<Acc> accs;
    for (mlir::Operation *root : roots)
      accs.push_back(accumulatorOf(root, k, r + accs.size()));
    // The pass: prologues at the element read, named before use.
    bindCached();
    std::vector<std::string> locals;
    for (const Acc &a : accs)
      locals.push_back(x.valueAt(a.root->getOperand(0), "off"));
    std::string pass = x.takeCode("      ");
    x.resetScope();
    body += "    // stage " + std::to_string(s) + "\n";
    for (size_t j = 0; j < accs.size(); ++j) {
      std::string R = std::to_string(r + j);
      shared += "  __shared__ " + accs[j].type + " sh" + R +
                "[32];\n  (void)sh" + R + ";\n";
      body +=
          "    " + accs[j].type + " acc" + R + " = " + accs[j].ident + ";\n";
      pass += "      acc" + R + " = " + accs[j].op + "(acc" + R + ", " +
              accs[j].load(locals[j]) + ");\n";
    }
    body += rowPass(pass);
    for (size_t j = 0; j < accs.size(); ++j) {
      std::string R = std::to_string(r + j);
      mlir::Value out = accs[j].root->getResult(0);
      body += "    acc" + R + " = rowReduce<$PW>(acc" + R + ", " + accs[j].op +
              ", (" + accs[j].type + ")(" + accs[j].ident + "), sh" + R +
              ");\n    const " + FusionExpr::localType(out) + " res" + R +
              " = " + accs[j].result + ";\n";
      x.bindUniform(out, "res" + R);
    }
    r += accs.size();
    // The per-row values this stage makes known, once per row.
    for (auto [v, stage] : rc->rowOps)
      if (stage == s)
        x.bindUniform(v, x.valueAt(v, "o"));
    body += x.takeCode("    ");
    x.resetScope();
  }

  // The stores: per-element results by every lane, per-row ones by the
  // row's lead thread; the column reductions accumulate in the same pass.
  std::vector<mlir::Value> rowYields, skip;
  for (mlir::Value y : f.getYield()->getOperands())
    if (rc->rowLevel.contains(y))
      rowYields.push_back(y);
  skip = rowYields;
  std::vector<Acc> cols;
  std::vector<std::string> colLocals;
  bindCached();
  for (mlir::Operation *c : rc->columns) {
    cols.push_back(accumulatorOf(c, m, r + cols.size()));
    colLocals.push_back(x.valueAt(c->getOperand(0), "off"));
    skip.push_back(c->getResult(0));
  }
  std::string domainStore = storeYields(f, x, "off", skip);
  x.resetScope();
  for (auto [j, a] : llvm::enumerate(cols)) {
    std::string C = "c" + accName(a) + "_[cw_ + kk]";
    domainStore +=
        C + " = " + a.op + "(" + C + ", " + a.load(colLocals[j]) + ");\n";
  }
  if (columns || rowYields.size() < f.getNumResults())
    body += rowPass(indent(domainStore, "      "));
  if (!rowYields.empty()) {
    std::string rowStore;
    for (auto [j, y] : llvm::enumerate(f.getYield()->getOperands()))
      if (llvm::is_contained(rowYields, y)) {
        std::string local = x.valueAt(y, "o");
        rowStore += "out" + std::to_string(j) +
                    "[o] = " + x.storageOf(y, local) + ";\n";
      }
    body += "    if ($LEAD) {\n" + x.takeCode("      ") +
            indent(rowStore, "      ") + "    }\n";
    x.resetScope();
  }
  x.resetUniform();
  // A warp past the last row (live_ false) takes row 0's index: it reads
  // no element (its passes are empty, its reductions give the identity),
  // computes per-row ops from those and row 0's inputs, and stores
  // nothing; every index it forms stays in bounds.
  std::string head = "$ROWS_FOR    const $I o = live_ ? row : ($I)0;\n"
                     "    const long long base = (long long)o * $K;\n"
                     "    (void)base;\n";
  std::string colInit, colEnd, globals, colKernel;
  if (columns) {
    vars.insert(vars.end(),
                {{"NJ", nj}, {"G", std::to_string(ks.gridX)}, {"NAME", name}});
    // C7 keeps column reductions to rows a warp takes: the lanes of every
    // warp hold the same columns (columnPartials).
    static_assert(ops::kRowChainColumnMaxCols == kWarpRowMax,
                  "C7's column-reduction rows are a warp's rows");
    int64_t warps = ks.blockX / 32;
    colInit = columnArrays(cols, warps, k, ks.sharedBytes);
    colEnd = columnPartials(cols, warps);
    for (const Acc &a : cols)
      globals +=
          "__device__ " + a.type + " ${NAME}_c" + accName(a) + "[$G * $K];\n";
    colKernel = columnTotals(f, cols, params);
    ks.then.push_back({"_cols", (k + 31) / 32, 256, 0});
  }
  // The prefetched inputs' rows: a thread's first row before the row
  // loop, and each next one at the end of the row before it, so a row's
  // lines are asked a whole row ahead of the pass that reads them. (Asked
  // at the row's start, ptxas issued the CCTL only once the row's own
  // loads had come back, just before the reductions: SASS of GPT-2's
  // kernel.) Lines l = 0 .. L of the row's bytes from its first, the last
  // one clamped to its last byte: every 128-byte line it touches, aligned
  // or not (one asked twice when aligned).
  std::string firstRow = rowMap.perWarp
                             ? "(long long)blockIdx.x * " +
                                   std::to_string(kWarpRowsPerBlock) +
                                   " + (threadIdx.x >> 5)"
                             : "(long long)blockIdx.x";
  std::string rowStep = rowMap.perWarp
                            ? "(long long)gridDim.x * " +
                                  std::to_string(kWarpRowsPerBlock)
                            : "(long long)gridDim.x";
  auto prefetchRows = [&](const std::string &rowExpr,
                          const std::string &ind) {
    std::string code;
    for (unsigned n : prefetched) {
      std::string N = std::to_string(n);
      int64_t bytes = k * elemBytes(elemOf(blk.getArgument(n).getType()));
      code += ind + "if (pr_ < " + std::to_string(m) + ") { // in" + N +
              "'s row pr_ into L2\n" + ind +
              "  const char *p_ = reinterpret_cast<const char *>(in" + N +
              " + pr_ * " + std::to_string(k) + ");\n" + ind +
              "  for (int l_ = $TID; l_ <= " +
              std::to_string((bytes + 127) / 128) + "; l_ += $NTH)\n" + ind +
              "    stepPrefetchL2(p_ + min(l_ * 128, " +
              std::to_string(bytes - 1) + "));\n" + ind + "}\n";
    }
    return code.empty() ? code
                        : ind + "{\n" + ind + "  const long long pr_ = " +
                              rowExpr + ";\n" + indent(code, "  ") + ind +
                              "}\n";
  };
  std::string before = prefetchRows(firstRow, "  ");
  std::string after = prefetchRows("(long long)row + " + rowStep, "    ");
  int minBlocks = threeAnSM ? kChainCachedBlocksPerSM : 0;
  ks.source = prelude(needs) + subst(globals, vars) +
              signature(ks, params, minBlocks) + " {\n" + x.takeHoisted("  ") +
              shared +
              subst(colInit + before + head + body + after + "  }\n" + colEnd,
                    vars) +
              "}\n" + subst(colKernel, vars);
  em.ks = std::move(ks);
  return em;
}

/// The inputs worth a register copy of the lane's row elements: those that
/// two or more passes read at the element, most-read first, while their
/// elements fit kChainCacheMax registers a thread. Unrolled passes only.
std::vector<unsigned> inputsToCache(ops::FusionOp f, const ChainEmission &em) {
  if (!em.unrolled || em.perLane == 0)
    return {};
  std::vector<std::pair<int, unsigned>> reads; // (-passes, input)
  for (unsigned n = 0; n < f.getBlock().getNumArguments(); ++n) {
    int passes = 0;
    for (const std::set<unsigned> &p : em.passReads)
      passes += p.count(n);
    if (passes >= 2)
      reads.push_back({-passes, n});
  }
  std::sort(reads.begin(), reads.end());
  std::vector<unsigned> cached;
  for (auto [negPasses, n] : reads)
    if (int64_t(cached.size() + 1) * em.perLane <= kChainCacheMax)
      cached.push_back(n);
  std::sort(cached.begin(), cached.end());
  return cached;
}

/// The inputs whose rows are worth an L2 prefetch at the row's start:
/// those read at the element by a later pass but not by the first, nor
/// cached (their loads would otherwise wait a second DRAM latency after
/// the stages' reductions). Unrolled passes only: a row of at most
/// kChainUnrollMax elements a lane, so the rows in flight (a warp's or
/// block's each) stay a small part of L2.
std::vector<unsigned> inputsToPrefetch(ops::FusionOp f, const ChainEmission &em,
                                       const std::vector<unsigned> &cached) {
  if (!em.unrolled || em.perLane == 0 || em.passReads.size() < 2)
    return {};
  std::vector<unsigned> late;
  for (unsigned n = 0; n < f.getBlock().getNumArguments(); ++n) {
    if (em.passReads.front().count(n) || llvm::is_contained(cached, n))
      continue;
    for (size_t p = 1; p < em.passReads.size(); ++p)
      if (em.passReads[p].count(n)) {
        late.push_back(n);
        break;
      }
  }
  return late;
}

} // namespace

KernelSource emitRowChainFusion(ops::FusionOp f, const std::string &name) {
  std::string why;
  std::optional<ops::RowChain> rc = ops::analyzeRowChain(f.getBlock(), why);
  if (!rc)
    throw rt::Error("codegen: a row_chain fusion whose body " + why);
  ChainEmission plain = emitChain(f, &*rc, name, {}, {});
  std::vector<unsigned> cached = inputsToCache(f, plain);
  std::vector<unsigned> prefetched = inputsToPrefetch(f, plain, cached);
  if (cached.empty() && prefetched.empty())
    return std::move(plain.ks);
  return emitChain(f, &*rc, name, cached, prefetched).ks;
}

} // namespace step::codegen::detail
