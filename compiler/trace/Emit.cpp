//===- Emit.cpp - Checked op creation, broadcasting, promotion ------------===//
//
// The tracer's shared machinery (GraphState.h). The one rule that matters
// here: no op reaches the module unchecked. GraphState::check runs the op's
// own shape inference and verifier with diagnostics captured, so a shape
// mistake becomes a ShapeError carrying the dialect's precise message instead
// of an abort inside a generated builder or an invalid module found later.
//
//===----------------------------------------------------------------------===//

#include "compiler/trace/GraphState.h"

#include "compiler/interpreter/Interpreter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstdint>

namespace step::trace::detail {

namespace ops = mlir::step;
using mlir::ShapedType;

GraphState::GraphState(uint64_t seed)
    : ctx(mlir::MLIRContext::Threading::DISABLED), builder(&ctx), seed(seed) {
  ctx.loadDialect<ops::StepDialect, mlir::func::FuncDialect>();
  // Messages are captured into exceptions; the op dump would only repeat
  // what the message says.
  ctx.printOpOnDiagnostic(false);
  mlir::Location unknown = mlir::UnknownLoc::get(&ctx);
  module = mlir::ModuleOp::create(unknown);
  builder.setInsertionPointToEnd(module->getBody());
  func = builder.create<mlir::func::FuncOp>(
      unknown, "forward", builder.getFunctionType({}, {}));
  builder.setInsertionPointToEnd(func.addEntryBlock());
}

mlir::Location GraphState::location(const SourceLoc &loc, llvm::StringRef op) {
  mlir::Location child =
      loc.file ? mlir::Location(mlir::FileLineColLoc::get(&ctx, loc.file,
                                                          loc.line, 0))
               : mlir::Location(mlir::UnknownLoc::get(&ctx));
  return mlir::NameLoc::get(mlir::StringAttr::get(&ctx, op), child);
}

void GraphState::check(mlir::Operation *op, llvm::StringRef what,
                       const SourceLoc &loc) {
  std::string message;
  bool ok = true;
  {
    mlir::ScopedDiagnosticHandler capture(&ctx, [&](mlir::Diagnostic &d) {
      if (message.empty())
        message = d.str();
      return mlir::success();
    });
    if (auto infer = llvm::dyn_cast<mlir::InferTypeOpInterface>(op)) {
      llvm::SmallVector<mlir::Type, 1> types;
      ok = mlir::succeeded(infer.inferReturnTypes(
          &ctx, op->getLoc(), op->getOperands(), op->getAttrDictionary(),
          op->getPropertiesStorage(), op->getRegions(), types));
      if (ok)
        for (auto [result, type] : llvm::zip(op->getResults(), types))
          result.setType(type);
    }
    ok = ok && mlir::succeeded(mlir::verify(op));
  }
  if (ok) {
    if (autocastOff > 0) // ops a step-amp must leave in f32
      op->setAttr("step.amp", mlir::StringAttr::get(&ctx, "f32"));
    if (checkpoint > 0) // values step-remat recomputes in the backward
      op->setAttr("step.checkpoint",
                  mlir::IntegerAttr::get(mlir::IntegerType::get(&ctx, 64),
                                         checkpoint));
    return;
  }
  op->erase();
  shapeError(what, message.empty() ? "invalid op" : message, loc);
}

//===----------------------------------------------------------------------===//
// Messages and errors
//===----------------------------------------------------------------------===//

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ", ";
    s += ShapedType::isDynamic(d) ? "?" : std::to_string(d);
  }
  return s + "]";
}

std::string shapeOf(const Tensor &t) { return shapeStr(dimsOf(t.value())); }

std::string where(const SourceLoc &loc) {
  if (!loc.file)
    return "";
  return " (at " + std::string(loc.file) + ":" + std::to_string(loc.line) +
         ")";
}

void shapeError(llvm::StringRef op, const std::string &msg,
                const SourceLoc &loc) {
  throw ShapeError(op.str() + ": " + msg + where(loc));
}

