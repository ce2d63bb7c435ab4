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
//    epilogue) at idx and stores it. Where a result is made from x (the
//    residual sum a layer_norm fusion yields), `<name>_storex(params, idx,
//    v, xval)` takes x's value too, for a kernel that holds it (layer_norm's
//    warp row in registers), instead of computing the prologue again: GPT-2
//    124M's residual + layer_norm kernel no longer re-reads its two inputs
//    to store the sum (sm_90: 78 -> 64-66 registers).
// With a loss (step-fuse-loss: a cross_entropy of a cross_entropy_grad
// root's logits and targets), the gradient's kernel also keeps each row's
// loss and stores it through `<name>_lstore` (RowIO::lossStore), which
// computes the results made from the loss (an epilogue of the loss's
// size): one read of the logits for both.
// So the statistics, their order of summation and the launch are the
// unfused kernel's, and every element is bitwise what the unfused chain of
// kernels computes (a loss kept by the gradient's kernel: its rows' losses
// are the same bits, their sum is taken over the gradient's grid, so a
// mean or sum may differ from the loss kernel's in the last bits). Cost: the
// row kernel reads x in two or three passes; each pass recomputes the prologue
// (ALU work instead of an intermediate tensor in memory).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/FusionKernels.h"

#include "compiler/codegen/Emitters.h"
#include "runtime/Tensor.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

KernelSource emitRowOpFusion(ops::FusionOp f, const std::string &name,
                             mlir::Operation *root, mlir::Operation *loss) {
  std::string rootName = root->getName().getStringRef().str();
  RowIO io;
  io.paramsOf = f;
  auto yields = f.getYield()->getOperands();
  // The loss (step-fuse-loss): the same logits and targets (what the
  // kernel reads once for both); the results computed from it (the loss,
  // or its epilogue: scaled, averaged over micro-batches) are stored by
  // `<name>_lstore`, the others by `<name>_store`.
  mlir::Value lossValue = loss ? loss->getResult(0) : mlir::Value();
  std::vector<mlir::Value> lossYields, rowYields;
  auto reads = [](mlir::Value v, mlir::Value of) {
    return computedFrom(v, [&](mlir::Value w) { return w == of; });
  };
  for (mlir::Value y : yields)
    (loss && reads(y, lossValue) ? lossYields : rowYields).push_back(y);
  if (loss) {
    auto ce = mlir::cast<ops::CrossEntropyOp>(loss);
    auto grad = mlir::cast<ops::CrossEntropyGradOp>(root);
    if (ce.getLogits() != grad.getLogits() ||
        ce.getTargets() != grad.getTargets() ||
        ce.getReduction() != grad.getReduction() ||
        ce.getIgnoreIndexOrDefault() != grad.getIgnoreIndexOrDefault())
      throw rt::Error("codegen: the cross_entropy and cross_entropy_grad of "
                      "a fusion must read the same logits and targets with "
                      "the same reduction and ignore_index");
    if (lossYields.empty())
      throw rt::Error("codegen: no result of a fusion is computed from its "
                      "cross_entropy");
    for (mlir::Value y : lossYields)
      if (numelOf(y) != numelOf(lossValue) || reads(y, root->getResult(0)))
        throw rt::Error("codegen: a result of a fusion computed from its "
                        "cross_entropy must have the loss's size and not "
                        "read the gradient");
  }
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
  for (mlir::Value y : rowYields)
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

  // `<name><fn>(params, idx, value[, xval])`: `value` rounded as the
  // unfused store of `bound` would, then every yield but those of `skip` at
  // idx; with `withX`, x's value at idx is the parameter xval (the same
  // bits as `<name>_x` computes).
  auto storeFn = [&](const std::string &fn, mlir::Value bound,
                     llvm::ArrayRef<mlir::Value> skip, bool withX) {
    FusionExpr epi(f, needs);
    epi.bind(bound, "idx", "res");
    if (withX)
      epi.bind(x, "idx", "xval");
    std::string store = storeYields(f, epi, "idx", skip);
    io.preamble +=
        "static __device__ __forceinline__ void " + name + fn + "(" + params +
        ", long long idx, float value" + (withX ? ", float xval" : "") +
        ") {\n" + "  const float res = " +
        FusionExpr::toLocal(bound, FusionExpr::toStorage(bound, "value")) +
        "; // rounded as the unfused store\n" + epi.takeHoisted("  ") +
        indent(store, "  ") + "}\n";
  };
  storeFn("_store", result, lossYields, false);
  // Results made from x other than through the root (the residual sum
  // beside the norm): a kernel holding x may hand it over.
  bool yieldsX = llvm::any_of(rowYields, [&](mlir::Value y) {
    return computedFrom(
        y, [&](mlir::Value w) { return w == x; },
        [&](mlir::Value w) { return w == result; });
  });
  if (yieldsX && FusionExpr::localType(x) == "float") {
    storeFn("_storex", result, lossYields, true);
    io.storeX = [name, args](const std::string &idx, const std::string &v,
                             const std::string &xval) {
      return name + "_storex(" + args + idx + ", " + v + ", " + xval + ");";
    };
  }
  if (loss) {
    storeFn("_lstore", lossValue, rowYields, false);
    io.lossStore = [name, args](const std::string &idx, const std::string &v) {
      return name + "_lstore(" + args + idx + ", " + v + ");";
    };
  }
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
  if (rowYields.size() == 1) {
    mlir::Value y = rowYields[0];
    unsigned j = llvm::find(yields, y) - yields.begin();
    auto cast = y.getDefiningOp<ops::CastOp>();
    if (y == result || (cast && cast->getOperand(0) == result &&
                        elemOf(result.getType()) == Elem::F32)) {
      io.outPtr = "out" + std::to_string(j);
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
