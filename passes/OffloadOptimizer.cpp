//===- OffloadOptimizer.cpp - ZeRO-Offload: the update on the host -------===//
//
// step-offload-optimizer keeps a training step's params and optimizer state
// in host memory and computes the optimizer update on the host CPU, as
// ZeRO-Offload does (Ren et al., 2021): the device holds no optimizer state
// and no persistent params, only the arena; per step the gradients travel
// to the host and the params back.
//
// Guarantees:
//   * Results are bit-identical to the step without the pass: no op is
//     cloned, moved or changed; `step.offload` and `step.reload` are
//     copies; an op marked `step.host` computes what it computed before
//     (on the CPU backend the same kernel, on a GPU the CPU kernel of the
//     CUDA backend's host steps).
//   * Every param and optimizer-state argument and result carries
//     `step.memory = "host"`: the runtime keeps it in (pinned) host
//     memory and allocates no device memory for it.
//   * A `step.host` op reads only host values and constants (the dialect
//     verifies it); a device op reads no host value, except `step.reload`;
//     a host-memory result slot returns a host value, a device one a
//     device value.
//   * The function gets a `step.offload_optimizer` dictionary: ops on the
//     host, the host bytes of params and state, and the copies and bytes
//     of one step in each direction.
//
// Algorithm (one pass over the block, then one over the uses):
//   1. Placement. Walking the ops in order, an op is a candidate for the
//      host if it may run there (not a copy, a collective or a
//      `local_shard`) and it is an update (`sgd_update`, `adamw_update`,
//      `lamb_update`, or a fusion holding one), or each operand is a host
//      value, a candidate, a constant or a device scalar, and it reads a
//      value computed from optimizer state or broadcasts a scalar (the
//      step counter, the learning-rate schedule, the loss scale's update,
//      fp16's skip of a non-finite update: a select between old and new
//      values by a broadcast finiteness flag). Walking back, a candidate
//      goes to the host if it is an update, or a host op or a host result
//      slot reads it; the rest stay on the device (a loss scale broadcast
//      to a gradient's shape is made there, not copied). Everything else
//      stays on the device: the forward and backward, the collectives, the
//      clipping norm, a param-only op (a cast, a broadcast of a bias).
//   2. Copies. A device value a host op reads gets one `step.offload`,
//      placed just before its first host reader (the copy starts when
//      the value is made, overlapping everything up to there). A host
//      value a device op reads gets one `step.reload`: a param or state
//      argument at the start of the step, in order of first use (the copy
//      stream brings them in while the first layers compute; the device
//      copy lives in the arena from there, as the persistent param did),
//      any other right after it is made. Return values follow their
//      result slot's memory the same way.
// Run last, after step-fuse (fusions holding an update run on the host
// whole, clipping's scale included) and before step-memory-plan, which
// places host results in the host arena.
//
// Cost: O(N + U) for N ops and U uses.
//
//===----------------------------------------------------------------------===//

#include "passes/Activations.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::step {
#define GEN_PASS_DEF_OFFLOADOPTIMIZER
#include "passes/Passes.h.inc"

namespace {

bool isUpdateOp(Operation *op) {
  return isa<SgdUpdateOp, AdamwUpdateOp, LambUpdateOp>(op);
}

/// An update, or a fusion holding one.
bool isUpdate(Operation *op) {
  if (isUpdateOp(op))
    return true;
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion)
    return false;
  for (Operation &inner : fusion.getBlock().without_terminator())
    if (isUpdateOp(&inner))
      return true;
  return false;
}

bool isConstant(Value v) { return static_cast<bool>(v.getDefiningOp<ConstantOp>()); }

/// One element (a flag, a norm, the loss scale).
bool isScalar(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() && t.getNumElements() == 1;
}

/// Whether slot `kind` ("param", "state", ...) lives in host memory.
bool hostKind(StringAttr kind) {
  return kind && (kind.getValue() == "param" || kind.getValue() == "state");
}

