//===- Train.cpp - Fused gradient and optimizer-update kernels ------------===//
//
// embedding_grad, cross_entropy_grad, check_finite, sgd_update, adamw_update
// and lamb_update. The two gradients accumulate in double and round once, like
// the other reductions. The optimizer updates are per-element f32 formulas
// written in the operation order of PyTorch's single-tensor optimizers
// (torch/optim/{sgd,adamw}.py), with every Python-float coefficient
// (1 - beta1, lr / bias_correction1, ...) computed in double and rounded to
// f32 once, as PyTorch does when it multiplies an f32 tensor by a Python
// float; so an f32 update agrees with torch.optim to within the rounding of
// a fused multiply-add that PyTorch's vectorized CPU kernels may use.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

namespace step::rt::cpu {

using namespace detail;

namespace {
std::atomic<int> configuredThreads{0};

/// The elementwise updates split a tensor at kMinPerThread elements or
/// more a thread; elementwise bodies give the same bits however n is split.
template <typename Body> void forRanges(int64_t n, const Body &body) {
  constexpr int64_t kMinPerThread = int64_t(1) << 18;
  detail::forRanges(n, kMinPerThread, updateThreads(), body);
}
} // namespace

void setUpdateThreads(int threads) { configuredThreads = std::max(0, threads); }

int updateThreads() {
  int t = configuredThreads;
  if (t > 0)
    return t;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

//===----------------------------------------------------------------------===//
// step.embedding_grad
//===----------------------------------------------------------------------===//

HostTensor embeddingGrad(const HostTensor &indices, const HostTensor &grad,
                         int64_t numEmbeddings) {
  const char *op = "embedding_grad";
  requireIndex(op, indices, "indices");
  requireFloat(op, grad, "grad");
  bool shapeOk = grad.rank() == indices.rank() + 1;
  for (int64_t i = 0; shapeOk && i < indices.rank(); ++i)
    shapeOk = grad.shape()[i] == indices.shape()[i];
  if (!shapeOk)
    fail(op, "grad must have the shape of indices plus a trailing D; "
             "indices " +
                 typeStr(indices) + ", grad " + typeStr(grad));
  if (numEmbeddings < 1)
    fail(op,
         "num_embeddings must be >= 1, found " + std::to_string(numEmbeddings));
  int64_t v = numEmbeddings, d = grad.shape().back();
  // One double accumulator row per distinct index, in order of first use:
  // memory grows with the rows touched, not with V (a vocabulary can be
  // large while a batch touches few rows).
  std::vector<int64_t> slotOf(static_cast<size_t>(v), -1), rowOfSlot;
  std::vector<double> acc;
  FloatIn g(grad);
  for (int64_t i = 0, n = indices.numel(); i < n; ++i) {
    int64_t idx = loadIndex(indices, i);
    if (idx < 0 || idx >= v)
      fail(op, "index " + std::to_string(idx) + " at position " +
                   std::to_string(i) + " is out of range [0, " +
                   std::to_string(v) + ") for grad " + typeStr(grad));
    int64_t &slot = slotOf[idx];
    if (slot < 0) {
      slot = static_cast<int64_t>(rowOfSlot.size());
      rowOfSlot.push_back(idx);
      acc.resize(acc.size() + static_cast<size_t>(d), 0.0);
    }
    double *dst = acc.data() + slot * d;
    const float *src = g.data() + i * d;
    for (int64_t j = 0; j < d; ++j)
      dst[j] += src[j];
  }
  HostTensor y(grad.dtype(), {v, d});
  for (size_t s = 0; s < rowOfSlot.size(); ++s)
    for (int64_t j = 0; j < d; ++j)
      storeD(y.dtype(), y.raw(), rowOfSlot[s] * d + j, acc[s * d + j]);
  return y;
}

//===----------------------------------------------------------------------===//
// step.cross_entropy_grad
//===----------------------------------------------------------------------===//

HostTensor crossEntropyGrad(const HostTensor &logits, const HostTensor &targets,
                            const HostTensor &grad, Reduction reduction,
                            int64_t ignoreIndex) {
  const char *op = "cross_entropy_grad";
  int64_t counted =
      detail::checkCrossEntropyTargets(op, logits, targets, ignoreIndex);
  int64_t n = logits.shape()[0], c = logits.shape()[1];
  bool none = reduction == Reduction::None;
  Shape gradShape = none ? Shape{n} : Shape{};
  if (grad.dtype() != logits.dtype() || grad.shape() != gradShape)
    fail(op, std::string("grad must be ") + (none ? "[N]" : "a scalar") +
                 " of the logits' dtype, found grad " + typeStr(grad) +
                 " for logits " + typeStr(logits));
  HostTensor y(logits.dtype(), logits.shape());
  FloatIn in(logits), gin(grad);
  std::vector<double> e(static_cast<size_t>(c));
  for (int64_t row = 0; row < n; ++row) {
    int64_t t = loadIndex(targets, row);
    if (t == ignoreIndex)
      continue; // y is zero-initialised
    double s = none ? gin[row] : gin[0];
    if (reduction == Reduction::Mean)
      s /= static_cast<double>(counted);
    const float *x = in.data() + row * c;
    double mx = -INFINITY;
    for (int64_t j = 0; j < c; ++j)
      if (std::isnan(x[j]) || x[j] > mx) {
        mx = x[j];
        if (std::isnan(mx))
          break;
      }
    double sum = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      e[j] = std::exp(x[j] - mx);
      sum += e[j];
    }
    for (int64_t j = 0; j < c; ++j) {
      double p = e[j] / sum - (j == t ? 1.0 : 0.0);
      storeD(y.dtype(), y.raw(), row * c + j, p * s);
    }
  }
  return y;
}

//===----------------------------------------------------------------------===//
// step.check_finite
//===----------------------------------------------------------------------===//

HostTensor checkFinite(const std::vector<HostTensor> &inputs) {
  const char *op = "check_finite";
  if (inputs.empty())
    fail(op, "needs at least one input");
  for (const HostTensor &t : inputs)
    requireFloat(op, t, "every input");
  // A value is NaN or +-inf iff its exponent field is all ones: tested on
  // the storage bits, so a half value is never widened or rounded.
  bool finite = true;
  for (const HostTensor &t : inputs) {
    int64_t n = t.numel();
    if (t.dtype() == DType::F32) {
      const float *x = t.data<float>();
      for (int64_t i = 0; finite && i < n; ++i)
        finite = std::isfinite(x[i]);
      continue;
    }
    const uint16_t exponent = t.dtype() == DType::F16 ? 0x7c00 : 0x7f80;
    const uint16_t *x = t.data<uint16_t>();
    for (int64_t i = 0; finite && i < n; ++i)
      finite = (x[i] & exponent) != exponent;
  }
  HostTensor y(DType::I1, {});
  y.data<uint8_t>()[0] = finite ? 1 : 0;
  return y;
}

//===----------------------------------------------------------------------===//
// Optimizer updates: shared checks
//===----------------------------------------------------------------------===//

namespace {
/// Checks param (float) and that each named tensor has its dtype and shape.
void checkParamLike(
    const char *op, const HostTensor &param,
    std::initializer_list<std::pair<const char *, const HostTensor *>> others) {
  requireFloat(op, param, "param");
  for (auto [what, t] : others)
    if (t->dtype() != param.dtype() || t->shape() != param.shape())
      fail(op, std::string(what) + " " + typeStr(*t) +
                   " must have the dtype and shape of param " + typeStr(param));
}

/// The 1-based update number held by a rank-0 i64 tensor.
int64_t stepValue(const char *op, const HostTensor &step) {
  if (step.dtype() != DType::I64 || step.rank() != 0)
    fail(op, "step must be a rank-0 i64 tensor, found " + typeStr(step));
  int64_t s = step.data<int64_t>()[0];
  if (s < 1)
    fail(op, "step must be >= 1 (the 1-based update number), found " +
                 std::to_string(s));
  return s;
}

float lrValue(const char *op, const HostTensor &lr) {
  if (lr.dtype() != DType::F32 || lr.rank() != 0)
    fail(op, "lr must be a rank-0 f32 tensor, found " + typeStr(lr));
  return lr.data<float>()[0];
}

void checkAdamHyper(const char *op, const AdamHyper &h) {
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1))
    fail(op, "betas (" + std::to_string(h.beta1) + ", " +
                 std::to_string(h.beta2) + ") must be in [0, 1)");
  if (!(h.eps > 0))
    fail(op, "eps must be > 0, found " + std::to_string(h.eps));
  if (!(h.weightDecay >= 0))
    fail(op,
         "weight_decay must be >= 0, found " + std::to_string(h.weightDecay));
}

