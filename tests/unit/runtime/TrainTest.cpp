//===- TrainTest.cpp - gradient and optimizer-update kernel tests ---------===//
//
// Expected values come from the definitions, evaluated in double in the
// test: the embedding gradient is a per-row sum, the cross-entropy gradient
// is softmax - onehot (softmax([1, 2, 3]) = e^i / (e + e^2 + e^3)), and the
// optimizer steps are the textbook formulas of torch.optim.SGD / AdamW and
// of LAMB written out again here. Kernels compute in f32 and round once, so
// f32 results match within relTol (1e-6 relative, a few f32 ulps) and
// f16/bf16 within half an ulp of their type.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

HostTensor stepT(int64_t s) { return make(DType::I64, {}, {double(s)}); }
HostTensor lrT(double lr) { return make(DType::F32, {}, {lr}); }

//===----------------------------------------------------------------------===//
// embeddingGrad
//===----------------------------------------------------------------------===//

TEST(EmbeddingGrad, EveryFloatDTypeAndIndexType) {
  for (DType t : kFloatTypes)
    for (DType it : kIntTypes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + dtypeName(it));
      // Positions (0,0) and (1,0) both hit row 1; row 2 is never hit.
      HostTensor idx = make(it, {2, 2}, {1, 3, 1, 0});
      HostTensor g = make(t, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
      expectValues(embeddingGrad(idx, g, 4), t, {4, 2},
                   {7, 8, 1 + 5, 2 + 6, 0, 0, 3, 4});
    }
}

TEST(EmbeddingGrad, ScalarAndEmptyIndices) {
  // A rank-0 index selects one row; grad is [D].
  expectValues(embeddingGrad(make(DType::I64, {}, {2}),
                             make(DType::F32, {3}, {1, -2, 3}), 3),
               DType::F32, {3, 3}, {0, 0, 0, 0, 0, 0, 1, -2, 3});
  // No indices: an all-zero table; D = 0 gives an empty table.
  expectValues(embeddingGrad(HostTensor(DType::I32, {0}),
                             HostTensor(DType::BF16, {0, 2}), 2),
               DType::BF16, {2, 2}, {0, 0, 0, 0});
  EXPECT_EQ(embeddingGrad(make(DType::I32, {2}, {0, 1}),
                          HostTensor(DType::F32, {2, 0}), 5)
                .shape(),
            (Shape{5, 0}));
}

TEST(EmbeddingGrad, HalfTypesAccumulateWideAndRoundOnce) {
  // 256 + 1 + 1: rounding to bf16 after each addition would stay at 256
  // (257 is a tie, broken to even); one rounding of the exact sum gives 258.
  HostTensor idx = make(DType::I64, {3}, {0, 0, 0});
  expectExact(embeddingGrad(idx, make(DType::BF16, {3, 1}, {256, 1, 1}), 1),
              DType::BF16, {1, 1}, {258});
  // Same for f16 at 2048 (spacing 2).
  expectExact(embeddingGrad(idx, make(DType::F16, {3, 1}, {2048, 1, 1}), 1),
              DType::F16, {1, 1}, {2050});
}

TEST(EmbeddingGrad, Errors) {
  HostTensor g(DType::F32, {2, 4});
  EXPECT_ERROR(embeddingGrad(make(DType::I64, {2}, {0, 5}), g, 5),
               {"step.embedding_grad", "index 5", "position 1", "[0, 5)"});
  EXPECT_ERROR(embeddingGrad(make(DType::I32, {2}, {-1, 0}), g, 5),
               {"step.embedding_grad", "index -1", "position 0"});
  EXPECT_ERROR(embeddingGrad(HostTensor(DType::I32, {3}), g, 5),
               {"step.embedding_grad", "i32 [3]", "f32 [2, 4]"});
  EXPECT_ERROR(embeddingGrad(HostTensor(DType::I32, {2, 4}), g, 5),
               {"step.embedding_grad", "trailing D"});
  EXPECT_ERROR(embeddingGrad(HostTensor(DType::I32, {2}), g, 0),
               {"step.embedding_grad", "num_embeddings must be >= 1"});
  EXPECT_ERROR(embeddingGrad(HostTensor(DType::F32, {2}), g, 3),
               {"step.embedding_grad", "indices must be i32 or i64"});
  EXPECT_ERROR(embeddingGrad(HostTensor(DType::I64, {2}),
                             HostTensor(DType::I32, {2, 4}), 3),
               {"step.embedding_grad", "grad must be f32, f16 or bf16"});
}

