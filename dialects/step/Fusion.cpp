//===- Fusion.cpp - Fusion roles and the step.fusion verifier -------------===//

#include "dialects/step/Fusion.h"

#include "dialects/step/StepOps.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::step {

FusionRole fusionRole(Operation *op) {
  if (isa<NegOp, AbsOp, ReluOp, ExpOp, LogOp, TanhOp, SigmoidOp, SqrtOp,
          RsqrtOp, ErfOp, SinOp, CosOp, GeluOp, AddOp, SubOp, MulOp, DivOp,
          MaxOp, MinOp, PowOp, GeluGradOp, CompareOp, SelectOp, CastOp,
          DropoutOp, StopGradientOp>(op))
    return FusionRole::Elementwise;
  if (isa<BroadcastInDimOp, ReshapeOp, IotaOp>(op))
    return FusionRole::View;
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op))
    return FusionRole::Reduce;
  if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, CrossEntropyOp,
          CrossEntropyGradOp>(op))
    return FusionRole::RowOp;
  if (isa<SgdUpdateOp, AdamwUpdateOp, LambUpdateOp>(op))
    return FusionRole::Update;
  return FusionRole::None;
}

llvm::ArrayRef<int64_t> reducedDims(Operation *reduce) {
  if (auto r = dyn_cast<ReduceSumOp>(reduce))
    return r.getDims();
  if (auto r = dyn_cast<ReduceMeanOp>(reduce))
    return r.getDims();
  return cast<ReduceMaxOp>(reduce).getDims();
}

std::optional<int64_t> trailingLead(Operation *reduce) {
  llvm::ArrayRef<int64_t> dims = reducedDims(reduce);
  auto type = cast<RankedTensorType>(reduce->getOperand(0).getType());
  int64_t lead = type.getRank() - static_cast<int64_t>(dims.size());
  if (dims.empty())
    return std::nullopt;
  for (auto [k, d] : llvm::enumerate(dims))
    if (d != lead + static_cast<int64_t>(k))
      return std::nullopt;
  return lead;
}

bool reducesLeadingDims(Operation *reduce) {
  llvm::ArrayRef<int64_t> dims = reducedDims(reduce);
  for (auto [k, d] : llvm::enumerate(dims))
    if (d != static_cast<int64_t>(k))
      return false;
  return !dims.empty() && !trailingLead(reduce);
}

bool isCheapElementwise(Operation *op) {
  return isa<NegOp, AbsOp, ReluOp, AddOp, SubOp, MulOp, MaxOp, MinOp,
             CompareOp, SelectOp, CastOp, StopGradientOp>(op);
}

StridedView StridedView::contiguous(llvm::ArrayRef<int64_t> shape) {
  StridedView v;
  v.sizes.assign(shape.begin(), shape.end());
  v.strides.assign(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;)
    v.strides[k - 1] = v.strides[k] * shape[k];
  return v;
}

bool StridedView::rowsAligned8() const {
  size_t r = sizes.size();
  if (offset % 8 != 0 || (r >= 2 && sizes[r - 2] != 1 && strides[r - 2] % 8))
    return false;
  for (size_t k = 0; k + 2 < r; ++k)
    if (sizes[k] != 1 && strides[k] % 8 != 0)
      return false;
  return true;
}

bool isAttentionOp(Operation *op) {
  return isa<AttentionOp, AttentionLseOp, AttentionGradOp>(op);
}

bool isAttentionRowsOperand(Operation *op, unsigned i) {
  Value v = op->getOperand(i);
  if (auto g = dyn_cast<AttentionGradOp>(op))
    return v != g.getValid() && v != g.getLse();
  if (auto a = dyn_cast<AttentionLseOp>(op))
    return v != a.getValid();
  return v != cast<AttentionOp>(op).getValid();
}

bool isReindexing(Operation *op) {
  return isa<SliceOp, TransposeOp, ReshapeOp>(op);
}

