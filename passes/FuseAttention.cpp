//===- FuseAttention.cpp - step-fuse-attention: heads read in place
//--------===//
//
// step-fuse-attention folds the slices, transposes and reshapes around
// every attention op into a `step.fusion "attention"`, whose one kernel
// reads the attention's rows where they are and writes its results where
// their consumers want them. A GPT-2 layer slices q, k and v out of the
// packed projection [B, T, 3C], splits heads [B, T, H, D] and transposes
// them to [B, H, T, D]; the output goes back the same way, and so do the
// gradient's g, dq, dk and dv: eight copy kernels a layer (96 in GPT-2
// 124M's training step) that move about 100 MB each at B = 8, none of
// which is needed once the kernel addresses head h of batch b at
// b * T * 3C + h * D with rows 3C apart.
//
// Guarantees: results are unchanged (the fusion's body holds the very ops
// it replaces; the interpreter and the CPU backend run them op by op); the
// fusion satisfies the step.fusion contract C6 (every view has unit
// innermost stride, every result is yielded through transposes and
// reshapes); a row operand whose contiguous layout has 16-byte rows (rows
// and slices multiples of 8 elements) keeps them in its view, so the
// tensor-core kernels stay eligible; the result is deterministic (ops in
// program order).
//
// Algorithm, per attention op of a function's top-level block, in program
// order:
//  1. outputs: from each row result (not the log-sum-exp) the longest
//     chain of transposes that keep the innermost dim; the fusion yields
//     the chain's last value. Any other user of a value of the chain gets
//     the inverse chain (transposes back from the yielded value): the
//     saved output that an attention_grad reads becomes a transpose of the
//     forward fusion's result, which the gradient's own fusion then reads
//     in place;
//  2. inputs: for each row operand (q, k, v, g, saved out) the longest
//     chain of slice/transpose/reshape producers whose composed view from
//     the chain's root is expressible by strides with unit innermost
//     stride (and keeps 16-byte rows, as above); the roots are the fusion's
//     inputs, with the valid length and saved log-sum-exp as they are;
//  3. when some chain holds a slice or transpose (a copy to save): outline a
//  step.fusion "attention" at
//     the attention op holding clones of the input chains, the attention
//     and the output chains; uses of the yielded values are replaced; ops
//     left without users are erased.
//
// Cost: O(N + A * L^2) for N ops, A attention ops and chains of L ops
// (L <= 3 in GPT-2). At run time the kernels compute one division and
// modulo per slice; the copies go: on GPT-2 124M B = 8 the 96 transposes
// measured 1.57 ms of a 28.8 ms H200 step (docs/gpu-results.md) and the 36
// slices move another 0.9 GB.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/step/Fusion.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::step {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

/// The view of `operand` read through `chain` (producers, nearest first)
/// from the contiguous root, or nullopt when some step has no strides.
std::optional<StridedView> chainView(ArrayRef<Operation *> chain) {
  Value root = chain.back()->getOperand(0);
  StridedView v = StridedView::contiguous(
      cast<RankedTensorType>(root.getType()).getShape());
  for (Operation *op : llvm::reverse(chain)) {
    auto next = viewThrough(op, v);
    if (!next)
      return std::nullopt;
    v = *next;
  }
  return v;
}

/// Step 2: the producers of a row operand that the fusion reads through,
/// nearest first (empty: the operand itself is the input).
SmallVector<Operation *> inputChain(Value operand, Block *block) {
  SmallVector<Operation *> all;
  for (Value v = operand;;) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != block || !isReindexing(def))
      break;
    all.push_back(def);
    v = def->getOperand(0);
  }
  auto shape = cast<RankedTensorType>(operand.getType()).getShape();
  bool wantAligned = StridedView::contiguous(shape).rowsAligned8();
  for (size_t n = all.size(); n > 0; --n) {
    ArrayRef<Operation *> chain(all.data(), n);
    auto v = chainView(chain);
    if (v && v->strides.back() == 1 && (!wantAligned || v->rowsAligned8()))
      return SmallVector<Operation *>(chain);
  }
  return {};
}

/// Step 1: the transposes after a row result (each keeping the innermost
/// dim), in order; the first such user of each value is taken.
SmallVector<TransposeOp> outputChain(Value result) {
  SmallVector<TransposeOp> chain;
  for (Value v = result;;) {
    TransposeOp next;
    for (Operation *user : v.getUsers()) {
      auto t = dyn_cast<TransposeOp>(user);
      if (t && t.getPermutation().back() ==
                   static_cast<int64_t>(t.getPermutation().size()) - 1) {
        next = t;
        break;
      }
    }
    if (!next)
      return chain;
    chain.push_back(next);
    v = next.getResult();
  }
}

/// The inverse of a permutation.
SmallVector<int64_t> inverse(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = static_cast<int64_t>(i);
  return inv;
}