//===----------------------------------------------------------------------===//
// crossEntropyGrad
//===----------------------------------------------------------------------===//

/// Row 0: softmax([1, 2, 3]) - e_2; row 1: softmax([0, 0, 0]) - e_0; each
/// scaled by s0, s1.
std::vector<double> ceGradRows(double s0, double s1) {
  return {kSm[0] * s0,        kSm[1] * s0,  (kSm[2] - 1) * s0,
          (1.0 / 3 - 1) * s1, 1.0 / 3 * s1, 1.0 / 3 * s1};
}

TEST(CrossEntropyGrad, ReductionsEveryDType) {
  for (DType t : kFloatTypes)
    for (DType it : kIntTypes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + dtypeName(it));
      HostTensor logits = make(t, {2, 3}, {1, 2, 3, 0, 0, 0});
      HostTensor tg = make(it, {2}, {2, 0});
      // An absolute slack of half an ulp at 1 covers the f16/bf16 rounding
      // of the cancelling entries (p - 1).
      double slack = relTol(t);
      expectValues(
          crossEntropyGrad(logits, tg, make(t, {}, {2}), Reduction::Sum, -100),
          t, {2, 3}, ceGradRows(2, 2), slack);
      expectValues(
          crossEntropyGrad(logits, tg, make(t, {}, {1}), Reduction::Mean, -100),
          t, {2, 3}, ceGradRows(0.5, 0.5), slack);
      expectValues(crossEntropyGrad(logits, tg, make(t, {2}, {1, -3}),
                                    Reduction::None, -100),
                   t, {2, 3}, ceGradRows(1, -3), slack);
    }
}

TEST(CrossEntropyGrad, IgnoredRows) {
  HostTensor logits = make(DType::F32, {2, 3}, {1, 2, 3, 0, 0, 0});
  HostTensor one = make(DType::F32, {}, {1});
  // Row 1 is ignored: zero, and left out of the mean's count.
  std::vector<double> row0Only = ceGradRows(1, 0);
  expectValues(crossEntropyGrad(logits, make(DType::I64, {2}, {2, -100}), one,
                                Reduction::Mean, -100),
               DType::F32, {2, 3}, row0Only);
  // ignore_index may be a valid class.
  expectValues(crossEntropyGrad(logits, make(DType::I32, {2}, {2, 0}), one,
                                Reduction::Sum, 0),
               DType::F32, {2, 3}, row0Only);
  // An ignored row stays exactly 0 even when its `none` grad is NaN.
  expectValues(crossEntropyGrad(logits, make(DType::I64, {2}, {2, 7}),
                                make(DType::F32, {2}, {1, NAN}),
                                Reduction::None, 7),
               DType::F32, {2, 3}, row0Only);
  // Every row ignored: the gradient is zero (PyTorch's autograd gives zeros
  // although the mean loss itself is 0/0 = NaN).
  expectExact(crossEntropyGrad(logits, make(DType::I32, {2}, {-100, -100}), one,
                               Reduction::Mean, -100),
              DType::F32, {2, 3}, {0, 0, 0, 0, 0, 0});
  // Shifted logits give the same gradient; exp(1003) would overflow.
  expectValues(crossEntropyGrad(make(DType::F32, {1, 3}, {1001, 1002, 1003}),
                                make(DType::I64, {1}, {2}), one, Reduction::Sum,
                                -100),
               DType::F32, {1, 3}, {kSm[0], kSm[1], kSm[2] - 1}, 1e-7);
  EXPECT_EQ(crossEntropyGrad(HostTensor(DType::F32, {0, 4}),
                             HostTensor(DType::I64, {0}), one, Reduction::Sum,
                             -100)
                .shape(),
            (Shape{0, 4}));
}

