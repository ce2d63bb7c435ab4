//===- Interpreter.cpp - Reference interpreter of the step dialect --------===//
//
// Walks the body of a func.func in order, keeping each SSA value as a host
// tensor until its last use. Supports step ops, func.call and func.return.
// Every result is checked against the static dims of its declared type, so a
// kernel that disagrees with shape inference is caught at the op.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"

#include "compiler/interpreter/EvalOp.h"
#include "dialects/step/StepOps.h"
#include "runtime/Half.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

namespace step {
using namespace mlir;
namespace ops = mlir::step;


std::optional<rt::DType> toDType(Type t) {
  if (t.isF32()) return rt::DType::F32;
  if (t.isF16()) return rt::DType::F16;
  if (t.isBF16()) return rt::DType::BF16;
  if (t.isSignlessInteger(32)) return rt::DType::I32;
  if (t.isSignlessInteger(64)) return rt::DType::I64;
  if (t.isSignlessInteger(1)) return rt::DType::I1;
  return std::nullopt;
}

Type toMlirType(rt::DType dtype, MLIRContext *ctx) {
  Builder b(ctx);
  switch (dtype) {
  case rt::DType::F32: return b.getF32Type();
  case rt::DType::F16: return b.getF16Type();
  case rt::DType::BF16: return b.getBF16Type();
  case rt::DType::I32: return b.getI32Type();
  case rt::DType::I64: return b.getI64Type();
  case rt::DType::I1: return b.getI1Type();
  }
  llvm_unreachable("unknown dtype");
}

rt::HostTensor fromElementsAttr(DenseElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  auto dtype = toDType(type.getElementType());
  if (!dtype)
    throw rt::Error("constant of unsupported element type");
  rt::HostTensor t(*dtype, rt::Shape(type.getShape()));
  // getValues iterates numel() values, a splat included.
  auto fill = [](auto *out, auto values) {
    int64_t i = 0;
    for (auto v : values)
      out[i++] = v;
  };
  switch (*dtype) {
  case rt::DType::F32:
    fill(t.data<float>(), attr.getValues<float>());
    break;
  case rt::DType::F16:
  case rt::DType::BF16: {
    uint16_t *out = t.data<uint16_t>();
    int64_t i = 0;
    for (APFloat v : attr.getValues<APFloat>())
      out[i++] = static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue());
    break;
  }
  case rt::DType::I32:
    fill(t.data<int32_t>(), attr.getValues<int32_t>());
    break;
  case rt::DType::I64:
    fill(t.data<int64_t>(), attr.getValues<int64_t>());
    break;
  case rt::DType::I1: {
    uint8_t *out = t.data<uint8_t>();
    int64_t i = 0;
    for (bool v : attr.getValues<bool>())
      out[i++] = v ? 1 : 0;
    break;
  }
  }
  return t;
}

std::string argumentName(func::FuncOp func, unsigned i) {
  if (auto name = func.getArgAttrOfType<StringAttr>(i, "step.name"))
    return name.str();
  return "arg" + std::to_string(i);
}

std::string resultName(func::FuncOp func, unsigned i) {
  if (auto name = func.getResultAttrOfType<StringAttr>(i, "step.name"))
    return name.str();
  return "result" + std::to_string(i);
}

static std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Whether `shape` fits `type`: same rank, equal static dims.
static bool fitsType(const rt::Shape &shape, RankedTensorType type) {
  if (static_cast<int64_t>(shape.size()) != type.getRank())
    return false;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (!type.isDynamicDim(i) && type.getDimSize(i) != shape[i])
      return false;
  return true;
}

void checkArgument(const rt::HostTensor &value, Type type,
                         const std::string &what) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    throw rt::Error(what + ": unsupported argument type " + typeString(type));
  auto dtype = toDType(tensor.getElementType());
  if (!dtype || *dtype != value.dtype())
    throw rt::Error(what + ": expected element type " +
                    typeString(tensor.getElementType()) + ", found " +
                    rt::dtypeName(value.dtype()));
  if (!fitsType(value.shape(), tensor))
    throw rt::Error(what + ": expected shape " + typeString(tensor) +
                    ", found " + rt::shapeToString(value.shape()));
}

