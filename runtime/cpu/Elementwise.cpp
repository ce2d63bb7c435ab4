//===- Elementwise.cpp - step unary/binary/compare/select/cast ------------===//
//
// Float ops compute in f32 with the <cmath> float overloads (as PyTorch's CPU
// kernels do) and round once into f16/bf16. Integer arithmetic wraps through
// unsigned types so overflow is defined, matching PyTorch's two's-complement
// results.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace step::rt::cpu {

using namespace detail;

//===----------------------------------------------------------------------===//
// step.<unary>
//===----------------------------------------------------------------------===//

static const char *unaryName(UnaryOp op) {
  switch (op) {
  case UnaryOp::Neg: return "neg";
  case UnaryOp::Exp: return "exp";
  case UnaryOp::Log: return "log";
  case UnaryOp::Tanh: return "tanh";
  case UnaryOp::Sigmoid: return "sigmoid";
  case UnaryOp::Relu: return "relu";
  case UnaryOp::GeluTanh:
  case UnaryOp::GeluErf: return "gelu";
  case UnaryOp::Sqrt: return "sqrt";
  case UnaryOp::Rsqrt: return "rsqrt";
  case UnaryOp::Abs: return "abs";
  case UnaryOp::Erf: return "erf";
  case UnaryOp::Sin: return "sin";
  case UnaryOp::Cos: return "cos";
  }
  return "unary";
}

static float unaryFloat(UnaryOp op, float x) {
  switch (op) {
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Exp:
    return std::exp(x);
  case UnaryOp::Log:
    return std::log(x);
  case UnaryOp::Tanh:
    return std::tanh(x);
  case UnaryOp::Sigmoid: {
    // Only ever exponentiate a non-positive number, so nothing overflows and
    // tiny results keep their precision. NaN takes the second branch.
    if (x >= 0.0f)
      return 1.0f / (1.0f + std::exp(-x));
    float e = std::exp(x);
    return e / (1.0f + e);
  }
  case UnaryOp::Relu:
    // NaN < 0 is false, so NaN passes through as in torch.relu.
    return x < 0.0f ? 0.0f : x;
  case UnaryOp::GeluTanh: {
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    float inner = k * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(inner));
  }
  case UnaryOp::GeluErf:
    return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  case UnaryOp::Sqrt:
    return std::sqrt(x);
  case UnaryOp::Rsqrt:
    return 1.0f / std::sqrt(x);
  case UnaryOp::Abs:
    return std::fabs(x);
  case UnaryOp::Erf:
    return std::erf(x);
  case UnaryOp::Sin:
    return std::sin(x);
  case UnaryOp::Cos:
    return std::cos(x);
  }
  return x;
}

template <typename I> static void unaryInt(UnaryOp op, const I *x, I *y,
                                           int64_t n) {
  using U = std::make_unsigned_t<I>;
  for (int64_t i = 0; i < n; ++i) {
    I v = x[i];
    switch (op) {
    case UnaryOp::Neg: // -INT_MIN wraps to INT_MIN, as torch
      y[i] = static_cast<I>(U(0) - static_cast<U>(v));
      break;
    case UnaryOp::Abs:
      y[i] = v < 0 ? static_cast<I>(U(0) - static_cast<U>(v)) : v;
      break;
    default: // Relu
      y[i] = v < 0 ? I(0) : v;
      break;
    }
  }
}

/// f32 without the per-element dtype and op switches: the op is a template
/// argument, so the loop is one function of a constant op (the same
/// unaryFloat, so the same bits) that the compiler can vectorize.
template <UnaryOp OP>
static void unaryF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = unaryFloat(OP, x[i]);
}