TEST(CrossEntropyGrad, MatchesFiniteDifferencesOfTheLoss) {
  // Central differences of crossEntropy in f32 with h = 1e-2: truncation
  // error ~h^2 = 1e-4 and rounding error ~1e-7 / h = 1e-5, so 1e-3 absolute
  // separates a correct gradient from any wrong term (entries are ~0.1).
  const int64_t n = 3, c = 4;
  std::vector<double> x;
  for (int64_t i = 0; i < n * c; ++i)
    x.push_back(std::sin(1.7 * i) * 2);
  HostTensor tg = make(DType::I64, {n}, {3, -100, 1});
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    HostTensor g = crossEntropyGrad(make(DType::F32, {n, c}, x), tg,
                                    make(DType::F32, {}, {1}), r, -100);
    for (int64_t i = 0; i < n * c; ++i) {
      std::vector<double> hi = x, lo = x;
      hi[i] += 1e-2;
      lo[i] -= 1e-2;
      double fd = (crossEntropy(make(DType::F32, {n, c}, hi), tg, r, -100)
                       .getAsDouble(0) -
                   crossEntropy(make(DType::F32, {n, c}, lo), tg, r, -100)
                       .getAsDouble(0)) /
                  2e-2;
      EXPECT_NEAR(g.getAsDouble(i), fd, 1e-3) << "element " << i;
    }
  }
}

TEST(CrossEntropyGrad, Errors) {
  HostTensor logits(DType::F32, {2, 3});
  HostTensor one = make(DType::F32, {}, {1});
  EXPECT_ERROR(crossEntropyGrad(logits, make(DType::I32, {2}, {0, 3}), one,
                                Reduction::Mean, -100),
               {"step.cross_entropy_grad", "target 3", "position 1", "[0, 3)"});
  EXPECT_ERROR(
      crossEntropyGrad(logits, make(DType::I32, {2}, {-100, 0}), one,
                       Reduction::Sum, 5),
      {"step.cross_entropy_grad", "target -100", "not ignore_index (5)"});
  EXPECT_ERROR(crossEntropyGrad(logits, HostTensor(DType::I64, {3}), one,
                                Reduction::Mean, -100),
               {"step.cross_entropy_grad", "f32 [2, 3]", "i64 [3]"});
  EXPECT_ERROR(crossEntropyGrad(HostTensor(DType::F32, {3}),
                                HostTensor(DType::I64, {3}), one,
                                Reduction::Mean, -100),
               {"step.cross_entropy_grad", "logits [N, C]"});
  EXPECT_ERROR(crossEntropyGrad(logits, HostTensor(DType::I64, {2}), one,
                                Reduction::None, -100),
               {"step.cross_entropy_grad", "grad must be [N]", "f32 []"});
  EXPECT_ERROR(crossEntropyGrad(logits, HostTensor(DType::I64, {2}),
                                HostTensor(DType::F32, {2}), Reduction::Sum,
                                -100),
               {"step.cross_entropy_grad", "grad must be a scalar"});
  EXPECT_ERROR(crossEntropyGrad(logits, HostTensor(DType::I64, {2}),
                                HostTensor(DType::BF16, {}), Reduction::Mean,
                                -100),
               {"step.cross_entropy_grad", "bf16 []"});
  EXPECT_ERROR(crossEntropyGrad(logits, HostTensor(DType::F32, {2}), one,
                                Reduction::Mean, -100),
               {"step.cross_entropy_grad", "targets must be i32 or i64"});
}

//===----------------------------------------------------------------------===//
// sgdUpdate
//===----------------------------------------------------------------------===//

const std::vector<double> kP = {1.0, -2.0, 0.5, 0.0};
const std::vector<double> kG = {0.25, 0.5, -1.0, 2.0};

/// torch.optim.SGD's step for one element, in double.
struct SgdRef {
  double lr, momentum, dampening, wd;
  bool nesterov;
  /// Updates p (and buf) in place for update number t.
  void step(int64_t t, double g, double &p, double &buf) const {
    double d = g + wd * p;
    if (momentum != 0) {
      buf = t == 1 ? d : momentum * buf + (1 - dampening) * d;
      d = nesterov ? d + momentum * buf : buf;
    }
    p -= lr * d;
  }
};

