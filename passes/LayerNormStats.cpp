//===- LayerNormStats.cpp - Layer norm hands its statistics to its grad ---===//
//
// step-layer-norm-stats makes each layer norm's gradient read the row
// statistics its forward computed, as PyTorch's native_layer_norm saves
// mean and rstd for its backward: step.layer_norm's VJP rule recomputes
// mean(x) and rsqrt(var(x) + eps) from x, two row reductions that run one
// after the other (each a pass over the row and a reduction across the
// lanes) before the gradient's own two (which run together); the forward
// kernel already had both values.
//
// Guarantees:
//   * Every step.layer_norm of @train_step (static shapes) whose operand
//     (or its f32 cast) some step.reduce_mean reduces over exactly the
//     normalized dims (what
//     the VJP rule's recomputation reads; nothing else is changed) is
//     replaced by its definition in primitive ops, built by the very
//     builder the VJP rule uses (buildLayerNormStats, VJP.h): f32 x, the
//     row mean, the centred x, the biased variance by a second pass,
//     rsqrt(var + eps), xhat, then y = xhat * weight + bias rounded once to
//     the layer norm's element type. CSE (run here) then merges the
//     gradient's recomputation into the forward's ops: the gradient reads
//     the forward's mean and rstd, 8 bytes a row kept alive in between.
//     The gradient then gets its own copies of the elementwise ops that
//     read x which it reads (the broadcasts of mean and rstd, the centred
//     x, xhat), placed before the first of its ops reading them: without,
//     the forward's kernel would store xhat (4 bytes an element) for the
//     gradient to read back. The layer norm's discardable attributes (a
//     step.checkpoint hint) go to every forward op that reads x.
//   * The values are the forward kernel's up to rounding: on the GPU the
//     row chain the fusion passes make of the forward computes mean and
//     rstd exactly as the layer_norm kernel did (the same lane order, the
//     same f32 operations, rstd as 1 / sqrtf) and y in the same order
//     ((x - mean) * rstd * w + b); the CPU backend now computes the
//     forward in f32 op by op instead of in double in one kernel.
// Run after inlining and CSE (the forward and its gradient read the same
// x), before the memory passes and step-fuse.
//
// Cost: O(N) for N ops plus one CSE. Memory: mean and rstd (f32, one each
// a row) live from the forward to the gradient instead of being
// recomputed. Time: the gradient's row chain loses two of its three
// dependent row reductions and their passes over the row; the forward's
// row chain stores the two per-row values.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"

#include "llvm/ADT/ScopeExit.h"

#include <functional>
#include <map>
#include <tuple>

