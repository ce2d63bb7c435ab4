//===- FusionExpr.cpp - Per-element code of a step.fusion body ------------===//
//
// A memoized recursion from a value to the block arguments it reads (the
// algorithm is in FusionExpr.h). Each op becomes one `{ }` block holding
// its ElementwiseSpec body verbatim, so the arithmetic is character for
// character the unfused kernel's; only the operand loads and the result
// store around it differ (locals instead of memory, with the same rounding
// an f16/bf16 store and reload would do). Cost: linear in the number of
// distinct (value, index) pairs a caller asks for.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/FusionExpr.h"

#include "compiler/codegen/Emitters.h"
#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include <cmath>

namespace step::codegen::detail {

namespace ops = mlir::step;

FusionExpr::FusionExpr(ops::FusionOp fusion, PreludeNeeds &needs)
    : block_(&fusion.getBlock()), needs_(needs) {}

//===----------------------------------------------------------------------===//
// Locals
//===----------------------------------------------------------------------===//

std::string FusionExpr::localType(mlir::Value v) {
  Elem e = elemOf(v.getType());
  return isFloat(e) ? "float" : cType(e);
}

std::string FusionExpr::toLocal(mlir::Value v, const std::string &expr) {
  Elem e = elemOf(v.getType());
  return isFloat(e) ? toF(e, expr) : expr;
}

std::string FusionExpr::toStorage(mlir::Value v, const std::string &local) {
  Elem e = elemOf(v.getType());
  return isFloat(e) ? fromF(e, local) : local;
}

void FusionExpr::splitIndex(const std::string &idx, const std::string &row,
                            const std::string &col, int64_t width) {
  split_ = {idx, row, col, width};
}

std::string FusionExpr::storageOf(mlir::Value v,
                                  const std::string &local) const {
  auto it = roundedStorage_.find(local);
  return it != roundedStorage_.end() ? it->second : toStorage(v, local);
}

std::string FusionExpr::fresh(const char *prefix) {
  return prefix + std::to_string(counter_++);
}

void FusionExpr::line(const std::string &text) { code_ += text + "\n"; }

/// A one-element value has one index: 0, whatever the caller's expression.
static std::string canonical(mlir::Value v, const std::string &idx) {
  return numelOf(v) == 1 ? std::string("0") : idx;
}

std::string FusionExpr::takeCode(const std::string &by) {
  std::string s = indent(code_, by);
  code_.clear();
  return s;
}

std::string FusionExpr::takeHoisted(const std::string &by) {
  std::string s = indent(hoistedCode_, by);
  hoistedCode_.clear();
  return s;
}

void FusionExpr::bind(mlir::Value v, const std::string &idx,
                      const std::string &local) {
  memo_[{v.getAsOpaquePointer(), canonical(v, idx)}] = local;
}

void FusionExpr::bindStorage(mlir::Value v, const std::string &idx,
                             const std::string &expr) {
  storage_[{v.getAsOpaquePointer(), canonical(v, idx)}] = expr;
}

void FusionExpr::bindUniform(mlir::Value v, const std::string &local) {
  uniform_[v.getAsOpaquePointer()] = local;
}

std::set<unsigned> FusionExpr::takeArgReads(const std::string &idx) {
  std::set<unsigned> reads;
  if (auto it = argReads_.find(idx); it != argReads_.end()) {
    reads = std::move(it->second);
    argReads_.erase(it);
  }
  return reads;
}

void FusionExpr::resetScope() {
  memo_.clear();
  storage_.clear();
}

//===----------------------------------------------------------------------===//
// The recursion
//===----------------------------------------------------------------------===//

std::string FusionExpr::valueAt(mlir::Value v, const std::string &idxIn) {
  if (auto u = uniform_.find(v.getAsOpaquePointer()); u != uniform_.end())
    return u->second;
  const std::string idx = canonical(v, idxIn);
  std::pair<void *, std::string> key{v.getAsOpaquePointer(), idx};
  if (auto it = memo_.find(key); it != memo_.end())
    return it->second;
  std::string local;
  if (auto it = storage_.find(key); it != storage_.end()) {
    local = fresh("fv");
    needs_.add(elemOf(v.getType()));
    line("const " + localType(v) + " " + local + " = " +
         toLocal(v, it->second) + ";");
  } else if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
             arg && arg.getOwner() == block_ && numelOf(v) == 1) {
    // One element: the same value for every index, loaded once.
    auto h = hoisted_.find(key.first);
    if (h != hoisted_.end())
      return h->second;
    local = fresh("fh");
    needs_.add(elemOf(v.getType()));
    hoistedCode_ += "const " + localType(v) + " " + local + " = " +
                    toLocal(v, "in" + std::to_string(arg.getArgNumber()) +
                                   "[0]") +
                    ";\n";
    hoisted_[key.first] = local;
    return local;
  } else {
    local = compute(v, idx);
  }
  memo_[key] = local;
  return local;
}

