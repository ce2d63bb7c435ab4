//===- FuseGraphGen.cpp - Random graphs for step-fuse tests ---------------===//
//
// The generator keeps a pool of f32 values (function arguments and op
// results) with their shapes and magnitude bounds, and appends 6 to 14
// (FuseGraphSize) "actions", each a few ops of one pattern step-fuse has a
// rule for. Every value no op reads is returned, so every op reaches a
// result and a wrong value anywhere shows in the output. Operands
// are drawn from the pool with a bias towards recent values, so chains form
// (loop fusions grow along them) and older values gain further users
// (multi-output fusions). A value whose bound exceeds kTame is passed
// through tanh before it enters the pool, which keeps every bound small.
//
// The random source is splitmix64, not <random>'s distributions, whose
// output differs between standard libraries; a fuzzer supplies its own
// (Choices). As a model (GraphForm::Model), the values no op reads are
// summed into the loss instead of returned.
//
//===----------------------------------------------------------------------===//

#include "FuseGraphGen.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

namespace step::fusegen {
namespace {

/// Bounds above this are squashed with tanh before a value is reused.
constexpr double kTame = 100.0;

class SeededChoices : public Choices {
public:
  explicit SeededChoices(uint64_t seed)
      : state_(seed * 0x9E3779B97F4A7C15ull + 7) {}
  int64_t below(int64_t n) override {
    return static_cast<int64_t>(next() % static_cast<uint64_t>(n));
  }
  double unit() override {
    return static_cast<double>(next() >> 11) * 0x1.0p-53;
  }

private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

/// The draws the builder makes, on top of a Choices.
class Rng {
public:
  explicit Rng(Choices &choices) : choices_(choices) {}
  int64_t below(int64_t n) { return choices_.below(n); }
  double uniform(double lo, double hi) { return choices_.uniform(lo, hi); }
  bool chance(double p) { return choices_.unit() < p; }
  template <typename T> const T &of(const std::vector<T> &v) {
    return v[static_cast<size_t>(below(static_cast<int64_t>(v.size())))];
  }

private:
  Choices &choices_;
};

/// An SSA value of the function being written.
struct Val {
  std::string name;
  rt::Shape shape;
  std::string elt = "f32";
  double bound = 1.0; ///< |every element| <= bound
  std::string kind;   ///< arguments of a model: "param" or "input"
};

std::string typeOf(const rt::Shape &shape, const std::string &elt) {
  std::string t = "tensor<";
  for (int64_t d : shape)
    t += std::to_string(d) + "x";
  return t + elt + ">";
}
std::string typeOf(const Val &v) { return typeOf(v.shape, v.elt); }

std::string listOf(const std::vector<int64_t> &xs) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i)
    s += (i ? ", " : "") + std::to_string(xs[i]);
  return s + "]";
}

class Builder {
public:
  Builder(Choices &choices, FuseGraphSize size, GraphForm form)
      : rng_(choices), size_(size), model_(form == GraphForm::Model) {}

  FuseGraph build() {
    makeSignature();
    int64_t actions =
        size_.minActions + rng_.below(std::max<int64_t>(
                               1, size_.maxActions - size_.minActions + 1));
    for (int64_t i = 0; i < actions; ++i)
      act();
    finish();
    return std::move(graph_);
  }

private:
  Rng rng_;
  FuseGraphSize size_;
  bool model_;
  FuseGraph graph_;
  rt::Shape full_;
  std::vector<Val> args_, pool_;
  Val one_, w_, b_, c_, s_, m_, y_;
  bool hasMatmul_ = false;
  std::ostringstream body_;
  int64_t counter_ = 0;
  std::vector<Val> emitted_;   ///< every op result, in order
  std::set<std::string> used_; ///< names read by some op

  //===--------------------------------------------------------------------===//
  // Emitting ops
  //===--------------------------------------------------------------------===//

