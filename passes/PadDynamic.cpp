//===- PadDynamic.cpp - Dynamic dims padded to a bucket, exactly ----------===//
//
// step-pad-dynamic{sizes=T=128,...} makes a model with symbolic dims static.
// Symbols come from the tracer's `dyn("T", max)`: the function carries
// `step.symbols = {T = 1024}` (each symbol's maximum) and every value whose
// type has a `?` dim names it, on arguments and iota ops, with
// `step.dims = ["", "T"]` (one entry per dim, "" for a static one).
//
// Guarantee: for any valid lengths 1 <= len(S) <= size(S), the padded
// function's results restricted to the valid positions equal the results
// of the same model traced at the exact lengths, and so do their gradients
// (the masks below are selects, whose VJP sends no cotangent to padding).
// Padded input positions must hold zeros (the runtime pads them so); a
// padded position then carries the value a real position with zero input
// would carry, so it stays finite wherever the model is finite on zeros.
//
// Algorithm. (1) A forward walk gives every value a *layout* (per dim, the
// product of its factors, each a static size or a symbol: SymbolLayouts.h);
// joining two different layouts in one op is an error. (2) Each symbol S gets a
// new argument `len.S` (tensor<i64>, {step.kind = "input", step.len_of = "S"})
// holding the valid length, and every `?` becomes the product of its factors'
// sizes (a symbol's size is its bucket). (3) Every op that mixes positions
// along a padded dim reads its operand through `select(mask, x, neutral)`, the
// mask being `iota < len.S` over the factors of the mixed dims:
//   reduce_sum 0, reduce_max -inf, reduce_mean -> masked sum / valid count,
//   softmax / log_softmax -inf, matmul over a padded K: both operands 0,
//   cross_entropy over padded rows: targets -> ignore_index (a mean counts
//   valid rows only). Attention whose query and key dims are both exactly
//   the symbol S takes `valid len.S`: the op masks padded keys, zeroes
//   padded rows, and its kernels skip the padded tiles (the work of a
//   causal attention drops from size(S)^2 to len(S)^2). Causal attention
//   whose keys are otherwise padded like its queries needs no mask (a
//   valid query never sees a later key); other attention over padded keys
//   is written out (q k^T, scale, causal mask, softmax, @ v) and masked as
//   those ops; layer_norm over a padded dim is written out with masked
//   mean and variance (its weight and bias must have the normalized dims'
//   layout).
// Ops that would move valid data across padding (slice, pad and concat
// along a padded dim) and dropout of a padded value (its mask is a
// function of the element index, which padding changes) are refused with
// an error.
//
// Cost: one scalar argument per symbol; per masked op an iota, a compare
// and a select over the mixed dims (shared masks are CSE'd; step-fuse
// folds them into the consuming kernel); a written-out attention keeps its
// [.., Tq, Tk] scores in memory. What the padding itself costs in FLOPs is
// the bucket's size over the valid length, except in attention with
// `valid`, whose kernels skip it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/SymbolLayouts.h"

#include "dialects/step/VJPUtil.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <map>
#include <set>

namespace mlir::step {
#define GEN_PASS_DEF_PADDYNAMIC
#include "passes/Passes.h.inc"

namespace {
using namespace pad;

struct PadDynamicPass : impl::PadDynamicBase<PadDynamicPass> {
  using PadDynamicBase::PadDynamicBase;

  /// Layouts of @func's values, and each symbol's bucket size (from
  /// `sizes`, else the symbol's maximum).
  pad::SymbolLayouts sym;
  /// len.S per symbol.
  std::map<std::string, Value> lengths;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(funcName);
    if (!f) {
      module.emitError() << "step-pad-dynamic: no function @" << funcName;
      return signalPassFailure();
    }
    auto symbols = f->getAttrOfType<DictionaryAttr>("step.symbols");
    if (!symbols) {
      // Nothing symbolic: a model with a `?` must name it.
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (!cast<RankedTensorType>(f.getArgument(i).getType())
                 .hasStaticShape()) {
          f.emitError() << "step-pad-dynamic: argument '" << argName(f, i)
                        << "' has a dynamic dim but @" << funcName
                        << " declares no symbols (trace it with dyn(\"T\", "
                           "max))";
          return signalPassFailure();
        }
      return;
    }
    if (failed(chooseBuckets(f, symbols)) || failed(sym.analyze(f)))
      return signalPassFailure();
    addLengthArguments(f);
    retype(f);
    mask(f);
    finish(f);
  }

