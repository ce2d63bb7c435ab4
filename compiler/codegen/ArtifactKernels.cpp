//===- ArtifactKernels.cpp - Put compiled kernels into an artifact --------===//

#include "compiler/codegen/ArtifactKernels.h"

#include "dialects/step/StepOps.h"

#include <map>

namespace step::codegen {

/// A reshape or stop_gradient that step-memory-plan placed on its operand's
/// bytes: a view, which moves nothing and needs no kernel.
static bool isAliasedView(mlir::Operation *op) {
  if (!mlir::isa<mlir::step::ReshapeOp, mlir::step::StopGradientOp>(op))
    return false;
  auto in = mlir::dyn_cast<mlir::OpResult>(op->getOperand(0));
  auto mine = op->getAttrOfType<mlir::DenseI64ArrayAttr>("step.offsets");
  auto theirs =
      in ? in.getOwner()->getAttrOfType<mlir::DenseI64ArrayAttr>("step.offsets")
         : nullptr;
  return mine && theirs && mine[0] == theirs[in.getResultNumber()];
}

CompileStats addKernels(rt::Artifact &artifact, mlir::func::FuncOp f,
                        const NvrtcOptions &options) {
  std::vector<KernelSource> kernels = emitFunctionKernels(f);
  std::map<mlir::Operation *, std::string> kernelOf;
  std::vector<KernelSource> distinct;
  std::map<std::string, bool> seen;
  nlohmann::json launch = nlohmann::json::object();
  for (KernelSource &k : kernels) {
    if (isAliasedView(k.op))
      continue;
    kernelOf[k.op] = k.name;
    if (seen[k.name])
      continue;
    seen[k.name] = true;
    launch[k.name] = {{"grid", k.gridX},
                      {"block", k.blockX},
                      {"shared_bytes", k.sharedBytes},
                      {"params", k.params}};
    for (const KernelSource::Then &t : k.then)
      launch[k.name]["then"].push_back({{"name", k.name + t.suffix},
                                        {"grid", t.gridX},
                                        {"block", t.blockX},
                                        {"shared_bytes", t.sharedBytes}});
    distinct.push_back(k);
  }
  CompileStats stats;
  for (CompiledKernel &c : compileKernels(distinct, options, &stats)) {
    for (auto &[arch, cubin] : c.cubin)
      artifact.sections["cubin." + arch + "." + c.name] = std::move(cubin);
    if (!c.ptx.empty())
      artifact.sections["ptx." + c.name] = std::move(c.ptx);
  }
  // Plan steps are the function's ops in order, without constants.
  size_t k = 0;
  for (mlir::Operation &op : f.getBody().front()) {
    if (mlir::isa<mlir::step::ConstantOp, mlir::func::ReturnOp>(op))
      continue;
    if (k >= artifact.plan.steps.size() ||
        artifact.plan.steps[k].op != op.getName().getStringRef())
      throw rt::Error("addKernels: the plan was not built from @" +
                      f.getName().str());
    auto it = kernelOf.find(&op);
    if (it != kernelOf.end())
      artifact.plan.steps[k].kernel = it->second;
    ++k;
  }
  artifact.meta["kernels"] = launch;
  artifact.meta["archs"] = options.archs;
  artifact.meta["ptx_arch"] = options.ptxArch;
  artifact.meta["nvrtc"] = nvrtcVersionString();
  return stats;
}

} // namespace step::codegen
