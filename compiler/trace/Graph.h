//===- Graph.h - Tracing API: Graph, Tensor, errors -------------*- C++ -*-===//
//
// The C++ tracing API writes a model the way PyTorch code does and records it
// as one `func.func @forward` of step-dialect ops (the model-file contract of
// DESIGN.md section 3):
//
//   step::trace::Graph g(/*seed=*/0);
//   Tensor x = g.input("x", {32, 784});
//   Tensor w = g.param("w1", {784, 256}, init::normal(0, 0.02));
//   Tensor b = g.param("b1", {256}, init::zeros());
//   Tensor h = relu(matmul(x, w) + b);
//   ...
//   g.output(loss);                 // the scalar f32 loss comes first
//   std::string text = g.mlir();    // or g.writeModel("out/")
//
// A Tensor is a handle to an SSA value of its Graph; ops (Ops.h) append step
// ops to the function as they are called, inserting step.broadcast_in_dim and
// step.cast where NumPy broadcasting and PyTorch dtype promotion need them.
// Each op is checked before it is created, with the dialect's own shape
// inference, and a violation throws ShapeError naming the op and the shapes.
// See docs/tracing.md for the rules.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_TRACE_GRAPH_H
#define STEP_COMPILER_TRACE_GRAPH_H

#include "compiler/trace/Init.h"
#include "runtime/Tensor.h"

