//===- Offload.cpp - Move saved activations to host memory ----------------===//
//
// step-offload moves forward values that the backward reads (the saved
// activations of Activations.h) out of the device arena between the
// forward and the backward: a `step.offload` copies the value into host
// memory as soon as it is computed, on a copy stream, and a `step.reload`
// brings it back ahead of its first backward use, on another copy stream,
// while the compute stream runs the ops in between.
//
// Guarantees:
//   * Results are bit-identical: offload and reload are copies, no compute
//     op is cloned, moved or removed; the backward reads the reloaded copy.
//   * The planned arena (passes/MemoryPlan.h, measured after step-fuse when
//     `fuse`) does not grow: if the chosen set would not lower it, nothing
//     is offloaded. Offloaded values live in a host arena of their own
//     (`step.host_bytes`).
//   * In mode `auto`, every offloaded value's copies are hidden under
//     compute by the cost model below: the modeled step time grows by at
//     most `max-exposed` of itself (default 0: not at all). Mode `all`
//     offloads every candidate that frees device memory and reports the
//     modeled exposed time.
//   * The function gets a `step.offload` dictionary of what was done.
//
// Cost model (the one step-remat's FLOP figures use, Activations.h, plus
// bytes): an op takes max(flops / device-flops, bytes read and written /
// memory-bandwidth) seconds on the compute stream; a copy takes bytes /
// link-bandwidth plus a fixed 5 us. Device->host and host->device copies
// run on two streams (GPUs have a copy engine per direction), in issue
// order; a reload also waits for its offload.
//
// Algorithm:
//   1. Candidates: saved activations (op results of static type, at least
//     `min-bytes`) with a backward use. For value v computed by op d, last
//     read by the forward at op j and first read by the backward at op u:
//     in mode `auto` the offload is placed before the first op k > j by
//     which, with no stalls, the copy started after d has finished (the
//     plan keeps v on the device until there), and the reload before the
//     latest op p <= u such that the copy issued at p finishes before u; in
//     mode `all` just in time, k = j + 1 and p = u (the most memory freed,
//     the copies exposed). A candidate whose offload would not come before
//     its reload frees nothing and is dropped.
//   2. Greedy by bytes, largest first (ties: computed earlier, which has
//     the longest window): each candidate is added if the event simulation
//     of both copy streams against the compute stream (with the candidates
//     already taken) keeps the exposed time within the mode's limit.
//   3. Apply: insert the offloads and reloads at their places; every
//     backward use of an offloaded value reads its reload.
//   4. Verify: plan the arena before and after (a clone, fused when
//     `fuse`); if it did not shrink, undo.
// Run after step-remat (what is recomputed is not saved) and before
// step-fuse (copies are never fused). step-remat may run again after it:
// it treats an offloaded value as no longer saved.
//
// Cost: O(N) per simulation for N ops, O(C * N) for C candidates (under a
// second for GPT-2 small), plus two clone-fuse-plan measurements, side by
// side on the context's threads.
//
//===----------------------------------------------------------------------===//

#include "passes/Activations.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Threading.h"

#include <algorithm>

namespace mlir::step {
#define GEN_PASS_DEF_OFFLOAD
#include "passes/Passes.h.inc"

namespace {

/// Fixed cost of one copy (launch and DMA set-up), in seconds.
constexpr double kCopyLatency = 5e-6;

/// One value that may be offloaded, with its places.
struct Candidate {
  Value value;
  int64_t bytes = 0;
  int64_t def = 0;      ///< index of the op computing it
  int64_t offloadAt = 0; ///< the offload goes before this op
  int64_t reloadAt = 0;  ///< the reload goes before this op
  int64_t firstUse = 0;  ///< first backward op reading it
  double seconds = 0;    ///< one copy
};

struct OffloadPass : impl::OffloadBase<OffloadPass> {
  using OffloadBase::OffloadBase;

  void runOnOperation() override;

private:
  func::FuncOp f;
  SmallVector<Operation *> ops;  ///< the block's ops in order
  std::vector<double> clock;     ///< end of op i on the compute stream
  SmallVector<Candidate> candidates;

