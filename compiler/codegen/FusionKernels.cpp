//===- FusionKernels.cpp - One kernel per loop or reduction step.fusion ---===//
//
// The body's arithmetic comes from FusionExpr (each op's own
// ElementwiseSpec), so a fused value is bit for bit the unfused one; what
// fusion removes is the memory traffic between the ops.
//  - loop: one grid-stride loop over the N elements of the domain, every
//    yielded value computed at flat index i and stored. Vectorized by 4
//    (Vec stores of the outputs) when N % 4 == 0 and the outputs and the
//    inputs read at the loop index have at most 4 bytes per element; then
//    inputs read at the loop index, and bias-like broadcasts (last dim
//    kept, a multiple of 4), are Vec loads, other broadcast reads (and a
//    pad's operand, at its clamped index) are scalar loads per lane.
//    Otherwise one element per iteration.
//  - reduction with reduce_sum/mean/max roots: the strategies and
//    accumulation orders of ReduceKernels.cpp (row, split, column, split
//    column), with one accumulator per sibling root in the same loop, the
//    prologue computed at the element being read, and the epilogue run at the
//    output index by the thread that stores it, with the roots' results
//    (rounded to their type) bound as its inputs. A root's result is thus
//    bitwise the unfused kernel's for the same launch. Results of the
//    operands' size are prologue values (step-fuse-loop-reductions: a
//    loop's values that later ops also read), stored at the element being
//    read: every strategy reads each element exactly once.
//  - reduction with a row-op root: FusionRowKernels.cpp.
// Cost: one kernel, each input element read once per use (a prologue value
// used twice is computed once per element); broadcast reads cost O(rank)
// integer divisions by constants per element.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/FusionKernels.h"

#include "compiler/codegen/Emitters.h"
#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <set>

namespace step::codegen::detail {

namespace ops = mlir::step;

/// The yielded values, in result order.
static std::vector<mlir::Value> yieldsOf(ops::FusionOp f) {
  auto range = f.getYield()->getOperands();
  return std::vector<mlir::Value>(range.begin(), range.end());
}

std::string storeYields(ops::FusionOp f, FusionExpr &x, const std::string &idx,
                        llvm::ArrayRef<mlir::Value> skip) {
  std::vector<mlir::Value> ys = yieldsOf(f);
  std::vector<std::string> locals;
  for (mlir::Value y : ys)
    locals.push_back(llvm::is_contained(skip, y) ? "" : x.valueAt(y, idx));
  std::string s = x.takeCode("");
  for (size_t j = 0; j < ys.size(); ++j)
    if (!llvm::is_contained(skip, ys[j]))
      s += "out" + std::to_string(j) + "[" + idx +
           "] = " + x.storageOf(ys[j], locals[j]) + ";\n";
  return s;
}

bool computedFrom(mlir::Value v, llvm::function_ref<bool(mlir::Value)> of,
                  llvm::function_ref<bool(mlir::Value)> stop) {
  llvm::SmallVector<mlir::Value> work{v};
  llvm::DenseSet<mlir::Value> seen;
  while (!work.empty()) {
    mlir::Value w = work.pop_back_val();
    if (of(w))
      return true;
    if (stop && stop(w))
      continue;
    if (mlir::Operation *d = w.getDefiningOp(); d && seen.insert(w).second)
      work.append(d->operand_begin(), d->operand_end());
  }
  return false;
}

//===----------------------------------------------------------------------===//
// loop
//===----------------------------------------------------------------------===//

namespace {
/// How a vectorized loop reads its inputs: block arguments read at the
/// loop index itself (one Vec load per 4 elements), and broadcasts of a
/// block argument whose 4 lanes read 4 consecutive, aligned elements (the
/// last dim is kept and a multiple of 4: a bias); every other read is a
/// scalar load per lane at the index FusionExpr computes.
struct LoopReads {
  std::set<unsigned> identity;
  std::vector<ops::BroadcastInDimOp> contiguous;
};
} // namespace

/// The source strides of a broadcast: for each result dim, the operand's
/// stride (0 where the dim is new or repeats a size-1 dim).
static std::vector<int64_t> broadcastStrides(ops::BroadcastInDimOp b) {
  std::vector<int64_t> in = shapeOf(b.getOperand());
  std::vector<int64_t> inStrides = stridesOf(in);
  std::vector<int64_t> src(shapeOf(b.getResult()).size(), 0);
  auto dims = b.getBroadcastDimensions();
  for (size_t k = 0; k < dims.size(); ++k)
    if (in[k] != 1)
      src[dims[k]] = inStrides[k];
  return src;
}

/// What the values `from` (of one shape) read at their own flat index.
static LoopReads loopReads(std::vector<mlir::Value> from) {
  LoopReads reads;
  std::set<void *> seen;
  std::vector<mlir::Value> work = std::move(from);
  while (!work.empty()) {
    mlir::Value v = work.back();
    work.pop_back();
    if (numelOf(v) == 1 || !seen.insert(v.getAsOpaquePointer()).second)
      continue; // one element: hoisted, the same for every index
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
      reads.identity.insert(arg.getArgNumber());
      continue;
    }
    mlir::Operation *op = v.getDefiningOp();
    if (mlir::isa<ops::PadOp>(op))
      continue; // its operand is read elsewhere than the loop index
    if (auto b = mlir::dyn_cast<ops::BroadcastInDimOp>(op)) {
      mlir::Value in = b.getOperand();
      // Strictly increasing dims: equal sizes means only size-1 dims added.
      if (numelOf(in) == 1 || numelOf(in) != numelOf(v)) {
        std::vector<int64_t> out = shapeOf(v);
        if (mlir::isa<mlir::BlockArgument>(in) && numelOf(in) > 1 &&
            out.back() % 4 == 0 && broadcastStrides(b).back() == 1 &&
            elemBytes(elemOf(in.getType())) <= 4)
          reads.contiguous.push_back(b);
        continue; // scalar reads per lane below it
      }
    }
    for (mlir::Value operand : op->getOperands())
      work.push_back(operand);
  }
  return reads;
}

