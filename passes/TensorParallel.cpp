//===- TensorParallel.cpp - Megatron-style tensor parallelism -----------===//
//
// step-tensor-parallel{size=T world-size=N} rewrites the forward function
// (before step-autodiff) into the program each rank of a tensor-parallel
// group of T ranks runs: pairs of matmuls split Megatron-style (Shoeybi et
// al. 2019), the first by output columns, the second by input rows.
// Ranks are laid out rank = d * T + t: the T ranks d*T .. d*T+T-1 form a
// group, t is a rank's index in it (N / T groups replicate each other, for
// data parallelism across groups, done later by step-shard).
//
// Guarantees: for every region found, the forward on each rank computes
// the unsplit forward's values outside the region exactly as before
// (after an all_reduce (sum) of the row-parallel partial products; the
// sum's order may differ from one matmul's, so bits may differ); split
// params (arguments) get their local type and `step.tp_split = [dim,
// groups]`, and the module a `step.tp` dictionary (size, world size, and
// per split param its dim, groups and full shape) for step-shard, stepc's
// report and the runtime, which cuts a full tensor into the rank's part:
// along `dim`, each of `groups` equal groups split in T contiguous blocks,
// block t of every group concatenated (groups > 1: a fused q/k/v weight).
// The VJP of the all_reduce (sum) is an all_reduce (sum) of the cotangent
// (SPMD: each rank's loss counts), so after autodiff every gradient is T
// times the single-process one on the same rows, and the gradient of a
// replicated param holds only its rank's share; step-shard (tp option)
// averages replicated gradients over the world and scales split ones by
// 1 / T (docs/distributed.md).
//
// Algorithm: every matmul `x @ W` (W a 2-D param argument used once, x not
// split) is a candidate root: its result is split along its last dim, and
// the split propagates forward in program order through
//   - elementwise ops (not dropout: its mask depends on the position) whose
//     other operands are split alike, or broadcasts of a param (then split
//     along the matching dim: a bias) or of a value constant along the
//     split dim (a scalar);
//   - broadcast_in_dim, transpose, reshape (the split dim must stay the
//     outermost of a merged or divided group), attention (heads, dim 1 of
//     [B, H, T, D]), batched matmuls split on one batch dim;
//   - slices: one group of a `groups`-split dim (q, k or v of c_attn; the
//     root is retried with groups = the dim's size / the slice's when the
//     first try meets such a slice), or any slice of another dim;
//   - a matmul `s @ W2` contracting the split dim with W2 a 2-D param used
//     once: W2 is split along its rows, and the partial product is
//     all_reduce'd (sum) over the group: the region's end.
// Any other use of a split value (a return, a norm, a loss, dropout, a
// reduction) rejects the candidate, whose IR is left as it was; dims must
// divide by T (and groups x T). Embeddings and tied weights stay
// replicated. The pass fails when no candidate is accepted.
//
// Cost: O(ops) per candidate root (each scans the ops after it once), so
// O(matmuls x ops) in all; per accepted region one all_reduce in the
// forward (and, from autodiff, one in the backward).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/StepAttrs.h"

#include "dialects/step/Fusion.h"

#include "llvm/ADT/MapVector.h"

namespace mlir::step {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "passes/Passes.h.inc"

namespace {

/// A value held split: along `dim`, `groups` groups of T blocks each.
struct Split {
  int64_t dim = 0;
  int64_t groups = 1;
  bool operator==(const Split &o) const {
    return dim == o.dim && groups == o.groups;
  }
};

/// One candidate's outcome: the split values and params, the row-parallel
/// matmuls ending it, or why it was rejected.
struct Region {
  llvm::MapVector<Value, Split> values;
  llvm::MapVector<unsigned, Split> params; ///< argument number -> split
  SmallVector<MatmulOp> ends;
  std::string reason;  ///< non-empty: rejected
  int64_t retryGroups = 0; ///< > 0: retry the root with these groups
};

struct TensorParallelPass : impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;

  func::FuncOp func;
  /// Params split by accepted regions.
  DenseSet<unsigned> taken;

  /// The param argument `v` is (a block argument of kind param), or null.
  BlockArgument paramArg(Value v) const {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner()->getParentOp() != func ||
        argKind(func, arg.getArgNumber()) != "param")
      return {};
    return arg;
  }

