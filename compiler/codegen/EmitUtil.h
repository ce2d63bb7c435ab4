//===- EmitUtil.h - Helpers shared by the CUDA kernel emitters --*- C++ -*-===//
//
// Internal to compiler/codegen: element types and their CUDA spellings, exact
// constant literals, the per-kernel prelude (only the headers and helpers a
// kernel uses, so f32 kernels never pay for cuda_fp16.h), `$NAME` template
// substitution, launch-size helpers, and the generic elementwise emitter
// that unary/binary/compare/select/cast/dropout/copies and the per-element
// optimizer updates share.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_EMITUTIL_H
#define STEP_COMPILER_CODEGEN_EMITUTIL_H

#include "compiler/codegen/CudaKernels.h"

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace step::codegen::detail {

enum class Elem { F32, F16, BF16, I32, I64, I1 };

/// The element type of a ranked tensor type; throws rt::Error for anything
/// else or for a dynamic shape (kernels bake shapes in).
Elem elemOf(mlir::Type type);
std::vector<int64_t> shapeOf(mlir::Value v);
int64_t numelOf(mlir::Value v);

const char *cType(Elem e);
bool isFloat(Elem e);
int elemBytes(Elem e);
/// `expr` (of storage type e) widened to float; integers are converted.
std::string toF(Elem e, const std::string &expr);
/// A float `expr` rounded to nearest even into storage type e.
std::string fromF(Elem e, const std::string &expr);
/// A double `expr` rounded once into float storage type e.
std::string fromD(Elem e, const std::string &expr);

/// `value` as a constant of storage type e, rounded as setFromDouble does
/// (a pad's fill value).
std::string typedConstant(Elem e, double value);

/// Exact literals: a float (round-trips, "f" suffix; inf/nan spelled with
/// __int_as_float), a double, a signed and an unsigned 64-bit integer.
std::string litF(double v);
std::string litD(double v);
std::string litI(int64_t v);
std::string litU(uint64_t v);

/// Replaces every `$NAME` ([A-Za-z_][A-Za-z0-9_]*) or `${NAME}` in `tmpl`
/// by its value;
/// an unknown name throws std::logic_error (an emitter bug).
std::string subst(const std::string &tmpl,
                  const std::vector<std::pair<std::string, std::string>> &vars);

/// What a kernel's prelude declares.
struct PreludeNeeds {
  bool half = false, bf16 = false; ///< include cuda_fp16.h / cuda_bf16.h
  bool vec = false;                ///< the aligned Vec<T, N> type
  bool reduce = false;             ///< warp/block reductions, maxNaN
  bool splitmix = false;           ///< splitmix64 (dropout)
  void add(Elem e);
};
std::string prelude(const PreludeNeeds &needs);

/// "int" when every index below `n` fits comfortably, else "long long".
std::string idxType(int64_t n);
/// Blocks for a grid-stride loop over `work` items with `block` threads:
/// ceil(work / block), at least 1, at most kMaxGrid.
int64_t gridFor(int64_t work, int64_t block);
constexpr int64_t kMaxGrid = 4096;
/// A block size for reducing `k` items: a multiple of 32 in [32, maxBlock].
int64_t blockForRow(int64_t k, int64_t maxBlock = 256);

/// How a kernel over `rows` rows of `k` contiguous-or-strided elements (a
/// row reduction, layer_norm, softmax) maps rows to threads. Short rows
/// (k <= kWarpRowMax) go one per warp, kWarpRowsPerBlock rows per block:
/// each lane takes every 32nd element and the row's combination is
/// warpReduce alone (no shared memory, no __syncthreads), where a block per
/// row of 768 elements would leave most of its threads one element and
/// wait on two barriers per reduction. Longer rows: a block per row
/// (blockForRow(k, maxBlock) threads), blockReduce.
///
/// A row kernel's template uses, from vars():
///   $ROWS_FOR   opens the grid-stride loop over rows; defines `row` ($I)
///               and `live_` (false only for a warp past the last row:
///               every warp of a block runs the same iterations, so
///               shuffles stay convergent);
///   $TID, $NTH  this thread's first element and the stride of a row loop;
///   $PW         rowReduce's first template argument (prelude):
///               rowReduce<$PW>(v, op, identity, sh);
///   $LEAD       the one thread of the row that stores a per-row result.
/// Row loops test `live_ && j < K`.
struct RowMapping {
  bool perWarp = false;
  int64_t block = 32;
  int64_t grid = 1;
  std::vector<std::pair<std::string, std::string>>
  vars(const std::string &I, int64_t rows) const;
};
constexpr int64_t kWarpRowMax = 1024;
constexpr int64_t kWarpRowsPerBlock = 8;
/// Most blocks of a row_chain kernel with column reductions: each block
/// writes one partial per column (RowChainKernels.cpp), so the partials
/// (G x cols) stay small beside the rows (GPT-2 124M at B = 8: 528 x 768
/// f32 = 1.6 MB per column reduction against 8192 rows), each block
/// taking a few rows: four 8-warp blocks per SM of an H100/H200 (132
/// SMs; the column sums in shared memory, 24 KB a block each for K = 768,
/// leave registers for four).
constexpr int64_t kChainColumnBlocks = 528;
/// Most elements a thread takes of a row_chain row for its passes to be
/// unrolled (a warp row of up to 1024 elements: 32).
constexpr int64_t kChainUnrollMax = 32;
/// Most registers a thread of an unrolled row_chain kernel gives to the
/// row's elements of inputs that several passes read (loaded once a row
/// instead of once a pass): GPT-2's layer-norm gradient keeps x (f32) and
/// the output gradient (bf16), 24 elements a lane each at width 768.
constexpr int64_t kChainCacheMax = 64;
/// Such a kernel with column reductions and at most kChainCachedForThree
/// cached registers a thread: blocks resident an SM (its launch bounds,
/// which cap a thread at 80 registers; GPT-2's takes 80 with 48 cached,
/// ptxas sm_90, where two cached rows of 1024 would spill) and the grid,
/// one wave of them on 132 SMs (528 blocks, two waves at three an SM,
/// would give the second wave's SMs one block each). More cached: 528
/// blocks and no bound.
constexpr int64_t kChainCachedForThree = 48;
constexpr int kChainCachedBlocksPerSM = 3;
constexpr int64_t kChainCachedColumnBlocks = 3 * 132;
RowMapping rowMapping(int64_t rows, int64_t k, int64_t maxBlock = 256);

/// How a column reduction (the innermost dim kept: `m` outputs, each the
/// reduction of `k` rows) spreads over the grid. Blocks take 32 lanes of
/// `vec` adjacent outputs x 8 row lanes; with `chunks` > 1 the rows are
/// cut into chunks of `chunk` rows (a multiple of 8) and a block takes one
/// (32 vec outputs, chunk) tile, so a few hundred outputs still fill the
/// GPU. `chunks` == 1 when the plain kernel already has enough blocks or
/// the rows are too few to cut.
struct ColumnSplit {
  int64_t vec = 1;    ///< adjacent outputs a thread takes (split kernel)
  int64_t tiles = 1;  ///< ceil(m / (32 vec))
  int64_t chunks = 1; ///< row chunks per tile
  int64_t chunk = 0;  ///< rows per chunk; the last may have fewer
};
/// `vec` 4 where the outputs' innermost run (`keptInner`, the last kept
/// dim of stride 1 after merging; 0 if none) is a multiple of 4, so a
/// thread's 4 outputs are adjacent in memory at every row; else 1.
ColumnSplit columnSplit(int64_t m, int64_t k, int64_t keptInner);
/// Blocks a split column reduction aims for: about one full wave of
/// 256-thread blocks on an H100/H200 (132 SMs x 8 resident blocks).
constexpr int64_t kColumnTargetBlocks = 1024;
/// The fewest rows of a chunk (16 per lane; half that where a lane reads
/// 4 outputs at once): below it a block's fixed cost (the partials, the
/// ticket) outweighs its reads.
constexpr int64_t kColumnMinChunk = 128;

/// The kernel's parameter list (operands "in<i>" const, then results
/// "out<j>") and fills `ks.params` with the names in that order.
std::string paramList(mlir::Operation *op, KernelSource &ks,
                      PreludeNeeds &needs, bool restrict);
/// Each non-empty line of `code` prefixed by `by` (every line ends in a
/// newline; an empty line stays empty).
std::string indent(const std::string &code, const std::string &by);
/// `extern "C" __global__ void __launch_bounds__(block) name(params)`;
/// with `minBlocks`, `__launch_bounds__(block, minBlocks)` (ptxas keeps
/// the registers to what that many resident blocks an SM allow).
std::string signature(const KernelSource &ks, const std::string &params,
                      int minBlocks = 0);

/// Row-major strides of `shape`, in elements.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);
/// Code that decomposes index variable `var` (destroyed) over `dims` (the
/// last is fastest) and adds `coord * strides[d]` to `acc`; dims of size 1
/// or stride 0 emit nothing. Declares nothing: `var` and `acc` exist.
std::string decompose(const std::string &var, const std::string &acc,
                      const std::vector<int64_t> &dims,
                      const std::vector<int64_t> &strides);

/// Index dims with their strides, adjacent dims that are contiguous in
/// memory merged (so a trailing block of dims decomposes as one); the
/// reduction kernels, fused or not, index through it.
struct DimList {
  std::vector<int64_t> dims, strides;
  void add(int64_t dim, int64_t stride) {
    if (dim == 1)
      return;
    if (!dims.empty() && strides.back() == dim * stride) {
      dims.back() *= dim;
      strides.back() = stride;
      return;
    }
    dims.push_back(dim);
    strides.push_back(stride);
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
  std::string offset(const std::string &var, const std::string &acc) const {
    return decompose(var, acc, dims, strides);
  }
  /// The size of the innermost dim when its stride is 1, else 0.
  int64_t innerRun() const {
    return !dims.empty() && strides.back() == 1 ? dims.back() : 0;
  }
};

/// One elementwise kernel: operand k is per element unless `uniform[k]`
/// (a rank-0 scalar the `pre` code reads once, e.g. the optimizer's step
/// and lr). With `asFloat`, float values are loaded as `float a<k>` and
/// float results `r<k>` are float, rounded on store; integers and i1 are
/// always raw. `body` assigns every r<k> and may read `i` (the flat index,
/// when `needsIndex`). Vectorized by 4 when n % 4 == 0 and every
/// per-element type has at most 4 bytes.
struct ElementwiseSpec {
  std::vector<bool> uniform; ///< per operand; empty = none uniform
  /// `pre` only loads each uniform operand k into `a<k>` (element 0), so a
  /// fusion can load them itself (FusionExpr) and skip `pre`.
  bool preLoadsUniforms = false;
  bool asFloat = true;
  bool needsIndex = false;
  std::string pre, body;
  PreludeNeeds needs;
};
KernelSource emitElementwise(mlir::Operation *op, const std::string &name,
                             const ElementwiseSpec &spec);

} // namespace step::codegen::detail

#endif // STEP_COMPILER_CODEGEN_EMITUTIL_H