namespace mlir::step {
#define GEN_PASS_DEF_LAYERNORMSTATS
#include "passes/Passes.h.inc"

namespace {

/// Whether some reduce_mean (no keepdim) reduces `v` over `dims`.
bool meanOverDims(Value v, ArrayRef<int64_t> dims) {
  for (Operation *user : v.getUsers())
    if (auto m = dyn_cast<ReduceMeanOp>(user))
      if (m.getOperand() == v && !m.getKeepdim() &&
          m.getDims() == dims)
        return true;
  return false;
}

/// Whether the gradient of `ln` recomputes its statistics: its operand, or
/// a cast of it to f32, has a row mean over the normalized dims.
bool statisticsRecomputed(LayerNormOp ln) {
  Value x = ln.getOperand();
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank(),
          normRank = cast<RankedTensorType>(ln.getWeight().getType()).getRank();
  SmallVector<int64_t> dims;
  for (int64_t d = rank - normRank; d < rank; ++d)
    dims.push_back(d);
  if (meanOverDims(x, dims))
    return true;
  for (Operation *user : x.getUsers())
    if (auto c = dyn_cast<CastOp>(user))
      if (getElementTypeOrSelf(c.getType()).isF32() &&
          meanOverDims(c.getResult(), dims))
        return true;
  return false;
}

/// A layer norm written out: its result and the operands it was made of.
struct Decomposition {
  Value y;
  SmallVector<Value, 3> operands;
  /// The layer norm's hints (step.checkpoint), for every op made of it.
  DictionaryAttr hints;
};

struct LayerNormStatsPass : impl::LayerNormStatsBase<LayerNormStatsPass> {
  using LayerNormStatsBase::LayerNormStatsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(funcName);
    if (!f || f.isExternal()) {
      module.emitError() << "step-layer-norm-stats: no function @" << funcName
                         << " with a body";
      return signalPassFailure();
    }
    SmallVector<LayerNormOp> forwards;
    std::vector<Decomposition> decompositions;
    f.walk([&](LayerNormOp ln) {
      // An unread layer norm stays: CSE would erase its written-out y.
      if (!ln.getResult().use_empty() &&
          cast<RankedTensorType>(ln.getOperand().getType()).hasStaticShape() &&
          statisticsRecomputed(ln))
        forwards.push_back(ln);
    });
    if (forwards.empty())
      return;
    // A layer norm equal to an earlier one of its block (operands and
    // eps; hints aside, which the written-out ops get only after CSE) takes
    // its result and adds its hints to the earlier one's: CSE would
    // otherwise erase the second y.
    std::map<std::tuple<void *, void *, void *, double>, size_t> made;
    for (LayerNormOp ln : forwards) {
      auto key = std::make_tuple(ln.getOperand().getAsOpaquePointer(),
                                 ln.getWeight().getAsOpaquePointer(),
                                 ln.getBias().getAsOpaquePointer(),
                                 ln.getEpsilon().convertToDouble());
      if (auto it = made.find(key); it != made.end()) {
        Decomposition &first = decompositions[it->second];
        if (first.y.getDefiningOp()->getBlock() == ln->getBlock()) {
          NamedAttrList hints(first.hints);
          for (NamedAttribute a : ln->getDiscardableAttrs())
            hints.set(a.getName(), a.getValue());
          first.hints = hints.getDictionary(&getContext());
          ln.getResult().replaceAllUsesWith(first.y);
          ln->erase();
          continue;
        }
      }
      OpBuilder b(ln);
      Location loc = ln.getLoc();
      auto wType = cast<RankedTensorType>(ln.getWeight().getType());
      LayerNormStatsValues st = buildLayerNormStats(
          b, loc, ln.getOperand(), wType.getRank(),
          ln.getEpsilon().convertToDouble());
      auto xF32 = cast<RankedTensorType>(st.x.getType());
      auto broadcast = [&](Value v) -> Value {
        return b.create<BroadcastInDimOp>(
            loc, xF32, vjp::castTo(b, loc, v, b.getF32Type()),
            b.getDenseI64ArrayAttr(st.normDims));
      };
      // The weight's broadcast as the VJP rule builds it (CSE merges them).
      Value scaled = b.create<MulOp>(loc, st.xhat, broadcast(ln.getWeight()));
      Value y = b.create<AddOp>(loc, scaled, broadcast(ln.getBias()));
      Type elem = getElementTypeOrSelf(ln.getType());
      if (!elem.isF32())
        y = b.create<CastOp>(loc, xF32.clone(elem), y);
      decompositions.push_back(
          {y,
           {ln.getOperand(), ln.getWeight(), ln.getBias()},
           ln->getDiscardableAttrDictionary()});
      made[key] = decompositions.size() - 1;
      ln.getResult().replaceAllUsesWith(y);
      ln->erase();
    }
    IRRewriter rewriter(&getContext());
    DominanceInfo dom(f);
    eliminateCommonSubExpressions(rewriter, dom, f);
    for (const Decomposition &d : decompositions)
      recomputeElementwiseForGradient(d);
  }

