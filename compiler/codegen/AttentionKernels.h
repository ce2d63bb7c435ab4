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

#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"

#include <algorithm>
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

/// Where an attention kernel reads one of the attention op's operands or
/// writes one of its results (AttentionPorts.cpp).
struct AttentionPort {
  std::string role;  ///< q k v g valid out lse (operands); o lse dq dk dv
  std::string param; ///< the kernel parameter: in<i> or out<j>
  /// Row tensors [S..., T, W]: slice b's first row, a C expression of the
  /// kernel's `long long b` (e.g. "(in0 + (b / 12 * 2304 + b % 12 * 64))"),
  /// and the row stride in elements; others: `param` and 0.
  std::string at;
  int64_t ld = 0;
  /// Every slice's first row and the row stride are multiples of 8
  /// elements (16-byte rows for 16-bit types, given aligned buffers).
  bool aligned8 = true;
  mlir::step::StridedView view; ///< in the parameter's buffer
  int64_t bufferElems = 0;      ///< the parameter's element count
};

/// The attention op a kernel computes and the ports of its operands and
/// results: for the op itself its own parameters, contiguous; for an
/// attention fusion (step-fuse-attention) the fusion's parameters, read
/// and written through the body's views (no copies).
struct AttentionIO {
  mlir::Operation *attention = nullptr; ///< attention, _lse or _grad
  mlir::Operation *launched = nullptr;  ///< whose in<i>/out<j> they are
  std::vector<AttentionPort> in, out;   ///< by operand / result number
  /// For each port of role R (upper case; the saved out and lse are SO and
  /// SL, the valid length VL, attention_lse's result LSE): R_P (param),
  /// R_AT (slice b's first row), R_LD (row stride).
  std::vector<std::pair<std::string, std::string>> vars() const;
  /// Whether every row port has 16-byte rows (aligned8).
  bool aligned8() const;
  /// `// step.port ROLE PARAM offset=.. sizes=.. strides=.. buffer=..`
  /// lines, one per port, at the top of the kernel source: what the kernel
  /// reads and writes where (tests/e2e/cuda_emulation.py lays its inputs
  /// out by them).
  std::string comment() const;
};
/// `op`: an attention op or an attention fusion; throws rt::Error where a
/// port has no unit innermost stride (the fusion verifier rules that out).
AttentionIO attentionIO(mlir::Operation *op);

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

/// The declaration, at the top of an attention kernel, of the query rows
/// `lq_` and keys `lk_` it computes: Tq and Tk (constants), or the op's
/// `valid` operand (its port, read on the device so a CUDA graph replays
/// any length) clamped to them. Tiles past them are skipped and their rows
/// written as 0.
inline std::string validLengths(const AttentionIO &io,
                                const AttentionShape &a) {
  std::string tq = std::to_string(a.tq), tk = std::to_string(a.tk);
  for (const AttentionPort &p : io.in) {
    if (p.role != "valid")
      continue;
    std::string in = p.param + "[0]";
    return "  const long long l_ = " + in + " < 0 ? 0 : " + in + ";\n" +
           "  const int lq_ = (int)(l_ < " + tq + " ? l_ : " + tq +
           "), lk_ = (int)(l_ < " + tk + " ? l_ : " + tk + ");\n";
  }
  return "  const int lq_ = " + tq + ", lk_ = " + tk + ";\n";
}

/// Blocks for a grid-stride loop over `items` tiles (at least 1, at most
/// 65535).
inline int64_t tileGrid(int64_t items) {
  return std::min<int64_t>(std::max<int64_t>(items, 1), 65535);
}

/// Bytes of the rows one slice's tiles stream (the other side's K and V,
/// or Q and G) that the register-level gradient kernels keep together in
/// L2: about half the 50 MB of an H100's or H200's. On the H200
/// (2026-11-27 profiles) GPT-2 124M's gradient at B = 8, 96 slices of 256
/// KiB (24 MiB, exactly this: one group, the plain walk) in flight, took
/// 3.62 ms; at B = 16, 48 MiB, 2.3-2.4x that, where the forward,
/// streaming as many bytes, took twice B = 8's time. The per-row
/// statistics launch 2 also reads (8 bytes a query row) are left out of
/// the estimate, so B = 8 stays at one group (codegen.attention_item_order
/// checks that shape).
constexpr int64_t kAttentionL2Bytes = 24 << 20;

