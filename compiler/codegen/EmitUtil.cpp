//===- EmitUtil.cpp - Helpers shared by the CUDA kernel emitters ----------===//
//
// Literals are printed so that the kernel sees exactly the host's value:
// floats with 9 significant digits (enough to round-trip), doubles with 17,
// infinities and NaN as bit patterns. The prelude is assembled per kernel
// from the pieces it needs, which keeps NVRTC compile times of f32 kernels
// low (cuda_fp16.h and cuda_bf16.h are large).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/EmitUtil.h"

#include "runtime/Tensor.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace step::codegen::detail {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

Elem elemOf(mlir::Type type) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!t)
    throw rt::Error("codegen: expected a ranked tensor type");
  if (!t.hasStaticShape())
    throw rt::Error("codegen: kernels need static shapes (run "
                    "step-pad-dynamic first)");
  mlir::Type e = t.getElementType();
  if (e.isF32())
    return Elem::F32;
  if (e.isF16())
    return Elem::F16;
  if (e.isBF16())
    return Elem::BF16;
  if (e.isInteger(32))
    return Elem::I32;
  if (e.isInteger(64))
    return Elem::I64;
  if (e.isInteger(1))
    return Elem::I1;
  throw rt::Error("codegen: unsupported element type");
}

std::vector<int64_t> shapeOf(mlir::Value v) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  if (!t.hasStaticShape())
    throw rt::Error("codegen: kernels need static shapes (run "
                    "step-pad-dynamic first)");
  return std::vector<int64_t>(t.getShape().begin(), t.getShape().end());
}

int64_t numelOf(mlir::Value v) {
  int64_t n = 1;
  for (int64_t d : shapeOf(v))
    n *= d;
  return n;
}

const char *cType(Elem e) {
  switch (e) {
  case Elem::F32: return "float";
  case Elem::F16: return "__half";
  case Elem::BF16: return "__nv_bfloat16";
  case Elem::I32: return "int";
  case Elem::I64: return "long long";
  case Elem::I1: return "unsigned char";
  }
  return "float";
}

bool isFloat(Elem e) {
  return e == Elem::F32 || e == Elem::F16 || e == Elem::BF16;
}

int elemBytes(Elem e) {
  switch (e) {
  case Elem::F32:
  case Elem::I32: return 4;
  case Elem::F16:
  case Elem::BF16: return 2;
  case Elem::I64: return 8;
  case Elem::I1: return 1;
  }
  return 4;
}

std::string toF(Elem e, const std::string &expr) {
  switch (e) {
  case Elem::F32: return expr;
  case Elem::F16: return "__half2float(" + expr + ")";
  case Elem::BF16: return "__bfloat162float(" + expr + ")";
  default: return "(float)(" + expr + ")";
  }
}

std::string fromF(Elem e, const std::string &expr) {
  switch (e) {
  case Elem::F32: return expr;
  case Elem::F16: return "__float2half_rn(" + expr + ")";
  case Elem::BF16: return "__float2bfloat16_rn(" + expr + ")";
  default: return "(" + std::string(cType(e)) + ")(" + expr + ")";
  }
}

std::string fromD(Elem e, const std::string &expr) {
  switch (e) {
  case Elem::F32: return "(float)(" + expr + ")";
  case Elem::F16: return "__double2half(" + expr + ")";
  case Elem::BF16: return "__double2bfloat16(" + expr + ")";
  default: return "(" + std::string(cType(e)) + ")(" + expr + ")";
  }
}

//===----------------------------------------------------------------------===//
// Literals and templates
//===----------------------------------------------------------------------===//

static std::string withPoint(std::string s) {
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

std::string litF(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f))
    return "__int_as_float(0x7fc00000)";
  if (std::isinf(f))
    return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  return withPoint(buf) + "f";
}

std::string litD(double v) {
  if (std::isnan(v))
    return "__longlong_as_double(0x7ff8000000000000ll)";
  if (std::isinf(v))
    return v > 0 ? "__longlong_as_double(0x7ff0000000000000ll)"
                 : "__longlong_as_double(0xfff0000000000000ull)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return withPoint(buf);
}

std::string litI(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min())
    return "(-9223372036854775807ll - 1)";
  return std::to_string(v) + "ll";
}

std::string litU(uint64_t v) { return std::to_string(v) + "ull"; }

std::string typedConstant(Elem e, double value) {
  if (isFloat(e))
    return fromD(e, litD(value));
  if (e == Elem::I1)
    return value != 0 ? "(unsigned char)1" : "(unsigned char)0";
  return "(" + std::string(cType(e)) + ")" +
         litI(static_cast<int64_t>(value));
}