/// Removes the common leading blanks of a spec body (written for the
/// elementwise kernel's indentation) and indents it by two.
static std::string reindentBody(const std::string &body) {
  size_t common = std::string::npos;
  for (size_t at = 0; at < body.size();) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos)
      end = body.size();
    size_t first = body.find_first_not_of(' ', at);
    if (first < end)
      common = std::min(common, first - at);
    at = end + 1;
  }
  if (common == std::string::npos)
    common = 0;
  std::string out;
  for (size_t at = 0; at < body.size();) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos)
      end = body.size();
    std::string text = body.substr(at, end - at);
    out += "  " + (text.size() >= common ? text.substr(common) : text) + "\n";
    at = end + 1;
  }
  return out;
}

/// The pads of a float add tree rooted at v that tile it along one dim
/// `dim` (fill +0.0, only that dim padded, windows disjoint and covering
/// it), in window order; empty when v is not such a concatenation.
static std::vector<ops::PadOp> concatPieces(mlir::Value v, int64_t &dim) {
  if (!isFloat(elemOf(v.getType())))
    return {};
  std::vector<ops::PadOp> pads;
  llvm::SmallVector<mlir::Value> work{v};
  while (!work.empty()) {
    mlir::Value w = work.pop_back_val();
    mlir::Operation *d = w.getDefiningOp();
    if (auto add = mlir::dyn_cast_or_null<ops::AddOp>(d)) {
      work.push_back(add.getLhs());
      work.push_back(add.getRhs());
    } else if (auto pad = mlir::dyn_cast_or_null<ops::PadOp>(d)) {
      double fill = pad.getValue().convertToDouble();
      if (fill != 0.0 || std::signbit(fill))
        return {};
      pads.push_back(pad);
    } else {
      return {};
    }
  }
  if (pads.size() < 2)
    return {};
  std::vector<int64_t> out = shapeOf(v);
  dim = -1;
  for (ops::PadOp pad : pads) {
    std::vector<int64_t> in = shapeOf(pad.getOperand());
    for (size_t d = 0; d < out.size(); ++d) {
      if (in[d] == out[d] && pad.getLow()[d] == 0)
        continue;
      if (dim != -1 && dim != static_cast<int64_t>(d))
        return {}; // padded along a second dim
      dim = static_cast<int64_t>(d);
    }
  }
  if (dim == -1)
    return {};
  llvm::sort(pads, [&](ops::PadOp a, ops::PadOp b) {
    return a.getLow()[dim] < b.getLow()[dim];
  });
  int64_t at = 0;
  for (ops::PadOp pad : pads) {
    if (pad.getLow()[dim] != at)
      return {}; // a gap or an overlap
    at += shapeOf(pad.getOperand())[dim];
  }
  if (at != out[dim])
    return {};
  return pads;
}

