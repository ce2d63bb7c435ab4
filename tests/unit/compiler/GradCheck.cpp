//===- GradCheck.cpp - Finite-difference check of step-autodiff -----------===//
//
// The analytic side runs the real pipeline piece (step-autodiff, then the
// reference interpreter on @forward_backward); the numeric side only runs
// @f, so a wrong VJP rule cannot hide in both.
//
//===----------------------------------------------------------------------===//

#include "GradCheck.h"

#include "compiler/interpreter/Interpreter.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace step::testing {
namespace detail {
namespace {

using namespace mlir;
namespace ops = mlir::step;

/// splitmix64: the same draws on every platform (std distributions differ
/// between standard libraries).
class Rng {
public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  /// Uniform in [-1, 1).
  double uniform() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  }

private:
  uint64_t state_;
};

rt::HostTensor randomTensor(Type type, Rng &rng) {
  auto tensor = cast<RankedTensorType>(type);
  rt::HostTensor t(*toDType(tensor.getElementType()),
                   rt::Shape(tensor.getShape()));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setFromDouble(i, rng.uniform());
  return t;
}

StringRef argAttr(func::FuncOp f, unsigned i, StringRef name) {
  auto attr = f.getArgAttrOfType<StringAttr>(i, name);
  return attr ? attr.getValue() : StringRef();
}

/// Appends the argument w and replaces `return y` by
/// `return cast<f32>(reduce_sum(y * w))`.
func::FuncOp buildForward(ModuleOp module, func::FuncOp f) {
  auto fwd = cast<func::FuncOp>(f->clone());
  fwd.setName("forward");
  module.push_back(fwd);
  auto ret = cast<func::ReturnOp>(fwd.getBody().front().getTerminator());
  Value y = ret.getOperand(0);
  auto yType = cast<RankedTensorType>(y.getType());
  OpBuilder b(ret);
  Location loc = ret.getLoc();
  (void)fwd.insertArgument(
      fwd.getNumArguments(), yType,
      b.getDictionaryAttr(
          {b.getNamedAttr("step.kind", b.getStringAttr("input")),
           b.getNamedAttr("step.name", b.getStringAttr("gradcheck.w"))}),
      loc);
  Value w = fwd.getArguments().back();
  Value prod = b.create<ops::MulOp>(loc, y, w);
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < yType.getRank(); ++d)
    dims.push_back(d);
  Value loss = b.create<ops::ReduceSumOp>(
      loc, prod, b.getDenseI64ArrayAttr(dims), /*keepdim=*/false);
  if (!yType.getElementType().isF32())
    loss = b.create<ops::CastOp>(
        loc, RankedTensorType::get({}, b.getF32Type()), loss);
  b.create<func::ReturnOp>(loc, loss);
  ret.erase();
  fwd.setFunctionType(
      b.getFunctionType(fwd.getArgumentTypes(), {loss.getType()}));
  fwd.removeResAttrsAttr();
  return fwd;
}

/// sum_i w_i * y_i in double.
double weightedSum(const rt::HostTensor &y, const rt::HostTensor &w) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    s += w.getAsDouble(i) * y.getAsDouble(i);
  return s;
}

