//===- NNTest.cpp - neural-network op tests -------------------------------===//
//
// Expected values come from the definitions: softmax([1, 2, 3]) =
// e^i / (e + e^2 + e^3), log(e + e^2 + e^3) = 3.40760596444438, and so on.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

// log_softmax([1, 2, 3]) (kSm: softmax([1, 2, 3])).
const std::vector<double> kLsm = {-2.40760596444438, -1.4076059644443801,
                                  -0.40760596444438013};

TEST(Softmax, EveryFloatDType) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    expectValues(softmax(make(t, {3}, {1, 2, 3}), 0), t, {3}, kSm);
    expectValues(logSoftmax(make(t, {3}, {1, 2, 3}), -1), t, {3}, kLsm);
    // Along dim 0 of [3, 2]: columns are [1, 2, 3] and [5, 5, 5].
    HostTensor x = make(t, {3, 2}, {1, 5, 2, 5, 3, 5});
    expectValues(softmax(x, 0), t, {3, 2},
                 {kSm[0], 1.0 / 3, kSm[1], 1.0 / 3, kSm[2], 1.0 / 3});
    expectValues(logSoftmax(x, 0), t, {3, 2},
                 {kLsm[0], -1.0986122886681098, kLsm[1], -1.0986122886681098,
                  kLsm[2], -1.0986122886681098});
  }
}

TEST(Softmax, StableForLargeInputsAndMaskedEntries) {
  // Shifting by 1000 changes nothing mathematically; exp(1000) overflows.
  expectValues(softmax(make(DType::F32, {3}, {1001, 1002, 1003}), 0),
               DType::F32, {3}, kSm);
  expectValues(logSoftmax(make(DType::F32, {3}, {-1001, -1000, -999}), 0),
               DType::F32, {3}, kLsm);
  // -inf entries (masked positions) get probability 0 / log-prob -inf.
  expectExact(softmax(make(DType::F32, {3}, {-kInf, 0, -kInf}), 0),
              DType::F32, {3}, {0, 1, 0});
  expectExact(logSoftmax(make(DType::F32, {2}, {-kInf, 0}), 0), DType::F32,
              {2}, {-kInf, 0});
  // An all -inf row is NaN, as in PyTorch.
  expectExact(softmax(make(DType::F32, {2}, {-kInf, -kInf}), 0), DType::F32,
              {2}, {NAN, NAN});
  expectExact(softmax(make(DType::F32, {2}, {NAN, 1}), 0), DType::F32, {2},
              {NAN, NAN});
}

TEST(Softmax, ZeroSizeDeterminismErrors) {
  EXPECT_EQ(softmax(HostTensor(DType::F32, {2, 0}), 1).shape(),
            (Shape{2, 0}));
  EXPECT_EQ(logSoftmax(HostTensor(DType::F16, {0, 4}), 1).shape(),
            (Shape{0, 4}));
  std::vector<double> v;
  for (int i = 0; i < 64; ++i)
    v.push_back(std::sin(i));
  HostTensor x = make(DType::BF16, {4, 16}, v);
  EXPECT_TRUE(softmax(x, 1).bitwiseEqual(softmax(x, 1)));
  EXPECT_ERROR(softmax(HostTensor(DType::I32, {3}), 0),
               {"step.softmax", "i32 [3]"});
  EXPECT_ERROR(logSoftmax(HostTensor(DType::F32, {3}), 1),
               {"step.log_softmax", "dim 1 out of range for rank 1"});
  EXPECT_ERROR(softmax(HostTensor(DType::F32, {}), 0),
               {"step.softmax", "rank >= 1"});
}

TEST(LayerNorm, EveryFloatDType) {
  // Row [1, 2, 3]: mean 2, biased variance 2/3, so x_hat = (x - 2) *
  // sqrt(3/2) = [-1.2247..., 0, 1.2247...]; row [2, 4, 6] normalises to the
  // same values.
  const double r = 1.224744871391589; // sqrt(3/2)
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = make(t, {2, 3}, {1, 2, 3, 2, 4, 6});
    expectValues(layerNorm(x, make(t, {3}, {1, 1, 1}),
                           make(t, {3}, {0, 0, 0}), 0.0),
                 t, {2, 3}, {-r, 0, r, -r, 0, r});
    // y = x_hat * w + b with w = [1, 2, 3], b = [0.5, 0, -1].
    expectValues(layerNorm(x, make(t, {3}, {1, 2, 3}),
                           make(t, {3}, {0.5, 0, -1}), 0.0),
                 t, {2, 3},
                 {0.5 - r, 0, 3 * r - 1, 0.5 - r, 0, 3 * r - 1});
  }
}

