//===- FuseAttention.cpp - step-fuse-attention: heads read in place ----===//
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
//     1b. packed: when the pads of two or more row results' chain ends
//     (through at most one reshape) are summed by one tree of single-use
//     adds whose windows tile one dim exactly (GPT-2's gradient of the
//     q, k, v slices: dq, dk, dv into [B, T, 3C]), and each window is a
//     view with unit innermost stride (16-byte rows kept as in step 2),
//     the fusion yields their step.concat in place of the tree: each
//     kernel writes its window, and the copy kernel goes;
//  2. inputs: for each row operand (q, k, v, g, saved out) the longest
//     chain of slice/transpose/reshape producers whose composed view from
//     the chain's root is expressible by strides with unit innermost
//     stride (and keeps 16-byte rows, as above); the roots are the fusion's
//     inputs, with the valid length and saved log-sum-exp as they are;
//  3. when some chain holds a slice or transpose, or results are packed (a
//     copy to save): outline a step.fusion "attention" at
//     the attention op holding clones of the input chains, the attention
//     and the output chains; uses of the yielded values are replaced; ops
//     left without users are erased.
//
// Cost: O(N + A * (L^2 + P)) for N ops, A attention ops, chains of L ops
// (L <= 3 in GPT-2) and add trees of P pads. At run time the kernels compute
// one division and modulo per slice; the copies go: on GPT-2 124M B = 8 the 96
// transposes measured 1.57 ms of a 28.8 ms H200 step (docs/gpu-results.md) and
// the 36 slices move another 0.9 GB.
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

/// Step 1b: row results packed side by side. GPT-2's gradient of the
/// packed projection sums three zero pads of dq, dk and dv (the VJPs of
/// the slices q, k, v), each [B, T, C] in its window of [B, T, 3C]: a
/// concatenation, which the fusion can yield itself, every kernel writing
/// its rows into its window, instead of a kernel copying the three.
struct Packed {
  Operation *root = nullptr; ///< the add tree's root, replaced by the result
  int64_t dim = 0;
  SmallVector<unsigned> results;       ///< attention results, in window order
  SmallVector<ReshapeOp> reshapes;     ///< each one's reshape (may be null)
  SmallVector<Operation *> pads, adds; ///< erased after (adds root first)
};

/// The zero pad of one dim that `end` (a row result's output chain end,
/// through at most one reshape) goes into, and that reshape; nullopt when
/// the chain goes on otherwise.
std::optional<std::pair<PadOp, ReshapeOp>> padOfEnd(Value end) {
  if (!end.hasOneUse())
    return std::nullopt;
  ReshapeOp reshape = dyn_cast<ReshapeOp>(*end.getUsers().begin());
  Value v = reshape ? reshape.getResult() : end;
  if (!v.hasOneUse())
    return std::nullopt;
  auto pad = dyn_cast<PadOp>(*v.getUsers().begin());
  if (!pad || !pad.getValue().isZero() || !pad->hasOneUse() ||
      !isa<AddOp>(*pad->getUsers().begin()) ||
      !isa<FloatType>(pad.getType().getElementType()))
    return std::nullopt;
  int padded = 0;
  for (auto [lo, hi] : llvm::zip(pad.getLow(), pad.getHigh()))
    padded += lo != 0 || hi != 0;
  if (padded != 1)
    return std::nullopt;
  return std::make_pair(pad, reshape);
}

/// The tree of adds under `add` (inner ones single-use): its leaves, in
/// operand order, and its adds, each before the adds under it.
void addTree(Operation *add, SmallVector<Value> &leaves,
             SmallVector<Operation *> &adds) {
  adds.push_back(add);
  for (Value v : add->getOperands()) {
    auto inner = v.getDefiningOp<AddOp>();
    if (inner && inner->hasOneUse() && inner->getBlock() == add->getBlock())
      addTree(inner, leaves, adds);
    else
      leaves.push_back(v);
  }
}

