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
//    thread storing every per-row result.
// So each reduction's result is bitwise the one a reduction fusion (or a
// bare reduce kernel) computes for the same values, and every stored
// element is bitwise what the chain of loop and reduction kernels it
// replaces stores. Cost: one launch; the row is read once per stage and
// once for the stores (a warp's row of 768 f32 is 3 KB, so the passes
// after the first read L1/L2, not DRAM); per-element values a stage needs
// are recomputed in each pass that needs them (ALU work, no memory).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/FusionKernels.h"

#include "compiler/codegen/Emitters.h"
#include "dialects/step/Fusion.h"
#include "runtime/Tensor.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

KernelSource emitRowChainFusion(ops::FusionOp f, const std::string &name) {
  std::string why;
  std::optional<ops::RowChain> rc = ops::analyzeRowChain(f.getBlock(), why);
  if (!rc)
    throw rt::Error("codegen: a row_chain fusion whose body " + why);
  int64_t m = rc->rows, k = rc->cols;

  KernelSource ks;
  ks.name = name;
  PreludeNeeds needs;
  needs.reduce = true;
  FusionExpr x(f, needs);
  RowMapping rowMap = rowMapping(m, k); // the reduce kernels' mapping
  ks.blockX = rowMap.block;
  ks.gridX = rowMap.grid;
  std::string params = paramList(f, ks, needs, /*restrict=*/true);
  std::string I = idxType(std::max(m, k) + 1);
  std::vector<std::pair<std::string, std::string>> vars = rowMap.vars(I, m);
  vars.insert(vars.end(), {{"I", I}, {"K", std::to_string(k)}});

  std::string shared, body;
  unsigned r = 0; // accumulators numbered across stages
  for (auto [s, roots] : llvm::enumerate(rc->stages)) {
    std::vector<Acc> accs;
    for (mlir::Operation *root : roots)
      accs.push_back(accumulatorOf(root, k, r + accs.size()));
    // The pass: prologues at the element read, named before use.
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
    body += "    for ($I kk = $TID; live_ && kk < $K; kk += $NTH) {\n"
            "      const long long off = base + kk;\n" +
            pass + "    }\n";
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
  // row's lead thread.
  std::vector<mlir::Value> rowYields;
  for (mlir::Value y : f.getYield()->getOperands())
    if (rc->rowLevel.contains(y))
      rowYields.push_back(y);
  std::string domainStore = storeYields(f, x, "off", rowYields);
  x.resetScope();
  if (rowYields.size() < f.getNumResults())
    body += "    for ($I kk = $TID; live_ && kk < $K; kk += $NTH) {\n"
            "      const long long off = base + kk;\n" +
            indent(domainStore, "      ") + "    }\n";
  if (!rowYields.empty()) {
    std::string rowStore;
    for (auto [j, y] : llvm::enumerate(f.getYield()->getOperands()))
      if (llvm::is_contained(rowYields, y)) {
        std::string local = x.valueAt(y, "o");
        rowStore += "out" + std::to_string(j) +
                    "[o] = " + FusionExpr::toStorage(y, local) + ";\n";
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
  ks.source = prelude(needs) + signature(ks, params) + " {\n" +
              x.takeHoisted("  ") + shared +
              subst(head + body + "  }\n", vars) + "}\n";
  return ks;
}

} // namespace step::codegen::detail