TEST(LayerNorm, EpsTrailingDimsMixedParamTypes) {
  // eps = 1: row [1, 2, 3] has x_hat = (x - 2) / sqrt(2/3 + 1).
  const double s = 1.0 / std::sqrt(2.0 / 3.0 + 1.0);
  expectValues(layerNorm(make(DType::F32, {1, 3}, {1, 2, 3}),
                         make(DType::F32, {3}, {1, 1, 1}),
                         make(DType::F32, {3}, {0, 0, 0}), 1.0),
               DType::F32, {1, 3}, {-s, 0, s});
  // Normalising over the trailing [2, 2]: [1, 2, 3, 4] has mean 2.5 and
  // variance 1.25; (x - 2.5) / sqrt(1.25) = [-3, -1, 1, 3] / sqrt(5).
  const double q = 1.0 / std::sqrt(5.0);
  HostTensor w = make(DType::F32, {2, 2}, {1, 1, 1, 1});
  HostTensor b = make(DType::F32, {2, 2}, {0, 0, 0, 0});
  expectValues(layerNorm(make(DType::BF16, {1, 2, 2}, {1, 2, 3, 4}), w, b,
                         0.0),
               DType::BF16, {1, 2, 2}, {-3 * q, -q, q, 3 * q});
  // A constant row has zero variance: (x - mean) = 0 exactly, so y = b.
  expectExact(layerNorm(make(DType::F32, {1, 2}, {7, 7}),
                        make(DType::F32, {2}, {1, 1}),
                        make(DType::F32, {2}, {0.25, -0.5}), 1e-5),
              DType::F32, {1, 2}, {0.25, -0.5});
}

TEST(LayerNorm, Errors) {
  HostTensor x(DType::F32, {2, 3});
  EXPECT_ERROR(layerNorm(x, HostTensor(DType::F32, {2}),
                         HostTensor(DType::F32, {2}), 1e-5),
               {"step.layer_norm", "trailing dims", "f32 [2, 3]", "f32 [2]"});
  EXPECT_ERROR(layerNorm(x, HostTensor(DType::F32, {3}),
                         HostTensor(DType::F32, {1}), 1e-5),
               {"step.layer_norm", "bias f32 [1]"});
  EXPECT_ERROR(layerNorm(HostTensor(DType::I32, {2, 3}),
                         HostTensor(DType::F32, {3}),
                         HostTensor(DType::F32, {3}), 1e-5),
               {"step.layer_norm", "input", "i32 [2, 3]"});
}

TEST(Embedding, EveryFloatDTypeAndIndexType) {
  for (DType t : kFloatTypes)
    for (DType it : kIntTypes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + dtypeName(it));
      HostTensor w = make(t, {3, 2}, {1, 2, 3, 4, 5, 6});
      expectExact(embedding(make(it, {2, 2}, {2, 0, 1, 1}), w), t, {2, 2, 2},
                  {5, 6, 1, 2, 3, 4, 3, 4});
      expectExact(embedding(make(it, {}, {1}), w), t, {2}, {3, 4});
      EXPECT_EQ(embedding(HostTensor(it, {0}), w).shape(), (Shape{0, 2}));
    }
}

TEST(Embedding, Errors) {
  HostTensor w(DType::F32, {3, 2});
  EXPECT_ERROR(embedding(make(DType::I64, {2}, {0, 3}), w),
               {"step.embedding", "index 3", "position 1", "[0, 3)"});
  EXPECT_ERROR(embedding(make(DType::I32, {1}, {-1}), w),
               {"step.embedding", "index -1"});
  EXPECT_ERROR(embedding(HostTensor(DType::F32, {1}), w),
               {"step.embedding", "indices", "i32 or i64", "f32 [1]"});
  EXPECT_ERROR(embedding(HostTensor(DType::I32, {1}),
                         HostTensor(DType::F32, {3})),
               {"step.embedding", "rank 2", "f32 [3]"});
}

// Logits [[1, 2, 3], [1, 1, 1]]: row 0 with target 2 loses
// log(e + e^2 + e^3) - 3 = 0.40760596444438013; row 1 with target 0 loses
// log(3 e) - 1 = log 3.
const double kL0 = 0.40760596444438013, kL1 = 1.0986122886681098;

TEST(CrossEntropy, ReductionsEveryDType) {
  for (DType t : kFloatTypes)
    for (DType it : kIntTypes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + dtypeName(it));
      HostTensor logits = make(t, {2, 3}, {1, 2, 3, 1, 1, 1});
      HostTensor tg = make(it, {2}, {2, 0});
      expectValues(crossEntropy(logits, tg, Reduction::None, -100), t, {2},
                   {kL0, kL1});
      expectValues(crossEntropy(logits, tg, Reduction::Sum, -100), t, {},
                   {kL0 + kL1});
      expectValues(crossEntropy(logits, tg, Reduction::Mean, -100), t, {},
                   {(kL0 + kL1) / 2});
    }
}

