//===- Ops.h - Tracing API: ops on Tensors ----------------------*- C++ -*-===//
//
// Free functions and operators that append step ops to a Tensor's Graph.
// Names and semantics follow PyTorch (torch.* and torch.nn.functional.*),
// so a PyTorch model transliterates line by line. Shared rules
// (docs/tracing.md has the details and tables):
//  - binary ops broadcast NumPy-style and promote dtypes as torch.result_type
//    (a Scalar does not widen a tensor's dtype within its category);
//  - dims may be negative (counted from the end);
//  - float-only math (exp, log, ...) on integer or bool tensors computes in
//    f32, as PyTorch does;
//  - a bad shape throws ShapeError, a bad dtype DTypeError, both naming the op
//    and the shapes, and the user's line (every function takes a defaulted
//    SourceLoc, which also becomes the MLIR location of the emitted ops).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_TRACE_OPS_H
#define STEP_COMPILER_TRACE_OPS_H

#include "compiler/trace/Graph.h"

#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

namespace step::trace {

/// PyTorch's `reduction` of a loss.
enum class Reduction { None, Mean, Sum };
/// PyTorch's `approximate` of gelu.
enum class GeluApprox { None, Tanh };

namespace detail {
/// The left operand of an operator, with the caller's location: operators
/// cannot take a defaulted third parameter, but the implicit conversion to
/// this type happens at the call site, where __builtin_LINE is evaluated.
struct LocTensor {
  Tensor t;
  SourceLoc loc;
  LocTensor(const Tensor &t, SourceLoc loc = {}) : t(t), loc(loc) {}
};
/// A scalar right operand of a compound assignment, with the location.
struct LocScalar {
  Scalar s;
  SourceLoc loc;
  template <typename T,
            std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  LocScalar(T v, SourceLoc loc = {}) : s(v), loc(loc) {}
};
} // namespace detail

//===----------------------------------------------------------------------===//
// Elementwise binary (broadcasting, promoting)
//===----------------------------------------------------------------------===//

#define STEP_TRACE_BINARY(NAME)                                                \
  Tensor NAME(const Tensor &a, const Tensor &b, SourceLoc loc = {});          \
  Tensor NAME(const Tensor &a, Scalar b, SourceLoc loc = {});                 \
  Tensor NAME(Scalar a, const Tensor &b, SourceLoc loc = {});

STEP_TRACE_BINARY(add)
STEP_TRACE_BINARY(sub)
STEP_TRACE_BINARY(mul)
/// True division (torch.div): integer and bool operands give f32.
STEP_TRACE_BINARY(div)
/// Integer division rounding toward zero: torch.div(rounding_mode="trunc")
/// for integer operands (step.div on integers). Float operands throw
/// DTypeError: use div().
STEP_TRACE_BINARY(trunc_div)
/// torch.pow; computed in floating point (integer operands give f32).
STEP_TRACE_BINARY(pow)
/// torch.maximum / torch.minimum (NaN propagates).
STEP_TRACE_BINARY(maximum)
STEP_TRACE_BINARY(minimum)
/// Comparisons (torch.eq ...): operands promoted to one dtype; result i1.
STEP_TRACE_BINARY(eq)
STEP_TRACE_BINARY(ne)
STEP_TRACE_BINARY(lt)
STEP_TRACE_BINARY(le)
STEP_TRACE_BINARY(gt)
STEP_TRACE_BINARY(ge)
#undef STEP_TRACE_BINARY

/// torch.where(pred, a, b): pred must be i1; all three broadcast together and
/// a, b are promoted to one dtype.
Tensor where(const Tensor &pred, const Tensor &a, const Tensor &b,
             SourceLoc loc = {});
Tensor where(const Tensor &pred, const Tensor &a, Scalar b,
             SourceLoc loc = {});
Tensor where(const Tensor &pred, Scalar a, const Tensor &b,
             SourceLoc loc = {});

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

/// neg, abs, relu keep integer dtypes (bool is rejected).
Tensor neg(const Tensor &x, SourceLoc loc = {});
Tensor abs(const Tensor &x, SourceLoc loc = {});
Tensor relu(const Tensor &x, SourceLoc loc = {});
/// Float math: integer and bool inputs are cast to f32 first.
Tensor exp(const Tensor &x, SourceLoc loc = {});
Tensor log(const Tensor &x, SourceLoc loc = {});
Tensor tanh(const Tensor &x, SourceLoc loc = {});
Tensor sigmoid(const Tensor &x, SourceLoc loc = {});
Tensor sqrt(const Tensor &x, SourceLoc loc = {});
Tensor rsqrt(const Tensor &x, SourceLoc loc = {});
Tensor erf(const Tensor &x, SourceLoc loc = {});
Tensor sin(const Tensor &x, SourceLoc loc = {});
Tensor cos(const Tensor &x, SourceLoc loc = {});
Tensor gelu(const Tensor &x, GeluApprox approximate = GeluApprox::None,
            SourceLoc loc = {});
/// torch.ops.aten.gelu_backward(grad, x, approximate): grad * gelu'(x),
/// broadcast and promoted as mul (integers compute in f32).
Tensor gelu_grad(const Tensor &grad, const Tensor &x,
                 GeluApprox approximate = GeluApprox::None, SourceLoc loc = {});
/// x.to(dtype): step.cast, or x itself when the dtype already matches.
Tensor cast(const Tensor &x, DType dtype, SourceLoc loc = {});
/// x.detach(): the same values (step.stop_gradient, any dtype); autodiff
/// sends no gradient through the result.
Tensor stop_gradient(const Tensor &x, SourceLoc loc = {});

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

/// torch.reshape: one entry may be -1 (inferred from the element count; a
/// dynamic dim when the input has a dynamic dim).
Tensor reshape(const Tensor &x, const Shape &shape, SourceLoc loc = {});
/// torch.permute(x, perm).
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm,
                 SourceLoc loc = {});
