//===- ArtifactKernels.h - Put compiled kernels into an artifact -*- C++ -*-===//
//
// After buildArtifact (compiler/pipeline/PlanBuilder.h) has lowered a
// function to a plan, addKernels emits the function's CUDA kernels, compiles
// them with NVRTC and stores them in the artifact (docs/artifact.md):
// sections "cubin.<arch>.<kernel>" and "ptx.<kernel>" (one per distinct
// kernel), meta "kernels" (launch configuration by kernel name) and "archs",
// and the kernel name on every plan step that has one.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_ARTIFACTKERNELS_H
#define STEP_COMPILER_CODEGEN_ARTIFACTKERNELS_H

#include "compiler/codegen/Nvrtc.h"
#include "runtime/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace step::codegen {

/// `artifact.plan` must have been built from `f`. Throws rt::Error on a
/// compile failure (the message names the saved source and log).
CompileStats addKernels(rt::Artifact &artifact, mlir::func::FuncOp f,
                        const NvrtcOptions &options);

} // namespace step::codegen

#endif // STEP_COMPILER_CODEGEN_ARTIFACTKERNELS_H