TEST(CrossEntropy, IgnoreIndexAndStability) {
  HostTensor logits = make(DType::F32, {2, 3}, {1, 2, 3, 1, 1, 1});
  HostTensor tg = make(DType::I64, {2}, {2, -100});
  expectValues(crossEntropy(logits, tg, Reduction::None, -100), DType::F32,
               {2}, {kL0, 0});
  // The ignored row is left out of the count: mean = kL0 / 1.
  expectValues(crossEntropy(logits, tg, Reduction::Mean, -100), DType::F32,
               {}, {kL0});
  expectValues(crossEntropy(logits, tg, Reduction::Sum, -100), DType::F32, {},
               {kL0});
  // All ignored: mean is 0/0 = NaN (PyTorch), sum is 0.
  HostTensor none = make(DType::I32, {2}, {7, 7});
  expectExact(crossEntropy(logits, none, Reduction::Mean, 7), DType::F32, {},
              {NAN});
  expectExact(crossEntropy(logits, none, Reduction::Sum, 7), DType::F32, {},
              {0});
  // Shifted logits give the same loss; exp(1003) would overflow.
  expectValues(crossEntropy(make(DType::F32, {1, 3}, {1001, 1002, 1003}),
                            make(DType::I32, {1}, {2}), Reduction::None, -1),
               DType::F32, {1}, {kL0});
  // ignore_index may be a valid class: class 0 rows are skipped.
  expectValues(crossEntropy(logits, make(DType::I32, {2}, {2, 0}),
                            Reduction::Mean, 0),
               DType::F32, {}, {kL0});
}

TEST(CrossEntropy, Errors) {
  HostTensor logits(DType::F32, {2, 3});
  EXPECT_ERROR(crossEntropy(logits, make(DType::I32, {2}, {0, 3}),
                            Reduction::Mean, -100),
               {"step.cross_entropy", "target 3", "position 1", "[0, 3)"});
  EXPECT_ERROR(crossEntropy(logits, HostTensor(DType::I32, {3}),
                            Reduction::Mean, -100),
               {"step.cross_entropy", "f32 [2, 3]", "i32 [3]"});
  EXPECT_ERROR(crossEntropy(logits, HostTensor(DType::F32, {2}),
                            Reduction::Mean, -100),
               {"step.cross_entropy", "targets", "f32 [2]"});
  EXPECT_ERROR(crossEntropy(HostTensor(DType::I32, {2, 3}),
                            HostTensor(DType::I32, {2}), Reduction::Mean,
                            -100),
               {"step.cross_entropy", "logits", "i32 [2, 3]"});
}

TEST(Dropout, SplitMix64KnownOutputs) {
  // The first two outputs of the reference SplitMix64 generator seeded with
  // 0 (Steele, Lea, Flood 2014; Vigna's splitmix64.c).
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);
}

TEST(Dropout, KeepMaskFormula) {
  // u(seed, i) = (splitmix64(seed ^ splitmix64(i)) >> 40) * 2^-24, evaluated
  // independently: u(0, 0) = 0.65244847..., u(42, 0..3) = 0.30315...,
  // 0.49492..., 0.11599..., 0.26432...
  EXPECT_TRUE(dropoutKeep(0, 0, 0.65));
  EXPECT_FALSE(dropoutKeep(0, 0, 0.66));
  const double u42[] = {0.30315011739730835, 0.4949294924736023,
                        0.11599940061569214, 0.2643207311630249};
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(dropoutKeep(42, i, u42[i])) << i; // u >= p at equality
    EXPECT_FALSE(dropoutKeep(42, i, u42[i] + 1e-9)) << i;
  }
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_TRUE(dropoutKeep(5, i, 0.0));
}

TEST(Dropout, AppliesMaskAndScale) {
  // p = 0.25 on seed 42: elements 0..3 have u = 0.303, 0.495, 0.116, 0.264,
  // so element 2 is dropped and the rest scaled by 1 / 0.75.
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor y = dropout(make(t, {4}, {3, 6, 9, -12}), 0.25, 42);
    expectValues(y, t, {4}, {4, 8, 0, -16});
  }
  // Over many elements every output is 0 or x / (1 - p) per the shared mask,
  // and about 1 - p of them are kept.
  const int64_t n = 20000;
  HostTensor x = make(DType::F32, {n}, std::vector<double>(n, 1.0));
  HostTensor y = dropout(x, 0.3, 1234);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = dropoutKeep(1234, i, 0.3);
    kept += keep;
    ASSERT_EQ(y.data<float>()[i], keep ? static_cast<float>(1 / 0.7) : 0.0f);
  }
  // Binomial(20000, 0.7): standard deviation ~65; allow 5 sigma.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 325);
  EXPECT_TRUE(y.bitwiseEqual(dropout(x, 0.3, 1234)));
  EXPECT_FALSE(y.bitwiseEqual(dropout(x, 0.3, 1235)));
  EXPECT_TRUE(dropout(x, 0.0, 9).bitwiseEqual(x));
}