static KernelSource emitLoopFusion(ops::FusionOp f, const std::string &name) {
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  PreludeNeeds needs;
  std::string params = paramList(f, ks, needs, /*restrict=*/false);
  std::vector<mlir::Value> ys = yieldsOf(f);
  if (ys.empty())
    throw rt::Error("codegen: a loop fusion without results");
  int64_t n = numelOf(ys[0]);
  for (mlir::Value y : ys)
    if (numelOf(y) != n)
      throw rt::Error("codegen: loop fusion results of different sizes");

  LoopReads reads = loopReads(ys);
  mlir::Block &block = f.getBlock();
  bool vec = n >= 4 && n % 4 == 0;
  for (unsigned k : reads.identity)
    vec &= elemBytes(elemOf(block.getArgument(k).getType())) <= 4;
  for (mlir::Value y : ys)
    vec &= elemBytes(elemOf(y.getType())) <= 4;
  needs.vec |= vec;

  FusionExpr x(f, needs);
  int64_t work = vec ? n / 4 : n;
  ks.gridX = gridFor(work, ks.blockX);
  std::string I = idxType(n), loop;
  loop = "  for (" + I + " v = (" + I + ")blockIdx.x * blockDim.x + "
         "threadIdx.x; v < " + std::to_string(work) + "; v += (" + I +
         ")gridDim.x * blockDim.x) {\n";
  if (vec) {
    auto vecLoad = [&](mlir::Value arg, const std::string &var,
                       const std::string &at) {
      std::string T = cType(elemOf(arg.getType()));
      return "    const Vec<" + T + ", 4> " + var +
             " = reinterpret_cast<const Vec<" + T + ", 4> *>(in" +
             std::to_string(mlir::cast<mlir::BlockArgument>(arg)
                                .getArgNumber()) +
             ")[" + at + "];\n";
    };
    for (unsigned k : reads.identity) {
      std::string K = std::to_string(k);
      loop += vecLoad(block.getArgument(k), "x" + K, "v");
      x.bindStorage(block.getArgument(k), "i", "x" + K + ".v[e]");
    }
    for (size_t c = 0; c < reads.contiguous.size(); ++c) {
      // Lane e reads operand element b + e, b a multiple of 4.
      ops::BroadcastInDimOp b = reads.contiguous[c];
      std::string C = std::to_string(c);
      loop += "    long long b" + C + " = 0;\n    { long long t = (long "
              "long)v * 4;\n" +
              indent(decompose("t", "b" + C, shapeOf(b.getResult()),
                               broadcastStrides(b)),
                     "  ") +
              "    }\n" + vecLoad(b.getOperand(), "xb" + C, "b" + C + " / 4");
      x.bindStorage(b.getResult(), "i", "xb" + C + ".v[e]");
    }
    for (size_t j = 0; j < ys.size(); ++j)
      loop += std::string("    Vec<") + cType(elemOf(ys[j].getType())) +
              ", 4> y" + std::to_string(j) + ";\n";
    loop += "#pragma unroll\n    for (int e = 0; e < 4; ++e) {\n"
            "      const " + I + " i = v * 4 + e;\n";
    std::vector<std::string> locals;
    for (mlir::Value y : ys)
      locals.push_back(x.valueAt(y, "i"));
    loop += x.takeCode("      ");
    for (size_t j = 0; j < ys.size(); ++j)
      loop += "      y" + std::to_string(j) +
              ".v[e] = " + x.storageOf(ys[j], locals[j]) + ";\n";
    loop += "    }\n";
    for (size_t j = 0; j < ys.size(); ++j) {
      std::string J = std::to_string(j);
      loop += std::string("    reinterpret_cast<Vec<") +
              cType(elemOf(ys[j].getType())) + ", 4> *>(out" + J +
              ")[v] = y" + J + ";\n";
    }
  } else {
    loop += "    const " + I + " i = v;\n" +
            indent(storeYields(f, x, "i"), "    ");
  }
  loop += "  }\n";
  ks.source = prelude(needs) + signature(ks, params) + " {\n" +
              x.takeHoisted("  ") + loop + "}\n";
  return ks;
}