void dtypeError(llvm::StringRef op, const std::string &msg,
                const SourceLoc &loc) {
  throw DTypeError(op.str() + ": " + msg + where(loc));
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

GraphState &graphOf(llvm::StringRef op, std::initializer_list<Tensor> tensors,
                    const SourceLoc &loc) {
  GraphState *g = nullptr;
  for (const Tensor &t : tensors) {
    if (!t)
      throw std::invalid_argument(op.str() + ": a Tensor argument is null" +
                                  where(loc));
    if (g && t.state() != g)
      throw std::invalid_argument(
          op.str() + ": the tensors belong to different graphs" + where(loc));
    g = t.state();
  }
  if (!g)
    throw std::invalid_argument(op.str() + ": needs a tensor" + where(loc));
  if (g->finished)
    throw std::logic_error(op.str() +
                           ": the graph is finished (output() was called)" +
                           where(loc));
  return *g;
}

mlir::RankedTensorType typeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

llvm::ArrayRef<int64_t> dimsOf(mlir::Value v) { return typeOf(v).getShape(); }

DType dtypeOf(mlir::Value v) { return *toDType(typeOf(v).getElementType()); }

mlir::Type elementType(GraphState &g, DType dtype) {
  return toMlirType(dtype, &g.ctx);
}

mlir::RankedTensorType tensorType(GraphState &g, llvm::ArrayRef<int64_t> shape,
                                  DType dtype) {
  return mlir::RankedTensorType::get(shape, elementType(g, dtype));
}

int64_t normalizeDim(llvm::StringRef op, int64_t dim, int64_t rank,
                     llvm::ArrayRef<int64_t> shape, const SourceLoc &loc) {
  if (dim < -rank || dim >= rank)
    shapeError(op,
               "dim " + std::to_string(dim) + " is out of range for " +
                   shapeStr(shape) + " (expected [" + std::to_string(-rank) +
                   ", " + std::to_string(rank - 1) + "])",
               loc);
  return dim < 0 ? dim + rank : dim;
}

//===----------------------------------------------------------------------===//
// Dtype promotion
//===----------------------------------------------------------------------===//

namespace {
enum class Category { Bool, Int, Float };

Category categoryOf(DType t) {
  if (t == DType::I1)
    return Category::Bool;
  return rt::isFloat(t) ? Category::Float : Category::Int;
}

/// The dtype a Python scalar of this kind stands for in promotion.
DType scalarDType(Scalar::Kind kind) {
  switch (kind) {
  case Scalar::Kind::Bool: return DType::I1;
  case Scalar::Kind::Int: return DType::I64;
  case Scalar::Kind::Float: return DType::F32;
  }
  return DType::F32;
}

void promoteInto(std::optional<DType> &acc, DType t) {
  acc = acc ? promoteTypes(*acc, t) : t;
}

/// c10's combine_categories: the higher-priority class decides unless the
/// lower one is of a higher category.
std::optional<DType> combine(std::optional<DType> higher,
                             std::optional<DType> lower) {
  if (!higher)
    return lower;
  if (!lower)
    return higher;
  if (categoryOf(*higher) == Category::Float)
    return higher;
  if (*higher == DType::I1 || categoryOf(*lower) == Category::Float)
    return promoteTypes(*higher, *lower);
  return higher;
}
} // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b)
    return a;
  Category ca = categoryOf(a), cb = categoryOf(b);
  if (ca != cb)
    return ca > cb ? a : b; // bool < int < float: the higher category wins
  if (ca == Category::Int)
    return DType::I64; // i32 with i64
  // Two different float types: f16 with bf16 has no common 16-bit type, and
  // f32 holds both.
  return DType::F32;
}

DType resultType(llvm::ArrayRef<Operand> operands) {
  std::optional<DType> dimensioned, zeroDim, scalars;
  for (const Operand &o : operands) {
    if (o.scalar)
      promoteInto(scalars, scalarDType(o.scalar->kind));
    else if (o.tensor.rank() > 0)
      promoteInto(dimensioned, o.tensor.dtype());
    else
      promoteInto(zeroDim, o.tensor.dtype());
  }
  return *combine(dimensioned, combine(zeroDim, scalars));
}

//===----------------------------------------------------------------------===//
// Emission helpers
//===----------------------------------------------------------------------===//

mlir::Value castTo(GraphState &g, mlir::Value v, DType dtype,
                   const SourceLoc &loc, llvm::StringRef op) {
  if (dtypeOf(v) == dtype)
    return v;
  return g.create<ops::CastOp>(loc, op, tensorType(g, dimsOf(v), dtype), v);
}

mlir::Value reshapeTo(GraphState &g, mlir::Value v,
                      llvm::ArrayRef<int64_t> shape, const SourceLoc &loc,
                      llvm::StringRef op) {
  if (dimsOf(v) == shape)
    return v;
  return g.create<ops::ReshapeOp>(loc, op,
                                  tensorType(g, shape, dtypeOf(v)), v);
}

