//===- StepOps.cpp - The step dialect and its ops -------------------------===//
//
// Dialect registration, the `SameTypes` custom assembly directive and the
// generated op definitions. Shape rules live in TypeInference*.cpp, folders in
// StepOpFolders.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace mlir::step;

#include "dialects/step/StepDialect.cpp.inc"
#include "dialects/step/StepEnums.cpp.inc"

namespace {
/// Every step op is pure (a step.fusion holds only step ops), so a call to
/// a function of step ops can always be inlined (step-grad-accum and step-optimizer build calls
/// that the training pipeline inlines into one @train_step).
struct StepInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void StepDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/step/StepOps.cpp.inc"
      >();
  addInterfaces<StepInlinerInterface>();
}

Operation *StepDialect::materializeConstant(OpBuilder &builder,
                                            Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

//===----------------------------------------------------------------------===//
// Host memory: step.memory arguments, step.host ops
//===----------------------------------------------------------------------===//

bool mlir::step::isHostValue(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto f = dyn_cast_or_null<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!f || arg.getOwner() != &f.getBody().front())
      return false;
    auto memory =
        f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.memory");
    return memory && memory.getValue() == "host";
  }
  Operation *d = v.getDefiningOp();
  return isa<OffloadOp>(d) || d->hasAttr("step.host");
}

bool mlir::step::mayRunOnHost(Operation *op) {
  return !isa<OffloadOp, ReloadOp, AllReduceOp, ReduceScatterOp, AllGatherOp,
              LocalShardOp>(op);
}

/// `step.memory` is "host" or "device".
static LogicalResult verifyMemoryAttr(Operation *op, NamedAttribute attr,
                                      const char *what, unsigned index) {
  if (attr.getName() != "step.memory")
    return success();
  auto memory = dyn_cast<StringAttr>(attr.getValue());
  if (!memory || (memory.getValue() != "host" && memory.getValue() != "device"))
    return op->emitOpError("step.memory of ")
           << what << " " << index << " must be \"host\" or \"device\", found "
           << attr.getValue();
  return success();
}

LogicalResult StepDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned arg,
                                                    NamedAttribute attr) {
  return verifyMemoryAttr(op, attr, "argument", arg);
}

LogicalResult StepDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned,
                                                       unsigned result,
                                                       NamedAttribute attr) {
  return verifyMemoryAttr(op, attr, "result", result);
}

LogicalResult StepDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() != "step.host")
    return success();
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitOpError("step.host must be a unit attribute");
  if (!mayRunOnHost(op))
    return op->emitOpError("cannot run on the host (step.host): a copy "
                           "between memories, a collective or a rank's "
                           "shard runs on the device");
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (!isHostValue(v) && !v.getDefiningOp<ConstantOp>())
      return op->emitOpError("runs on the host (step.host) but operand ")
             << i << " is in device memory; expected a host value "
                     "(step.offload, a step.host op, a step.memory = "
                     "\"host\" argument) or a constant";
  return success();
}

//===----------------------------------------------------------------------===//
// custom<SameTypes>: `: T` when both operands have type T, else `: T1, T2`
//===----------------------------------------------------------------------===//

static ParseResult parseSameTypes(OpAsmParser &parser, Type &first,
                                  Type &second) {
  if (parser.parseType(first))
    return failure();
  second = first;
  if (succeeded(parser.parseOptionalComma()))
    return parser.parseType(second);
  return success();
}

static void printSameTypes(OpAsmPrinter &printer, Operation *, Type first,
                           Type second) {
  printer << first;
  if (second != first)
    printer << ", " << second;
}

#define GET_OP_CLASSES
#include "dialects/step/StepOps.cpp.inc"
