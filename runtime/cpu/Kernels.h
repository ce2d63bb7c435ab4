//===- Kernels.h - CPU reference kernels for the step dialect ---*- C++ -*-===//
//
// The math of every step op, written once. The reference interpreter
// (compiler/) and the runtime's CPU backend both call these functions; no MLIR
// here. Conventions shared by every kernel:
//  - Inputs are validated (dtype, rank, shape) and a violation throws
//    rt::Error naming the op and the shapes; the verifier normally catches
//    these first, but the runtime never trusts its input.
//  - f16/bf16 inputs are widened to f32, the op is computed in f32 (reductions
//    accumulate in double), and each stored result is rounded to the output
//    type with round-to-nearest-even. This matches PyTorch's CPU kernels,
//    which compute half types in float ("opmath") and round on store.
//  - Results are deterministic: the same inputs give the same bits.
//  - Semantics follow PyTorch where a name matches (see docs/dialect.md).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CPU_KERNELS_H
#define STEP_RUNTIME_CPU_KERNELS_H

#include "runtime/Comm.h"
#include "runtime/Tensor.h"

#include <optional>

namespace step::rt::cpu {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class UnaryOp {
  Neg, Exp, Log, Tanh, Sigmoid, Relu, GeluTanh, GeluErf, Sqrt, Rsqrt, Abs,
  Erf, Sin, Cos
};
/// neg/abs/relu accept f32/f16/bf16/i32/i64; the rest need a float type.
HostTensor unary(UnaryOp op, const HostTensor &x);

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Pow,
  GeluGradTanh,
  GeluGradErf
};
/// a and b have the same dtype and shape (no implicit broadcasting). Integer
/// div truncates toward zero and throws on division by zero; pow needs floats.
/// max/min propagate NaN (torch.maximum/minimum). GeluGrad*: step.gelu_grad,
/// a the incoming gradient, b gelu's input (floats only).
HostTensor binary(BinaryOp op, const HostTensor &a, const HostTensor &b);

enum class CompareOp { EQ, NE, LT, LE, GT, GE };
/// Same dtype and shape; result i1.
HostTensor compare(CompareOp op, const HostTensor &a, const HostTensor &b);

/// pred is i1 with the shape of a and b (same dtype and shape); torch.where.
HostTensor select(const HostTensor &pred, const HostTensor &a,
                  const HostTensor &b);

/// Element type conversion, as torch.Tensor.to(dtype): float->int truncates
/// toward zero (out-of-range values are undefined in PyTorch; here they
/// saturate, NaN -> 0), x->i1 is x != 0, i1->x is 0/1, float->float rounds
/// to nearest even.
HostTensor cast(const HostTensor &x, DType to);

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

/// Result dim i of `x` broadcast to `outShape`: operand dim k maps to result
/// dim dims[k]; an operand dim of size 1 is repeated, otherwise it must equal
/// the result dim.
HostTensor broadcastInDim(const HostTensor &x, const Shape &outShape,
                          const std::vector<int64_t> &dims);
/// Same elements, new shape. At most one entry of `shape` may be -1 (inferred
/// from the element count, as torch.reshape).
HostTensor reshape(const HostTensor &x, const Shape &shape);
/// result.shape[i] = x.shape[perm[i]] (torch.permute).
HostTensor transpose(const HostTensor &x, const std::vector<int64_t> &perm);
/// result[i] = x[start + i * stride] per dim, up to limit (exclusive);
/// 0 <= start <= limit <= dim, stride >= 1.
HostTensor slice(const HostTensor &x, const std::vector<int64_t> &start,
                 const std::vector<int64_t> &limit,
                 const std::vector<int64_t> &stride);
/// torch.cat along `dim`; every input has the same dtype, rank and other dims.
HostTensor concat(const std::vector<HostTensor> &xs, int64_t dim);
/// Constant padding (torch.nn.functional.pad, mode="constant") with low[i]
/// elements before and high[i] after along dim i; both >= 0. `value` is
/// converted to the dtype as setFromDouble does.
HostTensor pad(const HostTensor &x, const std::vector<int64_t> &low,
               const std::vector<int64_t> &high, double value);
