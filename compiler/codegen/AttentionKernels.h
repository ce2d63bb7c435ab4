//===- AttentionKernels.h - Shared by the attention emitters ----*- C++ -*-===//
//
// The sizes an attention kernel is specialized for, and the tensor-core
// variants (AttentionTensorCore.cpp) that AttentionKernels.cpp picks for
// f16/bf16 heads whose widths are multiples of 16.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_ATTENTIONKERNELS_H
#define STEP_COMPILER_CODEGEN_ATTENTIONKERNELS_H

#include "compiler/codegen/EmitUtil.h"

#include "dialects/step/StepOps.h"

#include <cmath>
#include <optional>
#include <string>

namespace step::codegen::detail {

/// The sizes of an attention (or its gradient) over q [S..., Tq, D],
/// k [S..., Tk, D], v [S..., Tk, Dv]: `slices` is the product of S.
struct AttentionShape {
  int64_t slices, tq, tk, d, dv;
  double scale;
  Elem e;
};

template <typename AttentionLikeOp>
AttentionShape attentionShapeOf(AttentionLikeOp op) {
  std::vector<int64_t> qs = shapeOf(op.getQuery());
  size_t r = qs.size();
  AttentionShape a;
  a.slices = 1;
  for (size_t i = 0; i + 2 < r; ++i)
    a.slices *= qs[i];
  a.tq = qs[r - 2];
  a.d = qs[r - 1];
  a.tk = shapeOf(op.getKey())[r - 2];
  a.dv = shapeOf(op.getValue())[r - 1];
  a.scale = op.getScale() ? op.getScale()->convertToDouble()
                          : 1.0 / std::sqrt(static_cast<double>(a.d));
  a.e = elemOf(op.getQuery().getType());
  return a;
}

/// The shape of step.attention, step.attention_lse or step.attention_grad.
inline AttentionShape attentionShape(mlir::Operation *op) {
  if (auto a = mlir::dyn_cast<mlir::step::AttentionOp>(op))
    return attentionShapeOf(a);
  if (auto a = mlir::dyn_cast<mlir::step::AttentionLseOp>(op))
    return attentionShapeOf(a);
  return attentionShapeOf(mlir::cast<mlir::step::AttentionGradOp>(op));
}

/// Whether the op masks keys causally.
inline bool causalOf(mlir::Operation *op) {
  if (auto a = mlir::dyn_cast<mlir::step::AttentionOp>(op))
    return a.getCausal();
  if (auto a = mlir::dyn_cast<mlir::step::AttentionLseOp>(op))
    return a.getCausal();
  return mlir::cast<mlir::step::AttentionGradOp>(op).getCausal();
}

/// The op's valid length operand (null when it has none).
inline mlir::Value validOf(mlir::Operation *op) {
  if (auto a = mlir::dyn_cast<mlir::step::AttentionOp>(op))
    return a.getValid();
  if (auto a = mlir::dyn_cast<mlir::step::AttentionLseOp>(op))
    return a.getValid();
  return mlir::cast<mlir::step::AttentionGradOp>(op).getValid();
}

/// The declaration, at the top of an attention kernel, of the query rows
/// `lq_` and keys `lk_` it computes: Tq and Tk (constants), or the op's
/// `valid` operand (`in3` of attention, `in4` of attention_grad, read on the
/// device so a CUDA graph replays any length) clamped to them. Tiles past
/// them are skipped and their rows written as 0.
inline std::string validLengths(mlir::Operation *op, const AttentionShape &a) {
  std::string tq = std::to_string(a.tq), tk = std::to_string(a.tk);
  mlir::Value valid = validOf(op);
  if (!valid)
    return "  const int lq_ = " + tq + ", lk_ = " + tk + ";\n";
  unsigned at = 0;
  while (op->getOperand(at) != valid)
    ++at;
  std::string in = "in" + std::to_string(at) + "[0]";
  return "  const long long l_ = " + in + " < 0 ? 0 : " + in + ";\n" +
         "  const int lq_ = (int)(l_ < " + tq + " ? l_ : " + tq +
         "), lk_ = (int)(l_ < " + tk + " ? l_ : " + tk + ");\n";
}

/// Byte offsets of a tiled kernel's shared-memory regions, each a
/// multiple of 128 bytes.
struct SharedRegions {
  int64_t bytes = 0;
  int64_t add(int64_t n) {
    int64_t at = bytes;
    bytes += (n + 127) / 128 * 128;
    return at;
  }
};

/// Dynamic shared memory the tiled attention kernels may stage (sm_80
/// allows 163 KB a block, sm_90 227 KB).
constexpr int64_t kAttentionMaxShared = 160 * 1024;

/// The fallbacks for a head too wide for 16-row tiles (AttentionOneRow.cpp):
/// a block per query row, and a block per (batch, head) slice.
KernelSource emitAttentionOneRow(mlir::Operation *op, const std::string &name);
KernelSource emitAttentionGradOneBlock(mlir::step::AttentionGradOp op,
                                       const std::string &name);

/// attention or attention_lse on tensor cores with register-level tiles
/// (mma.sync m16n8k16, AttentionMma.cpp): f16/bf16 with D and Dv multiples
/// of 16, at most 128; std::nullopt otherwise.
std::optional<KernelSource> emitAttentionMma(mlir::Operation *op,
                                             const AttentionShape &a,
                                             bool causal,
                                             const std::string &name);

/// attention (`grad` false: in0..2 = q, k, v, out0) or attention_grad
/// (`grad`: in0..3 = q, k, v, g, out0..2 = dq, dk, dv) on tensor cores
/// (wmma, sm_80+): f16/bf16 with D and Dv multiples of 16; std::nullopt
/// for any other shape or type (the CUDA-core kernels take those).
std::optional<KernelSource> emitAttentionTensorCore(mlir::Operation *op,
                                                    const AttentionShape &a,
                                                    bool causal, bool grad,
                                                    const std::string &name);

} // namespace step::codegen::detail

#endif
