//===- AmpTest.cpp - step-amp through the training pipeline ---------------===//
//
// Mixed precision end to end on the reference interpreter (compiler/
// pipeline/Train.h's Trainer):
//  - torch.cuda.amp.GradScaler semantics of the fp16 dynamic loss scaler
//    compiled into @train_step (PyTorch's scaler needs CUDA, so its rules
//    are the oracle here, written out): an overflowing step is skipped
//    (params, optimizer state and opt.step unchanged), the scale is halved
//    and the tracker reset; growth_interval clean steps double the scale;
//    the reported loss is unscaled;
//  - bf16 needs no scaler state; params stay f32 (master weights) and each
//    is cast to bf16 once per step, also under gradient accumulation.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Train.h"
#include "compiler/trace/Trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace {
using namespace step;
using namespace step::trace;

/// A linear layer and a cross-entropy loss.
std::string model() {
  Graph g(3);
  Tensor x = g.input("x", {4, 6});
  Tensor y = g.input("y", {4}, DType::I64);
  Tensor w = g.param("w", {6, 3}, init::normal(0, 0.5));
  Tensor b = g.param("b", {3}, init::normal(0, 0.5));
  g.output(cross_entropy(linear(x, w, b), y));
  return g.mlir();
}

std::map<std::string, rt::HostTensor> params() {
  rt::HostTensor w(rt::DType::F32, {6, 3}), b(rt::DType::F32, {3});
  for (int64_t i = 0; i < w.numel(); ++i)
    w.setFromDouble(i, 0.1 * static_cast<double>(i % 7) - 0.3);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.setFromDouble(i, 0.05 * static_cast<double>(i));
  return {{"w", w}, {"b", b}};
}

std::map<std::string, rt::HostTensor> batch(int64_t rows = 4) {
  rt::HostTensor x(rt::DType::F32, {rows, 6}), y(rt::DType::I64, {rows});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, std::sin(0.7 * static_cast<double>(i)));
  for (int64_t i = 0; i < rows; ++i)
    y.data<int64_t>()[i] = i % 3;
  return {{"x", x}, {"y", y}};
}

TrainOptions fp16(const std::string &lossScale) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  t.amp = AmpOptions::parse("fp16", "", lossScale);
  return t;
}

double scalar(const rt::HostTensor &t) { return t.getAsDouble(0); }

bool sameBits(const rt::HostTensor &a, const rt::HostTensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.byteSize()) == 0;
}

TEST(GradScaler, OverflowSkipsTheStepAndHalvesTheScale) {
  // 2^126 times a loss of ~1 is a finite f32, but its f16 cotangents in
  // the backward overflow.
  Trainer trainer(model(), fp16("dynamic,init=8.507059e37"), params());
  Trainer plain(model(), fp16("none"), params());
  auto before = trainer.state();
  double loss = trainer.step(batch());
  const auto &after = trainer.state();
  EXPECT_EQ(loss, plain.step(batch())) << "the reported loss is unscaled";
  for (const char *name : {"w", "b"})
    EXPECT_TRUE(sameBits(after.at(name), before.at(name)))
        << name << " changed on a skipped step";
  EXPECT_EQ(scalar(after.at("opt.step")), 0.0); // optimizer.step() skipped
  for (const char *name : {"opt.exp_avg.w", "opt.exp_avg_sq.w"})
    EXPECT_EQ(scalar(after.at(name)), 0.0) << name;
  EXPECT_FLOAT_EQ(scalar(after.at("amp.loss_scale")), 8.507059e37f * 0.5f);
  EXPECT_EQ(scalar(after.at("amp.growth_tracker")), 0.0);
}

TEST(GradScaler, CleanStepsGrowTheScaleEveryInterval) {
  Trainer trainer(model(), fp16("dynamic,init=1024,interval=2"), params());
  std::vector<double> scales, trackers, steps;
  for (int i = 0; i < 5; ++i) {
    trainer.step(batch());
    scales.push_back(scalar(trainer.state().at("amp.loss_scale")));
    trackers.push_back(scalar(trainer.state().at("amp.growth_tracker")));
    steps.push_back(scalar(trainer.state().at("opt.step")));
  }
  EXPECT_EQ(scales, (std::vector<double>{1024, 2048, 2048, 4096, 4096}));
  EXPECT_EQ(trackers, (std::vector<double>{1, 0, 1, 0, 1}));
  EXPECT_EQ(steps, (std::vector<double>{1, 2, 3, 4, 5}));
}