/// The moment updates shared by AdamW and LAMB, in torch's order:
/// exp_avg.mul_(beta1).add_(grad, alpha=1-beta1) and
/// exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2).
struct Moments {
  float b1, omb1, b2, omb2;
  explicit Moments(const AdamHyper &h)
      : b1(static_cast<float>(h.beta1)),
        omb1(static_cast<float>(1.0 - h.beta1)),
        b2(static_cast<float>(h.beta2)),
        omb2(static_cast<float>(1.0 - h.beta2)) {}
  float avg(float m, float g) const { return m * b1 + omb1 * g; }
  float avgSq(float v, float g) const { return v * b2 + omb2 * g * g; }
};

/// What adamw_update and lamb_update share: operand checks, the step and
/// lr scalars, zeroed results and the moment rule.
struct AdamStep {
  double t, lr;
  AdamResult r;
  Moments mo;
  AdamStep(const char *op, const HostTensor &param, const HostTensor &grad,
           const HostTensor &expAvg, const HostTensor &expAvgSq,
           const HostTensor &step, const HostTensor &lrTensor,
           const AdamHyper &hyper)
      : t(0), lr(0), mo(hyper) {
    checkParamLike(
        op, param,
        {{"grad", &grad}, {"exp_avg", &expAvg}, {"exp_avg_sq", &expAvgSq}});
    t = static_cast<double>(stepValue(op, step));
    lr = lrValue(op, lrTensor);
    checkAdamHyper(op, hyper);
    DType dt = param.dtype();
    r = AdamResult{HostTensor(dt, param.shape()), HostTensor(dt, param.shape()),
                   HostTensor(dt, param.shape())};
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// step.sgd_update
//===----------------------------------------------------------------------===//

SgdResult sgdUpdate(const HostTensor &param, const HostTensor &grad,
                    const HostTensor &step, const HostTensor &lr,
                    const HostTensor *momentumBuffer, const SgdHyper &hyper) {
  const char *op = "sgd_update";
  checkParamLike(op, param, {{"grad", &grad}});
  if (momentumBuffer)
    checkParamLike(op, param, {{"momentum_buffer", momentumBuffer}});
  int64_t t = stepValue(op, step);
  float lrF = lrValue(op, lr);
  if (!(hyper.momentum >= 0) || !(hyper.weightDecay >= 0))
    fail(op, "momentum and weight_decay must be >= 0, found " +
                 std::to_string(hyper.momentum) + " and " +
                 std::to_string(hyper.weightDecay));
  bool useMomentum = hyper.momentum != 0;
  if (useMomentum != (momentumBuffer != nullptr))
    fail(op, "momentum = " + std::to_string(hyper.momentum) +
                 (momentumBuffer ? " with" : " without") +
                 " a momentum buffer; the buffer is needed iff momentum != 0");
  if (hyper.nesterov && (hyper.momentum <= 0 || hyper.dampening != 0))
    fail(op, "nesterov needs momentum > 0 and dampening = 0");

  DType dt = param.dtype();
  SgdResult r{HostTensor(dt, param.shape()), std::nullopt};
  if (useMomentum)
    r.momentumBuffer = HostTensor(dt, param.shape());
  FloatIn p(param), g(grad);
  const float wd = static_cast<float>(hyper.weightDecay);
  const float mom = static_cast<float>(hyper.momentum);
  const float keep = static_cast<float>(1.0 - hyper.dampening);
  const float negLr = -lrF;
  forRanges(param.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // d_p = grad.add(param, alpha=weight_decay), only when it is non-zero
      // (0 * inf would otherwise turn an infinite param's gradient into
      // NaN).
      float d = g[i];
      if (hyper.weightDecay != 0)
        d = d + wd * p[i];
      if (useMomentum) {
        // Step 1: PyTorch creates the buffer as a copy of d_p.
        float buf = t == 1 ? d
                           : loadF(dt, momentumBuffer->raw(), i) * mom +
                                 keep * d;
        storeF(dt, r.momentumBuffer->raw(), i, buf);
        d = hyper.nesterov ? d + mom * buf : buf;
      }
      storeF(dt, r.param.raw(), i, p[i] + negLr * d);
    }
  });
  return r;
}

