//===- Autodiff.cpp - Reverse-mode differentiation of @forward -----------===//
//
// step-autodiff adds `@forward_backward`: a copy of `@forward` whose body
// ends with the backward pass and which also returns the gradient of the
// loss (result 0, a scalar f32) w.r.t. every param argument.
//
// Guarantees: the forward results are unchanged (the same ops compute
// them); every gradient has its param's type; a param the loss does not
// depend on gets a zero gradient and a warning; an op on a param-to-loss
// path without a VJP rule is an error naming the op and its location.
// Integer and i1 values, compare/iota/constant and step.stop_gradient carry
// no gradient; neither do "input" and "state" arguments (step-amp's loss
// scale is a state argument of @forward).
//
// Algorithm: activity analysis first. A value is *varied* if it is computed
// by differentiable ops from a param, and *useful* if the loss is computed
// from it; only ops with a varied operand and a useful result are
// differentiated. The backward walks the block once in reverse order, calls
// each active op's VJP rule (dialects/step/VJP.h) with the cotangent of its
// result, and sums cotangents of values with several uses (step.add, in
// reverse program order, so the result is deterministic). Finally, trivially
// dead ops are erased, which removes forward and backward work that no
// result needs.
//
// Cost: O(N) rule calls for N forward ops; the backward has a constant
// factor more ops than the forward (each rule emits O(1) ops). Forward
// values used by the backward stay live until their use; step-remat decides
// later what to recompute instead.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/StepAttrs.h"

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::step {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

/// Values on a param-to-loss path.
struct Activity {
  llvm::DenseSet<Value> varied, useful;

  bool active(Operation *op) const {
    return llvm::any_of(op->getOperands(),
                        [&](Value v) { return varied.contains(v); }) &&
           llvm::any_of(op->getResults(),
                        [&](Value v) { return useful.contains(v); });
  }
};

Activity analyze(Block &body, ArrayRef<BlockArgument> params, Value loss) {
  Activity a;
  for (BlockArgument p : params)
    a.varied.insert(p);
  for (Operation &op : body) {
    if (isNonDifferentiable(&op) ||
        llvm::none_of(op.getOperands(),
                      [&](Value v) { return a.varied.contains(v); }))
      continue;
    for (Value r : op.getResults())
      if (isDifferentiableType(r.getType()))
        a.varied.insert(r);
  }
  a.useful.insert(loss);
  for (Operation &op : llvm::reverse(body)) {
    if (isNonDifferentiable(&op) ||
        llvm::none_of(op.getResults(),
                      [&](Value v) { return a.useful.contains(v); }))
      continue;
    for (Value v : op.getOperands())
      if (isDifferentiableType(v.getType()))
        a.useful.insert(v);
  }
  return a;
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(funcName);
    if (!forward || forward.isExternal()) {
      module.emitError() << "step-autodiff: no function @" << funcName
                         << " with a body to differentiate";
      return signalPassFailure();
    }
    if (failed(checkSignature(forward)))
      return signalPassFailure();
    std::string name = funcName + "_backward";
    if (module.lookupSymbol(name)) {
      forward.emitError() << "step-autodiff: @" << name << " already exists";
      return signalPassFailure();
    }

    auto joint = cast<func::FuncOp>(forward->clone());
    joint.setName(name);
    module.insert(std::next(Block::iterator(forward)), joint);
    if (failed(differentiate(joint))) {
      joint.erase();
      return signalPassFailure();
    }
  }

  /// The model-file contract: a scalar f32 loss first, float params.
  LogicalResult checkSignature(func::FuncOp f) {
    auto results = f.getFunctionType().getResults();
    auto lossType = results.empty() ? RankedTensorType()
                                    : dyn_cast<RankedTensorType>(results[0]);
    if (!lossType || lossType.getRank() != 0 ||
        !lossType.getElementType().isF32()) {
      auto diag = f.emitError()
                  << "step-autodiff: @" << f.getName()
                  << " must return a scalar f32 loss (tensor<f32>) as its "
                     "first result, found ";
      if (results.empty())
        diag << "no results";
      else
        diag << quoted(results[0]);
      return diag;
    }
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      StringRef kind = argKind(f, i);
      if (kind != "param" && kind != "input" && kind != "state")
        return f.emitError()
               << "step-autodiff: argument " << i << " has step.kind = \""
               << kind << "\", expected \"param\", \"input\" or \"state\"";
      if (kind == "param" && !isDifferentiableType(f.getArgument(i).getType()))
        return f.emitError()
               << "step-autodiff: param '" << argName(f, i) << "' has type "
               << quoted(f.getArgument(i).getType())
               << ", expected a float tensor";
    }
    return success();
  }

  LogicalResult differentiate(func::FuncOp f) {
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);
    SmallVector<BlockArgument> params;
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (argKind(f, i) == "param")
        params.push_back(f.getArgument(i));
    Activity activity = analyze(body, params, loss);

    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> cotangent;
    cotangent[loss] = vjp::splatLike(b, ret.getLoc(), loss, 1.0);
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps)) {
      if (isNonDifferentiable(op) || !activity.active(op))
        continue;
      if (failed(backprop(b, op, activity, cotangent)))
        return failure();
    }

    SmallVector<Value> results(ret.getOperands());
    SmallVector<Attribute> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      resultAttrs.push_back(f.getResultAttrDict(i)
                                ? Attribute(f.getResultAttrDict(i))
                                : b.getDictionaryAttr({}));
    for (BlockArgument p : params) {
      std::string pname = argName(f, p.getArgNumber());
      Value g = cotangent.lookup(p);
      if (!g) {
        // The loss does not depend on this param: PyTorch leaves .grad None;
        // a zero gradient keeps the optimizer's update well defined.
        emitWarning(f.getLoc()) << "step-autodiff: the loss does not depend on "
                                   "param '"
                                << pname << "'; its gradient is zero";
        g = vjp::splatLike(b, ret.getLoc(), p, 0.0);
      }
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("step.kind", b.getStringAttr("grad")),
           b.getNamedAttr("step.name", b.getStringAttr("grad." + pname))}));
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    f.setFunctionType(b.getFunctionType(f.getArgumentTypes(),
                                        ValueRange(results).getTypes()));
    f.setAllResultAttrs(resultAttrs);
    eraseDeadOps(body);
    return success();
  }

  LogicalResult backprop(OpBuilder &b, Operation *op, const Activity &activity,
                         llvm::DenseMap<Value, Value> &cotangent) {
    if (op->getNumResults() != 1)
      return op->emitError() << "step-autodiff: '" << op->getName() << "' has "
                             << op->getNumResults()
                             << " results and no VJP rule, but the loss "
                                "depends on it";
    Value grad = cotangent.lookup(op->getResult(0));
    if (!grad)
      return success();
    VJPRule rule = lookupVJPRule(op);
    if (!rule)
      return op->emitError()
             << "step-autodiff: no VJP rule for '" << op->getName()
             << "', but the loss depends on its result through a param "
                "(wrap a non-differentiable input in step.stop_gradient)";
    SmallVector<bool> needed;
    for (Value v : op->getOperands())
      needed.push_back(activity.varied.contains(v));
    FailureOr<Grads> grads = rule(b, op, grad, needed);
    if (failed(grads))
      return failure();
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      if (!needed[i] || i >= grads->size() || !(*grads)[i])
        continue;
      Value g = (*grads)[i];
      if (g.getType() != operand.getType())
        return op->emitError() << "step-autodiff: internal error: the VJP of '"
                               << op->getName() << "' gave operand #" << i
                               << " a gradient of " << quoted(g.getType())
                               << ", expected " << quoted(operand.getType());
      Value &acc = cotangent[operand];
      acc = acc ? Value(b.create<AddOp>(op->getLoc(), acc, g)) : g;
    }
    return success();
  }

  static void eraseDeadOps(Block &body) {
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (isOpTriviallyDead(op))
        op->erase();
  }
};

} // namespace
} // namespace mlir::step
