//===- TypeInferenceDist.cpp - Inference for collectives ------------------===//
//
// Result types and verifiers of the ops in StepDistOps.td. Same conventions
// as TypeInference.cpp: every message names the op, the constraint and the
// offending types or values.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"

#include <numeric>

using namespace mlir;
using namespace mlir::step;

namespace {

/// C1 of every collective: G >= 1 and the groups list 0..N-1 once each.
LogicalResult checkGroups(std::optional<Location> loc, StringRef name,
                          int64_t groupSize, ArrayRef<int64_t> groups) {
  if (groupSize < 1)
    return fail(loc, name, "group_size = ", groupSize, " must be >= 1 (C1)");
  int64_t n = static_cast<int64_t>(groups.size());
  if (n == 0 || n % groupSize != 0)
    return fail(loc, name, "replica_groups lists ", n,
                " replicas, expected a positive multiple of group_size = ",
                groupSize, " (C1)");
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t r : groups) {
    if (r < 0 || r >= n || seen[static_cast<size_t>(r)])
      return fail(loc, name, "replica_groups must list 0..", n - 1,
                  " once each, found ", r, " (C1)");
    seen[static_cast<size_t>(r)] = true;
  }
  return success();
}

/// C2: the reduction word, and mean only on floats.
LogicalResult checkReduce(std::optional<Location> loc, StringRef name,
                          StringRef reduce, Type operand, bool scatter) {
  bool known = reduce == "sum" || reduce == "mean" ||
               (!scatter && (reduce == "max" || reduce == "min"));
  if (!known)
    return fail(loc, name, "reduce = \"", reduce, "\" must be ",
                scatter ? "sum or mean" : "sum, mean, max or min", " (C2)");
  auto t = cast<RankedTensorType>(operand);
  if (reduce == "mean" && !isa<FloatType>(t.getElementType()))
    return fail(loc, name, "reduce = \"mean\" needs a float operand, found ",
                quoted(operand), " (C2)");
  if (reduce == "sum" && t.getElementType().isInteger(1))
    return fail(loc, name, "reduce = \"sum\" of i1 is not defined (max or "
                           "min are), found ",
                quoted(operand), " (C2)");
  return success();
}

/// C3 of reduce_scatter and all_gather: dim 0 is static (and divisible).
LogicalResult checkDim0(std::optional<Location> loc, StringRef name,
                        RankedTensorType t, int64_t groupSize, bool divide) {
  if (t.getRank() < 1 || t.isDynamicDim(0))
    return fail(loc, name, "needs an operand of rank >= 1 with a static dim "
                           "0, found ",
                quoted(t), " (C3)");
  if (divide && t.getDimSize(0) % groupSize != 0)
    return fail(loc, name, "dim 0 of ", quoted(t),
                " must be divisible by group_size = ", groupSize, " (C3)");
  return success();
}

RankedTensorType withDim0(RankedTensorType t, int64_t d0) {
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = d0;
  return t.clone(shape);
}

/// What every collective's inference shares: its adaptor, its name, its
/// operand type and group size, and C1. `result` checks the rest and gives
/// the result type (null after reporting a violation).
template <typename Op, typename Result>
LogicalResult inferCollective(std::optional<Location> loc, ValueRange operands,
                              DictionaryAttr attrs, OpaqueProperties props,
                              RegionRange regions,
                              SmallVectorImpl<Type> &inferred, Result result) {
  typename Op::Adaptor a(operands, attrs, props, regions);
  StringRef name = Op::getOperationName();
  auto t = cast<RankedTensorType>(a.getOperand().getType());
  auto g = static_cast<int64_t>(a.getGroupSize());
  if (failed(checkGroups(loc, name, g, a.getReplicaGroups())))
    return failure();
  Type type = result(a, name, t, g);
  if (!type)
    return failure();
  inferred.push_back(type);
  return success();
}

} // namespace

#define STEP_COLLECTIVE_INFER(Op)                                             \
  LogicalResult Op::inferReturnTypes(                                         \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,        \
      DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,      \
      SmallVectorImpl<Type> &inferred) {                                      \
    return inferCollective<Op>(loc, operands, attrs, props, regions,          \
                               inferred, Op##Result{loc});                    \
  }

namespace {
struct AllReduceOpResult {
  std::optional<Location> loc;
  Type operator()(AllReduceOp::Adaptor &a, StringRef name, RankedTensorType t,
                  int64_t) const {
    return failed(checkReduce(loc, name, a.getReduce(), t, false)) ? Type() : t;
  }
};
struct ReduceScatterOpResult {
  std::optional<Location> loc;
  Type operator()(ReduceScatterOp::Adaptor &a, StringRef name,
                  RankedTensorType t, int64_t g) const {
    if (failed(checkReduce(loc, name, a.getReduce(), t, true)) ||
        failed(checkDim0(loc, name, t, g, true)))
      return Type();
    return withDim0(t, t.getDimSize(0) / g);
  }
};
struct AllGatherOpResult {
  std::optional<Location> loc;
  Type operator()(AllGatherOp::Adaptor &, StringRef name, RankedTensorType t,
                  int64_t g) const {
    if (failed(checkDim0(loc, name, t, g, false)))
      return Type();
    return withDim0(t, t.getDimSize(0) * g);
  }
};
struct LocalShardOpResult {
  std::optional<Location> loc;
  Type operator()(LocalShardOp::Adaptor &, StringRef name, RankedTensorType t,
                  int64_t g) const {
    if (!t.hasStaticShape()) {
      (void)fail(loc, name, "needs a static operand shape, found ", quoted(t),
                 " (C3)");
      return Type();
    }
    return RankedTensorType::get({shardSize(t.getNumElements(), g)},
                                 t.getElementType());
  }
};
} // namespace

STEP_COLLECTIVE_INFER(AllReduceOp)
STEP_COLLECTIVE_INFER(ReduceScatterOp)
STEP_COLLECTIVE_INFER(AllGatherOp)
STEP_COLLECTIVE_INFER(LocalShardOp)
#undef STEP_COLLECTIVE_INFER

int64_t mlir::step::shardSize(int64_t numElements, int64_t groupSize) {
  return (numElements + groupSize - 1) / groupSize;
}
