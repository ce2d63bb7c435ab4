//===- VJPDist.cpp - VJP rules of the collectives -------------------------===//
//
// SPMD rules (as JAX's transposes of psum, psum_scatter and all_gather):
// every replica's loss contributes to the total, so the cotangent of an
// all_reduce (sum) is the all_reduce (sum) of the replicas' cotangents, and
// reduce_scatter and all_gather are each other's transposes. step-shard
// writes collectives after step-autodiff, so these rules matter for
// hand-written IR that differentiates through one.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJPUtil.h"

namespace mlir::step::vjp {
namespace {

FailureOr<Grads> allReduceVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool>) {
  auto ar = cast<AllReduceOp>(op);
  if (ar.getReduce() != "sum" && ar.getReduce() != "mean")
    return op->emitError() << "step-autodiff: all_reduce with reduce = \""
                           << ar.getReduce()
                           << "\" has no VJP (only sum and mean)";
  return Grads{b.create<AllReduceOp>(op->getLoc(), grad, ar.getReduceAttr(),
                                     ar.getGroupSizeAttr(),
                                     ar.getReplicaGroupsAttr())};
}

FailureOr<Grads> reduceScatterVJP(OpBuilder &b, Operation *op, Value grad,
                                  ArrayRef<bool>) {
  auto rs = cast<ReduceScatterOp>(op);
  Value g = b.create<AllGatherOp>(op->getLoc(), grad, rs.getGroupSizeAttr(),
                                  rs.getReplicaGroupsAttr());
  if (rs.getReduce() == "mean")
    g = scale(b, op->getLoc(), g, 1.0 / static_cast<double>(rs.getGroupSize()));
  return Grads{g};
}

FailureOr<Grads> allGatherVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool>) {
  auto ag = cast<AllGatherOp>(op);
  return Grads{b.create<ReduceScatterOp>(
      op->getLoc(), grad, b.getStringAttr("sum"), ag.getGroupSizeAttr(),
      ag.getReplicaGroupsAttr())};
}

} // namespace

void registerDistRules(llvm::StringMap<VJPRule> &rules) {
  rules[AllReduceOp::getOperationName()] = allReduceVJP;
  rules[ReduceScatterOp::getOperationName()] = reduceScatterVJP;
  rules[AllGatherOp::getOperationName()] = allGatherVJP;
}

} // namespace mlir::step::vjp
