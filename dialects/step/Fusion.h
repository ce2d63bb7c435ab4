//===- Fusion.h - What may go into a step.fusion ----------------*- C++ -*-===//
//
// The one classification of step ops by their role in a fusion, shared by
// the step.fusion verifier, step-fuse and the fusion code generator, so the
// three never disagree about what a `loop` or `reduction` body may hold.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_DIALECTS_STEP_FUSION_H
#define STEP_DIALECTS_STEP_FUSION_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <utility>

namespace mlir::step {

enum class FusionRole {
  Elementwise, ///< unary, binary, compare, select, cast, dropout,
               ///< stop_gradient: element i of the result from element i
  View,        ///< broadcast_in_dim, reshape, iota: an index map (or the
               ///< index itself), no arithmetic
  Reduce,      ///< reduce_sum, reduce_mean, reduce_max
  RowOp,       ///< softmax, log_softmax, layer_norm, cross_entropy,
               ///< cross_entropy_grad: a row-wise normalization or loss
  Update,      ///< sgd_update, adamw_update, lamb_update
  None,        ///< everything else (matmul, attention, gathers, ...)
};

FusionRole fusionRole(Operation *op);

/// Elementwise ops whose cost is a few ALU instructions (no transcendental,
/// division or RNG): step-fuse may duplicate these into several consumers.
bool isCheapElementwise(Operation *op);

/// The `dims` of a reduce_sum, reduce_mean or reduce_max.
llvm::ArrayRef<int64_t> reducedDims(Operation *reduce);
/// For a reduce_* over the trailing dims of its operand (at least one):
/// the number of leading (kept) dims, a row's index; std::nullopt for any
/// other dims.
std::optional<int64_t> trailingLead(Operation *reduce);
/// Whether a reduce_* reduces the leading dims 0, ..., n - 1 of its
/// operand and not all of them (a column reduction: the trailing dims
/// kept).
bool reducesLeadingDims(Operation *reduce);

/// The fusion kinds (the `kind` attribute of step.fusion).
inline constexpr const char *kLoopFusion = "loop";
inline constexpr const char *kReductionFusion = "reduction";
inline constexpr const char *kMultiTensorFusion = "multi_tensor";
inline constexpr const char *kMatmulFusion = "matmul";
inline constexpr const char *kAttentionFusion = "attention";
inline constexpr const char *kRowChainFusion = "row_chain";

/// The structure of a `row_chain` fusion body (C7, step-fuse-row-chains):
/// reductions over the trailing dims of one domain shape D, where later
/// reductions read earlier ones' results broadcast back over each row
/// (layer norm's backward: the mean, then the variance of x - mean, then
/// the means of dy * gamma and of its product with xhat, then dx). Every
/// body value is one of three levels:
///  - free: computed from inputs alone (no reduction), readable at any
///    index;
///  - row: one value per row of D (a reduction's result, or elementwise
///    ops of such values, free values and scalars), known after its stage;
///  - domain: one value per element of D, computed from free values and
///    row values broadcast over their row.
/// A body may also hold column reductions: a reduce_* over the leading
/// dims of a free or domain value of D's elements (D itself or a reshape
/// of it) whose reduced dims hold one row each and whose kept dims a row's
/// elements (layer norm's weight and bias gradients, a bias gradient: the
/// sums over every row of dy * xhat, of dy). Their results (one element
/// per column) are only yielded: no body op reads them; their rows hold at
/// most kRowChainColumnMaxCols elements.
inline constexpr int64_t kRowChainColumnMaxCols = 1024;
/// The most bytes a row_chain's column sums take in its kernel's shared
/// memory (RowChainKernels.cpp: kRowChainWarps x cols accumulators of 4
/// bytes, 8 for 64-bit types, per column reduction): 96 KiB, under the 99
/// KiB an sm_86/sm_89 block may take (sm_80: 163, sm_90: 227).
inline constexpr int64_t kRowChainColumnSharedBytes = 96 * 1024;
/// Warps (rows) of a row_chain block with column reductions: codegen's
/// kWarpRowsPerBlock, which RowChainKernels.cpp asserts equal.
inline constexpr int64_t kRowChainWarps = 8;
struct RowChain {
  llvm::SmallVector<int64_t> domain; ///< D, the shape every reduction reads
  int64_t lead = 0;                  ///< leading dims of D: a row's index
  int64_t rows = 0, cols = 0;        ///< rows of D, elements of each row
  /// The reductions of each stage, in body order. A stage-s reduction
  /// reads row values of stages < s only (through broadcasts).
  llvm::SmallVector<llvm::SmallVector<Operation *>> stages;
  /// Row values that are not reductions (computed per row from them), in
  /// body order, with the stage after which each is known.
  llvm::SmallVector<std::pair<Value, unsigned>> rowOps;
  /// Whether the value is a row value (reduction result, rowOps, or a free
  /// value of `rows` elements yielded).
  llvm::DenseSet<Value> rowLevel;
  /// The column reductions, in body order.
  llvm::SmallVector<Operation *> columns;
};
/// The row chain of a fusion body; std::nullopt with `why` (what, where,
/// expected vs found) when the body breaks C7.
std::optional<RowChain> analyzeRowChain(Block &body, std::string &why);

/// Where a tensor's elements lie in a buffer: element (i_0, ..., i_r-1)
/// at `offset + sum_k i_k * strides[k]`, in elements.
struct StridedView {
  int64_t offset = 0;
  llvm::SmallVector<int64_t> sizes, strides;
  /// The row-major layout of `shape` at offset 0.
  static StridedView contiguous(llvm::ArrayRef<int64_t> shape);
  /// Whether the rows of a view [S..., T, W] lie at multiples of 8
  /// elements (16 bytes in 16-bit types): the offset, every leading stride
  /// and the row stride (unused, so exempt, for one row). step-fuse-
  /// attention keeps it where the plain layout has it; the tensor-core
  /// attention kernels need it.
  bool rowsAligned8() const;
  bool operator==(const StridedView &o) const {
    return offset == o.offset && sizes == o.sizes && strides == o.strides;
  }
};

/// attention, attention_lse or attention_grad.
bool isAttentionOp(Operation *op);
/// The unit attribute that asks the CUDA kernels of a step.attention_grad
/// to store dS for a dq launch instead of recomputing the scores
/// (TrainOptions::attentionSavedDs; compiler/codegen/AttentionMmaGrad.cpp).
inline constexpr llvm::StringLiteral kSavedDsAttr = "step.saved_ds";
/// The unit attribute that asks the CUDA kernels of a step.attention_grad
/// to add dq into an f32 accumulator with atomics from the dk/dv launch,
/// as FlashAttention-2 does (TrainOptions::attentionAtomicDq; dq's bits
/// then depend on the order the blocks run in).
inline constexpr llvm::StringLiteral kAtomicDqAttr = "step.atomic_dq";
/// Whether operand `i` of an attention op is a tensor of rows read through
/// a view (query, key, value, grad, saved out); the valid length and the
/// saved log-sum-exp are read as they are.
bool isAttentionRowsOperand(Operation *op, unsigned i);

/// Whether `op` only re-indexes its operand (slice, transpose, reshape):
/// the ops an attention fusion reads and writes its tensors through.
bool isReindexing(Operation *op);
/// The view of a re-indexing op's result when its operand has view `in`;
/// std::nullopt for a reshape that no strides express (it merges dims that
/// are not adjacent in memory) or any other op.
std::optional<StridedView> viewThrough(Operation *op, const StridedView &in);
/// The view of a transpose's or reshape's operand when its result has view
/// `out` (both are bijections); std::nullopt otherwise.
std::optional<StridedView> viewBefore(Operation *op, const StridedView &out);

/// In the body of an attention fusion: the fusion input (block argument
/// number) a value is read from and how, walking back through re-indexing
/// ops; std::nullopt when the walk ends anywhere but at a block argument.
struct PortView {
  unsigned index = 0;
  StridedView view;
};
std::optional<PortView> inputView(Value v);
/// The fusion result a value is written into and how: the value's only
/// user chain of transposes and reshapes ends at the step.yield (operand
/// `index`), or at a step.concat that is yielded as it is (the value's
/// window of that result: step-fuse-attention's packed gradients);
/// std::nullopt otherwise.
std::optional<PortView> resultView(Value v);

} // namespace mlir::step

#endif // STEP_DIALECTS_STEP_FUSION_H
