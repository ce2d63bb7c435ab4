//===- mlp_train.cpp - Train the MLP on a spiral dataset ------------------===//
//
//   mlp-train [--points 1200] [--arms 3] [--hidden1 64] [--hidden2 64]
//             [--batch 64] [--steps 400] [--lr 1e-2] [--seed 0] --out DIR
//
// The classic "spirals" problem: `arms` interleaved 2-D spirals with noise,
// one class per arm, which no linear model separates. The MLP of MLP.h is
// compiled just in time into a training step (AdamW, linear warmup then
// cosine decay, gradient clipping at 1.0; step::jit caches the artifact on
// disk) and trained on shuffled mini-batches through the runtime (the GPU
// when there is one, else the CPU backend). Prints a progress bar, the accuracy on the whole
// set before and after, and writes DIR/loss.csv and DIR/loss.svg.
//
//===----------------------------------------------------------------------===//

#include "compiler/jit/Jit.h"
#include "examples/common/LossPlot.h"
#include "examples/mlp/MLP.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>

using namespace step::trace;
namespace rt = step::rt;
namespace fs = std::filesystem;

namespace {
struct Options {
  int64_t points = 1200, arms = 3, hidden1 = 64, hidden2 = 64, batch = 64,
          steps = 400;
  double lr = 1e-2;
  uint64_t seed = 0;
  std::string out;
};

struct Dataset {
  std::vector<float> x; // [n, 2]
  std::vector<int64_t> y;
};

/// Point i of arm a: radius r in (0, 1], angle 4r + 2 pi a / arms, plus
/// N(0, 0.1) noise on the angle (Karpathy's CS231n spiral set).
Dataset makeSpirals(const Options &o) {
  Rng rng(paramSeed(o.seed, "data:spirals"));
  Dataset d;
  int64_t perArm = o.points / o.arms;
  for (int64_t a = 0; a < o.arms; ++a)
    for (int64_t i = 0; i < perArm; ++i) {
      double r = static_cast<double>(i + 1) / static_cast<double>(perArm);
      double t =
          4.0 * r +
          2.0 * M_PI * static_cast<double>(a) / static_cast<double>(o.arms) +
          0.1 * rng.normal();
      d.x.push_back(static_cast<float>(r * std::sin(t)));
      d.x.push_back(static_cast<float>(r * std::cos(t)));
      d.y.push_back(a);
    }
  return d;
}

std::map<std::string, rt::HostTensor>
batchOf(const Dataset &d, const std::vector<int64_t> &rows) {
  auto n = static_cast<int64_t>(rows.size());
  rt::HostTensor x(rt::DType::F32, {n, 2}), y(rt::DType::I64, {n});
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[2 * i] = d.x[2 * rows[i]];
    x.data<float>()[2 * i + 1] = d.x[2 * rows[i] + 1];
    y.data<int64_t>()[i] = d.y[rows[i]];
  }
  return {{"x", x}, {"y", y}};
}

