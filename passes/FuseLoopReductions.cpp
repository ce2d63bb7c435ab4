//===- FuseLoopReductions.cpp - step-fuse-loop-reductions -----------------===//
//
// step-fuse-loop-reductions merges a `loop` fusion and the reductions that
// read its results element by element into one `step.fusion "reduction"`
// whose kernel computes the loop's values where the reductions read them,
// stores them (the fusion yields them for their other readers) and reduces
// them (docs/fusion.md, "a loop and the reductions of its results"). A
// training step's bias gradient is the column sum of a gradient that a
// loop fusion just wrote and the weight gradient's matmul reads again:
// GPT-2's GELU backward ([B*T, 3072]) and the packed q/k/v gradient
// ([B*T, 2304]), each written by one kernel and read back whole by the
// next (50 and 38 MB per layer in bf16 at B = 8). step-fuse cannot: it
// forms reductions before loops and a reduction's prologue may only hold
// ops that nothing else reads. A bare elementwise op (step-fuse leaves a
// single op unfused: GELU's backward is one step.gelu_grad) counts as a
// loop of one op.
//
// Guarantees: results are unchanged (the new body holds clones of the very
// ops it replaces; the interpreter and the CPU backend run them op by op,
// and the reduction kernel computes each as the kernels it replaces, the
// reductions accumulating in the same order); the merged fusion has
// reduce_* roots of one operand shape and dims (siblings), results of the
// roots' output size or of their operand's size (the loop's values, not
// computed from a root: compiler/codegen/FusionKernels.cpp stores them
// where it reads each element, once); the block stays in SSA order (the
// reductions move up to the loop, whose other readers all come later);
// the planned peak grows by at most kLoopBetweenBytes (the results of the
// reductions moved up over ops other than views, live from the loop on;
// their operands die no later than before). Deterministic: loops in program
// order.
//
// Algorithm, per function's top-level block, in program order: for each
// loop fusion or bare single-result elementwise op L whose results have N
// elements, the kLoopWindow ops after it are tried in program order, then the
// readers of L's results beyond them: a bare reduce_sum/mean/max, or a
// reduction fusion whose roots are all reduce_*, qualifies when its roots
// read N elements, it reads a result of L, all its operands exist at L,
// nothing but views lies between or the results of the reductions taken
// from behind other ops come to at most kLoopBetweenBytes with its own, and
// its roots have the shape and dims of the first one taken (siblings).
// Then one fusion at L (other readers of L's results, wherever they were,
// still follow it): L's body, the reductions' bodies reading L's values,
// CSE; it yields L's results that anything else reads and the reductions'
// results. Cost: O(kLoopWindow + readers of L) per loop plus one merge per
// loop merged.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMerge.h"
#include "passes/Passes.h"

#include "dialects/step/Fusion.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::step {
#define GEN_PASS_DEF_FUSELOOPREDUCTIONS
#include "passes/Passes.h.inc"

namespace {

/// Ops scanned after a loop for the reductions of its results.
constexpr int kLoopWindow = 16;
/// Most bytes of reduction results moved up over other ops.
constexpr int64_t kLoopBetweenBytes = 64 * 1024;

/// The reduce_* roots of a reduction unit (a bare reduce op, or a
/// reduction fusion holding no row op); empty otherwise.
SmallVector<Operation *> rootsOf(Operation *op) {
  if (fusionRole(op) == FusionRole::Reduce)
    return {op};
  auto f = dyn_cast<FusionOp>(op);
  if (!f || f.getKind() != kReductionFusion)
    return {};
  SmallVector<Operation *> roots;
  for (Operation &b : f.getBlock().without_terminator()) {
    FusionRole role = fusionRole(&b);
    if (role == FusionRole::RowOp)
      return {};
    if (role == FusionRole::Reduce)
      roots.push_back(&b);
  }
  return roots;
}

/// What makes sibling roots (one kernel's accumulators): the operand's
/// shape (element types may differ) and the reduced dims.
struct RootKey {
  SmallVector<int64_t> shape;
  Attribute dims;
  bool operator==(const RootKey &o) const {
    return shape == o.shape && dims == o.dims;
  }
};

RootKey keyOf(Operation *root) {
  auto t = cast<RankedTensorType>(root->getOperand(0).getType());
  return {SmallVector<int64_t>(t.getShape()), root->getAttr("dims")};
}

int64_t numel(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.hasStaticShape() ? r.getNumElements() : -1;
}

/// Bytes of `op`'s results; INT64_MAX when one has no static size.
int64_t resultBytes(Operation *op) {
  int64_t b = 0;
  for (Value r : op->getResults()) {
    int64_t n = staticBytes(r.getType());
    if (n == INT64_MAX)
      return INT64_MAX;
    b += n;
  }
  return b;
}

class LoopReductionFuser {
public:
  explicit LoopReductionFuser(Block &block) : block_(block) {}

