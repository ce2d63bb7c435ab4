//===- JitTest.cpp - step::jit: compile once, cache, run ------------------===//

#include "TraceTestUtil.h"
#include "compiler/jit/Jit.h"

#include <gtest/gtest.h>

#include <set>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace {
using namespace step;
using namespace step::trace;
using step::trace::test::errorOf;
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

  // Every option that changes the plan changes the key: a cached artifact
  // compiled without recomputation (say) is never handed to a user who
  // asked for it.
  // (Sharding is keyed too; a sharded step needs its ranks to run.)
  std::vector<void (*)(JitOptions &)> changes = {
      [](JitOptions &o) { o.train.remat.mode = "max"; },
      [](JitOptions &o) { o.train.offload = OffloadOptions::parse("all"); },
      [](JitOptions &o) { o.train.offloadOptimizer = true; },
      [](JitOptions &o) { o.train.fuse = false; },
  };
  std::set<std::string> keys = {first.key()};
  for (auto change : changes) {
    JitOptions o = options(dir);
    change(o);
    Jit other = jit(tinyModel, o);
    other.step(batch(0));
    EXPECT_FALSE(other.fromCache()) << "key " << other.key();
    keys.insert(other.key());
  }
  EXPECT_EQ(keys.size(), changes.size() + 1);
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

//===----------------------------------------------------------------------===//
// Buckets: policies, and the JIT compiling them on first use
//===----------------------------------------------------------------------===//

TEST(BucketPolicyTest, RoundsUpAndCapsAtTheMaximum) {
  BucketPolicy pow2 = BucketPolicy::parse("pow2");
  EXPECT_EQ(pow2.round(1, 40), 16);
  EXPECT_EQ(pow2.round(16, 40), 16);
  EXPECT_EQ(pow2.round(17, 40), 32);
  EXPECT_EQ(pow2.round(33, 40), 40);
  EXPECT_EQ(pow2.all(40), (std::vector<int64_t>{16, 32, 40}));
  EXPECT_EQ(BucketPolicy::parse("pow2:4").all(16),
            (std::vector<int64_t>{4, 8, 16}));
  EXPECT_EQ(BucketPolicy::parse("pow2:64").all(40),
            (std::vector<int64_t>{40}));

  BucketPolicy mult = BucketPolicy::parse("mult:64");
  EXPECT_EQ(mult.round(64, 1024), 64);
  EXPECT_EQ(mult.round(65, 1024), 128);
  EXPECT_EQ(mult.all(130), (std::vector<int64_t>{64, 128, 130}));

  BucketPolicy list = BucketPolicy::parse("256,128,256");
  EXPECT_EQ(list.sizes, (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(list.round(1, 1024), 128);
  EXPECT_EQ(list.round(200, 1024), 256);
  EXPECT_THROW(list.round(300, 1024), std::invalid_argument);
  EXPECT_THROW(pow2.round(41, 40), std::invalid_argument);

  for (const char *spec : {"pow2", "pow2:8", "mult:64", "128,256"})
    EXPECT_EQ(BucketPolicy::parse(spec).str(), spec);
  for (const char *spec : {"", "pow2:0", "pow2:", "mult:", "mult:-3", "1,,2",
                           "1,", "abc", "0", "16x"})
    EXPECT_THROW(BucketPolicy::parse(spec), std::invalid_argument) << spec;

  auto [symbol, policy] = parseBucketOption("T:mult:8");
  EXPECT_EQ(symbol, "T");
  EXPECT_EQ(policy.kind, BucketPolicy::Kind::Multiples);
  EXPECT_EQ(policy.step, 8);
  EXPECT_THROW(parseBucketOption("128,256"), std::invalid_argument);
  EXPECT_THROW(parseBucketOption(":pow2"), std::invalid_argument);
}

constexpr int64_t kMaxT = 40;

/// Token-level loss over a symbolic length T (maximum kMaxT).
void dynamicModel(Graph &g) {
  int64_t T = dyn("T", kMaxT);
  Tensor x = g.input("x", {2, T, 3});
  Tensor y = g.input("y", {2, T}, DType::I64);
  Tensor w = g.param("w", {3, 4}, init::normal(0, 0.5));
  Tensor h = matmul(x, w); // [2, T, 4]
  g.output(cross_entropy(reshape(h, {-1, 4}), reshape(y, {-1})) +
           0.1 * mean(softmax(sum(h, {2}), 1) * sum(h, {2})));
}

std::map<std::string, rt::HostTensor> dynamicBatch(int64_t T, int k) {
  rt::HostTensor x(rt::DType::F32, {2, T, 3}), y(rt::DType::I64, {2, T});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, 0.1 * static_cast<double>((i * 5 + k) % 13) - 0.6);
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data<int64_t>()[i] = (i * 3 + k) % 4;
  return {{"x", x}, {"y", y}};
}

TEST_F(JitTest, BucketsCompileOnFirstUseAndEqualTheAotArtifact) {
  JitOptions o = options(dir);
  Jit net = jit(dynamicModel, o); // pow2: buckets 16, 32, 40

  // The same buckets compiled ahead of time into one artifact.
  Graph g;
  dynamicModel(g);
  Session aot(compileBuckets(g.mlir(), o.train,
                             {{{"T", 16}}, {{"T", 32}}, {{"T", kMaxT}}},
                             /*kernels=*/false),
              o.session);
  for (const auto &[name, value] : g.initialParams())
    aot.set(name, value);
  // What a batch supplies: the valid length (len.T) is the session's own.
  EXPECT_EQ(aot.inputNames(), (std::vector<std::string>{"x", "y"}));

  const int64_t lengths[] = {3, 10, 16, 17, 30, 3, 33, 40, 12};
  const size_t compiled[] = {1, 1, 1, 2, 2, 2, 3, 3, 3};
  for (size_t i = 0; i < std::size(lengths); ++i) {
    auto b = dynamicBatch(lengths[i], static_cast<int>(i));
    // The same plans on the same inputs: the same bits.
    EXPECT_EQ(net.step(b), aot.step(b)) << "T = " << lengths[i];
    EXPECT_EQ(net.compiles(), compiled[i]) << "T = " << lengths[i];
  }
  EXPECT_EQ(net.buckets(), (std::vector<std::string>{"T=16", "T=40", "T=32"}));
  EXPECT_EQ(net.session().bucketCount(), 3u);
  EXPECT_TRUE(net.session().get("w").bitwiseEqual(aot.get("w")));
  EXPECT_TRUE(fs::exists(net.artifactPath()));
  EXPECT_NE(net.artifactPath().find(".T16.step"), std::string::npos)
      << net.artifactPath();
  EXPECT_EQ(net.evictions(), 0u);

  // Another Jit of the same model finds all three in the cache.
  Jit again = jit(dynamicModel, o);
  for (int64_t T : {5, 20, 39})
    again.step(dynamicBatch(T, 0));
  EXPECT_EQ(again.compiles(), 0u);
  EXPECT_EQ(again.loads(), 3u);
}

TEST_F(JitTest, BucketsBeyondTheCapEvictTheLeastRecentlyUsedWithAWarning) {
  JitOptions o = options(dir);
  o.buckets["T"] = BucketPolicy::parse("mult:8");
  o.maxBuckets = 2;
  Jit net = jit(dynamicModel, o);
  net.step(dynamicBatch(5, 0));  // T=8
  net.step(dynamicBatch(12, 0)); // T=16
  net.step(dynamicBatch(7, 0));  // T=8 again: now the most recent
  testing::internal::CaptureStderr();
  net.step(dynamicBatch(20, 0)); // T=24 evicts T=16
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("more than 2 buckets in use; dropped T=16 (least "
                     "recently used)"),
            std::string::npos)
      << err;
  EXPECT_EQ(net.evictions(), 1u);
  EXPECT_EQ(net.buckets(), (std::vector<std::string>{"T=24", "T=8"}));
  EXPECT_EQ(net.session().bucketCount(), 2u);

  // T=16 again: reloaded (not recompiled), evicting T=8, silently.
  testing::internal::CaptureStderr();
  net.step(dynamicBatch(9, 0));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(net.compiles(), 3u);
  EXPECT_EQ(net.loads(), 4u);
  EXPECT_EQ(net.evictions(), 2u);
  EXPECT_EQ(net.buckets(), (std::vector<std::string>{"T=16", "T=24"}));
  EXPECT_EQ(net.session().bucketCount(), 2u);
}