  //===--------------------------------------------------------------------===//
  // Buckets
  //===--------------------------------------------------------------------===//

  LogicalResult chooseBuckets(func::FuncOp f, DictionaryAttr symbols) {
    for (NamedAttribute s : symbols) {
      auto max = dyn_cast<IntegerAttr>(s.getValue());
      if (!max || max.getInt() < 1)
        return f.emitError() << "step-pad-dynamic: step.symbols entry '"
                             << s.getName().getValue()
                             << "' must be a positive integer maximum";
      sym.bucket[s.getName().str()] = max.getInt();
    }
    for (const std::string &entry : sizes) {
      size_t eq = entry.find('=');
      std::string name = entry.substr(0, eq);
      int64_t size = -1;
      if (eq != std::string::npos) {
        StringRef text = StringRef(entry).substr(eq + 1);
        if (text.getAsInteger(10, size))
          size = -1;
      }
      if (size < 1)
        return f.emitError() << "step-pad-dynamic: sizes entry '" << entry
                             << "' must be SYMBOL=SIZE with SIZE >= 1";
      auto it = sym.bucket.find(name);
      if (it == sym.bucket.end())
        return f.emitError() << "step-pad-dynamic: sizes names '" << name
                             << "', which is not a symbol of @" << funcName;
      if (size > symbols.getAs<IntegerAttr>(name).getInt())
        return f.emitError()
               << "step-pad-dynamic: bucket " << name << "=" << size
               << " exceeds the symbol's maximum "
               << symbols.getAs<IntegerAttr>(name).getInt();
      it->second = size;
    }
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Rewriting
  //===--------------------------------------------------------------------===//

  void addLengthArguments(func::FuncOp f) {
    std::set<std::string> used;
    for (auto &[v, l] : sym.layouts)
      for (const DimLayout &d : l)
        for (const Factor &fa : d)
          if (!fa.symbol.empty())
            used.insert(fa.symbol);
    OpBuilder b(f.getContext());
    for (const std::string &s : used) {
      unsigned index = f.getNumArguments();
      NamedAttribute attrs[] = {
          b.getNamedAttr("step.kind", b.getStringAttr("input")),
          b.getNamedAttr("step.name", b.getStringAttr("len." + s)),
          b.getNamedAttr("step.len_of", b.getStringAttr(s))};
      f.insertArgument(index, RankedTensorType::get({}, b.getI64Type()),
                       b.getDictionaryAttr(attrs), f.getLoc());
      lengths[s] = f.getArgument(index);
    }
  }

  static RankedTensorType staticType(Value v, const Layout &l) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape;
    for (const DimLayout &d : l)
      shape.push_back(sizeOf(d));
    return type.clone(shape);
  }

  void retype(func::FuncOp f) {
    for (auto &[v, l] : sym.layouts)
      v.setType(staticType(v, l));
    f.walk([](IotaOp op) { op->removeAttr("step.dims"); });
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    f.setFunctionType(FunctionType::get(f.getContext(),
                                        f.getBody().front().getArgumentTypes(),
                                        ret.getOperandTypes()));
  }

