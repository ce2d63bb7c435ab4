//===- VJPShape.cpp - VJP rules of shape, reduction and matmul ops --------===//
//
// Shape ops move gradients without arithmetic (the inverse movement: a
// broadcast's gradient is a sum, a slice's is a pad with zeros, ...);
// reductions broadcast the gradient back; matmul uses two more matmuls.
// The data-movement rules do no arithmetic, so they are exact; the
// reductions round where PyTorch's formulas do (one division).
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

namespace mlir::step::vjp {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

FailureOr<Grads> broadcastVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto bcast = cast<BroadcastInDimOp>(op);
  return Grads{sumToShape(b, op->getLoc(), grad, bcast.getOperand().getType(),
                          bcast.getBroadcastDimensions())};
}

//===----------------------------------------------------------------------===//
// step.reshape, step.transpose
//===----------------------------------------------------------------------===//

FailureOr<Grads> reshapeVJP(OpBuilder &b, Operation *op, Value grad,
                            ArrayRef<bool>) {
  RankedTensorType operand = typeOf(op->getOperand(0));
  // Reshaping back to a dynamic type is only valid with one dynamic dim, and
  // only from a type that has one (step.reshape C3).
  int64_t dynamic = operand.getNumDynamicDims();
  if ((dynamic > 1 || (dynamic == 1 && typeOf(grad).hasStaticShape())) &&
      failed(requireStaticShapes(op)))
    return failure();
  return Grads{b.create<ReshapeOp>(op->getLoc(), operand, grad)};
}

FailureOr<Grads> transposeVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool>) {
  ArrayRef<int64_t> perm = cast<TransposeOp>(op).getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return Grads{b.create<TransposeOp>(op->getLoc(), grad,
                                     b.getDenseI64ArrayAttr(inverse))};
}

//===----------------------------------------------------------------------===//
// step.slice: the gradient scattered back into zeros
//===----------------------------------------------------------------------===//

/// step.pad has no interior padding, so a strided dim is spread out with a
/// reshape trick: [n] -> [n, 1] -> pad to [n, s] -> [n * s], which puts
/// every gradient element at a multiple of the stride with zeros between.
/// The tail past the operand (the last element's zeros) is sliced off, and
/// an outer pad places the block at `start`. Every step is exact.
FailureOr<Grads> sliceVJP(OpBuilder &b, Operation *op, Value grad,
                          ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto slice = cast<SliceOp>(op);
  Location loc = op->getLoc();
  RankedTensorType operand = slice.getOperand().getType();
  RankedTensorType gradType = typeOf(grad);
  ArrayRef<int64_t> start = slice.getStart(), strides = slice.getStrides();
  Type element = gradType.getElementType();
  FloatAttr zero = b.getF64FloatAttr(0.0);

  Value g = grad;
  if (llvm::any_of(strides, [](int64_t s) { return s > 1; })) {
    SmallVector<int64_t> split, spreadHigh, spread;
    for (auto [n, s] : llvm::zip(gradType.getShape(), strides)) {
      split.push_back(n);
      spreadHigh.push_back(0);
      spread.push_back(n * s);
      if (s > 1) {
        split.push_back(1);
        spreadHigh.push_back(s - 1);
      }
    }
    SmallVector<int64_t> splitLow(split.size(), 0);
    g = b.create<ReshapeOp>(loc, RankedTensorType::get(split, element), g);
    g = b.create<PadOp>(loc, g, b.getDenseI64ArrayAttr(splitLow),
                        b.getDenseI64ArrayAttr(spreadHigh), zero);
    g = b.create<ReshapeOp>(loc, RankedTensorType::get(spread, element), g);
  }
  // Drop what would lie past the end of the operand.
  ArrayRef<int64_t> extent = typeOf(g).getShape();
  SmallVector<int64_t> keep, low, high;
  for (int64_t d = 0; d < operand.getRank(); ++d) {
    keep.push_back(std::min(extent[d], operand.getDimSize(d) - start[d]));
    low.push_back(start[d]);
    high.push_back(operand.getDimSize(d) - start[d] - keep[d]);
  }
  if (ArrayRef<int64_t>(keep) != extent) {
    SmallVector<int64_t> zeros(keep.size(), 0), ones(keep.size(), 1);
    g = b.create<SliceOp>(loc, g, b.getDenseI64ArrayAttr(zeros),
                          b.getDenseI64ArrayAttr(keep),
                          b.getDenseI64ArrayAttr(ones));
  }
  return Grads{b.create<PadOp>(loc, g, b.getDenseI64ArrayAttr(low),
                               b.getDenseI64ArrayAttr(high), zero)};
}