struct OffloadOptimizerPass
    : impl::OffloadOptimizerBase<OffloadOptimizerPass> {
  using OffloadOptimizerBase::OffloadOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(funcName);
    if (!f || f.isExternal() || !f.getBody().hasOneBlock()) {
      module.emitError() << "step-offload-optimizer: no function @"
                         << funcName << " of one block";
      return signalPassFailure();
    }
    if (f->hasAttr("step.offload_optimizer")) {
      f.emitError("step-offload-optimizer: already applied");
      return signalPassFailure();
    }
    Block &body = f.getBody().front();
    Builder b(f.getContext());
    StringAttr hostMemory = b.getStringAttr("host");

    // Arguments: params and state to host memory; state seeds "computed
    // from optimizer state".
    DenseSet<Value> fromState;
    int64_t paramBytes = 0, stateBytes = 0;
    for (BlockArgument arg : f.getArguments()) {
      auto kind = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.kind");
      if (!hostKind(kind))
        continue;
      f.setArgAttr(arg.getArgNumber(), "step.memory", hostMemory);
      bool state = kind.getValue() == "state";
      (state ? stateBytes : paramBytes) += tensorBytes(arg.getType());
      if (state)
        fromState.insert(arg);
    }

    // 1. Placement: candidates in order (operands first), then, in
    // reverse (users first), the candidates an update or a host result
    // slot needs.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    DenseSet<Operation *> candidates, onHost;
    auto hostSide = [&](Value v) {
      Operation *d = v.getDefiningOp();
      return isConstant(v) || isHostValue(v) || (d && candidates.contains(d));
    };
    int64_t hostOps = 0, updates = 0;
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator()) {
      ops.push_back(&op);
      if (isa<ConstantOp>(op))
        continue;
      bool update = isUpdate(&op);
      bool stateOperand = llvm::any_of(
          op.getOperands(), [&](Value v) { return fromState.contains(v); });
      // A device scalar is cheap to copy out (a flag, a norm).
      bool operandsOk = llvm::all_of(op.getOperands(), [&](Value v) {
        return hostSide(v) || isScalar(v);
      });
      bool scalarBroadcast =
          isa<BroadcastInDimOp>(op) && isScalar(op.getOperand(0));
      if (mayRunOnHost(&op) &&
          (update || (operandsOk && (stateOperand || scalarBroadcast))))
        candidates.insert(&op);
      if (update || stateOperand)
        fromState.insert(op.getResults().begin(), op.getResults().end());
    }
    for (Operation *op : llvm::reverse(ops)) {
      if (!candidates.contains(op))
        continue;
      bool keep = isUpdate(op);
      for (OpOperand &use : op->getUses()) {
        Operation *user = use.getOwner();
        keep = keep || onHost.contains(user) ||
               (user == ret &&
                hostKind(f.getResultAttrOfType<StringAttr>(
                    use.getOperandNumber(), "step.kind")));
      }
      if (!keep)
        continue;
      onHost.insert(op);
      op->setAttr("step.host", b.getUnitAttr());
      ++hostOps;
      updates += isUpdate(op);
    }
    if (updates == 0) {
      f.emitError("step-offload-optimizer: @")
          << funcName << " has no optimizer update (run step-optimizer "
          << "first)";
      return signalPassFailure();
    }

    // 2. Copies.
    DenseMap<Value, Value> offloaded, reloaded;
    int64_t offloads = 0, reloads = 0, offloadedBytes = 0, reloadedBytes = 0;
    Operation *lastArgReload = nullptr;
    auto offloadOf = [&](Value v, Operation *reader) {
      Value &h = offloaded[v];
      if (!h) {
        OpBuilder ob(reader);
        h = ob.create<OffloadOp>(v.getLoc(), v);
        ++offloads;
        offloadedBytes += tensorBytes(v.getType());
      }
      return h;
    };
    auto reloadOf = [&](Value v) {
      Value &d = reloaded[v];
      if (!d) {
        OpBuilder ob(f.getContext());
        bool arg = isa<BlockArgument>(v);
        if (!arg)
          ob.setInsertionPointAfter(v.getDefiningOp());
        else if (lastArgReload)
          ob.setInsertionPointAfter(lastArgReload);
        else
          ob.setInsertionPointToStart(&body);
        auto r = ob.create<ReloadOp>(v.getLoc(), v);
        if (arg)
          lastArgReload = r;
        d = r;
        ++reloads;
        reloadedBytes += tensorBytes(v.getType());
      }
      return d;
    };
    for (Operation *op : ops) {
      // Copies made before this pass (step-offload's) keep their operands.
      if (isa<ConstantOp, OffloadOp, ReloadOp>(op))
        continue;
      bool onHost = op->hasAttr("step.host");
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (isConstant(v))
          continue;
        bool inHost = isHostValue(v);
        if (onHost && !inHost)
          use.set(offloadOf(v, op));
        else if (!onHost && inHost)
          use.set(reloadOf(v));
      }
    }
    for (OpOperand &use : ret->getOpOperands()) {
      unsigned i = use.getOperandNumber();
      bool slotHost =
          hostKind(f.getResultAttrOfType<StringAttr>(i, "step.kind"));
      if (slotHost)
        f.setResultAttr(i, "step.memory", hostMemory);
      Value v = use.get();
      if (isConstant(v))
        continue;
      bool inHost = isHostValue(v);
      if (slotHost && !inHost)
        use.set(offloadOf(v, ret));
      else if (!slotHost && inHost)
        use.set(reloadOf(v));
    }

    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    f->setAttr("step.offload_optimizer",
               b.getDictionaryAttr({
                   b.getNamedAttr("host_ops", i64(hostOps)),
                   b.getNamedAttr("updates", i64(updates)),
                   b.getNamedAttr("params_bytes", i64(paramBytes)),
                   b.getNamedAttr("state_bytes", i64(stateBytes)),
                   b.getNamedAttr("offloads", i64(offloads)),
                   b.getNamedAttr("offloaded_bytes", i64(offloadedBytes)),
                   b.getNamedAttr("reloads", i64(reloads)),
                   b.getNamedAttr("reloaded_bytes", i64(reloadedBytes)),
               }));
  }
};

} // namespace
} // namespace mlir::step
