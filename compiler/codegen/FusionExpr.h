//===- FusionExpr.h - Per-element code of a step.fusion body ----*- C++ -*-===//
//
// Internal to compiler/codegen. A FusionExpr turns the body of a
// `step.fusion` into C++ statements that compute any body value at one flat
// index of that value's own shape; the fused kernel emitters (loop,
// reduction, multi_tensor prologues) put those statements inside their
// loops and store the locals they get back.
//
// Algorithm: `valueAt(v, idx)` recurses through v's definition:
//  - block argument k: `in<k>[idx]` (f16/bf16 widened to float);
//  - elementwise op (and reshape, stop_gradient): its operands at `idx`,
//    then the op's own ElementwiseSpec body (Emitters.h) in its own `{ }`
//    scope with a0, a1, ... bound, `i` = idx when the spec needs the
//    index, and r0 copied out; so fused math is the unfused kernel's;
//  - reshape: the operand at the same idx (a row-major flat index does not
//    change);
//  - broadcast_in_dim: idx decomposed over the result dims and recomposed
//    with the operand's strides (size-1 operand dims repeat), into a fresh
//    index local; the operand's index is idx itself when the broadcast only
//    adds size-1 dims, and 0 when the operand has one element; where the
//    caller declared idx = row * width + col (splitIndex) and the result's
//    innermost dims hold width elements, col and row are decomposed
//    instead (no division by the row length);
//  - pad: idx decomposed over the padded dims (adjacent unpadded ones
//    merged), the operand read at the coordinates less the low padding
//    where all lie inside it, else the padding value; 32-bit index math
//    where the tensor has fewer than 2^30 elements (GPT-2's packed q/k/v
//    gradient sums three pads of [8192, 2304]: 3672 -> 2584 sm_90 SASS
//    instructions in its column-reduction kernel against 64-bit math);
//  - a float add tree of pads with fill +0.0 whose windows tile the result
//    along one dim, the other dims unpadded (the concatenation that the
//    gradient of slices makes, GPT-2's packed q/k/v gradient): idx
//    decomposed once, the one piece whose window holds it read, plus
//    +0.0f. Bit for bit the adds: every element is one piece's value plus
//    zeros, and x + +0 is x except that -0 becomes +0. (As three pads
//    and two adds: 2584 -> 1536 sm_90 instructions in that kernel.)
// Each (value, idx string) is computed once per scope (memoized); values
// with one element that come straight from an input (rank-0 scalars such as
// a loss scale) are loaded once, in hoisted code for the kernel's start.
//
// Value representation (the "local" of a value): a float tensor's element
// is a `float` holding a value exactly representable in the tensor's type
// (an f16/bf16 op result is rounded to its type at once, as the unfused
// kernel's store and reload would, and the rounded storage value is kept
// beside it for the stores: storageOf); i32/i64/i1 elements are `int`,
// `long long`, `unsigned char`. Specs with asFloat=false see their operands
// in the storage type (converted exactly) as their own kernel does.
//
// Cost: one statement block per (op, index) used; broadcast index math is
// O(rank) integer divisions by constants.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_FUSIONEXPR_H
#define STEP_COMPILER_CODEGEN_FUSIONEXPR_H

#include "compiler/codegen/EmitUtil.h"

#include "mlir/IR/Value.h"

#include <map>
#include <set>
#include <string>
#include <utility>

namespace mlir::step {
class FusionOp;
} // namespace mlir::step

namespace step::codegen::detail {

class FusionExpr {
public:
  /// Code for the body of `fusion`; element types and prelude pieces the
  /// code needs (cuda_fp16.h, splitmix64, ...) are added to `needs`, which
  /// must outlive this object.
  FusionExpr(mlir::step::FusionOp fusion, PreludeNeeds &needs);

  /// The name of a local (see "Value representation") holding body value
  /// `v` at flat index `idx` (a C++ expression of v's own shape, e.g. "i"
  /// or "row * 64 + j", evaluated in the code's scope); appends the code
  /// computing it, unless this (v, idx) was computed or bound in the scope.
  /// Throws rt::Error("codegen: ...") for an op it cannot compute.
  std::string valueAt(mlir::Value v, const std::string &idx);