  /// A 2-D param used by `op` only and not split yet, or null.
  BlockArgument freeWeight(Value v, Operation *op) const {
    BlockArgument arg = paramArg(v);
    if (!arg || taken.contains(arg.getArgNumber()) ||
        cast<RankedTensorType>(arg.getType()).getRank() != 2)
      return {};
    for (Operation *user : arg.getUsers())
      if (user != op)
        return {};
    return arg;
  }

  static int64_t dimOf(Value v, int64_t d) {
    return cast<RankedTensorType>(v.getType()).getDimSize(d);
  }

  /// Records `v` split as `s`, if its dim divides into groups x T blocks.
  bool assign(Region &r, Value v, Split s) {
    int64_t size = dimOf(v, s.dim);
    if (ShapedType::isDynamic(size) || size % (s.groups * tpSize) != 0) {
      r.reason = "dim " + std::to_string(s.dim) + " of size " +
                 std::to_string(size) + " does not divide into " +
                 std::to_string(s.groups * tpSize) + " blocks";
      return false;
    }
    r.values[v] = s;
    return true;
  }

  /// Brings a replicated operand of an elementwise op into split `s`: a
  /// broadcast of a param (split along the matching dim) or of a value
  /// constant along the split dim.
  bool pullIn(Region &r, Value v, Split s) {
    auto bc = v.getDefiningOp<BroadcastInDimOp>();
    if (!bc || !v.hasOneUse()) {
      r.reason = "a replicated operand of the same shape (only broadcasts "
                 "of a param or of a value constant along the split dim "
                 "can join a split value)";
      return false;
    }
    ArrayRef<int64_t> dims = bc.getBroadcastDimensions();
    auto *at = llvm::find(dims, s.dim);
    if (at == dims.end())
      return assign(r, v, s); // constant along the split dim
    auto k = static_cast<int64_t>(at - dims.begin());
    BlockArgument p = paramArg(bc.getOperand());
    if (!p || taken.contains(p.getArgNumber()) || !p.hasOneUse() ||
        dimOf(p, k) != dimOf(v, s.dim)) {
      r.reason = "a broadcast along the split dim of something other than "
                 "a param used once";
      return false;
    }
    r.params[p.getArgNumber()] = {k, s.groups};
    return assign(r, p, {k, s.groups}) && assign(r, v, s);
  }

  /// The split of reshape's result, the operand split as `s`.
  std::optional<Split> throughReshape(Region &r, ReshapeOp op, Split s) {
    auto in = cast<RankedTensorType>(op.getOperand().getType()).getShape();
    auto out = cast<RankedTensorType>(op.getType()).getShape();
    if (s.groups != 1) {
      r.reason = "a reshape of a value split in groups";
      return std::nullopt;
    }
    auto prefix = [](ArrayRef<int64_t> shape) {
      SmallVector<int64_t> p{1};
      for (int64_t d : shape)
        p.push_back(p.back() * d);
      return p;
    };
    SmallVector<int64_t> pin = prefix(in), pout = prefix(out);
    int64_t begin = pin[s.dim], end = pin[s.dim + 1];
    for (size_t k = 0; k < out.size(); ++k) {
      if (pout[k] != begin || out[k] == 1)
        continue;
      // Divided (the split dim becomes out[k] and inner dims): out[k]
      // takes the blocks. Merged (out[k] spans the split dim and inner
      // ones): the split dim must be the group's outermost, as it is here.
      bool divided = pout[k + 1] <= end && llvm::is_contained(pout, end);
      bool merged = pout[k + 1] > end && llvm::is_contained(pin, pout[k + 1]);
      if ((divided && out[k] % tpSize == 0) || merged)
        return Split{static_cast<int64_t>(k), 1};
    }
    r.reason = "a reshape that moves the split dim inside another dim";
    return std::nullopt;
  }

  /// Propagates the root's split through the ops after it.
  Region analyze(MatmulOp root, BlockArgument weight, int64_t groups) {
    Region r;
    auto rank = cast<RankedTensorType>(root.getType()).getRank();
    r.params[weight.getArgNumber()] = {1, groups};
    if (!assign(r, weight, {1, groups}) ||
        !assign(r, root.getResult(), {rank - 1, groups}))
      return r;
    for (Operation *op = root->getNextNode(); op; op = op->getNextNode()) {
      std::optional<Split> in;
      for (Value v : op->getOperands())
        if (auto it = r.values.find(v); it != r.values.end() && !in)
          in = it->second;
      if (!in)
        continue;
      if (!step(r, op, *in)) {
        if (r.reason.empty())
          r.reason = "unsupported";
        std::string what;
        llvm::raw_string_ostream os(what);
        os << "'" << op->getName() << "' at " << op->getLoc() << ": "
           << r.reason;
        r.reason = what;
        return r;
      }
    }
    if (r.ends.empty())
      r.reason = "no row-parallel matmul ends the region";
    return r;
  }