TEST_F(JitTest, BucketErrorsNameTheProblem) {
  JitOptions o = options(dir);
  o.buckets["U"] = BucketPolicy();
  Jit unknown = jit(dynamicModel, o);
  EXPECT_CONTAINS(errorOf<rt::Error>([&] { unknown.step(dynamicBatch(4, 0)); }),
                  "names symbol 'U', which the model does not have "
                  "(symbols: T)");

  JitOptions listed = options(dir);
  listed.buckets["T"] = BucketPolicy::parse("8,16");
  Jit net = jit(dynamicModel, listed);
  net.step(dynamicBatch(4, 0));
  EXPECT_CONTAINS(errorOf<rt::Error>([&] { net.step(dynamicBatch(20, 0)); }),
                  "length 20 exceeds the largest bucket 16 of 8,16");
  EXPECT_THROW(net.step(dynamicBatch(kMaxT + 1, 0)), rt::Error);

  // An AOT artifact whose largest bucket is below the maximum.
  Graph g;
  dynamicModel(g);
  Session small(compileBuckets(g.mlir(), o.train, {{{"T", 8}}}, false),
                o.session);
  for (const auto &[name, value] : g.initialParams())
    small.set(name, value);
  small.step(dynamicBatch(8, 0));
  EXPECT_CONTAINS(errorOf<rt::Error>([&] { small.step(dynamicBatch(20, 0)); }),
                  "no bucket holds T = 20 (buckets: {\"T\":8})");
}

} // namespace
