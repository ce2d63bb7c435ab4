//===- TypeInference.cpp - Shape inference and verifiers of step ops ------===//
//
// Result-type inference (InferTypeOpInterface) and verifiers of every step op.
// Inference doubles as verification: a constraint violated while inferring is
// reported with the op name, the constraint number from the op description
// and the offending types, and the generic InferTypeOpInterface check then
// compares the inferred type with the declared one.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::step;

std::string mlir::step::quoted(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << type << "'";
  return s;
}

namespace {
std::string listStr(ArrayRef<int64_t> values) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? "?" : std::to_string(d);
}

/// Equal dims join to themselves; a dynamic dim joins to the other one.
bool joinDim(int64_t a, int64_t b, int64_t &out) {
  if (ShapedType::isDynamic(a)) {
    out = b;
    return true;
  }
  if (ShapedType::isDynamic(b) || a == b) {
    out = a;
    return true;
  }
  return false;
}

} // namespace

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

LogicalResult mlir::step::inferElementwiseType(
    std::optional<Location> loc, StringRef opName, Type lhsType, Type rhsType,
    Type resultElement, SmallVectorImpl<Type> &inferred, StringRef lhsName,
    StringRef rhsName) {
  auto lhs = dyn_cast<RankedTensorType>(lhsType);
  auto rhs = dyn_cast<RankedTensorType>(rhsType);
  if (!lhs || !rhs)
    return fail(loc, opName, "expects ranked tensors, found ", quoted(lhsType),
                " and ", quoted(rhsType));
  if (lhs.getElementType() != rhs.getElementType())
    return fail(loc, opName, "operands have different element types (C1): ",
                lhsName, " ", quoted(lhs), ", ", rhsName, " ", quoted(rhs),
                "; insert step.cast to convert one");
  if (lhs.getRank() != rhs.getRank())
    return fail(loc, opName, "operands have different ranks (C1): ", lhsName,
                " ", quoted(lhs), ", ", rhsName, " ", quoted(rhs),
                "; broadcast explicitly with step.broadcast_in_dim");
  SmallVector<int64_t> shape(lhs.getRank());
  for (int64_t i = 0; i < lhs.getRank(); ++i)
    if (!joinDim(lhs.getDimSize(i), rhs.getDimSize(i), shape[i]))
      return fail(loc, opName, "dimension ", i, " differs (C2): ", lhsName,
                  " ", quoted(lhs), " has ", dimStr(lhs.getDimSize(i)), ", ",
                  rhsName, " ", quoted(rhs), " has ",
                  dimStr(rhs.getDimSize(i)),
                  "; broadcast explicitly with step.broadcast_in_dim");
  inferred.push_back(RankedTensorType::get(
      shape, resultElement ? resultElement : lhs.getElementType()));
  return success();
}

LogicalResult mlir::step::inferSelectType(std::optional<Location> loc,
                                          Type predType, Type onTrue,
                                          Type onFalse,
                                          SmallVectorImpl<Type> &inferred) {
  StringRef name = SelectOp::getOperationName();
  SmallVector<Type, 1> branches;
  if (failed(inferElementwiseType(loc, name, onTrue, onFalse, nullptr,
                                  branches, "on_true", "on_false")))
    return failure();
  auto pred = dyn_cast<RankedTensorType>(predType);
  auto value = cast<RankedTensorType>(branches.front());
  if (!pred || pred.getRank() != value.getRank())
    return fail(loc, name, "pred ", quoted(predType),
                " must have the rank of the branches ", quoted(value),
                " (C2)");
  SmallVector<int64_t> shape(value.getRank());
  for (int64_t i = 0; i < value.getRank(); ++i)
    if (!joinDim(pred.getDimSize(i), value.getDimSize(i), shape[i]))
      return fail(loc, name, "dimension ", i, " of pred ", quoted(pred),
                  " differs from the branches ", quoted(value), " (C2)");
  inferred.push_back(RankedTensorType::get(shape, value.getElementType()));
  return success();
}