TEST(SgdUpdate, PlainAndWeightDecayEveryDType) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor p = make(t, {2, 2}, kP), g = make(t, {2, 2}, kG);
    for (double wd : {0.0, 0.1}) {
      SgdHyper h;
      h.weightDecay = wd;
      SgdResult r = sgdUpdate(p, g, stepT(1), lrT(0.5), nullptr, h);
      EXPECT_FALSE(r.momentumBuffer.has_value());
      std::vector<double> want;
      for (size_t i = 0; i < kP.size(); ++i)
        want.push_back(kP[i] - 0.5 * (kG[i] + wd * kP[i]));
      expectValues(r.param, t, {2, 2}, want);
    }
  }
}

TEST(SgdUpdate, MomentumDampeningNesterovOverSteps) {
  struct Plan {
    double momentum, dampening;
    bool nesterov;
  };
  for (DType t : kFloatTypes)
    for (Plan pl :
         {Plan{0.9, 0.0, false}, Plan{0.9, 0.5, false}, Plan{0.8, 0.0, true}}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " momentum " +
                   std::to_string(pl.momentum) + " dampening " +
                   std::to_string(pl.dampening) +
                   (pl.nesterov ? " nesterov" : ""));
      SgdRef ref{0.1, pl.momentum, pl.dampening, 0.01, pl.nesterov};
      SgdHyper h{pl.momentum, pl.dampening, 0.01, pl.nesterov};
      // The buffer operand is garbage at step 1: PyTorch starts from d_p.
      HostTensor p = make(t, {4}, kP), buf = make(t, {4}, {9, 9, 9, 9});
      HostTensor g = make(t, {4}, kG);
      std::vector<double> rp = values(p), rb(4, 0.0);
      for (int64_t s = 1; s <= 3; ++s) {
        SgdResult r = sgdUpdate(p, g, stepT(s), lrT(0.1), &buf, h);
        // The reference restarts each step from the kernel's rounded state,
        // so each step is compared on its own.
        for (size_t i = 0; i < 4; ++i) {
          double gi = g.getAsDouble(i);
          rp[i] = p.getAsDouble(i);
          rb[i] = buf.getAsDouble(i);
          ref.step(s, gi, rp[i], rb[i]);
        }
        ASSERT_TRUE(r.momentumBuffer.has_value());
        expectValues(*r.momentumBuffer, t, {4}, rb, 1e-7);
        expectValues(r.param, t, {4}, rp, 1e-7);
        p = r.param;
        buf = *r.momentumBuffer;
      }
    }
}

TEST(SgdUpdate, Errors) {
  HostTensor p(DType::F32, {3}), g(DType::F32, {3}), buf(DType::F32, {3});
  SgdHyper plain, mom{0.9, 0.0, 0.0, false};
  EXPECT_ERROR(sgdUpdate(p, HostTensor(DType::F32, {4}), stepT(1), lrT(1),
                         nullptr, plain),
               {"step.sgd_update", "grad f32 [4]", "param f32 [3]"});
  EXPECT_ERROR(sgdUpdate(p, HostTensor(DType::BF16, {3}), stepT(1), lrT(1),
                         nullptr, plain),
               {"step.sgd_update", "grad bf16 [3]"});
  EXPECT_ERROR(sgdUpdate(HostTensor(DType::I32, {3}), g, stepT(1), lrT(1),
                         nullptr, plain),
               {"step.sgd_update", "param must be f32, f16 or bf16"});
  EXPECT_ERROR(sgdUpdate(p, g, stepT(0), lrT(1), nullptr, plain),
               {"step.sgd_update", "step must be >= 1", "found 0"});
  EXPECT_ERROR(
      sgdUpdate(p, g, make(DType::I32, {}, {1}), lrT(1), nullptr, plain),
      {"step.sgd_update", "step must be a rank-0 i64", "i32 []"});
  EXPECT_ERROR(
      sgdUpdate(p, g, stepT(1), make(DType::F32, {1}, {1}), nullptr, plain),
      {"step.sgd_update", "lr must be a rank-0 f32", "f32 [1]"});
  EXPECT_ERROR(sgdUpdate(p, g, stepT(1), lrT(1), nullptr, mom),
               {"step.sgd_update", "without a momentum buffer"});
  EXPECT_ERROR(sgdUpdate(p, g, stepT(1), lrT(1), &buf, plain),
               {"step.sgd_update", "with a momentum buffer"});
  EXPECT_ERROR(
      sgdUpdate(p, g, stepT(1), lrT(1), &g, SgdHyper{0.9, 0.1, 0.0, true}),
      {"step.sgd_update", "nesterov"});
  EXPECT_ERROR(sgdUpdate(p, g, stepT(1), lrT(1), nullptr,
                         SgdHyper{0.0, 0.0, -1.0, false}),
               {"step.sgd_update", ">= 0"});
  HostTensor shortBuf(DType::F32, {2});
  EXPECT_ERROR(sgdUpdate(p, g, stepT(2), lrT(1), &shortBuf, mom),
               {"step.sgd_update", "momentum_buffer f32 [2]"});
}

