//===- FusionKernels.h - Pieces shared by the fused kernel emitters -*- C++
//-*-===//
//
// Internal to compiler/codegen: FusionKernels.cpp (loop and reduce_* roots),
// FusionRowKernels.cpp (row-op roots) and RowChainKernels.cpp (row_chain)
// share how a fusion's results are stored and reductions accumulate.
// emitFusionKernel (Emitters.h) is the entry point.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_FUSIONKERNELS_H
#define STEP_COMPILER_CODEGEN_FUSIONKERNELS_H

#include "compiler/codegen/FusionExpr.h"

#include "dialects/step/StepOps.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace step::codegen::detail {

/// Statements (unindented) computing every yielded value at flat index
/// `idx` and storing yield j as `out<j>[idx]`: the yields must all have
/// the domain's number of elements. Yields of a value in `skip` (those a
/// kernel stores elsewhere: the loss of a cross_entropy_grad's kernel) are
/// left out.
std::string storeYields(mlir::step::FusionOp f, FusionExpr &x,
                        const std::string &idx,
                        llvm::ArrayRef<mlir::Value> skip = {});

/// One reduce_* root's accumulator, as emitReduce (ReduceKernels.cpp)
/// builds it: the same type, identity, combination and rounding.
struct Acc {
  mlir::Operation *root;
  unsigned index = 0; ///< r: the accumulator is the local `acc<r>`
  std::string type, ident, op;
  std::string load(const std::string &local) const { return cast + local; }
  std::string cast;   ///< applied to the operand's local
  std::string result; ///< the rounded result from `acc<r>`, a local
};
/// Root `root` reducing `k` elements per output, accumulating in `acc<r>`.
Acc accumulatorOf(mlir::Operation *root, int64_t k, unsigned r);

/// The kernel of a row_chain fusion (RowChainKernels.cpp).
KernelSource emitRowChainFusion(mlir::step::FusionOp f,
                                const std::string &name);

/// Whether body value `v` is, or is computed from, a value for which `of`
/// holds (walking its definitions back to the block arguments, but not
/// past a value for which `stop` holds).
bool computedFrom(mlir::Value v, llvm::function_ref<bool(mlir::Value)> of,
                  llvm::function_ref<bool(mlir::Value)> stop = nullptr);

/// The kernel of a reduction fusion whose root is the row op `root`
/// (softmax, log_softmax, layer_norm, cross_entropy, cross_entropy_grad);
/// with `loss`, the cross_entropy of a cross_entropy_grad `root`'s logits
/// (step-fuse-loss), whose value is a result the kernel also stores.
KernelSource emitRowOpFusion(mlir::step::FusionOp f, const std::string &name,
                             mlir::Operation *root,
                             mlir::Operation *loss = nullptr);

} // namespace step::codegen::detail

#endif // STEP_COMPILER_CODEGEN_FUSIONKERNELS_H