static void unaryF32(UnaryOp op, const float *x, float *y, int64_t n) {
  switch (op) {
#define STEP_UNARY_CASE(K)                                                     \
  case UnaryOp::K:                                                             \
    return unaryF32<UnaryOp::K>(x, y, n);
    STEP_UNARY_CASE(Neg)
    STEP_UNARY_CASE(Exp)
    STEP_UNARY_CASE(Log)
    STEP_UNARY_CASE(Tanh)
    STEP_UNARY_CASE(Sigmoid)
    STEP_UNARY_CASE(Relu)
    STEP_UNARY_CASE(GeluTanh)
    STEP_UNARY_CASE(GeluErf)
    STEP_UNARY_CASE(Sqrt)
    STEP_UNARY_CASE(Rsqrt)
    STEP_UNARY_CASE(Abs)
    STEP_UNARY_CASE(Erf)
    STEP_UNARY_CASE(Sin)
    STEP_UNARY_CASE(Cos)
#undef STEP_UNARY_CASE
  }
}

HostTensor unary(UnaryOp op, const HostTensor &x) {
  const char *name = unaryName(op);
  HostTensor y(x.dtype(), x.shape());
  int64_t n = x.numel();
  if (x.dtype() == DType::F32) {
    unaryF32(op, x.data<float>(), y.data<float>(), n);
    return y;
  }
  if (isFloat(x.dtype())) {
    DType t = x.dtype();
    for (int64_t i = 0; i < n; ++i)
      storeF(t, y.raw(), i, unaryFloat(op, loadF(t, x.raw(), i)));
    return y;
  }
  bool intOk = op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu;
  if (!intOk || !isInteger(x.dtype()))
    fail(name, std::string("operand must be ") +
                   (intOk ? "f32, f16, bf16, i32 or i64" : "f32, f16 or bf16") +
                   ", found " + typeStr(x));
  visitInt(x.dtype(), [&](auto tag) {
    using I = decltype(tag);
    unaryInt<I>(op, x.data<I>(), y.data<I>(), n);
  });
  return y;
}

//===----------------------------------------------------------------------===//
// step.<binary>
//===----------------------------------------------------------------------===//

static const char *binaryName(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add: return "add";
  case BinaryOp::Sub: return "sub";
  case BinaryOp::Mul: return "mul";
  case BinaryOp::Div: return "div";
  case BinaryOp::Max: return "max";
  case BinaryOp::Min: return "min";
  case BinaryOp::Pow: return "pow";
  case BinaryOp::GeluGradTanh:
  case BinaryOp::GeluGradErf:
    return "gelu_grad";
  }
  return "binary";
}

static float binaryFloat(BinaryOp op, float a, float b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return a / b;
  case BinaryOp::Max:
    if (std::isnan(a) || std::isnan(b))
      return std::isnan(a) ? a : b;
    return a > b ? a : b;
  case BinaryOp::Min:
    if (std::isnan(a) || std::isnan(b))
      return std::isnan(a) ? a : b;
    return a < b ? a : b;
  case BinaryOp::Pow:
    return std::pow(a, b);
  case BinaryOp::GeluGradTanh: {
    // d/dx [0.5 x (1 + tanh(u))], u = beta (x + kappa x^3): one f32 op at a
    // time in the order of PyTorch's GeluBackward (and of the expansion
    // step.gelu's VJP emitted before this op), so the bits are the same.
    const float beta = 0.7978845608028654f, kappa = 0.044715f;
    float xSq = b * b;
    float xCube = xSq * b;
    float t = std::tanh(beta * (b + kappa * xCube));
    float left = 0.5f * b;
    float leftDerivative = 0.5f * (1.0f + t);
    float tanhDerivative = 1.0f - t * t;
    float innerDerivative = beta * (1.0f + 0.134145f * xSq); // 3 kappa
    float rightDerivative = left * tanhDerivative * innerDerivative;
    return a * (leftDerivative + rightDerivative);
  }
  case BinaryOp::GeluGradErf: {
    // Phi(x) + x phi(x).
    float cdf = 0.5f * (1.0f + std::erf(b * 0.70710678118654752f));
    float pdf = 0.3989422804014327f * std::exp(b * b * -0.5f);
    return a * (cdf + b * pdf);
  }
  }
  return a;
}

