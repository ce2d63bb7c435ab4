//===- TypeInference.h - Shape inference helpers of step ops ---*- C++ -*-===//
//
// Shape rules shared by several ops. Each helper reports a violated
// constraint through emitOptionalError, naming the op, the constraint (C1,
// C2, ... as in the op's description) and the offending types, so that the
// parser, the verifier and the tracing API all give the same message.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_DIALECTS_STEP_TYPEINFERENCE_H
#define STEP_DIALECTS_STEP_TYPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::step {

/// Two dims agree when they are equal or either is dynamic.
inline bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Elementwise ops: operands of one element type and rank whose dims agree
/// (equal, or dynamic in one). The result has the joined shape and element
/// type `resultElement` (the operands' when null).
LogicalResult inferElementwiseType(std::optional<Location> loc,
                                   StringRef opName, Type lhs, Type rhs,
                                   Type resultElement,
                                   SmallVectorImpl<Type> &inferred,
                                   StringRef lhsName = "lhs",
                                   StringRef rhsName = "rhs");

/// step.select: `pred` (i1) and both branches agree on every dim.
LogicalResult inferSelectType(std::optional<Location> loc, Type pred,
                              Type onTrue, Type onFalse,
                              SmallVectorImpl<Type> &inferred);

/// Reductions over `dims` (in range, unique), keeping size-1 dims when
/// `keepdim`. `needsElements`: a reduced dim of static size 0 is an error
/// (a maximum of nothing).
LogicalResult inferReduceType(std::optional<Location> loc, StringRef opName,
                              Type operand, ArrayRef<int64_t> dims,
                              bool keepdim, SmallVectorImpl<Type> &inferred,
                              bool needsElements = false);

/// Elements per replica when `numElements` are split into `groupSize`
/// equal blocks, the last zero-padded: ceil(numElements / groupSize)
/// (step.local_shard, ZeRO shards).
int64_t shardSize(int64_t numElements, int64_t groupSize);

/// Emits "'<op>' op <message>" at `loc` (if any) and returns failure: how
/// every inference helper reports a violated constraint.
template <typename... Args>
LogicalResult fail(std::optional<Location> loc, StringRef opName,
                   Args &&...args) {
  return emitOptionalError(loc, "'", opName, "' op ",
                           std::forward<Args>(args)...);
}

/// "'tensor<2x3xf32>'": a type as messages quote it.
std::string quoted(Type type);

} // namespace mlir::step

#endif // STEP_DIALECTS_STEP_TYPEINFERENCE_H
