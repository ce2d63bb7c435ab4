//===- CheckFiniteKernels.cpp - The one kernel of step.check_finite -------===//
//
// step.check_finite over K gradients is one launch, laid out as form B of
// MultiTensorKernels.cpp: tensor k is cut into c_k chunks of 32 KiB (at
// most kMaxSegmentChunks, larger chunks beyond) and chunk j of tensor k is
// "virtual block" start_k + j, found by a binary search over the
// compile-time segment starts. Empty tensors get no chunk (they are
// finite). Real blocks walk the virtual blocks with a grid stride, so the
// kernel is correct for any grid; the launch names min(V, kMaxGrid).
// Tensors whose scan differs only in pointer and chunk numbers share one
// copy of it (SharedSegments.h): GPT-2 124M's 148 gradients are 2 scans,
// not 148 (106 KB of source, 1.0-1.1 s of NVRTC a cubin, inlined).
//
// An element is NaN or +-inf iff its exponent field is all ones, so every
// dtype is tested on its storage bits (f16/bf16 are never widened). A
// tensor whose byte size is a multiple of 16 is read as uint4 (4 f32 or 8
// halves per load), any other one element by element.
//
// Combine: __syncthreads_and over the block; a block that saw a non-finite
// value sets a `__device__` flag with atomicOr; every block then takes an
// atomic ticket, and the last one reads and clears the flag (atomicExch),
// writes the i1 result and resets the ticket, so the kernel can be
// relaunched (a CUDA graph replays it) without a memset. The result is a
// boolean AND, hence deterministic; like every kernel with module-scope
// state it must not run concurrently with itself (CudaKernels.h).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"
#include "compiler/codegen/SharedSegments.h"

#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include <algorithm>