/// Step 1b for `ends` (per result, its output chain's last value, or null
/// where the result cannot join: the log-sum-exp, a chain whose values have
/// other users): the pads of two or more ends summed by one add tree that
/// tiles one dim exactly, each window a view with unit innermost stride
/// (16-byte rows kept where the result's own layout has them).
std::optional<Packed> packedSum(ArrayRef<Value> ends,
                                ArrayRef<SmallVector<TransposeOp>> chains) {
  llvm::DenseMap<Operation *, unsigned> padResult;
  Packed p;
  llvm::DenseMap<unsigned, ReshapeOp> reshapeOf;
  for (auto [j, end] : llvm::enumerate(ends)) {
    if (!end)
      continue;
    if (auto pr = padOfEnd(end)) {
      padResult[pr->first] = j;
      reshapeOf[j] = pr->second;
      if (!p.root)
        p.root = *pr->first->getUsers().begin();
    }
  }
  if (padResult.size() < 2)
    return std::nullopt;
  while (p.root->hasOneUse() && isa<AddOp>(*p.root->getUsers().begin()))
    p.root = *p.root->getUsers().begin();
  SmallVector<Value> leaves;
  addTree(p.root, leaves, p.adds);
  SmallVector<PadOp> pads;
  for (Value leaf : leaves) {
    auto pad = leaf.getDefiningOp<PadOp>();
    if (!pad || !padResult.contains(pad) || llvm::is_contained(pads, pad) ||
        pad.getType() != p.root->getResult(0).getType())
      return std::nullopt;
    pads.push_back(pad);
  }
  auto dimOf = [](PadOp pad) {
    for (auto [k, lo, hi] : llvm::enumerate(pad.getLow(), pad.getHigh()))
      if (lo != 0 || hi != 0)
        return static_cast<int64_t>(k);
    return int64_t(0);
  };
  p.dim = dimOf(pads.front());
  llvm::sort(pads, [&](PadOp a, PadOp b) {
    return a.getLow()[p.dim] < b.getLow()[p.dim];
  });
  auto packed = cast<RankedTensorType>(p.root->getResult(0).getType());
  int64_t at = 0;
  for (PadOp pad : pads) {
    if (dimOf(pad) != p.dim || pad.getLow()[p.dim] != at)
      return std::nullopt;
    at += pad.getOperand().getType().getDimSize(p.dim);
  }
  if (at != packed.getDimSize(p.dim))
    return std::nullopt;
  // Each window's view of the packed result, back through the reshape and
  // the transposes: unit innermost stride, aligned rows kept.
  StridedView whole = StridedView::contiguous(packed.getShape());
  for (PadOp pad : pads) {
    unsigned j = padResult.lookup(pad);
    std::optional<StridedView> v = whole;
    v->offset += pad.getLow()[p.dim] * whole.strides[p.dim];
    v->sizes[p.dim] = pad.getOperand().getType().getDimSize(p.dim);
    if (ReshapeOp r = reshapeOf.lookup(j))
      v = viewBefore(r, *v);
    for (TransposeOp t : llvm::reverse(chains[j]))
      if (v)
        v = viewBefore(t, *v);
    auto own = cast<RankedTensorType>(ends[j].getType()).getShape();
    bool wantAligned = StridedView::contiguous(own).rowsAligned8();
    if (!v || v->strides.back() != 1 || (wantAligned && !v->rowsAligned8()))
      return std::nullopt;
    p.results.push_back(j);
    p.reshapes.push_back(reshapeOf.lookup(j));
    p.pads.push_back(pad);
  }
  return p;
}