std::string subst(const std::string &tmpl,
                  const std::vector<std::pair<std::string, std::string>> &vars) {
  std::string out;
  out.reserve(tmpl.size() + 256);
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] != '$') {
      out += tmpl[i++];
      continue;
    }
    // `${NAME}` ends the name explicitly (`${NAME}_partial`).
    bool braced = i + 1 < tmpl.size() && tmpl[i + 1] == '{';
    size_t from = i + (braced ? 2 : 1), j = from;
    while (j < tmpl.size() &&
           (std::isalnum(static_cast<unsigned char>(tmpl[j])) || tmpl[j] == '_'))
      ++j;
    std::string key = tmpl.substr(from, j - from);
    if (braced) {
      if (j >= tmpl.size() || tmpl[j] != '}')
        throw std::logic_error("codegen: unterminated ${" + key);
      ++j;
    }
    bool found = false;
    for (const auto &[k, v] : vars)
      if (k == key) {
        out += v;
        found = true;
        break;
      }
    if (!found)
      throw std::logic_error("codegen: no value for $" + key);
    i = j;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Prelude
//===----------------------------------------------------------------------===//

void PreludeNeeds::add(Elem e) {
  half |= e == Elem::F16;
  bf16 |= e == Elem::BF16;
}

std::string prelude(const PreludeNeeds &needs) {
  std::string s = "// Generated by StepJIT (compiler/codegen); one kernel.\n";
  if (needs.half)
    s += "#include <cuda_fp16.h>\n";
  if (needs.bf16)
    s += "#include <cuda_bf16.h>\n";
  if (needs.vec)
    s += "template <typename T, int N> struct alignas(sizeof(T) * N) Vec "
         "{ T v[N]; };\n";
  // Every kernel: the fast-math helpers (static inline: unused ones cost
  // nothing); the CPU emulator (tests/e2e/emu) defines its own first.
  s += R"(#ifndef STEP_EXP2_DEFINED
#define STEP_EXP2_DEFINED
// 2^x as one MUFU.EX2: PTX ex2.approx.ftz (exp2f is ex2.approx without
// ftz, which ptxas wraps in a compare and two predicated multiplies for
// subnormals); a result below 2^-126 is 0, an input below it counts as 0.
static __device__ __forceinline__ float stepExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1/x as one MUFU.RCP: PTX rcp.approx.ftz (1 ulp; `1.0f / x` is an IEEE
// division, a dozen instructions with its slow path).
static __device__ __forceinline__ float stepRcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif
#ifndef STEP_PREFETCH_DEFINED
#define STEP_PREFETCH_DEFINED
// The 128-byte line holding p asked into L2 (PTX prefetch.L2 on a generic
// address: no register waits on it). p must lie in an allocation.
static __device__ __forceinline__ void stepPrefetchL2(const void *p) {
  asm volatile("prefetch.L2 [%0];" ::"l"(p));
}
#endif
)";
  if (needs.reduce)
    s += R"(// NaN-propagating max (torch.amax, softmax's row max).
__device__ __forceinline__ float maxNaN(float a, float b) {
  return (a != a || a > b) ? a : b;
}
struct SumOp {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxNaNOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return maxNaN(a, b); }
};
struct MaxOp {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};
template <typename T, typename Op> __device__ __forceinline__ T warpReduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread of the block gets the result (a fixed shuffle tree, so the
// result does not depend on timing). `sh` holds 32 values; blockDim.x is a
// multiple of 32.
template <typename T, typename Op>
__device__ __forceinline__ T blockReduce(T v, Op op, T identity, T *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpReduce(v, op);
  __syncthreads(); // a previous call may still be reading sh
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? sh[lane] : identity;
  return warpReduce(v, op);
}
// A row's combination (EmitUtil.h, RowMapping): its warp's, or its
// block's.
template <bool PerWarp, typename T, typename Op>
__device__ __forceinline__ T rowReduce(T v, Op op, T identity, T *sh) {
  if (PerWarp)
    return warpReduce(v, op);
  return blockReduce(v, op, identity, sh);
}
)";
  if (needs.splitmix)
    s += R"(// runtime/cpu/Kernels.h splitmix64, bit for bit.
__device__ __forceinline__ unsigned long long splitmix64(unsigned long long x) {
  unsigned long long z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
)";
  return s;
}

//===----------------------------------------------------------------------===//
// Launch sizes and signatures
//===----------------------------------------------------------------------===//

std::string idxType(int64_t n) {
  // Headroom for `v + gridDim.x * blockDim.x` past the end of the loop.
  return n < (int64_t(1) << 30) ? "int" : "long long";
}

int64_t gridFor(int64_t work, int64_t block) {
  int64_t g = (work + block - 1) / block;
  return g < 1 ? 1 : (g > kMaxGrid ? kMaxGrid : g);
}