/// torch.transpose(x, d0, d1): swaps two dims.
Tensor transpose(const Tensor &x, int64_t d0, int64_t d1, SourceLoc loc = {});
/// x.t() for a 2-D tensor.
Tensor t(const Tensor &x, SourceLoc loc = {});
/// x[..., start:end:step, ...] along `dim`, Python-style (negative start and
/// end count from the end and are clamped to the dim). The dim must be
/// static.
Tensor slice(const Tensor &x, int64_t dim, int64_t start, int64_t end,
             int64_t step = 1, SourceLoc loc = {});
/// step.slice with one (start, limit, stride) per dim, non-negative.
Tensor slice(const Tensor &x, const std::vector<int64_t> &start,
             const std::vector<int64_t> &limit,
             const std::vector<int64_t> &strides, SourceLoc loc = {});
/// torch.cat: inputs promoted to one dtype.
Tensor concat(const std::vector<Tensor> &xs, int64_t dim = 0,
              SourceLoc loc = {});
/// Constant padding: low[i] elements before and high[i] after dim i.
Tensor pad(const Tensor &x, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, double value = 0,
           SourceLoc loc = {});

//===----------------------------------------------------------------------===//
// Reductions (an empty dims list reduces every dim, as torch.sum(x, []))
//===----------------------------------------------------------------------===//

/// The dims of a reduction: one dim (`sum(x, 1)`) or a list (`sum(x, {0,
/// 1})`). One type for both, so that a braced list can never silently
/// become a single dim through an integer overload (`sum(x, {})` does not
/// compile: write `sum(x)`).
struct Dims {
  std::vector<int64_t> dims;
  Dims(int64_t dim) : dims{dim} {}
  Dims(std::initializer_list<int64_t> list) : dims(list) {}
  Dims(std::vector<int64_t> list) : dims(std::move(list)) {}
};

/// torch.sum: integer and bool inputs sum in i64, as PyTorch.
Tensor sum(const Tensor &x, SourceLoc loc = {});
Tensor sum(const Tensor &x, const Dims &dims, bool keepdim = false,
           SourceLoc loc = {});
/// torch.mean: float inputs only (DTypeError otherwise, as PyTorch).
Tensor mean(const Tensor &x, SourceLoc loc = {});
Tensor mean(const Tensor &x, const Dims &dims, bool keepdim = false,
            SourceLoc loc = {});
/// torch.amax: not for bool.
Tensor amax(const Tensor &x, SourceLoc loc = {});
Tensor amax(const Tensor &x, const Dims &dims, bool keepdim = false,
            SourceLoc loc = {});

//===----------------------------------------------------------------------===//
// Linear algebra and neural-network ops (float tensors)
//===----------------------------------------------------------------------===//

