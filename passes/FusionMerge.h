//===- FusionMerge.h - Cloning ops and fusions into a new fusion -*- C++
//-*-===//
//
// Shared by the passes that merge already-formed units (a bare op or a
// step.fusion) into one step.fusion: step-fuse-loss, step-fuse-row-chains.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_FUSIONMERGE_H
#define STEP_PASSES_FUSIONMERGE_H

#include "dialects/step/StepOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::step {

/// Clones the body of fusion `u` (or the op `u` itself) at the builder's
/// insertion point, u's operands mapped through `outer` (every operand
/// must be mapped: to a block argument of the new fusion, or to the value
/// an earlier clone gave); returns the values standing for u's results.
inline SmallVector<Value> cloneUnit(OpBuilder &b, Operation *u,
                                    IRMapping &outer) {
  auto f = dyn_cast<FusionOp>(u);
  if (!f) {
    Operation *c = b.clone(*u, outer);
    return SmallVector<Value>(c->getResults());
  }
  IRMapping map;
  for (auto [arg, in] : llvm::zip(f.getBlock().getArguments(), f.getInputs()))
    map.map(arg, outer.lookup(in));
  for (Operation &op : f.getBlock().without_terminator())
    b.clone(op, map);
  SmallVector<Value> out;
  for (Value y : f.getYield()->getOperands())
    out.push_back(map.lookup(y));
  return out;
}

} // namespace mlir::step

#endif // STEP_PASSES_FUSIONMERGE_H