RowMapping rowMapping(int64_t rows, int64_t k, int64_t maxBlock) {
  RowMapping r;
  rows = std::max<int64_t>(rows, 1);
  r.perWarp = k <= kWarpRowMax;
  r.block = r.perWarp ? 32 * kWarpRowsPerBlock : blockForRow(k, maxBlock);
  int64_t perBlock = r.perWarp ? kWarpRowsPerBlock : 1;
  r.grid = std::min<int64_t>((rows + perBlock - 1) / perBlock, 65535);
  return r;
}

std::vector<std::pair<std::string, std::string>>
RowMapping::vars(const std::string &I, int64_t rows) const {
  std::string n = std::to_string(rows);
  if (!perWarp)
    return {{"ROWS_FOR", "  for (" + I + " row = blockIdx.x; row < " + n +
                             "; row += gridDim.x) {\n"
                             "    const bool live_ = true;\n"},
            {"TID", "(int)threadIdx.x"},
            {"NTH", "(int)blockDim.x"},
            {"PW", "false"},
            {"LEAD", "threadIdx.x == 0"}};
  std::string w = std::to_string(kWarpRowsPerBlock);
  return {{"ROWS_FOR", "  for (" + I + " row0_ = (" + I + ")blockIdx.x * " +
                           w + "; row0_ < " + n + "; row0_ += (" + I +
                           ")gridDim.x * " + w + ") {\n    const " + I +
                           " row = row0_ + (threadIdx.x >> 5);\n"
                           "    const bool live_ = row < " + n + ";\n"},
          {"TID", "(int)(threadIdx.x & 31)"},
          {"NTH", "32"},
          {"PW", "true"},
          {"LEAD", "live_ && (threadIdx.x & 31) == 0"}};
}

int64_t blockForRow(int64_t k, int64_t maxBlock) {
  int64_t b = 32;
  while (b < k && b < maxBlock)
    b *= 2;
  return b;
}

ColumnSplit columnSplit(int64_t m, int64_t k, int64_t keptInner) {
  ColumnSplit c;
  c.vec = keptInner > 0 && keptInner % 4 == 0 ? 4 : 1;
  c.tiles = std::max<int64_t>((m + 32 * c.vec - 1) / (32 * c.vec), 1);
  c.chunk = k;
  // A row of 4 outputs is a vector load: half the rows (8 a lane) carry
  // a block's fixed cost.
  int64_t minChunk = c.vec > 1 ? kColumnMinChunk / 2 : kColumnMinChunk;
  int64_t want =
      std::min((kColumnTargetBlocks + c.tiles - 1) / c.tiles, k / minChunk);
  if (want < 2) {
    c.vec = 1; // the one-pass kernel: a thread per output
    c.tiles = std::max<int64_t>((m + 31) / 32, 1);
    return c;
  }
  c.chunk = ((k + want - 1) / want + 7) / 8 * 8; // every lane as many rows
  c.chunks = (k + c.chunk - 1) / c.chunk;
  return c;
}

std::string paramList(mlir::Operation *op, KernelSource &ks,
                      PreludeNeeds &needs, bool restrict) {
  std::string s;
  auto add = [&](mlir::Value v, const std::string &name, bool in) {
    Elem e = elemOf(v.getType());
    needs.add(e);
    if (!s.empty())
      s += ", ";
    s += std::string(in ? "const " : "") + cType(e) + " *" +
         (restrict ? "__restrict__ " : "") + name;
    ks.params.push_back(name);
  };
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    add(op->getOperand(i), "in" + std::to_string(i), true);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    add(op->getResult(i), "out" + std::to_string(i), false);
  return s;
}

