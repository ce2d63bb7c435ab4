//===- MatmulEpilogue.cpp - A matmul fusion as one cuBLASLt call ----------===//
//
// Follows the data flow of the body from its one step.matmul: each value
// must have exactly one user (or be a body result), and the chain of users
// must be at most one bias add (its other operand a broadcast_in_dim of a
// rank-1 argument along the last dim) followed by at most one relu or
// tanh-GELU, whose input may also be a result (GELU_AUX); or the product's
// one user a tanh gelu_grad of an argument, whose result may also feed one
// reduce_sum over the leading dims (DGELU, DGELU_BGRAD); or a product of two
// matrices that is a result as it is, beside one reduce_sum of an operand
// over the contraction dim (BGRADA, BGRADB). Every body step
// must be on that chain and every result accounted for, so a body with a
// side computation is refused rather than half run. Built into
// step_runtime on every machine (runtime/CMakeLists.txt), CUDA or not.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/MatmulEpilogue.h"

#include <numeric>

namespace step::rt::cuda {

const char *matmulEpilogueName(MatmulEpilogue e) {
  switch (e) {
  case MatmulEpilogue::None: return "none";
  case MatmulEpilogue::Bias: return "bias";
  case MatmulEpilogue::Relu: return "relu";
  case MatmulEpilogue::ReluBias: return "relu_bias";
  case MatmulEpilogue::Gelu: return "gelu";
  case MatmulEpilogue::GeluBias: return "gelu_bias";
  case MatmulEpilogue::GeluAux:
    return "gelu_aux";
  case MatmulEpilogue::GeluAuxBias:
    return "gelu_aux_bias";
  case MatmulEpilogue::DGelu:
    return "dgelu";
  case MatmulEpilogue::DGeluBgrad:
    return "dgelu_bgrad";
  case MatmulEpilogue::BgradA: return "bgrada";
  case MatmulEpilogue::BgradB: return "bgradb";
  }
  return "none";
}

bool isMatmulFusion(const PlanStep &step) {
  return step.op == "step.fusion" && step.attrs.is_object() &&
         step.attrs.contains("kind") && step.attrs["kind"] == "matmul";
}

FusedMatmul readMatmulFusion(const PlanStep &fusion, const std::string &where) {
  auto fail = [&](const std::string &why) {
    return Error(where + ": matmul fusion: " + why);
  };
  if (fusion.op != "step.fusion" || !fusion.body)
    throw fail("'" + fusion.op + "' is not a step.fusion with a body");
  if (!isMatmulFusion(fusion))
    throw fail("the step's kind is not \"matmul\"");
  const Plan &body = *fusion.body;
  auto nbuf = static_cast<int64_t>(body.buffers.size());
  if (body.results.empty() || body.results.size() > 2 ||
      fusion.results.size() != body.results.size())
    throw fail("cuBLASLt gives one result (two with an aux output or a "
               "bias gradient), the fusion has " +
               std::to_string(body.results.size()) + " (its step " +
               std::to_string(fusion.results.size()) + ")");

  // Users of each body buffer (one entry per operand slot) and its producer.
  std::vector<std::vector<size_t>> users(body.buffers.size());
  std::vector<int64_t> producer(body.buffers.size(), -1);
  auto checkId = [&](int64_t id) {
    if (id < 0 || id >= nbuf)
      throw fail("body buffer id " + std::to_string(id) + " is out of range");
  };
  for (size_t k = 0; k < body.steps.size(); ++k) {
    for (int64_t id : body.steps[k].operands) {
      checkId(id);
      users[id].push_back(k);
    }
    for (int64_t id : body.steps[k].results) {
      checkId(id);
      producer[id] = static_cast<int64_t>(k);
    }
  }
  for (int64_t id : body.results)
    checkId(id);
  auto resultIndex = [&](int64_t id) {
    for (size_t i = 0; i < body.results.size(); ++i)
      if (body.results[i] == id)
        return static_cast<int>(i);
    return -1;
  };
  auto stringAttr = [](const PlanStep &s, const char *name) {
    if (s.attrs.is_object() && s.attrs.contains(name) &&
        s.attrs[name].is_string())
      return s.attrs[name].get<std::string>();
    return std::string();
  };
  auto intsAttr = [&](const PlanStep &s, const char *name) {
    std::vector<int64_t> v;
    if (s.attrs.is_object() && s.attrs.contains(name)) {
      try {
        v = s.attrs[name].get<std::vector<int64_t>>();
      } catch (const nlohmann::json::exception &) {
        throw fail(std::string(name) + " is not a list of integers");
      }
    }
    return v;
  };
  auto argIndex = [&](int64_t id) {
    for (size_t i = 0; i < body.arguments.size(); ++i)
      if (body.arguments[i] == id)
        return static_cast<int>(i);
    return -1;
  };
  auto describe = [&](size_t k) {
    return "body step " + std::to_string(k) + " (" + body.steps[k].op + ")";
  };

  FusedMatmul f;
  int64_t matmulAt = -1;
  for (size_t k = 0; k < body.steps.size(); ++k)
    if (body.steps[k].op == "step.matmul") {
      if (matmulAt >= 0)
        throw fail("the body has more than one step.matmul");
      matmulAt = static_cast<int64_t>(k);
    }
  if (matmulAt < 0)
    throw fail("the body has no step.matmul");
  const PlanStep &mm = body.steps[matmulAt];
  if (mm.operands.size() != 2 || mm.results.size() != 1)
    throw fail("step.matmul must take 2 operands and give 1 result");
  f.matmul = &mm;
  auto matmulFlag = [&](const char *flag) {
    return mm.attrs.is_object() && mm.attrs.contains(flag) &&
           mm.attrs[flag].is_boolean() && mm.attrs[flag].get<bool>();
  };
  f.lhs = argIndex(mm.operands[0]);
  f.rhs = argIndex(mm.operands[1]);
  if (f.lhs < 0 || f.rhs < 0)
    throw fail("the matmul's operands must be fusion operands");
  const BufferDesc &product = body.buffers[mm.results[0]];
  if (product.shape.size() < 2)
    throw fail("the matmul result has rank < 2");

  std::vector<bool> onChain(body.steps.size(), false);
  onChain[matmulAt] = true;
  // BGRADA/BGRADB: a sum of an operand over the contraction dim, the bias
  // gradient (step-fuse-bias-grad); the product is then a result as it is.
  int64_t operandSum = -1;
  for (size_t k = 0; k < body.steps.size(); ++k)
    if (body.steps[k].op == "step.reduce_sum" &&
        body.steps[k].operands.size() == 1 &&
        (body.steps[k].operands[0] == mm.operands[0] ||
         body.steps[k].operands[0] == mm.operands[1])) {
      if (operandSum >= 0)
        throw fail("a second sum of a matmul operand (" + describe(k) +
                   "); cuBLASLt computes one bias gradient");
      operandSum = static_cast<int64_t>(k);
    }
  if (operandSum >= 0 && mm.operands[0] == mm.operands[1])
    throw fail("the matmul reads one operand twice; a sum of it could be "
               "either side's bias gradient");
  if (operandSum >= 0) {
    const PlanStep &s = body.steps[operandSum];
    bool rhs = s.operands[0] == mm.operands[1];
    const BufferDesc &in = body.buffers[s.operands[0]];
    bool transposed = matmulFlag(rhs ? "transpose_b" : "transpose_a");
    // cuBLASLt has BGRADA kernels for an untransposed A (our rhs) only and
    // BGRADB ones for a transposed B (our lhs) only; step-fuse-bias-grad
    // forms no other.
    if (rhs == transposed)
      throw fail(describe(operandSum) + " sums the " +
                 (rhs ? "transposed rhs" : "untransposed lhs") +
                 " of the matmul: cuBLASLt's " +
                 (rhs ? "BGRADA takes an untransposed rhs"
                      : "BGRADB takes a transposed lhs") +
                 " only (compile without --bgrad-epilogues)");
    // The contraction dim of the summed operand: the rhs [k, n], the
    // transposed lhs [k, m].
    const int64_t kDim = 0;
    const BufferDesc *g =
        s.results.size() == 1 ? &body.buffers[s.results[0]] : nullptr;
    if (in.shape.size() != 2 || product.shape.size() != 2 || !g ||
        intsAttr(s, "dims") != std::vector<int64_t>{kDim} ||
        g->shape != Shape{in.shape[1 - kDim]} || g->dtype != product.dtype ||
        !users[s.results[0]].empty() || resultIndex(s.results[0]) < 0)
      throw fail(describe(operandSum) + " sums a matmul operand but is not "
                 "a bias gradient: cuBLASLt's BGRADA/BGRADB sum a matrix "
                 "operand over the contraction dim (" + std::to_string(kDim) +
                 ") into a result vector of the product's type, found " +
                 typeStr(in.dtype, in.shape) + " -> " +
                 (g ? typeStr(g->dtype, g->shape)
                    : std::string("no single result")));
    // Edge shapes NVIDIA's nvmath-python tests find without kernels.
    if (in.shape[kDim] == 1)
      throw fail(describe(operandSum) + " is a bias gradient over a "
                 "contraction of one (K = 1): cuBLASLt before 12.3.4 has no "
                 "BGRADA/BGRADB kernels for it (compile without "
                 "--bgrad-epilogues)");
    if (!rhs && product.shape[0] == 1)
      throw fail(describe(operandSum) + " is a BGRADB bias gradient of a "
                 "one-row product: cuBLASLt has no kernels for it (compile "
                 "without --bgrad-epilogues)");
    onChain[operandSum] = true;
    f.biasGrad = resultIndex(s.results[0]);
    f.epilogue = rhs ? MatmulEpilogue::BgradA : MatmulEpilogue::BgradB;
  }
  bool bias = false, relu = false, gelu = false, dgelu = false;
  int64_t cur = mm.results[0];
  auto sameType = [&](size_t k) {
    if (body.steps[k].results.size() != 1)
      throw fail(describe(k) + " must give one result");
    const BufferDesc &out = body.buffers[body.steps[k].results[0]];
    if (out.dtype != product.dtype || out.shape != product.shape)
      throw fail(describe(k) + " changes the type of the product");
  };
  auto requireTanh = [&](const PlanStep &s) {
    std::string approx = stringAttr(s, "approximate");
    if (approx != "tanh")
      throw fail(s.op.substr(5) + " with approximate = \"" +
                 (approx.empty() ? std::string("none") : approx) +
                 "\"; cuBLASLt's GELU epilogues are the tanh approximation");
  };
  while (resultIndex(cur) < 0 || users[cur].size() == 1) {
    // The one user that continues the chain: the only one, or (GELU_AUX)
    // the gelu reading a value that is also a result.
    if (users[cur].size() != 1)
      throw fail("body buffer '" + body.buffers[cur].name + "' has " +
                 std::to_string(users[cur].size()) +
                 " uses; an intermediate value needs exactly one");
    size_t k = users[cur][0];
    const PlanStep &s = body.steps[k];
    if (dgelu)
      break; // the bias gradient's reduce_sum, read below
    if (resultIndex(cur) >= 0 && s.op != "step.gelu")
      throw fail("'" + body.buffers[cur].name + "' is a result and read by " +
                 describe(k) + "; only GELU's input may be both");
    sameType(k);
    if (s.op == "step.add" && s.operands.size() == 2) {
      if (bias)
        throw fail("a second add (" + describe(k) + ")");
      if (relu || gelu)
        throw fail("the bias is added after the activation; cuBLASLt adds "
                   "it before");
      int64_t other = s.operands[0] == cur ? s.operands[1] : s.operands[0];
      int64_t bk = producer[other];
      if (bk < 0 || body.steps[bk].op != "step.broadcast_in_dim")
        throw fail("the add's other operand is not a broadcast_in_dim "
                   "(only a bias vector can be fused)");
      const PlanStep &bc = body.steps[bk];
      if (bc.operands.size() != 1 || users[other].size() != 1)
        throw fail("the bias broadcast must have one operand and one use");
      const BufferDesc &b = body.buffers[bc.operands[0]];
      int64_t rank = static_cast<int64_t>(product.shape.size());
      if (b.shape.size() != 1 || b.shape[0] != product.shape.back() ||
          intsAttr(bc, "broadcast_dimensions") !=
              std::vector<int64_t>{rank - 1})
        throw fail("the bias must be a rank-1 tensor of the last dim (" +
                   std::to_string(product.shape.back()) +
                   ") broadcast along that dim, found " +
                   shapeToString(b.shape));
      if (b.dtype != product.dtype)
        throw fail(std::string("the bias is ") + dtypeName(b.dtype) +
                   ", the product " + dtypeName(product.dtype));
      f.bias = argIndex(bc.operands[0]);
      if (f.bias < 0)
        throw fail("the bias must be a fusion operand");
      onChain[bk] = true;
      bias = true;
    } else if ((s.op == "step.relu" || s.op == "step.gelu") &&
               s.operands.size() == 1) {
      if (relu || gelu)
        throw fail("a second activation (" + describe(k) + ")");
      if (s.op == "step.gelu") {
        requireTanh(s);
        gelu = true;
        f.auxResult = resultIndex(cur); // GELU_AUX: its input is stored too
      } else {
        relu = true;
      }
    } else if (s.op == "step.gelu_grad" && s.operands.size() == 2 &&
               cur == mm.results[0] && s.operands[0] == cur) {
      requireTanh(s);
      const BufferDesc &lhs = body.buffers[mm.operands[0]];
      bool lhsT = matmulFlag("transpose_a");
      if (lhs.shape.size() >= 2 &&
          lhs.shape[lhs.shape.size() - (lhsT ? 2 : 1)] == 1)
        throw fail(describe(k) + " would be DGELU over a contraction of one "
                   "(K = 1): cuBLASLt has no kernels for it (compile "
                   "without --gelu-epilogues)");
      f.aux = argIndex(s.operands[1]);
      const BufferDesc &x = body.buffers[s.operands[1]];
      if (f.aux < 0 || x.dtype != product.dtype || x.shape != product.shape)
        throw fail(std::string("gelu_grad's input must be a fusion operand "
                               "of the product's type, found ") +
                   typeStr(x.dtype, x.shape));
      dgelu = true;
    } else {
      throw fail(describe(k) + " cannot be a cuBLASLt epilogue");
    }
    onChain[k] = true;
    cur = s.results[0];
  }
  f.result = resultIndex(cur);
  if (f.result < 0)
    throw fail("the chain ends in '" + body.buffers[cur].name +
               "', which is not a result");
  if (operandSum >= 0 && cur != mm.results[0])
    throw fail("cuBLASLt's BGRADA/BGRADB leave the product as it is, but "
               "the body continues it into '" + body.buffers[cur].name + "'");
  if (dgelu && !users[cur].empty()) {
    // DGELU_BGRAD: the gradient's one other reader sums it over the rows.
    size_t k = users[cur][0];
    const PlanStep &s = body.steps[k];
    std::vector<int64_t> leading(product.shape.size() - 1);
    std::iota(leading.begin(), leading.end(), int64_t(0));
    auto isBiasGradient = [&] {
      if (users[cur].size() != 1 || s.op != "step.reduce_sum" ||
          s.results.size() != 1 || intsAttr(s, "dims") != leading)
        return false;
      const BufferDesc &g = body.buffers[s.results[0]];
      return g.shape == Shape{product.shape.back()} &&
             g.dtype == product.dtype && users[s.results[0]].empty() &&
             resultIndex(s.results[0]) >= 0;
    };
    if (!isBiasGradient())
      throw fail("the gradient's other reader, " + describe(k) +
                 ", is not a reduce_sum over every dim but the last into a "
                 "result of the product's element type (the bias "
                 "gradient)");
    f.biasGrad = resultIndex(s.results[0]);
    onChain[k] = true;
  } else if (!users[cur].empty()) {
    throw fail("the result '" + body.buffers[cur].name +
               "' is also used inside the body");
  }
  for (size_t k = 0; k < body.steps.size(); ++k)
    if (!onChain[k])
      throw fail(describe(k) + " does not feed the result through the "
                 "epilogue chain");
  size_t accounted = 1 + (f.auxResult >= 0) + (f.biasGrad >= 0);
  if (accounted != body.results.size())
    throw fail("a result is not the chain's end, GELU's input or the bias "
               "gradient");

  if (operandSum >= 0)
    return f; // BgradA or BgradB, set above
  if (dgelu)
    f.epilogue =
        f.biasGrad >= 0 ? MatmulEpilogue::DGeluBgrad : MatmulEpilogue::DGelu;
  else if (relu)
    f.epilogue = bias ? MatmulEpilogue::ReluBias : MatmulEpilogue::Relu;
  else if (gelu && f.auxResult >= 0)
    f.epilogue = bias ? MatmulEpilogue::GeluAuxBias : MatmulEpilogue::GeluAux;
  else if (gelu)
    f.epilogue = bias ? MatmulEpilogue::GeluBias : MatmulEpilogue::Gelu;
  else
    f.epilogue = bias ? MatmulEpilogue::Bias : MatmulEpilogue::None;
  return f;
}

} // namespace step::rt::cuda
