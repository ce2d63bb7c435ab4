//===- Graph.cpp - Graph and Tensor of the tracing API --------------------===//
//
// Declaring arguments, constants and outputs of @forward, and turning the
// traced function into files (model.mlir, params/*.npy) or running it on the
// reference interpreter.
//
//===----------------------------------------------------------------------===//

#include "compiler/trace/GraphState.h"
#include "compiler/trace/Ops.h"

#include "compiler/interpreter/Interpreter.h"
#include "runtime/Npy.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>

namespace step::trace {

using namespace detail;
namespace ops = mlir::step;
namespace fs = std::filesystem;
using mlir::ShapedType;

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

namespace {
void requireValue(const Tensor &t) {
  if (!t)
    throw std::invalid_argument("use of a null Tensor (default-constructed)");
}

/// Captures the MLIR diagnostics emitted while it lives (the first error and
/// its notes), so they can be rethrown as an exception.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext *ctx)
      : handler(ctx, [this](mlir::Diagnostic &d) {
          if (message.empty()) {
            message = d.str();
            for (const mlir::Diagnostic &note : d.getNotes())
              message += "; " + note.str();
          }
          return mlir::success();
        }) {}
  std::string message;

private:
  mlir::ScopedDiagnosticHandler handler;
};
} // namespace

Shape Tensor::shape() const {
  requireValue(*this);
  Shape s(dimsOf(value_).begin(), dimsOf(value_).end());
  for (int64_t &d : s)
    if (ShapedType::isDynamic(d))
      d = kDynamic;
  return s;
}

DType Tensor::dtype() const {
  requireValue(*this);
  return dtypeOf(value_);
}

int64_t Tensor::rank() const {
  requireValue(*this);
  return typeOf(value_).getRank();
}

int64_t Tensor::dim(int64_t i) const {
  Shape s = shape();
  int64_t r = static_cast<int64_t>(s.size());
  if (i < -r || i >= r)
    throw std::out_of_range("Tensor::dim: " + std::to_string(i) +
                            " is out of range for " + shapeOf(*this));
  return s[i < 0 ? i + r : i];
}

//===----------------------------------------------------------------------===//
// Graph: arguments and constants
//===----------------------------------------------------------------------===//

Graph::Graph(uint64_t seed) : state_(std::make_unique<GraphState>(seed)) {}
Graph::~Graph() = default;
Graph::Graph(Graph &&) noexcept = default;
Graph &Graph::operator=(Graph &&) noexcept = default;

namespace {
/// Names become file names (params/<name>.npy) and must not escape a folder.
void checkName(const std::string &what, const std::string &name,
               const GraphState &g, const SourceLoc &loc) {
  bool ok = !name.empty() && name[0] != '.';
  for (char c : name)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                c == '.' || c == '-');
  if (!ok)
    throw std::invalid_argument(
        what + ": name '" + name +
        "' must be letters, digits, '_', '.', '-', not starting with '.'" +
        where(loc));
  if (g.names.count(name))
    throw std::invalid_argument(what + ": name '" + name +
                                "' is already declared" + where(loc));
}

/// Symbols of dyn(), process-wide: code -(2 + i) is entry i.
struct SymbolTable {
  std::mutex mutex;
  std::vector<std::pair<std::string, int64_t>> entries;
};
SymbolTable &symbols() {
  static SymbolTable table;
  return table;
}

/// An API shape (kDynamic = -1, or a dyn() code) as an MLIR shape. With
/// `names`, the symbols of symbolic dims (others "") are stored there.
llvm::SmallVector<int64_t>
toMlirShape(const std::string &what, const Shape &shape, bool allowDynamic,
            const SourceLoc &loc, std::vector<std::string> *names = nullptr) {
  llvm::SmallVector<int64_t> out;
  for (int64_t d : shape) {
    bool symbolic = false;
    if (isSymbolic(d) && allowDynamic) {
      SymbolTable &t = symbols();
      std::lock_guard<std::mutex> lock(t.mutex);
      symbolic = -2 - d < static_cast<int64_t>(t.entries.size());
    }
    if (names)
      names->push_back(symbolic ? symbolOf(d).first : "");
    if ((d == kDynamic || symbolic) && allowDynamic) {
      out.push_back(ShapedType::kDynamic);
      continue;
    }
    if (d < 0)
      shapeError(what,
                 "invalid shape " + rt::shapeToString(shape) +
                     (allowDynamic ? " (dims are >= 0, or kDynamic)"
                                   : " (dims must be static and >= 0)"),
                 loc);
    out.push_back(d);
  }
  return out;
}