#include "mlir/IR/Value.h"

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlir {
class MLIRContext;
class ModuleOp;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace step::trace {

using DType = rt::DType;
/// Shapes as the API spells them: kDynamic (-1) marks a dynamic (`?`) dim.
using Shape = std::vector<int64_t>;
/// A dynamic dimension in input shapes; printed as `?` in the IR.
inline constexpr int64_t kDynamic = -1;

/// A symbolic dimension, for models whose sequence length (say) changes from
/// batch to batch: `g.input("tokens", {8, dyn("T", 1024)}, DType::I64)`.
/// Returns a code (below kDynamic) that input(), iota() and reshape() take
/// in place of a size; the IR gets a `?` named by `step.dims = ["", "T"]`,
/// and @forward records each symbol's maximum in `step.symbols`.
/// step-pad-dynamic (stepc --buckets) pads such dims to buckets and masks
/// so results are exact (docs/dynamic-shapes.md). The same name and maximum
/// always give the same code; one model using a name with two maxima is an
/// std::invalid_argument. Names are letters, digits and '_'.
int64_t dyn(const std::string &name, int64_t max);
/// Whether `d` is a code returned by dyn().
inline bool isSymbolic(int64_t d) { return d < kDynamic; }
/// The name and maximum of a code from dyn(); throws std::invalid_argument
/// for anything else.
std::pair<std::string, int64_t> symbolOf(int64_t code);

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Base of every error the tracer reports for a bad model (as opposed to a
/// bug): std::invalid_argument, because the arguments of a traced op are
/// what is wrong. The message starts with the op ("matmul: ...") and ends
/// with the user's source line ("(at mlp.cpp:42)").
class TraceError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Shapes that do not fit an op: "add: cannot broadcast [3, 4] with [5]".
class ShapeError : public TraceError {
public:
  using TraceError::TraceError;
};

/// Element types an op does not accept: "matmul: needs float operands ...".
class DTypeError : public TraceError {
public:
  using TraceError::TraceError;
};

//===----------------------------------------------------------------------===//
// SourceLoc, Scalar
//===----------------------------------------------------------------------===//

/// Where the user called an op. Used as a defaulted last parameter, GCC and
/// Clang evaluate __builtin_FILE/__builtin_LINE at the call site, so every
/// emitted op carries the user's file and line as its MLIR location.
///
/// The first parameter is a private tag so that no argument converts to a
/// SourceLoc by accident (a literal 0 would otherwise become a null file).
struct SourceLoc {
  struct Here {};
  const char *file;
  unsigned line;
  SourceLoc(Here = Here(), const char *file = __builtin_FILE(),
            unsigned line = __builtin_LINE())
      : file(file), line(line) {}
  /// An explicit location, for generated code.
  static SourceLoc at(const char *file, unsigned line) {
    return SourceLoc(Here(), file, line);
  }
};

/// A host number in a tensor expression (`x * 2.0`, `3 - x`). Its kind
/// matters for dtype promotion, as for Python scalars in PyTorch: a float
/// scalar turns an integer tensor into f32, an integer scalar does not
/// change any tensor's dtype (see docs/tracing.md).
struct Scalar {
  enum class Kind { Bool, Int, Float };
  Kind kind;
  double value;   // the value for Float (and a copy for the others)
  int64_t intValue; // exact for Bool and Int

  template <typename T,
            std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v)
      : kind(std::is_same_v<T, bool>  ? Kind::Bool
             : std::is_integral_v<T> ? Kind::Int
                                     : Kind::Float),
        value(static_cast<double>(v)),
        intValue(std::is_integral_v<T> ? static_cast<int64_t>(v) : 0) {}
};

namespace detail {
struct GraphState;
} // namespace detail

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

/// A value of a Graph: cheap to copy, valid as long as its Graph lives (and
/// across moves of the Graph). A default-constructed Tensor is null; using it
/// in an op throws std::invalid_argument.
class Tensor {
public:
  Tensor() = default;
  /// Internal: the tracer wraps the values it creates.
  Tensor(detail::GraphState *state, mlir::Value value)
      : state_(state), value_(value) {}

  /// Dims, kDynamic (-1) for a dynamic one.
  Shape shape() const;
  DType dtype() const;
  int64_t rank() const;
  /// Dim `i`; negative `i` counts from the end, as in PyTorch.
  int64_t dim(int64_t i) const;
  /// The MLIR value (for code that inspects or extends the module).
  mlir::Value value() const { return value_; }
  detail::GraphState *state() const { return state_; }
  explicit operator bool() const { return static_cast<bool>(value_); }

private:
  detail::GraphState *state_ = nullptr;
  mlir::Value value_;
};

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

/// Owns an MLIRContext (step and func dialects loaded), a module and its
/// `func.func @forward`, built incrementally. Inputs and params become block
/// arguments in declaration order, with `{step.kind = "input"|"param",
/// step.name = NAME}`; output() adds the func.return and fixes the function
/// type. Params are drawn from their initializer on demand, reproducibly
/// from (seed, name) (see Init.h). Not thread-safe.
class Graph {
public:
  explicit Graph(uint64_t seed = 0);
  ~Graph();
  Graph(Graph &&) noexcept;
  Graph &operator=(Graph &&) noexcept;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  /// Batch data: a function argument with {step.kind = "input"}. Dims may be
  /// kDynamic or symbolic (dyn()). Names are unique among inputs and params and are file names
  /// (letters, digits, '_', '.', '-'; not starting with '.').
  Tensor input(const std::string &name, const Shape &shape,
               DType dtype = DType::F32, SourceLoc loc = {});
  /// A trainable parameter: {step.kind = "param"}, static shape, initial
  /// value drawn from `init` (Init.h) when initialParams()/writeModel() runs.
  Tensor param(const std::string &name, const Shape &shape,
               const init::Init &init, DType dtype = DType::F32,
               SourceLoc loc = {});

  /// A constant tensor (step.constant), static shape.
  Tensor constant(const rt::HostTensor &value, SourceLoc loc = {});
  /// A splat constant of `shape` (static) holding `value` in `dtype`.
  Tensor full(const Shape &shape, Scalar value, DType dtype = DType::F32,
              SourceLoc loc = {});
  /// A rank-0 constant.
  Tensor scalar(Scalar value, DType dtype = DType::F32, SourceLoc loc = {});
  /// step.iota: `shape` counting along `dim`; dims are static or symbolic
  /// (dyn(): positions 0..T-1 of a sequence of symbolic length T).
  Tensor iota(const Shape &shape, int64_t dim, DType dtype = DType::I64,
              SourceLoc loc = {});
  /// torch.arange(start, end, step): a 1-D tensor, i64 by default. The
  /// length is ceil((end - start) / step) and must be positive.
  Tensor arange(int64_t end, DType dtype = DType::I64, SourceLoc loc = {});
  Tensor arange(int64_t start, int64_t end, int64_t step = 1,
                DType dtype = DType::I64, SourceLoc loc = {});

  /// Ends the function: returns `loss` (a scalar f32, named "loss") first,
  /// then `extras` (named "out1", "out2", ...). No op may be added after.
  template <typename... Extras>
  void output(const Tensor &loss, const Extras &...extras) {
    outputList(loss, std::vector<Tensor>{extras...});
  }
  void outputList(const Tensor &loss, const std::vector<Tensor> &extras);
  /// As output(), with a `step.name` for each extra result.
  void outputNamed(const Tensor &loss,
                   std::vector<std::pair<std::string, Tensor>> extras);

  /// The module in the custom assembly form, verified first. Throws
  /// std::logic_error before output() or if verification fails. With
  /// `locations`, every op carries its `loc(...)`: the C++ file:line that
  /// traced it, which the plan keeps, so runtime errors (the non-finite
  /// guard's) name the host program's line; step::jit compiles this form.
  std::string mlir(bool locations = false) const;
  /// Writes DIR/model.mlir and DIR/params/<name>.npy (initial values),
  /// creating the folders; each file atomically (temporary file + rename).
  void writeModel(const std::string &dir) const;
  /// Initial values of all params, by name.
  std::map<std::string, rt::HostTensor> initialParams() const;
  /// Initial value of one param; throws std::invalid_argument if unknown.
  rt::HostTensor initialParam(const std::string &name) const;

  /// Runs @forward on the reference interpreter. Each argument comes from
  /// `inputs` by name, or else (params only) from `params` when given, or
  /// else from its initial value. Throws rt::Error with the interpreter's
  /// message on failure.
  std::vector<rt::HostTensor>
  run(const std::map<std::string, rt::HostTensor> &inputs,
      const std::map<std::string, rt::HostTensor> *params = nullptr) const;

  uint64_t seed() const;
  bool finished() const;
  mlir::MLIRContext *context() const;
  mlir::ModuleOp module() const;
  mlir::func::FuncOp forward() const;

private:
  friend class AutocastOff;
  friend class Checkpoint;
  std::unique_ptr<detail::GraphState> state_;
};

/// `with torch.autocast(..., enabled=False):` for the tracer: the ops traced
/// while a scope is alive carry `step.amp = "f32"`, and step-amp (`stepc
/// --amp`) computes them in f32 whatever its policy says. Scopes nest.
///
///   { trace::AutocastOff exact(g); y = softmax(scores, -1); }
class AutocastOff {
public:
  explicit AutocastOff(Graph &g);
  ~AutocastOff();
  AutocastOff(const AutocastOff &) = delete;
  AutocastOff &operator=(const AutocastOff &) = delete;

private:
  Graph &graph_;
};

/// `torch.utils.checkpoint` for the tracer: the values computed while a
/// scope is alive are not kept for the backward but recomputed there from
/// the scope's inputs (step-remat, docs/remat.md); the scope's outputs are
/// kept. Ops traced inside carry `step.checkpoint = <scope id>`; every
/// --remat mode honors them, and the solver of `max` and `--remat-budget`
/// may recompute more. An inner scope is a scope of its own.
///
///   { trace::Checkpoint ckpt(g); x = block(g, i, x, cfg); }
class Checkpoint {
public:
  explicit Checkpoint(Graph &g);
  ~Checkpoint();
  Checkpoint(const Checkpoint &) = delete;
  Checkpoint &operator=(const Checkpoint &) = delete;

private:
  Graph &graph_;
  int64_t outer_;
};

/// Runs `block()` inside a Checkpoint scope and returns what it returns:
/// `x = checkpoint(g, [&] { return block(g, i, x, cfg); });`
template <typename F> auto checkpoint(Graph &g, F &&block) {
  Checkpoint scope(g);
  return block();
}

} // namespace step::trace

#endif // STEP_COMPILER_TRACE_GRAPH_H
