//===- CheckFiniteKernels.cpp - The one kernel of step.check_finite -------===//
//
// step.check_finite over K gradients is one launch, laid out as form B of
// MultiTensorKernels.cpp: tensor k is cut into c_k chunks of 32 KiB (at
// most kMaxChunks, larger chunks beyond) and chunk j of tensor k is
// "virtual block" start_k + j, found by a binary search over the
// compile-time segment starts. Empty tensors get no chunk (they are
// finite). Real blocks walk the virtual blocks with a grid stride, so the
// kernel is correct for any grid; the launch names min(V, kMaxGrid).
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

#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include <algorithm>

namespace step::codegen::detail {

namespace ops = mlir::step;

namespace {

constexpr int64_t kBlock = 256;
/// Bytes per virtual block, and most virtual blocks per tensor.
constexpr int64_t kChunkBytes = 32 * 1024;
constexpr int64_t kMaxChunks = 1024;
/// CUDA's limit on a kernel's parameter bytes (sm_70+ before CUDA 12.1).
constexpr int64_t kMaxParamBytes = 4096;

/// A tensor's virtual blocks: [start, start + blocks).
struct Segment {
  int64_t start = 0, blocks = 0;
};

/// Runs leaves[k] for the virtual blocks of segment k: nested ifs on the
/// segment starts, depth log2 K.
std::string dispatch(const std::vector<Segment> &segs,
                     const std::vector<std::string> &leaves, size_t lo,
                     size_t hi, const std::string &indent) {
  if (hi - lo == 1) {
    std::string out;
    const std::string &leaf = leaves[lo];
    for (size_t at = 0; at < leaf.size();) {
      size_t end = std::min(leaf.find('\n', at), leaf.size());
      out += indent + leaf.substr(at, end - at) + "\n";
      at = end + 1;
    }
    return out;
  }
  size_t mid = (lo + hi) / 2;
  return indent + "if (vb < " + std::to_string(segs[mid].start) + "u) {\n" +
         dispatch(segs, leaves, lo, mid, indent + "  ") + indent +
         "} else {\n" + dispatch(segs, leaves, mid, hi, indent + "  ") +
         indent + "}\n";
}

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
  ks.blockX = kBlock;
  PreludeNeeds needs;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  std::vector<Segment> segs;
  std::vector<std::string> leaves;
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
        (bytes + kChunkBytes - 1) / kChunkBytes, 1, kMaxChunks);
    int64_t chunk = (units + chunks - 1) / chunks;
    chunks = (units + chunk - 1) / chunk;
    Segment seg{virtualBlocks, chunks};
    virtualBlocks += chunks;
    segs.push_back(seg);

    std::string unit = vec ? "uint4"
                           : (e == Elem::F32 ? "unsigned int"
                                             : "unsigned short");
    std::vector<std::pair<std::string, std::string>> vars = {
        {"K", std::to_string(k)},
        {"N", std::to_string(n)},
        {"DT", e == Elem::F32 ? "f32" : (e == Elem::F16 ? "f16" : "bf16")},
        {"C", std::to_string(chunks)},
        {"CH", std::to_string(chunk)},
        {"W", std::to_string(units)},
        {"S", std::to_string(seg.start)},
        {"I", idxType(units + chunk)},
        {"U", unit},
        {"TEST", finiteTest(e, vec)},
        {"HOW", vec ? "16 bytes per load" : "one element per load"}};
    leaves.push_back(subst(R"(// tensor $K: $N $DT elements, $C chunks of $CH loads ($HOW)
{
  const $I c = vb - ${S}u;
  const $I end = (c + 1) * $CH < $W ? (c + 1) * $CH : $W;
  const $U *p = reinterpret_cast<const $U *>(in$K);
  for ($I i = c * $CH + threadIdx.x; ok && i < end; i += blockDim.x) {
    const $U w = p[i];
    ok = $TEST;
  }
})",
                           vars));
  }
  ks.gridX = std::clamp<int64_t>(virtualBlocks, 1, kMaxGrid);

  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name}, {"V", std::to_string(virtualBlocks)}};
  std::string scan;
  if (!leaves.empty())
    scan = subst("  // Virtual blocks [0, $V): a smaller grid loops, a larger "
                 "one idles.\n"
                 "  for (unsigned int vb = blockIdx.x; ok && vb < ${V}u; "
                 "vb += gridDim.x) {\n",
                 vars) +
           dispatch(segs, leaves, 0, leaves.size(), "    ") + "  }\n";
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
