//===- Emitters.h - The kernel emitters, one entry per op family -*- C++ -*-===//
//
// Internal to compiler/codegen. Each family function returns the kernel of
// an op it owns and std::nullopt for any other op, so CudaKernels.cpp tries
// them in turn.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_EMITTERS_H
#define STEP_COMPILER_CODEGEN_EMITTERS_H

#include "compiler/codegen/EmitUtil.h"

#include <optional>

namespace step::codegen::detail {

/// unary, binary, compare, select, cast, dropout, reshape, stop_gradient
/// (ElementwiseKernels.cpp).
std::optional<KernelSource> emitElementwiseFamily(mlir::Operation *op,
                                                  const std::string &name);
/// A flat copy of operand 0 into result 0 (any dtype).
KernelSource emitCopy(mlir::Operation *op, const std::string &name);

/// broadcast_in_dim, transpose, slice, concat, pad, iota, embedding
/// (ShapeKernels.cpp).
std::optional<KernelSource> emitShapeFamily(mlir::Operation *op,
                                            const std::string &name);

/// reduce_sum/max/mean, softmax, log_softmax, layer_norm
/// (ReduceKernels.cpp).
std::optional<KernelSource> emitReduceFamily(mlir::Operation *op,
                                             const std::string &name);

/// cross_entropy, cross_entropy_grad, embedding_grad, attention
/// (NNKernels.cpp).
std::optional<KernelSource> emitNNFamily(mlir::Operation *op,
                                         const std::string &name);

/// sgd_update, adamw_update, lamb_update (TrainKernels.cpp).
std::optional<KernelSource> emitTrainFamily(mlir::Operation *op,
                                            const std::string &name);

} // namespace step::codegen::detail

#endif // STEP_COMPILER_CODEGEN_EMITTERS_H