//===----------------------------------------------------------------------===//
// step.concat: each input's part of the gradient, step.pad: the middle
//===----------------------------------------------------------------------===//

/// `value[start:limit]` with unit strides.
Value window(OpBuilder &b, Location loc, Value value, ArrayRef<int64_t> start,
             ArrayRef<int64_t> limit) {
  SmallVector<int64_t> ones(start.size(), 1);
  return b.create<SliceOp>(loc, value, b.getDenseI64ArrayAttr(start),
                           b.getDenseI64ArrayAttr(limit),
                           b.getDenseI64ArrayAttr(ones));
}

FailureOr<Grads> concatVJP(OpBuilder &b, Operation *op, Value grad,
                           ArrayRef<bool> needed) {
  if (failed(requireStaticShapes(op)))
    return failure();
  int64_t dim = cast<ConcatOp>(op).getDimension();
  SmallVector<int64_t> start(typeOf(grad).getRank(), 0);
  SmallVector<int64_t> limit(typeOf(grad).getShape());
  Grads grads(op->getNumOperands());
  for (auto [i, input] : llvm::enumerate(op->getOperands())) {
    limit[dim] = start[dim] + typeOf(input).getDimSize(dim);
    if (needed[i])
      grads[i] = window(b, op->getLoc(), grad, start, limit);
    start[dim] = limit[dim];
  }
  return grads;
}

FailureOr<Grads> padVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto pad = cast<PadOp>(op);
  SmallVector<int64_t> start(pad.getLow()), limit;
  for (auto [lo, n] : llvm::zip(start, pad.getOperand().getType().getShape()))
    limit.push_back(lo + n);
  return Grads{window(b, op->getLoc(), grad, start, limit)};
}

//===----------------------------------------------------------------------===//
// step.reduce_sum, step.reduce_mean, step.reduce_max
//===----------------------------------------------------------------------===//

FailureOr<Grads> reduceSumVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto sum = cast<ReduceSumOp>(op);
  return Grads{broadcastBack(b, op->getLoc(), grad, sum.getOperand().getType(),
                             sum.getDims(), sum.getKeepdim())};
}

/// The gradient divided by the count of reduced elements, then broadcast
/// (dividing before broadcasting gives the same bits with fewer divisions).
FailureOr<Grads> reduceMeanVJP(OpBuilder &b, Operation *op, Value grad,
                               ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto mean = cast<ReduceMeanOp>(op);
  if (mean.getDims().empty())
    return Grads{grad};
  RankedTensorType operand = mean.getOperand().getType();
  int64_t count = 1;
  for (int64_t d : mean.getDims())
    count *= operand.getDimSize(d);
  Location loc = op->getLoc();
  return Grads{broadcastBack(b, loc, divideByCount(b, loc, grad, count),
                             operand, mean.getDims(), mean.getKeepdim())};
}

/// torch.amax: the gradient is split evenly among the elements equal to
/// the maximum (scale_grad_by_count). The tie count and the division are in
/// f32, as PyTorch divides a low-precision gradient by an integer count.
FailureOr<Grads> reduceMaxVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto max = cast<ReduceMaxOp>(op);
  if (max.getDims().empty())
    return Grads{grad};
  Location loc = op->getLoc();
  Value x = max.getOperand();
  RankedTensorType full = typeOf(x);
  ArrayRef<int64_t> dims = max.getDims();
  bool keepdim = max.getKeepdim();
  Type f32 = b.getF32Type();
  Value atMax = b.create<CompareOp>(
      loc, ComparisonDirection::EQ, x,
      broadcastBack(b, loc, max.getResult(), full, dims, keepdim));
  Value mask = castTo(b, loc, atMax, f32);
  Value count = b.create<ReduceSumOp>(loc, mask, b.getDenseI64ArrayAttr(dims),
                                      keepdim);
  Value share = b.create<DivOp>(loc, castTo(b, loc, grad, f32), count);
  Value spread = b.create<MulOp>(
      loc, broadcastBack(b, loc, share, full, dims, keepdim), mask);
  return Grads{castTo(b, loc, spread, full.getElementType())};
}

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

