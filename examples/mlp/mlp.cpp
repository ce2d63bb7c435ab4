//===- mlp.cpp - Trace a 3-layer MLP classifier with the C++ API ----------===//
//
//   mlp-example [--in 784] [--hidden1 256] [--hidden2 128] [--classes 10]
//               [--batch 32] [--seed 0] --out DIR
//
// Traces relu(x @ w1 + b1) -> relu(. @ w2 + b2) -> . @ w3 + b3 with a softmax
// cross-entropy loss, then writes
//   DIR/model.mlir          the model (func.func @forward, loss first)
//   DIR/params/<name>.npy   initial params, nn.Linear's default init
//   DIR/inputs/x.npy        a synthetic batch, N(0, 1) features   [B, in] f32
//   DIR/inputs/y.npy        and uniform class labels              [B] i64
// runs the forward pass on the reference interpreter and prints
// `loss = <value>`. Everything is a function of --seed. A user copies this
// file to start a model of their own.
//
//===----------------------------------------------------------------------===//

#include "examples/mlp/MLP.h"
#include "runtime/Npy.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

using namespace step::trace;
namespace rt = step::rt;

namespace {
struct Options : mlp::Sizes {
  uint64_t seed = 0;
  std::string out;
};

/// The synthetic batch. Its stream is seeded apart from the params' (which
/// use paramSeed(seed, name)), so changing the model never changes the data.
std::map<std::string, rt::HostTensor> makeBatch(const Options &o) {
  Rng rng(paramSeed(o.seed, "batch:synthetic"));
  rt::HostTensor x(rt::DType::F32, {o.batch, o.in});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, rng.normal());
  rt::HostTensor y(rt::DType::I64, {o.batch});
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data<int64_t>()[i] = rng.below(o.classes);
  return {{"x", x}, {"y", y}};
}
} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"Traces a 3-layer MLP, writes model.mlir, initial params and "
               "a synthetic batch, and prints the loss of one forward pass."};
  app.add_option("--in", o.in, "input features")->capture_default_str();
  app.add_option("--hidden1", o.hidden1, "first hidden layer")
      ->capture_default_str();
  app.add_option("--hidden2", o.hidden2, "second hidden layer")
      ->capture_default_str();
  app.add_option("--classes", o.classes, "output classes")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "batch size")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of params and batch")
      ->capture_default_str();
  app.add_option("--out", o.out, "output folder")->required();
  CLI11_PARSE(app, argc, argv);
  for (int64_t v : {o.in, o.hidden1, o.hidden2, o.classes, o.batch})
    if (v <= 0) {
      std::cerr << "mlp-example: sizes must be positive\n";
      return 1;
    }

  try {
    Graph g(o.seed);
    mlp::traceMLP(g, o);

    g.writeModel(o.out);
    auto batch = makeBatch(o);
    std::filesystem::path inputs = std::filesystem::path(o.out) / "inputs";
    std::filesystem::create_directories(inputs);
    for (const auto &[name, t] : batch)
      rt::writeNpy((inputs / (name + ".npy")).string(), t);

    std::vector<rt::HostTensor> results = g.run(batch);
    // %.9g prints a float so that it reads back to the same bits.
    std::printf("loss = %.9g\n", results[0].getAsDouble(0));
  } catch (const std::exception &e) {
    std::cerr << "mlp-example: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