  /// `x` where the symbolic factors of `dims` are valid, `neutral` elsewhere.
  /// `x` itself when none of `dims` is padded.
  Value masked(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> dims,
               double neutral) {
    Layout l = sym.layoutOf(x);
    SmallVector<int64_t> sorted;
    for (int64_t d : dims)
      if (isPadded(l[d]))
        sorted.push_back(d);
    llvm::sort(sorted);
    SmallVector<int64_t> expanded, reduced;
    SmallVector<std::pair<int64_t, std::string>> symbolic;
    for (int64_t d : sorted) {
      reduced.push_back(sizeOf(l[d]));
      for (const Factor &fa : l[d]) {
        if (!fa.symbol.empty())
          symbolic.push_back({static_cast<int64_t>(expanded.size()), fa.symbol});
        expanded.push_back(fa.size);
      }
    }
    if (symbolic.empty())
      return x;
    auto i64 = b.getI64Type();
    Value mask;
    for (auto &[pos, symbol] : symbolic) {
      auto idxType = RankedTensorType::get(expanded, i64);
      Value idx = b.create<IotaOp>(loc, idxType, b.getI64IntegerAttr(pos));
      Value len = b.create<BroadcastInDimOp>(loc, idxType, lengths.at(symbol),
                                             b.getDenseI64ArrayAttr({}));
      Value valid =
          b.create<CompareOp>(loc, ComparisonDirection::LT, idx, len);
      mask = mask ? b.create<SelectOp>(loc, mask, valid, mask).getResult()
                  : valid;
    }
    auto type = cast<RankedTensorType>(x.getType());
    if (ArrayRef<int64_t>(expanded) != ArrayRef<int64_t>(reduced))
      mask = b.create<ReshapeOp>(
          loc, RankedTensorType::get(reduced, b.getI1Type()), mask);
    mask = b.create<BroadcastInDimOp>(loc, type.clone(b.getI1Type()), mask,
                                      b.getDenseI64ArrayAttr(sorted));
    return b.create<SelectOp>(loc, mask, x, vjp::splat(b, loc, type, neutral));
  }

  /// The identity of max: -inf, or the integer type's minimum.
  static double lowest(Value v) {
    Type element = cast<RankedTensorType>(v.getType()).getElementType();
    if (isa<FloatType>(element))
      return -INFINITY;
    return -std::ldexp(1.0, element.getIntOrFloatBitWidth() - 1);
  }

  /// Whether dim `d` of `v` has a symbolic factor.
  bool paddedDim(Value v, int64_t d) {
    auto it = sym.layouts.find(v);
    return it != sym.layouts.end() && isPadded(it->second[d]);
  }