/// `in` re-read with shape `shape` (same element count): dims are matched
/// in groups of equal products (size-1 dims aside); within a group the old
/// dims must be adjacent in memory (stride[k] == stride[k+1] * size[k+1]),
/// and the new dims of the group get row-major strides ending at the
/// group's innermost stride. The same test numpy makes before reshaping
/// without a copy.
static std::optional<StridedView> reshapeView(const StridedView &in,
                                              llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> oldSizes, oldStrides;
  for (auto [n, st] : llvm::zip(in.sizes, in.strides)) {
    if (n == 0)
      return std::nullopt;
    if (n != 1) {
      oldSizes.push_back(n);
      oldStrides.push_back(st);
    }
  }
  StridedView out;
  out.offset = in.offset;
  out.sizes.assign(shape.begin(), shape.end());
  out.strides.assign(shape.size(), 1);
  size_t oi = 0, ni = 0;
  while (ni < shape.size()) {
    if (shape[ni] == 1) {
      ++ni; // any stride reads the one element; 1 is as good as any
      continue;
    }
    if (shape[ni] == 0 || oi == oldSizes.size())
      return std::nullopt;
    size_t oj = oi + 1, nj = ni + 1;
    int64_t po = oldSizes[oi], pn = shape[ni];
    while (po != pn) {
      if (po < pn) {
        if (oj == oldSizes.size())
          return std::nullopt;
        po *= oldSizes[oj++];
      } else {
        if (nj == shape.size())
          return std::nullopt;
        pn *= shape[nj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (oldStrides[k] != oldStrides[k + 1] * oldSizes[k + 1])
        return std::nullopt;
    int64_t stride = oldStrides[oj - 1];
    for (size_t k = nj; k-- > ni;) {
      out.strides[k] = stride;
      stride *= shape[k];
    }
    oi = oj;
    ni = nj;
  }
  if (oi != oldSizes.size())
    return std::nullopt;
  return out;
}

static llvm::ArrayRef<int64_t> shapeOfValue(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// `v` with its dims permuted as a transpose by `perm` permutes them (dim
/// i of the result is dim perm[i] of `v`), or back (`inverse`).
static StridedView permuted(const StridedView &v, ArrayRef<int64_t> perm,
                            bool inverse) {
  StridedView out = v;
  for (auto [i, p] : llvm::enumerate(perm)) {
    size_t to = inverse ? p : i, from = inverse ? i : p;
    out.sizes[to] = v.sizes[from];
    out.strides[to] = v.strides[from];
  }
  return out;
}

std::optional<StridedView> viewThrough(Operation *op, const StridedView &in) {
  if (auto slice = dyn_cast<SliceOp>(op)) {
    StridedView out = in;
    for (auto [k, start, step] :
         llvm::enumerate(slice.getStart(), slice.getStrides())) {
      out.offset += start * in.strides[k];
      out.strides[k] = in.strides[k] * step;
    }
    out.sizes.assign(shapeOfValue(slice.getResult()).begin(),
                     shapeOfValue(slice.getResult()).end());
    return out;
  }
  if (auto t = dyn_cast<TransposeOp>(op))
    return permuted(in, t.getPermutation(), /*inverse=*/false);
  if (auto r = dyn_cast<ReshapeOp>(op))
    return reshapeView(in, shapeOfValue(r.getResult()));
  return std::nullopt;
}

std::optional<StridedView> viewBefore(Operation *op, const StridedView &out) {
  if (auto t = dyn_cast<TransposeOp>(op))
    return permuted(out, t.getPermutation(), /*inverse=*/true);
  if (auto r = dyn_cast<ReshapeOp>(op))
    return reshapeView(out, shapeOfValue(r.getOperand()));
  return std::nullopt;
}

std::optional<PortView> inputView(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return PortView{arg.getArgNumber(),
                    StridedView::contiguous(shapeOfValue(v))};
  Operation *op = v.getDefiningOp();
  if (!op || !isReindexing(op))
    return std::nullopt;
  auto in = inputView(op->getOperand(0));
  if (!in)
    return std::nullopt;
  auto view = viewThrough(op, in->view);
  if (!view)
    return std::nullopt;
  return PortView{in->index, *view};
}

std::optional<PortView> resultView(Value v) {
  if (!v.hasOneUse())
    return std::nullopt;
  OpOperand &use = *v.getUses().begin();
  Operation *user = use.getOwner();
  if (isa<YieldOp>(user))
    return PortView{use.getOperandNumber(),
                    StridedView::contiguous(shapeOfValue(v))};
  if (auto concat = dyn_cast<ConcatOp>(user)) {
    Value c = concat.getResult();
    if (!c.hasOneUse() || !isa<YieldOp>(*c.getUsers().begin()))
      return std::nullopt;
    PortView out{c.getUses().begin()->getOperandNumber(),
                 StridedView::contiguous(shapeOfValue(c))};
    int64_t d = concat.getDimension(), start = 0;
    for (Value in : concat.getInputs().take_front(use.getOperandNumber()))
      start += shapeOfValue(in)[d];
    out.view.offset += start * out.view.strides[d];
    out.view.sizes[d] = shapeOfValue(v)[d];
    return out;
  }
  if (!isa<TransposeOp, ReshapeOp>(user))
    return std::nullopt;
  auto out = resultView(user->getResult(0));
  if (!out)
    return std::nullopt;
  auto view = viewBefore(user, out->view);
  if (!view)
    return std::nullopt;
  return PortView{out->index, *view};
}

static int64_t numElements(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

/// C6: an attention fusion holds one attention op, re-indexing ops and
/// concatenations; the attention's row tensors are views of inputs with
/// unit innermost stride, its valid length and saved log-sum-exp are inputs
/// as they are; each result is yielded, through transposes and reshapes
/// only, as a view with unit innermost stride (the log-sum-exp as it is),
/// alone or as one input of a yielded concatenation whose every input is
/// such a result (results packed side by side, each kernel writing its
/// window).
LogicalResult FusionOp::verifyAttentionBody() {
  Operation *attention = nullptr;
  for (Operation &op : getBlock().without_terminator()) {
    if (isAttentionOp(&op) && !attention) {
      attention = &op;
      continue;
    }
    if (!isReindexing(&op) && !isa<ConcatOp>(op))
      return emitOpError("C6: an attention fusion holds one attention op "
                         "and slice, transpose, reshape and concat ops, "
                         "found '")
             << op.getName() << "'";
  }
  if (!attention)
    return emitOpError("C6: an attention fusion holds no attention op");
  for (auto [i, v] : llvm::enumerate(attention->getOperands())) {
    auto in = inputView(v);
    if (!in)
      return emitOpError("C6: attention operand ")
             << i
             << " is not read from an input through slices, "
                "transposes and reshapes";
    if (isAttentionRowsOperand(attention, i) ? in->view.strides.back() != 1
                                             : !isa<BlockArgument>(v))
      return emitOpError("C6: attention operand ")
             << i
             << (isAttentionRowsOperand(attention, i)
                     ? " does not have unit innermost stride"
                     : " must be an input as it is");
  }
  // Fusion result j is written by one attention result, or by one per
  // input of the concatenation it yields.
  llvm::SmallVector<unsigned> writers(getNumResults(), 0), expected;
  for (Value y : getYield()->getOperands()) {
    auto concat = y.getDefiningOp<ConcatOp>();
    expected.push_back(concat ? concat.getInputs().size() : 1);
  }
  for (auto [j, r] : llvm::enumerate(attention->getResults())) {
    auto out = resultView(r);
    if (!out || writers[out->index] == expected[out->index])
      return emitOpError("C6: attention result ")
             << j
             << " does not reach its own fusion result (or window of a "
                "concatenation) through transposes and reshapes";
    ++writers[out->index];
    bool lse = isa<AttentionLseOp>(attention) && j == 1;
    if (lse ? !r.hasOneUse() || !isa<YieldOp>(*r.getUsers().begin())
            : out->view.strides.back() != 1)
      return emitOpError("C6: attention result ")
             << j
             << (lse ? " must be yielded as it is"
                     : " does not have unit innermost stride");
  }
  for (auto [j, n] : llvm::enumerate(writers))
    if (n != expected[j])
      return emitOpError("C6: fusion result ")
             << j << " is written by " << n << " attention results, expected "
             << expected[j]
             << " (one, or one per input of the concatenation it yields)";
  return success();
}

//===----------------------------------------------------------------------===//
// row_chain bodies
//===----------------------------------------------------------------------===//

namespace {
enum class Level { Free, Row, Domain, Column };

std::string shapeText(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Whether broadcast `b` of a per-row value (rows elements) to shape
/// `domain` gives element i of the result the value of row i / cols: the
/// operand's non-unit dims map, in order, onto the leading `lead` dims
/// with their sizes, and nothing maps onto a trailing dim.
bool isRowBroadcast(BroadcastInDimOp b, llvm::ArrayRef<int64_t> domain,
                    int64_t lead) {
  auto in = cast<RankedTensorType>(b.getOperand().getType());
  auto out = cast<RankedTensorType>(b.getType());
  if (out.getShape() != domain)
    return false;
  auto dims = b.getBroadcastDimensions();
  llvm::SmallVector<int64_t> mapped;
  for (auto [k, d] : llvm::enumerate(dims)) {
    if (in.getDimSize(k) == 1)
      continue;
    if (d >= lead || in.getDimSize(k) != domain[d])
      return false;
    mapped.push_back(d);
  }
  // Every non-unit leading dim is covered exactly once, in order.
  llvm::SmallVector<int64_t> want;
  for (int64_t d = 0; d < lead; ++d)
    if (domain[d] != 1)
      want.push_back(d);
  return mapped == want;
}
} // namespace

std::optional<RowChain> analyzeRowChain(Block &body, std::string &why) {
  RowChain rc;
  llvm::DenseMap<Value, std::pair<Level, int>> info; // level, stage (-1)
  auto get = [&](Value v) -> std::pair<Level, int> {
    auto it = info.find(v);
    return it == info.end() ? std::make_pair(Level::Free, -1) : it->second;
  };
  auto fail = [&](Operation &op, const std::string &what) {
    why = "'" + op.getName().getStringRef().str() + "' " + what;
    return std::nullopt;
  };
  for (Operation &op : body.without_terminator()) {
    for (Type t : op.getResultTypes())
      if (auto r = dyn_cast<RankedTensorType>(t); !r || !r.hasStaticShape())
        return fail(op, "has a result of dynamic shape (" + shapeText(t) +
                            "); a row chain needs static shapes");
    for (Value v : op.getOperands())
      if (get(v).first == Level::Column)
        return fail(op, "reads a column reduction's result (those are only "
                        "yielded)");
    FusionRole role = fusionRole(&op);
    if (role == FusionRole::Reduce) {
      Value in = op.getOperand(0);
      auto [level, stage] = get(in);
      if (level == Level::Row)
        return fail(op, "reduces a per-row value");
      auto type = cast<RankedTensorType>(in.getType());
      std::optional<int64_t> trailing = trailingLead(&op);
      if (reducesLeadingDims(&op)) {
        // A column reduction: checked against D once D is known.
        rc.columns.push_back(&op);
        info[op.getResult(0)] = {Level::Column, -1};
        continue;
      }
      if (!trailing)
        return fail(op, "must reduce the trailing dims of its operand (a "
                        "row reduction) or its leading dims (a column "
                        "reduction)");
      int64_t rank = type.getRank(), lead = *trailing;
      size_t reduced = static_cast<size_t>(rank - lead);
      if (rc.stages.empty()) {
        rc.domain.assign(type.getShape().begin(), type.getShape().end());
        rc.lead = lead;
        rc.rows = rc.cols = 1;
        for (int64_t d = 0; d < rank; ++d)
          (d < lead ? rc.rows : rc.cols) *= rc.domain[d];
      } else if (type.getShape() != llvm::ArrayRef(rc.domain) ||
                 lead != rc.lead) {
        return fail(op, "reads " + shapeText(type) + " over " +
                            std::to_string(reduced) +
                            " trailing dims; the chain's first reduction "
                            "reads the same shape over the same dims");
      }
      unsigned s = static_cast<unsigned>(stage + 1);
      if (rc.stages.size() <= s)
        rc.stages.resize(s + 1);
      rc.stages[s].push_back(&op);
      info[op.getResult(0)] = {Level::Row, static_cast<int>(s)};
      rc.rowLevel.insert(op.getResult(0));
      continue;
    }
    if (role != FusionRole::Elementwise && role != FusionRole::View)
      return fail(op, "cannot be in a row_chain fusion (elementwise ops, "
                      "broadcast_in_dim, reshape, iota and reduce_* only)");
    Level level = Level::Free;
    int stage = -1;
    for (Value v : op.getOperands()) {
      auto [l, s] = get(v);
      if ((l == Level::Row && level == Level::Domain) ||
          (l == Level::Domain && level == Level::Row))
        return fail(op, "mixes a per-row and a per-element operand "
                        "without a broadcast");
      level = std::max(level, l);
      stage = std::max(stage, s);
    }
    if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      if (level == Level::Domain)
        return fail(op, "broadcasts a per-element value of the chain");
      if (level == Level::Row) {
        if (!isRowBroadcast(b, rc.domain, rc.lead))
          return fail(op, "must broadcast a per-row value over its row (to "
                          "the reductions' operand shape, row dims in "
                          "order), found " +
                              shapeText(b.getOperand().getType()) + " -> " +
                              shapeText(b.getType()));
        level = Level::Domain;
      }
    }
    if (level == Level::Free)
      continue;
    for (Value r : op.getResults()) {
      int64_t n = cast<RankedTensorType>(r.getType()).getNumElements();
      if (level == Level::Row && n != rc.rows)
        return fail(op, "computes " + std::to_string(n) +
                            " elements from per-row values, expected one "
                            "per row (" +
                            std::to_string(rc.rows) + ")");
      info[r] = {level, stage};
      if (level == Level::Row) {
        rc.rowOps.push_back({r, static_cast<unsigned>(stage)});
        rc.rowLevel.insert(r);
      }
    }
  }
  if (rc.stages.empty()) {
    why = "holds no reduce_sum, reduce_mean or reduce_max over the trailing "
          "dims";
    return std::nullopt;
  }
  int64_t domainNumel = rc.rows * rc.cols;
  if (!rc.columns.empty() && rc.cols > kRowChainColumnMaxCols) {
    why = "'" + rc.columns.front()->getName().getStringRef().str() +
          "' is a column reduction of rows of " + std::to_string(rc.cols) +
          " elements; at most " + std::to_string(kRowChainColumnMaxCols) +
          " (a warp a row)";
    return std::nullopt;
  }
  int64_t columnBytes = 0;
  for (Operation *c : rc.columns) {
    Type e = cast<RankedTensorType>(c->getResult(0).getType()).getElementType();
    columnBytes +=
        kRowChainWarps * rc.cols * (e.getIntOrFloatBitWidth() > 32 ? 8 : 4);
  }
  if (columnBytes > kRowChainColumnSharedBytes) {
    why = "has " + std::to_string(rc.columns.size()) +
          " column reductions of " + std::to_string(rc.cols) +
          " columns; their sums would take " + std::to_string(columnBytes) +
          " bytes of shared memory, at most " +
          std::to_string(kRowChainColumnSharedBytes);
    return std::nullopt;
  }
  for (Operation *c : rc.columns) {
    auto type = cast<RankedTensorType>(c->getOperand(0).getType());
    int64_t reduced = 1;
    for (int64_t d : reducedDims(c))
      reduced *= type.getDimSize(d);
    if (type.getNumElements() != domainNumel || reduced != rc.rows) {
      why = "'" + c->getName().getStringRef().str() + "' reduces " +
            shapeText(type) + " over " + std::to_string(reducedDims(c).size()) +
            " leading dims; a column reduction reads one element per "
            "element of the reductions' operand (" +
            std::to_string(domainNumel) +
            ") over dims holding one row "
            "each (" +
            std::to_string(rc.rows) + ")";
      return std::nullopt;
    }
  }
  for (auto [i, y] : llvm::enumerate(body.getTerminator()->getOperands())) {
    auto type = dyn_cast<RankedTensorType>(y.getType());
    if (!type || !type.hasStaticShape()) {
      why = "result " + std::to_string(i) + " has a dynamic shape";
      return std::nullopt;
    }
    int64_t n = type.getNumElements();
    Level level = get(y).first;
    bool ok = level == Level::Row || level == Level::Domain ||
              level == Level::Column ||
              (level == Level::Free && (n == rc.rows || n == domainNumel));
    if (level == Level::Domain && n != domainNumel)
      ok = false;
    if (!ok) {
      why = "result " + std::to_string(i) + " (" + shapeText(type) +
            ") has neither one element per row (" + std::to_string(rc.rows) +
            ") nor one per element of the reductions' operand (" +
            std::to_string(domainNumel) + ")";
      return std::nullopt;
    }
    if (level == Level::Free && n == rc.rows && n != domainNumel)
      rc.rowLevel.insert(y);
  }
  return rc;
}

LogicalResult FusionOp::verify() {
  StringRef kind = getKind();
  if (kind != kLoopFusion && kind != kReductionFusion &&
      kind != kMultiTensorFusion && kind != kMatmulFusion &&
      kind != kAttentionFusion && kind != kRowChainFusion)
    return emitOpError("C1: kind must be \"loop\", \"reduction\", "
                       "\"multi_tensor\", \"matmul\", \"attention\" or "
                       "\"row_chain\", found \"")
           << kind << "\"";
  Block &block = getBlock();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("C2: the body takes ")
           << block.getNumArguments() << " arguments for "
           << getInputs().size() << " inputs";
  for (auto [i, arg, in] :
       llvm::enumerate(block.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("C2: body argument ")
             << i << " has type " << arg.getType() << ", input " << i
             << " has type " << in.getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("C3: the body must end in step.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("C3: step.yield gives ")
           << yield.getValues().size()
           << " values whose types differ from the "
           << getNumResults() << " result types";
  for (Operation &op : block.without_terminator()) {
    if (!isa<StepDialect>(op.getDialect()) || isa<FusionOp, ConstantOp>(op))
      return emitOpError("C4: '")
             << op.getName() << "' cannot be inside a fusion";
    if (kind == kLoopFusion) {
      FusionRole role = fusionRole(&op);
      if (role != FusionRole::Elementwise && role != FusionRole::View &&
          !isa<PadOp>(op))
        return emitOpError("C5: a loop fusion holds elementwise ops, "
                           "broadcast_in_dim, reshape, iota and pad, found '")
               << op.getName() << "'";
    }
  }
  if (kind == kAttentionFusion)
    return verifyAttentionBody();
  if (kind == kRowChainFusion) {
    std::string why;
    if (!analyzeRowChain(block, why))
      return emitOpError("C7: ") << why;
  }
  if (kind == kLoopFusion && getNumResults() > 0) {
    int64_t n = numElements(getResult(0).getType());
    for (auto [i, r] : llvm::enumerate(getResults()))
      if (numElements(r.getType()) != n)
        return emitOpError("C5: result ")
               << i << " has " << numElements(r.getType())
               << " elements, result 0 has " << n;
  }
  return success();
}

} // namespace mlir::step
