//===- Shard.cpp - Data parallelism and ZeRO-1/2/3 across replicas ------===//
//
// step-shard{mode=dp|zero1|zero2|zero3 world-size=N} turns @train_step (as
// step-optimizer builds it: a call of @forward_backward, then the update)
// into the program every one of N replicas runs on its own slice of the
// global batch (SPMD; the model was traced for the per-replica batch, as a
// DDP user writes it). With a loss that is a mean over the batch, the
// replicas' losses, gradients and updated params equal those of one
// process on the N-times larger batch.
//
// Guarantees, per mode (ZeRO, Rajbhandari et al. 2020; P params, S =
// ceil(numel / N) elements per shard):
//   dp     the loss and every gradient are all_reduce'd (mean) right after
//          the backward; clipping, loss scaling and the update run on the
//          same values on every replica.
//   zero1  as dp, and the optimizer state (opt.<slot>.<param>) is sharded:
//          each replica holds and updates block `rank` of every state
//          tensor, reads its block of param and gradient (local_shard) and
//          all_gathers the updated params.
//   zero2  as zero1, but gradients are reduce_scatter'd (mean) instead: a
//          replica keeps only its block of each gradient.
//   zero3  as zero2, and params are sharded too: a param argument is the
//          replica's block; it is all_gathered before each use, the update
//          writes the block only.
// Sharded arguments and results carry `step.full_shape` (the unsharded
// shape; the runtime shards and unshards checkpoints with it) and the
// function a `step.shard` dictionary: mode, world size, and per replica the
// bytes of params, gradients (as the collectives leave them) and optimizer
// state, next to the unsharded figures.
//
// Algorithm: collectives are inserted after the call and at the arguments;
// then a sharded layout (a value holds its replica's block of the
// flattened, zero-padded full tensor) propagates forward through the
// update half in program order: elementwise ops and sgd/adamw updates run
// on blocks (replicated operands enter through local_shard, broadcast
// scalars are re-broadcast to the block), a full reduce_sum becomes a
// block sum plus an all_reduce (padding adds zeros), check_finite an
// all_reduce (min) of the blocks' flags; anything else reading a block is
// an error naming the op. Sums and checks need zero padding: a block is
// marked possibly dirty where a broadcast scalar or an op with f(0) != 0
// may fill its padding, and a sum or check over it is refused.
//
// With `overlap` (default) the call is then inlined (without
// canonicalization, so the ops recorded here stay) and each gradient's
// collective moved up to right after the op that produces the gradient, so
// it can overlap the rest of the backward and, for zero2/3, the full
// gradient dies there; zero3's gathers are re-issued right before each
// use, so a full param lives only around the op that reads it, and with
// `prefetch` (default) moved up one layer: a layer's gathers are issued
// where the layer before it starts, so they overlap its compute (layers
// from param names; both schedules in CollectiveSchedule.h). With
// `bucket-bytes`, gradients of one element type that become ready one
// after another share one collective per bucket, closed once it holds at
// least bucket-bytes (DDP's buckets): flattened and concatenated (for
// reduce_scatter as [N, S_i] blocks side by side, so each replica's block
// of the bucket is its block of every gradient), then sliced apart.
// LAMB (a norm per whole param) is refused under ZeRO; dynamic shapes are
// padded away before autodiff.
//
// Cost: O(ops of @train_step) for the rewrite; per param one collective for
// its gradient, one all_gather for its update (zero1/2) and one per use
// (zero3).
//
//===----------------------------------------------------------------------===//

#include "passes/Activations.h"
#include "passes/CollectiveSchedule.h"
#include "passes/Passes.h"
#include "passes/StepAttrs.h"

#include "dialects/step/Fusion.h"
#include "dialects/step/VJPUtil.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::step {
#define GEN_PASS_DEF_SHARD
#include "passes/Passes.h.inc"

namespace {

struct ShardPass : impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;