LogicalResult mlir::step::inferReduceType(std::optional<Location> loc,
                                          StringRef opName, Type operandType,
                                          ArrayRef<int64_t> dims, bool keepdim,
                                          SmallVectorImpl<Type> &inferred,
                                          bool needsElements) {
  auto operand = dyn_cast<RankedTensorType>(operandType);
  if (!operand)
    return fail(loc, opName, "expects a ranked tensor, found ",
                quoted(operandType));
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= operand.getRank())
      return fail(loc, opName, "dims ", listStr(dims), " has ", d,
                  ", outside [0, ", operand.getRank(), ") for operand ",
                  quoted(operand), " (C1)");
    if (!seen.insert(d).second)
      return fail(loc, opName, "dims ", listStr(dims), " repeats ", d, " (C2)");
    if (needsElements && operand.getDimSize(d) == 0)
      return fail(loc, opName, "reduces over dim ", d, " of size 0 in ",
                  quoted(operand), ", which has no maximum (C3)");
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < operand.getRank(); ++i) {
    if (!seen.contains(i))
      shape.push_back(operand.getDimSize(i));
    else if (keepdim)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, operand.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.constant
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type || !type.hasStaticShape())
    return fail(loc, getOperationName(),
                "value must have a static tensor type (C1), found ",
                quoted(adaptor.getValue().getType()));
  inferred.push_back(type);
  return success();
}

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  auto in = getOperand().getType(), out = getResult().getType();
  if (in.getShape() != out.getShape())
    return emitOpError("operand ")
           << quoted(in) << " and result " << quoted(out)
           << " must have the same shape (C1)";
  return success();
}

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  auto in = getOperand().getType(), out = getResult().getType();
  ArrayRef<int64_t> dims = getBroadcastDimensions();
  if (in.getElementType() != out.getElementType())
    return emitOpError("operand ") << quoted(in) << " and result "
                                   << quoted(out)
                                   << " have different element types (C5)";
  if (static_cast<int64_t>(dims.size()) != in.getRank())
    return emitOpError("dims ") << listStr(dims) << " has " << dims.size()
                                << " entries, expected rank(operand) = "
                                << in.getRank() << " for " << quoted(in)
                                << " (C1)";
  llvm::SmallSet<int64_t, 4> mapped;
  for (auto [k, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= out.getRank())
      return emitOpError("dims ") << listStr(dims) << " maps operand dim "
                                  << k << " to " << d << ", outside [0, "
                                  << out.getRank() << ") of result "
                                  << quoted(out) << " (C2)";
    if (k > 0 && dims[k - 1] >= d)
      return emitOpError("dims ") << listStr(dims)
                                  << " must be strictly increasing (C2)";
    mapped.insert(d);
    int64_t inDim = in.getDimSize(k), outDim = out.getDimSize(d);
    if (ShapedType::isDynamic(outDim)) {
      if (!ShapedType::isDynamic(inDim))
        return emitOpError("result dim ")
               << d << " of " << quoted(out)
               << " is dynamic but operand dim " << k << " of " << quoted(in)
               << " is static (C4)";
      continue;
    }
    if (!ShapedType::isDynamic(inDim) && inDim != 1 && inDim != outDim)
      return emitOpError("operand dim ")
             << k << " of " << quoted(in) << " has size " << inDim
             << ", expected 1 or " << outDim << " (result dim " << d << " of "
             << quoted(out) << ") (C3)";
  }
  // A dynamic result dim that no operand dim maps to is sized by the value
  // the result is combined with: step-pad-dynamic resolves it (the
  // interpreter refuses to run it).
  return success();
}

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

/// Product of the static dims of `type`, or nullopt on int64 overflow.
static std::optional<int64_t> staticProduct(ShapedType type) {
  int64_t product = 1;
  for (int64_t d : type.getShape()) {
    if (ShapedType::isDynamic(d))
      continue;
    auto next = llvm::checkedMul(product, d);
    if (!next)
      return std::nullopt;
    product = *next;
  }
  return product;
}

