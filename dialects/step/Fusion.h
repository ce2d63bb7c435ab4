//===- Fusion.h - What may go into a step.fusion ----------------*- C++ -*-===//
//
// The one classification of step ops by their role in a fusion, shared by
// the step.fusion verifier, step-fuse and the fusion code generator, so the
// three never disagree about what a `loop` or `reduction` body may hold.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_DIALECTS_STEP_FUSION_H
#define STEP_DIALECTS_STEP_FUSION_H

#include "mlir/IR/Operation.h"

namespace mlir::step {

enum class FusionRole {
  Elementwise, ///< unary, binary, compare, select, cast, dropout,
               ///< stop_gradient: element i of the result from element i
  View,        ///< broadcast_in_dim, reshape, iota: an index map (or the
               ///< index itself), no arithmetic
  Reduce,      ///< reduce_sum, reduce_mean, reduce_max
  RowOp,       ///< softmax, log_softmax, layer_norm, cross_entropy,
               ///< cross_entropy_grad: a row-wise normalization or loss
  Update,      ///< sgd_update, adamw_update, lamb_update
  None,        ///< everything else (matmul, attention, gathers, ...)
};

FusionRole fusionRole(Operation *op);

/// Elementwise ops whose cost is a few ALU instructions (no transcendental,
/// division or RNG): step-fuse may duplicate these into several consumers.
bool isCheapElementwise(Operation *op);

/// The fusion kinds (the `kind` attribute of step.fusion).
inline constexpr const char *kLoopFusion = "loop";
inline constexpr const char *kReductionFusion = "reduction";
inline constexpr const char *kMultiTensorFusion = "multi_tensor";
inline constexpr const char *kMatmulFusion = "matmul";

} // namespace mlir::step

#endif // STEP_DIALECTS_STEP_FUSION_H
