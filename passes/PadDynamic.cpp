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
// Algorithm. (1) A forward walk gives every value a *layout*: per dim, the
// product of factors it is made of, each a static size or a symbol (a
// reshape of [B, T, C] to [B*T, C] gives dim 0 the factors [B][T]). Every
// `?` dim must be explained by symbols; joining two different layouts in
// one op is an error. (2) Each symbol S gets a new argument `len.S`
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
#include "passes/StepAttrs.h"

#include "dialects/step/TypeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <map>
#include <set>

namespace mlir::step {
#define GEN_PASS_DEF_PADDYNAMIC
#include "passes/Passes.h.inc"

namespace {

/// A factor of a dim: a static size, or a symbol (padded to its bucket).
struct Factor {
  int64_t size = 1; ///< static size; for a symbol, its bucket size
  std::string symbol;
  bool operator==(const Factor &o) const {
    return size == o.size && symbol == o.symbol;
  }
};
/// A dim as a product of factors, outermost first (no factor of size 1).
using DimLayout = SmallVector<Factor, 2>;
using Layout = SmallVector<DimLayout, 4>;

bool isPadded(const DimLayout &d) {
  return llvm::any_of(d, [](const Factor &f) { return !f.symbol.empty(); });
}
bool isPadded(const Layout &l) {
  return llvm::any_of(l, [](const DimLayout &d) { return isPadded(d); });
}
int64_t sizeOf(const DimLayout &d) {
  int64_t n = 1;
  for (const Factor &f : d)
    n *= f.size;
  return n;
}
std::string describe(const DimLayout &d) {
  if (d.empty())
    return "1";
  std::string s;
  for (const Factor &f : d)
    s += (s.empty() ? "" : "*") +
         (f.symbol.empty() ? std::to_string(f.size) : f.symbol);
  return s;
}
std::string describe(const Layout &l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i)
    s += (i ? ", " : "") + describe(l[i]);
  return s + "]";
}

DimLayout staticDim(int64_t size) {
  DimLayout d;
  if (size != 1)
    d.push_back({size, ""});
  return d;
}

struct PadDynamicPass : impl::PadDynamicBase<PadDynamicPass> {
  using PadDynamicBase::PadDynamicBase;

  /// Bucket size per symbol (from `sizes`, else the symbol's maximum).
  std::map<std::string, int64_t> bucket;
  /// The layout of every value with a padded factor; absent: static.
  DenseMap<Value, Layout> layouts;
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
    if (failed(chooseBuckets(f, symbols)) || failed(analyze(f)))
      return signalPassFailure();
    addLengthArguments(f);
    retype(f);
    if (failed(mask(f)))
      return signalPassFailure();
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
      bucket[s.getName().str()] = max.getInt();
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
      auto it = bucket.find(name);
      if (it == bucket.end())
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
  // Layout analysis
  //===--------------------------------------------------------------------===//

  /// The layout `step.dims` gives a value of `type`.
  FailureOr<Layout> namedLayout(Operation *where, const Twine &what,
                                RankedTensorType type, ArrayAttr dims) {
    Layout l;
    if (dims && static_cast<int64_t>(dims.size()) != type.getRank())
      return where->emitError()
             << "step-pad-dynamic: " << what << " has step.dims of "
             << dims.size() << " entries for rank " << type.getRank();
    for (int64_t d = 0; d < type.getRank(); ++d) {
      StringRef sym;
      if (dims)
        if (auto s = dyn_cast<StringAttr>(dims[d]))
          sym = s.getValue();
      if (sym.empty()) {
        if (type.isDynamicDim(d))
          return where->emitError()
                 << "step-pad-dynamic: dim " << d << " of " << what << " "
                 << quoted(type) << " is dynamic but names no symbol";
        l.push_back(staticDim(type.getDimSize(d)));
        continue;
      }
      auto it = bucket.find(sym.str());
      if (it == bucket.end())
        return where->emitError() << "step-pad-dynamic: dim " << d << " of "
                                  << what << " names '" << sym
                                  << "', which is not in step.symbols";
      if (!type.isDynamicDim(d))
        return where->emitError()
               << "step-pad-dynamic: dim " << d << " of " << what
               << " names symbol '" << sym << "' but is static";
      l.push_back({{it->second, sym.str()}});
    }
    return l;
  }