TEST(GradScaler, GrowthThatWouldOverflowIsNotApplied) {
  // bf16 has f32's range, so a scale of 2^120 scales this small model's
  // gradients without overflow; growing it 2^10 would give inf, so the
  // scale stays (the step itself is clean: the tracker resets).
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  t.amp = AmpOptions::parse("bf16", "",
                            "dynamic,init=1.329228e36,growth=1024,interval=1");
  Trainer trainer(model(), t, params());
  trainer.step(batch());
  EXPECT_EQ(scalar(trainer.state().at("opt.step")), 1.0) << "a clean step";
  EXPECT_FLOAT_EQ(scalar(trainer.state().at("amp.loss_scale")), 1.329228e36f);
  EXPECT_EQ(scalar(trainer.state().at("amp.growth_tracker")), 0.0);
}

TEST(GradScaler, ScaledStepEqualsTheUnscaledOneInExactArithmetic) {
  // Scaling by a power of two and unscaling is exact unless something
  // under- or overflows: with and without the scaler the update matches
  // to f16 rounding of the (scaled or not) backward.
  Trainer scaled(model(), fp16("dynamic,init=256"), params());
  Trainer plain(model(), fp16("none"), params());
  double l1 = scaled.step(batch()), l2 = plain.step(batch());
  EXPECT_EQ(l1, l2); // the forward is the same; loss * s / s is exact
  const rt::HostTensor &a = scaled.state().at("w"), &b = plain.state().at("w");
  for (int64_t i = 0; i < a.numel(); ++i)
    EXPECT_NEAR(a.getAsDouble(i), b.getAsDouble(i), 2e-3) << i;
  EXPECT_EQ(plain.state().count("amp.loss_scale"), 0u);
}

TEST(Amp, Bf16KeepsF32MasterWeightsAndCastsEachParamOncePerStep) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("sgd,lr=0.1");
  t.amp = AmpOptions::parse("bf16", "", "auto");
  t.gradAccum = 2;
  t.fuse = false;
  Trainer trainer(model(), t, params());
  trainer.step(batch(8));
  EXPECT_EQ(trainer.state().at("w").dtype(), rt::DType::F32);
  EXPECT_EQ(trainer.state().count("amp.loss_scale"), 0u); // bf16: no scaler
  std::string text = trainer.trainStepMlir();
  // Two micro-batches, one bf16 copy of w (CSE merged the inlined casts).
  size_t casts = 0;
  for (size_t at = 0; (at = text.find("tensor<6x3xf32> -> tensor<6x3xbf16>",
                                      at)) != std::string::npos;
       ++at)
    ++casts;
  EXPECT_EQ(casts, 1u) << text;
}

TEST(Amp, AutocastOffScopeKeepsItsOpsInF32) {
  // Two linears; the second is traced in an autocast-off scope.
  Graph g(3);
  Tensor x = g.input("x", {4, 6});
  Tensor y = g.input("y", {4}, DType::I64);
  Tensor w = g.param("w", {6, 6}, init::normal(0, 0.5));
  Tensor v = g.param("v", {6, 3}, init::normal(0, 0.5));
  Tensor h = relu(matmul(x, w));
  Tensor logits;
  {
    AutocastOff exact(g);
    logits = matmul(h, v);
  }
  g.output(cross_entropy(logits, y));
  std::string text = g.mlir();
  EXPECT_NE(text.find("step.amp = \"f32\""), std::string::npos) << text;

  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("sgd,lr=0.1");
  t.amp = AmpOptions::parse("bf16", "", "auto");
  t.fuse = false;
  Trainer trainer(text, t, {{"w", g.initialParam("w")},
                            {"v", g.initialParam("v")}});
  std::string step = trainer.trainStepMlir();
  EXPECT_NE(step.find("tensor<4x6xbf16>, tensor<6x6xbf16> -> tensor<4x6xbf16>"),
            std::string::npos)
      << "the first matmul runs in bf16\n" << step;
  EXPECT_NE(step.find("tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>"),
            std::string::npos)
      << "the scoped matmul runs in f32\n" << step;
  EXPECT_EQ(step.find("tensor<6x3xbf16>"), std::string::npos) << step;
}

} // namespace
