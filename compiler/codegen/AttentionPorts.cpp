//===- AttentionPorts.cpp - Where attention kernels read and write --------===//
//
// An attention kernel reads rows of q, k, v (and g and the saved out of
// the gradient) and writes rows of its results. For the op itself those
// are its own contiguous operands; inside an attention fusion
// (step-fuse-attention) they are strided views of the fusion's inputs and
// results, e.g. GPT-2's q as columns 0..C of the packed q/k/v projection
// [B, T, 3C] split into heads: slice b = (batch, head) starts at
// (b / H) * T * 3C + (b % H) * D and its rows are 3C apart. The kernels
// address every row through the port's `at` expression and row stride, so
// the head transposes and slices never run as copies.
//
// Cost: O(rank) per port at compile time; one division and one modulo per
// merged leading dim per slice at run time.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/AttentionKernels.h"

#include "runtime/Tensor.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

/// The role names of an attention op's operands and results.
static std::string operandRole(mlir::Operation *op, unsigned i) {
  mlir::Value v = op->getOperand(i);
  if (i < 3)
    return i == 0 ? "q" : i == 1 ? "k" : "v";
  if (auto g = mlir::dyn_cast<ops::AttentionGradOp>(op)) {
    if (i == 3)
      return "g";
    if (v == g.getValid())
      return "valid";
    return v == g.getOut() ? "out" : "lse";
  }
  return "valid";
}

static std::string resultRole(mlir::Operation *op, unsigned j) {
  if (mlir::isa<ops::AttentionGradOp>(op))
    return j == 0 ? "dq" : j == 1 ? "dk" : "dv";
  return j == 0 ? "o" : "lse";
}

/// Slice b's first row in a view [S..., T, W]: the leading dims (adjacent
/// ones that are contiguous merged) decompose b, outermost first.
static std::string sliceOffset(const ops::StridedView &v) {
  DimList lead;
  for (size_t k = 0; k + 2 < v.sizes.size(); ++k)
    lead.add(v.sizes[k], v.strides[k]);
  const std::vector<int64_t> &dims = lead.dims, &strides = lead.strides;
  std::string expr;
  int64_t inner = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    std::string term = "b";
    if (inner != 1)
      term += " / " + std::to_string(inner);
    if (k != 0)
      term += " % " + std::to_string(dims[k]);
    if (strides[k] != 1)
      term += " * " + std::to_string(strides[k]);
    expr = expr.empty() ? term : term + " + " + expr;
    inner *= dims[k];
  }
  if (v.offset != 0 || expr.empty())
    expr = expr.empty() ? std::to_string(v.offset)
                        : expr + " + " + std::to_string(v.offset);
  return expr;
}

static AttentionPort makePort(std::string role, std::string param,
                              ops::StridedView view, int64_t bufferElems,
                              bool rows) {
  AttentionPort p;
  p.role = std::move(role);
  p.param = std::move(param);
  p.view = std::move(view);
  p.bufferElems = bufferElems;
  if (!rows) {
    int64_t n = 1;
    for (int64_t d : p.view.sizes)
      n *= d;
    if (!(p.view == ops::StridedView::contiguous(p.view.sizes)) ||
        n != bufferElems)
      throw rt::Error("codegen: attention " + p.role + " must be all of " +
                      p.param + ", contiguous");
    p.at = p.param;
    return p;
  }
  size_t r = p.view.sizes.size();
  if (r < 2 || p.view.strides.back() != 1)
    throw rt::Error("codegen: attention " + p.role +
                    " rows are not contiguous in " + p.param);
  p.ld = p.view.strides[r - 2];
  p.at = "(" + p.param + " + (" + sliceOffset(p.view) + "))";
  p.aligned8 = p.view.rowsAligned8();
  return p;
}

AttentionIO attentionIO(mlir::Operation *op) {
  AttentionIO io;
  io.launched = op;
  auto fusion = mlir::dyn_cast<ops::FusionOp>(op);
  if (!fusion) {
    io.attention = op;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      mlir::Value v = op->getOperand(i);
      io.in.push_back(makePort(operandRole(op, i), "in" + std::to_string(i),
                               ops::StridedView::contiguous(shapeOf(v)),
                               numelOf(v), ops::isAttentionRowsOperand(op, i)));
    }
    for (unsigned j = 0; j < op->getNumResults(); ++j) {
      mlir::Value v = op->getResult(j);
      io.out.push_back(makePort(resultRole(op, j), "out" + std::to_string(j),
                                ops::StridedView::contiguous(shapeOf(v)),
                                numelOf(v), resultRole(op, j) != "lse"));
    }
    return io;
  }
  for (mlir::Operation &inner : fusion.getBlock().without_terminator())
    if (ops::isAttentionOp(&inner))
      io.attention = &inner;
  mlir::Operation *a = io.attention;
  if (!a)
    throw rt::Error("codegen: an attention fusion without an attention op");
  for (unsigned i = 0; i < a->getNumOperands(); ++i) {
    auto pv = ops::inputView(a->getOperand(i));
    if (!pv)
      throw rt::Error("codegen: attention fusion operand " + std::to_string(i) +
                      " is not a view of an input");
    io.in.push_back(makePort(operandRole(a, i),
                             "in" + std::to_string(pv->index), pv->view,
                             numelOf(fusion.getInputs()[pv->index]),
                             ops::isAttentionRowsOperand(a, i)));
  }
  for (unsigned j = 0; j < a->getNumResults(); ++j) {
    auto pv = ops::resultView(a->getResult(j));
    if (!pv)
      throw rt::Error("codegen: attention fusion result " + std::to_string(j) +
                      " is not a view of a result");
    io.out.push_back(makePort(
        resultRole(a, j), "out" + std::to_string(pv->index), pv->view,
        numelOf(fusion.getResult(pv->index)), resultRole(a, j) != "lse"));
  }
  return io;
}

std::vector<std::pair<std::string, std::string>> AttentionIO::vars() const {
  std::vector<std::pair<std::string, std::string>> v;
  auto add = [&](const AttentionPort &p, bool result) {
    std::string up;
    if (p.role == "valid")
      up = "VL";
    else if (p.role == "out")
      up = "SO";
    else if (p.role == "lse")
      up = result ? "LSE" : "SL";
    else
      for (char c : p.role)
        up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    v.push_back({up + "_P", p.param});
    v.push_back({up + "_AT", p.at});
    v.push_back({up + "_LD", std::to_string(p.ld)});
  };
  for (const AttentionPort &p : in)
    add(p, false);
  for (const AttentionPort &p : out)
    add(p, true);
  return v;
}

bool AttentionIO::aligned8() const {
  for (const auto *ports : {&in, &out})
    for (const AttentionPort &p : *ports)
      if (p.ld && !p.aligned8)
        return false;
  return true;
}

std::string AttentionIO::comment() const {
  auto list = [](llvm::ArrayRef<int64_t> xs) {
    std::string s;
    for (int64_t x : xs)
      s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  };
  std::string s;
  for (const auto *ports : {&in, &out})
    for (const AttentionPort &p : *ports)
      s += "// step.port " + p.role + " " + p.param +
           " offset=" + std::to_string(p.view.offset) +
           " sizes=" + list(p.view.sizes) + " strides=" + list(p.view.strides) +
           " buffer=" + std::to_string(p.bufferElems) + "\n";
  return s;
}

} // namespace step::codegen::detail