mlir::Value splat(GraphState &g, const Scalar &s, DType dtype,
                  llvm::ArrayRef<int64_t> shape, const SourceLoc &loc,
                  llvm::StringRef op) {
  // A dynamic shape: a scalar constant broadcast to it.
  if (llvm::any_of(shape, ShapedType::isDynamic))
    return broadcastTo(g, splat(g, s, dtype, {}, loc, op), shape, loc, op);
  auto type = tensorType(g, shape, dtype);
  mlir::DenseElementsAttr value;
  if (isFloat(dtype)) {
    llvm::APFloat f(s.kind == Scalar::Kind::Float
                        ? s.value
                        : static_cast<double>(s.intValue));
    bool lost = false;
    f.convert(llvm::cast<mlir::FloatType>(type.getElementType())
                  .getFloatSemantics(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    value = mlir::DenseElementsAttr::get(type, llvm::ArrayRef(f));
  } else if (dtype == DType::I1) {
    bool b = s.kind == Scalar::Kind::Float ? s.value != 0 : s.intValue != 0;
    value = mlir::DenseElementsAttr::get(type, llvm::ArrayRef(b));
  } else {
    // Truncation toward zero, saturating, as HostTensor::setFromDouble.
    int64_t i = s.intValue;
    if (s.kind == Scalar::Kind::Float) {
      double v = s.value != s.value ? 0.0 : s.value;
      i = v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : int64_t(v);
    }
    unsigned width = dtype == DType::I32 ? 32 : 64;
    if (width == 32)
      i = std::clamp<int64_t>(i, INT32_MIN, INT32_MAX);
    llvm::APInt bits(width, static_cast<uint64_t>(i), /*isSigned=*/true);
    value = mlir::DenseElementsAttr::get(type, llvm::ArrayRef(bits));
  }
  return g.create<ops::ConstantOp>(loc, op, type,
                                   llvm::cast<mlir::ElementsAttr>(value));
}

std::vector<int64_t>
broadcastShapes(llvm::StringRef op, llvm::ArrayRef<std::vector<int64_t>> shapes,
                const SourceLoc &loc) {
  size_t rank = 0;
  for (const auto &s : shapes)
    rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t &cur = out[rank - 1 - i];
    for (const auto &s : shapes) {
      if (i >= s.size())
        continue;
      int64_t d = s[s.size() - 1 - i];
      if (d == 1 || d == cur)
        continue;
      if (cur == 1) {
        cur = d;
      } else if (ShapedType::isDynamic(d)) {
        // A dynamic dim meeting a static one (other than 1) is taken to
        // equal it, as the elementwise ops' C2 does.
      } else if (ShapedType::isDynamic(cur)) {
        cur = d;
      } else {
        std::string msg = "cannot broadcast ";
        for (auto [k, t] : llvm::enumerate(shapes))
          msg += (k ? " with " : "") + shapeStr(t);
        shapeError(op, msg, loc);
      }
    }
  }
  return out;
}

mlir::Value broadcastTo(GraphState &g, mlir::Value v,
                        llvm::ArrayRef<int64_t> target, const SourceLoc &loc,
                        llvm::StringRef op) {
  llvm::ArrayRef<int64_t> dims = dimsOf(v);
  int64_t offset = static_cast<int64_t>(target.size()) -
                   static_cast<int64_t>(dims.size());
  bool needed = offset > 0;
  for (auto [k, d] : llvm::enumerate(dims))
    needed = needed || (d == 1 && target[k + offset] != 1);
  if (!needed)
    return v;
  // A size-1 operand dim cannot map to a dynamic result dim (C4): drop it,
  // leaving that result dim unmapped (sized by what the result is combined
  // with; step-pad-dynamic names its symbol).
  llvm::SmallVector<int64_t> kept, map;
  for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k) {
    if (dims[k] == 1 && ShapedType::isDynamic(target[k + offset]))
      continue;
    kept.push_back(dims[k]);
    map.push_back(k + offset);
  }
  if (kept.size() != dims.size())
    v = g.create<ops::ReshapeOp>(loc, op, tensorType(g, kept, dtypeOf(v)), v);
  return g.create<ops::BroadcastInDimOp>(
      loc, op, tensorType(g, target, dtypeOf(v)), v, map);
}

std::vector<mlir::Value> unify(GraphState &g, llvm::StringRef op,
                               llvm::ArrayRef<Operand> operands, DType dtype,
                               const SourceLoc &loc) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Operand &o : operands)
    if (!o.scalar)
      shapes.emplace_back(dimsOf(o.tensor.value()).vec());
  std::vector<int64_t> target = broadcastShapes(op, shapes, loc);
  std::vector<mlir::Value> out;
  for (const Operand &o : operands)
    out.push_back(materialize(g, op, o, dtype, target, loc));
  return out;
}

mlir::Value materialize(GraphState &g, llvm::StringRef op, const Operand &o,
                        DType dtype, llvm::ArrayRef<int64_t> target,
                        const SourceLoc &loc) {
  if (o.scalar)
    return splat(g, *o.scalar, dtype, target, loc, op);
  // Cast before broadcasting: the cast then touches the smaller tensor.
  mlir::Value v = castTo(g, o.tensor.value(), dtype, loc, op);
  return broadcastTo(g, v, target, loc, op);
}

} // namespace step::trace::detail
