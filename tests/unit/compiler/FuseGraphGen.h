//===- FuseGraphGen.h - Random graphs for step-fuse tests -------*- C++ -*-===//
//
// A seeded generator of small step-dialect functions that exercise every
// grouping rule of step-fuse (passes/Fuse.cpp): chains of unary and binary
// elementwise ops (dropout and pow included), broadcast_in_dim of rank-0
// and rank-1 operands, reshapes, compare + select, f32 <-> bf16 and
// f32 -> i32 -> f32 casts, reductions over trailing, leading, middle and
// all dims (with keepdim, sibling reductions of one input, epilogues and
// broadcasts back to the input's shape), softmax, log_softmax and
// layer_norm on the last dim, cross_entropy(_grad), gradient-norm-like
// clusters of full reductions, matmuls with a bias and an activation,
// values with several users and several results.
//
// Every value carries a bound on its magnitude, and ops that could leave
// the finite range (exp, log, sqrt, rsqrt, div) are only applied where the
// bound keeps them finite, so the generated functions never produce a NaN
// or an infinity on the generated inputs.
//
// GraphForm::Model writes the same graphs as a model (DESIGN.md section 3)
// for the training pipeline: `func.func @forward` with params and inputs,
// returning a scalar f32 loss, the sum of every result's elements. The
// structure-aware fuzzer (tests/fuzz/fuzz-model.cpp) uses it, with the
// choices drawn from its input bytes instead of a seed.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_COMPILER_FUSEGRAPHGEN_H
#define STEP_TESTS_UNIT_COMPILER_FUSEGRAPHGEN_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace step::fusegen {

/// One generated function and the inputs it runs on.
struct FuseGraph {
  uint64_t seed = 0;
  /// A module holding `func.func @f` (step ops, a step.constant, return).
  std::string mlir;
  /// The arguments of @f, in order, deterministic from the seed.
  std::vector<rt::HostTensor> args;
  /// Their names (without '%'; their step.name in the model form) and, in
  /// the model form, their step.kind ("param" or "input").
  std::vector<std::string> argNames, argKinds;
  /// Step ops in @f (the constant included).
  int64_t ops = 0;
};

/// How big a graph is: each action appends a few ops of one pattern.
struct FuseGraphSize {
  int64_t minActions = 6, maxActions = 14;
};

/// What the generated text is.
enum class GraphForm {
  /// `func.func @f` returning every value no op reads.
  Function,
  /// `func.func @forward`: %x0 and the labels %y are inputs, the other
  /// arguments params (step.kind, step.name); it returns the loss, the sum
  /// of the elements of every value no op reads, and sometimes one more
  /// value. Ops without a VJP rule (cross_entropy_grad) are left out.
  Model,
};

/// Where the generator's choices come from.
class Choices {
public:
  virtual ~Choices() = default;
  /// A number in [0, n), n >= 1.
  virtual int64_t below(int64_t n) = 0;
  /// A number in [0, 1).
  virtual double unit() = 0;
  /// An element of an input tensor, in [lo, hi].
  virtual double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
};

/// The graph of `seed`: the same seed and size always give the same text
/// and inputs.
FuseGraph generateFuseGraph(uint64_t seed, FuseGraphSize size = {},
                            GraphForm form = GraphForm::Function);
/// The graph `choices` pick.
FuseGraph generateFuseGraph(Choices &choices, FuseGraphSize size = {},
                            GraphForm form = GraphForm::Function);

} // namespace step::fusegen

#endif // STEP_TESTS_UNIT_COMPILER_FUSEGRAPHGEN_H