/// result[..., i_dim, ...] = i_dim (as the dtype).
HostTensor iota(DType dtype, const Shape &shape, int64_t dim);

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceOp { Sum, Max, Mean };
/// Reduce over `dims` (unique, in range; empty = identity copy). keepDim keeps
/// the reduced dims with size 1 (torch keepdim=True). Sum and Mean of floats
/// accumulate in double; Mean needs a float type; Max propagates NaN. Sum of
/// an empty set is 0; Max of an empty set throws (as torch.amax); Mean of an
/// empty set is NaN (as torch.mean).
HostTensor reduce(ReduceOp op, const HostTensor &x,
                  const std::vector<int64_t> &dims, bool keepDim);

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// Batched matrix product of float tensors of one dtype. a: [..., M, K] (or
/// [..., K, M] with transposeA), b: [..., K, N] (or [..., N, K] with
/// transposeB); b may also be rank 2 (shared across the batch). Leading dims
/// of a and b must be equal (no broadcasting). Result [..., M, N]. f32 uses
/// OpenBLAS sgemm; f16/bf16 are widened to f32, multiplied with sgemm, and
/// rounded once per result element.
HostTensor matmul(const HostTensor &a, const HostTensor &b, bool transposeA,
                  bool transposeB);

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

/// torch.softmax / torch.log_softmax along dim (float types).
HostTensor softmax(const HostTensor &x, int64_t dim);
HostTensor logSoftmax(const HostTensor &x, int64_t dim);

/// torch.nn.functional.layer_norm over the trailing weight.rank() dims;
/// weight and bias have exactly those trailing dims. Biased variance.
HostTensor layerNorm(const HostTensor &x, const HostTensor &weight,
                     const HostTensor &bias, double eps);

/// torch.nn.functional.embedding(indices, weight): weight [V, D] float,
/// indices i32/i64 of any shape; result indices.shape + [D]. An index outside
/// [0, V) throws naming the index and V.
HostTensor embedding(const HostTensor &indices, const HostTensor &weight);

enum class Reduction { None, Mean, Sum };
/// torch.nn.functional.cross_entropy(logits [N, C], targets [N] i32/i64,
/// reduction, ignore_index). Mean divides by the number of non-ignored
/// targets (NaN when all are ignored, as PyTorch). Result: scalar (rank 0) for
/// Mean/Sum, [N] for None; dtype of logits. A target outside [0, C) that is
/// not ignore_index throws.
HostTensor crossEntropy(const HostTensor &logits, const HostTensor &targets,
                        Reduction reduction, int64_t ignoreIndex);

/// Inverted dropout: element i is kept iff dropoutKeep(dropoutKey(seed,
/// offset), i, p), and kept elements are scaled by 1/(1-p). 0 <= p < 1.
HostTensor dropout(const HostTensor &x, double p, uint64_t seed,
                   uint64_t offset = 0);
/// The mask's key for `seed` at step `offset`: seed + offset * 0x9e37...
/// (mod 2^64), so offset 0 keys by the seed alone.
uint64_t dropoutKey(uint64_t seed, uint64_t offset);
/// The offset operand of a dropout's operands (0 when there is none);
/// throws unless it is one i64.
uint64_t dropoutOffset(const std::vector<HostTensor> &operands);
/// The mask, shared with the CUDA lowering so both backends drop the same
/// elements: u = (splitmix64(seed ^ splitmix64(i)) >> 40) * 2^-24, a uniform
/// in [0, 1) with 24 bits; keep iff u >= p.
bool dropoutKeep(uint64_t seed, uint64_t index, double p);
/// The standard SplitMix64 output for state x: mixes x + 0x9e3779b97f4a7c15.
uint64_t splitmix64(uint64_t x);

