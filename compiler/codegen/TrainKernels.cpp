//===- TrainKernels.cpp - sgd_update, adamw_update, lamb_update -----------===//
//
// The updates follow runtime/cpu/Train.cpp operation by operation: scalar
// coefficients (bias corrections, -lr / bc1, 1 - lr * wd) are computed in
// double from the run-time step and lr and rounded to f32 once per thread,
// then every element is updated in f32 with PyTorch's operation order.
// NVRTC compiles with --fmad=false (Nvrtc.cpp), so no multiply-add is
// contracted and an f32 update is meant to round exactly as the CPU
// reference's does (pow() on the device may differ from the host's in the
// last bit of a double, which almost never survives the rounding to f32).
//
// sgd_update and adamw_update are elementwise kernels (vectorized by 4);
// operands step and lr are rank-0 and read once per thread. An output may
// alias its input (in-place update): each element is read before written.
// Their per-element code is `updateSpec`, which the multi-tensor optimizer
// kernel (MultiTensorKernels.cpp) runs too, so fused and unfused updates
// round identically.
//
// lamb_update needs |param| and |r| over the whole tensor before any param
// is written; it is one kernel of one block of 1024 threads: pass 1
// computes r per element and both squared norms in f64, reduced with warp
// shuffles; pass 2 recomputes r from the unchanged inputs (so in-place
// aliasing is safe) and writes param, exp_avg and exp_avg_sq. One block
// keeps the kernel self-contained (no scratch buffer, no second launch);
// it runs at the bandwidth of one SM, which is the price for LAMB.
//
// emitTrainFamily also owns step.check_finite, whose multi-tensor kernel
// has its own file (CheckFiniteKernels.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include "dialects/step/StepOps.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

//===----------------------------------------------------------------------===//
// step.sgd_update
//===----------------------------------------------------------------------===//

static ElementwiseSpec sgdSpec(ops::SgdUpdateOp op, const std::string &step,
                              const std::string &lr) {
  double momentum = op.getMomentum().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  ElementwiseSpec spec;
  spec.uniform = {false, false, true, true, false};
  spec.pre = "  const long long t = " + step +
             "[0]; // the 1-based update number\n"
             "  const float negLr = -" + lr + "[0];\n"
             "  (void)t;\n";
  std::string b = "      float d = a1;\n";
  if (wd != 0) // skipped at 0: 0 * inf would turn an inf param's grad NaN
    b += "      d = d + " + litF(wd) + " * a0;\n";
  if (op.getMomentumBuffer()) {
    std::string mom = litF(momentum);
    // Step 1: PyTorch creates the buffer as a copy of d_p.
    b += "      const float buf = t == 1 ? d : a4 * " + mom + " + " +
         litF(1.0 - op.getDampening().convertToDouble()) + " * d;\n"
         "      r1 = buf;\n";
    b += op.getNesterov() ? "      d = d + " + mom + " * buf;\n"
                          : "      d = buf;\n";
  }
  b += "      r0 = a0 + negLr * d;\n";
  spec.body = b;
  return spec;
}

//===----------------------------------------------------------------------===//
// step.adamw_update
//===----------------------------------------------------------------------===//

namespace {
/// Hyper-parameters of adamw_update and lamb_update as kernel literals.
struct AdamLiterals {
  std::vector<std::pair<std::string, std::string>> vars;
  template <typename Op> explicit AdamLiterals(Op op) {
    double b1 = op.getBeta1().convertToDouble();
    double b2 = op.getBeta2().convertToDouble();
    vars = {{"B1D", litD(b1)}, {"B2D", litD(b2)}, {"B1", litF(b1)},
            {"B2", litF(b2)}, {"OMB1", litF(1.0 - b1)},
            {"OMB2", litF(1.0 - b2)},
            {"EPS", litF(op.getEps().convertToDouble())},
            {"WD", litF(op.getWeightDecay().convertToDouble())},
            {"WDD", litD(op.getWeightDecay().convertToDouble())}};
  }
};
} // namespace

