//===- ElementwiseKernels.cpp - unary, binary, compare, select, cast ------===//
//
// Every op here is one grid-stride loop over the flat index (vectorized by
// 4 when the size allows, EmitUtil.h). Float math is the CPU reference's
// (runtime/cpu/Elementwise.cpp) written with CUDA's float functions: the
// same branches (sigmoid, NaN-propagating max/min), the same GELU constants,
// rsqrt as 1 / sqrtf (rsqrtf is approximate). Integer arithmetic wraps
// through unsigned types as on the CPU. dropout reproduces the splitmix64
// mask of runtime/cpu/Kernels.h bit for bit: the keep test `u >= p` with
// u = bits24 * 2^-24 is done exactly as the integer test
// `bits24 >= ceil(p * 2^24)`. reshape and stop_gradient are copies.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include "dialects/step/StepOps.h"

#include <cmath>

namespace step::codegen::detail {

namespace ops = mlir::step;

static const char *unsignedOf(Elem e) {
  return e == Elem::I64 ? "unsigned long long" : "unsigned int";
}

//===----------------------------------------------------------------------===//
// step.<unary>
//===----------------------------------------------------------------------===//

static std::optional<std::string> unaryFloatBody(mlir::Operation *op) {
  auto f = [](const char *fn) {
    return std::string("      r0 = ") + fn + "(a0);\n";
  };
  if (mlir::isa<ops::NegOp>(op)) return std::string("      r0 = -a0;\n");
  if (mlir::isa<ops::ExpOp>(op)) return f("expf");
  if (mlir::isa<ops::LogOp>(op)) return f("logf");
  if (mlir::isa<ops::TanhOp>(op)) return f("tanhf");
  if (mlir::isa<ops::SqrtOp>(op)) return f("sqrtf");
  if (mlir::isa<ops::AbsOp>(op)) return f("fabsf");
  if (mlir::isa<ops::ErfOp>(op)) return f("erff");
  if (mlir::isa<ops::SinOp>(op)) return f("sinf");
  if (mlir::isa<ops::CosOp>(op)) return f("cosf");
  if (mlir::isa<ops::RsqrtOp>(op))
    return std::string("      r0 = 1.0f / sqrtf(a0);\n");
  if (mlir::isa<ops::ReluOp>(op))
    return std::string("      r0 = a0 < 0.0f ? 0.0f : a0; // NaN passes\n");
  if (mlir::isa<ops::SigmoidOp>(op))
    // Only a non-positive number is exponentiated, as on the CPU.
    return std::string("      if (a0 >= 0.0f) {\n"
                       "        r0 = 1.0f / (1.0f + expf(-a0));\n"
                       "      } else {\n"
                       "        const float z = expf(a0);\n"
                       "        r0 = z / (1.0f + z);\n"
                       "      }\n");
  if (auto g = mlir::dyn_cast<ops::GeluOp>(op)) {
    if (g.getApproximate() == ops::GeluApproximation::Tanh)
      // 0.5 x (1 + tanh u) = x sigmoid(2u) = x / (1 + e^-2u): one ex2 and
      // one rcp (tanhf: two of each and a polynomial), and no 1 + tanh u
      // cancelling for negative x (docs/codegen.md, "GELU").
      return std::string(
          "      const float v = fmaf(0.044715f * a0 * a0, a0, a0);\n"
          "      // e^-2u, u = sqrt(2/pi) v: -2 sqrt(2/pi) / ln 2\n"
          "      const float e = stepExp2(-2.302208198144325f * v);\n"
          "      r0 = a0 * stepRcp(1.0f + e);\n");
    return std::string(
        "      r0 = 0.5f * a0 * (1.0f + erff(a0 * 0.70710678118654752f));\n");
  }
  return std::nullopt;
}

static std::optional<ElementwiseSpec> unarySpec(mlir::Operation *op) {
  auto body = unaryFloatBody(op);
  if (!body)
    return std::nullopt;
  ElementwiseSpec spec;
  Elem e = elemOf(op->getOperand(0).getType());
  if (isFloat(e)) {
    spec.body = *body;
  } else {
    // neg, abs and relu of i32/i64 (the verifier admits no other).
    std::string T = cType(e), U = unsignedOf(e);
    std::string negA = "(" + T + ")((" + U + ")0 - (" + U + ")a0)";
    if (mlir::isa<ops::NegOp>(op))
      spec.body = "      r0 = " + negA + "; // -MIN wraps to MIN\n";
    else if (mlir::isa<ops::AbsOp>(op))
      spec.body = "      r0 = a0 < 0 ? " + negA + " : a0;\n";
    else
      spec.body = "      r0 = a0 < 0 ? (" + T + ")0 : a0;\n";
  }
  return spec;
}

//===----------------------------------------------------------------------===//
// step.<binary>
//===----------------------------------------------------------------------===//

/// step.gelu_grad: a0 the gradient, a1 gelu's input. Tanh: with
/// s = sigmoid(2u) = (1 + tanh u) / 2 and c = 1 - s, gelu' = s + 2 x s c u'
/// (0.5 (1 - tanh^2 u) = 2 s c), u' = sqrt(2/pi) (1 + 3 kappa x^2): one ex2
/// and one rcp; c as e s where s >= 1/2 (e = e^-2u < 1), else 1 - s, so
/// neither cancels; constants folded and fmaf (docs/codegen.md, "GELU"). Erf: the CPU kernel's f32
/// operations in its order (runtime/cpu/Elementwise.cpp).
static ElementwiseSpec geluGradSpec(ops::GeluGradOp op) {
  ElementwiseSpec spec;
  if (op.getApproximate() == ops::GeluApproximation::Tanh)
    spec.body =
        "      const float xs = a1 * a1;\n"
        "      const float v = fmaf(0.044715f * xs, a1, a1);\n"
        "      // e^-2u, u = sqrt(2/pi) v: -2 sqrt(2/pi) / ln 2\n"
        "      const float e = stepExp2(-2.302208198144325f * v);\n"
        "      const float s = stepRcp(1.0f + e); // (1 + tanh u) / 2\n"
        "      const float c = e < 1.0f ? e * s : 1.0f - s; // 1 - s\n"
        "      // 2 u' = 2 sqrt(2/pi) (1 + 3 kappa x^2)\n"
        "      r0 = a0 * fmaf(a1 * s * c, fmaf(0.21406444881780073f, xs, "
        "1.5957691216057308f), s);\n";
  else
    spec.body = "      const float cdf = 0.5f * (1.0f + erff(a1 * "
                "0.70710678118654752f));\n"
                "      r0 = a0 * (cdf + a1 * (0.3989422804014327f * "
                "expf(a1 * a1 * -0.5f)));\n";
  return spec;
}

static std::optional<ElementwiseSpec> binarySpec(mlir::Operation *op) {
  if (auto g = mlir::dyn_cast<ops::GeluGradOp>(op))
    return geluGradSpec(g);
  bool isAdd = mlir::isa<ops::AddOp>(op), isSub = mlir::isa<ops::SubOp>(op),
       isMul = mlir::isa<ops::MulOp>(op), isDiv = mlir::isa<ops::DivOp>(op),
       isMax = mlir::isa<ops::MaxOp>(op), isMin = mlir::isa<ops::MinOp>(op),
       isPow = mlir::isa<ops::PowOp>(op);
  if (!(isAdd || isSub || isMul || isDiv || isMax || isMin || isPow))
    return std::nullopt;
  Elem e = elemOf(op->getOperand(0).getType());
  ElementwiseSpec spec;
  const char *sym = isAdd ? "+" : isSub ? "-" : isMul ? "*" : "/";
  if (isFloat(e)) {
    if (isMax || isMin)
      // torch.maximum/minimum propagate NaN.
      spec.body = std::string("      r0 = (a0 != a0 || a1 != a1) ? (a0 != a0 "
                              "? a0 : a1) : (a0 ") +
                  (isMax ? ">" : "<") + " a1 ? a0 : a1);\n";
    else if (isPow)
      spec.body = "      r0 = powf(a0, a1);\n";
    else
      spec.body = std::string("      r0 = a0 ") + sym + " a1;\n";
    return spec;
  }
  std::string T = cType(e), U = unsignedOf(e);
  if (isMax || isMin)
    spec.body = std::string("      r0 = a0 ") + (isMax ? ">" : "<") +
                " a1 ? a0 : a1;\n";
  else if (isDiv)
    // Division by zero cannot be reported from a kernel: it gives 0 (the
    // CPU backend throws). MIN / -1 wraps to MIN.
    spec.body = "      r0 = a1 == 0 ? (" + T + ")0 : (a1 == -1 ? (" + T +
                ")((" + U + ")0 - (" + U + ")a0) : a0 / a1);\n";
  else
    spec.body = "      r0 = (" + T + ")((" + U + ")a0 " + sym + " (" + U +
                ")a1);\n";
  return spec;
}

//===----------------------------------------------------------------------===//
// step.compare, step.select
//===----------------------------------------------------------------------===//

static ElementwiseSpec compareSpec(ops::CompareOp op) {
  const char *sym = "==";
  switch (op.getDirection()) {
  case ops::ComparisonDirection::EQ: sym = "=="; break;
  case ops::ComparisonDirection::NE: sym = "!="; break;
  case ops::ComparisonDirection::LT: sym = "<"; break;
  case ops::ComparisonDirection::LE: sym = "<="; break;
  case ops::ComparisonDirection::GT: sym = ">"; break;
  case ops::ComparisonDirection::GE: sym = ">="; break;
  }
  ElementwiseSpec spec;
  // Written with the operator itself so NaN gives false (true for !=).
  spec.body = std::string("      r0 = (a0 ") + sym + " a1) ? 1 : 0;\n";
  return spec;
}

static ElementwiseSpec selectSpec(ops::SelectOp op) {
  ElementwiseSpec spec;
  spec.asFloat = false; // moves values, any dtype
  spec.body = "      r0 = a0 ? a1 : a2;\n";
  return spec;
}

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

static ElementwiseSpec castSpec(ops::CastOp op) {
  Elem from = elemOf(op.getOperand().getType());
  Elem to = elemOf(op.getResult().getType());
  ElementwiseSpec spec;
  std::string b;
  if (from == to) {
    spec.asFloat = false;
    b = "r0 = a0;";
  } else if (isFloat(from)) {
    if (to == Elem::I32)
      b = "r0 = __float2int_rz(a0); // truncates, saturates, NaN -> 0";
    else if (to == Elem::I64)
      b = "r0 = __float2ll_rz(a0); // truncates, saturates, NaN -> 0";
    else if (to == Elem::I1)
      b = "r0 = a0 != 0.0f ? 1 : 0; // NaN -> true";
    else
      b = "r0 = a0; // rounded to nearest even on store";
  } else {
    if (to == Elem::I32)
      b = "r0 = (int)(unsigned int)(unsigned long long)a0; // low 32 bits";
    else if (to == Elem::I64)
      b = "r0 = (long long)a0;";
    else if (to == Elem::I1)
      b = "r0 = a0 != 0 ? 1 : 0;";
    else
      b = "r0 = (float)a0; // through float, as torch's .to()";
  }
  spec.body = "      " + b + "\n";
  return spec;
}

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

static ElementwiseSpec dropoutSpec(ops::DropoutOp op) {
  double p = op.getP().convertToDouble();
  // u >= p  <=>  bits24 >= p * 2^24 (exact: a power-of-two scaling)
  //         <=>  bits24 >= ceil(p * 2^24).
  auto threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 24)));
  float scale = static_cast<float>(1.0 / (1.0 - p));
  ElementwiseSpec spec;
  spec.needsIndex = true;
  spec.needs.splitmix = true;
  std::string seed = litU(static_cast<uint64_t>(op.getSeed()));
  // runtime/cpu dropoutKey: seed + offset * 0x9e3779b97f4a7c15 (mod 2^64).
  std::string key =
      op.getOffset()
          ? "(" + seed + " + (unsigned long long)a1 * 0x9e3779b97f4a7c15ull)"
          : seed;
  if (op.getOffset()) {
    spec.uniform = {false, true};
    spec.pre = "  const long long a1 = in1[0];\n";
    spec.preLoadsUniforms = true;
  }
  spec.body = subst(
      "      const unsigned long long bits = splitmix64($KEY ^ "
      "splitmix64((unsigned long long)i)) >> 40;\n"
      "      r0 = bits >= $THRESH ? a0 * $SCALE : 0.0f; // p = $P\n",
      {{"KEY", key},
       {"THRESH", litU(threshold)},
       {"SCALE", litF(scale)},
       {"P", litD(p)}});
  return spec;
}

