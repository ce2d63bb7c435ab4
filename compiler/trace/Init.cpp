//===- Init.cpp - Reproducible parameter initializers ---------------------===//
//
// The random stream and torch.nn.init's formulas. Everything that decides a
// value's bits is written out here (no <random> distribution), so the same
// seed gives the same parameters with any standard library.
//
//===----------------------------------------------------------------------===//

#include "compiler/trace/Init.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace step::trace {

namespace {
constexpr double kPi = 3.14159265358979323846;

/// SplitMix64's output function for state x: a bijective 64-bit mixer.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// FNV-1a, 64-bit: a fixed hash of the name's bytes (std::hash is not
/// specified and differs between standard libraries).
uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  return rt::shapeToString(shape);
}
} // namespace

double Rng::uniform() {
  return static_cast<double>(gen_() >> 11) * 0x1.0p-53;
}

double Rng::normal() {
  if (hasSpare_) {
    hasSpare_ = false;
    return spare_;
  }
  // 1 - u lies in (0, 1], so the log is finite.
  double u1 = 1.0 - uniform();
  double u2 = uniform();
  double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * kPi * u2);
  hasSpare_ = true;
  return r * std::cos(2.0 * kPi * u2);
}

int64_t Rng::below(int64_t n) {
  if (n <= 0)
    throw std::invalid_argument("Rng::below: n must be positive, got " +
                                std::to_string(n));
  uint64_t hi = gen_() >> 32;
  return static_cast<int64_t>((hi * static_cast<uint64_t>(n)) >> 32);
}

uint64_t paramSeed(uint64_t graphSeed, std::string_view name) {
  return splitmix64(graphSeed ^ splitmix64(fnv1a64(name)));
}

namespace init {

double gain(Nonlinearity nonlinearity, double negativeSlope) {
  switch (nonlinearity) {
  case Nonlinearity::Linear:
  case Nonlinearity::Sigmoid:
    return 1.0;
  case Nonlinearity::Tanh:
    return 5.0 / 3.0;
  case Nonlinearity::Relu:
    return std::sqrt(2.0);
  case Nonlinearity::LeakyRelu:
    return std::sqrt(2.0 / (1.0 + negativeSlope * negativeSlope));
  case Nonlinearity::Selu:
    return 3.0 / 4.0;
  }
  return 1.0;
}

Fans fans(const std::vector<int64_t> &shape) {
  if (shape.size() < 2)
    throw std::invalid_argument(
        "fan in and fan out need a weight of rank >= 2 ([..., in, out]), "
        "got " + shapeStr(shape));
  int64_t receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    receptive *= shape[i];
  return {shape[shape.size() - 2] * receptive,
          shape[shape.size() - 1] * receptive};
}

std::string Init::describe() const {
  std::ostringstream os;
  switch (kind) {
  case Kind::Constant: os << "constant(" << a << ")"; break;
  case Kind::Uniform: os << "uniform(" << a << ", " << b << ")"; break;
  case Kind::Normal: os << "normal(mean=" << a << ", std=" << b << ")"; break;
  case Kind::KaimingUniform: os << "kaimingUniform"; break;
  case Kind::KaimingNormal: os << "kaimingNormal"; break;
  case Kind::XavierUniform: os << "xavierUniform(gain=" << a << ")"; break;
  case Kind::XavierNormal: os << "xavierNormal(gain=" << a << ")"; break;
  }
  return os.str();
}

Init constant(double value) { return {Init::Kind::Constant, value, 0}; }
Init zeros() { return constant(0.0); }
Init ones() { return constant(1.0); }
Init uniform(double a, double b) { return {Init::Kind::Uniform, a, b}; }
Init normal(double mean, double std) { return {Init::Kind::Normal, mean, std}; }

Init kaimingUniform(Nonlinearity nonlinearity, double negativeSlope,
                    FanMode mode) {
  return {Init::Kind::KaimingUniform, negativeSlope, 0, nonlinearity, mode};
}

Init kaimingNormal(Nonlinearity nonlinearity, double negativeSlope,
                   FanMode mode) {
  return {Init::Kind::KaimingNormal, negativeSlope, 0, nonlinearity, mode};
}

Init xavierUniform(double gain) { return {Init::Kind::XavierUniform, gain, 0}; }
Init xavierNormal(double gain) { return {Init::Kind::XavierNormal, gain, 0}; }

namespace {
/// The distribution an initializer reduces to once the fans are known.
struct Dist {
  bool normal;   // else uniform
  double lo, hi; // uniform bounds, or mean and std
};

Dist resolve(const Init &init, const std::vector<int64_t> &shape) {
  using K = Init::Kind;
  switch (init.kind) {
  case K::Constant: return {false, init.a, init.a};
  case K::Uniform: return {false, init.a, init.b};
  case K::Normal: return {true, init.a, init.b};
  case K::KaimingUniform:
  case K::KaimingNormal: {
    Fans f = fans(shape);
    int64_t fan = init.mode == FanMode::FanIn ? f.in : f.out;
    double std = gain(init.nonlinearity, init.a) / std::sqrt(double(fan));
    if (init.kind == K::KaimingNormal)
      return {true, 0.0, std};
    double bound = std::sqrt(3.0) * std;
    return {false, -bound, bound};
  }
  case K::XavierUniform:
  case K::XavierNormal: {
    Fans f = fans(shape);
    double std = init.a * std::sqrt(2.0 / double(f.in + f.out));
    if (init.kind == K::XavierNormal)
      return {true, 0.0, std};
    double bound = std::sqrt(3.0) * std;
    return {false, -bound, bound};
  }
  }
  return {false, 0, 0};
}
} // namespace

void validate(const Init &init, const std::vector<int64_t> &shape) {
  using K = Init::Kind;
  std::string what = init.describe() + " for " + shapeStr(shape) + ": ";
  if (init.kind == K::Uniform && !(init.a <= init.b))
    throw std::invalid_argument(what + "needs a <= b");
  if (init.kind == K::Normal && !(init.b >= 0))
    throw std::invalid_argument(what + "needs std >= 0");
  if (init.kind != K::Constant && init.kind != K::Uniform &&
      init.kind != K::Normal) {
    Fans f;
    try {
      f = fans(shape);
    } catch (const std::invalid_argument &e) {
      throw std::invalid_argument(what + e.what());
    }
    if (f.in <= 0 || f.out <= 0)
      throw std::invalid_argument(what + "fans must be positive");
  }
}

rt::HostTensor sample(const Init &init, const std::vector<int64_t> &shape,
                      rt::DType dtype, uint64_t seed) {
  validate(init, shape);
  rt::HostTensor t(dtype, shape);
  Dist d = resolve(init, shape);
  if (init.kind == Init::Kind::Constant) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setFromDouble(i, d.lo);
    return t;
  }
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = d.normal ? d.lo + d.hi * rng.normal()
                        : d.lo + (d.hi - d.lo) * rng.uniform();
    t.setFromDouble(i, v);
  }
  return t;
}

} // namespace init
} // namespace step::trace