Tensor addArgument(GraphState &g, const std::string &what,
                   const std::string &name, llvm::ArrayRef<int64_t> shape,
                   DType dtype, const SourceLoc &loc) {
  mlir::func::FuncOp func = g.func;
  unsigned index = func.getNumArguments();
  mlir::NamedAttrList attrs;
  attrs.set("step.kind", g.builder.getStringAttr(what));
  attrs.set("step.name", g.builder.getStringAttr(name));
  // insertArgument keeps the function type, the block and the argument
  // attributes consistent.
  func.insertArgument(index, tensorType(g, shape, dtype),
                      attrs.getDictionary(&g.ctx), g.location(loc, name));
  g.names.insert(name);
  return Tensor(&g, func.getArgument(index));
}

GraphState &openState(const std::unique_ptr<GraphState> &state,
                      const std::string &what) {
  if (!state)
    throw std::logic_error(what + ": the Graph was moved from");
  if (state->finished)
    throw std::logic_error(what +
                           ": the graph is finished (output() was called)");
  return *state;
}

/// `step.dims` for symbolic `names` (nothing when all are ""); records
/// each symbol's maximum in @forward's `step.symbols`.
mlir::ArrayAttr symbolDims(GraphState &g, const Shape &shape,
                           const std::vector<std::string> &names) {
  if (llvm::all_of(names, [](const std::string &n) { return n.empty(); }))
    return {};
  mlir::NamedAttrList known;
  if (auto dict = g.func->getAttrOfType<mlir::DictionaryAttr>("step.symbols"))
    known = mlir::NamedAttrList(dict);
  llvm::SmallVector<mlir::Attribute> dims;
  for (auto [d, n] : llvm::zip(shape, names)) {
    dims.push_back(g.builder.getStringAttr(n));
    if (n.empty())
      continue;
    int64_t max = symbolOf(d).second;
    if (auto had = known.get(n))
      if (llvm::cast<mlir::IntegerAttr>(had).getInt() != max)
        throw std::invalid_argument(
            "dyn: symbol '" + n + "' is used with maximum " +
            std::to_string(llvm::cast<mlir::IntegerAttr>(had).getInt()) +
            " and " + std::to_string(max) + " in one model");
    known.set(n, g.builder.getI64IntegerAttr(max));
  }
  g.func->setAttr("step.symbols", known.getDictionary(&g.ctx));
  return g.builder.getArrayAttr(dims);
}
} // namespace

int64_t dyn(const std::string &name, int64_t max) {
  bool ok = !name.empty();
  for (char c : name)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok)
    throw std::invalid_argument("dyn: symbol name '" + name +
                                "' must be letters, digits and '_'");
  if (max < 1)
    throw std::invalid_argument("dyn: the maximum of '" + name +
                                "' must be >= 1, got " + std::to_string(max));
  SymbolTable &t = symbols();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (size_t i = 0; i < t.entries.size(); ++i)
    if (t.entries[i] == std::make_pair(name, max))
      return -2 - static_cast<int64_t>(i);
  t.entries.emplace_back(name, max);
  return -1 - static_cast<int64_t>(t.entries.size());
}

std::pair<std::string, int64_t> symbolOf(int64_t code) {
  SymbolTable &t = symbols();
  std::lock_guard<std::mutex> lock(t.mutex);
  int64_t i = -2 - code;
  if (code >= kDynamic || i >= static_cast<int64_t>(t.entries.size()))
    throw std::invalid_argument("symbolOf: " + std::to_string(code) +
                                " is not a code returned by dyn()");
  return t.entries[i];
}

Tensor Graph::input(const std::string &name, const Shape &shape, DType dtype,
                    SourceLoc loc) {
  GraphState &g = openState(state_, "input");
  checkName("input", name, g, loc);
  std::vector<std::string> names;
  auto dims = toMlirShape("input '" + name + "'", shape, true, loc, &names);
  Tensor t = addArgument(g, "input", name, dims, dtype, loc);
  if (mlir::ArrayAttr named = symbolDims(g, shape, names))
    g.func.setArgAttr(g.func.getNumArguments() - 1, "step.dims", named);
  return t;
}

Tensor Graph::param(const std::string &name, const Shape &shape,
                    const init::Init &init, DType dtype, SourceLoc loc) {
  GraphState &g = openState(state_, "param");
  checkName("param", name, g, loc);
  auto dims = toMlirShape("param '" + name + "'", shape, false, loc);
  try {
    init::validate(init, shape);
  } catch (const std::invalid_argument &e) {
    throw std::invalid_argument("param '" + name + "': " + e.what() +
                                where(loc));
  }
  g.params.push_back({name, shape, dtype, init});
  return addArgument(g, "param", name, dims, dtype, loc);
}

