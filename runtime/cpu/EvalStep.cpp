//===- EvalStep.cpp - One plan step on its CPU reference kernel -----------===//
//
// To add an op: give it a kernel in runtime/cpu/ (Kernels.h), a case in
// compiler/interpreter/EvalOp.cpp and an entry in opTable() here.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/EvalStep.h"

#include "runtime/cpu/FusionChunks.h"

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

namespace step::rt::cpu {
namespace {
using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

/// One step being run: its operand values, attributes and result buffers.
struct Ctx {
  const Plan &plan;
  const PlanStep &step;
  std::vector<HostTensor> in;

  const BufferDesc &result(size_t i) const {
    return plan.buffers.at(step.results.at(i));
  }
  const json *find(const char *key) const {
    if (!step.attrs.is_object())
      return nullptr;
    auto it = step.attrs.find(key);
    return it == step.attrs.end() ? nullptr : &*it;
  }
  [[noreturn]] void bad(const char *key, const char *expected) const {
    const json *v = find(key);
    throw Error(step.op + ": attribute '" + key + "' must be " + expected +
                (v ? ", found " + v->dump() : ", but it is missing"));
  }
  const json &need(const char *key, const char *expected) const {
    const json *v = find(key);
    if (!v)
      bad(key, expected);
    return *v;
  }