std::string FusionExpr::concat(mlir::Value v, const std::string &idx) {
  int64_t dim = 0;
  std::vector<ops::PadOp> pads = concatPieces(v, dim);
  if (pads.empty())
    return "";
  std::vector<int64_t> out = shapeOf(v);
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < out.size(); ++d)
    inner *= out[d];
  std::string I = idxType(numelOf(v) + 1);
  std::string t = fresh("ft"), c = fresh("fc"), outer = fresh("fo"),
              r = fresh("fr"), local = fresh("fv");
  // idx = (outer * out[dim] + c) * inner + r.
  line("const " + I + " " + t + " = (" + I + ")(" + idx + ") / " +
       std::to_string(inner) + ";");
  line("const " + I + " " + r + " = (" + I + ")(" + idx + ") - " + t + " * " +
       std::to_string(inner) + ";");
  line("const " + I + " " + c + " = " + t + " % " + std::to_string(out[dim]) +
       ";");
  line("const " + I + " " + outer + " = " + t + " / " +
       std::to_string(out[dim]) + ";");
  line(localType(v) + " " + local + ";");
  needs_.add(elemOf(v.getType()));
  for (auto [k, pad] : llvm::enumerate(pads)) {
    int64_t low = pad.getLow()[dim], size = shapeOf(pad.getOperand())[dim];
    std::string cond = k + 1 == pads.size()
                           ? "} else {"
                           : (k == 0 ? "if (" : "} else if (") + c + " < " +
                                 std::to_string(low + size) + ") {";
    line(cond);
    // The piece's own flat index; its locals live in this branch only
    // (their index names are fresh, so nothing outside asks for them).
    std::string j = fresh("fj");
    line("  const " + I + " " + j + " = (" + outer + " * " +
         std::to_string(size) + " + " + c + " - " + std::to_string(low) +
         ") * " + std::to_string(inner) + " + " + r + ";");
    std::string x = valueAt(pad.getOperand(), j);
    line("  " + local + " = " + x + " + 0.0f; // -0 + +0 = +0, as the adds");
  }
  line("}");
  return local;
}