std::string positionOf(int64_t index, const rt::Shape &shape) {
  rt::Shape pos(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    pos[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return rt::shapeToString(pos);
}

} // namespace

Gradients computeGradients(const std::string &moduleText,
                           const std::map<std::string, rt::HostTensor> &values,
                           const GradCheckOptions &options) {
  Gradients g;
  MLIRContext ctx;
  ctx.loadDialect<mlir::step::StepDialect, func::FuncDialect>();
  ctx.printOpOnDiagnostic(false);
  std::string diagnostics;
  ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error) {
      llvm::raw_string_ostream os(diagnostics);
      os << d.getLocation() << ": " << d.str() << "\n";
    }
    return success();
  });
  auto fail = [&](const std::string &what) {
    g.error = what + (diagnostics.empty() ? "" : ":\n" + diagnostics);
    return g;
  };

  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(moduleText, &ctx);
  if (!module || failed(verify(*module)))
    return fail("the module does not parse or verify");
  auto f = module->lookupSymbol<func::FuncOp>("f");
  if (!f || f.isExternal())
    return fail("the module has no func.func @f with a body");
  if (module->lookupSymbol("forward"))
    return fail("the module already has a @forward");
  auto results = f.getFunctionType().getResults();
  auto yType = results.size() == 1 ? dyn_cast<RankedTensorType>(results[0])
                                   : RankedTensorType();
  if (!yType || !isa<FloatType>(yType.getElementType()) ||
      !yType.hasStaticShape())
    return fail("@f must return one float tensor of a static shape");

  // Arguments of @f, then w.
  Rng rng(options.seed);
  std::vector<rt::HostTensor> args;
  std::vector<unsigned> paramArgs;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    std::string kind = argAttr(f, i, "step.kind").str();
    std::string name = argAttr(f, i, "step.name").str();
    Type type = f.getArgument(i).getType();
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() ||
        !toDType(tensor.getElementType()))
      return fail("argument '" + name + "' must be a tensor of a static shape");
    auto it = values.find(name);
    if (kind == "param") {
      paramArgs.push_back(i);
      g.params.push_back(name);
      args.push_back(it != values.end() ? it->second
                                        : randomTensor(type, rng));
    } else if (kind == "input") {
      if (it == values.end())
        return fail("input '" + name + "' has no value");
      args.push_back(it->second);
    } else {
      return fail("argument " + std::to_string(i) +
                  " needs step.kind = \"param\" or \"input\"");
    }
    try {
      checkArgument(args.back(), type, "argument '" + name + "'");
    } catch (const rt::Error &e) {
      return fail(e.what());
    }
  }
  Rng wRng(options.seed ^ 0x5DEECE66Dull);
  g.w = randomTensor(yType, wRng);
  const rt::HostTensor &w = g.w;

  // Analytic: step-autodiff on @forward, then @forward_backward.
  buildForward(*module, f);
  PassManager pm(&ctx);
  pm.addPass(ops::createAutodiff());
  if (failed(pm.run(*module)))
    return fail("step-autodiff failed");
  auto joint = module->lookupSymbol<func::FuncOp>("forward_backward");
  std::vector<rt::HostTensor> jointArgs = args;
  jointArgs.push_back(w);
  FailureOr<std::vector<rt::HostTensor>> out = interpret(joint, jointArgs);
  if (failed(out))
    return fail("interpreting @forward_backward failed");
  for (unsigned r = 0; r < out->size(); ++r) {
    std::string name = resultName(joint, r);
    if (StringRef(name).starts_with("grad."))
      g.analytic[name.substr(5)] = (*out)[r];
  }

  // Numeric: central differences of sum(w * @f).
  auto evalSum = [&](const std::vector<rt::HostTensor> &a, double &sum) {
    FailureOr<std::vector<rt::HostTensor>> y = interpret(f, a);
    if (failed(y))
      return false;
    sum = weightedSum((*y)[0], w);
    return true;
  };
  for (size_t k = 0; k < paramArgs.size(); ++k) {
    rt::HostTensor &p = args[paramArgs[k]];
    std::vector<double> &numeric = g.numeric[g.params[k]];
    for (int64_t j = 0; j < p.numel(); ++j) {
      double orig = p.getAsDouble(j), plus = 0, minus = 0;
      p.setFromDouble(j, orig + options.h);
      double xPlus = p.getAsDouble(j);
      bool ok = evalSum(args, plus);
      p.setFromDouble(j, orig - options.h);
      double xMinus = p.getAsDouble(j);
      ok = ok && evalSum(args, minus);
      p.setFromDouble(j, orig);
      if (!ok)
        return fail("interpreting @f failed");
      if (xPlus == xMinus)
        return fail("h = " + std::to_string(options.h) +
                    " is below the resolution of param '" + g.params[k] + "'");
      numeric.push_back((plus - minus) / (xPlus - xMinus));
    }
  }
  return g;
}

bool withinTolerance(double analytic, double numeric,
                     const GradCheckOptions &options) {
  return std::abs(analytic - numeric) <=
         options.atol + options.rtol * std::abs(numeric);
}