/// Step 1's rewrite: users of the chain's values other than the chain
/// read them back from `yielded` (the fusion's result for the chain's last
/// value) through inverse transposes, built right after the fusion.
void rerouteOtherUsers(Value result, MutableArrayRef<TransposeOp> chain,
                       Value yielded, Operation *fusion) {
  SmallVector<Value> values{result};
  for (TransposeOp t : chain)
    values.push_back(t.getResult());
  auto others = [&](size_t k) {
    return llvm::any_of(values[k].getUsers(), [&](Operation *u) {
      return u != chain[k].getOperation();
    });
  };
  size_t lowest = chain.size();
  for (size_t k = 0; k < chain.size(); ++k)
    if (others(k)) {
      lowest = k;
      break;
    }
  OpBuilder b(fusion->getContext());
  b.setInsertionPointAfter(fusion);
  Value back = yielded; // stands for values[k + 1] below
  for (size_t k = chain.size(); k-- > lowest;) {
    auto inv = b.create<TransposeOp>(
        chain[k].getLoc(), values[k].getType(), back,
        b.getDenseI64ArrayAttr(inverse(chain[k].getPermutation())));
    Operation *next = chain[k];
    values[k].replaceUsesWithIf(
        inv, [&](OpOperand &use) { return use.getOwner() != next; });
    back = inv.getResult();
  }
}

/// Steps 1-3 for one attention op.
void fuseAttention(Operation *attention) {
  Block *block = attention->getBlock();
  SmallVector<SmallVector<TransposeOp>> outChains;
  bool any = false;
  for (OpResult r : attention->getResults()) {
    bool lse = isa<AttentionLseOp>(attention) && r.getResultNumber() == 1;
    outChains.push_back(lse ? SmallVector<TransposeOp>() : outputChain(r));
    any |= !outChains.back().empty();
  }
  SmallVector<SmallVector<Operation *>> inChains;
  for (unsigned i = 0; i < attention->getNumOperands(); ++i) {
    inChains.push_back(isAttentionRowsOperand(attention, i)
                           ? inputChain(attention->getOperand(i), block)
                           : SmallVector<Operation *>());
    // Reshapes alone are views already (no copy to save).
    any |= llvm::any_of(inChains.back(),
                        [](Operation *op) { return !isa<ReshapeOp>(op); });
  }
  if (!any)
    return;

  // Inputs: the chains' roots (each once), in operand order.
  SmallVector<Value> inputs;
  auto rootOf = [&](unsigned i) {
    return inChains[i].empty() ? attention->getOperand(i)
                               : inChains[i].back()->getOperand(0);
  };
  for (unsigned i = 0; i < attention->getNumOperands(); ++i)
    if (!llvm::is_contained(inputs, rootOf(i)))
      inputs.push_back(rootOf(i));
  SmallVector<Value> yielded;
  SmallVector<Type> types;
  for (auto [r, chain] : llvm::zip(attention->getResults(), outChains)) {
    yielded.push_back(chain.empty() ? Value(r) : chain.back().getResult());
    types.push_back(yielded.back().getType());
  }
  OpBuilder b(attention);
  auto fusion = b.create<FusionOp>(attention->getLoc(), types,
                                   b.getStringAttr(kAttentionFusion), inputs);
  Block *body = new Block();
  fusion.getBody().push_back(body);
  IRMapping map;
  for (Value in : inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder ib = OpBuilder::atBlockEnd(body);
  for (auto &chain : inChains)
    for (Operation *op : llvm::reverse(chain))
      if (!map.contains(op->getResult(0)))
        ib.clone(*op, map);
  ib.clone(*attention, map);
  SmallVector<Value> results;
  for (auto [r, chain] : llvm::zip(attention->getResults(), outChains)) {
    for (TransposeOp t : chain)
      ib.clone(*t, map);
    results.push_back(
        map.lookup(chain.empty() ? Value(r) : chain.back().getResult()));
  }
  ib.create<YieldOp>(attention->getLoc(), results);

  // Other users of the output chains' values read them back from the
  // fusion's results; then the yielded values are the fusion's.
  for (auto [r, chain, f] :
       llvm::zip(attention->getResults(), outChains, fusion.getResults()))
    if (!chain.empty())
      rerouteOtherUsers(r, chain, f, fusion);
  for (auto [v, f] : llvm::zip(yielded, fusion.getResults()))
    v.replaceAllUsesWith(f);
  // Erase what is now dead: the output chains (last first), the attention,
  // then the input chains' ops without users, each once (chains may share
  // ops: q, k and v of one value), users before their producers.
  for (auto &chain : outChains)
    for (TransposeOp t : llvm::reverse(chain))
      if (t->use_empty())
        t->erase();
  if (attention->use_empty())
    attention->erase();
  llvm::SetVector<Operation *> inOps;
  for (auto &chain : inChains)
    inOps.insert(chain.begin(), chain.end());
  SmallVector<Operation *> order(inOps.begin(), inOps.end());
  llvm::sort(order, [](Operation *a, Operation *b) {
    return b->isBeforeInBlock(a); // later ops first
  });
  for (Operation *op : order)
    if (op->use_empty())
      op->erase();
}

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      SmallVector<Operation *> attentions;
      for (Operation &op : f.getBody().front())
        if (isAttentionOp(&op))
          attentions.push_back(&op);
      for (Operation *a : attentions)
        fuseAttention(a);
    }
  }
};

} // namespace

void addFusionPasses(OpPassManager &pm) {
  pm.addPass(createFuseAttention());
  pm.addPass(createFuse());
  pm.addPass(createFuseLoss());
  pm.addPass(createFuseRowChains());
  pm.addPass(createFuseLoopReductions());
}

} // namespace mlir::step