/// Fraction of the set classified correctly with `params`, batch by batch
/// through @forward's logits (a last partial batch wraps around).
double accuracy(const Graph &g, const Dataset &d, int64_t batch,
                const std::map<std::string, rt::HostTensor> &params) {
  auto n = static_cast<int64_t>(d.y.size());
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += batch) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < batch; ++i)
      rows.push_back((start + i) % n);
    rt::HostTensor logits = g.run(batchOf(d, rows), &params)[1];
    int64_t classes = logits.shape()[1];
    for (int64_t i = 0; i < batch && start + i < n; ++i) {
      const float *row = logits.data<float>() + i * classes;
      if (std::max_element(row, row + classes) - row == d.y[rows[i]])
        ++correct;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

/// A progress bar on stderr, redrawn 50 times over the run.
void progress(int64_t step, int64_t steps, double loss) {
  const int width = 30;
  if (step != steps && step % std::max<int64_t>(1, steps / 50) != 0)
    return;
  int filled = static_cast<int>(width * step / steps);
  std::fprintf(stderr, "\r[%s%s] %4lld/%lld loss %.4f",
               std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), (long long)step,
               (long long)steps, loss);
  if (step == steps)
    std::fprintf(stderr, "\n");
}
} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"Trains the MLP on noisy 2-D spirals with a compiled "
               "training step on the reference interpreter."};
  app.add_option("--points", o.points, "dataset size")->capture_default_str();
  app.add_option("--arms", o.arms, "spiral arms = classes")
      ->capture_default_str();
  app.add_option("--hidden1", o.hidden1, "first hidden layer")
      ->capture_default_str();
  app.add_option("--hidden2", o.hidden2, "second hidden layer")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "batch size")->capture_default_str();
  app.add_option("--steps", o.steps, "updates")->capture_default_str();
  app.add_option("--lr", o.lr, "peak AdamW learning rate")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of params and data")
      ->capture_default_str();
  app.add_option("--out", o.out, "folder for loss.csv and loss.svg")
      ->required();
  CLI11_PARSE(app, argc, argv);
  for (int64_t v : {o.points, o.arms, o.hidden1, o.hidden2, o.batch, o.steps})
    if (v <= 0) {
      std::cerr << "mlp-train: sizes must be positive\n";
      return 1;
    }
  if (o.points < o.arms || o.batch > o.points) {
    std::cerr << "mlp-train: need points >= arms and batch <= points\n";
    return 1;
  }

  try {
    mlp::Sizes sizes;
    sizes.in = 2;
    sizes.hidden1 = o.hidden1;
    sizes.hidden2 = o.hidden2;
    sizes.classes = o.arms;
    sizes.batch = o.batch;
    Graph g(o.seed);
    mlp::traceMLP(g, sizes);

    step::JitOptions jo;
    jo.seed = o.seed;
    step::TrainOptions &t = jo.train;
    t.optimizer.lr = o.lr;
    t.schedule.kind = step::ScheduleOptions::Kind::Cosine;
    t.schedule.warmup = std::max<int64_t>(1, o.steps / 20);
    t.schedule.total = o.steps;
    t.schedule.minRatio = 0.1;
    t.clipNorm = 1.0;
    step::Jit net =
        step::jit([&](Graph &traced) { mlp::traceMLP(traced, sizes); }, jo);
    step::Session &session = net.session();
    std::printf("mlp-train: train step %s (%s backend)\n",
                net.fromCache() ? "loaded from the cache" : "compiled",
                step::backendName(session.backend()));

    Dataset d = makeSpirals(o);
    auto params = g.initialParams();
    std::printf("mlp-train: %zu points, %lld arms; accuracy before: %.3f\n",
                d.y.size(), (long long)o.arms, accuracy(g, d, o.batch, params));

    std::vector<int64_t> order(d.y.size());
    std::iota(order.begin(), order.end(), 0);
    Rng rng(paramSeed(o.seed, "data:shuffle"));
    size_t cursor = order.size();
    std::vector<examples::LossPoint> curve;
    auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < o.steps; ++s) {
      if (cursor + o.batch > order.size()) {
        for (size_t i = order.size() - 1; i > 0; --i)
          std::swap(order[i], order[rng.below(static_cast<int64_t>(i) + 1)]);
        cursor = 0;
      }
      std::vector<int64_t> rows(order.begin() + cursor,
                                order.begin() + cursor + o.batch);
      cursor += o.batch;
      double loss = net.step(batchOf(d, rows));
      curve.push_back({s + 1, step::learningRate(t, s), loss});
      progress(s + 1, o.steps, loss);
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    for (auto &[name, value] : params)
      value = session.get(name);
    std::printf("mlp-train: %lld steps in %.1f s; loss %.4f -> %.4f; "
                "accuracy after: %.3f\n",
                (long long)o.steps, seconds, curve.front().loss,
                curve.back().loss, accuracy(g, d, o.batch, params));

    fs::create_directories(o.out);
    examples::writeLossCsv((fs::path(o.out) / "loss.csv").string(), curve);
    examples::writeLossSvg((fs::path(o.out) / "loss.svg").string(), curve,
                       "MLP on spirals, AdamW + cosine");
  } catch (const std::exception &e) {
    std::cerr << "\nmlp-train: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