  /// Writes `%vN = step.<op> <rest>` and returns %vN.
  Val emit(const std::string &op, const std::string &rest, rt::Shape shape,
           double bound, const std::string &elt = "f32") {
    Val v{"%v" + std::to_string(counter_++), std::move(shape), elt, bound, ""};
    body_ << "  " << v.name << " = step." << op << " " << rest << "\n";
    ++graph_.ops;
    for (size_t at = rest.find('%'); at != std::string::npos;
         at = rest.find('%', at + 1)) {
      size_t end = at + 1;
      while (end < rest.size() && std::isalnum(rest[end]))
        ++end;
      used_.insert(rest.substr(at, end - at));
    }
    emitted_.push_back(v);
    return v;
  }
  Val unary(const std::string &op, const Val &x, double bound) {
    return emit(op, x.name + " : " + typeOf(x), x.shape, bound, x.elt);
  }
  Val binary(const std::string &op, const Val &a, const Val &b, double bound) {
    return emit(op, a.name + ", " + b.name + " : " + typeOf(a), a.shape, bound,
                a.elt);
  }
  Val broadcast(const Val &x, const rt::Shape &to,
                const std::vector<int64_t> &dims) {
    return emit("broadcast_in_dim",
                x.name + ", dims = " + listOf(dims) + " : " + typeOf(x) +
                    " -> " + typeOf(to, x.elt),
                to, x.bound, x.elt);
  }
  Val reshape(const Val &x, const rt::Shape &to) {
    return emit("reshape",
                x.name + " : " + typeOf(x) + " -> " + typeOf(to, x.elt), to,
                x.bound, x.elt);
  }
  Val cast(const Val &x, const std::string &elt) {
    // bf16 keeps 8 significant bits: rounding grows a bound by < 1%.
    return emit("cast",
                x.name + " : " + typeOf(x) + " -> " + typeOf(x.shape, elt),
                x.shape, x.bound * 1.01, elt);
  }
  /// 1.0 in the shape of `like`.
  Val ones(const rt::Shape &like) {
    return like.empty() ? one_ : broadcast(one_, like, {});
  }
  /// |x| + 1: at least 1, a safe divisor and log/rsqrt operand.
  Val absPlusOne(const Val &x) {
    Val a = unary("abs", x, x.bound);
    return binary("add", a, ones(x.shape), x.bound + 1);
  }
  Val tame(const Val &v) { return v.bound > kTame ? unary("tanh", v, 1.0) : v; }
  void keep(const Val &v) { pool_.push_back(tame(v)); }

  //===--------------------------------------------------------------------===//
  // Choosing operands
  //===--------------------------------------------------------------------===//

  /// An f32 value of the pool, of `shape` if given, else `fallback`;
  /// recent ones are likelier.
  Val pick(const rt::Shape *shape = nullptr, const Val *fallback = nullptr) {
    std::vector<size_t> fit;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (pool_[i].elt == "f32" && (!shape || pool_[i].shape == *shape))
        fit.push_back(i);
    if (fit.empty()) // never without a fallback: the x's have the full shape
      return fallback ? *fallback : pool_.front();
    size_t k = fit.size();
    size_t at = rng_.chance(0.6)
                    ? k - 1 - std::min<size_t>(k - 1, rng_.below(3))
                    : static_cast<size_t>(rng_.below(k));
    return pool_[fit[at]];
  }
  Val pickFull() { return pick(&full_); }
  /// An i32 operand for `i`: itself or another f32 value cast to i32.
  Val partner32(const Val &i) {
    return rng_.chance(0.5) ? i : cast(partner(i), "i32");
  }
  Val partner(const Val &a) { return pick(&a.shape, &a); }
  int64_t rank() const { return static_cast<int64_t>(full_.size()); }

  //===--------------------------------------------------------------------===//
  // Signature and result
  //===--------------------------------------------------------------------===//

