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
// joining two different layouts in one op is an error. (2) Each symbol S gets a new argument `len.S`
// (tensor<i64>, {step.kind = "input", step.len_of = "S"}) holding the valid
// length, and every `?` becomes the product of its factors' sizes (a
// symbol's size is its bucket). (3) Every op that mixes positions along a
// padded dim reads its operand through `select(mask, x, neutral)`, the mask
// being `iota < len.S` over the factors of the mixed dims:
//   reduce_sum 0, reduce_max -inf, reduce_mean -> masked sum / valid count,
//   softmax / log_softmax -inf, matmul over a padded K: both operands 0,
//   cross_entropy over padded rows: targets -> ignore_index (a mean counts
//   valid rows only). Causal attention whose keys are padded like its
//   queries needs no mask: a valid query never sees a later (padded) key.
// Ops that would move valid data across padding (slice, pad and concat
// along a padded dim), layer_norm over a padded dim, non-causal attention
// over padded keys and dropout of a padded value (its mask is a function
// of the element index, which padding changes) are refused with an error.
//
// Cost: one scalar argument per symbol; per masked op an iota, a compare
// and a select over the mixed dims (shared masks are CSE'd; step-fuse
// folds them into the consuming kernel). What the padding itself costs in
// FLOPs is the bucket's size over the valid length. Skipping padded tiles
// inside kernels is left to codegen.
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
        int64_t ra = m.getLhs().getType().getRank();
        int64_t rb = m.getRhs().getType().getRank();
        int64_t ka = m.getTransposeA() ? ra - 2 : ra - 1;
        int64_t kb = m.getTransposeB() ? rb - 1 : rb - 2;
        // K has one layout in both operands (SymbolLayouts checks it).
        m->setOperand(0, masked(b, loc, m.getLhs(), {ka}, 0.0));
        m->setOperand(1, masked(b, loc, m.getRhs(), {kb}, 0.0));
      } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
        if (ce.getReduction() != LossReduction::None)
          ce->setOperand(1, masked(b, loc, ce.getTargets(), {0},
                                   double(ce.getIgnoreIndexOrDefault())));
      }
    }
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
    // count = (static factors of the reduced dims) * len(S) per symbol.
    int64_t fixed = 1;
    SmallVector<std::string> syms;
    for (int64_t d : r.getDims())
      for (const Factor &fa : l[d]) {
        if (fa.symbol.empty())
          fixed *= fa.size;
        else
          syms.push_back(fa.symbol);
      }
    Value count = vjp::scalar(b, loc, b.getI64Type(), double(fixed));
    for (const std::string &s : syms)
      count = b.create<MulOp>(loc, count, lengths.at(s));
    auto resultType = cast<RankedTensorType>(r.getResult().getType());
    Value n = b.create<CastOp>(
        loc, RankedTensorType::get({}, type.getElementType()), count);
    if (resultType.getRank() > 0)
      n = b.create<BroadcastInDimOp>(loc, resultType, n,
                                     b.getDenseI64ArrayAttr({}));
    Value mean = b.create<DivOp>(loc, sum, n);
    r.getResult().replaceAllUsesWith(mean);
    if (sym.layouts.count(r.getResult())) {
      sym.layouts[mean] = sym.layouts[r.getResult()];
      sym.layouts[sum] = sym.layouts[r.getResult()];
    }
    r.erase();
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