  double opSeconds(Operation *op) const;
  void findCandidates(const SavedActivations &fwd);
  double simulate(ArrayRef<const Candidate *> chosen) const;
  void apply(func::FuncOp target, ArrayRef<const Candidate *> chosen,
             IRMapping *map) const;
  FailureOr<ArenaPlan> measure(ArrayRef<const Candidate *> chosen);
};

double OffloadPass::opSeconds(Operation *op) const {
  int64_t bytes = 0;
  auto add = [&](TypeRange types) {
    for (Type type : types)
      if (auto t = dyn_cast<RankedTensorType>(type); t && t.hasStaticShape())
        bytes += tensorBytes(t);
  };
  add(op->getOperandTypes());
  add(op->getResultTypes());
  return std::max(static_cast<double>(opFlops(op)) / deviceFlops,
                  static_cast<double>(bytes) / memoryBandwidth);
}

void OffloadPass::findCandidates(const SavedActivations &fwd) {
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = static_cast<int64_t>(i);
  auto isForward = [&](Operation *op) {
    return llvm::any_of(op->getResults(),
                        [&](Value r) { return fwd.forward.contains(r); });
  };
  auto n = static_cast<int64_t>(ops.size());
  for (Value v : fwd.saved) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    Operation *def = v.getDefiningOp();
    if (!type || !type.hasStaticShape() || !def || isa<OffloadOp>(def) ||
        tensorBytes(type) < minBytes)
      continue;
    Candidate c;
    c.value = v;
    c.bytes = tensorBytes(type);
    c.def = index.lookup(def);
    c.seconds = static_cast<double>(c.bytes) / linkBandwidth + kCopyLatency;
    int64_t lastForward = c.def, firstBackward = n;
    for (Operation *user : v.getUsers()) {
      if (isa<func::ReturnOp, OffloadOp>(user))
        continue;
      int64_t at = index.lookup(user);
      if (isForward(user))
        lastForward = std::max(lastForward, at);
      else
        firstBackward = std::min(firstBackward, at);
    }
    bool returned = llvm::any_of(v.getUsers(), [](Operation *u) {
      return isa<func::ReturnOp>(u);
    });
    if (returned || firstBackward == n || firstBackward <= lastForward)
      continue;
    c.firstUse = firstBackward;
    c.offloadAt = lastForward + 1;
    c.reloadAt = firstBackward;
    if (mode == "auto") {
      // Offload: before the first op after the last forward read by which
      // the copy, started at the end of op `def`, is done.
      double done = clock[c.def] + c.seconds;
      while (c.offloadAt < firstBackward && clock[c.offloadAt - 1] < done)
        ++c.offloadAt;
      // Reload: the latest op whose start leaves the copy time before the
      // first backward read.
      while (c.reloadAt > c.offloadAt + 1 &&
             clock[firstBackward - 1] - clock[c.reloadAt - 1] < c.seconds)
        --c.reloadAt;
    }
    if (c.reloadAt <= c.offloadAt)
      continue; // the value would never leave the device
    candidates.push_back(c);
  }
  // Largest first; ties: computed earlier (the longest window).
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate &a, const Candidate &b) {
                     return a.bytes != b.bytes ? a.bytes > b.bytes
                                               : a.def < b.def;
                   });
}

/// The modeled time of the step with `chosen` offloaded, in seconds: the
/// compute stream runs the ops in order, stalling before an offload whose
/// copy is not done and before the first backward reader of a reload not
/// yet arrived; each copy stream runs its copies in issue order.
double OffloadPass::simulate(ArrayRef<const Candidate *> chosen) const {
  size_t n = ops.size();
  std::vector<SmallVector<const Candidate *>> issueOffload(n), waitOffload(n),
      issueReload(n), waitReload(n);
  for (const Candidate *c : chosen) {
    issueOffload[c->def].push_back(c);
    waitOffload[c->offloadAt].push_back(c);
    issueReload[c->reloadAt].push_back(c);
    waitReload[c->firstUse].push_back(c);
  }
  llvm::DenseMap<const Candidate *, double> offloaded, reloaded;
  double now = 0, toHost = 0, toDevice = 0;
  for (size_t i = 0; i < n; ++i) {
    for (const Candidate *c : waitOffload[i])
      now = std::max(now, offloaded[c]);
    for (const Candidate *c : issueReload[i]) {
      double start = std::max({now, toDevice, offloaded[c]});
      reloaded[c] = toDevice = start + c->seconds;
    }
    for (const Candidate *c : waitReload[i])
      now = std::max(now, reloaded[c]);
    now += clock[i] - (i ? clock[i - 1] : 0.0);
    for (const Candidate *c : issueOffload[i]) {
      double start = std::max(now, toHost);
      offloaded[c] = toHost = start + c->seconds;
    }
  }
  return now;
}

