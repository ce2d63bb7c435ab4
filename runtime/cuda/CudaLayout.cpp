//===- CudaLayout.cpp - Kernel image selection and cuBLASLt layouts -------===//
//
// The decisions of the CUDA backend that need no GPU: which binary of a
// kernel a device loads, and how a row-major step.matmul maps onto
// cuBLASLt's column-major operands. Unit-tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/MatmulEpilogue.h"

#include <algorithm>
#include <climits>
#include <set>

namespace step::rt::cuda {

std::string archName(int major, int minor) {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

namespace {
/// Parses "sm_86" (no arch-specific suffix such as sm_90a) into 8, 6.
bool parsePlainArch(const std::string &arch, int *major, int *minor) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0)
    return false;
  std::string digits = arch.substr(3);
  if (!std::all_of(digits.begin(), digits.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  int v = std::stoi(digits);
  *major = v / 10;
  *minor = v % 10;
  return true;
}
} // namespace

KernelImage selectKernelImage(const std::map<std::string, std::string> &sections,
                              const std::string &kernel, int major, int minor) {
  std::string want = archName(major, minor);
  std::string suffix = "." + kernel;
  std::set<std::string> archs; // every arch the artifact has any cubin for
  std::string best;
  int bestMinor = -1;
  for (const auto &[name, bytes] : sections) {
    if (name.compare(0, 6, "cubin.") != 0)
      continue;
    size_t dot = name.find('.', 6);
    if (dot == std::string::npos)
      continue;
    std::string arch = name.substr(6, dot - 6);
    archs.insert(arch);
    if (name.compare(dot, std::string::npos, suffix) != 0)
      continue;
    if (arch == want)
      return {name, false};
    int ma, mi;
    if (parsePlainArch(arch, &ma, &mi) && ma == major && mi < minor &&
        mi > bestMinor) {
      best = name;
      bestMinor = mi;
    }
  }
  if (!best.empty())
    return {best, false};
  if (sections.count("ptx." + kernel))
    return {"ptx." + kernel, true};
  std::string has;
  for (const std::string &a : archs)
    has += (has.empty() ? "" : ", ") + a;
  throw Error("artifact has no kernels for " + want + " (has " +
              (has.empty() ? std::string("no cubins and no PTX") : has) +
              "); recompile with stepc --arch=" + want +
              " (kernel '" + kernel + "')");
}

MatmulLayout matmulLayout(const Shape &lhs, const Shape &rhs, bool transposeA,
                          bool transposeB) {
  auto describe = [&] {
    return "lhs " + shapeToString(lhs) + (transposeA ? " (transposed)" : "") +
           ", rhs " + shapeToString(rhs) + (transposeB ? " (transposed)" : "");
  };
  size_t ra = lhs.size(), rb = rhs.size();
  if (ra < 2)
    throw Error("matmul: lhs must have rank >= 2; " + describe());
  if (rb != 2 && rb != ra)
    throw Error("matmul: rhs must have rank 2 or the rank of lhs; " +
                describe());
  if (rb == ra)
    for (size_t i = 0; i + 2 < ra; ++i)
      if (lhs[i] != rhs[i])
        throw Error("matmul: leading (batch) dims must be equal; " +
                    describe());
  MatmulLayout l;
  l.m = transposeA ? lhs[ra - 1] : lhs[ra - 2];
  l.k = transposeA ? lhs[ra - 2] : lhs[ra - 1];
  int64_t kb = transposeB ? rhs[rb - 1] : rhs[rb - 2];
  l.n = transposeB ? rhs[rb - 2] : rhs[rb - 1];
  if (kb != l.k)
    throw Error("matmul: contracting dims differ: lhs has K = " +
                std::to_string(l.k) + ", rhs has K = " + std::to_string(kb) +
                "; " + describe());
  l.result.assign(lhs.begin(), lhs.end() - 2);
  l.result.push_back(l.m);
  l.result.push_back(l.n);
  l.batch = numElements(Shape(lhs.begin(), lhs.end() - 2));
  if (l.batch > INT_MAX)
    throw Error("matmul: batch count exceeds cuBLASLt's int range; " +
                describe());

  // A shared rhs against a row-major, untransposed lhs: the batch entries are
  // consecutive rows of one [batch * M, K] matrix.
  if (rb == 2 && !transposeA) {
    l.m *= l.batch;
    l.batch = 1;
  }
  int64_t m = l.m, batch = l.batch;
  l.transA = transposeB;
  l.a.rows = transposeB ? l.k : l.n;
  l.a.cols = transposeB ? l.n : l.k;
  l.a.ld = l.a.rows;
  l.a.stride = rb == 2 ? 0 : l.n * l.k;
  l.transB = transposeA;
  l.b.rows = transposeA ? m : l.k;
  l.b.cols = transposeA ? l.k : m;
  l.b.ld = l.b.rows;
  l.b.stride = m * l.k;
  l.c.rows = l.n;
  l.c.cols = m;
  l.c.ld = l.n;
  l.c.stride = m * l.n;
  l.a.batch = l.b.batch = l.c.batch = batch;
  return l;
}

bool hasDeviceCode(const Plan &plan) {
  for (const PlanStep &s : plan.steps)
    if (!s.host && s.kernel.empty() && s.op != "step.matmul" &&
        s.op != "step.reshape" &&
        s.op != "step.stop_gradient" && s.op != "step.offload" &&
        s.op != "step.reload" && !isMatmulFusion(s))
      return false;
  return true;
}

} // namespace step::rt::cuda