/// Steps 1-3 for one attention op.
void fuseAttention(Operation *attention) {
  Block *block = attention->getBlock();
  SmallVector<SmallVector<TransposeOp>> outChains;
  SmallVector<Value> ends; // step 1b's candidates
  bool any = false;
  for (OpResult r : attention->getResults()) {
    bool lse = isa<AttentionLseOp>(attention) && r.getResultNumber() == 1;
    outChains.push_back(lse ? SmallVector<TransposeOp>() : outputChain(r));
    any |= !outChains.back().empty();
    SmallVector<TransposeOp> &chain = outChains.back();
    Value end = chain.empty() ? Value(r) : chain.back().getResult();
    // A chain joins step 1b only if each of its values before its end
    // feeds just the next (no other user to reroute).
    bool alone = chain.empty() ||
                 (r.hasOneUse() &&
                  llvm::all_of(ArrayRef(chain).drop_back(),
                               [](TransposeOp t) { return t->hasOneUse(); }));
    ends.push_back(lse || !alone ? Value() : end);
  }
  std::optional<Packed> packed = packedSum(ends, outChains);
  any |= packed.has_value();
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
  // Results: each row result's chain end, or (step 1b) the packed sum in
  // place of the first packed result; `slot` maps results to them.
  auto isPacked = [&](unsigned j) {
    return packed && llvm::is_contained(packed->results, j);
  };
  SmallVector<Value> yielded; // values outside the fusion it replaces
  SmallVector<Type> types;
  SmallVector<int> slot;
  int packedSlot = -1;
  for (auto [j, r, chain] :
       llvm::enumerate(attention->getResults(), outChains)) {
    if (isPacked(j) && packedSlot >= 0) {
      slot.push_back(packedSlot);
      continue;
    }
    if (isPacked(j))
      packedSlot = static_cast<int>(yielded.size());
    slot.push_back(static_cast<int>(yielded.size()));
    yielded.push_back(isPacked(j)     ? packed->root->getResult(0)
                      : chain.empty() ? Value(r)
                                      : chain.back().getResult());
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
  SmallVector<Value> results(yielded.size());
  for (auto [j, r, chain] :
       llvm::enumerate(attention->getResults(), outChains)) {
    for (TransposeOp t : chain)
      ib.clone(*t, map);
    if (!isPacked(j))
      results[slot[j]] =
          map.lookup(chain.empty() ? Value(r) : chain.back().getResult());
  }
  if (packed) {
    SmallVector<Value> pieces;
    for (auto [j, reshape] : llvm::zip(packed->results, packed->reshapes)) {
      pieces.push_back(reshape ? ib.clone(*reshape, map)->getResult(0)
                               : map.lookup(ends[j]));
    }
    results[packedSlot] = ib.create<ConcatOp>(
        attention->getLoc(), pieces, ib.getI64IntegerAttr(packed->dim));
  }
  ib.create<YieldOp>(attention->getLoc(), results);

  // Other users of the output chains' values read them back from the
  // fusion's results; then the yielded values are the fusion's.
  for (auto [j, r, chain] : llvm::enumerate(attention->getResults(), outChains))
    if (!chain.empty() && !isPacked(j))
      rerouteOtherUsers(r, chain, fusion.getResult(slot[j]), fusion);
  for (auto [v, f] : llvm::zip(yielded, fusion.getResults()))
    v.replaceAllUsesWith(f);
  // Erase what is now dead: the packed sum (adds, root first; pads;
  // reshapes), the output chains (last first), the attention, then the
  // input chains' ops without users, each once (chains may share ops: q, k
  // and v of one value), users before their producers.
  if (packed) {
    for (Operation *op : packed->adds)
      op->erase();
    for (Operation *op : packed->pads)
      op->erase();
    for (ReshapeOp r : packed->reshapes)
      if (r)
        r->erase();
  }
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

void addFusionPasses(OpPassManager &pm, const FusionChoices &choices) {
  pm.addPass(createFuseAttention());
  if (choices.bgradEpilogues)
    pm.addPass(createFuseBiasGrad());
  FuseOptions fuse;
  fuse.geluEpilogues = choices.geluEpilogues;
  pm.addPass(createFuse(fuse));
  pm.addPass(createFuseLoss());
  pm.addPass(createFuseRowChains());
  pm.addPass(createFuseLoopReductions());
}

} // namespace mlir::step