std::string FusionExpr::compute(mlir::Value v, const std::string &idx) {
  if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
    if (arg.getOwner() != block_)
      throw rt::Error("codegen: a fusion value from another block");
    std::string local = fresh("fv");
    needs_.add(elemOf(v.getType()));
    line("const " + localType(v) + " " + local + " = " +
         toLocal(v, "in" + std::to_string(arg.getArgNumber()) + "[" + idx +
                        "]") +
         ";");
    argReads_[idx].insert(arg.getArgNumber());
    return local;
  }
  mlir::Operation *op = v.getDefiningOp();
  if (op->getBlock() != block_)
    throw rt::Error("codegen: a fusion value from another block");
  if (mlir::isa<ops::AddOp>(op))
    if (std::string local = concat(v, idx); !local.empty())
      return local;

  // Index maps: no arithmetic.
  if (auto iota = mlir::dyn_cast<ops::IotaOp>(op)) {
    // The coordinate along `dimension`, as the unfused iota kernel; exact
    // in every element type the verifier admits for the sizes we build.
    std::vector<int64_t> shape = shapeOf(v);
    auto d = static_cast<size_t>(iota.getDimension());
    int64_t inner = 1;
    for (size_t k = d + 1; k < shape.size(); ++k)
      inner *= shape[k];
    needs_.add(elemOf(v.getType()));
    std::string local = fresh("fv");
    line("const " + localType(v) + " " + local + " = (" + localType(v) +
         ")((long long)(" + idx + ") / " + std::to_string(inner) + " % " +
         std::to_string(shape[d]) + ");");
    return local;
  }
  if (mlir::isa<ops::ReshapeOp, ops::StopGradientOp>(op))
    return valueAt(op->getOperand(0), idx); // same type, same flat index
  if (auto b = mlir::dyn_cast<ops::BroadcastInDimOp>(op)) {
    mlir::Value in = b.getOperand();
    if (numelOf(in) == 1 || uniform_.count(in.getAsOpaquePointer()))
      return valueAt(in, "0");
    std::vector<int64_t> inShape = shapeOf(in), outShape = shapeOf(v);
    std::vector<int64_t> inStrides = stridesOf(inShape);
    std::vector<int64_t> outStrides = stridesOf(outShape);
    std::vector<int64_t> src(outShape.size(), 0);
    auto dims = b.getBroadcastDimensions();
    for (size_t k = 0; k < dims.size(); ++k)
      if (inShape[k] != 1) // a size-1 dim repeats: stride 0
        src[dims[k]] = inStrides[k];
    bool identity = true;
    for (size_t d = 0; d < outShape.size(); ++d)
      identity &= outShape[d] == 1 || src[d] == outStrides[d];
    if (identity) // only size-1 dims added or repeated
      return valueAt(in, idx);
    std::string I = idxType(numelOf(v) + 1);
    std::string o = fresh("fi");
    line(I + " " + o + " = 0;");
    // Decomposes `from` over dims [d0, d1) into o (nothing when every
    // stride there is 0).
    auto part = [&](const std::string &from, size_t d0, size_t d1) {
      std::vector<int64_t> dims(outShape.begin() + d0, outShape.begin() + d1),
          strides(src.begin() + d0, src.begin() + d1);
      if (llvm::all_of(strides, [](int64_t s) { return s == 0; }))
        return;
      std::string t = fresh("ft");
      line("{");
      line("  " + I + " " + t + " = " + from + ";");
      std::string d = decompose(t, o, dims, strides); // 4-blank lines
      for (size_t at = 0; (at = d.find("    ", at)) != std::string::npos;)
        d.replace(at, 4, "  "), at = d.find('\n', at);
      code_ += d;
      line("}");
    };
    // The dims from `inner` on hold the row (splitIndex), or none do.
    size_t inner = outShape.size();
    if (split_.width > 0 && idx == split_.idx) {
      int64_t n = 1;
      while (inner > 0 && n < split_.width)
        n *= outShape[--inner];
      if (n != split_.width)
        inner = outShape.size();
    }
    if (inner < outShape.size()) {
      part(split_.col, inner, outShape.size());
      part(split_.row, 0, inner);
    } else {
      part(idx, 0, outShape.size());
    }
    return valueAt(in, o);
  }

  if (auto pad = mlir::dyn_cast<ops::PadOp>(op)) {
    // The element at out index idx is the operand's at coordinates
    // c - low where every one lies inside the operand, else the padding
    // value; the operand is read at a clamped (valid) index either way.
    mlir::Value in = pad.getOperand();
    std::string fill =
        toLocal(v, typedConstant(elemOf(v.getType()),
                                 pad.getValue().convertToDouble()));
    needs_.add(elemOf(v.getType()));
    if (numelOf(in) == 0) // nothing inside: every element is the fill
      return fill;
    std::vector<int64_t> outDims = shapeOf(v), inDims = shapeOf(in);
    std::vector<int64_t> inDimStrides = stridesOf(inDims);
    // Adjacent unpadded dims merged (GPT-2's [B, T, 3C] pads only C).
    std::vector<int64_t> outShape, inShape, inStrides, low;
    for (size_t d = 0; d < outDims.size(); ++d) {
      bool plain = pad.getLow()[d] == 0 && outDims[d] == inDims[d];
      if (plain && !outShape.empty() && low.back() == 0 &&
          outShape.back() == inShape.back()) {
        outShape.back() *= outDims[d];
        inShape.back() *= inDims[d];
        inStrides.back() = inDimStrides[d];
        continue;
      }
      outShape.push_back(outDims[d]);
      inShape.push_back(inDims[d]);
      inStrides.push_back(inDimStrides[d]);
      low.push_back(pad.getLow()[d]);
    }
    // 32-bit index math where the padded tensor allows it: a 64-bit
    // division by a constant is a long multiply-high sequence, and a pad
    // costs one division and one remainder per dim of every element.
    std::string I = idxType(numelOf(v) + 1);
    std::string t = fresh("ft"), o = fresh("fi"), ok = fresh("fk");
    line(I + " " + o + " = 0;");
    line("bool " + ok + " = true;");
    line("{");
    line("  " + I + " " + t + " = (" + I + ")(" + idx + ");");
    for (size_t d = outShape.size(); d-- > 0;) {
      std::string c = fresh("fc");
      line("  const " + I + " " + c + " = " + t + " % " +
           std::to_string(outShape[d]) + " - " + std::to_string(low[d]) + ";");
      if (d > 0)
        line("  " + t + " /= " + std::to_string(outShape[d]) + ";");
      line("  if (" + c + " < 0 || " + c + " >= " +
           std::to_string(inShape[d]) + ")");
      line("    " + ok + " = false;");
      line("  else");
      line("    " + o + " += " + c + " * " + std::to_string(inStrides[d]) +
           ";");
    }
    line("}");
    std::string inner = valueAt(in, ok + " ? " + o + " : 0");
    std::string local = fresh("fv");
    line("const " + localType(v) + " " + local + " = " + ok + " ? " + inner +
         " : " + fill + ";");
    return local;
  }

  std::optional<ElementwiseSpec> spec = elementwiseSpec(op);
  if (!spec || op->getNumResults() != 1)
    throw rt::Error("codegen: '" + op->getName().getStringRef().str() +
                    "' cannot be computed per element in a fusion");
  if ((!spec->pre.empty() || !spec->uniform.empty()) &&
      !spec->preLoadsUniforms)
    throw rt::Error("codegen: '" + op->getName().getStringRef().str() +
                    "' has uniform operands, which fusions do not support");
  // A uniform operand (dropout's offset) is one element, read at 0.
  std::vector<std::string> args;
  for (auto [k, operand] : llvm::enumerate(op->getOperands()))
    args.push_back(valueAt(operand, k < spec->uniform.size() &&
                                            spec->uniform[k]
                                        ? std::string("0")
                                        : idx));
  needs_.half |= spec->needs.half;
  needs_.bf16 |= spec->needs.bf16;
  needs_.vec |= spec->needs.vec;
  needs_.reduce |= spec->needs.reduce;
  needs_.splitmix |= spec->needs.splitmix;

  // As emitElementwise: with asFloat, float values are float; otherwise
  // (moves) every value is in its storage type. Conversions between a
  // local and the storage type are exact.
  auto valType = [&](Elem e) {
    return spec->asFloat && isFloat(e) ? std::string("float") : cType(e);
  };
  std::string indexVar;
  if (spec->needsIndex) { // outside the scope: `idx` may itself be `i`
    indexVar = fresh("fn");
    line("const long long " + indexVar + " = " + idx + ";");
  }
  Elem outE = elemOf(v.getType());
  needs_.add(outE);
  std::string local = fresh("fv");
  line(localType(v) + " " + local + ";");
  // A 16-bit float result keeps its rounded storage value too, so a store
  // of it converts nothing (storageOf).
  std::string stored;
  if (spec->asFloat && isFloat(outE) && outE != Elem::F32) {
    stored = fresh("fs");
    line(std::string(cType(outE)) + " " + stored + ";");
    roundedStorage_[local] = stored;
  }
  line("{");
  for (unsigned k = 0; k < op->getNumOperands(); ++k) {
    mlir::Value operand = op->getOperand(k);
    Elem e = elemOf(operand.getType());
    std::string a = args[k];
    if (isFloat(e) && !spec->asFloat)
      a = fromF(e, a);
    line("  const " + valType(e) + " a" + std::to_string(k) + " = " + a +
         ";");
  }
  if (spec->needsIndex)
    line("  const long long i = " + indexVar + ";");
  line("  " + valType(outE) + " r0;");
  code_ += reindentBody(spec->body);
  std::string r = "r0";
  if (!stored.empty()) {
    // Rounded to the result's type now, as the unfused store would.
    line("  " + stored + " = " + fromF(outE, r) + ";");
    r = toF(outE, stored);
  } else if (isFloat(outE) && !spec->asFloat) {
    r = toF(outE, r);
  }
  line("  " + local + " = " + r + ";");
  line("}");
  return local;
}

} // namespace step::codegen::detail
