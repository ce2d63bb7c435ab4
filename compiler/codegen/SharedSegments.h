//===- SharedSegments.h - One copy of the code tensors share ----*- C++ -*-===//
//
// Internal to compiler/codegen. The kernels that run one segment of the
// grid per tensor (multi_tensor fusions, MultiTensorKernels.cpp;
// step.check_finite, CheckFiniteKernels.cpp) find a block's segment by a
// binary search over the segment starts and run that tensor's code. Many
// tensors' code differs only in which kernel pointers it reads and writes
// and in a few numbers (first block, chunk, work items): GPT-2 124M's
// AdamW kernels hold 48 tensors of 4 such codes. shareSegments emits each
// such code once.
//
// Algorithm: each segment's code comes with its pointers as the kernel's
// parameter names (in<k>, out<k>) and its numbers as `${name}` placeholders
// (SegmentVar). The code is renamed: in<k>, out<k>, and the vector locals
// vx<k>, vy<k>, each prefix numbered in order of first use (in7 in5 in7 ->
// sin0 sin1 sin0); two segments whose renamed code, pointer types and
// number types are equal share it. A segment alone with its code is
// inlined in its dispatch leaf, its placeholders replaced by its literals.
// A segment sharing code c only sets `code = c, seg = k` in its leaf; after
// the dispatch, under `if (code == c)`, the pointers every segment of the
// code passes alike are bound directly, a `switch (seg)` binds the ones the
// code's head reads, the head runs, a second `switch (seg)` binds the
// others and the numbers, and the loop runs. The pointers the loop reads
// are bound after the head, so that none is held in a register across it
// (AdamW's head computes two double pows: bound before it, one of GPT-2's
// AdamW kernels took 54 registers, this way 48; inlined, 36).
//
// Cost: source, and NVRTC time, in the distinct codes instead of the
// tensors (GPT-2 124M's AdamW kernels: 142 KB and 2.2-3.0 s a cubin with
// 48 inlined copies, 25-32 KB shared); at run time a switch a thread, and
// the loop's pointers in registers instead of the constant bank.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_SHAREDSEGMENTS_H
#define STEP_COMPILER_CODEGEN_SHAREDSEGMENTS_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class Operation;
} // namespace mlir

namespace step::codegen::detail {

/// CUDA's limit on a kernel's parameter bytes (sm_70+ before CUDA 12.1):
/// what a multi-tensor kernel's pointer and size list must fit.
constexpr int64_t kMaxParamBytes = 4096;
/// Threads per block of the multi-tensor and check_finite kernels, and the
/// most chunks (virtual blocks) one tensor is cut into there.
constexpr int64_t kSegmentBlock = 256;
constexpr int64_t kMaxSegmentChunks = 1024;

/// A number of a segment's code: written `${name}` in the code, a local
/// `type name` where the code is shared, `literal` where it is inlined.
struct SegmentVar {
  std::string name, type, literal;
};

/// One segment's code: `head` (before its loop) and `loop`, which use the
/// kernel's pointer parameters by name (in<k>, out<k>) and its numbers as
/// `${name}` placeholders.
struct SegmentCode {
  std::string comment; ///< "// tensor k: ..." opening its dispatch leaf
  std::string head, loop;
  std::vector<SegmentVar> vars;
};

/// The dispatch leaves of `segs` (see the file comment); the shared codes
/// are appended to `after`, indented by `by`, to be placed right after the
/// dispatch, in the scope where `int code = -1, seg = -1;` was declared
/// before it (declare it when `after` is not empty). `op` is the kernel's
/// op: its operand k is the parameter in<k>, its result k out<k>.
std::vector<std::string> shareSegments(mlir::Operation *op,
                                       const std::vector<SegmentCode> &segs,
                                       const std::string &by,
                                       std::string &after);

/// `int code = -1, seg = -1;` (the shared code of this block's segment,
/// -1: its own, inlined; the segment's number) indented by `by` when
/// `after` is not empty, else nothing.
inline std::string codeDecl(const std::string &after,
                            const std::string &by = "  ") {
  return after.empty() ? std::string() : by + "int code = -1, seg = -1;\n";
}

/// Runs leaves[k] for the blocks of segment k (starts[k] its first): a
/// binary search over the starts on `var` ("blockIdx.x"), as nested ifs
/// on literals, indented by `by`.
std::string dispatchSegments(const std::vector<int64_t> &starts,
                             const std::vector<std::string> &leaves,
                             const std::string &var, const std::string &by);

} // namespace step::codegen::detail

#endif // STEP_COMPILER_CODEGEN_SHAREDSEGMENTS_H