static ElementwiseSpec adamwSpec(ops::AdamwUpdateOp op, const std::string &step,
                                const std::string &lr) {
  AdamLiterals lit(op);
  auto vars = lit.vars;
  vars.insert(vars.end(), {{"STEP", step}, {"LR", lr}});
  ElementwiseSpec spec;
  spec.uniform = {false, false, false, false, true, true};
  spec.pre = subst(R"(  const double t = (double)$STEP[0]; // the 1-based update number
  const double lr = (double)$LR[0];
  const float decay = (float)(1.0 - lr * $WDD);
  const double bc1 = 1.0 - pow($B1D, t);
  const double bc2 = 1.0 - pow($B2D, t);
  const float negStepSize = (float)(-(lr / bc1));
  const float bc2Sqrt = (float)sqrt(bc2);
)",
                   vars);
  spec.body = subst(R"(      const float p = a0 * decay; // decoupled weight decay
      const float m = a2 * $B1 + $OMB1 * a1;
      const float v = a3 * $B2 + $OMB2 * a1 * a1;
      const float denom = sqrtf(v) / bc2Sqrt + $EPS;
      r0 = p + negStepSize * m / denom;
      r1 = m;
      r2 = v;
)",
                    lit.vars);
  return spec;
}

std::optional<ElementwiseSpec> updateSpec(mlir::Operation *op,
                                          const std::string &step,
                                          const std::string &lr) {
  if (auto s = mlir::dyn_cast<ops::SgdUpdateOp>(op))
    return sgdSpec(s, step, lr);
  if (auto a = mlir::dyn_cast<ops::AdamwUpdateOp>(op))
    return adamwSpec(a, step, lr);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// step.lamb_update
//===----------------------------------------------------------------------===//

static KernelSource emitLamb(ops::LambUpdateOp op, const std::string &name) {
  AdamLiterals lit(op);
  Elem e = elemOf(op.getParam().getType());
  int64_t n = numelOf(op.getParam());
  KernelSource ks;
  ks.name = name;
  ks.blockX = 1024;
  ks.gridX = 1;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(op, ks, needs, /*restrict=*/false);
  auto vars = lit.vars;
  vars.insert(vars.end(),
              {{"N", std::to_string(n)}, {"I", idxType(n)},
               {"P", toF(e, "in0[i]")}, {"G", toF(e, "in1[i]")},
               {"M", toF(e, "in2[i]")}, {"V", toF(e, "in3[i]")},
               {"SP", fromF(e, "p - scale * r")}, {"SM", fromF(e, "m")},
               {"SV", fromF(e, "v")}});
  ks.source = prelude(needs) + signature(ks, params) + " {\n" + subst(R"(  __shared__ double sh[32];
  const double t = (double)in4[0]; // the 1-based update number
  const double lr = (double)in5[0];
  const float bc1 = (float)(1.0 - pow($B1D, t));
  const float bc2 = (float)(1.0 - pow($B2D, t));
  // Pass 1: both squared norms, accumulated in f64.
  double pn = 0.0, rn = 0.0;
  for ($I i = threadIdx.x; i < $N; i += blockDim.x) {
    const float p = $P, g = $G;
    const float m = $M * $B1 + $OMB1 * g;
    const float v = $V * $B2 + $OMB2 * g * g;
    const float r = (m / bc1) / (sqrtf(v / bc2) + $EPS) + $WD * p;
    pn += (double)p * p;
    rn += (double)r * r;
  }
  pn = blockReduce(pn, SumOp(), 0.0, sh);
  rn = blockReduce(rn, SumOp(), 0.0, sh);
  const double pNorm = sqrt(pn), rNorm = sqrt(rn);
  // NaN norms compare false: trust 1, and the NaN propagates through r.
  const double trust = pNorm > 0.0 && rNorm > 0.0 ? pNorm / rNorm : 1.0;
  const float scale = (float)(lr * trust);
  // Pass 2: the same r from the unchanged inputs, then every store.
  for ($I i = threadIdx.x; i < $N; i += blockDim.x) {
    const float p = $P, g = $G;
    const float m = $M * $B1 + $OMB1 * g;
    const float v = $V * $B2 + $OMB2 * g * g;
    const float r = (m / bc1) / (sqrtf(v / bc2) + $EPS) + $WD * p;
    out0[i] = $SP;
    out1[i] = $SM;
    out2[i] = $SV;
  }
}
)",
      vars);
  return ks;
}

std::optional<KernelSource> emitTrainFamily(mlir::Operation *op,
                                            const std::string &name) {
  if (auto s = mlir::dyn_cast<ops::SgdUpdateOp>(op))
    return emitElementwise(op, name, sgdSpec(s, "in2", "in3"));
  if (auto a = mlir::dyn_cast<ops::AdamwUpdateOp>(op))
    return emitElementwise(op, name, adamwSpec(a, "in4", "in5"));
  if (auto l = mlir::dyn_cast<ops::LambUpdateOp>(op))
    return emitLamb(l, name);
  return emitCheckFinite(op, name);
}

} // namespace step::codegen::detail