//===----------------------------------------------------------------------===//
// reduction: reduce_sum, reduce_mean, reduce_max roots
//===----------------------------------------------------------------------===//

Acc accumulatorOf(mlir::Operation *root, int64_t k, unsigned r) {
  Acc a;
  a.root = root;
  a.index = r;
  bool max = mlir::isa<ops::ReduceMaxOp>(root);
  bool mean = mlir::isa<ops::ReduceMeanOp>(root);
  Elem e = elemOf(root->getOperand(0).getType());
  if (isFloat(e)) {
    a.type = "float";
    a.ident = max ? litF(-INFINITY) : "0.0f";
    a.op = max ? "MaxNaNOp()" : "SumOp()";
  } else if (e == Elem::I1) { // max of i1 is any()
    a.type = "int", a.ident = "0", a.op = "MaxOp()", a.cast = "(int)";
  } else if (!max) { // sums wrap, as the elementwise add
    a.type = e == Elem::I64 ? "unsigned long long" : "unsigned int";
    a.ident = "0", a.op = "SumOp()", a.cast = "(" + a.type + ")";
  } else {
    a.type = cType(e), a.op = "MaxOp()";
    a.ident = e == Elem::I64 ? litI(INT64_MIN) : "(-2147483647 - 1)";
  }
  std::string acc = "acc" + std::to_string(r);
  if (mean)
    acc += " / " + litF(static_cast<double>(k));
  mlir::Value out = root->getResult(0);
  Elem outE = elemOf(out.getType());
  std::string store = isFloat(outE) ? fromF(outE, acc)
                                    : "(" + std::string(cType(outE)) + ")" +
                                          acc;
  a.result = FusionExpr::toLocal(out, store);
  return a;
}

/// The epilogue at output index `o` by one thread: the roots' results
/// bound, every yield but those of `skip` (stored per element) computed
/// and stored.
static std::string reduceEpilogue(ops::FusionOp f, FusionExpr &x,
                                  const std::vector<Acc> &accs,
                                  llvm::ArrayRef<mlir::Value> skip) {
  std::string s;
  for (size_t r = 0; r < accs.size(); ++r) {
    mlir::Value out = accs[r].root->getResult(0);
    std::string R = "res" + std::to_string(r);
    s += "const " + FusionExpr::localType(out) + " " + R + " = " +
         accs[r].result + ";\n";
    x.bind(out, "o", R);
  }
  s += storeYields(f, x, "o", skip);
  x.resetScope();
  return s;
}