template <typename I>
static void binaryInt(BinaryOp op, const I *a, const I *b, I *y, int64_t n) {
  using U = std::make_unsigned_t<I>;
  for (int64_t i = 0; i < n; ++i) {
    I x = a[i], z = b[i];
    switch (op) {
    case BinaryOp::Add:
      y[i] = static_cast<I>(static_cast<U>(x) + static_cast<U>(z));
      break;
    case BinaryOp::Sub:
      y[i] = static_cast<I>(static_cast<U>(x) - static_cast<U>(z));
      break;
    case BinaryOp::Mul:
      y[i] = static_cast<I>(static_cast<U>(x) * static_cast<U>(z));
      break;
    case BinaryOp::Div:
      if (z == 0)
        fail("div", "integer division by zero at element " +
                        std::to_string(i));
      // MIN / -1 overflows (UB in C++); the wrapped result is MIN.
      if (z == -1)
        y[i] = static_cast<I>(U(0) - static_cast<U>(x));
      else
        y[i] = x / z;
      break;
    case BinaryOp::Max:
      y[i] = x > z ? x : z;
      break;
    case BinaryOp::Min:
      y[i] = x < z ? x : z;
      break;
    case BinaryOp::Pow:
    case BinaryOp::GeluGradTanh:
    case BinaryOp::GeluGradErf:
      break; // rejected before the loop
    }
  }
}

/// f32 with the op as a template argument (see unaryF32).
template <BinaryOp OP>
static void binaryF32(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = binaryFloat(OP, a[i], b[i]);
}

static void binaryF32(BinaryOp op, const float *a, const float *b, float *y,
                      int64_t n) {
  switch (op) {
#define STEP_BINARY_CASE(K)                                                    \
  case BinaryOp::K:                                                            \
    return binaryF32<BinaryOp::K>(a, b, y, n);
    STEP_BINARY_CASE(Add)
    STEP_BINARY_CASE(Sub)
    STEP_BINARY_CASE(Mul)
    STEP_BINARY_CASE(Div)
    STEP_BINARY_CASE(Max)
    STEP_BINARY_CASE(Min)
    STEP_BINARY_CASE(Pow)
    STEP_BINARY_CASE(GeluGradTanh)
    STEP_BINARY_CASE(GeluGradErf)
#undef STEP_BINARY_CASE
  }
}

HostTensor binary(BinaryOp op, const HostTensor &a, const HostTensor &b) {
  const char *name = binaryName(op);
  requireSameType(name, a, b);
  HostTensor y(a.dtype(), a.shape());
  int64_t n = a.numel();
  DType t = a.dtype();
  if (t == DType::F32) {
    binaryF32(op, a.data<float>(), b.data<float>(), y.data<float>(), n);
    return y;
  }
  if (isFloat(t)) {
    for (int64_t i = 0; i < n; ++i)
      storeF(t, y.raw(), i,
             binaryFloat(op, loadF(t, a.raw(), i), loadF(t, b.raw(), i)));
    return y;
  }
  if (op == BinaryOp::Pow || op == BinaryOp::GeluGradTanh ||
      op == BinaryOp::GeluGradErf)
    fail(name, std::string(name) +
                   " needs a float type (f32, f16 or bf16), found " +
                   typeStr(a));
  if (!isInteger(t))
    fail(name, "operands must be f32, f16, bf16, i32 or i64, found " +
                   typeStr(a));
  visitInt(t, [&](auto tag) {
    using I = decltype(tag);
    binaryInt<I>(op, a.data<I>(), b.data<I>(), y.data<I>(), n);
  });
  return y;
}

//===----------------------------------------------------------------------===//
// step.compare
//===----------------------------------------------------------------------===//

template <typename T> static bool cmp(CompareOp op, T a, T b) {
  // Written with <, ==, <= ... directly so NaN gives false (true for NE).
  switch (op) {
  case CompareOp::EQ: return a == b;
  case CompareOp::NE: return a != b;
  case CompareOp::LT: return a < b;
  case CompareOp::LE: return a <= b;
  case CompareOp::GT: return a > b;
  case CompareOp::GE: return a >= b;
  }
  return false;
}