//===----------------------------------------------------------------------===//
// adamwUpdate
//===----------------------------------------------------------------------===//

/// torch.optim.AdamW's step for one element, in double.
void adamwRef(const AdamHyper &h, double lr, int64_t t, double g, double &p,
              double &m, double &v) {
  p *= 1 - lr * h.weightDecay;
  m = h.beta1 * m + (1 - h.beta1) * g;
  v = h.beta2 * v + (1 - h.beta2) * g * g;
  double bc1 = 1 - std::pow(h.beta1, t), bc2 = 1 - std::pow(h.beta2, t);
  p -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + h.eps);
}

TEST(AdamwUpdate, FirstStepIsSignedLr) {
  // Step 1 from zero moments: m / bc1 = g and sqrt(v / bc2) = |g|, so the
  // update is lr * g / (|g| + eps) ~ lr * sign(g), after the decay.
  HostTensor p = make(DType::F32, {4}, kP), g = make(DType::F32, {4}, kG);
  HostTensor z(DType::F32, {4});
  AdamResult r = adamwUpdate(p, g, z, z, stepT(1), lrT(0.01), AdamHyper{});
  std::vector<double> want, m, v;
  for (size_t i = 0; i < 4; ++i) {
    want.push_back(kP[i] * (1 - 0.01 * 0.01) -
                   0.01 * kG[i] / (std::fabs(kG[i]) + 1e-8));
    m.push_back(0.1 * kG[i]);
    v.push_back(0.001 * kG[i] * kG[i]);
  }
  expectValues(r.param, DType::F32, {4}, want);
  expectValues(r.expAvg, DType::F32, {4}, m);
  expectValues(r.expAvgSq, DType::F32, {4}, v);
}

TEST(AdamwUpdate, StepsEveryDType) {
  AdamHyper h{0.8, 0.95, 1e-3, 0.1};
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor p = make(t, {2, 2}, kP), g = make(t, {2, 2}, kG);
    HostTensor m = make(t, {2, 2}, {0.1, -0.2, 0.0, 0.3});
    HostTensor v = make(t, {2, 2}, {0.01, 0.02, 0.0, 0.5});
    for (int64_t s = 1; s <= 4; ++s) {
      AdamResult r = adamwUpdate(p, g, m, v, stepT(s), lrT(0.05), h);
      std::vector<double> rp = values(p), rm = values(m), rv = values(v);
      for (size_t i = 0; i < 4; ++i)
        adamwRef(h, 0.05, s, g.getAsDouble(i), rp[i], rm[i], rv[i]);
      expectValues(r.param, t, {2, 2}, rp, 1e-7);
      expectValues(r.expAvg, t, {2, 2}, rm, 1e-7);
      expectValues(r.expAvgSq, t, {2, 2}, rv, 1e-7);
      p = r.param;
      m = r.expAvg;
      v = r.expAvgSq;
    }
    EXPECT_TRUE(adamwUpdate(p, g, m, v, stepT(9), lrT(0.05), h)
                    .param.bitwiseEqual(
                        adamwUpdate(p, g, m, v, stepT(9), lrT(0.05), h).param));
  }
}

