//===- MultiTensorKernels.cpp - Kernels of multi_tensor step.fusion -------===//
//
// One launch for work that the unfused plan spreads over one small launch
// per parameter (dialects/step/StepStructureOps.td, docs/codegen.md "Fused
// kernels"). Three forms:
//
//  A. Optimizer: K updates (sgd_update or adamw_update, one kind and one
//     set of attributes), whose tensor operands are fusion inputs or
//     elementwise/view prologues of them (the gradient-clip scaling). The
//     grid is the concatenation of K segments, segment k covering tensor k
//     with b_k = ceil(work_k / 256) blocks (at most kMaxGrid); a block finds
//     its segment by a binary search over the compile-time segment starts
//     (an if-tree of literals, depth log2 K) and runs a grid-stride loop
//     inside it. The per-element math is the unfused kernel's
//     (`updateSpec`, TrainKernels.cpp); prologues are computed in registers
//     by FusionExpr. A tensor of a multiple of 4 elements is processed 4 per
//     thread with vector loads of the inputs read at the element's own index
//     and vector stores of the results. Cost: every tensor byte read and
//     written once, as the unfused kernels, but 1 launch instead of K and
//     no intermediate prologue tensors (the clipped gradient).
//     Tensors whose code differs only in pointers and segment share one
//     copy of it after the dispatch (SharedSegments.h; the chunk loops of
//     form B too): their leaves name the code and the tensor, and the code
//     binds the tensor's pointers in a switch. Source and NVRTC time grow
//     with the distinct codes (4 of GPT-2's 48 AdamW tensors a kernel),
//     not with K.
//
//  B. Norms: K full reduce_sums (each of a prologue of one input, e.g.
//     g * g) and a scalar epilogue of their results (the global gradient
//     norm and the clip coefficient). Tensor k is cut into c_k chunks of
//     8192 elements (at most 1024 chunks, larger chunks beyond); one block
//     per chunk sums its chunk in f32 (thread-strided, then a warp-shuffle
//     tree) into a `__device__` partials array; the last block to finish
//     (atomic ticket, as ReduceKernels.cpp's split strategy) combines each
//     tensor's partials in a fixed tree (one loop over the tensors and a
//     table of their first partials), runs the epilogue, stores the
//     rank-0 results and resets the ticket. Deterministic (no float
//     atomics); a kernel must not run concurrently with itself.
//
//  C. Maps: every result an elementwise op of the body (step-fuse's casts
//     of the parameters, AMP's bf16 copies): Form A's segments, vectors
//     and prologues, each tensor's per-element math its op's own
//     (`elementwiseSpec`, as the unfused kernel), stored rounded as that
//     kernel stores. Cost: the unfused kernels' bytes in 1 launch for K.
//
// lamb_update needs a norm of each tensor before any update and is refused
// (rt::Error); step-fuse must leave LAMB updates unfused.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"
#include "compiler/codegen/FusionExpr.h"
#include "compiler/codegen/SharedSegments.h"

#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>