LogicalResult ReshapeOp::verify() {
  auto in = getOperand().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("operand ") << quoted(in) << " and result "
                                   << quoted(out)
                                   << " have different element types (C1)";
  std::optional<int64_t> inCount = staticProduct(in);
  std::optional<int64_t> outCount = staticProduct(out);
  if (!inCount || !outCount)
    return emitOpError("element count of ")
           << quoted(!inCount ? in : out) << " overflows int64 (C2)";
  if (in.hasStaticShape() && out.hasStaticShape()) {
    if (*inCount != *outCount)
      return emitOpError("operand ")
             << quoted(in) << " has " << *inCount << " elements but result "
             << quoted(out) << " has " << *outCount << " (C2)";
    return success();
  }
  int64_t dynamicOut = out.getNumDynamicDims();
  if (dynamicOut > 1 || (dynamicOut == 1 && in.hasStaticShape()))
    return emitOpError("result ")
           << quoted(out) << " may have one dynamic dim, and only when the "
           << "operand " << quoted(in) << " has one (C3)";
  if (dynamicOut == 1 && *outCount == 0)
    return emitOpError("the dynamic dim of result ")
           << quoted(out) << " cannot be derived: its static dims hold no "
           << "elements (C3)";
  // Operand dynamic, result static: the result count must be a multiple of
  // the operand's static part (the dynamic dims multiply it).
  if (dynamicOut == 0 && *outCount % std::max<int64_t>(*inCount, 1) != 0 &&
      !(*inCount == 0 && *outCount == 0))
    return emitOpError("result ")
           << quoted(out) << " has " << *outCount
           << " elements, not a multiple of the " << *inCount
           << " elements of the static dims of operand " << quoted(in)
           << " (C2)";
  if (dynamicOut == 0 && *inCount == 0 && *outCount != 0)
    return emitOpError("operand ") << quoted(in) << " has 0 elements but result "
                                   << quoted(out) << " has " << *outCount
                                   << " (C2)";
  return success();
}

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto in = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<bool> used(in.getRank(), false);
  bool ok = static_cast<int64_t>(perm.size()) == in.getRank();
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < in.getRank() && !used[p];
    if (ok)
      used[p] = true;
  }
  if (!ok)
    return fail(loc, getOperationName(), "perm ", listStr(perm),
                " is not a permutation of [0, ", in.getRank(),
                ") for operand ", quoted(in), " (C1)");
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(in.getDimSize(p));
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.slice
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto in = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    strides = adaptor.getStrides();
  int64_t rank = in.getRank();
  if (static_cast<int64_t>(start.size()) != rank ||
      static_cast<int64_t>(limit.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return fail(loc, name, "start ", listStr(start), ", limit ",
                listStr(limit), " and strides ", listStr(strides),
                " must each have ", rank, " entries for operand ", quoted(in),
                " (C1)");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t dim = in.getDimSize(i);
    if (start[i] < 0 || start[i] > limit[i] ||
        (!ShapedType::isDynamic(dim) && limit[i] > dim))
      return fail(loc, name, "dim ", i, ": expected 0 <= start (", start[i],
                  ") <= limit (", limit[i], ") <= size (", dimStr(dim),
                  ") for operand ", quoted(in), " (C2)");
    if (strides[i] < 1)
      return fail(loc, name, "dim ", i, ": stride ", strides[i],
                  " must be >= 1 (C3)");
    // limit - start >= 0 cannot overflow; rounding up without adding avoids
    // overflow near INT64_MAX.
    int64_t span = limit[i] - start[i];
    shape.push_back(span / strides[i] + (span % strides[i] != 0 ? 1 : 0));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  if (operands.empty())
    return fail(loc, name, "needs at least one input (C1)");
  auto first = cast<RankedTensorType>(operands.front().getType());
  int64_t dim = adaptor.getDimension();
  if (dim < 0 || dim >= first.getRank())
    return fail(loc, name, "dim ", dim, " is outside [0, ", first.getRank(),
                ") for input ", quoted(first), " (C3)");
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(operands.drop_front())) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank())
      return fail(loc, name, "input ", i + 1, " ", quoted(t),
                  " differs in element type or rank from input 0 ",
                  quoted(first), " (C2)");
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (d == dim) {
        if (ShapedType::isDynamic(shape[d]) || t.isDynamicDim(d)) {
          shape[d] = ShapedType::kDynamic;
        } else if (auto sum = llvm::checkedAdd(shape[d], t.getDimSize(d))) {
          shape[d] = *sum;
        } else {
          return fail(loc, name, "the size of dim ", d,
                      " overflows int64 (C5)");
        }
      } else if (!joinDim(shape[d], t.getDimSize(d), shape[d])) {
        return fail(loc, name, "input ", i + 1, " ", quoted(t),
                    " has size ", t.getDimSize(d), " in dim ", d,
                    " but the inputs before it have ", shape[d], " (C4)");
      }
    }
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      ValueRange operands, DictionaryAttr attrs,
                                      OpaqueProperties props,
                                      RegionRange regions,
                                      SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto in = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != in.getRank() ||
      static_cast<int64_t>(high.size()) != in.getRank())
    return fail(loc, name, "low ", listStr(low), " and high ", listStr(high),
                " must each have ", in.getRank(), " entries for operand ",
                quoted(in), " (C1)");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      return fail(loc, name, "dim ", i, ": padding low ", low[i], ", high ",
                  high[i], " must be >= 0 (C2)");
    if (in.isDynamicDim(i)) {
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    auto withLow = llvm::checkedAdd(in.getDimSize(i), low[i]);
    auto size = withLow ? llvm::checkedAdd(*withLow, high[i]) : std::nullopt;
    if (!size)
      return fail(loc, name, "dim ", i, ": padded size overflows int64 (C2)");
    shape.push_back(*size);
  }
  // The f64 value must be representable in an integer element type; floats
  // round to nearest (overflowing to inf, as torch.nn.functional.pad does).
  double value = adaptor.getValue().convertToDouble();
  Type element = in.getElementType();
  if (auto intType = dyn_cast<IntegerType>(element)) {
    unsigned bits = intType.getWidth();
    double lo = bits == 1 ? 0.0 : -std::ldexp(1.0, bits - 1);
    double hi = bits == 1 ? 1.0 : std::ldexp(1.0, bits - 1);
    if (value != std::trunc(value) || value < lo ||
        (bits == 1 ? value > hi : value >= hi))
      return fail(loc, name, "value ", value, " is not representable in ",
                  element, " (C3)");
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.iota
//===----------------------------------------------------------------------===//

LogicalResult IotaOp::verify() {
  auto type = getResult().getType();
  if (type.getRank() < 1)
    return emitOpError("result ")
           << quoted(type) << " must have a static shape of rank >= 1 (C1)";
  // A dynamic dim is allowed where `step.dims` names its symbol
  // (step-pad-dynamic makes it static).
  auto names = (*this)->getAttrOfType<ArrayAttr>("step.dims");
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!type.isDynamicDim(d))
      continue;
    auto name = names && static_cast<int64_t>(names.size()) == type.getRank()
                    ? dyn_cast<StringAttr>(names[d])
                    : StringAttr();
    if (!name || name.getValue().empty())
      return emitOpError("result ")
             << quoted(type)
             << " must have a static shape of rank >= 1, or name each "
                "dynamic dim's symbol in step.dims (C1)";
  }
  // I64Attr getters return uint64_t; the sign matters for the message.
  auto dim = static_cast<int64_t>(getDimension());
  if (dim < 0 || dim >= type.getRank())
    return emitOpError("dim ") << dim << " is outside [0, "
                               << type.getRank() << ") for result "
                               << quoted(type) << " (C2)";
  return success();
}
