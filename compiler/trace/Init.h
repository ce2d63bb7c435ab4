//===- Init.h - Reproducible parameter initializers -------------*- C++ -*-===//
//
// Initial values of traced parameters, as torch.nn.init computes them, drawn
// reproducibly:
//  - each parameter has its own stream, seeded by paramSeed(graph seed,
//    name), so adding or renaming one parameter leaves the others unchanged;
//  - the stream is std::mt19937_64, whose output sequence the C++ standard
//    fixes; uniform doubles and Box-Muller normals are derived here rather
//    than with <random>'s distributions, whose algorithms are
//    implementation-defined;
//  - values are computed in double and rounded once to the parameter dtype.
//
// Fan-in/fan-out: we store a linear weight as [in, out] (y = x @ w), the
// transpose of PyTorch's nn.Linear [out, in]. For a weight of shape
// [r..., in, out] (rank >= 2), fan_in = in * prod(r) and fan_out = out *
// prod(r): the same numbers PyTorch computes for the same layer.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_TRACE_INIT_H
#define STEP_COMPILER_TRACE_INIT_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace step::trace {

/// A reproducible random stream: mt19937_64 plus fixed conversions.
class Rng {
public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  /// The next raw 64-bit output of mt19937_64.
  uint64_t next() { return gen_(); }
  /// Uniform in [0, 1) with 53 random bits: (next() >> 11) * 2^-53.
  double uniform();
  /// Standard normal by Box-Muller; values come in pairs (cos, then sin).
  double normal();
  /// Uniform integer in [0, n), n > 0 (multiply-shift on 32 high bits; the
  /// bias is below 2^-32 * n, irrelevant for synthetic data).
  int64_t below(int64_t n);

private:
  std::mt19937_64 gen_;
  bool hasSpare_ = false;
  double spare_ = 0;
};

/// The stream seed of parameter `name` in a graph seeded with `graphSeed`:
/// splitmix64(graphSeed ^ splitmix64(fnv1a64(name))).
uint64_t paramSeed(uint64_t graphSeed, std::string_view name);

namespace init {

/// torch.nn.init.calculate_gain's nonlinearities.
enum class Nonlinearity { Linear, Sigmoid, Tanh, Relu, LeakyRelu, Selu };
/// Which fan Kaiming init preserves (PyTorch's `mode`).
enum class FanMode { FanIn, FanOut };

/// torch.nn.init.calculate_gain(nonlinearity, param): 1 for linear and
/// sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for
/// leaky_relu, 3/4 for selu.
double gain(Nonlinearity nonlinearity, double negativeSlope = 0.01);

struct Fans {
  int64_t in;
  int64_t out;
};
/// Fans of a weight stored as [r..., in, out] (see the file comment). Throws
/// std::invalid_argument for rank < 2.
Fans fans(const std::vector<int64_t> &shape);

/// An initializer: what torch.nn.init function, with which arguments.
struct Init {
  enum class Kind {
    Constant,       // a = value
    Uniform,        // U(a, b)
    Normal,         // N(a, b^2): a = mean, b = std
    KaimingUniform, // U(-bound, bound), bound = gain * sqrt(3 / fan)
    KaimingNormal,  // N(0, (gain / sqrt(fan))^2)
    XavierUniform,  // bound = a * sqrt(6 / (fan_in + fan_out)), a = gain
    XavierNormal,   // std = a * sqrt(2 / (fan_in + fan_out)), a = gain
  };
  Kind kind = Kind::Constant;
  double a = 0;
  double b = 0;
  Nonlinearity nonlinearity = Nonlinearity::LeakyRelu;
  FanMode mode = FanMode::FanIn;

  /// "normal(mean=0, std=0.02)" etc., for messages.
  std::string describe() const;
};

Init constant(double value);
Init zeros();
Init ones();
/// torch.nn.init.uniform_(a, b); requires a <= b.
Init uniform(double a = 0, double b = 1);
/// torch.nn.init.normal_(mean, std); requires std >= 0.
Init normal(double mean = 0, double std = 1);
/// torch.nn.init.kaiming_uniform_(a, mode, nonlinearity), PyTorch's
/// defaults. kaimingUniform(LeakyRelu, std::sqrt(5)) is nn.Linear's default
/// weight init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Init kaimingUniform(Nonlinearity nonlinearity = Nonlinearity::LeakyRelu,
                    double negativeSlope = 0, FanMode mode = FanMode::FanIn);
/// torch.nn.init.kaiming_normal_(a, mode, nonlinearity).
Init kaimingNormal(Nonlinearity nonlinearity = Nonlinearity::LeakyRelu,
                   double negativeSlope = 0, FanMode mode = FanMode::FanIn);
/// torch.nn.init.xavier_uniform_(gain) / xavier_normal_(gain).
Init xavierUniform(double gain = 1);
Init xavierNormal(double gain = 1);

/// Throws std::invalid_argument when `init` cannot initialize a tensor of
/// `shape` (fans of a rank < 2 shape, a zero fan, bad arguments).
void validate(const Init &init, const std::vector<int64_t> &shape);

/// A tensor of `shape` and `dtype` drawn from `init` with an Rng seeded by
/// `seed`, in row-major order, each value rounded from double to `dtype`.
rt::HostTensor sample(const Init &init, const std::vector<int64_t> &shape,
                      rt::DType dtype, uint64_t seed);

} // namespace init
} // namespace step::trace

#endif // STEP_COMPILER_TRACE_INIT_H