  // Per run.
  int64_t n = 1;
  IntegerAttr groupSizeAttr;
  DenseI64ArrayAttr groupsAttr;
  /// Sharded values and the full type each is a block of.
  DenseMap<Value, RankedTensorType> full;
  /// Ops this pass made (the propagation skips them).
  DenseSet<Operation *> created;
  /// Blocks whose padding may not be zero (a broadcast scalar fills it,
  /// and ops like exp or add of a constant keep it so); a sum or a
  /// finiteness check over blocks refuses them.
  DenseSet<Value> dirty;
  /// Per gradient: the ops from its value to its collective, in order;
  /// moved up together by `overlap`. The loss's all_reduce moves alone.
  SmallVector<SmallVector<Operation *>> gradChains;
  Operation *lossReduce = nullptr;
  /// zero3: per param, the ops from the block to the full param.
  SmallVector<SmallVector<Operation *>> gatherChains;
  int64_t gradBytes = 0, gradBytesFull = 0;
  /// tp > 1: the tensor-parallel and data-parallel groups, the split
  /// params (name -> [dim, groups, full shape...]), the values held as a
  /// rank's part of a split tensor in the update half, and per split
  /// gradient its source and the ops that average it (hoisted by overlap,
  /// not bucketed: their groups differ from the world's).
  IntegerAttr tpSizeAttr, dpSizeAttr;
  DenseI64ArrayAttr dpGroupsAttr;
  DictionaryAttr tpSplit;
  DenseSet<Value> tpLocal;
  SmallVector<SmallVector<Operation *>> tpChains;

  bool sharded() const { return mode != "dp"; }