std::vector<Mismatch> compareGradients(const Gradients &g,
                                       const GradCheckOptions &options) {
  std::vector<Mismatch> mismatches;
  for (const std::string &name : g.params) {
    auto a = g.analytic.find(name);
    auto n = g.numeric.find(name);
    if (a == g.analytic.end() || n == g.numeric.end()) {
      mismatches.push_back({name, -1, NAN, NAN});
      continue;
    }
    for (int64_t j = 0; j < a->second.numel(); ++j) {
      double analytic = a->second.getAsDouble(j);
      double numeric = n->second[j];
      if (!withinTolerance(analytic, numeric, options))
        mismatches.push_back({name, j, analytic, numeric});
    }
  }
  return mismatches;
}

std::string describe(const Mismatch &m, const rt::Shape &shape) {
  std::ostringstream os;
  os.precision(9);
  if (m.index < 0) {
    os << "param '" << m.param << "' has no gradient";
    return os.str();
  }
  os << "param '" << m.param << "' element " << m.index << " "
     << positionOf(m.index, shape) << ": analytic " << m.analytic
     << " vs numeric " << m.numeric;
  return os.str();
}

} // namespace detail

std::string tensorType(const rt::Shape &shape, const std::string &element) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + element + ">";
}

rt::Shape randomShape(uint64_t seed, int minRank, int maxRank,
                      int64_t maxDim) {
  detail::Rng rng(seed * 7919 + 1);
  auto pick = [&](int64_t lo, int64_t hi) {
    double u = (rng.uniform() + 1) / 2; // [0, 1)
    return lo + static_cast<int64_t>(u * static_cast<double>(hi - lo + 1));
  };
  rt::Shape shape(pick(minRank, maxRank));
  for (int64_t &d : shape)
    d = pick(1, maxDim);
  return shape;
}

rt::HostTensor uniform(const rt::Shape &shape, uint64_t seed, double lo,
                       double hi) {
  detail::Rng rng(seed * 104729 + 3);
  rt::HostTensor t(rt::DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setFromDouble(i, lo + (rng.uniform() + 1) / 2 * (hi - lo));
  return t;
}

rt::HostTensor awayFromZero(const rt::Shape &shape, uint64_t seed,
                            double minAbs, double maxAbs) {
  detail::Rng rng(seed * 1299709 + 5);
  rt::HostTensor t(rt::DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = rng.uniform();
    double magnitude = minAbs + std::abs(u) * (maxAbs - minAbs);
    t.setFromDouble(i, u < 0 ? -magnitude : magnitude);
  }
  return t;
}

rt::HostTensor literal(const rt::Shape &shape, const std::vector<double> &values,
                       rt::DType dtype) {
  rt::HostTensor t(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(values.size());
       ++i)
    t.setFromDouble(i, values[i]);
  return t;
}

int64_t checkGradients(const std::string &moduleText,
                       const std::map<std::string, rt::HostTensor> &values,
                       GradCheckOptions options) {
  detail::Gradients g = detail::computeGradients(moduleText, values, options);
  if (!g.error.empty()) {
    ADD_FAILURE() << "gradient check could not run: " << g.error;
    return 0;
  }
  int64_t checked = 0;
  for (const std::string &name : g.params) {
    auto a = g.analytic.find(name);
    if (a == g.analytic.end()) {
      ADD_FAILURE() << "param '" << name << "' has no gradient result";
      continue;
    }
    const std::vector<double> &numeric = g.numeric[name];
    EXPECT_EQ(a->second.numel(), static_cast<int64_t>(numeric.size()));
    for (int64_t j = 0; j < a->second.numel() &&
                        j < static_cast<int64_t>(numeric.size());
         ++j, ++checked) {
      detail::Mismatch m{name, j, a->second.getAsDouble(j), numeric[j]};
      EXPECT_TRUE(detail::withinTolerance(m.analytic, m.numeric, options))
          << detail::describe(m, a->second.shape()) << " (h " << options.h
          << ", rtol " << options.rtol << ", atol " << options.atol
          << ", seed " << options.seed << ")";
    }
  }
  return checked;
}

} // namespace step::testing