  Val addArg(const std::string &name, rt::Shape shape, double lo, double hi) {
    Val v{"%" + name, shape, "f32", std::max(std::fabs(lo), std::fabs(hi)),
          name == "x0" ? "input" : "param"};
    rt::HostTensor t(rt::DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>(rng_.uniform(lo, hi));
    graph_.args.push_back(std::move(t));
    addName(v);
    return v;
  }

  void addName(const Val &v) {
    args_.push_back(v);
    graph_.argNames.push_back(v.name.substr(1));
    graph_.argKinds.push_back(model_ ? v.kind : "");
  }

  void makeSignature() {
    int64_t r = 2 + rng_.below(2);
    for (int64_t i = 0; i < r; ++i)
      full_.push_back(2 + rng_.below(i + 1 == r ? 7 : 4));
    int64_t xs = 2 + rng_.below(2);
    for (int64_t i = 0; i < xs; ++i)
      pool_.push_back(addArg("x" + std::to_string(i), full_, -2, 2));
    w_ = addArg("w", {full_.back()}, 0.5, 1.5);
    b_ = addArg("b", {full_.back()}, -0.5, 0.5);
    c_ = addArg("c", {full_.front()}, -2, 2);
    s_ = addArg("s", {}, -2, 2);
    hasMatmul_ = r == 2;
    if (hasMatmul_) {
      m_ = addArg("m", {full_[1], full_[1]}, -0.5, 0.5);
      // Class labels of the rows, for cross_entropy(_grad).
      y_ = Val{"%y", {full_[0]}, "i64", 0.0, "input"};
      rt::HostTensor t(rt::DType::I64, y_.shape);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<int64_t>()[i] = rng_.below(full_[1]);
      graph_.args.push_back(std::move(t));
      addName(y_);
    }
    one_ = emit("constant", "dense<1.0> : tensor<f32>", {}, 1.0);
  }

  void finish() {
    // Every unused value, so that every op reaches a result, then up to
    // three used ones (never an argument): values used both inside a
    // fusion and by the return become extra fusion results.
    std::vector<Val> results;
    for (const Val &v : emitted_)
      if (!used_.count(v.name))
        results.push_back(v);
    int64_t extra = rng_.below(4);
    for (int64_t i = 0; i < extra; ++i) {
      const Val &v = rng_.of(pool_);
      bool isArg = std::any_of(args_.begin(), args_.end(),
                               [&](const Val &a) { return a.name == v.name; });
      bool dup = std::any_of(results.begin(), results.end(),
                             [&](const Val &a) { return a.name == v.name; });
      if (!isArg && !dup)
        results.push_back(v);
    }
    auto join = [](const std::vector<Val> &vs, bool names, bool types) {
      std::string out;
      for (size_t i = 0; i < vs.size(); ++i)
        out += (i ? ", " : "") + (names ? vs[i].name : "") +
               (names && types ? ": " : "") + (types ? typeOf(vs[i]) : "");
      return out;
    };
    if (model_)
      return finishModel(results);
    graph_.mlir = "func.func @f(" + join(args_, true, true) + ") -> (" +
                  join(results, false, true) + ") {\n" + body_.str() +
                  "  return " + join(results, true, false) + " : " +
                  join(results, false, true) + "\n}\n";
  }

  /// The model form: every result summed into the loss, maybe one value
  /// returned beside it.
  void finishModel(const std::vector<Val> &results) {
    Val loss;
    for (const Val &r : results) {
      Val v = r.elt == "f32" ? r : cast(r, "f32");
      std::vector<int64_t> all;
      for (int64_t d = 0; d < static_cast<int64_t>(v.shape.size()); ++d)
        all.push_back(d);
      Val sum = v.shape.empty()
                    ? v
                    : emit("reduce_sum",
                           v.name + " dims = " + listOf(all) + " : " +
                               typeOf(v) + " -> tensor<f32>",
                           {}, v.bound * rt::numElements(v.shape));
      loss = loss.name.empty() ? sum
                               : binary("add", loss, sum, loss.bound + sum.bound);
    }
    if (loss.name.empty())
      loss = one_;
    std::vector<Val> out = {loss};
    if (rng_.chance(0.3) && !results.empty())
      out.push_back(results.back());
    std::string args, types, names;
    for (size_t i = 0; i < args_.size(); ++i)
      args += (i ? ", " : "") + args_[i].name + ": " + typeOf(args_[i]) +
              " {step.kind = \"" + args_[i].kind + "\", step.name = \"" +
              args_[i].name.substr(1) + "\"}";
    for (size_t i = 0; i < out.size(); ++i) {
      types += (i ? ", " : "") + typeOf(out[i]);
      names += (i ? ", " : "") + out[i].name;
    }
    graph_.mlir = "func.func @forward(" + args + ") -> (" + types + ") {\n" +
                  body_.str() + "  return " + names + " : " + types + "\n}\n";
  }

  //===--------------------------------------------------------------------===//
  // Actions
  //===--------------------------------------------------------------------===//

  void act() {
    int64_t k = rng_.below(100);
    if (k < 20)
      keep(unaryOf(pick()));
    else if (k < 40)
      binaryAction();
    else if (k < 48)
      broadcastAction();
    else if (k < 53)
      reshapeAction();
    else if (k < 60)
      selectAction();
    else if (k < 65)
      castAction();
    else if (k < 80)
      reductionAction();
    else if (k < 89)
      rowAction();
    else if (k < 95)
      normAction();
    else if (hasMatmul_)
      matmulAction();
    else
      keep(unaryOf(pick()));
  }

  Val unaryOf(const Val &x) {
    // Ops that keep the bound, and ops whose result is in [-1, 1].
    static const std::vector<std::string> same = {"neg", "abs", "relu",
                                                  "stop_gradient"};
    static const std::vector<std::string> unit = {"tanh", "sigmoid", "sin",
                                                  "cos", "erf"};
    int64_t k = rng_.below(15);
    if (k < 4)
      return unary(same[k], x, x.bound);
    if (k < 9)
      return unary(unit[k - 4], x, 1.0);
    switch (k) {
    case 9:
      return emit("gelu",
                  x.name + " approximate " +
                      (rng_.chance(0.5) ? "tanh" : "none") + " : " + typeOf(x),
                  x.shape, x.bound + 0.2);
    case 10:
      // exp only where it stays far below the f32 range.
      return x.bound <= 4 ? unary("exp", x, std::exp(x.bound))
                          : unary("tanh", x, 1.0);
    case 11:
      return unary("sqrt", unary("abs", x, x.bound), std::sqrt(x.bound));
    case 12:
      return rng_.chance(0.5)
                 ? unary("log", absPlusOne(x), std::log(x.bound + 1))
                 : unary("rsqrt", absPlusOne(x), 1.0);
    case 13:
      // Deterministic in (seed, element index): the same mask fused or not.
      return emit("dropout",
                  x.name + " p = 2.500000e-01 seed = " +
                      std::to_string(rng_.below(1000)) + " : " + typeOf(x),
                  x.shape, x.bound * 4 / 3);
    default: {
      // (|x| + 1) ^ sigmoid(y): a base >= 1, an exponent in (0, 1).
      Val e = unary("sigmoid", partner(x), 1.0);
      return binary("pow", absPlusOne(x), e, x.bound + 1);
    }
    }
  }

  Val binaryOf(const Val &a, const Val &b) {
    switch (rng_.below(6)) {
    case 0:
      return binary("add", a, b, a.bound + b.bound);
    case 1:
      return binary("sub", a, b, a.bound + b.bound);
    case 2:
      return binary("mul", a, b, a.bound * b.bound);
    case 3:
      return binary("max", a, b, std::max(a.bound, b.bound));
    case 4:
      return binary("min", a, b, std::max(a.bound, b.bound));
    default:
      return binary("div", a, absPlusOne(b), a.bound);
    }
  }

  void binaryAction() {
    Val a = pick();
    keep(binaryOf(a, partner(a)));
  }

  /// A rank-0 or rank-1 value broadcast to the full shape and combined with
  /// a full-shape value (a bias, a per-row scale, a scalar).
  void broadcastAction() {
    Val src;
    std::vector<int64_t> dims;
    switch (rng_.below(4)) {
    case 0:
      src = rng_.chance(0.5) ? w_ : b_;
      dims = {rank() - 1};
      break;
    case 1:
      src = c_;
      dims = {0};
      break;
    case 2:
      src = s_;
      break;
    default:
      // A scalar of the pool (a full reduction, a clip coefficient).
      src = pick(&s_.shape, &s_);
      break;
    }
    Val bc = broadcast(src, full_, dims);
    keep(binaryOf(pickFull(), bc));
  }

  /// Ops on a reshaped view, then back to the full shape.
  void reshapeAction() {
    rt::Shape to;
    int64_t n = rt::numElements(full_);
    switch (rng_.below(3)) {
    case 0:
      to = {n};
      break;
    case 1:
      to = {full_[0] * full_[1]};
      to.insert(to.end(), full_.begin() + 2, full_.end());
      if (to.size() == 1)
        to = {full_[1], full_[0]};
      break;
    default:
      to = {full_[0], n / full_[0]};
      if (rank() == 2)
        to = {n / full_.back(), full_.back(), 1};
      break;
    }
    Val a = reshape(pickFull(), to);
    Val y =
        rng_.chance(0.5) ? unaryOf(a) : binaryOf(a, reshape(pickFull(), to));
    y = tame(y);
    if (rng_.chance(0.3))
      pool_.push_back(y); // later ops in the reshaped domain
    keep(reshape(y, full_));
  }

  void selectAction() {
    static const std::vector<std::string> preds = {"eq", "ne", "lt",
                                                   "le", "gt", "ge"};
    Val a = pick();
    Val b = partner(a);
    Val p =
        emit("compare",
             rng_.of(preds) + ", " + a.name + ", " + b.name + " : " + typeOf(a),
             a.shape, 1.0, "i1");
    Val t = partner(a), f = partner(a);
    keep(emit("select",
              p.name + ", " + t.name + ", " + f.name + " : " + typeOf(p) +
                  ", " + typeOf(t),
              a.shape, std::max(t.bound, f.bound)));
  }

  /// f32 -> bf16, optionally an op in bf16, -> f32; or through i32
  /// (truncation, integer add).
  void castAction() {
    Val x = pick();
    if (rng_.chance(0.25)) {
      Val i = cast(x, "i32");
      i = binary(rng_.chance(0.5) ? "add" : "max", i, partner32(i),
                 2 * x.bound + 2);
      keep(cast(i, "f32"));
      return;
    }
    Val h = cast(x, "bf16");
    int64_t k = rng_.below(4); // 3: straight back
    if (k == 0)
      h = unary("tanh", h, 1.0);
    else if (k == 1)
      h = unary("relu", h, h.bound);
    else if (k == 2)
      h = binary("add", h, h, 2 * h.bound * 1.01);
    keep(cast(h, "f32"));
  }

  /// A reduction over trailing, leading or all dims, maybe with a sibling
  /// reduction of a related input, an epilogue, a broadcast back.
  void reductionAction() {
    Val x = rng_.chance(0.8) ? pickFull() : pick();
    int64_t r = static_cast<int64_t>(x.shape.size());
    if (r == 0)
      x = pickFull(), r = rank();
    std::vector<int64_t> dims;
    switch (rng_.below(4)) {
    case 0:
      dims = {r - 1};
      break;
    case 1:
      dims = {0};
      break;
    case 2:
      for (int64_t d = 0; d < r; ++d)
        dims.push_back(d);
      break;
    default:
      if (r >= 3)
        dims = rng_.chance(0.5) ? std::vector<int64_t>{r - 2, r - 1}
                                : std::vector<int64_t>{1};
      else
        dims = {r - 1};
      break;
    }
    bool keepdim = rng_.chance(0.3);
    Val red = reduce(x, dims, keepdim);
    if (rng_.chance(0.4)) {
      // A sibling: same input shape and dims, input computed from x.
      Val y = rng_.chance(0.5) ? binary("mul", x, x, x.bound * x.bound)
                               : unaryOf(x);
      red = binaryOf(red, reduce(y, dims, keepdim));
    }
    if (rng_.chance(0.6))
      red = unaryOf(red);
    red = tame(red);
    if (rng_.chance(0.5))
      pool_.push_back(red);
    if (rng_.chance(0.6)) {
      // Back to x's shape: each kept dim maps to itself.
      std::vector<int64_t> kept;
      for (int64_t d = 0; d < r; ++d)
        if (keepdim || std::find(dims.begin(), dims.end(), d) == dims.end())
          kept.push_back(d);
      Val bc = broadcast(red, x.shape, kept);
      keep(binaryOf(x, bc));
    }
  }

  Val reduce(const Val &x, const std::vector<int64_t> &dims, bool keepdim) {
    static const std::vector<std::string> kinds = {"reduce_sum", "reduce_mean",
                                                   "reduce_max"};
    const std::string &kind = rng_.of(kinds);
    rt::Shape out;
    int64_t count = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d) {
      bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (reduced)
        count *= x.shape[d];
      if (!reduced)
        out.push_back(x.shape[d]);
      else if (keepdim)
        out.push_back(1);
    }
    double bound = kind == "reduce_sum" ? x.bound * count : x.bound;
    return emit(kind,
                x.name + " dims = " + listOf(dims) +
                    (keepdim ? " keepdim" : "") + " : " + typeOf(x) + " -> " +
                    typeOf(out, "f32"),
                out, bound);
  }

