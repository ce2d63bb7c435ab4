//===- CudaKernels.cpp - Dispatch of step ops to their kernel emitters ----===//
//
// Each op family has its own file (ElementwiseKernels.cpp, ShapeKernels.cpp,
// ReduceKernels.cpp, NNKernels.cpp, TrainKernels.cpp); this one tries them
// in turn and says which ops need no kernel. A step.fusion is one kernel:
// loop and reduction fusions (FusionKernels.cpp), multi_tensor fusions
// (MultiTensorKernels.cpp); a matmul fusion is one cuBLASLt call; an
// attention fusion one attention kernel (AttentionPorts.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/CudaKernels.h"

#include "compiler/codegen/Emitters.h"
#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

namespace step::codegen {

namespace ops = mlir::step;

std::optional<KernelSource> emitKernel(mlir::Operation *op,
                                       const std::string &name) {
  if (!mlir::isa<ops::StepDialect>(op->getDialect()))
    return std::nullopt; // func.return and other structure
  if (mlir::isa<ops::MatmulOp, ops::ConstantOp>(op))
    return std::nullopt; // cuBLASLt; bytes in the artifact
  if (mlir::isa<ops::AllReduceOp, ops::ReduceScatterOp, ops::AllGatherOp,
                ops::LocalShardOp>(op))
    return std::nullopt; // the runtime's collectives (docs/distributed.md)
  if (mlir::isa<ops::OffloadOp, ops::ReloadOp>(op))
    return std::nullopt; // the runtime's copies on its copy streams
  if (auto f = mlir::dyn_cast<ops::FusionOp>(op)) {
    llvm::StringRef kind = f.getKind();
    if (kind == ops::kMatmulFusion)
      return std::nullopt; // one cuBLASLt call with an epilogue
    if (kind == ops::kAttentionFusion) // strided views of its operands
      return detail::emitAttentionFamily(op, name);
    if (kind != ops::kMultiTensorFusion)
      return detail::emitFusionKernel(f, name); // loop, reduction
    if (auto ks = detail::emitMultiTensorFamily(op, name))
      return ks;
    throw rt::Error("codegen: no CUDA lowering for this multi_tensor fusion");
  }
  for (auto family : {detail::emitElementwiseFamily, detail::emitShapeFamily,
                      detail::emitReduceFamily, detail::emitNNFamily,
                      detail::emitTrainFamily})
    if (auto ks = family(op, name))
      return ks;
  throw rt::Error("codegen: no CUDA lowering for " +
                  op->getName().getStringRef().str());
}

std::vector<KernelSource> emitFunctionKernels(mlir::func::FuncOp func) {
  // Emitted under a placeholder name first: the final name is derived from
  // the code, so ops with the same shapes and attributes (the layers of a
  // model) get the same kernel, which NVRTC and the cache then see once.
  const std::string placeholder = "STEPJIT_KERNEL_NAME";
  std::vector<KernelSource> kernels;
  for (mlir::Operation &op : func.getBody().front()) {
    // Computed on the host CPU (step-offload-optimizer): no kernel.
    if (op.hasAttr("step.host"))
      continue;
    auto ks = emitKernel(&op, placeholder);
    if (!ks)
      continue;
    llvm::SHA256 h;
    h.update(ks->source);
    std::string name = op.getName().stripDialect().str() + "_" +
                       llvm::toHex(h.final(), /*LowerCase=*/true).substr(0, 16);
    for (size_t at; (at = ks->source.find(placeholder)) != std::string::npos;)
      ks->source.replace(at, placeholder.size(), name);
    ks->name = name;
    ks->op = &op;
    kernels.push_back(std::move(*ks));
  }
  return kernels;
}

} // namespace step::codegen
