//===- MLP.h - The MLP classifier both MLP examples trace -------*- C++ -*-===//
//
// relu(x @ w1 + b1) -> relu(. @ w2 + b2) -> . @ w3 + b3, with a softmax
// cross-entropy loss; layers named fc1, fc2, fc3 with PyTorch nn.Linear's
// default init (weights stored [in, out], y = x @ w).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_EXAMPLES_MLP_MLP_H
#define STEP_EXAMPLES_MLP_MLP_H

#include "compiler/trace/Trace.h"

#include <cmath>

namespace mlp {

struct Sizes {
  int64_t in = 784, hidden1 = 256, hidden2 = 128, classes = 10, batch = 32;
};

/// An nn.Linear(in, out) layer: kaiming_uniform(a = sqrt(5)) for the weight,
/// i.e. U(-1/sqrt(in), 1/sqrt(in)), and the same bound for the bias.
inline step::trace::Tensor linearLayer(step::trace::Graph &g,
                                       const std::string &name,
                                       const step::trace::Tensor &x, int64_t in,
                                       int64_t out) {
  using namespace step::trace;
  Tensor w = g.param(
      name + ".weight", {in, out},
      init::kaimingUniform(init::Nonlinearity::LeakyRelu, std::sqrt(5.0)));
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  Tensor b = g.param(name + ".bias", {out}, init::uniform(-bound, bound));
  return linear(x, w, b);
}

/// Traces the model on inputs "x" [batch, in] f32 and "y" [batch] i64 and
/// ends the graph with (loss, logits).
inline void traceMLP(step::trace::Graph &g, const Sizes &s) {
  using namespace step::trace;
  Tensor x = g.input("x", {s.batch, s.in});
  Tensor y = g.input("y", {s.batch}, DType::I64);
  Tensor h = relu(linearLayer(g, "fc1", x, s.in, s.hidden1));
  h = relu(linearLayer(g, "fc2", h, s.hidden1, s.hidden2));
  Tensor logits = linearLayer(g, "fc3", h, s.hidden2, s.classes);
  g.outputNamed(cross_entropy(logits, y), {{"logits", logits}});
}

} // namespace mlp

#endif // STEP_EXAMPLES_MLP_MLP_H
