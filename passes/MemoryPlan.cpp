//===- MemoryPlan.cpp - Liveness-based arena offsets ----------------------===//
//
// step-memory-plan gives every transient value (op result that is not a
// constant) of one function a byte offset in a single arena.
//
// Guarantee: two values whose live ranges intersect occupy disjoint byte
// ranges, except that a `reshape` or `stop_gradient` of a transient value
// is a view: it gets its operand's offset (the same bytes in the same
// order), the pair is planned as one value live over both ranges, and its
// plan step moves nothing (codegen emits no kernel for it); every offset
// is a multiple of `alignment`; `step.arena_bytes` is
// the end of the highest placed value (the planned peak of transient memory).
// The results of `step.offload` live in host memory: they are placed the
// same way in a second arena (`step.host_bytes`), each live from the op
// that computes the offloaded value (the copy starts right after it) to
// its last `step.reload`; their step.offsets are host offsets. So do the
// results of ops marked `step.host` (step-offload-optimizer: computed on
// the host CPU), each live from its op to its last user. A result whose
// index is in its op's `step.donated` (pairs of result index and function
// argument number, compiler/pipeline/Donation.cpp) is written into that
// argument's buffer: it takes no arena bytes and its offset is -1.
// The plan is deterministic.
//
// Algorithm: the function is one block, so a live range is the interval
// [index of the defining op, index of the last user] (a function result is
// used by the terminator, i.e. lives to the end). Values are placed in order
// of decreasing size (ties: earlier definition first); each goes to the
// lowest aligned offset that does not overlap any already placed value with
// an intersecting live range ("greedy by size", as TFLite's arena planner).
// It is not optimal in general (the problem is NP-hard) but is within a few
// percent of the lower bound max_t(sum of live bytes at t) on typical
// training graphs; the report shows both.
//
// Cost: O(V log V + V * P) for V values: each placement scans the placed
// values (kept sorted by offset, stored contiguously) up to the gap it
// finds, skipping those not live with it; P <= V, so O(V^2) at worst.
//
//===----------------------------------------------------------------------===//

#include "passes/MemoryPlan.h"

#include "passes/Activations.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>

namespace mlir::step {
#define GEN_PASS_DEF_MEMORYPLAN
#include "passes/Passes.h.inc"

namespace {

struct Interval {
  Value value;
  int64_t bytes, first, last, offset = -1;
};

int64_t alignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

void place(std::vector<Interval> &intervals, int64_t alignment) {
  std::vector<size_t> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return intervals[a].bytes > intervals[b].bytes;
  });
  // Placed intervals sorted by offset, by value: the scan below reads
  // them in order, from contiguous memory.
  struct Placed {
    int64_t offset, end, first, last;
  };
  std::vector<Placed> placed;
  for (size_t i : order) {
    Interval &iv = intervals[i];
    int64_t candidate = 0, size = alignUp(iv.bytes, alignment);
    for (const Placed &p : placed) {
      bool liveTogether = p.first <= iv.last && iv.first <= p.last;
      if (!liveTogether)
        continue;
      if (p.offset >= candidate + size)
        break; // fits in the gap before p
      candidate = std::max(candidate, alignUp(p.end, alignment));
    }
    iv.offset = candidate;
    auto at = std::upper_bound(
        placed.begin(), placed.end(), candidate,
        [](int64_t offset, const Placed &p) { return offset < p.offset; });
    placed.insert(at, {candidate, candidate + iv.bytes, iv.first, iv.last});
  }
}

struct MemoryPlanPass : impl::MemoryPlanBase<MemoryPlanPass> {
  using MemoryPlanBase::MemoryPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(funcName);
    if (!f || f.isExternal()) {
      module.emitError() << "step-memory-plan: no function @" << funcName
                         << " with a body";
      return signalPassFailure();
    }
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      f.emitError() << "step-memory-plan: alignment "
                    << static_cast<int64_t>(alignment)
                    << " must be a power of two";
      return signalPassFailure();
    }
    if (failed(planArena(f, alignment, /*annotate=*/true)))
      return signalPassFailure();
  }
};

} // namespace

std::map<int64_t, int64_t> donatedArguments(Operation *op) {
  std::map<int64_t, int64_t> pairs;
  if (auto d = op->getAttrOfType<DenseI64ArrayAttr>("step.donated"))
    for (size_t i = 0; i + 1 < d.asArrayRef().size(); i += 2)
      pairs[d.asArrayRef()[i]] = d.asArrayRef()[i + 1];
  return pairs;
}

