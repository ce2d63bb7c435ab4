//===- FuseBiasGrad.cpp - step-fuse-bias-grad: bias gradients in cuBLASLt -===//
//
// step-fuse-bias-grad folds a bias gradient that no generated kernel can
// compute on the way into the weight gradient's matmul, as one
// `step.fusion "matmul"` that the CUDA backend runs as one cuBLASLt call
// with the BGRADA (the sum of the rhs over the contraction) or BGRADB (of
// the lhs) epilogue: the gradient is read once for both. A bias gradient
// whose gradient an elementwise or row op makes is left to the passes
// that sum it inside that op's kernel (GPT-2's output projections: the
// layer-norm gradient's row chain; its MLP: the GELU backward's loop
// reduction); one made by a matmul or an attention kernel (GPT-2's q/k/v
// bias: the attention gradient writes the [B*T, 3C] gradient) was read
// again by a reduction kernel of its own. It runs after
// step-fuse-attention and before step-fuse, which then places the sum's
// readers (AMP's cast to f32) with the optimizer's kernels as usual.
//
// Guarantees: results are unchanged. The fusion holds the matmul and a
// reduce_sum of the very elements the replaced sum added, in the same
// order: a sum of X over its leading dims becomes the sum over dim 0 of
// the matmul's reshape of X to [rows, last], which the row-major walk of
// every backend visits identically. The block stays in SSA order: the
// fusion sits at the matmul, or, when an op between the sum and the
// matmul reads the sum, the matmul (with a reshape of its operand) moves
// up to the sum, where its operands already exist. Deterministic:
// matmuls in program order, each operand's sums by position.
//
// Algorithm, per function's top-level block: for each bare step.matmul
// of 2-d operands with static shapes, the rhs then the lhs: a bare
// reduce_sum of that operand over its contraction dim, its rows (an
// untransposed rhs, a transposed lhs: the layouts cuBLASLt's BGRADA and
// BGRADB take; the other two are left alone; neither over a contraction
// of one, nor BGRADB of a one-row product), or, when the
// operand is a reshape of X merging X's leading dims into its rows, a
// bare reduce_sum of X over every dim but the last; into a rank-1 tensor
// of the matmul's element type (cuBLASLt writes the bias gradient in the
// result's type); of a value that a block argument, a matmul, an
// attention fusion or another op of no fusion role makes (through views).
// The first such sum (program order) whose readers follow the matmul, or
// that precedes it with the matmul's operands there, joins. At most one
// sum per matmul (cuBLASLt has one bias pointer); not to a matmul whose
// product step-fuse would give an epilogue (a bias add, an activation),
// whose operands are one value, or with an empty operand or product. Cost: O(users of the
// two operands) per matmul; the graph loses one op per fusion.
//
// Off unless asked (stepc --bgrad-epilogues): the epilogue has not yet
// run on a GPU. What cuBLASLt offers for each layout is only known there;
// the runtime names this option when the heuristic finds no algorithm.
//
//===----------------------------------------------------------------------===//

#include "passes/FuseMatmul.h"
#include "passes/FusionMerge.h"
#include "passes/Passes.h"

#include "dialects/step/Fusion.h"

#include "llvm/ADT/Sequence.h"

namespace mlir::step {
#define GEN_PASS_DEF_FUSEBIASGRAD
#include "passes/Passes.h.inc"

namespace {

/// Whether `v` (through views) is made by an op whose kernel could also
/// sum it: an elementwise, view, reduction or row op, or a loop, reduction
/// or row_chain fusion of them.
bool madeByFusableKernel(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isa<ReshapeOp>(def))
    def = def->getOperand(0).getDefiningOp();
  if (!def)
    return false;
  if (auto f = dyn_cast<FusionOp>(def))
    return f.getKind() == kLoopFusion || f.getKind() == kReductionFusion ||
           f.getKind() == kRowChainFusion;
  return fusionRole(def) != FusionRole::None;
}

class BiasGradFuser {
public:
  explicit BiasGradFuser(Block &block) : block_(block) {}