  /// Reads the operand of every op that mixes positions along a padded
  /// dim through masked(); reduce_mean becomes a masked sum over a count.
  void mask(func::FuncOp f) {
    SmallVector<Operation *> ops;
    f.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto r = dyn_cast<ReduceSumOp>(op)) {
        r->setOperand(0, masked(b, loc, r.getOperand(), r.getDims(), 0.0));
      } else if (auto r = dyn_cast<ReduceMaxOp>(op)) {
        r->setOperand(0, masked(b, loc, r.getOperand(), r.getDims(),
                                lowest(r.getOperand())));
      } else if (auto r = dyn_cast<ReduceMeanOp>(op)) {
        if (llvm::any_of(r.getDims(),
                         [&](int64_t d) { return paddedDim(r.getOperand(), d); }))
          replaceMean(b, r);
      } else if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
        Value x = op->getOperand(0);
        int64_t d = op->getAttrOfType<IntegerAttr>("dimension").getInt();
        op->setOperand(0, masked(b, loc, x, {d}, lowest(x)));
      } else if (auto m = dyn_cast<MatmulOp>(op)) {
        maskMatmul(m);
      } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
        if (ce.getReduction() != LossReduction::None)
          ce->setOperand(1, masked(b, loc, ce.getTargets(), {0},
                                   double(ce.getIgnoreIndexOrDefault())));
      } else if (auto at = dyn_cast<AttentionOp>(op)) {
        int64_t keys = at.getKey().getType().getRank() - 2;
        DimLayout ql = sym.layoutOf(at.getQuery())[keys];
        DimLayout kl = sym.layoutOf(at.getKey())[keys];
        if (ql.size() == 1 && !ql[0].symbol.empty() && kl == ql &&
            !at.getValid())
          at.getValidMutable().assign(lengths.at(ql[0].symbol));
        else if (paddedDim(at.getKey(), keys) && !(at.getCausal() && ql == kl))
          decomposeAttention(b, at);
      } else if (auto ln = dyn_cast<LayerNormOp>(op)) {
        int64_t rank = ln.getOperand().getType().getRank();
        int64_t lead = rank - ln.getWeight().getType().getRank();
        for (int64_t d = lead; d < rank; ++d)
          if (paddedDim(ln.getOperand(), d)) {
            decomposeLayerNorm(b, ln);
            break;
          }
      }
    }
  }

  /// A matmul contracting a padded K reads 0 in both operands' padding
  /// (the masks go right before `m`).
  void maskMatmul(MatmulOp m) {
    OpBuilder b(m);
    int64_t ra = m.getLhs().getType().getRank();
    int64_t rb = m.getRhs().getType().getRank();
    int64_t ka = m.getTransposeA() ? ra - 2 : ra - 1;
    int64_t kb = m.getTransposeB() ? rb - 1 : rb - 2;
    // K has one layout in both operands (SymbolLayouts checks it).
    m->setOperand(0, masked(b, m.getLoc(), m.getLhs(), {ka}, 0.0));
    m->setOperand(1, masked(b, m.getLoc(), m.getRhs(), {kb}, 0.0));
  }

  /// `v` with layout `l` (for values the rewrite creates).
  Value laidOut(Value v, const Layout &l) {
    sym.layouts[v] = l;
    return v;
  }

  /// Attention whose padded keys no causal mask hides, written out so the
  /// masks above apply: S = q k^T * scale (+ the causal mask), softmax over
  /// the keys with padded keys at -inf, then P V with padded rows of V at 0.
  /// Costs the [.., Tq, Tk] scores in memory, which the fused op avoids.
  void decomposeAttention(OpBuilder &b, AttentionOp at) {
    Location loc = at.getLoc();
    Value q = at.getQuery(), k = at.getKey();
    auto qType = at.getQuery().getType();
    int64_t rank = qType.getRank();
    double scale =
        at.getScale() ? at.getScale()->convertToDouble()
                      : 1.0 / std::sqrt(double(qType.getDimSize(rank - 1)));
    Layout sl = sym.layoutOf(q);
    sl.back() = sym.layoutOf(k)[rank - 2];
    auto qk = b.create<MatmulOp>(loc, q, k, /*transpose_a=*/false,
                                 /*transpose_b=*/true);
    sym.layouts[qk] = sl;
    maskMatmul(qk);
    Value s = laidOut(vjp::scale(b, loc, qk, scale), sl);
    if (at.getCausal())
      s = laidOut(vjp::hideFutureKeys(b, loc, s), sl);
    s = masked(b, loc, s, {rank - 1}, -INFINITY);
    Value p = laidOut(b.create<SoftmaxOp>(loc, s, b.getI64IntegerAttr(rank - 1)),
                      sl);
    auto out = b.create<MatmulOp>(loc, p, at.getValue(), /*transpose_a=*/false,
                                  /*transpose_b=*/false);
    maskMatmul(out);
    replaceWith(at, out);
  }

  /// layer_norm over padded dims, written out with masked statistics: the
  /// mean and the (biased) variance sum the valid positions only and divide
  /// by their count; then (x - mean) * rstd * weight + bias as the op.
  void decomposeLayerNorm(OpBuilder &b, LayerNormOp ln) {
    Location loc = ln.getLoc();
    Value x = ln.getOperand();
    auto type = cast<RankedTensorType>(x.getType());
    int64_t rank = type.getRank();
    SmallVector<int64_t> norm, lead;
    for (int64_t d = 0; d < rank; ++d)
      (d < rank - ln.getWeight().getType().getRank() ? lead : norm).push_back(d);
    Layout xl = sym.layoutOf(x), rl;
    for (int64_t d : lead)
      rl.push_back(xl[d]);
    Value count = validCount(b, loc, xl, norm, type.getElementType());
    auto stat = [&](Value v) { // masked mean over `norm`, broadcast back
      Value sum = laidOut(
          b.create<ReduceSumOp>(loc, masked(b, loc, v, norm, 0.0),
                                b.getDenseI64ArrayAttr(norm), false),
          rl);
      auto sumType = cast<RankedTensorType>(sum.getType());
      Value n = sumType.getRank() == 0
                    ? count
                    : b.create<BroadcastInDimOp>(loc, sumType, count,
                                                 b.getDenseI64ArrayAttr({}));
      return laidOut(b.create<DivOp>(loc, sum, n), rl);
    };
    auto back = [&](Value v, ArrayRef<int64_t> dims) {
      return laidOut(b.create<BroadcastInDimOp>(loc, type, v,
                                                b.getDenseI64ArrayAttr(dims)),
                     xl);
    };
    Value centered = laidOut(b.create<SubOp>(loc, x, back(stat(x), lead)), xl);
    Value var =
        stat(laidOut(b.create<MulOp>(loc, centered, centered), xl));
    Value eps = vjp::splatLike(b, loc, var, ln.getEpsilon().convertToDouble());
    Value rstd = laidOut(
        b.create<RsqrtOp>(loc, laidOut(b.create<AddOp>(loc, var, eps), rl)),
        rl);
    Value y = laidOut(b.create<MulOp>(loc, centered, back(rstd, lead)), xl);
    y = laidOut(b.create<MulOp>(loc, y, back(ln.getWeight(), norm)), xl);
    y = laidOut(b.create<AddOp>(loc, y, back(ln.getBias(), norm)), xl);
    replaceWith(ln, y);
  }

  /// Replaces `op`'s one result by `v`, which takes its layout.
  void replaceWith(Operation *op, Value v) {
    Value old = op->getResult(0);
    if (sym.layouts.count(old))
      sym.layouts[v] = sym.layouts[old];
    old.replaceAllUsesWith(v);
    sym.layouts.erase(old);
    op->erase();
  }

  /// The number of valid positions in `dims` of a value of layout `l`:
  /// static factors times len(S) per symbol, as a rank-0 `element`.
  Value validCount(OpBuilder &b, Location loc, const Layout &l,
                   ArrayRef<int64_t> dims, Type element) {
    int64_t fixed = 1;
    SmallVector<std::string> syms;
    for (int64_t d : dims)
      for (const Factor &fa : l[d]) {
        if (fa.symbol.empty())
          fixed *= fa.size;
        else
          syms.push_back(fa.symbol);
      }
    Value count = vjp::scalar(b, loc, b.getI64Type(), double(fixed));
    for (const std::string &s : syms)
      count = b.create<MulOp>(loc, count, lengths.at(s));
    return b.create<CastOp>(loc, RankedTensorType::get({}, element), count);
  }

  /// reduce_mean over padded dims -> reduce_sum(masked) / valid count.
  void replaceMean(OpBuilder &b, ReduceMeanOp r) {
    Location loc = r.getLoc();
    Value x = r.getOperand();
    auto type = cast<RankedTensorType>(x.getType());
    Layout l = sym.layoutOf(x);
    Value sum = b.create<ReduceSumOp>(
        loc, masked(b, loc, x, r.getDims(), 0.0),
        r.getDimsAttr(), r.getKeepdim());
    auto resultType = cast<RankedTensorType>(r.getResult().getType());
    Value n = validCount(b, loc, l, r.getDims(), type.getElementType());
    if (resultType.getRank() > 0)
      n = b.create<BroadcastInDimOp>(loc, resultType, n,
                                     b.getDenseI64ArrayAttr({}));
    Value mean = b.create<DivOp>(loc, sum, n);
    if (sym.layouts.count(r.getResult()))
      sym.layouts[sum] = sym.layouts[r.getResult()];
    replaceWith(r, mean);
  }

  void finish(func::FuncOp f) {
    OpBuilder b(f.getContext());
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto it = sym.layouts.find(v);
      if (it == sym.layouts.end())
        continue;
      // One entry per dim: the symbol of a dim that is exactly one symbol,
      // "*" for a dim that merges a symbol with other factors, "" static.
      SmallVector<Attribute> dims;
      for (const DimLayout &d : it->second)
        dims.push_back(b.getStringAttr(
            !isPadded(d) ? "" : d.size() == 1 ? d[0].symbol : "*"));
      f.setResultAttr(i, "step.dims", b.getArrayAttr(dims));
    }
    SmallVector<NamedAttribute> chosen;
    for (auto &[s, size] : sym.bucket)
      chosen.push_back(b.getNamedAttr(s, b.getI64IntegerAttr(size)));
    f->removeAttr("step.symbols");
    f->setAttr("step.buckets", b.getDictionaryAttr(chosen));
  }
};

} // namespace
} // namespace mlir::step