/// torch.nn.functional.scaled_dot_product_attention: q [..., Tq, D],
/// k [..., Tk, D], v [..., Tk, Dv] with equal leading dims; result
/// [..., Tq, Dv]. scale defaults to 1/sqrt(D). causal masks key j > query i
/// (top-left aligned, as PyTorch's is_causal). A `valid` length L makes
/// rows and keys at positions >= L padding (step.attention's `valid`): no
/// query sees key j >= L and result rows i >= L are 0; L is clamped to
/// [0, Tq] for rows and [0, Tk] for keys, and only the first L rows and
/// keys are computed. With `lse`, also each query row's log-sum-exp of its
/// scaled, masked scores (f32 [..., Tq]; 0 for a padded row:
/// step.attention_lse).
HostTensor attention(const HostTensor &q, const HostTensor &k,
                     const HostTensor &v, bool causal,
                     std::optional<double> scale,
                     std::optional<int64_t> valid = std::nullopt,
                     HostTensor *lse = nullptr);

/// The optional operands of attention or attention_lse (`required` 3: q,
/// k, v, then a valid length) or attention_grad (`required` 4: q, k, v,
/// grad, then a valid length, then the saved out and lse), told apart by
/// their count.
struct AttentionOperands {
  std::optional<int64_t> valid;
  const HostTensor *out = nullptr, *lse = nullptr;
};
AttentionOperands attentionOperands(const char *op,
                                    const std::vector<HostTensor> &operands,
                                    size_t required);

/// The gradients of attention(q, k, v, causal, scale) w.r.t. q, k and v
/// given `grad`, the gradient of its result ([..., Tq, Dv], q's dtype):
/// PyTorch's autograd of scaled_dot_product_attention, each rounded once to
/// its operand's dtype. No [Tq, Tk] tensor is kept beyond one tile of rows.
/// With `valid` (as in attention) the gradients' rows at positions >= L are
/// 0 and only the first L query rows and keys are computed. With the
/// forward's result and log-sum-exp (`savedOut`, `savedLse`: both or
/// neither), P comes from lse and rowsum(P * dP) is rowsum(grad * out), as
/// FlashAttention-2 computes them (equal up to rounding).
struct AttentionGrads {
  HostTensor dq, dk, dv;
};
AttentionGrads attentionGrad(const HostTensor &q, const HostTensor &k,
                             const HostTensor &v, const HostTensor &grad,
                             bool causal, std::optional<double> scale,
                             std::optional<int64_t> valid = std::nullopt,
                             const HostTensor *savedOut = nullptr,
                             const HostTensor *savedLse = nullptr);

//===----------------------------------------------------------------------===//
// Training: fused gradients and optimizer updates (runtime/cpu/Train.cpp)
//===----------------------------------------------------------------------===//

/// Table gradient of embedding: a [numEmbeddings, D] tensor of zeros to which
/// grad[i..., :] is added at row indices[i...] (repeated indices accumulate,
/// in double, rounded once). indices i32/i64 of any shape; grad float with
/// shape indices.shape + [D]; result has grad's dtype. numEmbeddings >= 1; an
/// index outside [0, numEmbeddings) throws naming the index and V.
HostTensor embeddingGrad(const HostTensor &indices, const HostTensor &grad,
                         int64_t numEmbeddings);

/// Gradient of crossEntropy w.r.t. logits [N, C]: row i is
/// (softmax(logits[i]) - onehot(targets[i])) * s_i with s_i = grad (Sum),
/// grad / count (Mean, count = rows whose target is not ignoreIndex) or
/// grad[i] (None). grad has the logits' dtype and is rank 0 for Mean/Sum,
/// [N] for None. Ignored rows are exactly 0, so Mean with every row ignored
/// gives zeros, as PyTorch's autograd does (the forward loss is NaN). A
/// target outside [0, C) that is not ignoreIndex throws. Computed in double,
/// rounded once.
HostTensor crossEntropyGrad(const HostTensor &logits, const HostTensor &targets,
                            const HostTensor &grad, Reduction reduction,
                            int64_t ignoreIndex);

/// step.check_finite: a rank-0 i1 tensor, true iff no element of any input
/// is NaN or +-inf (the negated found_inf of torch.cuda.amp.GradScaler).
/// Every input is f32, f16 or bf16, of any shape; at least one input. An
/// f16/bf16 element is tested on its bits (exponent all ones), so no
/// widening is involved; empty inputs contribute true.
HostTensor checkFinite(const std::vector<HostTensor> &inputs);