TEST(AdamwUpdate, Errors) {
  HostTensor p(DType::F32, {3});
  EXPECT_ERROR(adamwUpdate(p, p, HostTensor(DType::F32, {2}), p, stepT(1),
                           lrT(1), AdamHyper{}),
               {"step.adamw_update", "exp_avg f32 [2]", "param f32 [3]"});
  EXPECT_ERROR(adamwUpdate(p, p, p, HostTensor(DType::F16, {3}), stepT(1),
                           lrT(1), AdamHyper{}),
               {"step.adamw_update", "exp_avg_sq f16 [3]"});
  EXPECT_ERROR(adamwUpdate(p, p, p, p, stepT(-1), lrT(1), AdamHyper{}),
               {"step.adamw_update", "step must be >= 1", "-1"});
  EXPECT_ERROR(adamwUpdate(p, p, p, p, stepT(1), lrT(1),
                           AdamHyper{1.0, 0.999, 1e-8, 0.0}),
               {"step.adamw_update", "betas", "[0, 1)"});
  EXPECT_ERROR(adamwUpdate(p, p, p, p, stepT(1), lrT(1),
                           AdamHyper{0.9, 0.999, 0.0, 0.0}),
               {"step.adamw_update", "eps must be > 0"});
  EXPECT_ERROR(adamwUpdate(p, p, p, p, stepT(1), make(DType::BF16, {}, {1}),
                           AdamHyper{}),
               {"step.adamw_update", "lr must be a rank-0 f32", "bf16 []"});
}

//===----------------------------------------------------------------------===//
// lambUpdate
//===----------------------------------------------------------------------===//

// The updates split a large tensor over threads in contiguous ranges: the
// same bits for 1, 2, 3 and 4 threads, for f32 and bf16, and a tensor just
// past the threshold with a remainder in the last range.
TEST(UpdateThreads, EveryCountGivesTheSameBits) {
  const int64_t n = 3 * (int64_t(1) << 18) + 5;
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dt));
    auto filled = [&](double scale, int phase) {
      HostTensor t(dt, {n});
      for (int64_t i = 0; i < n; ++i)
        t.setFromDouble(i, scale * static_cast<double>((i * 7 + phase) % 23) -
                               scale * 11);
      return t;
    };
    HostTensor p = filled(0.01, 0), g = filled(0.003, 5), m = filled(0.001, 9);
    HostTensor v = filled(0.0001, 3), buf = filled(0.002, 7);
    for (int64_t i = 0; i < n; ++i) // second moments are squares
      v.setFromDouble(i, std::abs(v.getAsDouble(i)));
    HostTensor step = make(DType::I64, {}, {3}), lr = make(DType::F32, {}, {0.01});
    SgdHyper sgd;
    sgd.momentum = 0.9;
    sgd.nesterov = true;
    sgd.weightDecay = 0.01;
    std::vector<HostTensor> want;
    for (int threads : {1, 2, 3, 4}) {
      setUpdateThreads(threads);
      AdamResult a = adamwUpdate(p, g, m, v, step, lr, AdamHyper{});
      SgdResult s = sgdUpdate(p, g, step, lr, &buf, sgd);
      std::vector<HostTensor> got = {a.param, a.expAvg, a.expAvgSq, s.param,
                                     *s.momentumBuffer};
      if (want.empty())
        want = got;
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(got[k].bitwiseEqual(want[k]))
            << threads << " threads, result " << k;
    }
    setUpdateThreads(0);
  }
  EXPECT_GE(updateThreads(), 1);
}

TEST(LambUpdate, TrustRatioByHand) {
  // p = [3, 4] (|p| = 5), g = [1, -1], zero moments, step 1, wd 0: m/bc1 = g,
  // sqrt(v/bc2) = |g|, so r = g / (1 + eps), |r| = sqrt(2) / (1 + eps) and
  // lr * trust * r = lr * 5 / sqrt(2) * [1, -1], whatever eps is.
  AdamHyper h{0.9, 0.999, 1e-6, 0.0};
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor z(t, {2});
    AdamResult r = lambUpdate(make(t, {2}, {3, 4}), make(t, {2}, {1, -1}), z, z,
                              stepT(1), lrT(0.1), h);
    double d = 0.1 * 5 / std::sqrt(2.0);
    expectValues(r.param, t, {2}, {3 - d, 4 + d});
    expectValues(r.expAvg, t, {2}, {0.1, -0.1});
    expectValues(r.expAvgSq, t, {2}, {0.001, 0.001});
  }
}