  void run() {
    SmallVector<Operation *> loops;
    for (Operation &op : block_)
      if (auto f = dyn_cast<FusionOp>(op);
          (f && f.getKind() == kLoopFusion && f.getNumResults() > 0) ||
          (fusionRole(&op) == FusionRole::Elementwise &&
           op.getNumResults() == 1))
        loops.push_back(&op);
    for (Operation *loop : loops)
      tryLoop(loop);
  }

private:
  void tryLoop(Operation *loop) {
    int64_t n = numel(loop->getResult(0).getType());
    if (n <= 0)
      return;
    llvm::SmallPtrSet<Value, 4> results(loop->result_begin(),
                                        loop->result_end());
    SmallVector<Operation *> taken;
    std::optional<RootKey> key;
    // Result bytes of the reductions taken from behind an op that is not a
    // view: they live from the loop on, over that op.
    int64_t moved = 0;
    bool onlyViews = true;
    int scanned = 0;
    Operation *op = loop->getNextNode();
    for (; op && scanned < kLoopWindow; op = op->getNextNode(), ++scanned) {
      SmallVector<Operation *> roots = rootsOf(op);
      bool readsLoop = llvm::any_of(
          op->getOperands(), [&](Value v) { return results.contains(v); });
      int64_t bytes = roots.empty() ? 0 : resultBytes(op);
      if (!roots.empty() && readsLoop && fits(op, roots, loop, n, key) &&
          (onlyViews || bytes <= kLoopBetweenBytes - moved)) {
        key = keyOf(roots.front());
        taken.push_back(op);
        if (!onlyViews)
          moved += bytes;
        continue;
      }
      if (!isa<ReshapeOp, StopGradientOp>(op))
        onlyViews = false;
    }
    // Past the window, only the loop's own readers: step-fuse outlines a
    // reduction at its last epilogue op, which can be far (a bias
    // gradient's cast to f32 read by the clipping norm sits by the
    // optimizer). Each is moved up over other ops, within the byte budget.
    if (op) {
      SmallVector<Operation *> far;
      for (Value r : loop->getResults())
        for (Operation *user : r.getUsers())
          if (Operation *u = block_.findAncestorOpInBlock(*user);
              u && (u == op || op->isBeforeInBlock(u)) &&
              !llvm::is_contained(far, u))
            far.push_back(u);
      llvm::sort(far, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      for (Operation *u : far) {
        SmallVector<Operation *> roots = rootsOf(u);
        int64_t bytes = roots.empty() ? 0 : resultBytes(u);
        if (!roots.empty() && fits(u, roots, loop, n, key) &&
            bytes <= kLoopBetweenBytes - moved) {
          key = keyOf(roots.front());
          taken.push_back(u);
          moved += bytes;
        }
      }
    }
    if (taken.empty())
      return;
    // The fusion sits at the loop: every other reader of the loop's
    // results, and of the reductions', still comes after it.
    SmallVector<Operation *> members{loop};
    members.append(taken.begin(), taken.end());
    fuseUnits(members, loop, kReductionFusion);
  }

  /// Whether reduction unit `op` (roots `roots`) may join `loop`: its
  /// roots read `n` elements and are siblings of `key` (and of each
  /// other), and every operand exists at the loop.
  bool fits(Operation *op, ArrayRef<Operation *> roots, Operation *loop,
            int64_t n, const std::optional<RootKey> &key) {
    RootKey first = keyOf(roots.front());
    if (numel(roots.front()->getOperand(0).getType()) != n ||
        (key && !(*key == first)))
      return false;
    for (Operation *r : roots)
      if (!(keyOf(r) == first))
        return false;
    for (Value v : op->getOperands()) {
      Operation *d = v.getDefiningOp();
      if (d && d != loop && !d->isBeforeInBlock(loop))
        return false;
    }
    return true;
  }

  Block &block_;
};

struct FuseLoopReductionsPass
    : impl::FuseLoopReductionsBase<FuseLoopReductionsPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        LoopReductionFuser(f.getBody().front()).run();
  }
};

} // namespace
} // namespace mlir::step
