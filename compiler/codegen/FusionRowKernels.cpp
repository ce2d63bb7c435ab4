//===- FusionRowKernels.cpp - Row-op roots of reduction fusions -----------===//
//
// A reduction fusion whose root is softmax, log_softmax, layer_norm,
// cross_entropy or cross_entropy_grad runs the root's own row kernel
// (ReduceKernels.cpp, NNKernels.cpp) through a RowIO (Emitters.h) that
// swaps two things:
//  - the read of the row input (x, logits) calls `<name>_x(params, idx)`,
//    a device function computing the prologue (FusionExpr) at flat index
//    idx of x; the other operands (gamma, beta, labels, the loss gradient)
//    must be fusion inputs and are read where the op's kernel reads them;
//  - the store of result element idx calls `<name>_store(params, idx, v)`,
//    which rounds v to the root's type (as the unfused store), binds it as
//    the root's value at idx, computes every yielded value (root result or
//    epilogue) at idx and stores it.
// So the statistics, their order of summation and the launch are the
// unfused kernel's, and every element is bitwise what the unfused chain of
// kernels computes. Cost: the row kernel reads x in two or three passes;
// each pass recomputes the prologue (ALU work instead of an intermediate
// tensor in memory).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/FusionKernels.h"

#include "compiler/codegen/Emitters.h"
#include "runtime/Tensor.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

KernelSource emitRowOpFusion(ops::FusionOp f, const std::string &name,
                             mlir::Operation *root) {
  std::string rootName = root->getName().getStringRef().str();
  RowIO io;
  io.paramsOf = f;
  for (unsigned k = 1; k < root->getNumOperands(); ++k) {
    auto arg = mlir::dyn_cast<mlir::BlockArgument>(root->getOperand(k));
    if (!arg || arg.getOwner() != &f.getBlock())
      throw rt::Error("codegen: operand " + std::to_string(k) + " of '" +
                      rootName + "' in a fusion must be a fusion input "
                      "(only the row input may have a prologue)");
    io.operands.push_back("in" + std::to_string(arg.getArgNumber()));
  }
  mlir::Value x = root->getOperand(0), result = root->getResult(0);
  int64_t m = numelOf(result);
  for (mlir::Value y : f.getYield()->getOperands())
    if (numelOf(y) != m)
      throw rt::Error("codegen: a result of a fusion around '" + rootName +
                      "' does not have the size of its result");

  // The device functions take the kernel's own parameters.
  KernelSource sig;
  PreludeNeeds needs;
  std::string params = paramList(f, sig, needs, /*restrict=*/true);
  std::string args;
  for (const std::string &p : sig.params)
    args += p + ", ";

  FusionExpr pro(f, needs);
  std::string xLocal = pro.valueAt(x, "idx");
  std::string xCode = pro.takeCode("  ");
  io.preamble = "static __device__ __forceinline__ float " + name + "_x(" +
                params + ", long long idx) {\n" + pro.takeHoisted("  ") +
                xCode + "  return " + xLocal + ";\n}\n";

  FusionExpr epi(f, needs);
  epi.bind(result, "idx", "res");
  std::string store = storeYields(f, epi, "idx");
  io.preamble += "static __device__ __forceinline__ void " + name +
                 "_store(" + params + ", long long idx, float value) {\n" +
                 "  const float res = " +
                 FusionExpr::toLocal(result,
                                     FusionExpr::toStorage(result, "value")) +
                 "; // rounded as the unfused store\n" +
                 epi.takeHoisted("  ") + indent(store, "  ") + "}\n";
  io.needs = needs;
  io.x = [name, args](const std::string &idx) {
    return name + "_x(" + args + idx + ")";
  };
  io.store = [name, args](const std::string &idx, const std::string &v) {
    return name + "_store(" + args + idx + ", " + v + ");";
  };
  // A plain read (an input, or an input through a widening cast to f32,
  // reshapes aside) and a plain store (the result alone, or cast from f32)
  // let the row kernel use 16-byte vectors; the values are the same bits.
  auto input = [&](mlir::Value v) {
    while (auto view = v.getDefiningOp<ops::ReshapeOp>()) // same flat index
      v = view->getOperand(0);
    auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
    return arg && arg.getOwner() == &f.getBlock() ? arg : mlir::BlockArgument();
  };
  auto widening = [](mlir::Value from, mlir::Value to) {
    return elemOf(to.getType()) == Elem::F32 &&
           (elemOf(from.getType()) == Elem::BF16 ||
            elemOf(from.getType()) == Elem::F16);
  };
  mlir::BlockArgument xArg = input(x);
  if (auto cast = x.getDefiningOp<ops::CastOp>();
      cast && widening(cast->getOperand(0), x))
    xArg = input(cast->getOperand(0));
  if (xArg) {
    io.xPtr = "in" + std::to_string(xArg.getArgNumber());
    io.xElem = elemOf(xArg.getType());
  }
  auto yields = f.getYield()->getOperands();
  if (yields.size() == 1) {
    mlir::Value y = yields[0];
    auto cast = y.getDefiningOp<ops::CastOp>();
    if (y == result || (cast && cast->getOperand(0) == result &&
                        elemOf(result.getType()) == Elem::F32)) {
      io.outPtr = "out0";
      io.outElem = elemOf(y.getType());
    }
  }
  if (auto ks = emitNormKernel(root, name, io))
    return *ks;
  if (auto ks = emitLossKernel(root, name, io))
    return *ks;
  throw rt::Error("codegen: '" + rootName + "' is not a row-op root");
}

} // namespace step::codegen::detail