TEST(LambUpdate, ZeroNormsGiveTrustOne) {
  AdamHyper h{0.9, 0.999, 1e-6, 0.0};
  HostTensor z(DType::F32, {2});
  // |p| = 0: trust 1, so the step is lr * r = lr * g / (|g| + eps).
  AdamResult r = lambUpdate(z, make(DType::F32, {2}, {2, -0.5}), z, z, stepT(1),
                            lrT(0.1), h);
  expectValues(r.param, DType::F32, {2},
               {-0.1 * 2 / (2 + 1e-6), 0.1 * 0.5 / (0.5 + 1e-6)});
  // |r| = 0 (no gradient, no decay): the param is unchanged.
  HostTensor p = make(DType::F32, {2}, {1, 2});
  expectExact(lambUpdate(p, z, z, z, stepT(3), lrT(0.1), h).param, DType::F32,
              {2}, {1, 2});
}

TEST(LambUpdate, GeneralStepMatchesFormula) {
  AdamHyper h{0.8, 0.9, 1e-2, 0.05};
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor p = make(t, {4}, kP), g = make(t, {4}, kG);
    HostTensor m = make(t, {4}, {0.1, -0.2, 0.0, 0.3});
    HostTensor v = make(t, {4}, {0.01, 0.02, 0.0, 0.5});
    const int64_t s = 3;
    AdamResult r = lambUpdate(p, g, m, v, stepT(s), lrT(0.02), h);
    double bc1 = 1 - std::pow(h.beta1, s), bc2 = 1 - std::pow(h.beta2, s);
    std::vector<double> rm(4), rv(4), upd(4), rp(4);
    double pn = 0, rn = 0;
    for (size_t i = 0; i < 4; ++i) {
      double pi = p.getAsDouble(i), gi = g.getAsDouble(i);
      rm[i] = h.beta1 * m.getAsDouble(i) + (1 - h.beta1) * gi;
      rv[i] = h.beta2 * v.getAsDouble(i) + (1 - h.beta2) * gi * gi;
      upd[i] =
          rm[i] / bc1 / (std::sqrt(rv[i] / bc2) + h.eps) + h.weightDecay * pi;
      pn += pi * pi;
      rn += upd[i] * upd[i];
    }
    double trust = std::sqrt(pn) / std::sqrt(rn);
    for (size_t i = 0; i < 4; ++i)
      rp[i] = p.getAsDouble(i) - 0.02 * trust * upd[i];
    expectValues(r.param, t, {4}, rp, 1e-7);
    expectValues(r.expAvg, t, {4}, rm, 1e-7);
    expectValues(r.expAvgSq, t, {4}, rv, 1e-7);
  }
}

TEST(LambUpdate, Errors) {
  HostTensor p(DType::BF16, {3});
  EXPECT_ERROR(lambUpdate(p, HostTensor(DType::F32, {3}), p, p, stepT(1),
                          lrT(1), AdamHyper{}),
               {"step.lamb_update", "grad f32 [3]", "param bf16 [3]"});
  EXPECT_ERROR(
      lambUpdate(p, p, p, p, stepT(1), lrT(1), AdamHyper{0.9, -0.1, 1e-6, 0.0}),
      {"step.lamb_update", "betas"});
  EXPECT_ERROR(lambUpdate(p, p, p, p, stepT(1), lrT(1),
                          AdamHyper{0.9, 0.999, 1e-6, -1.0}),
               {"step.lamb_update", "weight_decay must be >= 0"});
  EXPECT_ERROR(
      lambUpdate(p, p, p, p, make(DType::I64, {1}, {1}), lrT(1), AdamHyper{}),
      {"step.lamb_update", "step must be a rank-0 i64"});
}

} // namespace
