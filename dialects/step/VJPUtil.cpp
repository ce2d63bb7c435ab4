//===- VJPUtil.cpp - Builders shared by the VJP rule files ----------------===//

#include "dialects/step/VJPUtil.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <limits>

namespace mlir::step::vjp {

Value splat(OpBuilder &b, Location loc, Type type, double value) {
  auto tensor = cast<RankedTensorType>(type);
  Type element = tensor.getElementType();
  Attribute scalarAttr;
  if (isa<FloatType>(element))
    scalarAttr = b.getFloatAttr(element, value);
  else
    scalarAttr = b.getIntegerAttr(element, static_cast<int64_t>(value));
  return b.create<ConstantOp>(loc, tensor,
                              DenseElementsAttr::get(tensor, scalarAttr));
}

Value splatLike(OpBuilder &b, Location loc, Value like, double value) {
  return splat(b, loc, like.getType(), value);
}

Value hideFutureKeys(OpBuilder &b, Location loc, Value s) {
  auto sType = cast<RankedTensorType>(s.getType());
  int64_t rank = sType.getRank();
  auto index = RankedTensorType::get(
      {sType.getDimSize(rank - 2), sType.getDimSize(rank - 1)},
      b.getI64Type());
  Value row = b.create<IotaOp>(loc, index, b.getI64IntegerAttr(0));
  Value col = b.create<IotaOp>(loc, index, b.getI64IntegerAttr(1));
  Value hidden = b.create<CompareOp>(loc, ComparisonDirection::GT, col, row);
  if (rank > 2)
    hidden = b.create<BroadcastInDimOp>(
        loc, sType.clone(b.getI1Type()), hidden,
        b.getDenseI64ArrayAttr({rank - 2, rank - 1}));
  Value negInf = splatLike(b, loc, s, -std::numeric_limits<double>::infinity());
  return b.create<SelectOp>(loc, hidden, negInf, s);
}

Value scalar(OpBuilder &b, Location loc, Type element, double value) {
  return splat(b, loc, RankedTensorType::get({}, element), value);
}

Value scale(OpBuilder &b, Location loc, Value value, double c) {
  return b.create<MulOp>(loc, value, splatLike(b, loc, value, c));
}

Value sumToShape(OpBuilder &b, Location loc, Value grad,
                 RankedTensorType target, ArrayRef<int64_t> dims) {
  auto gradType = cast<RankedTensorType>(grad.getType());
  // Result dims that no operand dim maps to, and mapped dims that were
  // expanded from size 1, are summed away.
  SmallVector<int64_t> reduced;
  for (int64_t d = 0; d < gradType.getRank(); ++d) {
    auto it = std::find(dims.begin(), dims.end(), d);
    if (it == dims.end()) {
      reduced.push_back(d);
      continue;
    }
    int64_t k = it - dims.begin();
    if (target.getDimSize(k) == 1 && gradType.getDimSize(d) != 1)
      reduced.push_back(d);
  }
  Value sum = grad;
  if (!reduced.empty())
    sum = b.create<ReduceSumOp>(loc, grad, b.getDenseI64ArrayAttr(reduced),
                                /*keepdim=*/false);
  // What is left has the target's dims in mapped order, with the expanded
  // size-1 dims gone; a reshape (and transpose when dims is not increasing)
  // restores the target.
  SmallVector<int64_t> kept;
  for (int64_t k = 0; k < target.getRank(); ++k)
    if (!(target.getDimSize(k) == 1 && gradType.getDimSize(dims[k]) != 1))
      kept.push_back(k);
  // Order of the kept target dims as they appear in `sum`.
  SmallVector<int64_t> order(kept);
  std::sort(order.begin(), order.end(),
            [&](int64_t x, int64_t y) { return dims[x] < dims[y]; });
  if (order != kept) {
    SmallVector<int64_t> perm;
    for (int64_t k : kept)
      perm.push_back(std::find(order.begin(), order.end(), k) - order.begin());
    sum = b.create<TransposeOp>(loc, sum, b.getDenseI64ArrayAttr(perm));
  }
  if (sum.getType() != target)
    sum = b.create<ReshapeOp>(loc, target, sum);
  return sum;
}

Value broadcastBack(OpBuilder &b, Location loc, Value value,
                    RankedTensorType full, ArrayRef<int64_t> dims,
                    bool keepdim) {
  auto type = cast<RankedTensorType>(value.getType());
  RankedTensorType target =
      RankedTensorType::get(full.getShape(), type.getElementType());
  SmallVector<int64_t> map;
  if (keepdim) {
    for (int64_t d = 0; d < full.getRank(); ++d)
      map.push_back(d);
  } else {
    for (int64_t d = 0; d < full.getRank(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end())
        map.push_back(d);
  }
  return b.create<BroadcastInDimOp>(loc, target, value,
                                    b.getDenseI64ArrayAttr(map));
}

LogicalResult requireStaticShapes(Operation *op) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type t : types)
    if (auto tensor = dyn_cast<RankedTensorType>(t);
        tensor && !tensor.hasStaticShape())
      return op->emitError() << "step-autodiff: the VJP of '" << op->getName()
                             << "' needs static shapes, found " << quoted(t)
                             << " (pad dynamic dims with step-pad-dynamic "
                                "first)";
  return success();
}

Value castTo(OpBuilder &b, Location loc, Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  return b.create<CastOp>(loc, type.clone(element), value);
}

Value transposeLastTwo(OpBuilder &b, Location loc, Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 2], perm[rank - 1]);
  return b.create<TransposeOp>(loc, value, b.getDenseI64ArrayAttr(perm));
}

Value divideByCount(OpBuilder &b, Location loc, Value value, int64_t count) {
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  APFloat n(static_cast<double>(count));
  bool losesInfo = false;
  (void)n.convert(cast<FloatType>(element).getFloatSemantics(),
                  APFloat::rmNearestTiesToEven, &losesInfo);
  Value x = losesInfo ? castTo(b, loc, value, b.getF32Type()) : value;
  Value q = b.create<DivOp>(loc, x, splatLike(b, loc, x, count));
  return castTo(b, loc, q, element);
}

FailureOr<Grads> checkDynamicDims(Operation *op, FailureOr<Grads> grads) {
  if (failed(grads))
    return failure();
  for (auto [i, g] : llvm::enumerate(*grads))
    if (g && i < op->getNumOperands() &&
        g.getType() != op->getOperand(i).getType() &&
        failed(requireStaticShapes(op)))
      return failure();
  return grads;
}

} // namespace mlir::step::vjp
