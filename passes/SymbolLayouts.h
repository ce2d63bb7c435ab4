//===- SymbolLayouts.h - Which dims of a value are padded symbols -*- C++ -*-===//
//
// The analysis behind step-pad-dynamic (PadDynamic.cpp): a forward walk that
// gives every value of a model function a *layout*: per dim, the product of
// factors it is made of, each a static size or a symbol padded to its bucket
// (a reshape of [B, T, C] to [B*T, C] gives dim 0 the factors [B][T]). Every
// `?` dim must be explained by symbols: named by `step.dims` on arguments
// and iota ops, carried through each op by its rule below, or (for a
// broadcast into a new dim) taken from the value the result is combined
// with. Ops it has no rule for, or whose operands disagree, are errors at
// the op. Cost: one visit per op, a layout per padded value.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_SYMBOLLAYOUTS_H
#define STEP_PASSES_SYMBOLLAYOUTS_H

#include "passes/StepAttrs.h"

#include "dialects/step/StepOps.h"
#include "dialects/step/TypeInference.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::step::pad {

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

inline bool isPadded(const DimLayout &d) {
  return llvm::any_of(d, [](const Factor &f) { return !f.symbol.empty(); });
}
inline bool isPadded(const Layout &l) {
  return llvm::any_of(l, [](const DimLayout &d) { return isPadded(d); });
}
inline int64_t sizeOf(const DimLayout &d) {
  int64_t n = 1;
  for (const Factor &f : d)
    n *= f.size;
  return n;
}
inline std::string describe(const DimLayout &d) {
  if (d.empty())
    return "1";
  std::string s;
  for (const Factor &f : d)
    s += (s.empty() ? "" : "*") +
         (f.symbol.empty() ? std::to_string(f.size) : f.symbol);
  return s;
}
inline std::string describe(const Layout &l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i)
    s += (i ? ", " : "") + describe(l[i]);
  return s + "]";
}

inline DimLayout staticDim(int64_t size) {
  DimLayout d;
  if (size != 1)
    d.push_back({size, ""});
  return d;
}

/// The layouts of one function's values, for given bucket sizes.
class SymbolLayouts {
public:
  /// Bucket size per symbol (set before analyze()).
  std::map<std::string, int64_t> bucket;
  /// The layout of every value with a padded factor; absent: static.
  DenseMap<Value, Layout> layouts;

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
      // Weight and bias have the layout of the normalized dims (a padded
      // one is masked by step-pad-dynamic's decomposition).
      Layout x = layoutOf(ln.getOperand());
      int64_t lead = x.size() - ln.getWeight().getType().getRank();
      for (Value v : {ln.getWeight(), ln.getBias()}) {
        Layout w = layoutOf(v);
        for (size_t d = 0; d < w.size(); ++d)
          if (!(w[d] == x[lead + d]))
            return refuse(op, "dim " + std::to_string(d) + " of the " +
                                  (v == ln.getWeight() ? "weight" : "bias") +
                                  " is " + describe(w[d]) +
                                  " but the normalized dim it scales is " +
                                  describe(x[lead + d]));
      }
      setLayout(result, x);
      return success();
    }
    if (auto at = dyn_cast<AttentionOp>(op)) {
      // Padded keys are masked (step-pad-dynamic gives the op a valid
      // length or decomposes it) unless the causal mask already hides them.
      Layout q = layoutOf(at.getQuery());
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
      // A layer_norm's weight or bias: the normalized dim it scales.
      if (auto ln = dyn_cast<LayerNormOp>(user)) {
        Value x = ln.getOperand();
        if (v != x && layouts.count(x)) {
          const Layout &l = layouts[x];
          return l[l.size() - ln.getWeight().getType().getRank() + d];
        }
        continue;
      }
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
               LogSoftmaxOp, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp,
               GeluGradOp>(op);
  }

  static bool isElementwiseUnary(Operation *op) {
    return isa<NegOp, AbsOp, ReluOp, ExpOp, LogOp, TanhOp, SigmoidOp, SqrtOp,
               RsqrtOp, ErfOp, SinOp, CosOp>(op);
  }

};

} // namespace mlir::step::pad

#endif // STEP_PASSES_SYMBOLLAYOUTS_H
