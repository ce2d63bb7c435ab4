//===- FuseMatmul.cpp - step-fuse's matmul epilogue groups ----------------===//
//
// See FuseMatmul.h. A group only ever holds ops whose every input is
// defined before its matmul's last member and whose outside readers come
// after it (the chain's values are the matmul's and the ops after it; the
// bias broadcast and GELU's input are inputs); step-fuse's outlining
// checks SSA order again before it moves anything.
//
//===----------------------------------------------------------------------===//
#include "passes/FuseMatmul.h"

#include "llvm/ADT/Sequence.h"

namespace mlir::step {
namespace {

struct MatmulGrouper {
  bool geluEpilogues;
  llvm::function_ref<bool(Operation *)> isFree;

  /// Whether a GELU may fold into `mm` through cuBLASLt's aux matrix: one
  /// matrix (a 2-d rhs, so the lhs's leading dims are rows) whose last
  /// dim, the aux leading dim, is a multiple of 8.
  bool auxFits(MatmulOp mm) const {
    return geluEpilogues &&
           cast<RankedTensorType>(mm.getRhs().getType()).getRank() == 2 &&
           !mm.getTransposeA() && mm.getType().hasStaticShape() &&
           mm.getType().getShape().back() % 8 == 0;
  }

  /// The backward: gelu_grad(mm, x) (tanh) as DGELU, and a reduce_sum of
  /// it over every dim but the last (the bias gradient) as DGELU_BGRAD; the
  /// gradient is yielded for its other readers. Empty when it does not fit,
  /// or when the contraction is not known to be over 1 (cuBLASLt has no
  /// DGELU kernels for K = 1, NVIDIA's nvmath-python says and tests).
  MatmulGroup dgelu(MatmulOp mm) const {
    MatmulGroup g;
    auto gg = dyn_cast<GeluGradOp>(*mm->getUsers().begin());
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
    int64_t k = lhs.getShape().back(); // auxFits: the lhs is not transposed
    if (!gg || !isFree(gg) || !auxFits(mm) || ShapedType::isDynamic(k) ||
        k == 1 || gg.getGrad() != mm.getResult() ||
        gg.getX() == mm.getResult() ||
        gg.getApproximate() != GeluApproximation::Tanh)
      return g;
    g.ops.insert(mm);
    g.ops.insert(gg);
    // The sum joins only when the gradient has another reader (cuBLASLt
    // writes D either way, so D must be a result) and gives the vector
    // itself (no kept dims).
    int64_t rank = mm.getType().getRank();
    for (Operation *user : gg->getUsers()) {
      auto sum = dyn_cast<ReduceSumOp>(user);
      if (sum && isFree(sum) && !gg->hasOneUse() &&
          sum.getType().getElementType() == mm.getType().getElementType() &&
          sum.getType().getRank() == 1 &&
          llvm::equal(sum.getDims(), llvm::seq<int64_t>(0, rank - 1))) {
        g.ops.insert(sum);
        break;
      }
    }
    return g;
  }

  /// The forward: matmul -> bias add -> activation.
  MatmulGroup forward(MatmulOp mm) const {
    MatmulGroup g;
    g.ops.insert(mm);
    int64_t last = mm.getType().getRank() - 1;
    Value cur = mm.getResult();
    auto add = dyn_cast<AddOp>(*cur.getUsers().begin());
    if (add && isFree(add)) {
      Value other = add.getLhs() == cur ? add.getRhs() : add.getLhs();
      auto bc = other.getDefiningOp<BroadcastInDimOp>();
      if (bc && isFree(bc) && other != cur &&
          bc.getOperand().getType().getRank() == 1 &&
          bc.getBroadcastDimensions().size() == 1 &&
          bc.getBroadcastDimensions()[0] == last) {
        g.ops.insert(add);
        bool onlyHere = llvm::all_of(
            bc->getUsers(), [&](Operation *u) { return g.ops.contains(u); });
        (onlyHere ? g.ops : g.dups).insert(bc);
        cur = add.getResult();
      }
    }
    if (cur.hasOneUse()) {
      Operation *act = *cur.getUsers().begin();
      auto gelu = dyn_cast<GeluOp>(act);
      if (isFree(act) &&
          (isa<ReluOp>(act) ||
           (gelu && gelu.getApproximate() == GeluApproximation::Tanh)))
        g.ops.insert(act);
    } else if (auxFits(mm)) {
      // GELU_AUX: the GELU joins and its input is yielded as well (the
      // backward's gelu_grad reads it).
      for (Operation *user : cur.getUsers()) {
        auto gelu = dyn_cast<GeluOp>(user);
        if (gelu && isFree(gelu) &&
            gelu.getApproximate() == GeluApproximation::Tanh) {
          g.ops.insert(gelu);
          break;
        }
      }
    }
    return g;
  }
};

} // namespace

void formMatmulGroups(Block &block, bool geluEpilogues,
                      llvm::function_ref<bool(Operation *)> isFree,
                      llvm::function_ref<void(MatmulGroup)> commit) {
  MatmulGrouper grouper{geluEpilogues, isFree};
  for (Operation &op : block) {
    auto mm = dyn_cast<MatmulOp>(op);
    if (!mm || !isFree(mm) || mm.getType().getRank() < 2 || !mm->hasOneUse())
      continue;
    MatmulGroup g = grouper.dgelu(mm);
    if (g.ops.empty())
      g = grouper.forward(mm);
    if (g.ops.size() > 1)
      commit(std::move(g));
  }
}

bool hasProductEpilogue(MatmulOp mm) {
  if (mm.getType().getRank() < 2 || !mm->hasOneUse())
    return false;
  MatmulGrouper grouper{/*geluEpilogues=*/true,
                        [](Operation *) { return true; }};
  return grouper.dgelu(mm).ops.size() > 1 || grouper.forward(mm).ops.size() > 1;
}

} // namespace mlir::step