  /// The code appended since the last call, each line prefixed by `indent`.
  /// It must be placed in one scope, in order, before the code that uses
  /// the locals it declares.
  std::string takeCode(const std::string &indent = "    ");

  /// Code for the start of the kernel (outside every loop): the loads of
  /// one-element inputs that valueAt hoisted. Take it after all valueAt
  /// calls.
  std::string takeHoisted(const std::string &indent = "  ");

  /// Declares that `local` (a variable in v's local representation, e.g. a
  /// reduction's result) holds v at `idx` in the current scope.
  void bind(mlir::Value v, const std::string &idx, const std::string &local);
  /// Declares that the storage-typed expression `expr` (e.g. "x0.v[e]", a
  /// vector lane) holds v at `idx`; converted to a local when first used.
  void bindStorage(mlir::Value v, const std::string &idx,
                   const std::string &expr);

  /// Declares that `local` holds v at every index this code reads it at (a
  /// row_chain's per-row value inside its row): valueAt returns it for
  /// any idx, and a broadcast of v costs no index arithmetic. Kept by
  /// resetScope; forgotten by resetUniform.
  void bindUniform(mlir::Value v, const std::string &local);
  void resetUniform() { uniform_.clear(); }

  /// Declares that the index expression `idx` equals row * width + col
  /// (a row kernel's element: `off` = row `o` times the row length plus
  /// the lane's column `kk`), kept until the next call. A broadcast read at
  /// `idx` whose result's innermost dims hold exactly `width` elements then
  /// decomposes `col` over those dims and `row` over the others, instead of
  /// dividing `idx` by the row length (GPT-2's layer-norm gradient reads
  /// gamma at off % 768 twice an element).
  void splitIndex(const std::string &idx, const std::string &row,
                  const std::string &col, int64_t width);

  /// The block arguments the code computed since the last call read from
  /// memory at `idx` (a bound or memoized value reads nothing); forgets
  /// them.
  std::set<unsigned> takeArgReads(const std::string &idx);

  /// Forgets every memoized value and binding (not the hoisted ones): call
  /// it when leaving the scope the taken code was placed in.
  void resetScope();

  /// The C++ type of v's locals: "float" for f32/f16/bf16, else the
  /// storage type.
  static std::string localType(mlir::Value v);
  /// Storage expression `expr` of v's element type as a local (widened).
  static std::string toLocal(mlir::Value v, const std::string &expr);
  /// Local `local` of v as its storage type (exact: locals are rounded).
  static std::string toStorage(mlir::Value v, const std::string &local);
  /// The same for a local this object computed: an f16/bf16 op's result
  /// is the storage value it was rounded to (declared beside the local),
  /// so its store converts nothing; any other local as toStorage.
  std::string storageOf(mlir::Value v, const std::string &local) const;

private:
  std::string compute(mlir::Value v, const std::string &idx);
  /// v at idx when v is a sum of +0.0 pads that tile it along one dim (a
  /// concatenation), else "".
  std::string concat(mlir::Value v, const std::string &idx);
  std::string fresh(const char *prefix);
  void line(const std::string &text);

  mlir::Block *block_;
  PreludeNeeds &needs_;
  std::map<std::pair<void *, std::string>, std::string> memo_;
  std::map<std::pair<void *, std::string>, std::string> storage_;
  std::map<void *, std::string> hoisted_, uniform_;
  std::map<std::string, std::set<unsigned>> argReads_; ///< by index
  /// Local -> the storage-typed variable it was rounded from (fresh names
  /// are unique, so this outlives resetScope).
  std::map<std::string, std::string> roundedStorage_;
  struct Split {
    std::string idx, row, col;
    int64_t width = 0;
  };
  Split split_;
  std::string code_, hoistedCode_;
  int counter_ = 0;
};

} // namespace step::codegen::detail

#endif // STEP_COMPILER_CODEGEN_FUSIONEXPR_H