  /// The layout of `v`; a `?` without a layout was already reported.
  Layout layoutOf(Value v) {
    if (auto it = layouts.find(v); it != layouts.end())
      return it->second;
    Layout l;
    for (int64_t s : cast<RankedTensorType>(v.getType()).getShape())
      l.push_back(staticDim(s));
    return l;
  }

  /// Stores `l` with adjacent static factors merged, so that layouts of
  /// equal dims compare equal however reshapes split them ([2][4] is [8]).
  void setLayout(Value v, Layout l) {
    if (!isPadded(l))
      return;
    for (DimLayout &d : l) {
      DimLayout merged;
      for (const Factor &f : d) {
        if (f.symbol.empty() && !merged.empty() &&
            merged.back().symbol.empty())
          merged.back().size *= f.size;
        else
          merged.push_back(f);
      }
      d = merged;
    }
    layouts[v] = std::move(l);
  }

  LogicalResult refuse(Operation *op, const Twine &why) {
    return op->emitError() << "step-pad-dynamic: " << why;
  }

  /// Operands of the same shape whose layouts must agree.
  FailureOr<Layout> join(Operation *op, ValueRange values) {
    std::optional<Layout> out;
    for (Value v : values) {
      Layout l = layoutOf(v);
      if (!out) {
        out = l;
        continue;
      }
      for (size_t d = 0; d < l.size() && d < out->size(); ++d) {
        if (l[d] == (*out)[d])
          continue;
        return refuse(op, "operands disagree on dim " + std::to_string(d) +
                              ": " + describe((*out)[d]) + " vs " +
                              describe(l[d]));
      }
    }
    return out ? *out : Layout();
  }

  /// Regroups the operand's factors into the result dims of a reshape.
  FailureOr<Layout> reshapeLayout(ReshapeOp op) {
    Layout in = layoutOf(op.getOperand());
    SmallVector<Factor> factors;
    for (const DimLayout &d : in)
      llvm::append_range(factors, d);
    auto type = op.getResult().getType();
    int64_t rank = type.getRank();
    Layout out(rank);
    int64_t dynDim = -1;
    for (int64_t d = 0; d < rank; ++d)
      if (type.isDynamicDim(d))
        dynDim = d;
    auto fail = [&] {
      return refuse(op, "cannot regroup " + describe(in) + " into " +
                            quoted(type) + " without splitting a symbol");
    };
    // Takes factors from one end of `factors` until their product is
    // `size`, splitting a static factor where needed.
    auto take = [&](int64_t size, bool front, DimLayout &dim) -> bool {
      int64_t have = 1;
      while (have < size) {
        if (factors.empty())
          return false;
        Factor f = front ? factors.front() : factors.back();
        if (front)
          factors.erase(factors.begin());
        else
          factors.pop_back();
        if (have * f.size > size) {
          int64_t need = size / have;
          if (!f.symbol.empty() || size % have || f.size % need)
            return false;
          Factor rest{f.size / need, ""};
          if (front)
            factors.insert(factors.begin(), rest);
          else
            factors.push_back(rest);
          f.size = need;
        }
        if (!f.symbol.empty())
          return false; // a static dim cannot hold a padded factor
        have *= f.size;
        if (front)
          dim.push_back(f);
        else
          dim.insert(dim.begin(), f);
      }
      return have == size;
    };
    int64_t last = dynDim < 0 ? rank : dynDim;
    for (int64_t d = 0; d < last; ++d)
      if (!take(type.getDimSize(d), /*front=*/true, out[d]))
        return fail();
    if (dynDim >= 0) {
      for (int64_t d = rank - 1; d > dynDim; --d)
        if (!take(type.getDimSize(d), /*front=*/false, out[d]))
          return fail();
      out[dynDim].assign(factors.begin(), factors.end());
      factors.clear();
      if (!isPadded(out[dynDim]))
        return fail();
    }
    if (!factors.empty())
      return fail();
    return out;
  }