// The offset (the step counter, step-dropout-offset) keys a new mask per
// step; offset 0 is the seed's own mask, so a step before the pass and the
// first step after it agree.
TEST(Dropout, OffsetDrawsANewMaskPerStep) {
  const int64_t n = 20000;
  HostTensor x = make(DType::F32, {n}, std::vector<double>(n, 1.0));
  HostTensor base = dropout(x, 0.3, 1234);
  EXPECT_TRUE(dropout(x, 0.3, 1234, 0).bitwiseEqual(base));
  EXPECT_EQ(dropoutKey(1234, 0), 1234u);
  EXPECT_EQ(dropoutKey(1234, 1), 1234u + 0x9e3779b97f4a7c15ull);
  std::vector<HostTensor> masks = {base};
  for (uint64_t offset : {1u, 2u, 3u, 1000u}) {
    HostTensor y = dropout(x, 0.3, 1234, offset);
    EXPECT_TRUE(y.bitwiseEqual(dropout(x, 0.3, dropoutKey(1234, offset))));
    int64_t kept = 0, same = 0;
    for (int64_t i = 0; i < n; ++i) {
      kept += y.data<float>()[i] != 0.0f;
      same += (y.data<float>()[i] != 0.0f) == (base.data<float>()[i] != 0.0f);
    }
    // About 0.7 n kept (5 sigma of Binomial(n, 0.7)); independent masks
    // agree on about 0.7^2 + 0.3^2 = 0.58 of the elements, not all.
    EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 325) << offset;
    EXPECT_NEAR(static_cast<double>(same), 0.58 * n, 350) << offset;
    for (const HostTensor &m : masks)
      EXPECT_FALSE(y.bitwiseEqual(m)) << offset;
    masks.push_back(y);
  }
  HostTensor off = make(DType::I64, {}, {2});
  EXPECT_EQ(dropoutOffset({x, off}), 2u);
  EXPECT_EQ(dropoutOffset({x}), 0u);
  EXPECT_ERROR(dropoutOffset({x, make(DType::I32, {}, {2})}),
               {"step.dropout", "expected the offset as i64 [], found i32 []"});
}

TEST(Dropout, Errors) {
  HostTensor x(DType::F32, {2});
  EXPECT_ERROR(dropout(x, 1.0, 0), {"step.dropout", "0 <= p < 1", "p = 1"});
  EXPECT_ERROR(dropout(x, -0.1, 0), {"step.dropout", "0 <= p < 1"});
  EXPECT_ERROR(dropout(HostTensor(DType::I32, {2}), 0.5, 0),
               {"step.dropout", "i32 [2]"});
}

// One query [1, 0] over keys [1, 0], [0, 1] with scale 1/sqrt(2): scores
// [1/sqrt 2, 0], so p0 = sigmoid(1/sqrt 2) = 0.6697615493266569 and the
// output is p0 [1, 2] + (1 - p0) [3, 4] = [3 - 2 p0, 4 - 2 p0].
const double kP0 = 0.6697615493266569;

TEST(Attention, EveryFloatDType) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor q = make(t, {1, 1, 2}, {1, 0});
    HostTensor k = make(t, {1, 2, 2}, {1, 0, 0, 1});
    HostTensor v = make(t, {1, 2, 2}, {1, 2, 3, 4});
    expectValues(attention(q, k, v, false, std::nullopt), t, {1, 1, 2},
                 {3 - 2 * kP0, 4 - 2 * kP0});
    // scale 0: uniform weights, the mean of the values.
    expectValues(attention(q, k, v, false, 0.0), t, {1, 1, 2}, {2, 3});
  }
}

TEST(Attention, CausalMask) {
  // Queries [1, 0] and [1, 0] (Tq = 2) over the same keys: query 0 sees only
  // key 0 and returns v0; query 1 sees both.
  HostTensor q = make(DType::F32, {2, 2}, {1, 0, 1, 0});
  HostTensor k = make(DType::F32, {2, 2}, {1, 0, 0, 1});
  HostTensor v = make(DType::F32, {2, 2}, {1, 2, 3, 4});
  expectValues(attention(q, k, v, true, std::nullopt), DType::F32, {2, 2},
               {1, 2, 3 - 2 * kP0, 4 - 2 * kP0});
  expectValues(attention(q, k, v, false, std::nullopt), DType::F32, {2, 2},
               {3 - 2 * kP0, 4 - 2 * kP0, 3 - 2 * kP0, 4 - 2 * kP0});
  // Tq > Tk: query 2 sees keys 0 and 1 (all of them). Scale 0 makes the
  // visible keys equally weighted: [1, 2], mean, mean.
  HostTensor q3 = make(DType::F32, {3, 2}, {1, 0, 1, 0, 1, 0});
  expectValues(attention(q3, k, v, true, 0.0), DType::F32, {3, 2},
               {1, 2, 2, 3, 2, 3});
}