namespace step::codegen::detail {

namespace ops = mlir::step;

namespace {

/// Bytes per virtual block.
constexpr int64_t kChunkBytes = 32 * 1024;

/// The test of one load of `unit` ("uint4", "unsigned int" or "unsigned
/// short") named `w`, for element type `e`.
std::string finiteTest(Elem e, bool vec) {
  std::string mask = e == Elem::F16 ? "0x7c00u" : "0x7f80u";
  if (e == Elem::F32)
    return vec ? "finite32(w.x) && finite32(w.y) && finite32(w.z) && "
                 "finite32(w.w)"
               : "finite32(w)";
  if (!vec)
    return "finite16(w, " + mask + ")";
  return "finite16x2(w.x, " + mask + ") && finite16x2(w.y, " + mask +
         ") && finite16x2(w.z, " + mask + ") && finite16x2(w.w, " + mask +
         ")";
}

} // namespace

std::optional<KernelSource> emitCheckFinite(mlir::Operation *op,
                                            const std::string &name) {
  auto check = mlir::dyn_cast<ops::CheckFiniteOp>(op);
  if (!check)
    return std::nullopt;
  int64_t paramBytes = 8 * static_cast<int64_t>(op->getNumOperands() + 1);
  if (paramBytes > kMaxParamBytes)
    throw rt::Error("codegen: step.check_finite: " +
                    std::to_string(op->getNumOperands()) +
                    " operands need " + std::to_string(paramBytes) +
                    " bytes of kernel parameters, over CUDA's " +
                    std::to_string(kMaxParamBytes) + "; split the list");

  KernelSource ks;
  ks.name = name;
  ks.blockX = kSegmentBlock;
  PreludeNeeds needs;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  std::vector<SegmentCode> segs;
  std::vector<int64_t> starts;
  int64_t virtualBlocks = 0;
  for (unsigned k = 0; k < op->getNumOperands(); ++k) {
    mlir::Value x = op->getOperand(k);
    Elem e = elemOf(x.getType());
    int64_t n = numelOf(x), bytes = n * elemBytes(e);
    if (n == 0)
      continue; // nothing to test: finite
    bool vec = bytes % 16 == 0;
    int64_t unitBytes = vec ? 16 : elemBytes(e);
    int64_t units = bytes / unitBytes;
    int64_t chunks = std::clamp<int64_t>(
        (bytes + kChunkBytes - 1) / kChunkBytes, 1, kMaxSegmentChunks);
    int64_t chunk = (units + chunks - 1) / chunks;
    chunks = (units + chunk - 1) / chunk;
    starts.push_back(virtualBlocks);
    std::string I = idxType(units + chunk);
    SegmentCode sc;
    sc.vars = {{"segStart", "unsigned", std::to_string(virtualBlocks) + "u"},
               {"segChunk", I, std::to_string(chunk)},
               {"segWork", I, std::to_string(units)}};
    virtualBlocks += chunks;

    std::string unit = vec ? "uint4"
                           : (e == Elem::F32 ? "unsigned int"
                                             : "unsigned short");
    std::vector<std::pair<std::string, std::string>> vars = {
        {"K", std::to_string(k)},
        {"N", std::to_string(n)},
        {"DT", e == Elem::F32 ? "f32" : (e == Elem::F16 ? "f16" : "bf16")},
        {"C", std::to_string(chunks)},
        {"CH", std::to_string(chunk)},
        {"I", I},
        {"U", unit},
        {"TEST", finiteTest(e, vec)},
        {"HOW", vec ? "16 bytes per load" : "one element per load"}};
    sc.comment = subst(
        "// tensor $K: $N $DT elements, $C chunks of $CH loads ($HOW)\n",
        vars);
    // The chunk's numbers stay placeholders (shareSegments fills them).
    for (const SegmentVar &v : sc.vars)
      vars.push_back({v.name, "${" + v.name + "}"});
    sc.loop = subst(R"(  const $I c = vb - ${segStart};
  const $I end = (c + 1) * ${segChunk} < ${segWork} ? (c + 1) * ${segChunk} : ${segWork};
  const $U *p = reinterpret_cast<const $U *>(in$K);
  for ($I i = c * ${segChunk} + threadIdx.x; ok && i < end; i += blockDim.x) {
    const $U w = p[i];
    ok = $TEST;
  }
)",
                    vars);
    segs.push_back(std::move(sc));
  }
  ks.gridX = std::clamp<int64_t>(virtualBlocks, 1, kMaxGrid);

  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name}, {"V", std::to_string(virtualBlocks)}};
  std::string scan;
  if (!segs.empty()) {
    std::string after;
    std::vector<std::string> leaves = shareSegments(op, segs, "    ", after);
    scan = subst("  // Virtual blocks [0, $V): a smaller grid loops, a larger "
                 "one idles.\n"
                 "  for (unsigned int vb = blockIdx.x; ok && vb < ${V}u; "
                 "vb += gridDim.x) {\n",
                 vars) +
           codeDecl(after, "    ") +
           dispatchSegments(starts, leaves, "vb", "    ") + after + "  }\n";
  }
  std::string head = R"(// NaN and +-inf are the values whose exponent field is all ones.
__device__ __forceinline__ bool finite32(unsigned int w) {
  return (w & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ bool finite16(unsigned int h, unsigned int e) {
  return (h & e) != e;
}
__device__ __forceinline__ bool finite16x2(unsigned int w, unsigned int e) {
  return finite16(w, e) && finite16(w >> 16, e);
}
__device__ unsigned int ${NAME}_ticket; // blocks done in this launch
__device__ unsigned int ${NAME}_found;  // nonzero: a non-finite was seen
)";
  std::string tail = R"(  ok = __syncthreads_and(ok) != 0;
  __shared__ bool amLast;
  if (threadIdx.x == 0) {
    if (!ok)
      atomicOr(&${NAME}_found, 1u);
    __threadfence(); // the flag is visible before the ticket
    amLast = atomicAdd(&${NAME}_ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (amLast && threadIdx.x == 0) {
    __threadfence();
    // Read and clear in one step: the next launch starts from "finite".
    out0[0] = atomicExch(&${NAME}_found, 0u) == 0u ? 1 : 0;
    ${NAME}_ticket = 0; // ready for the next launch
  }
}
)";
  ks.source = prelude(needs) + subst(head, vars) + signature(ks, params) +
              " {\n  bool ok = true;\n" + scan + subst(tail, vars);
  return ks;
}

} // namespace step::codegen::detail
