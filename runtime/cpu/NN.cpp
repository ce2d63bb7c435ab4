//===- NN.cpp - step neural-network ops -----------------------------------===//
//
// softmax, log_softmax, layer_norm, embedding, cross_entropy, dropout,
// attention and attention_grad. Everything that sums (exponentials, moments,
// scores) runs in double and is rounded once into the output dtype, so the
// reference is at least as accurate as PyTorch's float kernels and
// independent of the order a faster backend might choose. The attention
// kernels do their products as f64 dgemm over tiles of 64 query rows.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace step::rt::cpu {

using namespace detail;

//===----------------------------------------------------------------------===//
// step.softmax, step.log_softmax
//===----------------------------------------------------------------------===//

static HostTensor softmaxImpl(const char *op, const HostTensor &x, int64_t dim,
                              bool log) {
  requireFloat(op, x, "operand");
  if (x.rank() == 0)
    fail(op, "operand must have rank >= 1, found " + typeStr(x));
  int64_t d = normDim(op, dim, x.rank());
  const Shape &s = x.shape();
  int64_t outer = prodDims(s, 0, d), size = s[d];
  int64_t inner = prodDims(s, d + 1, s.size());
  HostTensor y(x.dtype(), s);
  FloatIn in(x);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      int64_t base = o * size * inner + r;
      // Subtracting the max keeps exp() from overflowing. A row of -inf (or
      // one holding +inf or NaN) yields NaN, as in PyTorch.
      double mx = -INFINITY;
      for (int64_t j = 0; j < size; ++j) {
        double v = in[base + j * inner];
        if (std::isnan(v) || v > mx)
          mx = v;
        if (std::isnan(mx))
          break;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < size; ++j)
        sum += std::exp(in[base + j * inner] - mx);
      double logSum = std::log(sum);
      for (int64_t j = 0; j < size; ++j) {
        int64_t i = base + j * inner;
        double v = log ? in[i] - mx - logSum : std::exp(in[i] - mx) / sum;
        storeD(y.dtype(), y.raw(), i, v);
      }
    }
  return y;
}

HostTensor softmax(const HostTensor &x, int64_t dim) {
  return softmaxImpl("softmax", x, dim, /*log=*/false);
}

HostTensor logSoftmax(const HostTensor &x, int64_t dim) {
  return softmaxImpl("log_softmax", x, dim, /*log=*/true);
}

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

HostTensor layerNorm(const HostTensor &x, const HostTensor &weight,
                     const HostTensor &bias, double eps) {
  const char *op = "layer_norm";
  requireFloat(op, x, "input");
  requireFloat(op, weight, "weight");
  requireFloat(op, bias, "bias");
  int64_t r = weight.rank();
  bool ok = r <= x.rank() && bias.shape() == weight.shape();
  for (int64_t i = 0; ok && i < r; ++i)
    ok = x.shape()[x.rank() - r + i] == weight.shape()[i];
  if (!ok)
    fail(op, "weight and bias must both have the trailing dims of the input;"
             " input " + typeStr(x) + ", weight " + typeStr(weight) +
             ", bias " + typeStr(bias));
  int64_t group = weight.numel();
  int64_t rows = group ? x.numel() / group : 0;
  HostTensor y(x.dtype(), x.shape());
  FloatIn in(x), w(weight), b(bias);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = row * group;
    double mean = 0.0;
    for (int64_t j = 0; j < group; ++j)
      mean += in[base + j];
    mean /= static_cast<double>(group);
    // Two passes (mean, then squared deviations) avoid the cancellation of
    // E[x^2] - E[x]^2.
    double var = 0.0;
    for (int64_t j = 0; j < group; ++j) {
      double dv = in[base + j] - mean;
      var += dv * dv;
    }
    var /= static_cast<double>(group);
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < group; ++j) {
      double v = (in[base + j] - mean) * rstd * w[j] + b[j];
      storeD(y.dtype(), y.raw(), base + j, v);
    }
  }
  return y;
}

//===----------------------------------------------------------------------===//
// step.embedding
//===----------------------------------------------------------------------===//

