//===- JitTest.cpp - step::jit: compile once, cache, run ------------------===//

#include "compiler/jit/Jit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace {
using namespace step;
using namespace step::trace;
namespace fs = std::filesystem;

void tinyModel(Graph &g) {
  Tensor x = g.input("x", {4, 3});
  Tensor y = g.input("y", {4}, DType::I64);
  Tensor w = g.param("w", {3, 2}, init::normal(0, 0.5));
  g.output(cross_entropy(matmul(x, w), y));
}

std::map<std::string, rt::HostTensor> batch(int k) {
  rt::HostTensor x(rt::DType::F32, {4, 3}), y(rt::DType::I64, {4});
  for (int64_t i = 0; i < 12; ++i)
    x.setFromDouble(i, 0.1 * static_cast<double>((i * 7 + k) % 11) - 0.5);
  for (int64_t i = 0; i < 4; ++i)
    y.data<int64_t>()[i] = (i + k) % 2;
  return {{"x", x}, {"y", y}};
}

JitOptions options(const std::string &dir) {
  JitOptions o;
  o.train.optimizer = OptimizerOptions::parse("adamw,lr=0.05");
  o.train.clipNorm = 1.0;
  o.session.backend = Backend::Cpu;
  o.cacheDir = dir;
  o.kernels = false; // the CPU backend needs none; keeps the test fast
  return o;
}

class JitTest : public testing::Test {
protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() /
           ("stepjit-jit-test-" + std::to_string(::getpid())))
              .string();
    fs::remove_all(dir);
    Jit::clearMemoryCache();
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string dir;
};

TEST_F(JitTest, EqualsTheInterpreterTrainerBitForBit) {
  Jit net = jit(tinyModel, options(dir));
  Graph g;
  tinyModel(g);
  Trainer reference(g.mlir(), options(dir).train, g.initialParams());
  for (int k = 0; k < 3; ++k) {
    // Same kernels in the same order on both paths: identical bits.
    EXPECT_EQ(net.step(batch(k)), reference.step(batch(k))) << "step " << k;
  }
  EXPECT_TRUE(net.session().get("w").bitwiseEqual(reference.state().at("w")));
  EXPECT_TRUE(net.session().get("opt.exp_avg_sq.w").bitwiseEqual(
      reference.state().at("opt.exp_avg_sq.w")));
  EXPECT_FALSE(net.fromCache());
  EXPECT_TRUE(fs::exists(net.artifactPath()));
}

TEST_F(JitTest, SecondUseLoadsFromMemoryThenFromDisk) {
  Jit first = jit(tinyModel, options(dir));
  double loss = first.step(batch(0));
  EXPECT_FALSE(first.fromCache());

  Jit second = jit(tinyModel, options(dir));
  EXPECT_EQ(second.step(batch(0)), loss);
  EXPECT_TRUE(second.fromCache());
  EXPECT_EQ(second.key(), first.key());

  // What a new process sees: only the disk cache.
  Jit::clearMemoryCache();
  Jit third = jit(tinyModel, options(dir));
  EXPECT_EQ(third.step(batch(0)), loss);
  EXPECT_TRUE(third.fromCache());

  // Other options are another key.
  JitOptions sgd = options(dir);
  sgd.train.optimizer = OptimizerOptions::parse("sgd,lr=0.05");
  Jit fourth = jit(tinyModel, sgd);
  fourth.step(batch(0));
  EXPECT_NE(fourth.key(), first.key());
  EXPECT_FALSE(fourth.fromCache());
}

TEST_F(JitTest, ADamagedCacheEntryIsRecompiled) {
  Jit first = jit(tinyModel, options(dir));
  double loss = first.step(batch(0));
  std::ofstream(first.artifactPath(), std::ios::binary | std::ios::trunc)
      << "not an artifact";
  Jit::clearMemoryCache();
  testing::internal::CaptureStderr();
  Jit second = jit(tinyModel, options(dir));
  EXPECT_EQ(second.step(batch(0)), loss);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("ignoring the cached artifact"), std::string::npos)
      << err;
  EXPECT_FALSE(second.fromCache());
}

} // namespace