namespace {
/// Runs one function; `func.call` recurses through a fresh Runner.
class Runner {
public:
  explicit Runner(func::FuncOp func) : func(func) {}

  FailureOr<std::vector<rt::HostTensor>>
  run(const std::vector<rt::HostTensor> &args) {
    Block &body = func.getBody().front();
    if (args.size() != body.getNumArguments())
      return func.emitError() << "expected " << body.getNumArguments()
                              << " arguments, got " << args.size();
    for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
      try {
        checkArgument(args[i], arg.getType(),
                      "argument '" + argumentName(func, i) + "'");
      } catch (const rt::Error &e) {
        return func.emitError() << e.what();
      }
    }
    return runBlock(body, args);
  }

  /// Runs the ops of `body` (a function body or a step.fusion body) on
  /// `args` and returns the operands of its terminator.
  FailureOr<std::vector<rt::HostTensor>>
  runBlock(Block &body, const std::vector<rt::HostTensor> &args) {
    for (auto [arg, value] : llvm::zip(body.getArguments(), args))
      values[arg] = value;
    countUses(body);
    for (Operation &op : body) {
      if (isa<func::ReturnOp, ops::YieldOp>(op)) {
        std::vector<rt::HostTensor> results;
        for (Value v : op.getOperands())
          results.push_back(values.lookup(v));
        return results;
      }
      if (failed(step(op)))
        return failure();
    }
    return func.emitError() << "a block without a terminator";
  }

private:
  void countUses(Block &body) {
    for (Operation &op : body)
      for (Value v : op.getOperands())
        ++remainingUses[v];
  }

  LogicalResult step(Operation &op) {
    // An operand at its last use is moved out instead of copied.
    std::vector<rt::HostTensor> in;
    for (Value v : op.getOperands()) {
      auto it = values.find(v);
      if (remainingUses[v] == 1 && !isa<BlockArgument>(v))
        in.push_back(std::move(it->second));
      else
        in.push_back(it->second);
    }
    std::vector<rt::HostTensor> out;
    try {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            call, call.getCalleeAttr());
        if (!callee || callee.isExternal())
          return op.emitError() << "callee has no body";
        auto r = Runner(callee).run(in);
        if (failed(r))
          return op.emitError() << "in call to @" << callee.getName();
        out = std::move(*r);
      } else if (auto fusion = dyn_cast<ops::FusionOp>(op)) {
        // The body runs on the same kernels as unfused ops: a fusion never
        // changes a result.
        auto r = Runner(func).runBlock(fusion.getBlock(), in);
        if (failed(r))
          return op.emitError() << "in the body of this fusion";
        out = std::move(*r);
      } else if (op.getDialect() &&
                 op.getDialect()->getNamespace() == "step") {
        out = evalStepOp(op, in);
      } else {
        return op.emitError()
               << "the interpreter does not support '" << op.getName() << "'";
      }
    } catch (const rt::Error &e) {
      return op.emitError() << e.what();
    }
    for (auto [result, value] : llvm::zip(op.getResults(), out)) {
      auto type = cast<RankedTensorType>(result.getType());
      if (!fitsType(value.shape(), type) ||
          toDType(type.getElementType()) != value.dtype())
        return op.emitError() << "internal error: kernel produced "
                              << rt::dtypeName(value.dtype()) << " "
                              << rt::shapeToString(value.shape())
                              << " for result type " << type;
      values[result] = std::move(value);
    }
    // Free operands after their last use: peak memory stays near the live
    // set instead of the whole trace.
    for (Value v : op.getOperands())
      if (--remainingUses[v] == 0 && !isa<BlockArgument>(v))
        values.erase(v);
    return success();
  }

  func::FuncOp func;
  llvm::DenseMap<Value, rt::HostTensor> values;
  llvm::DenseMap<Value, int64_t> remainingUses;
};
} // namespace

FailureOr<std::vector<rt::HostTensor>> interpret(func::FuncOp func, const std::vector<rt::HostTensor> &args) {
  if (func.isExternal())
    return func.emitError() << "cannot interpret a function without a body";
  return Runner(func).run(args);
}

} // namespace step