HostTensor embedding(const HostTensor &indices, const HostTensor &weight) {
  const char *op = "embedding";
  requireIndex(op, indices, "indices");
  requireFloat(op, weight, "weight");
  if (weight.rank() != 2)
    fail(op, "weight must have rank 2 ([V, D]), found " + typeStr(weight));
  int64_t v = weight.shape()[0], dimD = weight.shape()[1];
  Shape out = indices.shape();
  out.push_back(dimD);
  HostTensor y(weight.dtype(), out);
  size_t rowBytes = static_cast<size_t>(dimD) * dtypeSize(weight.dtype());
  auto *dst = static_cast<uint8_t *>(y.raw());
  auto *src = static_cast<const uint8_t *>(weight.raw());
  for (int64_t i = 0, n = indices.numel(); i < n; ++i) {
    int64_t idx = loadIndex(indices, i);
    if (idx < 0 || idx >= v)
      fail(op, "index " + std::to_string(idx) + " at position " +
                   std::to_string(i) + " is out of range [0, " +
                   std::to_string(v) + ") for weight " + typeStr(weight));
    if (rowBytes)
      std::memcpy(dst + i * rowBytes, src + idx * rowBytes, rowBytes);
  }
  return y;
}

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

HostTensor crossEntropy(const HostTensor &logits, const HostTensor &targets,
                        Reduction reduction, int64_t ignoreIndex) {
  int64_t counted = detail::checkCrossEntropyTargets(
      "cross_entropy", logits, targets, ignoreIndex);
  int64_t n = logits.shape()[0], c = logits.shape()[1];
  FloatIn in(logits);
  std::vector<double> loss(n, 0.0);
  for (int64_t row = 0; row < n; ++row) {
    int64_t t = loadIndex(targets, row);
    if (t == ignoreIndex)
      continue;
    const float *x = in.data() + row * c;
    double mx = -INFINITY;
    for (int64_t j = 0; j < c; ++j)
      if (std::isnan(x[j]) || x[j] > mx) {
        mx = x[j];
        if (std::isnan(mx))
          break;
      }
    double sum = 0.0;
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(x[j] - mx);
    loss[row] = mx + std::log(sum) - x[t];
  }
  if (reduction == Reduction::None) {
    HostTensor y(logits.dtype(), {n});
    for (int64_t row = 0; row < n; ++row)
      storeD(y.dtype(), y.raw(), row, loss[row]);
    return y;
  }
  double total = 0.0;
  for (double l : loss)
    total += l;
  // Mean over zero counted rows is 0/0 = NaN, as PyTorch.
  if (reduction == Reduction::Mean)
    total /= static_cast<double>(counted);
  HostTensor y(logits.dtype(), {});
  storeD(y.dtype(), y.raw(), 0, total);
  return y;
}

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool dropoutKeep(uint64_t seed, uint64_t index, double p) {
  uint64_t bits = splitmix64(seed ^ splitmix64(index)) >> 40;
  double u = static_cast<double>(bits) * 0x1p-24;
  return u >= p;
}

uint64_t dropoutKey(uint64_t seed, uint64_t offset) {
  return seed + offset * 0x9e3779b97f4a7c15ull;
}

uint64_t dropoutOffset(const std::vector<HostTensor> &operands) {
  if (operands.size() < 2)
    return 0;
  const HostTensor &t = operands[1];
  if (t.dtype() != DType::I64 || t.numel() != 1)
    fail("dropout", "expected the offset as i64 [], found " +
                        std::string(dtypeName(t.dtype())) + " " +
                        shapeToString(t.shape()));
  return static_cast<uint64_t>(t.data<int64_t>()[0]);
}

HostTensor dropout(const HostTensor &x, double p, uint64_t seed,
                   uint64_t offset) {
  const char *op = "dropout";
  requireFloat(op, x, "operand");
  seed = dropoutKey(seed, offset);
  if (!(p >= 0.0 && p < 1.0))
    fail(op, "expected 0 <= p < 1, found p = " + std::to_string(p));
  HostTensor y(x.dtype(), x.shape());
  // The scale is rounded to float once and applied in float, which a GPU
  // kernel can reproduce bit for bit.
  float scale = static_cast<float>(1.0 / (1.0 - p));
  DType t = x.dtype();
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    if (dropoutKeep(seed, static_cast<uint64_t>(i), p))
      storeF(t, y.raw(), i, loadF(t, x.raw(), i) * scale);
  return y;
}

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