//===----------------------------------------------------------------------===//
// Copies: step.reshape, step.stop_gradient
//===----------------------------------------------------------------------===//

static ElementwiseSpec copySpec() {
  ElementwiseSpec spec;
  spec.asFloat = false;
  spec.body = "      r0 = a0;\n";
  return spec;
}

KernelSource emitCopy(mlir::Operation *op, const std::string &name) {
  return emitElementwise(op, name, copySpec());
}

std::optional<ElementwiseSpec> elementwiseSpec(mlir::Operation *op) {
  if (auto spec = unarySpec(op))
    return spec;
  if (auto spec = binarySpec(op))
    return spec;
  if (auto c = mlir::dyn_cast<ops::CompareOp>(op))
    return compareSpec(c);
  if (auto s = mlir::dyn_cast<ops::SelectOp>(op))
    return selectSpec(s);
  if (auto c = mlir::dyn_cast<ops::CastOp>(op))
    return castSpec(c);
  if (auto d = mlir::dyn_cast<ops::DropoutOp>(op))
    return dropoutSpec(d);
  if (mlir::isa<ops::ReshapeOp, ops::StopGradientOp>(op))
    return copySpec();
  return std::nullopt;
}

std::optional<KernelSource> emitElementwiseFamily(mlir::Operation *op,
                                                  const std::string &name) {
  if (auto spec = elementwiseSpec(op))
    return emitElementwise(op, name, *spec);
  return std::nullopt;
}

} // namespace step::codegen::detail