//===----------------------------------------------------------------------===//
// step.adamw_update
//===----------------------------------------------------------------------===//

AdamResult adamwUpdate(const HostTensor &param, const HostTensor &grad,
                       const HostTensor &expAvg, const HostTensor &expAvgSq,
                       const HostTensor &step, const HostTensor &lr,
                       const AdamHyper &hyper) {
  AdamStep a("adamw_update", param, grad, expAvg, expAvgSq, step, lr, hyper);
  DType dt = param.dtype();
  AdamResult &r = a.r;
  const Moments &mo = a.mo;
  const double t = a.t, lrD = a.lr;
  const float decay = static_cast<float>(1.0 - lrD * hyper.weightDecay);
  const double bc1 = 1.0 - std::pow(hyper.beta1, t);
  const double bc2 = 1.0 - std::pow(hyper.beta2, t);
  // param.addcdiv_(exp_avg, denom, value=-step_size): value * m / denom.
  const float negStepSize = static_cast<float>(-(lrD / bc1));
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const float eps = static_cast<float>(hyper.eps);
  FloatIn p(param), g(grad), m(expAvg), v(expAvgSq);
  forRanges(param.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float pi = p[i] * decay;
      float mi = mo.avg(m[i], g[i]);
      float vi = mo.avgSq(v[i], g[i]);
      float denom = std::sqrt(vi) / bc2Sqrt + eps;
      pi = pi + negStepSize * mi / denom;
      storeF(dt, r.param.raw(), i, pi);
      storeF(dt, r.expAvg.raw(), i, mi);
      storeF(dt, r.expAvgSq.raw(), i, vi);
    }
  });
  return std::move(a.r);
}