static KernelSource emitReduceFusion(ops::FusionOp f, const std::string &name,
                                     const std::vector<mlir::Operation *> &roots) {
  mlir::Operation *first = roots[0];
  std::vector<int64_t> in = shapeOf(first->getOperand(0));
  for (mlir::Operation *root : roots)
    if (shapeOf(root->getOperand(0)) != in ||
        ops::reducedDims(root) != ops::reducedDims(first))
      throw rt::Error("codegen: sibling reductions of a fusion must read "
                      "one shape over the same dims");
  std::vector<int64_t> strides = stridesOf(in);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t d : ops::reducedDims(first))
    reduced[d] = true;
  DimList kept, red;
  for (size_t d = 0; d < in.size(); ++d)
    (reduced[d] ? red : kept).add(in[d], strides[d]);
  int64_t m = kept.count(), k = red.count();
  // Results of the operands' size (k > 1) are prologue values, stored
  // where the reduction reads each element (once, in every strategy).
  std::vector<mlir::Value> perElement;
  std::set<void *> rootResults;
  for (mlir::Operation *root : roots)
    rootResults.insert(root->getResult(0).getAsOpaquePointer());
  for (mlir::Value y : yieldsOf(f)) {
    if (numelOf(y) == m)
      continue;
    if (numelOf(y) != m * k)
      throw rt::Error("codegen: a reduction fusion result whose size is "
                      "neither the reductions' output size nor their "
                      "operand's");
    if (computedFrom(y, [&](mlir::Value w) {
          return rootResults.count(w.getAsOpaquePointer()) > 0;
        }))
      throw rt::Error("codegen: a reduction fusion result of the "
                      "operand's size computed from a reduction");
    if (!llvm::is_contained(perElement, y))
      perElement.push_back(y);
  }

  KernelSource ks;
  ks.name = name;
  PreludeNeeds needs;
  needs.reduce = true;
  FusionExpr x(f, needs);
  std::vector<Acc> accs;
  for (size_t r = 0; r < roots.size(); ++r)
    accs.push_back(accumulatorOf(roots[r], k, r));
  bool innermostReduced = !in.empty() && reduced.back() && in.back() != 1;
  bool copy = k == 1; // nothing to combine: the operands' values
  bool split = !copy && innermostReduced && m <= 64 && k >= 65536;
  int64_t splits = split ? std::min<int64_t>(256, k / 16384) : 1;
  ColumnSplit col = copy || innermostReduced
                        ? ColumnSplit()
                        : columnSplit(m, k, kept.innerRun());
  RowMapping rowMap = rowMapping(m, k);
  ks.blockX = copy ? 256
              : split ? blockForRow(k / splits)
              : innermostReduced ? rowMap.block
                                 : 256;
  std::string params = paramList(f, ks, needs, /*restrict=*/true);
  std::string I = idxType(std::max(m, k) + 1);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"I", I},
      {"M", std::to_string(m)},
      {"K", std::to_string(k)},
      {"NAME", name},
      {"S", std::to_string(splits)},
      {"CHUNK", std::to_string((k + splits - 1) / splits)},
      {"OFFO", decompose("r", "base", kept.dims, kept.strides)},
      {"OFFK", decompose("r", "off", red.dims, red.strides)}};
  // Per-root pieces of the templates below.
  auto each = [&](const std::string &tmpl) {
    std::string s;
    for (size_t r = 0; r < accs.size(); ++r) {
      auto all = vars;
      all.insert(all.end(), {{"R", std::to_string(r)}, {"ACC", accs[r].type},
                             {"IDENT", accs[r].ident}, {"OP", accs[r].op}});
      s += subst(tmpl, all);
    }
    return s;
  };
  // The prologue at the element read (flat index `off` of the operand).
  // Where a per-element result is stored: out<j>[off], or lane e of the
  // vector y<j> that the split column kernel stores per row.
  std::set<size_t> vecOuts;
  auto accumulate = [&](const std::string &ind) {
    std::vector<std::string> locals, stored;
    for (const Acc &a : accs)
      locals.push_back(x.valueAt(a.root->getOperand(0), "off"));
    for (mlir::Value y : perElement)
      stored.push_back(x.valueAt(y, "off"));
    std::string s = x.takeCode(ind);
    x.resetScope();
    for (size_t r = 0; r < accs.size(); ++r) {
      std::string R = std::to_string(r);
      s += ind + "acc" + R + " = " + accs[r].op + "(acc" + R + ", " +
           accs[r].load(locals[r]) + ");\n";
    }
    for (auto [j, y] : llvm::enumerate(yieldsOf(f)))
      if (auto at = llvm::find(perElement, y); at != perElement.end())
        s += ind +
             (vecOuts.count(j) ? "y" + std::to_string(j) + ".v[e]"
                               : "out" + std::to_string(j) + "[off]") +
             " = " +
             x.storageOf(y,
                         stored[static_cast<size_t>(at - perElement.begin())]) +
             ";\n";
    return s;
  };
  // Prologue then epilogue, named before use: the order of evaluation of
  // one expression is unspecified, and the locals' numbers must not be.
  std::string ind = !innermostReduced ? "        " : split ? "    " : "      ";
  // The split column kernel with 4 outputs a thread: the inputs read at
  // the element's own index, and the per-element results, as vectors.
  ColumnCode colCode;
  if (!copy && col.chunks > 1 && col.vec > 1) {
    std::string V = std::to_string(col.vec);
    std::vector<mlir::Value> from = perElement;
    for (const Acc &a : accs)
      from.push_back(a.root->getOperand(0));
    for (unsigned a : loopReads(from).identity) {
      mlir::Value arg = f.getBlock().getArgument(a);
      Elem e = elemOf(arg.getType());
      if (elemBytes(e) > 4)
        continue; // read per element
      std::string vt = "Vec<" + std::string(cType(e)) + ", " + V + ">",
                  A = std::to_string(a);
      colCode.vecLoads.push_back({"x" + A, vt,
                                  "reinterpret_cast<const " + vt + " *>(in" +
                                      A + ")[off4 / " + V + "]"});
      x.bindStorage(arg, "off", "x" + A + ".v[e]");
      needs.vec = true;
    }
    for (auto [j, y] : llvm::enumerate(yieldsOf(f))) {
      Elem e = elemOf(y.getType());
      if (!llvm::is_contained(perElement, y) || elemBytes(e) > 4 ||
          !vecOuts.insert(j).second)
        continue;
      std::string vt = "Vec<" + std::string(cType(e)) + ", " + V + ">",
                  J = std::to_string(j);
      colCode.rowLoads += "      " + vt + " y" + J + ";\n";
      colCode.rowStores += "      reinterpret_cast<" + vt + " *>(out" + J +
                           ")[off4 / " + V + "] = y" + J + ";\n";
      needs.vec = true;
    }
  }
  std::string accumulateCode = copy ? "" : accumulate(ind);
  std::string epilogueCode = copy ? "" : reduceEpilogue(f, x, accs, perElement);
  std::string body, globals; // globals: module-scope state of the split
  if (copy) {
    ks.gridX = gridFor(m, ks.blockX);
    body = "  for ($I o = blockIdx.x * blockDim.x + threadIdx.x; o < $M; "
           "o += gridDim.x * blockDim.x) {\n";
    for (const Acc &a : accs) // reduce over size-1 dims: the same values
      x.bind(a.root->getResult(0), "o",
             x.valueAt(a.root->getOperand(0), "o"));
    body += indent(storeYields(f, x, "o"), "    ") + "  }\n";
    x.resetScope();
  } else if (split) {
    ks.gridX = m * splits;
    body = each("  __shared__ $ACC sh$R[32];\n") + R"(  __shared__ bool amLast;
  const $I o = blockIdx.x / $S, s = blockIdx.x % $S;
  long long base = 0;
  { $I r = o;
$OFFO    (void)r;
  }
)" + each("  $ACC acc$R = $IDENT;\n") + R"(  const $I end = (s + 1) * $CHUNK < $K ? (s + 1) * $CHUNK : $K;
  for ($I kk = s * $CHUNK + threadIdx.x; kk < end; kk += blockDim.x) {
    long long off = base;
    $I r = kk;
$OFFK    (void)r;
)" + accumulateCode + "  }\n" +
           each("  acc$R = blockReduce(acc$R, $OP, ($ACC)($IDENT), sh$R);\n") +
           "  if (threadIdx.x == 0) {\n" +
           each("    ${NAME}_partial$R[o * $S + s] = acc$R;\n") + R"(    __threadfence(); // the partials are visible before the ticket
    amLast = atomicAdd(&${NAME}_ticket[o], 1u) == $S - 1;
  }
  __syncthreads();
  if (amLast) { // combine the partials in a fixed order
    __threadfence();
)" + each("    acc$R = threadIdx.x < $S ? ((volatile $ACC *)${NAME}_partial$R)"
          "[o * $S + threadIdx.x] : $IDENT;\n    acc$R = blockReduce(acc$R, "
          "$OP, ($ACC)($IDENT), sh$R);\n") +
           "    if (threadIdx.x == 0) {\n" +
           indent(epilogueCode, "      ") +
           "      ${NAME}_ticket[o] = 0; // ready for the next launch\n"
           "    }\n  }\n";
    globals = each("__device__ $ACC ${NAME}_partial$R[$M * $S];\n") +
              "__device__ unsigned int ${NAME}_ticket[$M];\n";
  } else if (innermostReduced) {
    ks.gridX = rowMap.grid;
    for (auto &v : rowMap.vars(I, m))
      vars.push_back(v);
    body = each("  __shared__ $ACC sh$R[32];\n  (void)sh$R;\n") +
           R"($ROWS_FOR    const $I o = row;
    long long base = 0;
    { $I r = o;
$OFFO      (void)r;
    }
)" + each("    $ACC acc$R = $IDENT;\n") + R"(    for ($I kk = $TID; live_ && kk < $K; kk += $NTH) {
      long long off = base;
      $I r = kk;
$OFFK      (void)r;
)" + accumulateCode + "    }\n" +
           each("    acc$R = rowReduce<$PW>(acc$R, $OP, ($ACC)($IDENT), "
                "sh$R);\n") +
           "    if ($LEAD) {\n" +
           indent(epilogueCode, "      ") + "    }\n  }\n";
  } else if (col.chunks > 1) {
    // The split column kernel of ReduceKernels.cpp, one accumulator, one
    // partial array and one lane combination per root.
    ks.gridX = col.tiles * col.chunks;
    for (const Acc &a : accs)
      colCode.roots.push_back({a.type, a.ident, a.op});
    colCode.element = accumulateCode;
    colCode.epilogue = indent(epilogueCode, "        ");
    ColumnKernelText text =
        splitColumnKernel(colCode, col, m, k, kept, red, I, name);
    body = text.body;
    globals = text.globals;
  } else {
    ks.gridX = gridFor(m, 32);
    body = each("  __shared__ $ACC sh$R[8][33];\n") + R"(  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for ($I t = blockIdx.x; t < ($M + 31) / 32; t += gridDim.x) {
    const $I o = t * 32 + tx;
)" + each("    $ACC acc$R = $IDENT;\n") + R"(    if (o < $M) {
      long long base = 0;
      { $I r = o;
$OFFO        (void)r;
      }
      for ($I kk = ty; kk < $K; kk += 8) {
        long long off = base;
        $I r = kk;
$OFFK        (void)r;
)" + accumulateCode + "      }\n    }\n" +
           each("    sh$R[ty][tx] = acc$R;\n") +
           "    __syncthreads();\n    if (ty == 0) {\n"
           "      for (int y = 1; y < 8; ++y) {\n" +
           each("        acc$R = $OP(acc$R, sh$R[y][tx]);\n") +
           "      }\n      if (o < $M) {\n" +
           indent(epilogueCode, "        ") +
           "      }\n    }\n    __syncthreads();\n  }\n";
  }
  // The prelude last: the body's code decides what it needs.
  ks.source = prelude(needs) + subst(globals, vars) + signature(ks, params) +
              " {\n" + x.takeHoisted("  ") + subst(body, vars) + "}\n";
  return ks;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