Tensor Graph::constant(const rt::HostTensor &value, SourceLoc loc) {
  GraphState &g = openState(state_, "constant");
  auto type = tensorType(g, value.shape(), value.dtype());
  mlir::DenseElementsAttr attr;
  if (value.dtype() == DType::I1) {
    // MLIR packs i1 elements as bits; build from bools instead of raw bytes.
    llvm::SmallVector<bool> bits;
    for (int64_t i = 0; i < value.numel(); ++i)
      bits.push_back(value.data<uint8_t>()[i] != 0);
    attr = mlir::DenseElementsAttr::get(type, bits);
  } else {
    llvm::ArrayRef<char> raw(static_cast<const char *>(value.raw()),
                             value.byteSize());
    attr = mlir::DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  return Tensor(&g, g.create<ops::ConstantOp>(
                        loc, "constant", type,
                        llvm::cast<mlir::ElementsAttr>(attr)));
}

Tensor Graph::full(const Shape &shape, Scalar value, DType dtype,
                   SourceLoc loc) {
  GraphState &g = openState(state_, "full");
  auto dims = toMlirShape("full", shape, false, loc);
  return Tensor(&g, splat(g, value, dtype, dims, loc, "full"));
}

Tensor Graph::scalar(Scalar value, DType dtype, SourceLoc loc) {
  return full({}, value, dtype, loc);
}

Tensor Graph::iota(const Shape &shape, int64_t dim, DType dtype,
                   SourceLoc loc) {
  GraphState &g = openState(state_, "iota");
  bool symbolic = llvm::any_of(shape, isSymbolic);
  std::vector<std::string> names;
  auto dims = toMlirShape("iota", shape, /*allowDynamic=*/symbolic, loc,
                          &names);
  if (llvm::is_contained(shape, kDynamic))
    shapeError("iota", "a dynamic dim must be symbolic (dyn(\"T\", max))",
               loc);
  if (dims.empty())
    shapeError("iota", "needs a shape of rank >= 1, got []", loc);
  if (dtype == DType::I1)
    dtypeError("iota", "cannot count in i1", loc);
  int64_t d = normalizeDim("iota", dim, dims.size(), dims, loc);
  auto op = g.builder.create<ops::IotaOp>(g.location(loc, "iota"),
                                          tensorType(g, dims, dtype),
                                          static_cast<uint64_t>(d));
  if (mlir::ArrayAttr named = symbolDims(g, shape, names))
    op->setAttr("step.dims", named);
  g.check(op, "iota", loc);
  return Tensor(&g, op.getResult());
}

Tensor Graph::arange(int64_t end, DType dtype, SourceLoc loc) {
  return arange(0, end, 1, dtype, loc);
}

Tensor Graph::arange(int64_t start, int64_t end, int64_t step, DType dtype,
                     SourceLoc loc) {
  if (step == 0)
    shapeError("arange", "step must be nonzero", loc);
  // ceil((end - start) / step) in integers, for either sign of step.
  int64_t span = end - start;
  int64_t n = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
  if (n <= 0)
    shapeError("arange",
               "empty range [" + std::to_string(start) + ", " +
                   std::to_string(end) + ") with step " +
                   std::to_string(step),
               loc);
  Tensor t = iota({n}, 0, dtype, loc);
  if (step != 1)
    t = mul(t, Scalar(step), loc);
  if (start != 0)
    t = add(t, Scalar(start), loc);
  return t;
}

//===----------------------------------------------------------------------===//
// Graph: output and products
//===----------------------------------------------------------------------===//

void Graph::outputList(const Tensor &loss, const std::vector<Tensor> &extras) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (auto [i, t] : llvm::enumerate(extras))
    named.emplace_back("out" + std::to_string(i + 1), t);
  outputNamed(loss, std::move(named));
}