  // `overlap` inlines func.call, which needs func's inliner interface.
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<func::FuncDialect>();
    func::registerInlinerExtension(registry);
  }

  template <typename OpTy, typename... Args>
  OpTy make(OpBuilder &b, Location loc, Args &&...args) {
    auto op = b.create<OpTy>(loc, std::forward<Args>(args)...);
    created.insert(op);
    return op;
  }

  RankedTensorType blockType(RankedTensorType t) const {
    return RankedTensorType::get({shardSize(t.getNumElements(), n)},
                                 t.getElementType());
  }

  /// The ops that flatten `v` and zero-pad it to N * S elements.
  Value flatPadded(OpBuilder &b, Location loc, Value v,
                   SmallVectorImpl<Operation *> &chain) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t numel = t.getNumElements();
    int64_t padded = shardSize(numel, n) * n;
    if (t.getRank() != 1) {
      auto r = make<ReshapeOp>(b, loc,
                               RankedTensorType::get({numel},
                                                     t.getElementType()),
                               v);
      chain.push_back(r);
      v = r;
    }
    if (padded != numel) {
      auto p = make<PadOp>(b, loc, v, b.getDenseI64ArrayAttr({0}),
                           b.getDenseI64ArrayAttr({padded - numel}),
                           b.getF64FloatAttr(0.0));
      chain.push_back(p);
      v = p;
    }
    return v;
  }

  /// all_gather of a block, cut to the full type's elements and reshaped.
  Value gatherFull(OpBuilder &b, Location loc, Value block,
                   RankedTensorType fullType,
                   SmallVectorImpl<Operation *> &chain) {
    auto g = make<AllGatherOp>(b, loc, block, groupSizeAttr, groupsAttr);
    chain.push_back(g);
    Value v = g;
    int64_t numel = fullType.getNumElements();
    if (cast<RankedTensorType>(v.getType()).getDimSize(0) != numel) {
      auto s = make<SliceOp>(b, loc, v, b.getDenseI64ArrayAttr({0}),
                             b.getDenseI64ArrayAttr({numel}),
                             b.getDenseI64ArrayAttr({1}));
      chain.push_back(s);
      v = s;
    }
    if (fullType.getRank() != 1) {
      auto r = make<ReshapeOp>(b, loc, fullType, v);
      chain.push_back(r);
      v = r;
    }
    return v;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "none")
      return;
    if (mode != "dp" && mode != "zero1" && mode != "zero2" &&
        mode != "zero3") {
      module.emitError() << "step-shard: unknown mode '" << mode
                         << "', expected none, dp, zero1, zero2 or zero3";
      return signalPassFailure();
    }
    if (worldSize < 1) {
      module.emitError() << "step-shard: world-size = "
                         << static_cast<int64_t>(worldSize)
                         << " must be >= 1";
      return signalPassFailure();
    }
    n = worldSize;
    if (tp != 1 && failed(setUpTensorParallel(module)))
      return signalPassFailure();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError() << "step-shard: no @train_step; run step-optimizer "
                            "first";
      return signalPassFailure();
    }
    if (step->hasAttr("step.shard")) {
      step.emitError() << "step-shard: @train_step is already sharded";
      return signalPassFailure();
    }
    func::CallOp call;
    step.walk([&](func::CallOp c) {
      if (c.getCallee() == "forward_backward")
        call = c;
    });
    auto joint = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!call || !joint) {
      step.emitError() << "step-shard: @train_step must call "
                          "@forward_backward (run it after step-optimizer, "
                          "before inlining)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    groupSizeAttr = b.getI64IntegerAttr(n);
    SmallVector<int64_t> ranks;
    for (int64_t r = 0; r < n; ++r)
      ranks.push_back(r);
    groupsAttr = b.getDenseI64ArrayAttr(ranks);

    auto [paramBytesFull, stateBytesFull] = argumentBytes(step);

    if (failed(shardArguments(step, call)) ||
        failed(markTensorParallel(step)) ||
        failed(reduceAfterCall(b, joint, call)) ||
        failed(propagate(b, step)) || failed(propagateTensorParallel(step)))
      return signalPassFailure();

    // A tensor-parallel rank holds 1 / tp of each split param and slot.
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (step.getArgAttr(i, "step.tp_split")) {
        int64_t rest = tensorBytes(step.getArgument(i).getType()) * (tp - 1);
        (argKind(step, i) == "param" ? paramBytesFull : stateBytesFull) += rest;
      }
    // Types of the rewritten signature.
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    step.setFunctionType(b.getFunctionType(body.getArgumentTypes(),
                                           ret.getOperandTypes()));
    auto [paramBytes, stateBytes] = argumentBytes(step);
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    step->setAttr(
        "step.shard",
        b.getDictionaryAttr({
            b.getNamedAttr("mode", b.getStringAttr(tp > 1 ? std::string("tp") : std::string(mode))),
            b.getNamedAttr("world_size", i64(n)),
            b.getNamedAttr("params_bytes", i64(paramBytes)),
            b.getNamedAttr("grads_bytes", i64(gradBytes)),
            b.getNamedAttr("state_bytes", i64(stateBytes)),
            b.getNamedAttr("params_bytes_full", i64(paramBytesFull)),
            b.getNamedAttr("grads_bytes_full", i64(gradBytesFull)),
            b.getNamedAttr("state_bytes_full", i64(stateBytesFull)),
        }));

    if (tp > 1) {
      NamedAttrList attrs(step->getAttrOfType<DictionaryAttr>("step.shard"));
      attrs.set("tp", i64(tp));
      step->setAttr("step.shard", attrs.getDictionary(module.getContext()));
    }
    if (overlap && failed(inlineAndOverlap(module, step)))
      return signalPassFailure();
  }

  /// The bytes of the step's param and of its state arguments.
  static std::pair<int64_t, int64_t> argumentBytes(func::FuncOp step) {
    int64_t params = 0, state = 0;
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      int64_t bytes = tensorBytes(step.getArgument(i).getType());
      if (argKind(step, i) == "param")
        params += bytes;
      else if (argKind(step, i) == "state")
        state += bytes;
    }
    return {params, state};
  }

  /// Marks argument `i` sharded: its type becomes the block's, and
  /// `step.full_shape` records the full one.
  void shardArgument(func::FuncOp step, unsigned i) {
    BlockArgument arg = step.getArgument(i);
    if (full.count(arg))
      return;
    auto t = cast<RankedTensorType>(arg.getType());
    full[arg] = t;
    arg.setType(blockType(t));
    step.setArgAttr(i, "step.full_shape",
                    DenseI64ArrayAttr::get(step.getContext(), t.getShape()));
  }

  LogicalResult shardArguments(func::FuncOp step, func::CallOp call) {
    if (!sharded())
      return success();
    // Optimizer state: the slot operands of every update.
    WalkResult walk = step.walk([&](Operation *op) -> WalkResult {
      if (isa<LambUpdateOp>(op))
        return op->emitError()
               << "step-shard: mode " << mode
               << " cannot shard LAMB: its trust ratio needs the norm of "
                  "the whole param (use dp, or adamw / sgd)";
      SmallVector<Value> slots;
      if (auto a = dyn_cast<AdamwUpdateOp>(op))
        slots = {a.getExpAvg(), a.getExpAvgSq()};
      else if (auto s = dyn_cast<SgdUpdateOp>(op); s && s.getMomentumBuffer())
        slots = {s.getMomentumBuffer()};
      for (Value v : slots) {
        auto arg = dyn_cast<BlockArgument>(v);
        if (!arg || arg.getOwner()->getParentOp() != step ||
            argKind(step, arg.getArgNumber()) != "state")
          return op->emitError() << "step-shard: an optimizer slot that is "
                                    "not a state argument of @train_step";
        shardArgument(step, arg.getArgNumber());
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (mode != "zero3")
      return success();
    // zero3: params are blocks, gathered for the forward and backward.
    OpBuilder b = OpBuilder::atBlockBegin(&step.getBody().front());
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      if (argKind(step, i) != "param")
        continue;
      auto fullType = cast<RankedTensorType>(step.getArgument(i).getType());
      shardArgument(step, i);
      SmallVector<Operation *> chain;
      Value whole = gatherFull(b, step.getLoc(), step.getArgument(i),
                               fullType, chain);
      call->replaceUsesOfWith(step.getArgument(i), whole);
      gatherChains.push_back(chain);
    }
    return success();
  }

  LogicalResult reduceAfterCall(OpBuilder &b, func::FuncOp joint,
                                func::CallOp call) {
    Location loc = call.getLoc();
    b.setInsertionPointAfter(call);
    auto mean = b.getStringAttr("mean");
    for (unsigned r = 0; r < call.getNumResults(); ++r) {
      bool grad = resultKind(joint, r) == "grad";
      if (r != 0 && !grad)
        continue; // forward extras stay per replica
      Value v = call.getResult(r);
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<Operation *> chain;
      Value reduced;
      if (grad && tpSplit && resultName(joint, r).starts_with("grad.") &&
          tpSplit.get(resultName(joint, r).drop_front(5))) {
        reduceSplitGradient(b, loc, v);
        continue;
      }
      if (r == 0 || mode == "dp" || mode == "zero1") {
        auto ar = make<AllReduceOp>(b, loc, v, mean, groupSizeAttr, groupsAttr);
        chain.push_back(ar);
        reduced = ar;
      } else {
        Value flat = flatPadded(b, loc, v, chain);
        auto rs = make<ReduceScatterOp>(b, loc, flat, mean, groupSizeAttr,
                                        groupsAttr);
        chain.push_back(rs);
        reduced = rs;
        full[reduced] = t;
      }
      if (grad) {
        gradBytes += tensorBytes(reduced.getType());
        gradBytesFull += tensorBytes(t);
      }
      SmallPtrSet<Operation *, 2> except{chain.front()};
      v.replaceAllUsesExcept(reduced, except);
      if (grad)
        gradChains.push_back(chain);
      else
        lossReduce = chain.front();
    }
    return success();
  }

  /// Checks the step-tensor-parallel run this one follows and builds the
  /// groups: tensor-parallel groups of tp consecutive ranks, data-parallel
  /// groups of the ranks with one index t in theirs.
  LogicalResult setUpTensorParallel(ModuleOp module) {
    auto info = module->getAttrOfType<DictionaryAttr>("step.tp");
    auto size = info ? info.getAs<IntegerAttr>("size") : IntegerAttr();
    if (!size || size.getInt() != tp)
      return module.emitError()
             << "step-shard: tp = " << static_cast<int64_t>(tp)
             << " needs the forward split by step-tensor-parallel{size="
             << static_cast<int64_t>(tp) << "} first";
    if (mode != "dp")
      return module.emitError()
             << "step-shard: mode " << mode
             << " with tensor parallelism is not supported (tp runs with "
                "data parallelism across its groups: mode dp)";
    if (n % tp != 0)
      return module.emitError() << "step-shard: tp = "
                                << static_cast<int64_t>(tp)
                                << " does not divide world-size = " << n;
    tpSplit = info.getAs<DictionaryAttr>("split");
    if (!tpSplit)
      return module.emitError() << "step-shard: step.tp has no split params";
    OpBuilder b(module.getContext());
    int64_t d = n / tp;
    SmallVector<int64_t> ranks;
    for (int64_t t = 0; t < tp; ++t)
      for (int64_t i = 0; i < d; ++i)
        ranks.push_back(i * tp + t);
    tpSizeAttr = b.getI64IntegerAttr(tp);
    dpSizeAttr = b.getI64IntegerAttr(d);
    dpGroupsAttr = b.getDenseI64ArrayAttr(ranks);
    return success();
  }

  /// step.name of result `r`, or "".
  static StringRef resultName(func::FuncOp f, unsigned r) {
    return stringAttrOf(f.getResultAttrDict(r), "step.name");
  }

  /// Marks split params and their optimizer slots (`step.tp_split` with
  /// the full shape) as a rank's parts.
  LogicalResult markTensorParallel(func::FuncOp step) {
    if (!tpSplit)
      return success();
    auto mark = [&](unsigned i, Attribute entry) {
      step.setArgAttr(i, "step.tp_split", entry);
      tpLocal.insert(step.getArgument(i));
    };
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (argKind(step, i) == "param")
        if (Attribute entry = tpSplit.get(argName(step, i)))
          mark(i, entry);
    WalkResult walk = step.walk([&](Operation *op) -> WalkResult {
      SmallVector<Value> slots;
      Value param;
      if (auto a = dyn_cast<AdamwUpdateOp>(op))
        param = a.getParam(), slots = {a.getExpAvg(), a.getExpAvgSq()};
      else if (auto u = dyn_cast<SgdUpdateOp>(op); u && u.getMomentumBuffer())
        param = u.getParam(), slots = {u.getMomentumBuffer()};
      else if (auto l = dyn_cast<LambUpdateOp>(op); l && tpLocal.contains(l.getParam()))
        return op->emitError() << "step-shard: LAMB cannot update a param "
                                  "split by tensor parallelism (its trust "
                                  "ratio needs the whole param's norm)";
      auto arg = dyn_cast_or_null<BlockArgument>(param);
      if (!arg || !tpLocal.contains(arg))
        return WalkResult::advance();
      for (Value v : slots)
        if (auto slot = dyn_cast<BlockArgument>(v);
            slot && slot.getOwner()->getParentOp() == step)
          mark(slot.getArgNumber(),
               step.getArgAttr(arg.getArgNumber(), "step.tp_split"));
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// The gradient of a split param: every rank of a tensor-parallel group
  /// counted the loss once, so it is tp times the single-process gradient
  /// of its part; averaged over the data-parallel group and divided by tp.
  void reduceSplitGradient(OpBuilder &b, Location loc, Value grad) {
    SmallVector<Operation *> chain;
    Value v = grad;
    if (n / tp > 1) {
      auto ar = make<AllReduceOp>(b, loc, v, b.getStringAttr("mean"),
                                  dpSizeAttr, dpGroupsAttr);
      chain.push_back(ar);
      v = ar;
    }
    Value scaled = vjp::scale(b, loc, v, 1.0 / static_cast<double>(tp));
    Operation *mul = scaled.getDefiningOp();
    for (Value operand : mul->getOperands())
      if (operand != v)
        chain.push_back(operand.getDefiningOp());
    chain.push_back(mul);
    for (Operation *op : chain)
      created.insert(op);
    int64_t bytes = tensorBytes(grad.getType());
    gradBytes += bytes;
    gradBytesFull += bytes * tp; // the rank's part is all it ever holds
    SmallPtrSet<Operation *, 3> except(chain.begin(), chain.end());
    grad.replaceAllUsesExcept(scaled, except);
    tpLocal.insert(scaled);
    tpChains.push_back(chain);
  }

  /// The update half on a rank's parts of split params: elementwise ops
  /// and updates keep them parts; a full reduce_sum (clipping's norm) adds
  /// the group's partial sums, check_finite takes the group's minimum.
  LogicalResult propagateTensorParallel(func::FuncOp step) {
    if (!tpSplit)
      return success();
    OpBuilder b(step.getContext());
    Block &body = step.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (created.contains(&op) ||
          llvm::none_of(op.getOperands(),
                        [&](Value v) { return tpLocal.contains(v); }))
        continue;
      if (isa<func::ReturnOp, func::CallOp>(op)) // results; the split forward
        continue;
      if ((fusionRole(&op) == FusionRole::Elementwise &&
           !isa<DropoutOp>(op)) ||
          isa<AdamwUpdateOp, SgdUpdateOp>(op)) {
        for (Value r : op.getResults())
          tpLocal.insert(r);
        continue;
      }
      auto sum = dyn_cast<ReduceSumOp>(op);
      bool fullSum =
          sum && !sum.getKeepdim() &&
          sum.getDims().size() ==
              static_cast<size_t>(
                  cast<RankedTensorType>(sum.getOperand().getType()).getRank());
      if (!fullSum && !isa<CheckFiniteOp>(op))
        return op.emitError()
               << "step-shard: '" << op.getName()
               << "' reads a rank's part of a param split by tensor "
                  "parallelism; the update half may hold elementwise ops, "
                  "sgd/adamw updates, full reduce_sums and check_finite";
      b.setInsertionPointAfter(&op);
      auto all = make<AllReduceOp>(
          b, op.getLoc(), op.getResult(0),
          b.getStringAttr(fullSum ? "sum" : "min"), tpSizeAttr, groupsAttr);
      op.getResult(0).replaceAllUsesExcept(all, all);
    }
    return success();
  }

  /// An operand of an op being rewritten on blocks, as a block.
  Value asBlock(OpBuilder &b, Location loc, Value v, RankedTensorType ref) {
    if (auto it = full.find(v); it != full.end())
      return v;
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getShape() != ref.getShape())
      return Value();
    auto block = blockType(t);
    if (auto bc = v.getDefiningOp<BroadcastInDimOp>())
      if (cast<RankedTensorType>(bc.getOperand().getType()).getRank() == 0) {
        Value scalar = make<BroadcastInDimOp>(b, loc, block, bc.getOperand(),
                                              b.getDenseI64ArrayAttr({}));
        dirty.insert(scalar);
        return scalar;
      }
    return make<LocalShardOp>(b, loc, v, groupSizeAttr, groupsAttr);
  }

  LogicalResult propagate(OpBuilder &b, func::FuncOp step) {
    Block &body = step.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (created.contains(&op))
        continue;
      Value blockOperand;
      for (Value v : op.getOperands())
        if (full.count(v))
          blockOperand = v;
      if (!blockOperand)
        continue;
      RankedTensorType ref = full[blockOperand];
      b.setInsertionPoint(&op);
      Location loc = op.getLoc();
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        if (failed(finishResults(b, step, ret)))
          return failure();
        continue;
      }
      bool elementwise = fusionRole(&op) == FusionRole::Elementwise &&
                         !isa<DropoutOp>(op);
      if (elementwise || isa<AdamwUpdateOp, SgdUpdateOp>(op)) {
        // An update's step counter and learning rate stay whole; a rank-0
        // param, its gradient and its slots are blocks like any other.
        SmallVector<unsigned> hyper;
        if (auto a = dyn_cast<AdamwUpdateOp>(op))
          hyper = {a.getStepMutable().getOperandNumber(),
                   a.getLrMutable().getOperandNumber()};
        else if (auto u = dyn_cast<SgdUpdateOp>(op))
          hyper = {u.getStepMutable().getOperandNumber(),
                   u.getLrMutable().getOperandNumber()};
        SmallVector<Value> operands;
        for (OpOperand &use : op.getOpOperands()) {
          Value v = use.get();
          bool whole = llvm::is_contained(hyper, use.getOperandNumber());
          Value block = whole ? v : asBlock(b, loc, v, ref);
          if (!block)
            return op.emitError()
                   << "step-shard: operand of type " << v.getType()
                   << " mixes with a sharded " << ref;
          operands.push_back(block);
        }
        bool padDirty = !keepsZeroPadding(op, operands, hyper);
        Operation *clone = b.clone(op);
        clone->setOperands(operands);
        for (auto [old, now] : llvm::zip(op.getResults(), clone->getResults())) {
          auto t = cast<RankedTensorType>(old.getType());
          if (t.getShape() == ref.getShape()) {
            now.setType(blockType(t));
            full[now] = t;
            if (padDirty)
              dirty.insert(now);
          }
          old.replaceAllUsesWith(now);
        }
        created.insert(clone);
        op.erase();
        continue;
      }
      if (isa<ReduceSumOp, CheckFiniteOp>(op))
        for (Value v : op.getOperands())
          if (dirty.contains(v))
            return op.emitError()
                   << "step-shard: the padding of a block of " << full[v]
                   << " may not be zero here (an op before it maps 0 to "
                      "something else), so '"
                   << op.getName() << "' over blocks would count it";
      if (auto sum = dyn_cast<ReduceSumOp>(op);
          sum && !sum.getKeepdim() &&
          sum.getDims().size() == static_cast<size_t>(ref.getRank())) {
        // Padding adds zeros: the block sums add up to the full sum.
        auto part = make<ReduceSumOp>(b, loc, blockOperand,
                                      b.getDenseI64ArrayAttr({0}), false);
        auto total = make<AllReduceOp>(b, loc, part, b.getStringAttr("sum"),
                                       groupSizeAttr, groupsAttr);
        sum.replaceAllUsesWith(total.getResult());
        sum.erase();
        continue;
      }
      if (auto check = dyn_cast<CheckFiniteOp>(op)) {
        auto local = make<CheckFiniteOp>(b, loc, check.getOperands());
        auto all = make<AllReduceOp>(b, loc, local, b.getStringAttr("min"),
                                     groupSizeAttr, groupsAttr);
        check.replaceAllUsesWith(all.getResult());
        check.erase();
        continue;
      }
      return op.emitError()
             << "step-shard: mode " << mode << " cannot shard '"
             << op.getName() << "', which reads a sharded value (a block of "
             << ref
             << "); the update half may hold elementwise ops, sgd/adamw "
                "updates, full reduce_sums and check_finite";
    }
    return success();
  }

  /// Whether `op` on `operands` (its blocks) leaves zero padding zero:
  /// x * 0 (one clean factor), sums and extrema of clean blocks, and ops
  /// with f(0) = 0; an update's hyper-parameters (`hyper`) do not count,
  /// and AdamW and SGD map a zero param, gradient and state to zero.
  bool keepsZeroPadding(Operation &op, ArrayRef<Value> operands,
                        ArrayRef<unsigned> hyper) const {
    auto clean = [&](unsigned i) { return !dirty.contains(operands[i]); };
    if (isa<MulOp>(op))
      return clean(0) || clean(1);
    if (isa<SelectOp>(op))
      return clean(1) && clean(2);
    if (!isa<AddOp, SubOp, MaxOp, MinOp, NegOp, AbsOp, ReluOp, SqrtOp, CastOp,
             StopGradientOp, AdamwUpdateOp, SgdUpdateOp>(op))
      return false;
    for (unsigned i = 0; i < operands.size(); ++i)
      if (!llvm::is_contained(hyper, i) && !clean(i))
        return false;
    return true;
  }

  /// Sharded results: param results are gathered (zero1/2) or stay blocks
  /// (zero3); state results stay blocks, as their arguments.
  LogicalResult finishResults(OpBuilder &b, func::FuncOp step,
                              func::ReturnOp ret) {
    for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
      Value v = ret.getOperand(r);
      auto it = full.find(v);
      if (it == full.end())
        continue;
      RankedTensorType t = it->second;
      StringRef kind = stringAttrOf(step.getResultAttrDict(r), "step.kind");
      if (kind == "param" && mode != "zero3") {
        SmallVector<Operation *> chain;
        ret.setOperand(r, gatherFull(b, ret.getLoc(), v, t, chain));
        continue;
      }
      if (kind != "param" && kind != "state")
        return ret.emitError() << "step-shard: result #" << r
                               << " is sharded but is no param or state";
      step.setResultAttr(r, "step.full_shape",
                         DenseI64ArrayAttr::get(step.getContext(),
                                                t.getShape()));
    }
    return success();
  }

  /// Inlines @train_step's calls, then moves every gradient collective up
  /// to its gradient and re-issues zero3 gathers before each use.
  LogicalResult inlineAndOverlap(ModuleOp module, func::FuncOp step) {
    // No canonicalization while inlining: it could fold the ops the chains
    // point to (the pipeline canonicalizes after this pass).
    OpPassManager inliner(ModuleOp::getOperationName());
    inliner.addPass(
        createInlinerPass(llvm::StringMap<OpPassManager>{}, [](OpPassManager &) {}));
    if (failed(runPipeline(inliner, module)))
      return failure();
    if (!step.getOps<func::CallOp>().empty())
      return step.emitError() << "step-shard: could not inline the backward "
                                 "into @train_step (overlap=false keeps it)";
    Block &body = step.getBody().front();
    auto hoist = [&](ArrayRef<Operation *> chain) {
      Value source = chain.front()->getOperand(0);
      if (Operation *def = source.getDefiningOp())
        chain.front()->moveAfter(def);
      else
        chain.front()->moveBefore(&body, body.begin());
      for (size_t i = 1; i < chain.size(); ++i)
        chain[i]->moveAfter(chain[i - 1]);
    };
    hoist(lossReduce);
    for (auto &chain : gradChains)
      hoist(chain);
    for (auto &chain : tpChains) {
      // After the gradient's producer (the one operand from outside).
      Operation *after = nullptr;
      for (Operation *op : chain)
        for (Value v : op->getOperands())
          if (!llvm::is_contained(chain, v.getDefiningOp()))
            after = v.getDefiningOp();
      for (Operation *op : chain) {
        if (after)
          op->moveAfter(after);
        else
          op->moveBefore(&body, body.begin());
        after = op;
      }
    }
    if (bucketBytes > 0)
      bucketGradientCollectives(gradChains, {n, groupSizeAttr, groupsAttr},
                                bucketBytes);
    // zero3: one gather per use, right before it; then, with `prefetch`,
    // a layer's gathers move up to where the layer before starts.
    SmallVector<LayerGather> gathers;
    for (auto &chain : gatherChains) {
      Value whole = chain.back()->getResult(0);
      auto arg = cast<BlockArgument>(chain.front()->getOperand(0));
      std::string unit = layerOfParam(argName(step, arg.getArgNumber()));
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : whole.getUses())
        uses.push_back(&use);
      for (OpOperand *use : uses) {
        OpBuilder b(use->getOwner());
        IRMapping map;
        LayerGather g{unit, use->getOwner(), {}};
        for (Operation *op : chain)
          g.chain.push_back(b.clone(*op, map));
        use->set(g.chain.back()->getResult(0));
        gathers.push_back(std::move(g));
      }
      for (Operation *op : llvm::reverse(chain))
        op->erase();
    }
    if (prefetch)
      prefetchLayers(gathers);
    return success();
  }
};

} // namespace
} // namespace mlir::step