KernelSource emitFusionKernel(ops::FusionOp f, const std::string &name) {
  llvm::StringRef kind = f.getKind();
  if (kind == ops::kLoopFusion)
    return emitLoopFusion(f, name);
  if (kind == ops::kRowChainFusion)
    return emitRowChainFusion(f, name);
  if (kind != ops::kReductionFusion)
    throw rt::Error("codegen: no fused kernel for a \"" + kind.str() +
                    "\" fusion here");
  std::vector<mlir::Operation *> reduces, rows;
  for (mlir::Operation &op : f.getBlock().without_terminator()) {
    ops::FusionRole role = ops::fusionRole(&op);
    if (role == ops::FusionRole::Reduce)
      reduces.push_back(&op);
    else if (role == ops::FusionRole::RowOp)
      rows.push_back(&op);
    else if (role != ops::FusionRole::Elementwise &&
             role != ops::FusionRole::View && !mlir::isa<ops::PadOp>(op))
      throw rt::Error("codegen: '" + op.getName().getStringRef().str() +
                      "' cannot be in a reduction fusion");
  }
  if (!reduces.empty() && rows.empty())
    return emitReduceFusion(f, name, reduces);
  if (reduces.empty() && rows.size() == 1)
    return emitRowOpFusion(f, name, rows[0]);
  // step-fuse-loss: a loss and its gradient, the gradient's kernel.
  if (reduces.empty() && rows.size() == 2 &&
      mlir::isa<ops::CrossEntropyOp>(rows[0]) &&
      mlir::isa<ops::CrossEntropyGradOp>(rows[1]))
    return emitRowOpFusion(f, name, rows[1], rows[0]);
  throw rt::Error("codegen: a reduction fusion needs reduce_* roots, "
                  "exactly one row-op root (softmax, log_softmax, "
                  "layer_norm, cross_entropy, cross_entropy_grad) or a "
                  "cross_entropy followed by its cross_entropy_grad");
}

} // namespace step::codegen::detail