  void run() {
    SmallVector<MatmulOp> matmuls;
    for (Operation &op : block_)
      if (auto mm = dyn_cast<MatmulOp>(op))
        matmuls.push_back(mm);
    for (MatmulOp mm : matmuls)
      tryMatmul(mm);
  }

private:
  void tryMatmul(MatmulOp mm) {
    auto lt = cast<RankedTensorType>(mm.getLhs().getType());
    auto rt = cast<RankedTensorType>(mm.getRhs().getType());
    auto ct = cast<RankedTensorType>(mm.getType());
    // Matrices only; an operand read twice (lhs == rhs) would leave the
    // runtime no way to tell which the sum is of; an empty one makes no
    // cuBLASLt call; an unread product would leave a fusion without its
    // matmul; one with an epilogue of its own keeps it (step-fuse).
    if (lt.getRank() != 2 || rt.getRank() != 2 || !lt.hasStaticShape() ||
        !rt.hasStaticShape() || !ct.hasStaticShape() ||
        mm.getLhs() == mm.getRhs() || lt.getNumElements() == 0 ||
        rt.getNumElements() == 0 || ct.getNumElements() == 0 ||
        mm->use_empty() || hasProductEpilogue(mm))
      return;
    // The rhs [k, n] gives a vector of n: BGRADA; the transposed lhs [k, m]
    // one of m: BGRADB. cuBLASLt (column-major: A is our rhs, TRANSA our
    // transpose_b; B our lhs, TRANSB our transpose_a) has BGRADA kernels
    // for an untransposed A only and BGRADB ones for a transposed B only
    // (NVIDIA's nvmath-python tests say so; the layouts Paddle, Apex and
    // TransformerEngine use), so a transposed rhs or an untransposed lhs
    // keeps its sum apart.
    // NVIDIA's tests also show no kernels for a contraction of one (K = 1,
    // before cuBLASLt 12.3.4) nor BGRADB for a product of one row (m = 1);
    // those sums stay apart too (a copy, and a vector of one).
    Value operand;
    const int64_t kDim = 0; // the rows of both forms
    const int64_t contraction = lt.getShape()[mm.getTransposeA() ? 0 : 1];
    if (contraction == 1)
      return;
    ReduceSumOp old;
    if (!mm.getTransposeB()) {
      operand = mm.getRhs();
      old = find(mm, operand, kDim, ct.getShape()[1]);
    }
    if (!old && mm.getTransposeA() && ct.getShape()[0] != 1) {
      operand = mm.getLhs();
      old = find(mm, operand, kDim, ct.getShape()[0]);
    }
    if (!old)
      return;
    if (!readersFollow(old, mm)) {
      // Up to the sum: a reshape of an operand made after it comes along.
      for (Value v : mm->getOperands())
        if (Operation *d = v.getDefiningOp(); d && old->isBeforeInBlock(d))
          d->moveBefore(old);
      mm->moveAfter(old);
    }
    OpBuilder b(mm->getContext());
    b.setInsertionPointAfter(mm);
    auto sum = b.create<ReduceSumOp>(old.getLoc(), operand,
                                     b.getDenseI64ArrayAttr({kDim}), false);
    old.getResult().replaceAllUsesWith(sum.getResult());
    old.erase();
    fuseUnits({mm.getOperation(), sum.getOperation()}, mm, kMatmulFusion);
  }

  /// The first bare sum of `operand` over `kDim` (or of the tensor it
  /// reshapes, over that tensor's leading dims) into a vector of `length`
  /// elements of the matmul's type, of a value no fusable kernel makes,
  /// that can sit with `mm`; null when there is none.
  ReduceSumOp find(MatmulOp mm, Value operand, int64_t kDim, int64_t length) {
    Type elem = mm.getType().getElementType();
    SmallVector<ReduceSumOp> found;
    auto collect = [&](Value summed, ArrayRef<int64_t> dims) {
      if (madeByFusableKernel(summed))
        return;
      for (Operation *user : summed.getUsers()) {
        auto sum = dyn_cast<ReduceSumOp>(user);
        if (!sum || sum->getBlock() != &block_ || sum.getDims() != dims)
          continue;
        auto t = cast<RankedTensorType>(sum.getType());
        if (t.getRank() != 1 || t.getShape()[0] != length ||
            t.getElementType() != elem ||
            !(readersFollow(sum, mm) || canHoist(mm, sum)))
          continue;
        found.push_back(sum);
      }
    };
    collect(operand, {kDim});
    // A sum over the leading dims of X, where the matmul reads X's rows.
    if (auto view = operand.getDefiningOp<ReshapeOp>(); view && kDim == 0) {
      Value x = view.getOperand();
      auto xt = cast<RankedTensorType>(x.getType());
      auto ot = cast<RankedTensorType>(operand.getType());
      if (xt.getRank() >= 2 && xt.getShape().back() == ot.getShape()[1])
        collect(x, llvm::to_vector(llvm::seq<int64_t>(0, xt.getRank() - 1)));
    }
    if (found.empty())
      return {};
    return *llvm::min_element(found, [](ReduceSumOp a, ReduceSumOp b) {
      return a->isBeforeInBlock(b);
    });
  }

  /// Whether every reader of `sum` comes after `mm` (the fusion sits at
  /// the matmul).
  bool readersFollow(ReduceSumOp sum, MatmulOp mm) {
    for (Operation *user : sum->getUsers()) {
      Operation *u = block_.findAncestorOpInBlock(*user);
      if (!u || !mm->isBeforeInBlock(u))
        return false;
    }
    return true;
  }

  /// Whether `mm` may move up to just after `sum`: the sum comes first and
  /// each operand exists there, or is a reshape (moved along) of a value
  /// that does.
  bool canHoist(MatmulOp mm, ReduceSumOp sum) {
    if (!sum->isBeforeInBlock(mm))
      return false;
    auto existsAt = [&](Value v) {
      Operation *d = v.getDefiningOp();
      return !d || d->isBeforeInBlock(sum);
    };
    return llvm::all_of(mm->getOperands(), [&](Value v) {
      auto view = v.getDefiningOp<ReshapeOp>();
      return existsAt(v) || (view && existsAt(view.getOperand()));
    });
  }

  Block &block_;
};

struct FuseBiasGradPass : impl::FuseBiasGradBase<FuseBiasGradPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        BiasGradFuser(f.getBody().front()).run();
  }
};

} // namespace
} // namespace mlir::step
