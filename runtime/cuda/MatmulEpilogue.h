//===- MatmulEpilogue.h - A matmul fusion as one cuBLASLt call --*- C++ -*-===//
//
// step-fuse groups a step.matmul with its bias add and activation into a
// `matmul` fusion (dialects/step/StepStructureOps.td). The CUDA backend runs
// such a fusion as one cuBLASLt matmul with an epilogue; this file reads the
// fusion's body plan and says which epilogue that is, or refuses a body
// cuBLASLt cannot run. Pure (no CUDA call, no CUDA header), so it builds and
// is tested everywhere, with or without the toolkit. Cost: one pass over the
// body's steps (at most four).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CUDA_MATMULEPILOGUE_H
#define STEP_RUNTIME_CUDA_MATMULEPILOGUE_H

#include "runtime/Plan.h"

namespace step::rt::cuda {

/// What cuBLASLt applies to the product before storing it. Bias is added
/// first, then the activation (CUBLASLT_EPILOGUE_RELU_BIAS, _GELU_BIAS);
/// Gelu is the tanh approximation, the only GELU cuBLASLt has. GeluAux*
/// also store the activation's input (CUBLASLT_EPILOGUE_GELU_AUX[_BIAS]:
/// training keeps it for the backward); DGelu multiplies the product by
/// GELU's derivative at an aux input (step.gelu_grad of the product,
/// CUBLASLT_EPILOGUE_DGELU) and DGeluBgrad also sums that over the rows
/// (the bias gradient, CUBLASLT_EPILOGUE_DGELU_BGRAD).
enum class MatmulEpilogue {
  None,
  Bias,
  Relu,
  ReluBias,
  Gelu,
  GeluBias,
  GeluAux,
  GeluAuxBias,
  DGelu,
  DGeluBgrad,
  BgradA, ///< the bias gradient: the rhs (cuBLASLt's A) summed over k
  BgradB  ///< the lhs (cuBLASLt's B) summed over k
};

/// "none", "bias", "relu", "relu_bias", "gelu", "gelu_bias", "gelu_aux",
/// "gelu_aux_bias", "dgelu", "dgelu_bgrad", "bgrada", "bgradb".
const char *matmulEpilogueName(MatmulEpilogue e);

/// Whether `step` is a step.fusion of kind "matmul" (whatever its body).
bool isMatmulFusion(const PlanStep &step);

/// A `matmul` fusion step, read from its body.
struct FusedMatmul {
  /// The body's step.matmul (its attrs hold transpose_a/transpose_b); it
  /// points into the fusion step's body, which must outlive this.
  const PlanStep *matmul = nullptr;
  /// The fusion operands (indices into the step's operands) that are the
  /// matmul's lhs and rhs, its bias (-1 without a bias) and DGelu's aux
  /// input, GELU's input (-1 unless DGelu*).
  int lhs = -1, rhs = -1, bias = -1, aux = -1;
  /// The fusion results (indices into the step's results): D, GELU's input
  /// stored by GeluAux* (else -1), the bias gradient of DGeluBgrad or
  /// Bgrad* (else -1).
  int result = 0, auxResult = -1, biasGrad = -1;
  MatmulEpilogue epilogue = MatmulEpilogue::None;
};

/// Reads a `matmul` fusion step: its body must be a step.matmul of two body
/// arguments, optionally followed by `add(matmul, broadcast_in_dim(b))` (or
/// the operands swapped) with `b` a rank-1 body argument of the result's
/// last dim broadcast along that dim, optionally followed by `relu` or
/// `gelu` with approximate = "tanh"; the last value is the one result and
/// every other value has exactly one use, except that the value a tanh
/// `gelu` reads may also be a result (GeluAux*). Or: the step.matmul
/// followed by `gelu_grad(product, x)` (tanh; `x` a body argument of the
/// product's type), its result a body result, optionally also read by one
/// `reduce_sum` over every dim but the last whose result is a body result
/// (DGelu, DGeluBgrad). Or: the step.matmul of two matrices, its product a
/// body result, and one `reduce_sum` of its rhs (BgradA) or lhs (BgradB)
/// over the contraction dim into a rank-1 body result of the product's
/// type (the bias gradient; stepc --bgrad-epilogues). Throws rt::Error
/// naming `where` and what does not fit (a different op, an erf GELU, a
/// bias over another dim, an intermediate used twice or returned, dtypes
/// that differ).
FusedMatmul readMatmulFusion(const PlanStep &fusion, const std::string &where);

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_MATMULEPILOGUE_H
