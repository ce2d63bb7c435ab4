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
/// Gelu is the tanh approximation, the only GELU cuBLASLt has.
enum class MatmulEpilogue { None, Bias, Relu, ReluBias, Gelu, GeluBias };

/// "none", "bias", "relu", "relu_bias", "gelu", "gelu_bias".
const char *matmulEpilogueName(MatmulEpilogue e);

/// Whether `step` is a step.fusion of kind "matmul" (whatever its body).
bool isMatmulFusion(const PlanStep &step);

/// A `matmul` fusion step, read from its body.
struct FusedMatmul {
  /// The body's step.matmul (its attrs hold transpose_a/transpose_b); it
  /// points into the fusion step's body, which must outlive this.
  const PlanStep *matmul = nullptr;
  /// The fusion operands (indices into the step's operands) that are the
  /// matmul's lhs and rhs, and its bias (-1 without a bias).
  int lhs = -1, rhs = -1, bias = -1;
  MatmulEpilogue epilogue = MatmulEpilogue::None;
};

/// Reads a `matmul` fusion step: its body must be a step.matmul of two body
/// arguments, optionally followed by `add(matmul, broadcast_in_dim(b))` (or
/// the operands swapped) with `b` a rank-1 body argument of the result's
/// last dim broadcast along that dim, optionally followed by `relu` or
/// `gelu` with approximate = "tanh"; the last value is the one result and
/// every other value has exactly one use. Throws rt::Error naming `where`
/// and what does not fit (a different op, an erf GELU, a bias over another
/// dim, an intermediate used twice or returned, dtypes that differ).
FusedMatmul readMatmulFusion(const PlanStep &fusion, const std::string &where);

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_MATMULEPILOGUE_H
