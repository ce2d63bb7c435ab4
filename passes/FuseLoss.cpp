//===- FuseLoss.cpp - step-fuse-loss: a loss and its gradient, one kernel -===//
//
// step-fuse-loss merges a `step.cross_entropy` and the
// `step.cross_entropy_grad` of the same logits and targets into one
// `step.fusion "reduction"` with both results: its kernel computes each
// row's max and sum of exp once, then writes the gradient row and keeps
// the row's loss (docs/fusion.md, "the loss and its gradient"). A training
// step computes the loss at the end of the forward and its gradient first
// in the backward, from the same logits: GPT-2 124M's [B*T, 50304] (824 MB
// in bf16 at B = 8), read by two kernels (the loss measured 0.37 ms of an
// H200 step, docs/gpu-results.md) where one suffices.
//
// Guarantees: results are unchanged (the fusion's body holds the very ops
// it replaces; the interpreter and the CPU backend run them op by op); the
// merged fusion has two row-op roots, a cross_entropy and a
// cross_entropy_grad of the same logits value and targets value with the
// same reduction and ignore_index, the loss's results first (what codegen
// requires, compiler/codegen/FusionRowKernels.cpp); the planned peak
// grows by at most kBetweenBytes (a gradient moved up) or the loss's
// result (a loss moved up): the merged op runs where the earlier of the
// two ran. A gradient moved up to its loss makes its result live over
// the ops between, whose results and the values that die there (their
// last reader is between) must come to at most kBetweenBytes (every other
// value live there was live at the gradient already); a loss moved
// up to its gradient (gradient accumulation's last micro-batch, whose
// loss step-fuse gives the micro-batches' average as epilogue and places
// after the backward) only makes its loss-sized result live longer, and
// its logits die at the fused op instead of after the backward. The
// result is deterministic (pairs in program order).
//
// Algorithm, per function's top-level block, in program order: a loss is
// a bare cross_entropy or a reduction fusion whose only root is one (any
// epilogue); a gradient likewise with cross_entropy_grad. For each loss,
// the gradients not yet paired that share an input with it are tried in
// program order until one merges. A pair merges when every operand of the
// later of the two is defined before the earlier one and, if the later is
// the gradient, the values made or dying between come to at most
// kBetweenBytes (the loss's scaling, averaging across replicas, the
// guard's checks: scalars). The merge: a
// fusion at the earlier op whose inputs are both ops' operands (once
// each), whose body holds clones of both bodies, the loss's first, then
// common subexpressions of the body removed (the two prologues, typically
// the same reshape and widening cast, become one); the pair is kept only
// if the two roots then read the same logits and targets values with the
// same reduction and ignore_index, else the new fusion is erased.
// Cost: O(N + L * G * B) for N ops, L losses, G gradients (one of each
// per micro-batch) and B ops between a pair, plus CSE of each merge tried.
//
//===----------------------------------------------------------------------===//

#include "passes/Activations.h"
#include "passes/FusionMerge.h"
#include "passes/Passes.h"

#include "dialects/step/Fusion.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::step {
#define GEN_PASS_DEF_FUSELOSS
#include "passes/Passes.h.inc"