void setDonatedArguments(Operation *op,
                         const std::map<int64_t, int64_t> &pairs) {
  if (pairs.empty()) {
    op->removeAttr("step.donated");
    return;
  }
  SmallVector<int64_t> flat;
  for (auto [result, arg] : pairs)
    flat.append({result, arg});
  op->setAttr("step.donated", DenseI64ArrayAttr::get(op->getContext(), flat));
}

FailureOr<ArenaPlan> planArena(func::FuncOp f, int64_t alignment,
                               bool annotate) {
  Block &body = f.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index;
  std::vector<Interval> intervals, host;
  // A view's storage is its operand's (transitively).
  llvm::DenseMap<Value, Value> storageOf;
  auto storage = [&](Value v) {
    auto it = storageOf.find(v);
    return it == storageOf.end() ? v : it->second;
  };
  for (Operation &op : body) {
    index[&op] = static_cast<int64_t>(index.size());
    if (isa<ConstantOp>(op))
      continue;
    bool onHost = op.hasAttr("step.host");
    if (isa<ReshapeOp, StopGradientOp>(op) && !onHost) {
      Operation *d = op.getOperand(0).getDefiningOp();
      if (d && !isa<ConstantOp>(d)) {
        storageOf[op.getResult(0)] = storage(op.getOperand(0));
        continue;
      }
    }
    std::map<int64_t, int64_t> donated = donatedArguments(&op);
    for (Value r : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type || !type.hasStaticShape())
        return op.emitError() << "step-memory-plan: result type "
                              << r.getType()
                              << " must be a tensor of static shape";
      if (donated.count(cast<OpResult>(r).getResultNumber()))
        continue;
      if (isa<OffloadOp>(op)) {
        // The copy into host memory starts when the value is computed.
        Operation *src = storage(op.getOperand(0)).getDefiningOp();
        int64_t first = src ? index.lookup(src) : 0;
        host.push_back({r, tensorBytes(type), first, index[&op]});
        continue;
      }
      if (onHost) {
        host.push_back({r, tensorBytes(type), index[&op], index[&op]});
        continue;
      }
      intervals.push_back({r, tensorBytes(type), index[&op], index[&op]});
    }
  }
  llvm::DenseMap<Value, Interval *> intervalOf;
  for (Interval &iv : intervals)
    intervalOf[iv.value] = &iv;
  for (Interval &iv : host)
    intervalOf[iv.value] = &iv;
  for (Operation &op : body)
    for (Value r : op.getResults())
      if (Interval *iv = intervalOf.lookup(storage(r)))
        for (Operation *user : r.getUsers())
          iv->last = std::max(iv->last, index.lookup(user));

  place(intervals, alignment);
  place(host, alignment);
  ArenaPlan plan;
  llvm::DenseMap<Value, int64_t> offsetOf;
  for (const Interval &iv : intervals) {
    plan.peak = std::max(plan.peak, iv.offset + iv.bytes);
    plan.noReuse += alignUp(iv.bytes, alignment);
    offsetOf[iv.value] = iv.offset;
  }
  for (const Interval &iv : host) {
    plan.host = std::max(plan.host, iv.offset + iv.bytes);
    offsetOf[iv.value] = iv.offset;
  }
  if (!annotate)
    return plan;
  Builder b(f.getContext());
  for (Operation &op : body) {
    if (isa<ConstantOp>(op) || op.getNumResults() == 0)
      continue;
    SmallVector<int64_t> offsets;
    for (Value r : op.getResults()) {
      auto it = offsetOf.find(storage(r));
      offsets.push_back(it == offsetOf.end() ? -1 : it->second);
    }
    op.setAttr("step.offsets", b.getDenseI64ArrayAttr(offsets));
  }
  f->setAttr("step.arena_bytes", b.getI64IntegerAttr(plan.peak));
  f->setAttr("step.arena_bytes_no_reuse", b.getI64IntegerAttr(plan.noReuse));
  if (plan.host > 0)
    f->setAttr("step.host_bytes", b.getI64IntegerAttr(plan.host));
  return plan;
}

FailureOr<ArenaPlan> planCandidate(func::FuncOp copy, bool fuse,
                                   const FusionChoices &choices,
                                   int64_t alignment) {
  if (fuse) {
    PassManager pm(copy.getContext());
#ifdef NDEBUG
    pm.enableVerifier(false);
#endif
    addFusionPasses(pm, choices);
    if (failed(pm.run(copy->getParentOfType<ModuleOp>())))
      return failure();
  }
  return planArena(copy, alignment, false);
}

} // namespace mlir::step
