//===- GraphState.h - Internals shared by the tracer's sources --*- C++ -*-===//
//
// Not a public header. GraphState is what a Graph owns (context, module,
// @forward, builder, parameter specs); the helpers below are the tracer's
// vocabulary: checked op creation, broadcasting, dtype promotion, casts and
// splat constants. Shapes here are MLIR shapes (ShapedType::kDynamic for a
// dynamic dim); only the public API speaks kDynamic = -1.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_TRACE_GRAPHSTATE_H
#define STEP_COMPILER_TRACE_GRAPHSTATE_H

#include "compiler/trace/Graph.h"
#include "dialects/step/StepOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace step::trace::detail {

struct ParamSpec {
  std::string name;
  Shape shape;
  DType dtype;
  init::Init init;
};

struct GraphState {
  explicit GraphState(uint64_t seed);

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  mlir::OpBuilder builder;
  uint64_t seed;
  std::vector<ParamSpec> params;
  std::set<std::string> names;
  bool finished = false;
  /// Live AutocastOff scopes: while > 0, traced ops get step.amp = "f32".
  int autocastOff = 0;
  /// The innermost live Checkpoint scope's id (0: none); traced ops get
  /// step.checkpoint = id. Ids count from 1 in the order scopes open.
  int64_t checkpoint = 0, checkpoints = 0;

  /// loc("op"("file":line:0)): the traced function's name and the user's
  /// line, so diagnostics of later passes point at the model source.
  mlir::Location location(const SourceLoc &loc, llvm::StringRef op);

  /// Creates OpTy at the end of @forward from an ODS builder that takes the
  /// result type first (`type` is a placeholder for ops with type
  /// inference), then checks it: the op's inferReturnTypes (the same static
  /// function its generated builder would call, minus the abort on failure)
  /// and its verifier, with diagnostics captured. On failure the op is
  /// erased and ShapeError(what + ": " + message) is thrown.
  template <typename OpTy, typename... Args>
  mlir::Value create(const SourceLoc &loc, llvm::StringRef what,
                     mlir::Type type, Args &&...args) {
    auto op = builder.create<OpTy>(location(loc, what), type,
                                   std::forward<Args>(args)...);
    check(op.getOperation(), what, loc);
    return op->getResult(0);
  }

  void check(mlir::Operation *op, llvm::StringRef what, const SourceLoc &loc);
};

//===----------------------------------------------------------------------===//
// Messages and errors
//===----------------------------------------------------------------------===//

/// "[32, ?, 784]".
std::string shapeStr(llvm::ArrayRef<int64_t> shape);
std::string shapeOf(const Tensor &t);
/// " (at FILE:LINE)".
std::string where(const SourceLoc &loc);
[[noreturn]] void shapeError(llvm::StringRef op, const std::string &msg,
                             const SourceLoc &loc);
[[noreturn]] void dtypeError(llvm::StringRef op, const std::string &msg,
                             const SourceLoc &loc);

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

/// The graph of `tensors` (all non-null, of one unfinished graph), else
/// throws std::invalid_argument / std::logic_error naming `op`.
GraphState &graphOf(llvm::StringRef op, std::initializer_list<Tensor> tensors,
                    const SourceLoc &loc);
mlir::RankedTensorType typeOf(mlir::Value v);
llvm::ArrayRef<int64_t> dimsOf(mlir::Value v);
DType dtypeOf(mlir::Value v);
mlir::Type elementType(GraphState &g, DType dtype);
mlir::RankedTensorType tensorType(GraphState &g, llvm::ArrayRef<int64_t> shape,
                                  DType dtype);
/// A dim in [-rank, rank) made non-negative; else ShapeError.
int64_t normalizeDim(llvm::StringRef op, int64_t dim, int64_t rank,
                     llvm::ArrayRef<int64_t> shape, const SourceLoc &loc);

//===----------------------------------------------------------------------===//
// Dtype promotion (PyTorch's torch.result_type)
//===----------------------------------------------------------------------===//

/// One participant of a promotion: a tensor (dimensioned or rank 0) or a
/// host scalar.
struct Operand {
  Tensor tensor;
  std::optional<Scalar> scalar;
  Operand(const Tensor &t) : tensor(t) {}
  Operand(const Scalar &s) : scalar(s) {}
};

/// torch.promote_types for two dtypes.
DType promoteTypes(DType a, DType b);
/// torch.result_type over operands: dimensioned tensors decide within their
/// category (bool < integer < float); a rank-0 tensor or a scalar only when
/// it is of a higher category (a float scalar then means f32).
DType resultType(llvm::ArrayRef<Operand> operands);

//===----------------------------------------------------------------------===//
// Emission helpers
//===----------------------------------------------------------------------===//

/// step.cast to `dtype` (the value itself when it already has it).
mlir::Value castTo(GraphState &g, mlir::Value v, DType dtype,
                   const SourceLoc &loc, llvm::StringRef op);
/// step.reshape to a shape the caller has computed.
mlir::Value reshapeTo(GraphState &g, mlir::Value v,
                      llvm::ArrayRef<int64_t> shape, const SourceLoc &loc,
                      llvm::StringRef op);
/// A splat step.constant of `shape` (static) holding `s` in `dtype`.
mlir::Value splat(GraphState &g, const Scalar &s, DType dtype,
                  llvm::ArrayRef<int64_t> shape, const SourceLoc &loc,
                  llvm::StringRef op);
/// NumPy broadcast of several shapes (right-aligned; size-1 dims expand; a
/// dynamic dim is taken to equal a static one other than 1). Throws
/// "<op>: cannot broadcast A with B".
std::vector<int64_t> broadcastShapes(llvm::StringRef op,
                                     llvm::ArrayRef<std::vector<int64_t>> shapes,
                                     const SourceLoc &loc);
/// `v` broadcast to `target` (a result of broadcastShapes including v's
/// shape): step.broadcast_in_dim mapping operand dim k to k + rank offset,
/// size-1 operand dims repeating. Nothing when no dim needs expanding.
mlir::Value broadcastTo(GraphState &g, mlir::Value v,
                        llvm::ArrayRef<int64_t> target, const SourceLoc &loc,
                        llvm::StringRef op);
/// One operand as a value of `dtype` and shape `target`: a tensor is cast
/// and broadcast, a scalar becomes a splat constant.
mlir::Value materialize(GraphState &g, llvm::StringRef op, const Operand &o,
                        DType dtype, llvm::ArrayRef<int64_t> target,
                        const SourceLoc &loc);
/// The operands promoted to one dtype (`dtype`), broadcast to one shape;
/// scalars become splat constants. Returns the values in operand order.
std::vector<mlir::Value> unify(GraphState &g, llvm::StringRef op,
                               llvm::ArrayRef<Operand> operands, DType dtype,
                               const SourceLoc &loc);
/// The traced tensor of `v`.
inline Tensor wrap(GraphState &g, mlir::Value v) { return Tensor(&g, v); }

} // namespace step::trace::detail

#endif // STEP_COMPILER_TRACE_GRAPHSTATE_H