  /// softmax, log_softmax or layer_norm over the last dim.
  void rowAction() {
    Val x = pickFull();
    std::string dim = " dim = " + std::to_string(rank() - 1) + " : ";
    if (hasMatmul_ && rng_.chance(0.3))
      return crossEntropy(x);
    switch (rng_.below(3)) {
    case 0:
      keep(emit("softmax", x.name + dim + typeOf(x), x.shape, 1.0));
      break;
    case 1:
      keep(emit("log_softmax", x.name + dim + typeOf(x), x.shape,
                2 * x.bound + std::log(static_cast<double>(full_.back())) + 1));
      break;
    default:
      keep(emit("layer_norm",
                x.name + ", " + w_.name + ", " + b_.name + " eps = 1.0e-05 : " +
                    typeOf(x) + ", " + typeOf(w_) + ", " + typeOf(b_),
                x.shape,
                1.5 * std::sqrt(static_cast<double>(full_.back())) + 0.5));
      break;
    }
  }

  /// cross_entropy of rows of `x` against %y (per row or mean), or its
  /// gradient scaled by a per-row or scalar upstream gradient.
  void crossEntropy(const Val &x) {
    double loss = 2 * x.bound + std::log(static_cast<double>(full_[1])) + 1;
    std::string head = x.name + ", " + y_.name;
    std::string types = typeOf(x) + ", " + typeOf(y_);
    bool none = rng_.chance(0.5);
    if (model_ || rng_.chance(0.5)) {
      rt::Shape out = none ? rt::Shape{full_[0]} : rt::Shape{};
      keep(emit("cross_entropy",
                head + " reduction = " + (none ? "none" : "mean") + " : " +
                    types + " -> " + typeOf(out, "f32"),
                out, loss));
      return;
    }
    Val g = none ? pick(&c_.shape, &c_) : s_;
    keep(emit("cross_entropy_grad",
              head + ", " + g.name +
                  " reduction = " + (none ? "none" : "mean") + " : " + types +
                  ", " + typeOf(g) + " -> " + typeOf(x),
              x.shape, g.bound));
  }