HostTensor compare(CompareOp op, const HostTensor &a, const HostTensor &b) {
  requireSameType("compare", a, b);
  HostTensor y(DType::I1, a.shape());
  uint8_t *out = y.data<uint8_t>();
  int64_t n = a.numel();
  DType t = a.dtype();
  if (isFloat(t)) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = cmp(op, loadF(t, a.raw(), i), loadF(t, b.raw(), i));
  } else if (t == DType::I1) {
    const uint8_t *pa = a.data<uint8_t>(), *pb = b.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = cmp(op, pa[i], pb[i]);
  } else {
    visitInt(t, [&](auto tag) {
      using I = decltype(tag);
      const I *pa = a.data<I>(), *pb = b.data<I>();
      for (int64_t i = 0; i < n; ++i)
        out[i] = cmp(op, pa[i], pb[i]);
    });
  }
  return y;
}

//===----------------------------------------------------------------------===//
// step.select
//===----------------------------------------------------------------------===//

HostTensor select(const HostTensor &pred, const HostTensor &a,
                  const HostTensor &b) {
  requireSameType("select", a, b);
  if (pred.dtype() != DType::I1 || pred.shape() != a.shape())
    fail("select", "predicate must be i1 " + shapeToString(a.shape()) +
                       " (the shape of the operands), found " +
                       typeStr(pred));
  HostTensor y(a.dtype(), a.shape());
  const uint8_t *p = pred.data<uint8_t>();
  size_t es = dtypeSize(a.dtype());
  auto *dst = static_cast<uint8_t *>(y.raw());
  auto *pa = static_cast<const uint8_t *>(a.raw());
  auto *pb = static_cast<const uint8_t *>(b.raw());
  for (int64_t i = 0, n = a.numel(); i < n; ++i)
    std::memcpy(dst + i * es, (p[i] ? pa : pb) + i * es, es);
  return y;
}

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

/// Loads element i of any dtype as an int64 (integers) for int->x casts.
static int64_t loadInt(DType t, const void *base, int64_t i) {
  switch (t) {
  case DType::I32:
    return static_cast<const int32_t *>(base)[i];
  case DType::I64:
    return static_cast<const int64_t *>(base)[i];
  default:
    return static_cast<const uint8_t *>(base)[i];
  }
}

HostTensor cast(const HostTensor &x, DType to) {
  HostTensor y(to, x.shape());
  int64_t n = x.numel();
  DType from = x.dtype();
  if (from == to) {
    if (n)
      std::memcpy(y.raw(), x.raw(), x.byteSize());
    return y;
  }
  void *out = y.raw();
  if (isFloat(from)) {
    for (int64_t i = 0; i < n; ++i) {
      float f = loadF(from, x.raw(), i);
      switch (to) {
      case DType::I32:
        static_cast<int32_t *>(out)[i] = saturatingTrunc<int32_t>(f);
        break;
      case DType::I64:
        static_cast<int64_t *>(out)[i] = saturatingTrunc<int64_t>(f);
        break;
      case DType::I1:
        static_cast<uint8_t *>(out)[i] = f != 0.0f; // NaN -> true, as torch
        break;
      default:
        storeF(to, out, i, f);
        break;
      }
    }
    return y;
  }
  // From an integer or i1.
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = loadInt(from, x.raw(), i);
    switch (to) {
    case DType::I32: // keeps the low 32 bits, as torch's int64 -> int32
      static_cast<int32_t *>(out)[i] =
          static_cast<int32_t>(static_cast<uint32_t>(v));
      break;
    case DType::I64:
      static_cast<int64_t *>(out)[i] = v;
      break;
    case DType::I1:
      static_cast<uint8_t *>(out)[i] = v != 0;
      break;
    default:
      // Through float, then rounded to the half type, as torch's .to()
      // does: large integers round twice, exactly like PyTorch.
      storeF(to, out, i, static_cast<float>(v));
      break;
    }
  }
  return y;
}

} // namespace step::rt::cpu
