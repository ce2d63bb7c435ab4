//===- CudaKernels.h - One CUDA C++ kernel per step op ----------*- C++ -*-===//
//
// `emitKernel` lowers one op of a flat step function (static shapes) to the
// source of one `extern "C" __global__` kernel plus how to launch it. The
// runtime launches one kernel per op (matmul goes to cuBLASLt instead).
//
// Kernel ABI (docs/codegen.md has the details):
//  - parameters are device pointers, operands first then results, by index:
//    "in0", "in1", ..., "out0", ...; nothing else is passed: shapes, strides
//    and attributes are compile-time constants of the source;
//  - launch with a 1-D grid of `gridX` blocks of `blockX` threads and
//    `sharedBytes` of dynamic shared memory; every kernel is correct for the
//    grid it names (grid-stride loops), never for another;
//  - buffers are 16-byte aligned; an output may alias an input only for
//    elementwise ops and optimizer updates (same index read before write);
//  - f16/bf16 values are computed in f32 and rounded to nearest even on
//    store; reductions accumulate in f32 (LAMB's norms in f64).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_CUDAKERNELS_H
#define STEP_COMPILER_CODEGEN_CUDAKERNELS_H

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace step::codegen {

/// The source of one kernel and its launch configuration.
struct KernelSource {
  std::string name;   ///< the extern "C" entry point
  std::string source; ///< a complete CUDA C++ translation unit
  int64_t gridX = 1, blockX = 1;
  int64_t sharedBytes = 0; ///< dynamic shared memory per block
  /// Pointer parameters in order: "in0", ..., "out0", ...
  std::vector<std::string> params;
  /// The op it was emitted for (set by emitFunctionKernels).
  mlir::Operation *op = nullptr;
  /// Further entry points of the same source, launched in order right
  /// after this one with the same parameters: the phases of a step that
  /// need every block of the previous phase finished (attention_grad's
  /// dk/dv after the softmax statistics of every query row). Each is named
  /// `name + suffix` in the source.
  struct Then {
    std::string suffix;
    int64_t gridX = 1, blockX = 1, sharedBytes = 0;
  };
  std::vector<Then> then;
};

/// The kernel of `op`, named `name` (a C identifier), or std::nullopt for
/// ops that need none: step.matmul and "matmul" step.fusions (cuBLASLt),
/// step.constant (bytes in the artifact) and ops outside the step dialect
/// (func.return). A "loop", "reduction" or "multi_tensor" step.fusion is
/// one kernel (docs/codegen.md, "Fused kernels"). Throws
/// rt::Error for a dynamic shape or a step op without a CUDA lowering.
std::optional<KernelSource> emitKernel(mlir::Operation *op,
                                       const std::string &name);

/// The kernels of the ops of `func`'s body that need one, in program order,
/// each named "<mnemonic>_<16 hex digits of the SHA-256 of its code>": ops
/// with equal shapes and attributes share a name and a source (so a
/// kernel with module-scope state, EmitUtil.h, must not run concurrently
/// with itself; one stream per step guarantees it).
std::vector<KernelSource> emitFunctionKernels(mlir::func::FuncOp func);

} // namespace step::codegen

#endif // STEP_COMPILER_CODEGEN_CUDAKERNELS_H