/// With C = op_a(A) op_b(B) and G = dC: dop_a(A) = G op_b(B)^T and
/// dop_b(B) = op_a(A)^T G, each written as one matmul whose transpose flags
/// absorb op_a/op_b. A rank-2 rhs shared by a batched lhs gets the sum over
/// the batch: one matmul of the lhs and G flattened to [batch * M, .].
FailureOr<Grads> matmulVJP(OpBuilder &b, Operation *op, Value grad,
                           ArrayRef<bool> needed) {
  auto mm = cast<MatmulOp>(op);
  Location loc = op->getLoc();
  Value lhs = mm.getLhs(), rhs = mm.getRhs();
  bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
  bool shared = typeOf(rhs).getRank() == 2 && typeOf(lhs).getRank() > 2;
  Grads grads(2);
  if (needed[0]) {
    if (!ta)
      grads[0] = b.create<MatmulOp>(loc, grad, rhs, false, !tb);
    else if (!shared)
      grads[0] = b.create<MatmulOp>(loc, rhs, grad, tb, true);
    else // a rank-2 lhs cannot multiply the batched G: transpose after
      grads[0] = transposeLastTwo(
          b, loc, b.create<MatmulOp>(loc, grad, rhs, false, !tb));
  }
  if (needed[1] && !shared) {
    grads[1] = tb ? b.create<MatmulOp>(loc, grad, lhs, true, ta)
                  : b.create<MatmulOp>(loc, lhs, grad, !ta, false);
  } else if (needed[1]) {
    if (failed(requireStaticShapes(op)))
      return failure();
    Value a = ta ? transposeLastTwo(b, loc, lhs) : lhs; // [batch..., M, K]
    auto flat = [&](Value v) {
      RankedTensorType t = typeOf(v);
      int64_t cols = t.getShape().back();
      return b.create<ReshapeOp>(
          loc,
          RankedTensorType::get({t.getNumElements() / cols, cols},
                                t.getElementType()),
          v);
    };
    Value af = flat(a), gf = flat(grad);
    grads[1] = tb ? b.create<MatmulOp>(loc, gf, af, true, false)
                  : b.create<MatmulOp>(loc, af, gf, true, false);
  }
  return grads;
}

//===----------------------------------------------------------------------===//
// step.offload, step.reload
//===----------------------------------------------------------------------===//

/// Both are identities that only move a value between device and host
/// memory: the gradient passes through unchanged (step-offload runs after
/// autodiff, so this rule only matters for hand-written IR).
FailureOr<Grads> identityVJP(OpBuilder &, Operation *, Value grad,
                             ArrayRef<bool>) {
  return Grads{grad};
}

} // namespace

void registerShapeRules(llvm::StringMap<VJPRule> &rules) {
  rules[BroadcastInDimOp::getOperationName()] = broadcastVJP;
  rules[ReshapeOp::getOperationName()] = reshapeVJP;
  rules[TransposeOp::getOperationName()] = transposeVJP;
  rules[SliceOp::getOperationName()] = sliceVJP;
  rules[ConcatOp::getOperationName()] = concatVJP;
  rules[PadOp::getOperationName()] = padVJP;
  rules[OffloadOp::getOperationName()] = identityVJP;
  rules[ReloadOp::getOperationName()] = identityVJP;
  rules[ReduceSumOp::getOperationName()] = reduceSumVJP;
  rules[ReduceMeanOp::getOperationName()] = reduceMeanVJP;
  rules[ReduceMaxOp::getOperationName()] = reduceMaxVJP;
  // Matmul infers joined dims, so dynamic dims can change a gradient's type.
  rules[MatmulOp::getOperationName()] = withDynamicDimCheck<matmulVJP>;
}

} // namespace mlir::step::vjp