std::string indent(const std::string &code, const std::string &by) {
  std::string out;
  for (size_t at = 0; at < code.size();) {
    size_t end = code.find('\n', at);
    if (end == std::string::npos)
      end = code.size();
    out += (end > at ? by : std::string()) + code.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return out;
}

std::string signature(const KernelSource &ks, const std::string &params,
                      int minBlocks) {
  std::string bounds = std::to_string(ks.blockX);
  if (minBlocks > 0)
    bounds += ", " + std::to_string(minBlocks);
  return "extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " +
         ks.name + "(" + params + ")";
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::string decompose(const std::string &var, const std::string &acc,
                      const std::vector<int64_t> &dims,
                      const std::vector<int64_t> &strides) {
  std::string s;
  for (size_t d = dims.size(); d-- > 0;) {
    std::string D = std::to_string(dims[d]), S = std::to_string(strides[d]);
    // Products in acc's own type: a 64-bit offset of a tensor past 2^31
    // elements indexed by 32-bit coordinates must not wrap in 32 bits.
    std::string T = "(decltype(" + acc + "))";
    if (d == 0) {
      if (dims[d] != 1 && strides[d] != 0)
        s += "    " + acc + " += " + T + var + " * " + S + ";\n";
      break;
    }
    if (dims[d] == 1)
      continue;
    if (strides[d] == 0)
      s += "    " + var + " /= " + D + ";\n";
    else
      s += "    { const auto q = " + var + " / " + D + "; " + acc + " += " + T +
           "(" + var + " - q * " + D + ") * " + S + "; " + var + " = q; }\n";
  }
  return s;
}

//===----------------------------------------------------------------------===//
// The elementwise emitter
//===----------------------------------------------------------------------===//

KernelSource emitElementwise(mlir::Operation *op, const std::string &name,
                             const ElementwiseSpec &spec) {
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  PreludeNeeds needs = spec.needs;
  std::string params = paramList(op, ks, needs, /*restrict=*/false);
  int64_t n = numelOf(op->getResult(0));
  unsigned nin = op->getNumOperands(), nout = op->getNumResults();
  auto uniform = [&](unsigned k) {
    return k < spec.uniform.size() && spec.uniform[k];
  };
  std::vector<Elem> inE, outE;
  bool vec = n >= 4 && n % 4 == 0;
  for (unsigned k = 0; k < nin; ++k) {
    inE.push_back(elemOf(op->getOperand(k).getType()));
    vec &= uniform(k) || elemBytes(inE.back()) <= 4;
  }
  for (unsigned k = 0; k < nout; ++k) {
    outE.push_back(elemOf(op->getResult(k).getType()));
    vec &= elemBytes(outE.back()) <= 4;
  }
  needs.vec |= vec;
  auto valType = [&](Elem e) {
    return spec.asFloat && isFloat(e) ? std::string("float") : cType(e);
  };
  auto load = [&](Elem e, const std::string &x) {
    return spec.asFloat && isFloat(e) ? toF(e, x) : x;
  };
  auto store = [&](Elem e, const std::string &x) {
    return spec.asFloat && isFloat(e) ? fromF(e, x) : x;
  };

  int64_t work = vec ? n / 4 : n;
  ks.gridX = gridFor(work, ks.blockX);
  std::string I = idxType(n), ind = vec ? "      " : "    ";
  std::string s = prelude(needs) + signature(ks, params) + " {\n" + spec.pre;
  s += "  for (" + I + " v = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x; "
       "v < " + std::to_string(work) + "; v += (" + I +
       ")gridDim.x * blockDim.x) {\n";
  if (vec) {
    for (unsigned k = 0; k < nin; ++k)
      if (!uniform(k))
        s += std::string("    const Vec<") + cType(inE[k]) + ", 4> x" +
             std::to_string(k) + " = reinterpret_cast<const Vec<" +
             cType(inE[k]) + ", 4> *>(in" + std::to_string(k) + ")[v];\n";
    for (unsigned k = 0; k < nout; ++k)
      s += std::string("    Vec<") + cType(outE[k]) + ", 4> y" +
           std::to_string(k) + ";\n";
    s += "#pragma unroll\n    for (int e = 0; e < 4; ++e) {\n";
    if (spec.needsIndex)
      s += ind + "const " + I + " i = v * 4 + e;\n";
  } else if (spec.needsIndex) {
    s += ind + "const " + I + " i = v;\n";
  }
  for (unsigned k = 0; k < nin; ++k) {
    if (uniform(k))
      continue;
    std::string K = std::to_string(k);
    std::string src = vec ? "x" + K + ".v[e]" : "in" + K + "[v]";
    s += ind + "const " + valType(inE[k]) + " a" + K + " = " +
         load(inE[k], src) + ";\n";
  }
  for (unsigned k = 0; k < nout; ++k)
    s += ind + valType(outE[k]) + " r" + std::to_string(k) + ";\n";
  s += ind + "{\n" + spec.body + ind + "}\n";
  for (unsigned k = 0; k < nout; ++k) {
    std::string K = std::to_string(k);
    std::string dst = vec ? "y" + K + ".v[e]" : "out" + K + "[v]";
    s += ind + dst + " = " + store(outE[k], "r" + K) + ";\n";
  }
  if (vec) {
    s += "    }\n";
    for (unsigned k = 0; k < nout; ++k)
      s += std::string("    reinterpret_cast<Vec<") + cType(outE[k]) +
           ", 4> *>(out" + std::to_string(k) + ")[v] = y" +
           std::to_string(k) + ";\n";
  }
  s += "  }\n}\n";
  ks.source = std::move(s);
  return ks;
}

} // namespace step::codegen::detail