  /// The shape of a gradient-norm clip: full sums of squares combined by
  /// scalar ops into a coefficient that scales a full-shape value.
  void normAction() {
    int64_t n = 2 + rng_.below(2);
    std::vector<int64_t> all;
    for (int64_t d = 0; d < rank(); ++d)
      all.push_back(d);
    std::string sumType = " : " + typeOf(full_, "f32") + " -> tensor<f32>";
    Val total;
    for (int64_t i = 0; i < n; ++i) {
      Val g = pickFull();
      Val sq = binary("mul", g, g, g.bound * g.bound);
      Val s = emit("reduce_sum", sq.name + " dims = " + listOf(all) + sumType,
                   {}, sq.bound * rt::numElements(full_));
      total = i == 0 ? s : binary("add", total, s, total.bound + s.bound);
    }
    Val norm = unary("sqrt", total, std::sqrt(total.bound));
    Val coef =
        binary("div", one_, binary("add", norm, one_, norm.bound + 1), 1.0);
    pool_.push_back(coef);
    Val x = pickFull();
    keep(binary("mul", x, broadcast(coef, full_, {}), x.bound));
  }

  /// matmul, + bias over the last dim, then relu or tanh-GELU (or neither).
  void matmulAction() {
    Val x = pickFull();
    std::string t = typeOf(full_, "f32");
    Val mm = emit("matmul",
                  x.name + ", " + m_.name + " : " + t + ", " + typeOf(m_) +
                      " -> " + t,
                  full_, x.bound * 0.5 * static_cast<double>(full_[1]));
    Val y = binary("add", mm, broadcast(b_, full_, {1}), mm.bound + 0.5);
    int64_t k = rng_.below(3); // 2: no activation
    if (k == 0)
      y = unary("relu", y, y.bound);
    else if (k == 1)
      y = emit("gelu", y.name + " approximate tanh : " + t, full_,
               y.bound + 0.2);
    keep(y);
  }
};

} // namespace

FuseGraph generateFuseGraph(uint64_t seed, FuseGraphSize size,
                            GraphForm form) {
  SeededChoices choices(seed);
  FuseGraph g = generateFuseGraph(choices, size, form);
  g.seed = seed;
  return g;
}

FuseGraph generateFuseGraph(Choices &choices, FuseGraphSize size,
                            GraphForm form) {
  return Builder(choices, size, form).build();
}

} // namespace step::fusegen