namespace step::codegen::detail {

namespace ops = mlir::step;

namespace {

/// Form B: elements per block.
constexpr int64_t kChunk = 8192;

std::string fail(const std::string &why) {
  return "codegen: multi_tensor fusion: " + why;
}

/// A tensor's blocks: [start, start + blocks) of the grid.
struct Segment {
  int64_t start = 0, blocks = 1;
};

/// Fusion inputs that `v` reads at its own flat index (through elementwise
/// ops, reshape and element-count-preserving broadcasts), i.e. that a
/// vector load at that index can feed. Inputs read through a real
/// broadcast (a rank-0 clip coefficient) are left to FusionExpr.
void sameIndexArgs(mlir::Value v, int64_t n, llvm::DenseSet<void *> &seen,
                   std::vector<mlir::BlockArgument> &out) {
  if (!seen.insert(v.getAsOpaquePointer()).second || numelOf(v) != n)
    return;
  if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
    out.push_back(arg);
    return;
  }
  mlir::Operation *op = v.getDefiningOp();
  if (ops::fusionRole(op) == ops::FusionRole::Elementwise ||
      ops::fusionRole(op) == ops::FusionRole::View)
    for (mlir::Value operand : op->getOperands())
      sameIndexArgs(operand, n, seen, out);
}

/// The vector loads of `args` at vector index `v`, bound in `fx` as the
/// values at element index `i` (lane e).
std::string vectorLoads(FusionExpr &fx,
                        const std::vector<mlir::BlockArgument> &args) {
  std::string s;
  for (mlir::BlockArgument a : args) {
    std::string k = std::to_string(a.getArgNumber());
    std::string t = cType(elemOf(a.getType()));
    s += "  const Vec<" + t + ", 4> vx" + k + " = reinterpret_cast<const Vec<" +
         t + ", 4> *>(in" + k + ")[v];\n";
    fx.bindStorage(a, "i", "vx" + k + ".v[e]");
  }
  return s;
}

/// Whether 4 elements per thread fit: n a multiple of 4 and every vector
/// load at most 4 bytes per element (i64 stays scalar, as emitElementwise).
bool canVectorize(int64_t n, const std::vector<mlir::BlockArgument> &args) {
  if (n < 4 || n % 4 != 0)
    return false;
  for (mlir::BlockArgument a : args)
    if (elemBytes(elemOf(a.getType())) > 4)
      return false;
  return true;
}

/// Fusion input `v` as the pointer expression "in<k>"; a rank-0 optimizer
/// operand must be one (it is read once per block, outside every loop).
std::string inputPtr(mlir::Value v, mlir::Block &block, const char *what) {
  auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
  if (!arg || arg.getOwner() != &block || numelOf(v) != 1)
    throw rt::Error(fail(std::string("the ") + what +
                         " operand of an update must be a rank-0 fusion "
                         "input"));
  return "in" + std::to_string(arg.getArgNumber());
}

//===----------------------------------------------------------------------===//
// Form A: optimizer updates
//===----------------------------------------------------------------------===//

KernelSource emitUpdates(ops::FusionOp fusion,
                         const std::vector<mlir::Operation *> &updates,
                         const std::string &name) {
  mlir::Block &block = fusion.getBlock();
  mlir::Operation *first = updates.front();
  bool maps = ops::fusionRole(first) != ops::FusionRole::Update;
  for (mlir::Operation *u : updates)
    if (!maps && (u->getName() != first->getName() ||
                  u->getAttrDictionary() != first->getAttrDictionary()))
      throw rt::Error(fail("updates of different kinds or attributes ('" +
                           first->getName().getStringRef().str() + "' and '" +
                           u->getName().getStringRef().str() + "')"));
  if (mlir::isa<ops::LambUpdateOp>(first))
    throw rt::Error(fail("lamb_update is not supported (each tensor needs "
                         "its own norms before its update); leave LAMB "
                         "updates unfused"));

  // Where each update result is stored: out<j> for every yield operand j.
  std::vector<std::vector<std::vector<unsigned>>> stores(updates.size());
  for (size_t u = 0; u < updates.size(); ++u)
    stores[u].resize(updates[u]->getNumResults());
  mlir::Operation *yield = fusion.getYield();
  for (unsigned j = 0; j < yield->getNumOperands(); ++j) {
    mlir::Value y = yield->getOperand(j);
    auto it = std::find(updates.begin(), updates.end(), y.getDefiningOp());
    if (it == updates.end())
      throw rt::Error(
          fail("result " + std::to_string(j) + " is not an update's result"));
    auto r = mlir::cast<mlir::OpResult>(y);
    stores[it - updates.begin()][r.getResultNumber()].push_back(j);
  }

  KernelSource ks;
  ks.name = name;
  ks.blockX = kSegmentBlock;
  PreludeNeeds needs;
  std::string params = paramList(fusion, ks, needs, /*restrict=*/false);
  std::vector<SegmentCode> segs;
  std::vector<int64_t> starts;
  int64_t grid = 0;
  for (size_t u = 0; u < updates.size(); ++u) {
    mlir::Operation *op = updates[u];
    // Each segment its own expression state (local names from 0, its own
    // hoisted loads): equal updates give equal code (shareSegments).
    FusionExpr fx(fusion, needs);
    std::optional<ElementwiseSpec> mapped;
    mlir::Value stepV, lrV;
    if (maps)
      mapped = elementwiseSpec(op);
    else if (auto s = mlir::dyn_cast<ops::SgdUpdateOp>(op))
      stepV = s.getStep(), lrV = s.getLr();
    else if (auto a = mlir::dyn_cast<ops::AdamwUpdateOp>(op))
      stepV = a.getStep(), lrV = a.getLr();
    else
      throw rt::Error(fail("'" + op->getName().getStringRef().str() +
                           "' is not an optimizer update"));
    auto isF = [](mlir::Value v) { return isFloat(elemOf(v.getType())); };
    if (maps && (!mapped || mapped->needsIndex || !mapped->uniform.empty() ||
                 !mapped->asFloat || !llvm::all_of(op->getOperands(), isF) ||
                 !llvm::all_of(op->getResults(), isF)))
      throw rt::Error(fail("'" + op->getName().getStringRef().str() +
                           "' is no per-element map of float operands"));
    ElementwiseSpec spec = maps
                               ? *mapped
                               : *updateSpec(op, inputPtr(stepV, block, "step"),
                                             inputPtr(lrV, block, "lr"));
    needs.half |= spec.needs.half;
    needs.bf16 |= spec.needs.bf16;
    int64_t n = numelOf(op->getResult(0));
    std::vector<mlir::BlockArgument> vecArgs;
    llvm::DenseSet<void *> seen;
    for (unsigned k = 0; k < op->getNumOperands(); ++k)
      if (k >= spec.uniform.size() || !spec.uniform[k])
        sameIndexArgs(op->getOperand(k), n, seen, vecArgs);
    bool vec = canVectorize(n, vecArgs);
    needs.vec |= vec;
    SegmentCode sc;
    int64_t work = vec ? n / 4 : n;
    Segment seg{grid, gridFor(work, kSegmentBlock)};
    grid += seg.blocks;
    starts.push_back(seg.start);
    std::string I = idxType(n);
    sc.vars = {{"segStart", "unsigned", std::to_string(seg.start) + "u"},
               {"segBlocks", I, std::to_string(seg.blocks)},
               {"segWork", I, std::to_string(work)}};
    sc.comment = "// tensor " + std::to_string(u) + ": " + std::to_string(n) +
                 " elements, blocks [" + std::to_string(seg.start) + ", " +
                 std::to_string(seg.start + seg.blocks) + ")" +
                 (vec ? ", 4 per thread" : "") + "\n";
    std::string loopVar = vec ? "v" : "i";
    std::string L =
        "  for (" + I + " " + loopVar + " = (" + I +
        ")(blockIdx.x - ${segStart}) * blockDim.x + threadIdx.x; " + loopVar +
        " < ${segWork}; " + loopVar + " += (" + I +
        ")${segBlocks} * blockDim.x) {\n";
    std::string inner;
    if (vec) {
      L += indent(vectorLoads(fx, vecArgs), "  ");
      for (size_t r = 0; r < stores[u].size(); ++r)
        for (unsigned j : stores[u][r])
          L += "    Vec<" +
               std::string(cType(elemOf(fusion.getResult(j).getType()))) +
               ", 4> vy" + std::to_string(j) + ";\n";
      L += "#pragma unroll\n    for (int e = 0; e < 4; ++e) {\n";
      inner = "      ";
      L += inner + "const " + I + " i = v * 4 + e;\n" + inner + "(void)i;\n";
    } else {
      inner = "    ";
    }
    std::vector<std::string> locals;
    for (unsigned k = 0; k < op->getNumOperands(); ++k)
      locals.push_back(k < spec.uniform.size() && spec.uniform[k]
                           ? std::string()
                           : fx.valueAt(op->getOperand(k), "i"));
    L += fx.takeCode(inner);
    for (unsigned k = 0; k < op->getNumOperands(); ++k)
      if (!locals[k].empty())
        L += inner + "const float a" + std::to_string(k) + " = " + locals[k] +
             ";\n";
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      L += inner + "float r" + std::to_string(r) + ";\n";
    L += inner + "{\n" + spec.body + inner + "}\n";
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      for (unsigned j : stores[u][r]) {
        std::string J = std::to_string(j), R = "r" + std::to_string(r);
        std::string val = FusionExpr::toStorage(op->getResult(r), R);
        L += inner + (vec ? "vy" + J + ".v[e]" : "out" + J + "[i]") + " = " +
             val + ";\n";
      }
    if (vec) {
      L += "    }\n";
      for (size_t r = 0; r < stores[u].size(); ++r)
        for (unsigned j : stores[u][r]) {
          std::string J = std::to_string(j);
          std::string t = cType(elemOf(fusion.getResult(j).getType()));
          L += "    reinterpret_cast<Vec<" + t + ", 4> *>(out" + J +
               ")[v] = vy" + J + ";\n";
        }
    }
    L += "  }\n";
    // The one-element inputs (a clip coefficient) loaded at the start.
    sc.head = fx.takeHoisted("  ") + spec.pre;
    sc.loop = std::move(L);
    segs.push_back(std::move(sc));
  }
  ks.gridX = grid;
  std::string after;
  std::vector<std::string> leaves = shareSegments(fusion, segs, "  ", after);
  ks.source = prelude(needs) + signature(ks, params) + " {\n" +
              codeDecl(after) +
              dispatchSegments(starts, leaves, "blockIdx.x", "  ") + after +
              "}\n";
  return ks;
}

//===----------------------------------------------------------------------===//
// Form B: full reductions and a scalar epilogue
//===----------------------------------------------------------------------===//

KernelSource emitNorms(ops::FusionOp fusion,
                       const std::vector<ops::ReduceSumOp> &sums,
                       const std::string &name) {
  for (mlir::Operation &op : fusion.getBlock().without_terminator()) {
    auto role = ops::fusionRole(&op);
    if (role != ops::FusionRole::Elementwise &&
        role != ops::FusionRole::View && !mlir::isa<ops::ReduceSumOp>(op))
      throw rt::Error(fail("'" + op.getName().getStringRef().str() +
                           "' cannot be in a fusion of full reductions"));
  }
  for (mlir::Value y : fusion.getYield()->getOperands())
    if (numelOf(y) != 1)
      throw rt::Error(fail("a fusion of full reductions yields one-element "
                           "values only"));

  KernelSource ks;
  ks.name = name;
  ks.blockX = kSegmentBlock;
  PreludeNeeds needs;
  needs.reduce = true;
  std::string params = paramList(fusion, ks, needs, /*restrict=*/true);
  FusionExpr fx(fusion, needs); // the epilogue's
  std::vector<SegmentCode> codes;
  std::vector<int64_t> starts;
  int64_t grid = 0;
  for (size_t u = 0; u < sums.size(); ++u) {
    // Each tensor its own expression state: equal sums give equal code
    // (shareSegments).
    FusionExpr lfx(fusion, needs);
    ops::ReduceSumOp sum = sums[u];
    mlir::Value x = sum.getOperand();
    int64_t n = numelOf(x);
    std::vector<int64_t> dims(sum.getDims().begin(), sum.getDims().end());
    std::sort(dims.begin(), dims.end());
    if (numelOf(sum.getResult()) != 1 ||
        dims.size() != shapeOf(x).size())
      throw rt::Error(fail("a reduce_sum must reduce every dim"));
    if (!isFloat(elemOf(x.getType())))
      throw rt::Error(fail("a full reduce_sum of integers is not supported"));
    std::vector<mlir::BlockArgument> vecArgs;
    llvm::DenseSet<void *> seen;
    sameIndexArgs(x, n, seen, vecArgs);
    bool vec = canVectorize(n, vecArgs);
    needs.vec |= vec;
    // Chunks of kChunk elements (a multiple of 4), at most kMaxSegmentChunks.
    int64_t chunks = std::clamp<int64_t>((n + kChunk - 1) / kChunk, 1,
                                         kMaxSegmentChunks);
    int64_t chunk = ((n + chunks - 1) / chunks + 3) / 4 * 4;
    chunks = std::max<int64_t>(1, (n + chunk - 1) / chunk);
    starts.push_back(grid);
    int64_t unit = vec ? 4 : 1;
    std::string I = idxType(n + chunk);
    SegmentCode sc;
    sc.vars = {{"segStart", "unsigned", std::to_string(grid) + "u"},
               {"segChunk", I, std::to_string(chunk / unit)},
               {"segWork", I, std::to_string(n / unit)}};
    grid += chunks;
    sc.comment = "// tensor " + std::to_string(u) + ": " + std::to_string(n) +
                 " elements in " + std::to_string(chunks) + " chunks of " +
                 std::to_string(chunk) + (vec ? ", 4 per thread" : "") + "\n";
    std::string L = "  const " + I + " c = blockIdx.x - ${segStart};\n";
    L += "  const " + I + " end = (c + 1) * ${segChunk} < ${segWork} ? (c + 1) "
         "* ${segChunk} : ${segWork};\n";
    std::string loopVar = vec ? "v" : "i", inner = vec ? "      " : "    ";
    L += "  for (" + I + " " + loopVar + " = c * ${segChunk} + threadIdx.x; " +
         loopVar + " < end; " + loopVar + " += blockDim.x) {\n";
    if (vec) {
      L += indent(vectorLoads(lfx, vecArgs), "  ");
      L += "#pragma unroll\n    for (int e = 0; e < 4; ++e) {\n";
      L += inner + "const " + I + " i = v * 4 + e;\n" + inner + "(void)i;\n";
    }
    std::string local = lfx.valueAt(x, "i");
    L += lfx.takeCode(inner);
    L += inner + "acc += " + local + ";\n";
    if (vec)
      L += "    }\n";
    L += "  }\n";
    sc.head = lfx.takeHoisted("  ");
    sc.loop = std::move(L);
    codes.push_back(std::move(sc));
  }

  // The last block: each tensor's partials summed in a fixed order (a loop
  // over the tensors: one copy of the sum and its block reduction, not K),
  // each sum rounded to its reduce_sum's type, then the epilogue.
  std::string K = std::to_string(sums.size()), table;
  for (int64_t start : starts)
    table += std::to_string(start) + "u, ";
  table += std::to_string(grid) + "u";
  std::string fin = "  float tot_[" + K + "];\n  for (int u = 0; u < " + K +
                    "; ++u) { // tensor u: partials [start[u], start[u + "
                    "1])\n    float q = 0.0f;\n    for (unsigned j = " +
                    name + "_start[u] + threadIdx.x; j < " + name +
                    "_start[u + 1]; j += blockDim.x)\n      q += part[j];\n"
                    "    tot_[u] = blockReduce(q, SumOp(), 0.0f, sh);\n  }\n";
  for (size_t u = 0; u < sums.size(); ++u) {
    std::string local = "sum" + std::to_string(u);
    mlir::Value r = ops::ReduceSumOp(sums[u]).getResult();
    // The sum rounded to the reduce_sum's type (a local holds an exact
    // value of its type, FusionExpr.h).
    fin += "  const float " + local + " = " +
           FusionExpr::toLocal(
               r, FusionExpr::toStorage(r, "tot_[" + std::to_string(u) + "]")) +
           ";\n";
    fx.bind(r, "0", local);
  }
  std::vector<std::string> outs;
  mlir::Operation *yield = fusion.getYield();
  for (mlir::Value y : yield->getOperands())
    outs.push_back(fx.valueAt(y, "0"));
  fin += fx.takeCode("  ");
  fin += "  if (threadIdx.x == 0) {\n";
  for (unsigned j = 0; j < yield->getNumOperands(); ++j)
    fin += "    out" + std::to_string(j) +
           "[0] = " + fx.storageOf(yield->getOperand(j), outs[j]) + ";\n";
  fin += "    " + name + "_ticket = 0; // ready for the next launch\n  }\n";

  ks.gridX = grid;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"NAME", name}, {"S", std::to_string(grid)}};
  std::string after;
  std::vector<std::string> leaves = shareSegments(fusion, codes, "  ", after);
  std::string body = fx.takeHoisted("  ") + R"(  __shared__ float sh[32];
  __shared__ bool amLast;
  float acc = 0.0f;
)" + codeDecl(after) +
                     dispatchSegments(starts, leaves, "blockIdx.x", "  ") +
                     after + R"(  acc = blockReduce(acc, SumOp(), 0.0f, sh);
  if (threadIdx.x == 0) {
    ${NAME}_partial[blockIdx.x] = acc;
    __threadfence(); // the partial is visible before the ticket
    amLast = atomicAdd(&${NAME}_ticket, 1u) == $S - 1;
  }
  __syncthreads();
  if (!amLast)
    return;
  __threadfence();
  const volatile float *part = ${NAME}_partial;
)";
  ks.source = prelude(needs) +
              subst("__device__ float ${NAME}_partial[$S];\n"
                    "__device__ unsigned int ${NAME}_ticket;\n",
                    vars) +
              "// Tensor u's partials: [start[u], start[u + 1]).\n"
              "__device__ const unsigned int " + name + "_start[" +
              std::to_string(sums.size() + 1) + "] = {" + table + "};\n" +
              signature(ks, params) + " {\n" + subst(body, vars) + fin + "}\n";
  return ks;
}

} // namespace