/// The statements of a tiled kernel's grid-stride loop that place work
/// item `w` of `slices` x `tiles` items: `b`, its slice, and the tile's
/// rank in the walk's order (0 first), as the substitutions ITEM_PRE (the
/// statements before `b`), ITEM_B and ITEM_RANK. Items go tile rank
/// first, slice second (the heaviest causal tiles of every slice first),
/// in groups of as many slices as `sliceBytes` each fit
/// kAttentionL2Bytes (all slices at once when they fit, or when
/// `sliceBytes` is 0: `b = w % slices`, rank `w / slices`), so the blocks
/// running together share their slices' rows in L2.
std::vector<std::pair<std::string, std::string>>
itemPlacement(int64_t slices, int64_t tiles, int64_t sliceBytes);

/// The register-level (mma) kernels' 64-row tiles of a head: staged rows
/// padded by 8 elements (LDT for D, LDV for Dv), the bytes of a staged
/// 64-row tile of each, and the query and key tiles of a slice.
struct MmaTiles {
  static constexpr int64_t kRows = 64;
  int64_t ldt, ldv, qBytes, vBytes, qTiles, kTiles;
  explicit MmaTiles(const AttentionShape &a)
      : ldt(a.d + 8), ldv(a.dv + 8), qBytes(kRows * ldt * 2),
        vBytes(kRows * ldv * 2), qTiles((a.tq + kRows - 1) / kRows),
        kTiles((a.tk + kRows - 1) / kRows) {}
};

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
/// Most bytes of dS scratch the saved-dS gradient keeps (a module-scope
/// array, AttentionMmaGrad.cpp); beyond it the gradient recomputes.
constexpr int64_t kAttentionMaxScratch = int64_t(1) << 30;

/// The fallbacks for a head too wide for 16-row tiles (AttentionOneRow.cpp):
/// a block per query row, and a block per (batch, head) slice.
KernelSource emitAttentionOneRow(const AttentionIO &io,
                                 const std::string &name);
KernelSource emitAttentionGradOneBlock(const AttentionIO &io,
                                       const std::string &name);

/// attention or attention_lse on tensor cores with register-level tiles
/// (mma.sync m16n8k16, AttentionMma.cpp): f16/bf16 with D and Dv multiples
/// of 16, at most 128; std::nullopt otherwise.
std::optional<KernelSource> emitAttentionMma(const AttentionIO &io,
                                             const AttentionShape &a,
                                             bool causal,
                                             const std::string &name);

/// How the mma gradient forms dq (AttentionMmaGrad.cpp): recomputing the
/// scores per query tile, from dS stored by the dk/dv launch, or added
/// into an f32 accumulator by the dk/dv launch with atomics.
enum class DqForm { Recompute, SavedDs, Atomic };

/// The gradient entry points of the mma kernels (AttentionMmaGrad.cpp):
/// sets `ks`'s source (after `src`, the helpers; each entry point opens
/// with `views`), launches and shared memory for `form`. `vars` are
/// emitAttentionMma's substitutions.
void emitAttentionMmaGrad(
    KernelSource &ks, const AttentionShape &a, bool causal, DqForm form,
    const std::string &src, const std::string &views, const std::string &params,
    std::vector<std::pair<std::string, std::string>> vars);

/// attention (`grad` false) or attention_grad (`grad`) on tensor cores
/// (wmma, sm_80+): f16/bf16 with D and Dv multiples of 16; std::nullopt
/// for any other shape or type (the CUDA-core kernels take those).
std::optional<KernelSource> emitAttentionTensorCore(const AttentionIO &io,
                                                    const AttentionShape &a,
                                                    bool causal, bool grad,
                                                    const std::string &name);

} // namespace step::codegen::detail

#endif