TEST(Attention, ANanScoreMakesItsRowAndLogSumExpNaN) {
  // Query 1 has a NaN: its row and its log-sum-exp are NaN (as the CUDA
  // kernels', codegen.cuda_emulation); query 0 is untouched, and a row
  // past the valid length stays 0 with log-sum-exp 0.
  HostTensor q = make(DType::F32, {3, 2}, {1, 0, NAN, 0, 1, 0});
  HostTensor k = make(DType::F32, {2, 2}, {1, 0, 0, 1});
  HostTensor v = make(DType::F32, {2, 2}, {1, 2, 3, 4});
  HostTensor lse;
  HostTensor y = attention(q, k, v, false, std::nullopt, 2, &lse);
  EXPECT_NEAR(y.getAsDouble(0), 3 - 2 * kP0, 1e-6);
  EXPECT_NEAR(y.getAsDouble(1), 4 - 2 * kP0, 1e-6);
  EXPECT_TRUE(std::isnan(y.getAsDouble(2)));
  EXPECT_TRUE(std::isnan(y.getAsDouble(3)));
  EXPECT_EQ(y.getAsDouble(4), 0.0);
  EXPECT_EQ(y.getAsDouble(5), 0.0);
  // log(e^(1/sqrt 2) + e^0)
  EXPECT_NEAR(lse.getAsDouble(0), std::log(std::exp(M_SQRT1_2) + 1.0), 1e-6);
  EXPECT_TRUE(std::isnan(lse.getAsDouble(1)));
  EXPECT_EQ(lse.getAsDouble(2), 0.0);
}

TEST(Attention, BatchedAndDeterministic) {
  // Two batch entries [2, 1, ...]: the second has its values doubled.
  HostTensor q = make(DType::F32, {2, 1, 1, 2}, {1, 0, 1, 0});
  HostTensor k = make(DType::F32, {2, 1, 2, 2}, {1, 0, 0, 1, 1, 0, 0, 1});
  HostTensor v = make(DType::F32, {2, 1, 2, 3},
                      {1, 2, 0, 3, 4, 0, 2, 4, 0, 6, 8, 0});
  HostTensor y = attention(q, k, v, false, std::nullopt);
  expectValues(y, DType::F32, {2, 1, 1, 3},
               {3 - 2 * kP0, 4 - 2 * kP0, 0, 6 - 4 * kP0, 8 - 4 * kP0, 0},
               1e-7);
  EXPECT_TRUE(y.bitwiseEqual(attention(q, k, v, false, std::nullopt)));
  // Tk = 0 gives an empty weighted sum.
  expectExact(attention(HostTensor(DType::F32, {1, 2}),
                        HostTensor(DType::F32, {0, 2}),
                        HostTensor(DType::F32, {0, 1}), false, std::nullopt),
              DType::F32, {1, 1}, {0});
}

TEST(Attention, Errors) {
  HostTensor q(DType::F32, {1, 2, 4});
  EXPECT_ERROR(attention(q, HostTensor(DType::F32, {1, 3, 5}),
                         HostTensor(DType::F32, {1, 3, 4}), false,
                         std::nullopt),
               {"step.attention", "q f32 [1, 2, 4]", "k f32 [1, 3, 5]"});
  EXPECT_ERROR(attention(q, HostTensor(DType::F32, {2, 3, 4}),
                         HostTensor(DType::F32, {2, 3, 4}), false,
                         std::nullopt),
               {"step.attention", "batch"});
  EXPECT_ERROR(attention(q, HostTensor(DType::F16, {1, 3, 4}),
                         HostTensor(DType::F16, {1, 3, 4}), false,
                         std::nullopt),
               {"step.attention", "same dtype"});
  EXPECT_ERROR(attention(q, HostTensor(DType::F32, {1, 3, 4}),
                         HostTensor(DType::F32, {1, 2, 4}), false,
                         std::nullopt),
               {"step.attention", "v f32 [1, 2, 4]"});
}

// The gradients of the one-query case above for g = [1, 0]: P = [p0, 1 - p0],
// dP = g . v_j = [1, 3], rowsum(P * dP) = 3 - 2 p0, so dS = s * [-2 p0 (1 -
// p0), 2 p0 (1 - p0)] = [-a, a] with a = sqrt(2) p0 (1 - p0); dq = dS k,
// dk_j = dS_j q, dv_j = P_j g.
TEST(AttentionGrad, OneQueryWorkedByHand) {
  const double a = std::sqrt(2.0) * kP0 * (1 - kP0);
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    AttentionGrads g = attentionGrad(
        make(t, {1, 1, 2}, {1, 0}), make(t, {1, 2, 2}, {1, 0, 0, 1}),
        make(t, {1, 2, 2}, {1, 2, 3, 4}), make(t, {1, 1, 2}, {1, 0}), false,
        std::nullopt);
    expectValues(g.dq, t, {1, 1, 2}, {-a, a});
    expectValues(g.dk, t, {1, 2, 2}, {-a, 0, a, 0});
    expectValues(g.dv, t, {1, 2, 2}, {kP0, 0, 1 - kP0, 0});
  }
}