std::optional<KernelSource> emitMultiTensorFamily(mlir::Operation *op,
                                                  const std::string &name) {
  auto fusion = mlir::dyn_cast<ops::FusionOp>(op);
  if (!fusion || fusion.getKind() != ops::kMultiTensorFusion)
    return std::nullopt;
  int64_t paramBytes = 8 * static_cast<int64_t>(fusion->getNumOperands() +
                                                fusion->getNumResults());
  if (paramBytes > kMaxParamBytes)
    throw rt::Error(fail(std::to_string(fusion->getNumOperands()) +
                         " operands and " +
                         std::to_string(fusion->getNumResults()) +
                         " results need " + std::to_string(paramBytes) +
                         " bytes of kernel parameters, over CUDA's " +
                         std::to_string(kMaxParamBytes) +
                         "; step-fuse must split it"));
  std::vector<mlir::Operation *> updates;
  std::vector<ops::ReduceSumOp> sums;
  for (mlir::Operation &inner : fusion.getBlock().without_terminator()) {
    auto role = ops::fusionRole(&inner);
    if (role == ops::FusionRole::Update)
      updates.push_back(&inner);
    else if (auto s = mlir::dyn_cast<ops::ReduceSumOp>(inner))
      sums.push_back(s);
    else if (role != ops::FusionRole::Elementwise &&
             role != ops::FusionRole::View)
      throw rt::Error(fail("'" + inner.getName().getStringRef().str() +
                           "' cannot be in a multi_tensor fusion"));
  }
  if (!updates.empty() && !sums.empty())
    throw rt::Error(fail("updates and reductions in one fusion"));
  if (!updates.empty())
    return emitUpdates(fusion, updates, name);
  if (!sums.empty())
    return emitNorms(fusion, sums, name);
  // Form C: every result an elementwise op's (the parameters' casts).
  std::vector<mlir::Operation *> maps;
  for (mlir::Value y : fusion.getYield()->getOperands()) {
    mlir::Operation *d = y.getDefiningOp();
    if (!d || ops::fusionRole(d) != ops::FusionRole::Elementwise)
      throw rt::Error(fail("neither optimizer updates, full reduce_sums nor "
                           "elementwise results"));
    if (!llvm::is_contained(maps, d))
      maps.push_back(d);
  }
  if (maps.empty())
    throw rt::Error(fail("neither optimizer updates nor full reduce_sums"));
  return emitUpdates(fusion, maps, name);
}

} // namespace step::codegen::detail