void OffloadPass::apply(func::FuncOp target,
                        ArrayRef<const Candidate *> chosen,
                        IRMapping *map) const {
  SmallVector<Operation *> targetOps;
  for (Operation &op : target.getBody().front())
    targetOps.push_back(&op);
  // Places in the original numbering; equal places keep the chosen order.
  SmallVector<const Candidate *> order(chosen.begin(), chosen.end());
  llvm::stable_sort(order, [](const Candidate *a, const Candidate *b) {
    return a->def < b->def;
  });
  llvm::DenseMap<const Candidate *, Value> host;
  for (const Candidate *c : order) {
    Value v = map ? map->lookup(c->value) : c->value;
    OpBuilder b(targetOps[c->offloadAt]);
    host[c] = b.create<OffloadOp>(v.getLoc(), v);
  }
  for (const Candidate *c : order) {
    Value v = map ? map->lookup(c->value) : c->value;
    OpBuilder b(targetOps[c->reloadAt]);
    Value back = b.create<ReloadOp>(v.getLoc(), host[c]);
    // Every read at or after the first backward one is a backward read
    // (forward reads all come before the offload).
    Operation *first = targetOps[c->firstUse];
    v.replaceUsesWithIf(back, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return !isa<OffloadOp, func::ReturnOp>(user) &&
             (user == first || first->isBeforeInBlock(user));
    });
  }
}

FailureOr<ArenaPlan> OffloadPass::measure(ArrayRef<const Candidate *> chosen) {
  IRMapping map;
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(f.getLoc());
  auto copy = cast<func::FuncOp>(f->clone(map));
  scratch->push_back(copy);
  apply(copy, chosen, &map);
  return planCandidate(copy, fuse, {geluEpilogues, bgradEpilogues},
                       alignment);
}

void OffloadPass::runOnOperation() {
  FailureOr<func::FuncOp> step =
      unfusedStep(getOperation(), funcName, "step-offload");
  if (failed(step))
    return signalPassFailure();
  f = *step;
  if (mode != "none" && mode != "auto" && mode != "all") {
    f.emitError() << "step-offload: unknown mode '" << mode
                  << "', expected none, auto or all";
    return signalPassFailure();
  }
  if (!(linkBandwidth > 0) || !(deviceFlops > 0) || !(memoryBandwidth > 0) ||
      !(maxExposed >= 0)) {
    f.emitError() << "step-offload: link-bandwidth (" << linkBandwidth
                  << "), device-flops (" << deviceFlops
                  << ") and memory-bandwidth (" << memoryBandwidth
                  << ") must be > 0 and max-exposed (" << maxExposed
                  << ") >= 0";
    return signalPassFailure();
  }
  ops.clear();
  clock.clear();
  candidates.clear();
  for (Operation &op : f.getBody().front()) {
    ops.push_back(&op);
    clock.push_back((clock.empty() ? 0.0 : clock.back()) + opSeconds(&op));
  }
  SavedActivations fwd = savedActivations(f);
  findCandidates(fwd);

  double base = simulate({});
  SmallVector<const Candidate *> chosen;
  if (mode != "none") {
    double limit = base * (1 + maxExposed);
    for (const Candidate &c : candidates) {
      chosen.push_back(&c);
      if (mode == "auto" && simulate(chosen) > limit * (1 + 1e-12))
        chosen.pop_back();
    }
  }
  // The two measurements on the context's threads (each clones f).
  SmallVector<FailureOr<ArenaPlan>, 2> plans(2, failure());
  parallelFor(&getContext(), 0, 2, [&](size_t i) {
    plans[i] = measure(i ? ArrayRef<const Candidate *>(chosen)
                         : ArrayRef<const Candidate *>());
  });
  FailureOr<ArenaPlan> before = plans[0], after = plans[1];
  if (failed(before) || failed(after))
    return signalPassFailure();
  if (after->peak >= before->peak) {
    chosen.clear();
    after = before;
  }
  double modeled = simulate(chosen);
  int64_t bytes = 0;
  for (const Candidate *c : chosen)
    bytes += c->bytes;
  apply(f, chosen, nullptr);

  Builder b(f.getContext());
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto f64 = [&](double v) { return b.getF64FloatAttr(v); };
  f->setAttr("step.offload",
             b.getDictionaryAttr({
                 b.getNamedAttr("mode", b.getStringAttr(mode)),
                 b.getNamedAttr("candidates", i64(candidates.size())),
                 b.getNamedAttr("offloaded", i64(chosen.size())),
                 b.getNamedAttr("offloaded_bytes", i64(bytes)),
                 b.getNamedAttr("peak_before", i64(before->peak)),
                 b.getNamedAttr("peak_after", i64(after->peak)),
                 b.getNamedAttr("host_bytes", i64(after->host)),
                 b.getNamedAttr("modeled_seconds", f64(base)),
                 b.getNamedAttr("exposed_seconds", f64(modeled - base)),
             }));
}

} // namespace
} // namespace mlir::step