/// dq, dk, dv in double straight from the definitions: S, P, dP and dS as
/// whole [Tq, Tk] matrices per batch entry (what the kernel never stores).
void referenceGrads(const std::vector<double> &q, const std::vector<double> &k,
                    const std::vector<double> &v, const std::vector<double> &g,
                    int64_t batch, int64_t tq, int64_t tk, int64_t d,
                    int64_t dv, bool causal, double sc,
                    std::vector<double> &dq, std::vector<double> &dk,
                    std::vector<double> &dvOut) {
  dq.assign(batch * tq * d, 0.0);
  dk.assign(batch * tk * d, 0.0);
  dvOut.assign(batch * tk * dv, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = causal ? std::min(tk, i + 1) : tk;
      std::vector<double> p(visible), dp(visible);
      double mx = -kInf, sum = 0.0, rowDot = 0.0;
      for (int64_t j = 0; j < visible; ++j) {
        double s = 0.0, t = 0.0;
        for (int64_t c = 0; c < d; ++c)
          s += q[(b * tq + i) * d + c] * k[(b * tk + j) * d + c];
        for (int64_t c = 0; c < dv; ++c)
          t += g[(b * tq + i) * dv + c] * v[(b * tk + j) * dv + c];
        p[j] = s * sc;
        dp[j] = t;
        mx = std::max(mx, p[j]);
      }
      for (int64_t j = 0; j < visible; ++j)
        sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t j = 0; j < visible; ++j)
        rowDot += (p[j] /= sum) * dp[j];
      for (int64_t j = 0; j < visible; ++j) {
        double ds = p[j] * (dp[j] - rowDot) * sc;
        for (int64_t c = 0; c < d; ++c) {
          dq[(b * tq + i) * d + c] += ds * k[(b * tk + j) * d + c];
          dk[(b * tk + j) * d + c] += ds * q[(b * tq + i) * d + c];
        }
        for (int64_t c = 0; c < dv; ++c)
          dvOut[(b * tk + j) * dv + c] += p[j] * g[(b * tq + i) * dv + c];
      }
    }
}

/// Deterministic pseudo-random values in [-2, 2).
std::vector<double> pseudoRandom(int64_t n, uint64_t seed) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<double>(splitmix64(seed * 1000003u + i) >> 11) /
                 static_cast<double>(1ull << 53) * 4.0 -
             2.0;
  return out;
}

TEST(AttentionGrad, MatchesTheDefinitionAcrossTiles) {
  struct Case {
    int64_t batch, tq, tk, d, dv;
    bool causal;
  };
  // 64-row tiles: several tiles, a causal diagonal crossing them, Tq < Tk
  // and Tq > Tk, and one query row.
  for (Case c : {Case{2, 70, 75, 16, 8, true}, Case{2, 70, 75, 16, 8, false},
                 Case{1, 130, 100, 8, 8, true}, Case{3, 1, 5, 4, 6, true},
                 Case{1, 129, 129, 8, 4, false}}) {
    SCOPED_TRACE("tq " + std::to_string(c.tq) + " tk " +
                 std::to_string(c.tk) + (c.causal ? " causal" : ""));
    auto q = pseudoRandom(c.batch * c.tq * c.d, 1);
    auto k = pseudoRandom(c.batch * c.tk * c.d, 2);
    auto v = pseudoRandom(c.batch * c.tk * c.dv, 3);
    auto g = pseudoRandom(c.batch * c.tq * c.dv, 4);
    Shape qs{c.batch, c.tq, c.d}, ks{c.batch, c.tk, c.d},
        vs{c.batch, c.tk, c.dv}, gs{c.batch, c.tq, c.dv};
    double sc = 0.3;
    AttentionGrads got =
        attentionGrad(make(DType::F32, qs, q), make(DType::F32, ks, k),
                      make(DType::F32, vs, v), make(DType::F32, gs, g),
                      c.causal, sc);
    std::vector<double> dq, dk, dv;
    referenceGrads(q, k, v, g, c.batch, c.tq, c.tk, c.d, c.dv, c.causal, sc,
                   dq, dk, dv);
    // f64 products rounded once to f32: within 1e-6 of the largest one.
    auto near = [](const HostTensor &t, const std::vector<double> &want) {
      double scale = 0.0, worst = 0.0;
      for (double w : want)
        scale = std::max(scale, std::abs(w));
      std::vector<double> got = values(t);
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LE(worst, 1e-6 * scale) << "largest |gradient| " << scale;
    };
    near(got.dq, dq);
    near(got.dk, dk);
    near(got.dv, dv);
    // The same bits on a second run.
    AttentionGrads again =
        attentionGrad(make(DType::F32, qs, q), make(DType::F32, ks, k),
                      make(DType::F32, vs, v), make(DType::F32, gs, g),
                      c.causal, sc);
    EXPECT_TRUE(again.dq.bitwiseEqual(got.dq));
    EXPECT_TRUE(again.dk.bitwiseEqual(got.dk));
    EXPECT_TRUE(again.dv.bitwiseEqual(got.dv));
  }
}