  /// After CSE the gradient reads the forward's xhat, its broadcasts and
  /// the centred x too, not only mean and rstd; kept so, the forward's
  /// kernel would store xhat (4 bytes an element) for the gradient to read
  /// back. The gradient gets its own copies of those elementwise ops
  /// instead, made before the first op outside the forward that reads any
  /// of them: its kernel recomputes xhat from x, mean and rstd as before.
  void recomputeElementwiseForGradient(const Decomposition &d) {
    // The forward's ops: those of y's operand tree (CSE may have kept an
    // equal op made earlier) in y's block that read x.
    Block *block = d.y.getDefiningOp()->getBlock();
    // Only ops that read x: the weight's and bias's broadcasts may be
    // shared with other layer norms of the same parameters (gradient
    // accumulation's micro-batches) and stay as they are.
    llvm::SmallPtrSet<Operation *, 16> forward;
    llvm::DenseMap<Value, bool> readsX;
    std::function<bool(Value)> visit = [&](Value v) -> bool {
      if (v == d.operands[0])
        return true;
      auto it = readsX.find(v);
      if (it != readsX.end())
        return it->second;
      Operation *op = v.getDefiningOp();
      bool reads = false;
      if (op && op->getBlock() == block && op->getNumOperands() != 0 &&
          !llvm::is_contained(d.operands, v))
        for (Value o : op->getOperands())
          reads = visit(o) || reads;
      readsX[v] = reads;
      if (reads)
        forward.insert(op);
      return reads;
    };
    visit(d.y);
    // Once the copies are made (a copy takes its original's attributes):
    // the hints on the forward's ops, as on the layer norm they replace.
    auto hint = llvm::make_scope_exit([&] {
      for (Operation *op : forward) // adds to what an op has (a model op
        for (NamedAttribute a : d.hints) // CSE kept may have its own)
          op->setAttr(a.getName(), a.getValue());
    });
    SmallVector<Operation *> made(forward.begin(), forward.end());
    llvm::sort(made, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // Reductions, per-row values and y itself (its readers are the layer
    // norm's) stay shared.
    auto shared = [&](Operation *op) {
      return !isa<BroadcastInDimOp, SubOp, MulOp, CastOp>(op) ||
             op == d.y.getDefiningOp();
    };
    // The earliest reader outside the forward, as an op of y's block (a
    // reader nested deeper counts as the op that holds it); none when one
    // lies outside that block.
    Operation *first = nullptr;
    for (Operation *op : made)
      if (!shared(op))
        for (Operation *user : op->getUsers()) {
          if (forward.contains(user))
            continue;
          Operation *a = block->findAncestorOpInBlock(*user);
          if (!a)
            return;
          if (!first || a->isBeforeInBlock(first))
            first = a;
        }
    if (!first)
      return;
    OpBuilder b(first);
    IRMapping map;
    llvm::SmallPtrSet<Operation *, 16> copies;
    // The ops to copy: those read outside the forward, and the forward
    // ops (not shared) they read, transitively.
    llvm::SmallPtrSet<Operation *, 16> needed;
    SmallVector<Operation *> todo;
    for (Operation *op : made)
      if (!shared(op) && llvm::any_of(op->getUsers(), [&](Operation *u) {
            return !forward.contains(u);
          }))
        todo.push_back(op);
    while (!todo.empty()) {
      Operation *op = todo.pop_back_val();
      if (!needed.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp())
          if (forward.contains(d) && !shared(d))
            todo.push_back(d);
    }
    // The copies read the shared ops (mean, rstd) where `first` is: all
    // must come before it (an op of the model itself reading the centred x
    // early may not), else the gradient keeps reading the forward's values.
    for (Operation *op : needed)
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (def->getBlock() == block && !needed.contains(def) &&
              !def->isBeforeInBlock(first))
            return;
    for (Operation *op : made) {
      if (!needed.contains(op))
        continue;
      Operation *copy = b.clone(*op, map);
      copies.insert(copy);
      op->getResult(0).replaceUsesWithIf(
          copy->getResult(0), [&](OpOperand &u) {
            return !forward.contains(u.getOwner()) &&
                   !copies.contains(u.getOwner());
          });
    }
  }
};

} // namespace
} // namespace mlir::step