  /// One op reading a split value; false (with r.reason) rejects.
  bool step(Region &r, Operation *op, Split s) {
    auto splitOf = [&](Value v) -> std::optional<Split> {
      if (auto it = r.values.find(v); it != r.values.end())
        return it->second;
      return std::nullopt;
    };
    if (auto bc = dyn_cast<BroadcastInDimOp>(op))
      return assign(r, bc, {bc.getBroadcastDimensions()[s.dim], s.groups});
    if (auto tr = dyn_cast<TransposeOp>(op)) {
      ArrayRef<int64_t> perm = tr.getPermutation();
      return assign(r, tr,
                    {static_cast<int64_t>(llvm::find(perm, s.dim) -
                                          perm.begin()),
                     s.groups});
    }
    if (auto re = dyn_cast<ReshapeOp>(op)) {
      std::optional<Split> out = throughReshape(r, re, s);
      return out && assign(r, re, *out);
    }
    if (auto sl = dyn_cast<SliceOp>(op)) {
      int64_t d = s.dim, full = dimOf(sl.getOperand(), d);
      int64_t start = sl.getStart()[d], limit = sl.getLimit()[d];
      if (sl.getStrides()[d] != 1) {
        r.reason = "a strided slice of the split dim";
        return false;
      }
      if (start == 0 && limit == full)
        return assign(r, sl, s);
      int64_t width = limit - start;
      if (s.groups > 1 && width * s.groups == full && start % width == 0)
        return assign(r, sl, {d, 1});
      if (s.groups == 1 && width > 0 && full % width == 0 &&
          start % width == 0) {
        r.retryGroups = full / width;
        r.reason = "a slice of one of " + std::to_string(full / width) +
                   " groups";
        return false;
      }
      r.reason = "a slice that is not one of the split dim's groups";
      return false;
    }
    if (auto at = dyn_cast<AttentionOp>(op)) {
      for (Value v : {at.getQuery(), at.getKey(), at.getValue()})
        if (std::optional<Split> o = splitOf(v); !o || !(*o == Split{1, 1})) {
          r.reason = "attention needs q, k and v split by heads (dim 1)";
          return false;
        }
      return assign(r, at, {1, 1});
    }
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      auto lhs = splitOf(mm.getLhs()), rhs = splitOf(mm.getRhs());
      int64_t rank = cast<RankedTensorType>(mm.getType()).getRank();
      if (lhs && !rhs && !mm.getTransposeA() && !mm.getTransposeB() &&
          lhs->dim == rank - 1 && lhs->groups == 1) {
        BlockArgument w = freeWeight(mm.getRhs(), op);
        if (!w) {
          r.reason = "a matmul contracting the split dim with something "
                     "other than a 2-D param used once";
          return false;
        }
        r.params[w.getArgNumber()] = {0, 1};
        r.ends.push_back(mm);
        return assign(r, w, {0, 1});
      }
      if (lhs && rhs && *lhs == *rhs && lhs->dim < rank - 2)
        return assign(r, mm, *lhs); // batched along the split dim
      r.reason = "a matmul of a split value that is neither row-parallel "
                 "nor batched along the split dim";
      return false;
    }
    if (fusionRole(op) == FusionRole::Elementwise && !isa<DropoutOp>(op)) {
      for (Value v : op->getOperands()) {
        if (auto o = splitOf(v)) {
          if (!(*o == s)) {
            r.reason = "operands split differently";
            return false;
          }
        } else if (!pullIn(r, v, s)) {
          return false;
        }
      }
      for (Value res : op->getResults())
        if (!assign(r, res, s))
          return false;
      return true;
    }
    r.reason = isa<DropoutOp>(op)
                   ? "dropout's mask depends on the element's position"
                   : "the op cannot take a split operand";
    return false;
  }

  RankedTensorType localType(Value v, Split s) const {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[s.dim] /= tpSize;
    return RankedTensorType::get(shape, t.getElementType());
  }

  /// Rewrites an accepted region to local types and closes its ends.
  void commit(Region &r, OpBuilder &b, DenseI64ArrayAttr groupsAttr) {
    for (auto &[v, s] : r.values) {
      if (auto sl = v.getDefiningOp<SliceOp>()) {
        // Bounds along the operand's split dim shrink with it.
        Split in = r.values.lookup(sl.getOperand());
        SmallVector<int64_t> start(sl.getStart()), limit(sl.getLimit());
        start[in.dim] /= tpSize;
        limit[in.dim] /= tpSize;
        sl.setStart(start);
        sl.setLimit(limit);
      }
      v.setType(localType(v, s));
    }
    for (auto &[i, s] : r.params) {
      taken.insert(i);
      func.setArgAttr(i, "step.tp_split",
                      b.getDenseI64ArrayAttr({s.dim, s.groups}));
    }
    for (MatmulOp end : r.ends) {
      b.setInsertionPointAfter(end);
      auto sum = b.create<AllReduceOp>(end.getLoc(), end.getResult(),
                                       b.getStringAttr("sum"),
                                       b.getI64IntegerAttr(tpSize), groupsAttr);
      end.getResult().replaceAllUsesExcept(sum, sum);
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tpSize < 1 || worldSize < tpSize || worldSize % tpSize != 0) {
      module.emitError() << "step-tensor-parallel: size = "
                         << static_cast<int64_t>(tpSize)
                         << " must be >= 1 and divide world-size = "
                         << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }
    func = module.lookupSymbol<func::FuncOp>(funcName);
    if (!func) {
      module.emitError() << "step-tensor-parallel: no @" << funcName;
      return signalPassFailure();
    }
    if (module->hasAttr("step.tp")) {
      module.emitError() << "step-tensor-parallel: the module is already "
                            "split (step.tp)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    SmallVector<int64_t> ranks;
    for (int64_t i = 0; i < worldSize; ++i)
      ranks.push_back(i);
    auto groupsAttr = b.getDenseI64ArrayAttr(ranks);
    // Full shapes before any rewrite (for step.tp).
    SmallVector<RankedTensorType> fullTypes;
    for (Type t : func.getArgumentTypes())
      fullTypes.push_back(dyn_cast<RankedTensorType>(t));

    SmallVector<MatmulOp> roots;
    func.walk([&](MatmulOp m) { roots.push_back(m); });
    std::string rejected;
    int accepted = 0;
    for (MatmulOp root : roots) {
      if (root.getTransposeA() || root.getTransposeB())
        continue;
      BlockArgument w = freeWeight(root.getRhs(), root);
      auto lhsType = cast<RankedTensorType>(root.getLhs().getType());
      if (!w || !lhsType.hasStaticShape())
        continue;
      Region r = analyze(root, w, 1);
      if (r.retryGroups > 0)
        r = analyze(root, w, r.retryGroups);
      if (!r.reason.empty()) {
        if (rejected.size() < 2000)
          rejected += "\n  " + argName(func, w.getArgNumber()) + ": " +
                      r.reason;
        continue;
      }
      commit(r, b, groupsAttr);
      ++accepted;
    }
    if (accepted == 0) {
      func.emitError() << "step-tensor-parallel: found no matmul pair to "
                          "split over "
                       << static_cast<int64_t>(tpSize)
                       << " ranks (x @ W1 ... @ W2 with W1, W2 2-D params "
                          "used once); candidates:"
                       << (rejected.empty() ? "\n  none" : rejected);
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    func.setFunctionType(b.getFunctionType(
        body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));

    SmallVector<NamedAttribute> split;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto s = func.getArgAttrOfType<DenseI64ArrayAttr>(i, "step.tp_split");
      if (!s)
        continue;
      SmallVector<int64_t> entry(s.asArrayRef());
      llvm::append_range(entry, fullTypes[i].getShape());
      split.push_back(b.getNamedAttr(argName(func, i),
                                     b.getDenseI64ArrayAttr(entry)));
    }
    module->setAttr(
        "step.tp",
        b.getDictionaryAttr(
            {b.getNamedAttr("size", b.getI64IntegerAttr(tpSize)),
             b.getNamedAttr("world_size", b.getI64IntegerAttr(worldSize)),
             b.getNamedAttr("split", b.getDictionaryAttr(split))}));
  }
};

} // namespace
} // namespace mlir::step