//===----------------------------------------------------------------------===//
// step.lamb_update
//===----------------------------------------------------------------------===//

AdamResult lambUpdate(const HostTensor &param, const HostTensor &grad,
                      const HostTensor &expAvg, const HostTensor &expAvgSq,
                      const HostTensor &step, const HostTensor &lr,
                      const AdamHyper &hyper) {
  AdamStep a("lamb_update", param, grad, expAvg, expAvgSq, step, lr, hyper);
  DType dt = param.dtype();
  AdamResult &r = a.r;
  const Moments &mo = a.mo;
  const double t = a.t, lrD = a.lr;
  const float bc1 = static_cast<float>(1.0 - std::pow(hyper.beta1, t));
  const float bc2 = static_cast<float>(1.0 - std::pow(hyper.beta2, t));
  const float eps = static_cast<float>(hyper.eps);
  const float wd = static_cast<float>(hyper.weightDecay);
  int64_t n = param.numel();
  FloatIn p(param), g(grad), m(expAvg), v(expAvgSq);
  // The trust ratio needs |r| over the whole tensor before any param is
  // written: a first pass computes r (kept in f32) and both norms.
  std::vector<float> upd(static_cast<size_t>(n));
  double pNormSq = 0.0, rNormSq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float mi = mo.avg(m[i], g[i]);
    float vi = mo.avgSq(v[i], g[i]);
    storeF(dt, r.expAvg.raw(), i, mi);
    storeF(dt, r.expAvgSq.raw(), i, vi);
    upd[i] = (mi / bc1) / (std::sqrt(vi / bc2) + eps) + wd * p[i];
    pNormSq += static_cast<double>(p[i]) * p[i];
    rNormSq += static_cast<double>(upd[i]) * upd[i];
  }
  double pNorm = std::sqrt(pNormSq), rNorm = std::sqrt(rNormSq);
  // NaN norms compare false, so they give trust 1 and the NaN update
  // propagates through r itself.
  double trust = pNorm > 0 && rNorm > 0 ? pNorm / rNorm : 1.0;
  const float scale = static_cast<float>(lrD * trust);
  for (int64_t i = 0; i < n; ++i)
    storeF(dt, r.param.raw(), i, p[i] - scale * upd[i]);
  return std::move(a.r);
}

} // namespace step::rt::cpu