namespace {
/// The dims of an attention over q [..., Tq, D], k [..., Tk, D],
/// v [..., Tk, Dv]: `batch` is the product of the leading dims.
struct AttentionDims {
  int64_t batch, tq, tk, d, dv;
  double scale;
  /// The rows and keys computed: Tq and Tk, or a valid length clamped to
  /// them.
  int64_t lq, lk;
};

AttentionDims attentionDims(const char *op, const HostTensor &q,
                            const HostTensor &k, const HostTensor &v,
                            std::optional<double> scale,
                            std::optional<int64_t> valid) {
  auto describe = [&] {
    return "q " + typeStr(q) + ", k " + typeStr(k) + ", v " + typeStr(v);
  };
  requireFloat(op, q, "q");
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    fail(op, "q, k and v must have the same dtype; " + describe());
  int64_t r = q.rank();
  if (r < 2 || k.rank() != r || v.rank() != r)
    fail(op, "q, k and v must have the same rank >= 2; " + describe());
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  for (int64_t i = 0; i + 2 < r; ++i)
    if (ks[i] != qs[i] || vs[i] != qs[i])
      fail(op, "leading (batch) dims must be equal; " + describe());
  AttentionDims a;
  a.tq = qs[r - 2];
  a.d = qs[r - 1];
  a.tk = ks[r - 2];
  a.dv = vs[r - 1];
  if (ks[r - 1] != a.d || vs[r - 2] != a.tk)
    fail(op, "expected q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv]; " +
                 describe());
  a.batch = prodDims(qs, 0, r - 2);
  a.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(a.d));
  int64_t l = valid ? std::max<int64_t>(*valid, 0) : INT64_MAX;
  a.lq = std::min(a.tq, l);
  a.lk = std::min(a.tk, l);
  return a;
}
} // namespace

AttentionOperands attentionOperands(const char *op,
                                    const std::vector<HostTensor> &operands,
                                    size_t required) {
  AttentionOperands r;
  size_t extra = operands.size() - std::min(operands.size(), required);
  if (extra > (required == 4 ? 3u : 1u))
    fail(op, "expected " + std::to_string(required) +
                 " operands, then a "
                 "valid length" +
                 (required == 4 ? " and the saved out and lse" : "") +
                 "; found " + std::to_string(operands.size()));
  if (extra % 2 == 1) {
    const HostTensor &t = operands[required];
    if (t.dtype() != DType::I64 || t.rank() != 0)
      fail(op, "expected the valid length as i64 [], found " +
                   std::string(dtypeName(t.dtype())) + " " +
                   shapeToString(t.shape()));
    r.valid = t.data<int64_t>()[0];
  }
  if (extra >= 2) {
    r.out = &operands[operands.size() - 2];
    r.lse = &operands[operands.size() - 1];
  }
  return r;
}

