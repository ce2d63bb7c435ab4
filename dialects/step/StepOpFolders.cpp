//===- StepOpFolders.cpp - Folders of step ops ----------------------------===//
//
// Local simplifications that are always exact except where noted: identity
// ops fold to their operand, chains of casts/reshapes/transposes collapse in
// place, and additive/multiplicative identities disappear. `x + 0.0` and
// `x - (-0.0)` fold to `x` although IEEE gives +0.0 for x = -0.0, as XLA and
// torch.compile do: no training step depends on the sign of a zero sum.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::step;

/// Whether `attr` is a splat tensor constant equal to `value`.
static bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type element = dense.getElementType();
  if (isa<FloatType>(element))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  if (element.isInteger(1))
    return false;
  if (isa<IntegerType>(element))
    return static_cast<double>(dense.getSplatValue<APInt>().getSExtValue()) ==
           value;
  return false;
}

/// Returns `v` when it already has the op's result type (an identity fold).
static OpFoldResult sameTypeOrNull(Value v, Type resultType) {
  return v.getType() == resultType ? OpFoldResult(v) : OpFoldResult();
}

//===----------------------------------------------------------------------===//
// step.constant
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Arithmetic identities
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return sameTypeOrNull(getLhs(), getType());
  if (isSplatOf(adaptor.getLhs(), 0.0))
    return sameTypeOrNull(getRhs(), getType());
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return sameTypeOrNull(getLhs(), getType());
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return sameTypeOrNull(getLhs(), getType());
  if (isSplatOf(adaptor.getLhs(), 1.0))
    return sameTypeOrNull(getRhs(), getType());
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return sameTypeOrNull(getLhs(), getType());
  return {};
}

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getOperand().getDefiningOp<NegOp>())
    return inner.getOperand();
  return {};
}

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

/// Whether every value of `from` is exactly representable in `to`, so that a
/// cast from -> to -> x equals the cast from -> x.
static bool isExactWidening(Type from, Type to) {
  if (from == to)
    return true;
  if (from.isInteger(1))
    return true; // 0 and 1 are exact in every element type.
  if (from.isF16() || from.isBF16())
    return to.isF32();
  if (from.isInteger(32))
    return to.isInteger(64);
  return false;
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto inner = getOperand().getDefiningOp<CastOp>()) {
    Value source = inner.getOperand();
    if (isExactWidening(getElementTypeOrSelf(source.getType()),
                        getElementTypeOrSelf(inner.getType()))) {
      if (source.getType() == getType())
        return source;
      getOperandMutable().assign(source);
      return getResult();
    }
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto inner = getOperand().getDefiningOp<ReshapeOp>()) {
    getOperandMutable().assign(inner.getOperand());
    return getResult();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getOperand());
      dense && getType().hasStaticShape())
    return dense.reshape(getType());
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getOperand();
  if (auto inner = getOperand().getDefiningOp<TransposeOp>()) {
    // result[i] = inner[perm[i]] = source[innerPerm[perm[i]]].
    ArrayRef<int64_t> innerPerm = inner.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(innerPerm[p]);
    setPermutation(composed);
    getOperandMutable().assign(inner.getOperand());
    return getResult();
  }
  return {};
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getOperand());
      dense && dense.isSplat() && getType().hasStaticShape())
    return DenseElementsAttr::get(getType(), dense.getSplatValue<Attribute>());
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  return sameTypeOrNull(getOperand(), getType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return sameTypeOrNull(getInputs().front(), getType());
  return {};
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (llvm::all_of(getLow(), [](int64_t v) { return v == 0; }) &&
      llvm::all_of(getHigh(), [](int64_t v) { return v == 0; }))
    return sameTypeOrNull(getOperand(), getType());
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions and nn ops
//===----------------------------------------------------------------------===//

OpFoldResult ReduceSumOp::fold(FoldAdaptor) {
  if (getDims().empty())
    return sameTypeOrNull(getOperand(), getType());
  return {};
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getP().isZero())
    return getOperand();
  return {};
}