  /// Refuses a padded dim `d` of `v` for an op that cannot mask it.
  LogicalResult requireUnpadded(Operation *op, Value v, int64_t d,
                                const Twine &why) {
    Layout l = layoutOf(v);
    if (d < static_cast<int64_t>(l.size()) && isPadded(l[d]))
      return refuse(op, "dim " + std::to_string(d) + " (" + describe(l[d]) +
                            ") is padded: " + why);
    return success();
  }

  LogicalResult analyze(func::FuncOp f) {
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto type = cast<RankedTensorType>(f.getArgument(i).getType());
      auto l = namedLayout(f, "argument '" + argName(f, i) + "'", type,
                           f.getArgAttrOfType<ArrayAttr>(i, "step.dims"));
      if (failed(l))
        return failure();
      setLayout(f.getArgument(i), *l);
    }
    WalkResult r = f.walk([&](Operation *op) {
      return succeeded(analyzeOp(op)) ? WalkResult::advance()
                                      : WalkResult::interrupt();
    });
    return failure(r.wasInterrupted());
  }

  LogicalResult analyzeOp(Operation *op) {
    if (isa<func::ReturnOp>(op))
      return success();
    if (auto iota = dyn_cast<IotaOp>(op)) {
      auto l = namedLayout(op, "iota", iota.getResult().getType(),
                           op->getAttrOfType<ArrayAttr>("step.dims"));
      if (failed(l))
        return failure();
      setLayout(iota.getResult(), *l);
      return success();
    }
    bool padded = isa<BroadcastInDimOp>(op) ||
                  llvm::any_of(op->getOperands(),
                               [&](Value v) { return layouts.count(v); });
    if (!padded) {
      for (Value r : op->getResults())
        if (!cast<RankedTensorType>(r.getType()).hasStaticShape())
          return refuse(op, "result " + quoted(r.getType()) +
                                " is dynamic but no operand is padded");
      return success();
    }
    Value result = op->getNumResults() == 1 ? op->getResult(0) : Value();

    // Same-shape ops: the result has the operands' layout.
    if (isSameShape(op)) {
      auto l = join(op, op->getOperands());
      if (failed(l))
        return failure();
      setLayout(result, *l);
      return success();
    }
    if (isa<DropoutOp>(op))
      return refuse(op, "dropout of a padded value would draw a different "
                        "mask than the unpadded step (the mask is a function "
                        "of the element index); apply it before padding "
                        "dims are introduced or use p = 0");
    if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      Layout in = layoutOf(b.getOperand());
      auto type = b.getResult().getType();
      Layout out;
      for (int64_t s : type.getShape())
        out.push_back(staticDim(s));
      SmallVector<bool> mapped(type.getRank(), false);
      for (auto [k, d] : llvm::enumerate(b.getBroadcastDimensions())) {
        mapped[d] = true;
        if (sizeOf(in[k]) != 1 || isPadded(in[k]))
          out[d] = in[k];
      }
      // A dynamic dim no operand dim maps to (a bias or a scalar broadcast
      // into a sequence) is sized by the value the result is combined with.
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (mapped[d] || !type.isDynamicDim(d))
          continue;
        std::optional<DimLayout> found = layoutFromUsers(result, d);
        if (!found)
          return refuse(op, "cannot tell which symbol dynamic dim " +
                                std::to_string(d) + " of " + quoted(type) +
                                " is: no elementwise user combines it with "
                                "a value defined before it");
        out[d] = *found;
      }
      setLayout(result, out);
      return success();
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      Layout in = layoutOf(t.getOperand()), out;
      for (int64_t p : t.getPermutation())
        out.push_back(in[p]);
      setLayout(result, out);
      return success();
    }
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      auto l = reshapeLayout(r);
      if (failed(l))
        return failure();
      setLayout(result, *l);
      return success();
    }
    if (isa<ReduceSumOp, ReduceMaxOp, ReduceMeanOp>(op)) {
      auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
      bool keep = op->hasAttr("keepdim");
      Layout in = layoutOf(op->getOperand(0)), out;
      for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
        if (!llvm::is_contained(dims, d))
          out.push_back(in[d]);
        else if (keep)
          out.push_back({});
      }
      setLayout(result, out);
      return success();
    }
    if (auto m = dyn_cast<MatmulOp>(op)) {
      Layout a = layoutOf(m.getLhs()), b = layoutOf(m.getRhs());
      int64_t ra = a.size(), rb = b.size();
      DimLayout rows = m.getTransposeA() ? a[ra - 1] : a[ra - 2];
      DimLayout ka = m.getTransposeA() ? a[ra - 2] : a[ra - 1];
      DimLayout kb = m.getTransposeB() ? b[rb - 1] : b[rb - 2];
      DimLayout cols = m.getTransposeB() ? b[rb - 2] : b[rb - 1];
      if (!(ka == kb))
        return refuse(op, "the contracted dims disagree: " + describe(ka) +
                              " vs " + describe(kb));
      Layout out(a.begin(), a.end() - 2);
      if (rb == ra)
        for (int64_t d = 0; d < ra - 2; ++d)
          if (!(a[d] == b[d]))
            return refuse(op, "batch dim " + std::to_string(d) +
                                  " disagrees: " + describe(a[d]) + " vs " +
                                  describe(b[d]));
      out.push_back(rows);
      out.push_back(cols);
      setLayout(result, out);
      return success();
    }
    if (auto e = dyn_cast<EmbeddingOp>(op)) {
      if (failed(requireUnpadded(op, e.getWeight(), 0,
                                 "an embedding table cannot be padded")))
        return failure();
      Layout out = layoutOf(e.getIndices());
      out.push_back(staticDim(e.getResult().getType().getShape().back()));
      setLayout(result, out);
      return success();
    }
    if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      if (failed(requireUnpadded(op, ce.getLogits(), 1,
                                 "cross_entropy over padded classes")))
        return failure();
      auto l = join(op, {ce.getTargets()});
      Layout rows = layoutOf(ce.getLogits());
      if (!(rows[0] == (*l)[0]))
        return refuse(op, "logits rows " + describe(rows[0]) +
                              " and targets " + describe((*l)[0]) +
                              " disagree");
      if (ce.getReduction() == LossReduction::None)
        setLayout(result, {rows[0]});
      return success();
    }
    if (auto ln = dyn_cast<LayerNormOp>(op)) {
      int64_t rank = ln.getOperand().getType().getRank();
      int64_t norm = ln.getWeight().getType().getRank();
      for (int64_t d = rank - norm; d < rank; ++d)
        if (failed(requireUnpadded(
                op, ln.getOperand(), d,
                "layer_norm over a padded dim is not supported (its "
                "weight would be padded too)")))
          return failure();
      setLayout(result, layoutOf(ln.getOperand()));
      return success();
    }
    if (auto at = dyn_cast<AttentionOp>(op)) {
      Layout q = layoutOf(at.getQuery()), k = layoutOf(at.getKey());
      int64_t rank = q.size();
      if (isPadded(k[rank - 2]) &&
          !(at.getCausal() && q[rank - 2] == k[rank - 2]))
        return refuse(op, "attention over padded keys (" +
                              describe(k[rank - 2]) +
                              ") needs causal = true and queries padded "
                              "like the keys; a key mask is not supported");
      Layout out = q;
      out.back() = layoutOf(at.getValue()).back();
      setLayout(result, out);
      return success();
    }
    if (isa<SliceOp, PadOp, ConcatOp>(op)) {
      Layout out = layoutOf(op->getOperand(0));
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      for (int64_t d = 0; d < type.getRank(); ++d) {
        bool same = llvm::all_of(op->getOperands(), [&](Value v) {
          return cast<RankedTensorType>(v.getType()).getDimSize(d) ==
                 type.getDimSize(d);
        });
        if (same) {
          auto l = join(op, op->getOperands());
          if (failed(l))
            return failure();
          out[d] = (*l)[d];
          continue;
        }
        for (Value v : op->getOperands())
          if (failed(requireUnpadded(op, v, d,
                                     "slice, pad and concat along a padded "
                                     "dim would move valid data")))
            return failure();
        out[d] = staticDim(type.getDimSize(d));
      }
      setLayout(result, out);
      return success();
    }
    return refuse(op, "'" + op->getName().getStringRef() +
                          "' on a padded value is not supported");
  }

  /// The layout of dim `d` of another operand of an elementwise user of
  /// `v`, when that operand was analyzed already.
  std::optional<DimLayout> layoutFromUsers(Value v, int64_t d) {
    for (Operation *user : v.getUsers()) {
      if (!isSameShape(user))
        continue;
      for (Value other : user->getOperands())
        if (other != v && layouts.count(other))
          return layouts[other][d];
    }
    return std::nullopt;
  }

  static bool isSameShape(Operation *op) {
    return isElementwiseUnary(op) ||
           isa<CompareOp, SelectOp, CastOp, GeluOp, StopGradientOp, SoftmaxOp,
               LogSoftmaxOp, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp>(
               op);
  }

  static bool isElementwiseUnary(Operation *op) {
    return isa<NegOp, AbsOp, ReluOp, ExpOp, LogOp, TanhOp, SigmoidOp, SqrtOp,
               RsqrtOp, ErfOp, SinOp, CosOp>(op);
  }

  //===--------------------------------------------------------------------===//
  // Rewriting
  //===--------------------------------------------------------------------===//

  void addLengthArguments(func::FuncOp f) {
    std::set<std::string> used;
    for (auto &[v, l] : layouts)
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
    for (auto &[v, l] : layouts)
      v.setType(staticType(v, l));
    f.walk([](IotaOp op) { op->removeAttr("step.dims"); });
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    f.setFunctionType(FunctionType::get(f.getContext(),
                                        f.getBody().front().getArgumentTypes(),
                                        ret.getOperandTypes()));
  }

  /// `x` where the symbolic factors of `dims` are valid, `neutral` elsewhere.
  Value masked(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> dims,
               Attribute neutral) {
    Layout l = layoutOf(x);
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
    for (auto &[pos, sym] : symbolic) {
      auto idxType = RankedTensorType::get(expanded, i64);
      Value idx = b.create<IotaOp>(loc, idxType, b.getI64IntegerAttr(pos));
      Value len = b.create<BroadcastInDimOp>(loc, idxType, lengths.at(sym),
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
    auto splat = DenseElementsAttr::get(type, neutral);
    Value fill = b.create<ConstantOp>(loc, type, splat);
    return b.create<SelectOp>(loc, mask, x, fill);
  }

  static Attribute zeroOf(OpBuilder &b, Type element) {
    return isa<FloatType>(element) ? Attribute(b.getFloatAttr(element, 0.0))
                                   : b.getIntegerAttr(element, 0);
  }
  static Attribute lowestOf(OpBuilder &b, Type element) {
    if (auto ft = dyn_cast<FloatType>(element))
      return b.getFloatAttr(
          element, APFloat::getInf(ft.getFloatSemantics(), /*Negative=*/true));
    unsigned w = element.getIntOrFloatBitWidth();
    return b.getIntegerAttr(element, APInt::getSignedMinValue(w));
  }

  /// Whether dim `d` of `v` has a symbolic factor.
  bool paddedDim(Value v, int64_t d) {
    auto it = layouts.find(v);
    return it != layouts.end() && isPadded(it->second[d]);
  }

  LogicalResult mask(func::FuncOp f) {
    SmallVector<Operation *> ops;
    f.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      auto elementOf = [](Value v) {
        return cast<RankedTensorType>(v.getType()).getElementType();
      };
      auto paddedAmong = [&](Value v, ArrayRef<int64_t> dims) {
        SmallVector<int64_t> out;
        for (int64_t d : dims)
          if (paddedDim(v, d))
            out.push_back(d);
        return out;
      };
      if (auto r = dyn_cast<ReduceSumOp>(op)) {
        auto dims = paddedAmong(r.getOperand(), r.getDims());
        if (!dims.empty())
          r->setOperand(0, masked(b, loc, r.getOperand(), dims,
                                  zeroOf(b, elementOf(r.getOperand()))));
      } else if (auto r = dyn_cast<ReduceMaxOp>(op)) {
        auto dims = paddedAmong(r.getOperand(), r.getDims());
        if (!dims.empty())
          r->setOperand(0, masked(b, loc, r.getOperand(), dims,
                                  lowestOf(b, elementOf(r.getOperand()))));
      } else if (auto r = dyn_cast<ReduceMeanOp>(op)) {
        auto dims = paddedAmong(r.getOperand(), r.getDims());
        if (!dims.empty())
          replaceMean(b, r);
      } else if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
        Value x = op->getOperand(0);
        auto d = static_cast<int64_t>(
            op->getAttrOfType<IntegerAttr>("dimension").getInt());
        if (paddedDim(x, d))
          op->setOperand(0, masked(b, loc, x, {d}, lowestOf(b, elementOf(x))));
      } else if (auto m = dyn_cast<MatmulOp>(op)) {
        int64_t ra = m.getLhs().getType().getRank();
        int64_t rb = m.getRhs().getType().getRank();
        int64_t ka = m.getTransposeA() ? ra - 2 : ra - 1;
        int64_t kb = m.getTransposeB() ? rb - 1 : rb - 2;
        if (paddedDim(m.getLhs(), ka)) {
          Value lhs = m.getLhs(), rhs = m.getRhs();
          m->setOperand(0, masked(b, loc, lhs, {ka}, zeroOf(b, elementOf(lhs))));
          m->setOperand(1, masked(b, loc, rhs, {kb}, zeroOf(b, elementOf(rhs))));
        }
      } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
        if (paddedDim(ce.getTargets(), 0) &&
            ce.getReduction() != LossReduction::None) {
          Type element = elementOf(ce.getTargets());
          ce->setOperand(1, masked(b, loc, ce.getTargets(), {0},
                                   b.getIntegerAttr(
                                       element, ce.getIgnoreIndexOrDefault())));
        }
      }
    }
    return success();
  }

  /// reduce_mean over padded dims -> reduce_sum(masked) / valid count.
  void replaceMean(OpBuilder &b, ReduceMeanOp r) {
    Location loc = r.getLoc();
    Value x = r.getOperand();
    auto type = cast<RankedTensorType>(x.getType());
    Layout l = layoutOf(x);
    Value sum = b.create<ReduceSumOp>(
        loc, masked(b, loc, x, r.getDims(), zeroOf(b, type.getElementType())),
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
    auto i64 = RankedTensorType::get({}, b.getI64Type());
    Value count = b.create<ConstantOp>(
        loc, i64, DenseElementsAttr::get(i64, b.getI64IntegerAttr(fixed)));
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
    if (layouts.count(r.getResult())) {
      layouts[mean] = layouts[r.getResult()];
      layouts[sum] = layouts[r.getResult()];
    }
    r.erase();
  }

  void finish(func::FuncOp f) {
    OpBuilder b(f.getContext());
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto it = layouts.find(v);
      if (it == layouts.end())
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
    for (auto &[s, size] : bucket)
      chosen.push_back(b.getNamedAttr(s, b.getI64IntegerAttr(size)));
    f->removeAttr("step.symbols");
    f->setAttr("step.buckets", b.getDictionaryAttr(chosen));
  }
};

} // namespace
} // namespace mlir::step
