//===- ElementwiseOps.cpp - Tracing elementwise ops -----------------------===//
//
// Unary and binary arithmetic, comparisons, where, cast and stop_gradient.
// A binary op is traced in three steps: the result dtype (torch.result_type,
// then the op's own rule: true division and pow compute in floating point),
// step.cast of the operands that differ, and step.broadcast_in_dim of the
// operands whose shape is not the broadcast shape (scalars become splat
// constants).
//
//===----------------------------------------------------------------------===//

#include "compiler/trace/GraphState.h"
#include "compiler/trace/Ops.h"

namespace step::trace {

using namespace detail;
namespace ops = mlir::step;

namespace {

/// The graph of a binary op's operands (at least one is a tensor).
GraphState &graphOfOperands(llvm::StringRef op,
                            llvm::ArrayRef<Operand> operands,
                            const SourceLoc &loc) {
  GraphState *g = nullptr;
  for (const Operand &o : operands)
    if (!o.scalar) {
      GraphState &h = graphOf(op, {o.tensor}, loc);
      if (g && g != &h)
        throw std::invalid_argument(op.str() +
                                    ": the tensors belong to different graphs" +
                                    where(loc));
      g = &h;
    }
  return *g;
}

/// How an arithmetic op picks its compute dtype from the promoted one.
enum class Rule {
  Numeric,   // as promoted; bool is rejected (step ops take no i1 math)
  FloatMath, // integers and bool compute in f32 (true division, pow)
  IntOnly,   // integers only (truncating division)
};

template <typename OpTy>
Tensor arith(llvm::StringRef name, Rule rule, const Operand &a,
             const Operand &b, const SourceLoc &loc) {
  GraphState &g = graphOfOperands(name, {a, b}, loc);
  DType dtype = resultType({a, b});
  switch (rule) {
  case Rule::Numeric:
    if (dtype == DType::I1)
      dtypeError(name, "bool operands are not supported; cast them first",
                 loc);
    break;
  case Rule::FloatMath:
    if (!isFloat(dtype))
      dtype = DType::F32;
    break;
  case Rule::IntOnly:
    if (dtype != DType::I32 && dtype != DType::I64)
      dtypeError(name,
                 std::string("needs integer operands, got ") +
                     rt::dtypeName(dtype) + " (use div for floats)",
                 loc);
    break;
  }
  std::vector<mlir::Value> v = unify(g, name, {a, b}, dtype, loc);
  return Tensor(&g, g.create<OpTy>(loc, name, v[0].getType(), v[0], v[1]));
}

Tensor compare(llvm::StringRef name, ops::ComparisonDirection direction,
               const Operand &a, const Operand &b, const SourceLoc &loc) {
  GraphState &g = graphOfOperands(name, {a, b}, loc);
  std::vector<mlir::Value> v = unify(g, name, {a, b}, resultType({a, b}), loc);
  mlir::Type i1 = tensorType(g, dimsOf(v[0]), DType::I1);
  return Tensor(&g,
                g.create<ops::CompareOp>(loc, name, i1, direction, v[0], v[1]));
}

Tensor whereImpl(const Tensor &pred, const Operand &a, const Operand &b,
                 const SourceLoc &loc) {
  GraphState &g = graphOfOperands("where", {Operand(pred), a, b}, loc);
  if (pred.dtype() != DType::I1)
    dtypeError("where",
               std::string("the condition must be i1 (bool), got ") +
                   rt::dtypeName(pred.dtype()),
               loc);
  DType dtype = resultType({a, b});
  std::vector<std::vector<int64_t>> shapes{dimsOf(pred.value()).vec()};
  for (const Operand *o : {&a, &b})
    if (!o->scalar)
      shapes.push_back(dimsOf(o->tensor.value()).vec());
  std::vector<int64_t> target = broadcastShapes("where", shapes, loc);
  mlir::Value p = broadcastTo(g, pred.value(), target, loc, "where");
  mlir::Value x = materialize(g, "where", a, dtype, target, loc);
  mlir::Value y = materialize(g, "where", b, dtype, target, loc);
  return Tensor(&g, g.create<ops::SelectOp>(loc, "where", x.getType(), p, x, y));
}

/// neg, abs, relu: numeric types as they are.
template <typename OpTy>
Tensor numericUnary(llvm::StringRef name, const Tensor &x,
                    const SourceLoc &loc) {
  GraphState &g = graphOf(name, {x}, loc);
  if (x.dtype() == DType::I1)
    dtypeError(name, "bool operands are not supported; cast them first", loc);
  return Tensor(&g, g.create<OpTy>(loc, name, x.value().getType(), x.value()));
}

/// Float math: integers and bool compute in f32, as torch.exp(int) does.
mlir::Value floatOperand(GraphState &g, const Tensor &x, llvm::StringRef name,
                         const SourceLoc &loc) {
  return isFloat(x.dtype()) ? x.value()
                            : castTo(g, x.value(), DType::F32, loc, name);
}

template <typename OpTy>
Tensor floatUnary(llvm::StringRef name, const Tensor &x,
                  const SourceLoc &loc) {
  GraphState &g = graphOf(name, {x}, loc);
  mlir::Value v = floatOperand(g, x, name, loc);
  return Tensor(&g, g.create<OpTy>(loc, name, v.getType(), v));
}
} // namespace

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

#define STEP_TRACE_DEFINE_ARITH(NAME, OP, RULE)                                \
  Tensor NAME(const Tensor &a, const Tensor &b, SourceLoc loc) {              \
    return arith<ops::OP>(#NAME, RULE, a, b, loc);                             \
  }                                                                            \
  Tensor NAME(const Tensor &a, Scalar b, SourceLoc loc) {                     \
    return arith<ops::OP>(#NAME, RULE, a, b, loc);                             \
  }                                                                            \
  Tensor NAME(Scalar a, const Tensor &b, SourceLoc loc) {                     \
    return arith<ops::OP>(#NAME, RULE, a, b, loc);                             \
  }

STEP_TRACE_DEFINE_ARITH(add, AddOp, Rule::Numeric)
STEP_TRACE_DEFINE_ARITH(sub, SubOp, Rule::Numeric)
STEP_TRACE_DEFINE_ARITH(mul, MulOp, Rule::Numeric)
STEP_TRACE_DEFINE_ARITH(div, DivOp, Rule::FloatMath)
STEP_TRACE_DEFINE_ARITH(trunc_div, DivOp, Rule::IntOnly)
STEP_TRACE_DEFINE_ARITH(pow, PowOp, Rule::FloatMath)
STEP_TRACE_DEFINE_ARITH(maximum, MaxOp, Rule::Numeric)
STEP_TRACE_DEFINE_ARITH(minimum, MinOp, Rule::Numeric)
#undef STEP_TRACE_DEFINE_ARITH

#define STEP_TRACE_DEFINE_COMPARE(NAME, DIR)                                   \
  Tensor NAME(const Tensor &a, const Tensor &b, SourceLoc loc) {              \
    return compare(#NAME, ops::ComparisonDirection::DIR, a, b, loc);          \
  }                                                                            \
  Tensor NAME(const Tensor &a, Scalar b, SourceLoc loc) {                     \
    return compare(#NAME, ops::ComparisonDirection::DIR, a, b, loc);          \
  }                                                                            \
  Tensor NAME(Scalar a, const Tensor &b, SourceLoc loc) {                     \
    return compare(#NAME, ops::ComparisonDirection::DIR, a, b, loc);          \
  }

STEP_TRACE_DEFINE_COMPARE(eq, EQ)
STEP_TRACE_DEFINE_COMPARE(ne, NE)
STEP_TRACE_DEFINE_COMPARE(lt, LT)
STEP_TRACE_DEFINE_COMPARE(le, LE)
STEP_TRACE_DEFINE_COMPARE(gt, GT)
STEP_TRACE_DEFINE_COMPARE(ge, GE)
#undef STEP_TRACE_DEFINE_COMPARE

Tensor where(const Tensor &pred, const Tensor &a, const Tensor &b,
             SourceLoc loc) {
  return whereImpl(pred, a, b, loc);
}
Tensor where(const Tensor &pred, const Tensor &a, Scalar b, SourceLoc loc) {
  return whereImpl(pred, a, b, loc);
}
Tensor where(const Tensor &pred, Scalar a, const Tensor &b, SourceLoc loc) {
  return whereImpl(pred, a, b, loc);
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

Tensor neg(const Tensor &x, SourceLoc loc) {
  return numericUnary<ops::NegOp>("neg", x, loc);
}
Tensor abs(const Tensor &x, SourceLoc loc) {
  return numericUnary<ops::AbsOp>("abs", x, loc);
}
Tensor relu(const Tensor &x, SourceLoc loc) {
  return numericUnary<ops::ReluOp>("relu", x, loc);
}

#define STEP_TRACE_DEFINE_FLOAT_UNARY(NAME, OP)                                \
  Tensor NAME(const Tensor &x, SourceLoc loc) {                               \
    return floatUnary<ops::OP>(#NAME, x, loc);                                 \
  }

STEP_TRACE_DEFINE_FLOAT_UNARY(exp, ExpOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(log, LogOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(tanh, TanhOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(sigmoid, SigmoidOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(sqrt, SqrtOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(rsqrt, RsqrtOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(erf, ErfOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(sin, SinOp)
STEP_TRACE_DEFINE_FLOAT_UNARY(cos, CosOp)
#undef STEP_TRACE_DEFINE_FLOAT_UNARY

Tensor gelu(const Tensor &x, GeluApprox approximate, SourceLoc loc) {
  GraphState &g = graphOf("gelu", {x}, loc);
  mlir::Value v = floatOperand(g, x, "gelu", loc);
  auto approx = approximate == GeluApprox::Tanh
                    ? ops::GeluApproximation::Tanh
                    : ops::GeluApproximation::None;
  return Tensor(&g, g.create<ops::GeluOp>(loc, "gelu", v.getType(), v, approx));
}

Tensor gelu_grad(const Tensor &grad, const Tensor &x, GeluApprox approximate,
                 SourceLoc loc) {
  GraphState &g = graphOfOperands("gelu_grad", {grad, x}, loc);
  DType dtype = resultType({grad, x});
  if (!isFloat(dtype))
    dtype = DType::F32;
  std::vector<mlir::Value> v = unify(g, "gelu_grad", {grad, x}, dtype, loc);
  auto approx = approximate == GeluApprox::Tanh ? ops::GeluApproximation::Tanh
                                                : ops::GeluApproximation::None;
  return Tensor(&g, g.create<ops::GeluGradOp>(loc, "gelu_grad", v[0].getType(),
                                              v[0], v[1], approx));
}

Tensor cast(const Tensor &x, DType dtype, SourceLoc loc) {
  GraphState &g = graphOf("cast", {x}, loc);
  return Tensor(&g, castTo(g, x.value(), dtype, loc, "cast"));
}

Tensor stop_gradient(const Tensor &x, SourceLoc loc) {
  GraphState &g = graphOf("stop_gradient", {x}, loc);
  return Tensor(&g, g.create<ops::StopGradientOp>(loc, "stop_gradient",
                                                  x.value().getType(),
                                                  x.value()));
}

} // namespace step::trace