namespace {

/// Most bytes the ops between a loss and its gradient may produce: the
/// merged op's gradient result is live over them.
constexpr int64_t kBetweenBytes = 64 * 1024;

/// The one row-op root of type OpT of `u`: `u` itself, or the only root
/// (reduce or row op) of a reduction fusion `u`; null otherwise.
template <typename OpT> OpT rootOf(Operation *u) {
  if (auto op = dyn_cast<OpT>(u))
    return op;
  auto f = dyn_cast<FusionOp>(u);
  if (!f || f.getKind() != kReductionFusion)
    return {};
  OpT found;
  int roots = 0;
  for (Operation &op : f.getBlock().without_terminator()) {
    FusionRole role = fusionRole(&op);
    if (role != FusionRole::Reduce && role != FusionRole::RowOp)
      continue;
    ++roots;
    if (auto r = dyn_cast<OpT>(op))
      found = r;
  }
  return roots == 1 ? found : OpT();
}

/// A loss: a cross_entropy alone or the one root of a reduction fusion
/// (with any epilogue: a loss scaled, averaged over micro-batches).
bool isLoss(Operation *u) { return bool(rootOf<CrossEntropyOp>(u)); }

/// Whether `later` may run at `earlier` (both in one block): its operands
/// exist there, and, where it is the gradient, whose result then lives
/// over the ops between, those make only small values. (A loss moved up
/// to its gradient makes its small result live longer, and its logits
/// die earlier.)
bool mayMoveUp(Operation *later, Operation *earlier, bool laterIsGradient) {
  for (Value v : later->getOperands()) {
    Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == earlier->getBlock() &&
        !def->isBeforeInBlock(earlier))
      return false;
  }
  if (!laterIsGradient)
    return true;
  // What the gradient's result would live beside: the values made between
  // and the values that die between (their last reader is there).
  Block *block = earlier->getBlock();
  int64_t between = 0;
  llvm::SmallPtrSet<Value, 8> seen;
  auto add = [&](Value v) {
    if (!seen.insert(v).second)
      return true;
    int64_t b = staticBytes(v.getType());
    if (b > kBetweenBytes - between)
      return false;
    between += b;
    return true;
  };
  for (Operation *op = earlier->getNextNode(); op != later;
       op = op->getNextNode()) {
    for (Value r : op->getResults())
      if (!add(r))
        return false;
    for (Value v : op->getOperands()) {
      bool dies =
          v.getDefiningOp() && llvm::all_of(v.getUsers(), [&](Operation *u) {
            Operation *a = block->findAncestorOpInBlock(*u);
            return a && a->isBeforeInBlock(later);
          });
      if (dies && !add(v))
        return false;
    }
  }
  return true;
}

/// The merged fusion of `loss` and `gradient` before `at` (the earlier
/// of the two), or null (erased again) when their roots do not read the
/// same logits and targets.
FusionOp merge(Operation *loss, Operation *gradient, Operation *at) {
  // Neither reads the other: the inputs are both ops' operands, the
  // results all of both (the loss's first).
  Operation *pair[] = {loss, gradient};
  FusionOp fusion =
      mergeUnits(pair, at, kReductionFusion, [](Value) { return true; });
  Block *body = &fusion.getBlock();

  IRRewriter rewriter(fusion.getContext());
  DominanceInfo dom(fusion);
  eliminateCommonSubExpressions(rewriter, dom, fusion);
  CrossEntropyOp ce;
  CrossEntropyGradOp grad;
  for (Operation &op : *body) {
    if (auto c = dyn_cast<CrossEntropyOp>(op))
      ce = c;
    if (auto g = dyn_cast<CrossEntropyGradOp>(op))
      grad = g;
  }
  if (ce && grad && ce.getLogits() == grad.getLogits() &&
      ce.getTargets() == grad.getTargets() &&
      ce.getReduction() == grad.getReduction() &&
      ce.getIgnoreIndexOrDefault() == grad.getIgnoreIndexOrDefault())
    return fusion;
  fusion->erase();
  return {};
}

void fuseLosses(func::FuncOp f) {
  Block &block = f.getBody().front();
  SmallVector<Operation *> losses, gradients;
  for (Operation &op : block) {
    if (isLoss(&op))
      losses.push_back(&op);
    else if (rootOf<CrossEntropyGradOp>(&op))
      gradients.push_back(&op);
  }
  llvm::SmallPtrSet<Operation *, 4> used;
  for (Operation *loss : losses) {
    // Gradients sharing an input with the loss, in program order, until
    // one merges (the merge checks that it is the same logits and
    // targets).
    for (Operation *gradient : gradients) {
      if (used.contains(gradient) ||
          llvm::none_of(loss->getOperands(), [&](Value v) {
            return llvm::is_contained(gradient->getOperands(), v);
          }))
        continue;
      bool lossFirst = loss->isBeforeInBlock(gradient);
      Operation *first = lossFirst ? loss : gradient;
      Operation *second = lossFirst ? gradient : loss;
      if (!mayMoveUp(second, first, /*laterIsGradient=*/lossFirst))
        continue;
      FusionOp fusion = merge(loss, gradient, first);
      if (!fusion)
        continue;
      used.insert(gradient);
      unsigned n = loss->getNumResults();
      loss->replaceAllUsesWith(fusion.getResults().take_front(n));
      gradient->replaceAllUsesWith(fusion.getResults().drop_front(n));
      loss->erase();
      gradient->erase();
      break;
    }
  }
}

struct FuseLossPass : impl::FuseLossBase<FuseLossPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        fuseLosses(f);
  }
};

} // namespace
} // namespace mlir::step
