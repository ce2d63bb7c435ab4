//===- GradCheck.h - Finite-difference check of step-autodiff ---*- C++ -*-===//
//
// Checks the VJP rules end to end: the gradients `step-autodiff` builds,
// run on the reference interpreter, against central finite differences of
// the forward function, element by element. Used by the GradCheck*Test.cpp
// suites, one per VJP table file.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_COMPILER_GRADCHECK_H
#define STEP_TESTS_UNIT_COMPILER_GRADCHECK_H

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace step::testing {

/// The random inputs most VJP checks run on, one set per seed.
inline constexpr uint64_t kSeeds[] = {1, 2, 3};

/// Step and tolerances of a check. An element passes when
/// |analytic - numeric| <= atol + rtol * |numeric|.
struct GradCheckOptions {
  double h = 1e-3;
  double rtol = 2e-3;
  double atol = 2e-4;
  uint64_t seed = 0;
};

/// `moduleText` holds `func.func @f` whose arguments have {step.kind =
/// "param"|"input", step.name = ...} and which returns ONE float tensor y.
/// Params not in `values` are drawn uniform in [-1, 1] (seeded); every input
/// must be in `values`. The harness builds @forward = reduce_sum(y * w) (w a
/// fixed random input of y's type, uniform in [-1, 1]), runs step-autodiff on
/// it and the interpreter (compiler/interpreter/Interpreter.h) on
/// @forward_backward, and compares every element of every param gradient to
/// a central finite difference
///   (sum_i w_i*y_i(p+h e_j) - sum_i w_i*y_i(p-h e_j)) / 2h,
/// where the sums are accumulated in double on the host from @f's f32
/// outputs (so only y is rounded to f32), and 2h is the step actually taken
/// (p+h and p-h as stored in the param's type). Reports failures with gtest
/// EXPECTs naming the param, the element index, analytic vs numeric. Returns
/// the number of elements checked (0 when the check could not run, which is
/// also a test failure).
int64_t checkGradients(const std::string &moduleText,
                       const std::map<std::string, rt::HostTensor> &values = {},
                       GradCheckOptions options = {});

//===----------------------------------------------------------------------===//
// Seeded helpers for writing checks
//===----------------------------------------------------------------------===//

/// "tensor<2x3xf32>" ("tensor<f32>" for rank 0).
std::string tensorType(const rt::Shape &shape,
                       const std::string &element = "f32");

/// A shape of rank in [minRank, maxRank] with dims in [1, maxDim].
rt::Shape randomShape(uint64_t seed, int minRank = 1, int maxRank = 3,
                      int64_t maxDim = 4);

/// An f32 tensor uniform in [lo, hi).
rt::HostTensor uniform(const rt::Shape &shape, uint64_t seed, double lo = -1,
                       double hi = 1);

/// An f32 tensor whose magnitudes are uniform in [minAbs, maxAbs), with
/// random signs: values kept away from a kink at 0.
rt::HostTensor awayFromZero(const rt::Shape &shape, uint64_t seed,
                            double minAbs, double maxAbs = 1);

/// A tensor of `dtype` holding `values` (row-major).
rt::HostTensor literal(const rt::Shape &shape, const std::vector<double> &values,
                       rt::DType dtype = rt::DType::F32);

/// Seeded integers for test attributes and indices: SplitMix64 outputs of a
/// state started from (seed, salt); the salt keeps test files' streams apart.
class Dice {
public:
  Dice(uint64_t seed, uint64_t salt)
      : state_(seed * 0x2545F4914F6CDD1Dull + salt) {}
  /// Uniform in [lo, hi].
  int64_t roll(int64_t lo, int64_t hi) {
    uint64_t z = rt::cpu::splitmix64(state_);
    state_ += 0x9E3779B97F4A7C15ull;
    return lo + static_cast<int64_t>(z % static_cast<uint64_t>(hi - lo + 1));
  }

private:
  uint64_t state_;
};

namespace detail {

/// Both gradients of every param, keyed by step.name; `error` says why they
/// could not be computed (parse, verify, autodiff or interpreter failure).
struct Gradients {
  std::string error;
  std::vector<std::string> params; // in argument order
  rt::HostTensor w;                 // the weights of y in the loss
  std::map<std::string, rt::HostTensor> analytic;
  std::map<std::string, std::vector<double>> numeric;
};

/// Everything checkGradients does except comparing.
Gradients computeGradients(const std::string &moduleText,
                           const std::map<std::string, rt::HostTensor> &values,
                           const GradCheckOptions &options);

/// One element whose two gradients disagree.
struct Mismatch {
  std::string param;
  int64_t index = 0; // flat, row-major
  double analytic = 0, numeric = 0;
};

/// |analytic - numeric| <= atol + rtol * |numeric| (false for NaN).
bool withinTolerance(double analytic, double numeric,
                     const GradCheckOptions &options);

/// The elements of `g` out of tolerance, in param then element order.
std::vector<Mismatch> compareGradients(const Gradients &g,
                                       const GradCheckOptions &options);

/// "param 'w' element 5 [1, 2]: analytic 0.25 vs numeric 0.5".
std::string describe(const Mismatch &m, const rt::Shape &shape);

} // namespace detail
} // namespace step::testing

#endif // STEP_TESTS_UNIT_COMPILER_GRADCHECK_H
