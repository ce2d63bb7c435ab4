//===- Emitters.h - The kernel emitters, one entry per op family -*- C++ -*-===//
//
// Internal to compiler/codegen. Each family function returns the kernel of
// an op it owns and std::nullopt for any other op, so CudaKernels.cpp tries
// them in turn.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_EMITTERS_H
#define STEP_COMPILER_CODEGEN_EMITTERS_H

#include "compiler/codegen/EmitUtil.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::step {
class FusionOp;
} // namespace mlir::step

namespace step::codegen::detail {

/// unary, binary, compare, select, cast, dropout, reshape, stop_gradient
/// (ElementwiseKernels.cpp).
std::optional<KernelSource> emitElementwiseFamily(mlir::Operation *op,
                                                  const std::string &name);
/// The per-element code of an elementwise op (the ops of the family above;
/// reshape and stop_gradient as copies), or std::nullopt for any other op:
/// the one definition of each op's math that its own kernel and every
/// fused kernel use.
std::optional<ElementwiseSpec> elementwiseSpec(mlir::Operation *op);
/// A flat copy of operand 0 into result 0 (any dtype).
KernelSource emitCopy(mlir::Operation *op, const std::string &name);

/// broadcast_in_dim, transpose, slice, concat, pad, iota, embedding
/// (ShapeKernels.cpp).
std::optional<KernelSource> emitShapeFamily(mlir::Operation *op,
                                            const std::string &name);

/// reduce_sum/max/mean, softmax, log_softmax, layer_norm
/// (ReduceKernels.cpp).
std::optional<KernelSource> emitReduceFamily(mlir::Operation *op,
                                             const std::string &name);

/// Rows of a split column kernel whose vector loads are issued together
/// before any of them is used (ColumnCode::vecLoads).
constexpr int kColumnBatch = 4;
/// One root of a split column kernel: its accumulator's C type, identity
/// and combining functor ("SumOp()", "MaxNaNOp()", "MaxOp()").
struct ColumnRoot {
  std::string type, ident, op;
};
/// What a split column kernel (splitColumnKernel) runs. Its thread takes
/// `col.vec` adjacent outputs; every piece is code at the indentation the
/// kernel gives it.
struct ColumnCode {
  std::vector<ColumnRoot> roots;
  /// Per row, before the element loop: loads at `off4`, the flat index of
  /// the thread's first element of the row (a multiple of `col.vec`).
  std::string rowLoads;
  /// Vector loads at `off4` that the kernel issues for kColumnBatch rows
  /// at once before computing any of them (into `<name>_[u_]`), then binds
  /// as `const <type> <name>` for each row's code: a row's stores cannot
  /// hold back the next rows' loads. Each: the local's name, its C type,
  /// the expression it loads.
  struct VecLoad {
    std::string name, type, expr;
  };
  std::vector<VecLoad> vecLoads;
  /// Per element at flat index `off` (`e` its place among the thread's
  /// outputs): reads the element, combines it into each `acc<R>` (a
  /// reference to root R's accumulator of that output), may store values
  /// of the operand's size.
  std::string element;
  /// Per row, after the element loop: stores of what `element` gathered.
  std::string rowStores;
  /// At output `o` by the one thread that stores it, `acc<R>` the output's
  /// combined value: rounds and stores.
  std::string epilogue;
};
/// The split column kernel (ReduceKernels.cpp, docs/codegen.md): the
/// __device__ partials and tickets (`globals`) and the kernel's body, for
/// `m` outputs over `k` rows cut as `col` says (col.chunks > 1), the
/// outputs and rows indexed through `kept` and `red`, index type `I`.
struct ColumnKernelText {
  std::string globals, body;
};
ColumnKernelText splitColumnKernel(const ColumnCode &code,
                                   const ColumnSplit &col, int64_t m, int64_t k,
                                   const DimList &kept, const DimList &red,
                                   const std::string &I,
                                   const std::string &name);

/// How a row kernel (softmax, log_softmax, layer_norm, cross_entropy,
/// cross_entropy_grad) reads its operands and writes its result. Empty
/// members give the op's own kernel, text unchanged; a reduction fusion
/// whose root is the row op substitutes a prologue for the row input and
/// an epilogue on store (FusionRowKernels.cpp).
struct RowIO {
  /// Operand 0 (x, logits) at flat index expression `idx`, as a float
  /// expression; empty: the op's own load from in0.
  std::function<std::string(const std::string &idx)> x;
  /// The pointers of operands 1, 2, ... (labels, gamma, beta, the loss
  /// gradient); empty: "in1", "in2", ...
  std::vector<std::string> operands;
  /// A statement storing float `value` as element `idx` of the result;
  /// empty: `out0[idx] = value` rounded to the result type.
  std::function<std::string(const std::string &idx, const std::string &value)>
      store;
  /// As `store`, for a kernel that holds x's value at idx in the float
  /// expression `xval` (layer_norm's row in registers): results made from
  /// x (the residual sum a fusion yields beside the norm) take it instead
  /// of computing the prologue again. Empty: no result reads x; use store.
  std::function<std::string(const std::string &idx, const std::string &value,
                            const std::string &xval)>
      storeX;
  /// The op whose operands and results are the kernel's parameters (the
  /// fusion); null: the row op itself.
  mlir::Operation *paramsOf = nullptr;
  /// Code between the prelude and the kernel (device functions that `x`
  /// and `store` call) and the prelude pieces it needs.
  std::string preamble;
  PreludeNeeds needs;
  /// Where `x` is a plain load of one parameter, widened (a fusion input
  /// or an input through a widening cast): its pointer and element type,
  /// so a kernel may read 16-byte vectors. Empty: not known to be one.
  std::string xPtr;
  Elem xElem = Elem::F32;
  /// Where `store` only rounds the value into one result: its pointer and
  /// element type. Empty: not known to be one.
  std::string outPtr;
  Elem outElem = Elem::F32;
  /// Where a cross_entropy_grad's kernel also computes the loss of the
  /// same logits, targets and reduction (step-fuse-loss): a statement
  /// storing float `value` as element `idx` of the loss (through its
  /// epilogue). Empty: no loss.
  std::function<std::string(const std::string &idx, const std::string &value)>
      lossStore;
  /// The plain read of x as (pointer, element type): xPtr/xElem with a
  /// prologue, the op's own in0 of type `e` without; an empty pointer: x
  /// is computed.
  std::pair<std::string, Elem> plainX(Elem e) const {
    return x ? std::pair{xPtr, xElem} : std::pair{std::string("in0"), e};
  }
  /// The plain store of the result likewise (out0 of type `e` without an
  /// epilogue).
  std::pair<std::string, Elem> plainOut(Elem e) const {
    return store ? std::pair{outPtr, outElem}
                 : std::pair{std::string("out0"), e};
  }
  /// Operand k's pointer.
  std::string operand(unsigned k) const {
    return k - 1 < operands.size() ? operands[k - 1] : "in" + std::to_string(k);
  }
};

/// softmax, log_softmax, layer_norm with `io` (ReduceKernels.cpp);
/// cross_entropy, cross_entropy_grad with `io` (NNKernels.cpp);
/// std::nullopt for any other op.
std::optional<KernelSource> emitNormKernel(mlir::Operation *op,
                                           const std::string &name,
                                           const RowIO &io);
std::optional<KernelSource> emitLossKernel(mlir::Operation *op,
                                           const std::string &name,
                                           const RowIO &io);

/// cross_entropy, cross_entropy_grad, embedding_grad (NNKernels.cpp),
/// attention, attention_grad (through emitAttentionFamily).
std::optional<KernelSource> emitNNFamily(mlir::Operation *op,
                                         const std::string &name);
/// attention and attention_grad (AttentionKernels.cpp); std::nullopt for
/// any other op.
std::optional<KernelSource> emitAttentionFamily(mlir::Operation *op,
                                                const std::string &name);

/// sgd_update, adamw_update, lamb_update (TrainKernels.cpp), check_finite
/// (through emitCheckFinite).
std::optional<KernelSource> emitTrainFamily(mlir::Operation *op,
                                            const std::string &name);
/// The one kernel of check_finite over all its operands, std::nullopt for
/// any other op (CheckFiniteKernels.cpp).
std::optional<KernelSource> emitCheckFinite(mlir::Operation *op,
                                            const std::string &name);
/// The per-element code of sgd_update or adamw_update (std::nullopt for
/// any other op): `pre` reads the rank-0 step and lr through the pointer
/// expressions `step` and `lr` ("in4" and "in5" in AdamW's own kernel);
/// operand k is `a<k>`, result k `r<k>`. Shared by the op's own kernel and
/// the multi-tensor optimizer kernel.
std::optional<ElementwiseSpec> updateSpec(mlir::Operation *op,
                                          const std::string &step,
                                          const std::string &lr);

/// The one kernel of a `loop` or `reduction` step.fusion
/// (FusionKernels.cpp); throws rt::Error("codegen: ...") for another kind
/// or a body it cannot fuse.
KernelSource emitFusionKernel(mlir::step::FusionOp fusion,
                              const std::string &name);

/// The one kernel of a `multi_tensor` step.fusion (MultiTensorKernels.cpp),
/// std::nullopt for any other op.
std::optional<KernelSource> emitMultiTensorFamily(mlir::Operation *op,
                                                  const std::string &name);

} // namespace step::codegen::detail

#endif // STEP_COMPILER_CODEGEN_EMITTERS_H