namespace {
/// Query rows are taken kAttentionTile at a time: a tile's scores, in f64,
/// are all the attention kernels keep of the [Tq, Tk] matrix.
constexpr int64_t kAttentionTile = 64;

/// Entry `b` of a [batch, rows, cols] tensor's floats, as doubles.
void sliceAsDouble(const FloatIn &t, int64_t b, int64_t rows, int64_t cols,
                   std::vector<double> &out) {
  const float *p = t.data() + b * rows * cols;
  out.assign(p, p + rows * cols);
}

/// The scores of query rows i0 .. i0 + rows - 1 against keys 0 .. kt - 1
/// (row r at s + r * kt) to probabilities, in place: the softmax of
/// score * scale over the keys row i0 + r sees (top-left causal: j <= i),
/// 0 for the others. A NaN score makes its row NaN. Key 0 is always
/// visible, so no row is fully masked. With `lse`, row r's log-sum-exp of
/// its scaled scores goes to lse[r].
void softmaxRows(double *s, int64_t rows, int64_t kt, int64_t i0, bool causal,
                 double scale, double *lse = nullptr) {
  for (int64_t r = 0; r < rows; ++r) {
    double *row = s + r * kt;
    int64_t visible = causal ? std::min(kt, i0 + r + 1) : kt;
    double mx = -INFINITY;
    for (int64_t j = 0; j < visible; ++j) {
      row[j] *= scale;
      if (std::isnan(row[j]) || row[j] > mx)
        mx = row[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < visible; ++j)
      sum += (row[j] = std::exp(row[j] - mx));
    for (int64_t j = 0; j < visible; ++j)
      row[j] /= sum;
    if (lse) // a row that sees no key: 0, as the CUDA kernels store; a
      // NaN row: NaN
      lse[r] = sum != 0.0 ? mx + std::log(sum) : 0.0;
    std::fill(row + visible, row + kt, 0.0);
  }
}

/// Stores `x` (doubles) as elements [at, at + n) of `t`, rounded once.
void storeAll(HostTensor &t, int64_t at, const double *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    storeD(t.dtype(), t.raw(), at + i, x[i]);
}
} // namespace

// Per batch entry and tile of query rows, with dgemm: S = q_t k^T, P =
// softmax(S * scale) (masked), out_t = P v. Causal: a tile reads only the
// keys its last row sees.
HostTensor attention(const HostTensor &q, const HostTensor &k,
                     const HostTensor &v, bool causal,
                     std::optional<double> scale, std::optional<int64_t> valid,
                     HostTensor *lse) {
  AttentionDims a = attentionDims("attention", q, k, v, scale, valid);
  if (a.tk > INT_MAX || a.d > INT_MAX || a.dv > INT_MAX)
    fail("attention", "dims exceed the BLAS int range; q " + typeStr(q));
  Shape out(q.shape().begin(), q.shape().end() - 1);
  if (lse) // f32, one per query row; padded rows keep 0
    *lse = HostTensor(DType::F32, out);
  out.push_back(a.dv);
  HostTensor y(q.dtype(), out);
  std::vector<double> rowLse(kAttentionTile);
  FloatIn fq(q), fk(k), fv(v);
  std::vector<double> qd, kd, vd, p(kAttentionTile * a.tk),
      o(kAttentionTile * a.dv);
  for (int64_t b = 0; b < a.batch; ++b) {
    sliceAsDouble(fq, b, a.tq, a.d, qd);
    sliceAsDouble(fk, b, a.tk, a.d, kd);
    sliceAsDouble(fv, b, a.tk, a.dv, vd);
    for (int64_t i0 = 0; i0 < a.lq; i0 += kAttentionTile) {
      int64_t rows = std::min(kAttentionTile, a.lq - i0);
      int64_t kt = causal ? std::min(a.lk, i0 + rows) : a.lk;
      gemm({rows, kt, a.d, false, true}, qd.data() + i0 * a.d, kd.data(),
           p.data());
      softmaxRows(p.data(), rows, kt, i0, causal, a.scale,
                  lse ? rowLse.data() : nullptr);
      gemm({rows, a.dv, kt}, p.data(), vd.data(), o.data());
      storeAll(y, (b * a.tq + i0) * a.dv, o.data(), rows * a.dv);
      if (lse)
        storeAll(*lse, b * a.tq + i0, rowLse.data(), rows);
    }
    // Padded rows (i >= lq) keep the zeros y was made with.
  }
  return y;
}

//===----------------------------------------------------------------------===//
// step.attention_grad
//===----------------------------------------------------------------------===//

// Per batch entry and tile of query rows, with dgemm (P as in attention):
//   dP = g_t v^T;  dS = P * (dP - rowsum(P * dP)) * scale;
//   dq_t = dS k;  dk += dS^T q_t;  dv += P^T g_t.
// Tiles are visited in order, so the sums into dk and dv are the same bits
// for every run. With the forward's result and log-sum-exp saved, P is
// exp(S * scale - lse) and rowsum(P * dP) is rowsum(g * out), as
// FlashAttention-2's backward takes them.
AttentionGrads attentionGrad(const HostTensor &q, const HostTensor &k,
                             const HostTensor &v, const HostTensor &grad,
                             bool causal, std::optional<double> scale,
                             std::optional<int64_t> valid,
                             const HostTensor *savedOut,
                             const HostTensor *savedLse) {
  const char *op = "attention_grad";
  AttentionDims a = attentionDims(op, q, k, v, scale, valid);
  Shape outShape(q.shape().begin(), q.shape().end() - 1);
  outShape.push_back(a.dv);
  if (grad.dtype() != q.dtype() || grad.shape() != outShape)
    fail(op, "grad must be " + std::string(dtypeName(q.dtype())) + " " +
                 shapeToString(outShape) + " (the attention's result); found " +
                 typeStr(grad));
  if (a.tk > INT_MAX || a.d > INT_MAX || a.dv > INT_MAX)
    fail(op, "dims exceed the BLAS int range; q " + typeStr(q));
  bool saved = savedOut && savedLse;
  if (saved &&
      (savedOut->dtype() != q.dtype() || savedOut->shape() != outShape ||
       savedLse->dtype() != DType::F32 ||
       savedLse->shape() != Shape(outShape.begin(), outShape.end() - 1)))
    fail(op, "saved out and lse must be " + std::string(dtypeName(q.dtype())) +
                 " " + shapeToString(outShape) + " and f32 " +
                 shapeToString(Shape(outShape.begin(), outShape.end() - 1)) +
                 "; found " + typeStr(*savedOut) + ", " + typeStr(*savedLse));
  std::vector<double> od, ld;
  std::optional<FloatIn> fo, fl;
  if (saved) {
    fo.emplace(*savedOut);
    fl.emplace(*savedLse);
  }
  AttentionGrads out{HostTensor(q.dtype(), q.shape()),
                     HostTensor(k.dtype(), k.shape()),
                     HostTensor(v.dtype(), v.shape())};
  FloatIn fq(q), fk(k), fv(v), fg(grad);
  std::vector<double> qd, kd, vd, gd, dq(a.tq * a.d), dk, dv,
      p(kAttentionTile * a.tk), dp(kAttentionTile * a.tk);
  for (int64_t b = 0; b < a.batch; ++b) {
    sliceAsDouble(fq, b, a.tq, a.d, qd);
    sliceAsDouble(fk, b, a.tk, a.d, kd);
    sliceAsDouble(fv, b, a.tk, a.dv, vd);
    sliceAsDouble(fg, b, a.tq, a.dv, gd);
    if (saved) {
      sliceAsDouble(*fo, b, a.tq, a.dv, od);
      sliceAsDouble(*fl, b, a.tq, 1, ld);
    }
    dk.assign(a.tk * a.d, 0.0);
    dv.assign(a.tk * a.dv, 0.0);
    // Padded rows of dq stay 0 (the tiles below write only valid rows).
    std::fill(dq.begin() + a.lq * a.d, dq.end(), 0.0);
    for (int64_t i0 = 0; i0 < a.lq; i0 += kAttentionTile) {
      int64_t rows = std::min(kAttentionTile, a.lq - i0);
      int64_t kt = causal ? std::min(a.lk, i0 + rows) : a.lk;
      const double *qt = qd.data() + i0 * a.d, *gt = gd.data() + i0 * a.dv;
      gemm({rows, kt, a.d, false, true}, qt, kd.data(), p.data());
      if (saved)
        for (int64_t r = 0; r < rows; ++r) {
          double *pr = p.data() + r * kt;
          int64_t visible = causal ? std::min(kt, i0 + r + 1) : kt;
          for (int64_t j = 0; j < visible; ++j)
            pr[j] = std::exp(pr[j] * a.scale - ld[i0 + r]);
          std::fill(pr + visible, pr + kt, 0.0);
        }
      else
        softmaxRows(p.data(), rows, kt, i0, causal, a.scale);
      gemm({rows, kt, a.dv, false, true}, gt, vd.data(), dp.data());
      for (int64_t r = 0; r < rows; ++r) {
        double *pr = p.data() + r * kt, *dpr = dp.data() + r * kt;
        int64_t visible = causal ? std::min(kt, i0 + r + 1) : kt;
        double dot = 0.0;
        if (saved)
          for (int64_t c = 0; c < a.dv; ++c)
            dot += gt[r * a.dv + c] * od[(i0 + r) * a.dv + c];
        else
          for (int64_t j = 0; j < visible; ++j)
            dot += pr[j] * dpr[j];
        for (int64_t j = 0; j < visible; ++j)
          dpr[j] = pr[j] * (dpr[j] - dot) * a.scale;
        std::fill(dpr + visible, dpr + kt, 0.0);
      }
      // dp now holds dS.
      gemm({rows, a.d, kt}, dp.data(), kd.data(), dq.data() + i0 * a.d);
      gemm({kt, a.d, rows, true, false, true}, dp.data(), qt, dk.data());
      gemm({kt, a.dv, rows, true, false, true}, p.data(), gt, dv.data());
    }
    storeAll(out.dq, b * a.tq * a.d, dq.data(), a.tq * a.d);
    storeAll(out.dk, b * a.tk * a.d, dk.data(), a.tk * a.d);
    storeAll(out.dv, b * a.tk * a.dv, dv.data(), a.tk * a.dv);
  }
  return out;
}

} // namespace step::rt::cpu