void Graph::outputNamed(const Tensor &loss,
                        std::vector<std::pair<std::string, Tensor>> extras) {
  GraphState &g = openState(state_, "output");
  SourceLoc here = SourceLoc::at(nullptr, 0);
  if (&graphOf("output", {loss}, here) != &g)
    throw std::invalid_argument("output: the loss belongs to another graph");
  if (loss.rank() != 0 || loss.dtype() != DType::F32)
    throw ShapeError("output: the loss must be a scalar f32 tensor (model "
                     "contract), got " +
                     std::string(rt::dtypeName(loss.dtype())) + " " +
                     shapeOf(loss) + "; reduce it and cast it to f32");
  llvm::SmallVector<mlir::Value> results{loss.value()};
  std::set<std::string> names{"loss"};
  for (auto &[name, t] : extras) {
    graphOf("output", {loss, t}, here);
    if (!names.insert(name).second)
      throw std::invalid_argument("output: result name '" + name +
                                  "' is used twice");
    results.push_back(t.value());
  }
  g.builder.create<mlir::func::ReturnOp>(g.func.getLoc(), results);
  llvm::SmallVector<mlir::Type> types;
  for (mlir::Value v : results)
    types.push_back(v.getType());
  g.func.setType(mlir::FunctionType::get(
      &g.ctx, g.func.getBody().front().getArgumentTypes(), types));
  g.func.setResultAttr(0, "step.name", g.builder.getStringAttr("loss"));
  for (auto [i, named] : llvm::enumerate(extras))
    g.func.setResultAttr(i + 1, "step.name",
                         g.builder.getStringAttr(named.first));
  g.finished = true;
}

std::string Graph::mlir(bool locations) const {
  if (!state_ || !state_->finished)
    throw std::logic_error("mlir: call output() first");
  DiagnosticCapture capture(&state_->ctx);
  if (mlir::failed(mlir::verify(*state_->module)))
    throw std::logic_error("mlir: the traced module does not verify: " +
                           capture.message);
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  if (locations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  state_->module->print(os, flags);
  return text;
}


void Graph::writeModel(const std::string &dir) const {
  std::string text = mlir();
  fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root / "params", ec);
  if (ec)
    throw rt::Error("cannot create " + (root / "params").string() + ": " +
                    ec.message());
  rt::writeFileAtomic((root / "model.mlir").string(), text, "writeModel");
  for (const ParamSpec &p : state_->params)
    rt::writeNpy((root / "params" / (p.name + ".npy")).string(),
                 initialParam(p.name));
}

rt::HostTensor Graph::initialParam(const std::string &name) const {
  if (!state_)
    throw std::logic_error("initialParam: the Graph was moved from");
  for (const ParamSpec &p : state_->params)
    if (p.name == name)
      return init::sample(p.init, p.shape, p.dtype,
                          paramSeed(state_->seed, p.name));
  throw std::invalid_argument("initialParam: no param named '" + name + "'");
}

std::map<std::string, rt::HostTensor> Graph::initialParams() const {
  std::map<std::string, rt::HostTensor> out;
  if (state_)
    for (const ParamSpec &p : state_->params)
      out.emplace(p.name, initialParam(p.name));
  return out;
}

std::vector<rt::HostTensor>
Graph::run(const std::map<std::string, rt::HostTensor> &inputs,
           const std::map<std::string, rt::HostTensor> *params) const {
  if (!state_ || !state_->finished)
    throw std::logic_error("run: call output() first");
  mlir::func::FuncOp func = state_->func;
  std::vector<rt::HostTensor> args;
  std::set<std::string> used;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    std::string name = argumentName(func, i);
    auto kind = func.getArgAttrOfType<mlir::StringAttr>(i, "step.kind");
    bool isParam = kind && kind.getValue() == "param";
    if (auto it = inputs.find(name); it != inputs.end()) {
      args.push_back(it->second);
      used.insert(name);
    } else if (isParam && params && params->count(name)) {
      args.push_back(params->at(name));
    } else if (isParam) {
      args.push_back(initialParam(name));
    } else {
      throw rt::Error("run: no value for input '" + name + "'");
    }
  }
  for (const auto &entry : inputs)
    if (!used.count(entry.first))
      throw rt::Error("run: '" + entry.first +
                      "' is not an argument of @forward");
  DiagnosticCapture capture(&state_->ctx);
  auto results = interpret(func, args);
  if (mlir::failed(results))
    throw rt::Error("run: " + capture.message);
  return std::move(*results);
}

AutocastOff::AutocastOff(Graph &g) : graph_(g) {
  ++graph_.state_->autocastOff;
}
AutocastOff::~AutocastOff() { --graph_.state_->autocastOff; }

Checkpoint::Checkpoint(Graph &g)
    : graph_(g), outer_(g.state_->checkpoint) {
  graph_.state_->checkpoint = ++graph_.state_->checkpoints;
}
Checkpoint::~Checkpoint() { graph_.state_->checkpoint = outer_; }

uint64_t Graph::seed() const { return state_ ? state_->seed : 0; }
bool Graph::finished() const { return state_ && state_->finished; }
mlir::MLIRContext *Graph::context() const { return &state_->ctx; }
mlir::ModuleOp Graph::module() const { return *state_->module; }
mlir::func::FuncOp Graph::forward() const { return state_->func; }

} // namespace step::trace
