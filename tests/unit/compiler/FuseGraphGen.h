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
  /// Step ops in @f (the constant included).
  int64_t ops = 0;
};

/// How big a graph is: each action appends a few ops of one pattern.
struct FuseGraphSize {
  int64_t minActions = 6, maxActions = 14;
};

/// The graph of `seed`: the same seed and size always give the same text
/// and inputs.
FuseGraph generateFuseGraph(uint64_t seed, FuseGraphSize size = {});

} // namespace step::fusegen

#endif // STEP_TESTS_UNIT_COMPILER_FUSEGRAPHGEN_H