  int64_t i64(const char *key) const {
    const json &v = need(key, "an integer");
    if (!v.is_number_integer())
      bad(key, "an integer");
    return v.get<int64_t>();
  }
  std::optional<int64_t> optI64(const char *key) const {
    return find(key) ? std::optional<int64_t>(i64(key)) : std::nullopt;
  }
  double f64(const char *key) const {
    const json &v = need(key, "a number");
    if (!v.is_number())
      bad(key, "a number");
    return v.get<double>();
  }
  double f64Or(const char *key, double dflt) const {
    return find(key) ? f64(key) : dflt;
  }
  std::optional<double> optF64(const char *key) const {
    return find(key) ? std::optional<double>(f64(key)) : std::nullopt;
  }
  /// Unit attributes: `true` when set, absent (or false) otherwise.
  bool unit(const char *key) const {
    const json *v = find(key);
    if (v && !v->is_boolean())
      bad(key, "true or absent");
    return v && v->get<bool>();
  }
  std::vector<int64_t> i64s(const char *key) const {
    const json &v = need(key, "an array of integers");
    if (!v.is_array())
      bad(key, "an array of integers");
    std::vector<int64_t> out;
    for (const json &e : v) {
      if (!e.is_number_integer())
        bad(key, "an array of integers");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  /// An enum attribute spelled as a word, one of `words`; returns its index.
  size_t word(const char *key, const std::vector<const char *> &words) const {
    std::string expected = "one of";
    for (const char *w : words)
      expected += std::string(" \"") + w + "\"";
    const json &v = need(key, expected.c_str());
    if (v.is_string())
      for (size_t i = 0; i < words.size(); ++i)
        if (v.get<std::string>() == words[i])
          return i;
    bad(key, expected.c_str());
  }
};

//===----------------------------------------------------------------------===//
// Op table
//===----------------------------------------------------------------------===//

using Results = std::vector<HostTensor>;
using KernelFn = Results (*)(const Ctx &);

struct OpInfo {
  KernelFn fn;
  size_t minOperands, maxOperands;
};

Results one(HostTensor t) {
  Results r;
  r.push_back(std::move(t));
  return r;
}
Results three(AdamResult a) {
  Results r;
  r.push_back(std::move(a.param));
  r.push_back(std::move(a.expAvg));
  r.push_back(std::move(a.expAvgSq));
  return r;
}

Reduction reductionOf(const Ctx &c) {
  static const Reduction kinds[] = {Reduction::Mean, Reduction::Sum,
                                    Reduction::None};
  return kinds[c.word("reduction", {"mean", "sum", "none"})];
}

ReplicaGroups groupsOf(const Ctx &c) {
  return {c.i64("group_size"), c.i64s("replica_groups")};
}
std::string reduceOf(const Ctx &c) {
  static const char *words[] = {"sum", "mean", "max", "min"};
  return words[c.word("reduce", {"sum", "mean", "max", "min"})];
}

AdamHyper adamHyper(const Ctx &c, double defaultEps) {
  AdamHyper h;
  h.beta1 = c.f64Or("beta1", 0.9);
  h.beta2 = c.f64Or("beta2", 0.999);
  h.eps = c.f64Or("eps", defaultEps);
  h.weightDecay = c.f64Or("weight_decay", 0.01);
  return h;
}

template <UnaryOp K> Results unaryFn(const Ctx &c) {
  return one(unary(K, c.in[0]));
}
template <BinaryOp K> Results binaryFn(const Ctx &c) {
  return one(binary(K, c.in[0], c.in[1]));
}
template <ReduceOp K> Results reduceFn(const Ctx &c) {
  return one(reduce(K, c.in[0], c.i64s("dims"), c.unit("keepdim")));
}

const std::map<std::string, OpInfo> &opTable() {
  static const std::map<std::string, OpInfo> table = [] {
    std::map<std::string, OpInfo> t;
    auto add = [&](const char *name, size_t lo, size_t hi, KernelFn fn) {
      t[std::string("step.") + name] = OpInfo{fn, lo, hi};
    };
    // Elementwise.
    add("neg", 1, 1, unaryFn<UnaryOp::Neg>);
    add("exp", 1, 1, unaryFn<UnaryOp::Exp>);
    add("log", 1, 1, unaryFn<UnaryOp::Log>);
    add("tanh", 1, 1, unaryFn<UnaryOp::Tanh>);
    add("sigmoid", 1, 1, unaryFn<UnaryOp::Sigmoid>);
    add("relu", 1, 1, unaryFn<UnaryOp::Relu>);
    add("sqrt", 1, 1, unaryFn<UnaryOp::Sqrt>);
    add("rsqrt", 1, 1, unaryFn<UnaryOp::Rsqrt>);
    add("abs", 1, 1, unaryFn<UnaryOp::Abs>);
    add("erf", 1, 1, unaryFn<UnaryOp::Erf>);
    add("sin", 1, 1, unaryFn<UnaryOp::Sin>);
    add("cos", 1, 1, unaryFn<UnaryOp::Cos>);
    add("gelu", 1, 1, [](const Ctx &c) {
      bool tanh = c.word("approximate", {"none", "tanh"}) == 1;
      return one(unary(tanh ? UnaryOp::GeluTanh : UnaryOp::GeluErf, c.in[0]));
    });
    add("add", 2, 2, binaryFn<BinaryOp::Add>);
    add("sub", 2, 2, binaryFn<BinaryOp::Sub>);
    add("mul", 2, 2, binaryFn<BinaryOp::Mul>);
    add("div", 2, 2, binaryFn<BinaryOp::Div>);
    add("max", 2, 2, binaryFn<BinaryOp::Max>);
    add("min", 2, 2, binaryFn<BinaryOp::Min>);
    add("pow", 2, 2, binaryFn<BinaryOp::Pow>);
    add("gelu_grad", 2, 2, [](const Ctx &c) {
      bool tanh = c.word("approximate", {"none", "tanh"}) == 1;
      return one(binary(tanh ? BinaryOp::GeluGradTanh : BinaryOp::GeluGradErf,
                        c.in[0], c.in[1]));
    });
    add("compare", 2, 2, [](const Ctx &c) {
      static const CompareOp kinds[] = {CompareOp::EQ, CompareOp::NE,
                                        CompareOp::LT, CompareOp::LE,
                                        CompareOp::GT, CompareOp::GE};
      size_t k = c.word("direction", {"eq", "ne", "lt", "le", "gt", "ge"});
      return one(compare(kinds[k], c.in[0], c.in[1]));
    });
    add("select", 3, 3, [](const Ctx &c) {
      return one(select(c.in[0], c.in[1], c.in[2]));
    });
    add("cast", 1, 1, [](const Ctx &c) {
      return one(cast(c.in[0], c.result(0).dtype));
    });
    // Shape.
    add("broadcast_in_dim", 1, 1, [](const Ctx &c) {
      return one(broadcastInDim(c.in[0], c.result(0).shape,
                                c.i64s("broadcast_dimensions")));
    });
    add("reshape", 1, 1, [](const Ctx &c) {
      return one(reshape(c.in[0], c.result(0).shape));
    });
    add("transpose", 1, 1, [](const Ctx &c) {
      return one(transpose(c.in[0], c.i64s("permutation")));
    });
    add("slice", 1, 1, [](const Ctx &c) {
      return one(slice(c.in[0], c.i64s("start"), c.i64s("limit"),
                       c.i64s("strides")));
    });
    add("concat", 1, SIZE_MAX, [](const Ctx &c) {
      return one(concat(c.in, c.i64("dimension")));
    });
    add("pad", 1, 1, [](const Ctx &c) {
      return one(pad(c.in[0], c.i64s("low"), c.i64s("high"), c.f64("value")));
    });
    add("iota", 0, 0, [](const Ctx &c) {
      return one(iota(c.result(0).dtype, c.result(0).shape,
                      c.i64("dimension")));
    });
    add("reduce_sum", 1, 1, reduceFn<ReduceOp::Sum>);
    add("reduce_max", 1, 1, reduceFn<ReduceOp::Max>);
    add("reduce_mean", 1, 1, reduceFn<ReduceOp::Mean>);
    add("matmul", 2, 2, [](const Ctx &c) {
      return one(matmul(c.in[0], c.in[1], c.unit("transpose_a"),
                        c.unit("transpose_b")));
    });
    // Neural-network ops.
    add("softmax", 1, 1, [](const Ctx &c) {
      return one(softmax(c.in[0], c.i64("dimension")));
    });
    add("log_softmax", 1, 1, [](const Ctx &c) {
      return one(logSoftmax(c.in[0], c.i64("dimension")));
    });
    add("layer_norm", 3, 3, [](const Ctx &c) {
      return one(layerNorm(c.in[0], c.in[1], c.in[2], c.f64("epsilon")));
    });
    add("embedding", 2, 2, [](const Ctx &c) {
      return one(embedding(c.in[0], c.in[1]));
    });
    add("cross_entropy", 2, 2, [](const Ctx &c) {
      return one(crossEntropy(c.in[0], c.in[1], reductionOf(c),
                              c.optI64("ignore_index").value_or(-100)));
    });
    add("dropout", 1, 2, [](const Ctx &c) {
      return one(dropout(c.in[0], c.f64("p"),
                         static_cast<uint64_t>(c.i64("seed")),
                         dropoutOffset(c.in)));
    });
    add("attention", 3, 4, [](const Ctx &c) {
      return one(attention(c.in[0], c.in[1], c.in[2], c.unit("causal"),
                           c.optF64("scale"),
                           attentionOperands("attention", c.in, 3).valid));
    });
    add("attention_lse", 3, 4, [](const Ctx &c) {
      HostTensor lse;
      Results out;
      out.push_back(attention(
          c.in[0], c.in[1], c.in[2], c.unit("causal"), c.optF64("scale"),
          attentionOperands("attention_lse", c.in, 3).valid, &lse));
      out.push_back(std::move(lse));
      return out;
    });
    add("attention_grad", 4, 7, [](const Ctx &c) {
      AttentionOperands x = attentionOperands("attention_grad", c.in, 4);
      AttentionGrads g =
          attentionGrad(c.in[0], c.in[1], c.in[2], c.in[3], c.unit("causal"),
                        c.optF64("scale"), x.valid, x.out, x.lse);
      Results out;
      out.push_back(std::move(g.dq));
      out.push_back(std::move(g.dk));
      out.push_back(std::move(g.dv));
      return out;
    });
    // Training.
    add("stop_gradient", 1, 1, [](const Ctx &c) { return one(c.in[0]); });
    // Memory placement: the executor stores the result in the host or
    // device arena by its buffer's kind; the value is the operand.
    add("offload", 1, 1, [](const Ctx &c) { return one(c.in[0]); });
    add("reload", 1, 1, [](const Ctx &c) { return one(c.in[0]); });
    add("embedding_grad", 2, 2, [](const Ctx &c) {
      return one(embeddingGrad(c.in[0], c.in[1], c.i64("num_embeddings")));
    });
    add("cross_entropy_grad", 3, 3, [](const Ctx &c) {
      return one(crossEntropyGrad(c.in[0], c.in[1], c.in[2], reductionOf(c),
                                  c.optI64("ignore_index").value_or(-100)));
    });
    add("check_finite", 1, SIZE_MAX, [](const Ctx &c) {
      return one(checkFinite(c.in));
    });
    add("sgd_update", 4, 5, [](const Ctx &c) {
      SgdHyper h;
      h.momentum = c.f64Or("momentum", 0.0);
      h.dampening = c.f64Or("dampening", 0.0);
      h.weightDecay = c.f64Or("weight_decay", 0.0);
      h.nesterov = c.unit("nesterov");
      // Operands: param, grad, step, lr[, momentum_buffer].
      const HostTensor *buf = c.in.size() > 4 ? &c.in[4] : nullptr;
      SgdResult r = sgdUpdate(c.in[0], c.in[1], c.in[2], c.in[3], buf, h);
      Results out = one(std::move(r.param));
      if (r.momentumBuffer)
        out.push_back(std::move(*r.momentumBuffer));
      return out;
    });
    add("adamw_update", 6, 6, [](const Ctx &c) {
      return three(adamwUpdate(c.in[0], c.in[1], c.in[2], c.in[3], c.in[4],
                               c.in[5], adamHyper(c, 1e-8)));
    });
    add("lamb_update", 6, 6, [](const Ctx &c) {
      return three(lambUpdate(c.in[0], c.in[1], c.in[2], c.in[3], c.in[4],
                              c.in[5], adamHyper(c, 1e-6)));
    });
    // Collectives, on the communicator of this thread (runtime/Comm.h).
    add("all_reduce", 1, 1, [](const Ctx &c) {
      return one(allReduce(c.in[0], reduceOf(c), groupsOf(c)));
    });
    add("reduce_scatter", 1, 1, [](const Ctx &c) {
      return one(reduceScatter(c.in[0], reduceOf(c), groupsOf(c)));
    });
    add("all_gather", 1, 1, [](const Ctx &c) {
      return one(allGather(c.in[0], groupsOf(c)));
    });
    add("local_shard", 1, 1, [](const Ctx &c) {
      return one(localShard(c.in[0], groupsOf(c)));
    });
    return t;
  }();
  return table;
}


} // namespace

/// A fusion on the CPU: its body's steps in order on the same kernels as
/// unfused ops, values held in temporaries, each freed after its last use
/// (a loop fusion chunk by chunk, FusionChunks.h).
static std::vector<HostTensor>
runFusionBody(const PlanStep &step, std::vector<HostTensor> operands,
              const FusedOpObserver *inside) {
  const Plan &body = *step.body;
  // A loop of elementwise ops runs chunk by chunk, unless an observer
  // watches each op's whole operands.
  if (!inside)
    if (auto chunked = runFusionInChunks(body, operands))
      return std::move(*chunked);
  if (operands.size() != body.arguments.size())
    throw Error("step.fusion: " + std::to_string(operands.size()) +
                " operands for a body of " +
                std::to_string(body.arguments.size()) + " arguments");
  std::vector<HostTensor> values(body.buffers.size());
  std::vector<int64_t> uses(body.buffers.size(), 0);
  for (const PlanStep &s : body.steps)
    for (int64_t id : s.operands)
      ++uses[id];
  for (int64_t id : body.results)
    ++uses[id];
  for (size_t i = 0; i < operands.size(); ++i)
    values[body.arguments[i]] = std::move(operands[i]);
  for (size_t k = 0; k < body.steps.size(); ++k) {
    const PlanStep &s = body.steps[k];
    std::vector<HostTensor> in;
    for (int64_t id : s.operands)
      in.push_back(--uses[id] == 0 ? std::move(values[id]) : values[id]);
    // The observer sees the operands: a copy only when there is one.
    std::vector<HostTensor> seen = inside ? in : std::vector<HostTensor>();
    std::vector<HostTensor> out = evalStep(body, s, std::move(in));
    if (out.size() != s.results.size())
      throw Error("step.fusion: " + s.op + " gave " +
                  std::to_string(out.size()) + " results for " +
                  std::to_string(s.results.size()) + " buffers");
    for (size_t r = 0; r < out.size(); ++r) {
      const BufferDesc &d = body.buffers[s.results[r]];
      if (out[r].dtype() != d.dtype || out[r].shape() != d.shape)
        throw Error("step.fusion: " + s.op + " gave " +
                    dtypeName(out[r].dtype()) + " " +
                    shapeToString(out[r].shape()) + " for the body buffer " +
                    d.name + " of " + dtypeName(d.dtype) + " " +
                    shapeToString(d.shape));
    }
    if (inside)
      (*inside)(body, k, seen, out);
    for (size_t r = 0; r < out.size(); ++r)
      values[s.results[r]] = std::move(out[r]);
  }
  std::vector<HostTensor> results;
  for (int64_t id : body.results)
    results.push_back(--uses[id] == 0 ? std::move(values[id]) : values[id]);
  return results;
}

std::vector<HostTensor> evalStep(const Plan &plan, const PlanStep &step,
                                 std::vector<HostTensor> operands,
                                 const FusedOpObserver *inside) {
  if (step.op == "step.fusion") {
    if (!step.body)
      throw Error("step.fusion: the step has no body");
    return runFusionBody(step, std::move(operands), inside);
  }
  const auto &table = opTable();
  auto op = table.find(step.op);
  if (op == table.end())
    throw Error("unknown op '" + step.op +
                "': the CPU backend has no kernel for it");
  const OpInfo &info = op->second;
  if (operands.size() < info.minOperands || operands.size() > info.maxOperands)
    throw Error(step.op + ": " + std::to_string(operands.size()) +
                " operands is not a valid count");
  if (step.results.empty())
    throw Error(step.op + ": the step has no result buffers");
  Ctx ctx{plan, step, std::move(operands)};
  return info.fn(ctx);
}

std::vector<std::string> supportedOps() {
  std::vector<std::string> names;
  for (const auto &entry : opTable())
    names.push_back(entry.first);
  names.push_back("step.fusion");
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace step::rt::cpu