/// torch.matmul with its rank rules (1-D operands, batch broadcasting). A
/// weight shared by every batch uses step.matmul's rank-2 rhs; other batch
/// dims are broadcast explicitly.
Tensor matmul(const Tensor &a, const Tensor &b, SourceLoc loc = {});
/// x @ w (+ b), for w stored as [in, out] (see Init.h); `b` may be null.
Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b = Tensor(),
              SourceLoc loc = {});
Tensor softmax(const Tensor &x, int64_t dim, SourceLoc loc = {});
Tensor log_softmax(const Tensor &x, int64_t dim, SourceLoc loc = {});
/// F.layer_norm over the trailing weight.rank() dims; `bias` may be null
/// (zeros). x, weight and bias must share one float dtype.
Tensor layer_norm(const Tensor &x, const Tensor &weight,
                  const Tensor &bias = Tensor(), double eps = 1e-5,
                  SourceLoc loc = {});
/// F.embedding(indices, weight): integer indices, [V, D] float table.
Tensor embedding(const Tensor &indices, const Tensor &weight,
                 SourceLoc loc = {});
/// F.cross_entropy with class indices. Logits [N, C] and targets [N]; logits
/// [C] with a rank-0 target; or logits [d..., C] with targets [d...],
/// flattened as `logits.view(-1, C)` (classes in the LAST dim, the usual
/// language-model idiom, unlike F.cross_entropy's dim 1 for rank > 2).
/// Reduction::None returns the targets' shape.
Tensor cross_entropy(const Tensor &logits, const Tensor &targets,
                     Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100, SourceLoc loc = {});
/// F.dropout(x, p, training=True) with a counter-based mask seeded by
/// `seed` (step.dropout); p == 0 returns x.
Tensor dropout(const Tensor &x, double p, int64_t seed, SourceLoc loc = {});
/// F.scaled_dot_product_attention(q, k, v, is_causal, scale) without
/// dropout; scale defaults to 1/sqrt(D).
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, bool causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    SourceLoc loc = {});

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

#define STEP_TRACE_OPERATOR(OP, NAME)                                          \
  inline Tensor operator OP(detail::LocTensor a, const Tensor &b) {           \
    return NAME(a.t, b, a.loc);                                                \
  }                                                                            \
  inline Tensor operator OP(detail::LocTensor a, Scalar b) {                  \
    return NAME(a.t, b, a.loc);                                                \
  }                                                                            \
  inline Tensor operator OP(Scalar a, detail::LocTensor b) {                  \
    return NAME(a, b.t, b.loc);                                                \
  }

STEP_TRACE_OPERATOR(+, add)
STEP_TRACE_OPERATOR(-, sub)
STEP_TRACE_OPERATOR(*, mul)
STEP_TRACE_OPERATOR(/, div)
// Ordering comparisons give i1 tensors as in PyTorch; == and != are not
// overloaded (they would be surprising for a handle type), use eq()/ne().
STEP_TRACE_OPERATOR(<, lt)
STEP_TRACE_OPERATOR(<=, le)
STEP_TRACE_OPERATOR(>, gt)
STEP_TRACE_OPERATOR(>=, ge)
#undef STEP_TRACE_OPERATOR

inline Tensor operator-(detail::LocTensor x) { return neg(x.t, x.loc); }

// Compound assignment rebinds the handle to the new value.
inline Tensor &operator+=(Tensor &a, detail::LocTensor b) {
  return a = add(a, b.t, b.loc);
}
inline Tensor &operator-=(Tensor &a, detail::LocTensor b) {
  return a = sub(a, b.t, b.loc);
}
inline Tensor &operator*=(Tensor &a, detail::LocTensor b) {
  return a = mul(a, b.t, b.loc);
}
inline Tensor &operator/=(Tensor &a, detail::LocTensor b) {
  return a = div(a, b.t, b.loc);
}
inline Tensor &operator+=(Tensor &a, detail::LocScalar b) {
  return a = add(a, b.s, b.loc);
}
inline Tensor &operator-=(Tensor &a, detail::LocScalar b) {
  return a = sub(a, b.s, b.loc);
}
inline Tensor &operator*=(Tensor &a, detail::LocScalar b) {
  return a = mul(a, b.s, b.loc);
}
inline Tensor &operator/=(Tensor &a, detail::LocScalar b) {
  return a = div(a, b.s, b.loc);
}

} // namespace step::trace

#endif // STEP_COMPILER_TRACE_OPS_H