// A valid length L: the first L query rows and keys of a padded input give
// the bits of the op on inputs cut to L rows (the same tiles, the same
// products), rows past L are 0 whatever the padding holds, and L is clamped
// to [0, T].
TEST(AttentionValid, EqualsTheOpOnTheCutInputs) {
  const int64_t batch = 2, t = 70, d = 8, dv = 4;
  auto q = pseudoRandom(batch * t * d, 11), k = pseudoRandom(batch * t * d, 12);
  auto v = pseudoRandom(batch * t * dv, 13),
       g = pseudoRandom(batch * t * dv, 14);
  // Rows 0..n-1 of each batch entry of a [batch, t, w] tensor.
  auto cut = [&](const std::vector<double> &x, int64_t w, int64_t n) {
    std::vector<double> out;
    for (int64_t b = 0; b < batch; ++b)
      out.insert(out.end(), x.begin() + b * t * w, x.begin() + (b * t + n) * w);
    return make(DType::F32, {batch, n, w}, out);
  };
  // `got` ([batch, t, w]) holds `want` ([batch, n, w]) then zeros.
  auto expectPadded = [&](const HostTensor &got, const HostTensor &want,
                          int64_t w, int64_t n) {
    std::vector<double> gv = values(got), wv = values(want);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < t; ++i)
        for (int64_t c = 0; c < w; ++c) {
          double x = gv[(b * t + i) * w + c];
          if (i < n)
            ASSERT_EQ(x, wv[(b * n + i) * w + c]) << "row " << i;
          else
            ASSERT_EQ(x, 0.0) << "padded row " << i;
        }
  };
  HostTensor fq = make(DType::F32, {batch, t, d}, q),
             fk = make(DType::F32, {batch, t, d}, k),
             fv = make(DType::F32, {batch, t, dv}, v),
             fg = make(DType::F32, {batch, t, dv}, g);
  for (bool causal : {true, false})
    for (int64_t l : {int64_t(-3), int64_t(0), int64_t(1), int64_t(37),
                      int64_t(64), int64_t(65), int64_t(70), int64_t(100)}) {
      SCOPED_TRACE("L " + std::to_string(l) + (causal ? " causal" : ""));
      int64_t n = std::clamp<int64_t>(l, 0, t);
      HostTensor y = attention(fq, fk, fv, causal, 0.4, l);
      AttentionGrads gr = attentionGrad(fq, fk, fv, fg, causal, 0.4, l);
      if (n == 0) {
        expectPadded(y, HostTensor(DType::F32, {batch, 0, dv}), dv, 0);
        expectPadded(gr.dq, HostTensor(DType::F32, {batch, 0, d}), d, 0);
        expectPadded(gr.dk, HostTensor(DType::F32, {batch, 0, d}), d, 0);
        expectPadded(gr.dv, HostTensor(DType::F32, {batch, 0, dv}), dv, 0);
        continue;
      }
      HostTensor cq = cut(q, d, n), ck = cut(k, d, n), cv = cut(v, dv, n),
                 cg = cut(g, dv, n);
      expectPadded(y, attention(cq, ck, cv, causal, 0.4), dv, n);
      AttentionGrads want = attentionGrad(cq, ck, cv, cg, causal, 0.4);
      expectPadded(gr.dq, want.dq, d, n);
      expectPadded(gr.dk, want.dk, d, n);
      expectPadded(gr.dv, want.dv, dv, n);
    }
  // The optional operands as the interpreter and the CPU backend pass them,
  // told apart by their count.
  EXPECT_EQ(attentionOperands("attention", {fq, fk, fv}, 3).valid,
            std::nullopt);
  EXPECT_EQ(
      attentionOperands("attention", {fq, fk, fv, make(DType::I64, {}, {5})}, 3)
          .valid,
      std::optional<int64_t>(5));
  std::vector<HostTensor> all = {fq, fk, fv, fg, make(DType::I64, {}, {7}),
                                 fg, fq};
  AttentionOperands both = attentionOperands("attention_grad", all, 4);
  EXPECT_EQ(both.valid, std::optional<int64_t>(7));
  EXPECT_EQ(both.out, &all[5]);
  EXPECT_EQ(both.lse, &all[6]);
  std::vector<HostTensor> savedOnly = {fq, fk, fv, fg, fg, fq};
  AttentionOperands saved = attentionOperands("attention_grad", savedOnly, 4);
  EXPECT_EQ(saved.valid, std::nullopt);
  EXPECT_TRUE(saved.out && saved.lse);
  EXPECT_ERROR(attentionOperands("attention_grad",
                                 {fq, fk, fv, fg, make(DType::I32, {}, {5})},
                                 4),
               {"step.attention_grad",
                "expected the valid length as i64 [], found i32 []"});
  EXPECT_ERROR(attentionOperands("attention", {fq, fk, fv, fg, fg}, 3),
               {"step.attention", "expected 3 operands", "found 5"});
}

