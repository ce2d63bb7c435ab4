//===- FusionMerge.cpp - Cloning ops and fusions into a new fusion --------===//

#include "passes/FusionMerge.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::step {

/// Clones the body of fusion `u` (or the op `u` itself) at the builder's
/// insertion point, u's operands mapped through `outer` (every operand
/// must be mapped: to a block argument of the new fusion, or to the value
/// an earlier clone gave); returns the values standing for u's results.
static SmallVector<Value> cloneUnit(OpBuilder &b, Operation *u,
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

int64_t staticBytes(Type type) {
  auto r = dyn_cast<RankedTensorType>(type);
  if (!r || !r.hasStaticShape())
    return INT64_MAX;
  int64_t bits = r.getElementType().getIntOrFloatBitWidth();
  return r.getNumElements() * (bits == 1 ? 1 : bits / 8);
}

FusionOp mergeUnits(ArrayRef<Operation *> members, Operation *at,
                    StringRef kind, llvm::function_ref<bool(Value)> yield) {
  llvm::SmallPtrSet<Operation *, 8> in(members.begin(), members.end());
  llvm::SetVector<Value> inputs;
  for (Operation *m : members)
    for (Value v : m->getOperands())
      if (!in.contains(v.getDefiningOp()))
        inputs.insert(v);
  SmallVector<Value> outs;
  SmallVector<Type> types;
  for (Operation *m : members)
    for (Value r : m->getResults())
      if (yield(r)) {
        outs.push_back(r);
        types.push_back(r.getType());
      }
  OpBuilder b(at);
  auto fusion = b.create<FusionOp>(members.back()->getLoc(), types,
                                   b.getStringAttr(kind), inputs.getArrayRef());
  Block *body = b.createBlock(&fusion.getBody());
  IRMapping outer;
  for (Value v : inputs)
    outer.map(v, body->addArgument(v.getType(), v.getLoc()));
  for (Operation *m : members)
    for (auto [r, c] : llvm::zip(m->getResults(), cloneUnit(b, m, outer)))
      outer.map(r, c);
  SmallVector<Value> yields;
  for (Value r : outs)
    yields.push_back(outer.lookup(r));
  b.create<YieldOp>(members.back()->getLoc(), yields);
  return fusion;
}

FusionOp fuseUnits(ArrayRef<Operation *> members, Operation *at,
                   StringRef kind) {
  Block *block = members.front()->getBlock();
  llvm::SmallPtrSet<Operation *, 8> memberSet(members.begin(), members.end());
  auto usedOutside = [&](Value r) {
    return llvm::any_of(r.getUsers(), [&](Operation *user) {
      Operation *a = block->findAncestorOpInBlock(*user);
      return !a || !memberSet.contains(a);
    });
  };
  FusionOp fusion = mergeUnits(members, at, kind, usedOutside);
  IRRewriter rewriter(fusion.getContext());
  DominanceInfo dom(fusion);
  eliminateCommonSubExpressions(rewriter, dom, fusion);
  unsigned j = 0;
  for (Operation *m : members)
    for (Value r : m->getResults())
      if (usedOutside(r))
        r.replaceAllUsesWith(fusion.getResult(j++));
  for (Operation *m : llvm::reverse(members))
    m->erase();
  return fusion;
}

} // namespace mlir::step