/// Optimizer updates share these rules: param, grad and every state tensor
/// have one float dtype and shape (results too); `step` is a rank-0 i64
/// tensor holding the 1-based update number (>= 1) and `lr` a rank-0 f32
/// tensor. Each element is computed in f32 in PyTorch's operation order, with
/// its scalar coefficients computed in double and rounded to f32 as PyTorch
/// does for Python-float hyperparameters; f16/bf16 are widened on load and
/// rounded once on store.

/// torch.optim.SGD hyperparameters (lr is the run-time operand).
struct SgdHyper {
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;
  bool nesterov = false;
};
struct SgdResult {
  HostTensor param;
  /// Present iff momentum != 0.
  std::optional<HostTensor> momentumBuffer;
};
/// One torch.optim.SGD step (step.sgd_update). momentumBuffer must be given
/// iff momentum != 0; at step 1 its value is unused (the buffer starts as
/// the gradient, as PyTorch's lazily created buffer). momentum and
/// weightDecay >= 0; nesterov needs momentum > 0 and dampening == 0.
SgdResult sgdUpdate(const HostTensor &param, const HostTensor &grad,
                    const HostTensor &step, const HostTensor &lr,
                    const HostTensor *momentumBuffer, const SgdHyper &hyper);

/// AdamW/LAMB hyperparameters; the defaults are torch.optim.AdamW's
/// (step.lamb_update's default eps is 1e-6). 0 <= beta1, beta2 < 1, eps > 0,
/// weightDecay >= 0.
struct AdamHyper {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
};
struct AdamResult {
  HostTensor param, expAvg, expAvgSq;
};
/// Threads the elementwise optimizer updates (sgd_update, adamw_update) may
/// split a large tensor over, and a large matmul its blocks of rows: each
/// thread takes a contiguous range of elements or blocks, so the results
/// are the same bits for every count. Default (0): the machine's cores.
/// 1: one thread. Process-wide.
void setUpdateThreads(int threads);
int updateThreads();

/// One torch.optim.AdamW step (amsgrad=False, single-tensor path):
///   p *= 1 - lr*wd; m = m*beta1 + (1-beta1)*g; v = v*beta2 + (1-beta2)*g*g;
///   denom = sqrt(v) / sqrt(1 - beta2^step) + eps;
///   p += (-lr / (1 - beta1^step)) * m / denom.
AdamResult adamwUpdate(const HostTensor &param, const HostTensor &grad,
                       const HostTensor &expAvg, const HostTensor &expAvgSq,
                       const HostTensor &step, const HostTensor &lr,
                       const AdamHyper &hyper);
/// One LAMB step (step.lamb_update): the moments as AdamW, then
///   r = (m / bc1) / (sqrt(v / bc2) + eps) + wd * p,
///   trust = |p| / |r| (2-norms accumulated in double) if both are > 0,
///   else 1; p -= lr * trust * r.
AdamResult lambUpdate(const HostTensor &param, const HostTensor &grad,
                      const HostTensor &expAvg, const HostTensor &expAvgSq,
                      const HostTensor &step, const HostTensor &lr,
                      const AdamHyper &hyper);

//===----------------------------------------------------------------------===//
// Collectives (runtime/cpu/Collectives.cpp), on currentCommunicator()
//===----------------------------------------------------------------------===//

/// The elementwise `reduce` (sum, mean, max, min) of x over the calling
/// rank's group; the same bits on every rank.
HostTensor allReduce(const HostTensor &x, const std::string &reduce,
                     const ReplicaGroups &groups);
/// The sum (or mean) over the group, block `index in group` of dim 0.
HostTensor reduceScatter(const HostTensor &x, const std::string &reduce,
                         const ReplicaGroups &groups);
/// The group's x concatenated along dim 0 in group order.
HostTensor allGather(const HostTensor &x, const ReplicaGroups &groups);
/// This rank's ZeRO block of x (rt::shardOf at its index in its group).
HostTensor localShard(const HostTensor &x, const ReplicaGroups &groups);

} // namespace step::rt::cpu

#endif // STEP_RUNTIME_CPU_KERNELS_H
