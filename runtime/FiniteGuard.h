//===- FiniteGuard.h - Names the op behind a non-finite step ----*- C++ -*-===//
//
// The runtime half of `stepc --guard-finite` (docs/training.md). A step
// compiled with it returns one more result, "guard.finite" (tensor<i1>),
// false when the loss or a gradient holds a NaN or an Inf; the artifact's
// meta "guard" says so. Session::step then commits nothing and calls
// throwNonFinite, which re-runs the same step on the same arguments on the
// CPU executor, watching every op (fused ones one by one), and throws an
// rt::Error naming where the NaN/Inf began.
//
// Where it began: from the guard back to the step.check_finite ops that
// compute it, then from their non-finite operands back through producers,
// following only non-finite operands, to values whose producer read none:
// an op that made a NaN/Inf out of finite operands (log of a negative,
// 0/0, an overflow), or a param, input or constant that already held one.
// Following only the chain that reaches the guard skips NaN/Inf values
// that never matter (a -inf attention mask softmax turns into zeros). Of
// several origins, a param, state or input is reported first (the data was
// bad before any op ran), then a constant, else the op that ran first.
//
// Cost: nothing on a step whose guard says finite (one i1 read); on a
// failed step one CPU run of the step with a copy of every op's operands.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_FINITEGUARD_H
#define STEP_RUNTIME_FINITEGUARD_H

#include "runtime/Artifact.h"

#include <string>
#include <vector>

namespace step::rt {

/// The step.name of the guard result (mlir::step::kGuardResult in
/// passes/StepAttrs.h) and the value of the artifact's meta "guard" key
/// "finite".
inline constexpr const char *kGuardResult = "guard.finite";

/// The index of the guard result among artifact.plan.results, or -1 when
/// the step has no guard (meta "guard" absent). Throws Error when meta
/// "guard" names a result the plan does not return as a tensor<i1>.
int64_t guardResult(const Artifact &artifact);

/// Whether `results` (one step's, in plan order) say the loss or a
/// gradient was not finite; false for a step without a guard.
bool guardTripped(const Artifact &artifact,
                  const std::vector<HostTensor> &results);

/// Where the first NaN/Inf the guard saw began, as the CPU re-run found it.
struct NonFiniteOrigin {
  /// False when the re-run's guard said finite: the fault did not
  /// reproduce on the CPU (the rest is then empty).
  bool reproduced = false;
  /// An op: its name (`op`), location (may be ""), index in the plan
  /// (`step`), and inside a fusion the fusion's plan step (`fusion`, else
  /// -1) with `step` its index in the body; `result` is which result.
  std::string op, location;
  int64_t step = -1, fusion = -1;
  size_t result = 0;
  /// Not an op (op empty): the param, state, input or constant that held
  /// the NaN/Inf, by buffer name and kind.
  std::string buffer, kind;
  DType dtype = DType::F32;
  Shape shape;
  int64_t nans = 0, infs = 0;
  /// The first non-finite element: its index and value.
  Shape firstIndex;
  double firstValue = 0;
};

/// Re-runs the step of `artifact` on `args` (the plan's arguments, in
/// order) on the CPU executor and finds where its non-finite values began
/// (see the file header). Throws Error when the step has no guard.
NonFiniteOrigin findNonFinite(const Artifact &artifact,
                              const std::vector<const HostTensor *> &args);

/// The origin in words: "step.log at model.mlir:4:10 (plan step 7) made
/// 2 NaN and 0 Inf of 8 elements in result 0 (f32 [2, 4]) from finite
/// operands, the first at [0, 1] (nan)".
std::string describe(const NonFiniteOrigin &origin);

/// What Session::step does when guardTripped: findNonFinite, then throws
/// Error "non-finite guard: ..." naming the update (the argument opt.step
/// when the step has one), the backend that ran it, the origin, and that
/// the step was not applied.
[[noreturn]] void throwNonFinite(const Artifact &artifact,
                                 const std::vector<const HostTensor *> &args,
                                 const std::string &backend);

} // namespace step::rt

#endif // STEP_RUNTIME_FINITEGUARD_H