// attention's log-sum-exp (step.attention_lse) against a float64 one
// written here, and the gradient from the saved result and log-sum-exp
// (FlashAttention-2's rowsum(g * out) for rowsum(P * dP)) against the one
// that recomputes them: equal up to the rounding of out to f32 (1e-6 of
// the largest gradient), across tiles, causal and not, with valid lengths.
TEST(AttentionLse, SavedStatisticsGiveTheSameGradients) {
  const int64_t batch = 2, t = 70, d = 8, dv = 4;
  auto q = pseudoRandom(batch * t * d, 21), k = pseudoRandom(batch * t * d, 22);
  auto v = pseudoRandom(batch * t * dv, 23),
       g = pseudoRandom(batch * t * dv, 24);
  HostTensor fq = make(DType::F32, {batch, t, d}, q),
             fk = make(DType::F32, {batch, t, d}, k),
             fv = make(DType::F32, {batch, t, dv}, v),
             fg = make(DType::F32, {batch, t, dv}, g);
  for (bool causal : {true, false})
    for (std::optional<int64_t> l :
         {std::optional<int64_t>(), std::optional<int64_t>(37),
          std::optional<int64_t>(0)}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "full") + " L " +
                   (l ? std::to_string(*l) : "none"));
      HostTensor lse;
      HostTensor y = attention(fq, fk, fv, causal, 0.4, l, &lse);
      ASSERT_EQ(lse.shape(), (Shape{batch, t}));
      EXPECT_TRUE(y.bitwiseEqual(attention(fq, fk, fv, causal, 0.4, l)));
      std::vector<double> got = values(lse);
      int64_t n = l ? std::clamp<int64_t>(*l, 0, t) : t;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < t; ++i) {
          double want = 0.0; // padded rows
          if (i < n) {
            int64_t seen = causal ? std::min(i + 1, n) : n;
            double mx = -INFINITY, sum = 0.0;
            std::vector<double> s(seen);
            for (int64_t j = 0; j < seen; ++j) {
              for (int64_t c = 0; c < d; ++c)
                s[j] += q[(b * t + i) * d + c] * k[(b * t + j) * d + c];
              s[j] *= 0.4;
              mx = std::max(mx, s[j]);
            }
            for (double x : s)
              sum += std::exp(x - mx);
            want = mx + std::log(sum);
          }
          ASSERT_NEAR(got[b * t + i], want,
                      1e-6 * std::max(1.0, std::abs(want)))
              << "row " << i;
        }
      AttentionGrads plain = attentionGrad(fq, fk, fv, fg, causal, 0.4, l);
      AttentionGrads fast =
          attentionGrad(fq, fk, fv, fg, causal, 0.4, l, &y, &lse);
      auto near = [](const HostTensor &a, const HostTensor &b) {
        std::vector<double> x = values(a), w = values(b);
        double scale = 0.0, worst = 0.0;
        for (size_t i = 0; i < w.size(); ++i) {
          scale = std::max(scale, std::abs(w[i]));
          worst = std::max(worst, std::abs(x[i] - w[i]));
        }
        EXPECT_LE(worst, 1e-6 * std::max(scale, 1e-30));
      };
      near(fast.dq, plain.dq);
      near(fast.dk, plain.dk);
      near(fast.dv, plain.dv);
    }
  HostTensor lse;
  HostTensor y = attention(fq, fk, fv, true, 0.4, std::nullopt, &lse);
  EXPECT_ERROR(attentionGrad(fq, fk, fv, fg, true, 0.4, std::nullopt, &y, &y),
               {"step.attention_grad", "saved out and lse must be f32 "
                                       "[2, 70, 4] and f32 [2, 70]"});
}

TEST(AttentionGrad, Errors) {
  HostTensor q(DType::F32, {1, 2, 4}), k(DType::F32, {1, 3, 4}),
      v(DType::F32, {1, 3, 5});
  EXPECT_ERROR(attentionGrad(q, k, v, HostTensor(DType::F32, {1, 2, 4}),
                             false, std::nullopt),
               {"step.attention_grad", "grad must be f32 [1, 2, 5]",
                "found f32 [1, 2, 4]"});
  EXPECT_ERROR(attentionGrad(q, k, v, HostTensor(DType::BF16, {1, 2, 5}),
                             true, std::nullopt),
               {"step.attention_grad", "found bf16 [1, 2, 5]"});
  EXPECT_ERROR(attentionGrad(q, HostTensor(DType::F32, {1, 3, 5}), v,
                             HostTensor(DType::F32, {1, 2, 5}), false,
                             std::nullopt),
               {"step.attention_grad", "k f32 [1, 3, 5]"});
}

} // namespace
