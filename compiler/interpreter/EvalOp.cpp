//===- EvalOp.cpp - Maps each step op to its CPU reference kernel ---------===//
//
// The single place that knows which runtime kernel implements which op. To
// add an op: give it a kernel in runtime/cpu/ and a case here (see
// docs/adding-an-op.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/EvalOp.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "runtime/cpu/Kernels.h"

#include "llvm/ADT/TypeSwitch.h"

namespace step {
using namespace mlir;

namespace cpu = rt::cpu;
namespace ops = mlir::step;

namespace {
using Operands = const std::vector<rt::HostTensor> &;

std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

rt::DType resultDType(Operation &op) {
  Type element = getElementTypeOrSelf(op.getResult(0).getType());
  if (auto dtype = toDType(element))
    return *dtype;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << element;
  throw rt::Error(op.getName().getStringRef().str() +
                  ": unsupported element type " + s);
}

/// Result shape of a broadcast: static dims from the type, dynamic dims from
/// the operand dim mapped onto them (the verifier guarantees one exists).
rt::Shape broadcastShape(ops::BroadcastInDimOp op, const rt::HostTensor &x) {
  rt::Shape shape(op.getType().getShape());
  for (auto [k, d] : llvm::enumerate(op.getBroadcastDimensions()))
    if (ShapedType::isDynamic(shape[d]))
      shape[d] = x.shape()[k];
  for (auto [d, size] : llvm::enumerate(shape))
    if (ShapedType::isDynamic(size))
      throw rt::Error("result dim " + std::to_string(d) +
                      " is dynamic and no operand dim gives its size; pad "
                      "the model's symbolic dims first (step-pad-dynamic)");
  return shape;
}

/// Reshape target: a dynamic dim becomes -1, derived by the kernel.
rt::Shape reshapeTarget(ops::ReshapeOp op) {
  rt::Shape shape(op.getType().getShape());
  for (int64_t &d : shape)
    if (ShapedType::isDynamic(d))
      d = -1;
  return shape;
}

cpu::CompareOp compareKind(ops::ComparisonDirection dir) {
  switch (dir) {
  case ops::ComparisonDirection::EQ: return cpu::CompareOp::EQ;
  case ops::ComparisonDirection::NE: return cpu::CompareOp::NE;
  case ops::ComparisonDirection::LT: return cpu::CompareOp::LT;
  case ops::ComparisonDirection::LE: return cpu::CompareOp::LE;
  case ops::ComparisonDirection::GT: return cpu::CompareOp::GT;
  case ops::ComparisonDirection::GE: return cpu::CompareOp::GE;
  }
  llvm_unreachable("unknown comparison direction");
}

cpu::Reduction lossReduction(ops::LossReduction r) {
  switch (r) {
  case ops::LossReduction::None: return cpu::Reduction::None;
  case ops::LossReduction::Mean: return cpu::Reduction::Mean;
  case ops::LossReduction::Sum: return cpu::Reduction::Sum;
  }
  llvm_unreachable("unknown loss reduction");
}

std::optional<cpu::UnaryOp> unaryKindOf(Operation &op) {
  return llvm::TypeSwitch<Operation *, std::optional<cpu::UnaryOp>>(&op)
      .Case([](ops::NegOp) { return cpu::UnaryOp::Neg; })
      .Case([](ops::ExpOp) { return cpu::UnaryOp::Exp; })
      .Case([](ops::LogOp) { return cpu::UnaryOp::Log; })
      .Case([](ops::TanhOp) { return cpu::UnaryOp::Tanh; })
      .Case([](ops::SigmoidOp) { return cpu::UnaryOp::Sigmoid; })
      .Case([](ops::ReluOp) { return cpu::UnaryOp::Relu; })
      .Case([](ops::SqrtOp) { return cpu::UnaryOp::Sqrt; })
      .Case([](ops::RsqrtOp) { return cpu::UnaryOp::Rsqrt; })
      .Case([](ops::AbsOp) { return cpu::UnaryOp::Abs; })
      .Case([](ops::ErfOp) { return cpu::UnaryOp::Erf; })
      .Case([](ops::SinOp) { return cpu::UnaryOp::Sin; })
      .Case([](ops::CosOp) { return cpu::UnaryOp::Cos; })
      .Case([](ops::GeluOp g) {
        return g.getApproximate() == ops::GeluApproximation::Tanh
                   ? cpu::UnaryOp::GeluTanh
                   : cpu::UnaryOp::GeluErf;
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<cpu::BinaryOp> binaryKindOf(Operation &op) {
  return llvm::TypeSwitch<Operation *, std::optional<cpu::BinaryOp>>(&op)
      .Case([](ops::AddOp) { return cpu::BinaryOp::Add; })
      .Case([](ops::SubOp) { return cpu::BinaryOp::Sub; })
      .Case([](ops::MulOp) { return cpu::BinaryOp::Mul; })
      .Case([](ops::DivOp) { return cpu::BinaryOp::Div; })
      .Case([](ops::MaxOp) { return cpu::BinaryOp::Max; })
      .Case([](ops::MinOp) { return cpu::BinaryOp::Min; })
      .Case([](ops::PowOp) { return cpu::BinaryOp::Pow; })
      .Case([](ops::GeluGradOp g) {
        return g.getApproximate() == ops::GeluApproximation::Tanh
                   ? cpu::BinaryOp::GeluGradTanh
                   : cpu::BinaryOp::GeluGradErf;
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<cpu::ReduceOp> reduceKindOf(Operation &op) {
  return llvm::TypeSwitch<Operation *, std::optional<cpu::ReduceOp>>(&op)
      .Case([](ops::ReduceSumOp) { return cpu::ReduceOp::Sum; })
      .Case([](ops::ReduceMaxOp) { return cpu::ReduceOp::Max; })
      .Case([](ops::ReduceMeanOp) { return cpu::ReduceOp::Mean; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The scale of step.attention or step.attention_grad, if given.
template <typename AttentionLikeOp>
std::optional<double> scaleOf(AttentionLikeOp op) {
  if (auto s = op.getScale())
    return s->convertToDouble();
  return std::nullopt;
}

/// Ops with a kernel of their own (not one of an op family).
rt::HostTensor evalSingle(Operation &op, Operands in) {
  using R = rt::HostTensor;
  return llvm::TypeSwitch<Operation *, R>(&op)
      .Case([&](ops::ConstantOp c) {
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense)
          throw rt::Error("step.constant: only dense elements are supported");
        return fromElementsAttr(dense);
      })
      .Case([&](ops::CompareOp c) {
        return cpu::compare(compareKind(c.getDirection()), in[0], in[1]);
      })
      .Case([&](ops::SelectOp) { return cpu::select(in[0], in[1], in[2]); })
      .Case([&](ops::CastOp) { return cpu::cast(in[0], resultDType(op)); })
      .Case([&](ops::BroadcastInDimOp b) {
        return cpu::broadcastInDim(in[0], broadcastShape(b, in[0]),
                                   toVector(b.getBroadcastDimensions()));
      })
      .Case([&](ops::ReshapeOp r) {
        return cpu::reshape(in[0], reshapeTarget(r));
      })
      .Case([&](ops::TransposeOp t) {
        return cpu::transpose(in[0], toVector(t.getPermutation()));
      })
      .Case([&](ops::SliceOp s) {
        return cpu::slice(in[0], toVector(s.getStart()),
                          toVector(s.getLimit()), toVector(s.getStrides()));
      })
      .Case([&](ops::ConcatOp c) { return cpu::concat(in, c.getDimension()); })
      .Case([&](ops::PadOp p) {
        return cpu::pad(in[0], toVector(p.getLow()), toVector(p.getHigh()),
                        p.getValue().convertToDouble());
      })
      .Case([&](ops::IotaOp i) {
        return cpu::iota(resultDType(op), rt::Shape(i.getType().getShape()),
                         i.getDimension());
      })
      .Case([&](ops::MatmulOp m) {
        return cpu::matmul(in[0], in[1], m.getTransposeA(), m.getTransposeB());
      })
      .Case([&](ops::SoftmaxOp s) {
        return cpu::softmax(in[0], s.getDimension());
      })
      .Case([&](ops::LogSoftmaxOp s) {
        return cpu::logSoftmax(in[0], s.getDimension());
      })
      .Case([&](ops::LayerNormOp l) {
        return cpu::layerNorm(in[0], in[1], in[2],
                              l.getEpsilon().convertToDouble());
      })
      .Case([&](ops::EmbeddingOp) { return cpu::embedding(in[0], in[1]); })
      .Case([&](ops::CrossEntropyOp c) {
        return cpu::crossEntropy(in[0], in[1],
                                 lossReduction(c.getReduction()),
                                 c.getIgnoreIndexOrDefault());
      })
      .Case([&](ops::DropoutOp d) {
        return cpu::dropout(in[0], d.getP().convertToDouble(),
                            static_cast<uint64_t>(d.getSeed()),
                            cpu::dropoutOffset(in));
      })
      .Case([&](ops::AttentionOp a) {
        return cpu::attention(in[0], in[1], in[2], a.getCausal(), scaleOf(a),
                              cpu::attentionOperands("attention", in, 3).valid);
      })
      .Default([&](Operation *) -> R {
        throw rt::Error("the interpreter has no kernel for '" +
                        op.getName().getStringRef().str() + "'");
      });
}

template <typename AdamLikeOp> cpu::AdamHyper adamHyperOf(AdamLikeOp op) {
  cpu::AdamHyper h;
  h.beta1 = op.getBeta1().convertToDouble();
  h.beta2 = op.getBeta2().convertToDouble();
  h.eps = op.getEps().convertToDouble();
  h.weightDecay = op.getWeightDecay().convertToDouble();
  return h;
}

/// Result lists built by moving (a braced list would copy every tensor).
std::vector<rt::HostTensor> results(rt::HostTensor a) {
  std::vector<rt::HostTensor> out;
  out.push_back(std::move(a));
  return out;
}
std::vector<rt::HostTensor> results(cpu::AdamResult r) {
  std::vector<rt::HostTensor> out;
  out.push_back(std::move(r.param));
  out.push_back(std::move(r.expAvg));
  out.push_back(std::move(r.expAvgSq));
  return out;
}

/// The replica groups of a collective (StepDistOps.td).
template <typename CollectiveOp>
rt::ReplicaGroups replicaGroups(CollectiveOp op) {
  return {static_cast<int64_t>(op.getGroupSize()),
          toVector(op.getReplicaGroups())};
}

/// Gradient, optimizer and collective ops (StepTrainOps.td,
/// StepDistOps.td); the optimizers have several
/// results. std::nullopt for every other op.
std::optional<std::vector<rt::HostTensor>> evalTrain(Operation &op,
                                                     Operands in) {
  using R = std::optional<std::vector<rt::HostTensor>>;
  return llvm::TypeSwitch<Operation *, R>(&op)
      .Case([&](ops::StopGradientOp) { return R({in[0]}); })
      .Case<ops::OffloadOp, ops::ReloadOp>(
          [&](Operation *) { return R({in[0]}); })
      .Case([&](ops::AllReduceOp o) {
        return R(results(cpu::allReduce(in[0], o.getReduce().str(),
                                        replicaGroups(o))));
      })
      .Case([&](ops::ReduceScatterOp o) {
        return R(results(cpu::reduceScatter(in[0], o.getReduce().str(),
                                            replicaGroups(o))));
      })
      .Case([&](ops::AllGatherOp o) {
        return R(results(cpu::allGather(in[0], replicaGroups(o))));
      })
      .Case([&](ops::LocalShardOp o) {
        return R(results(cpu::localShard(in[0], replicaGroups(o))));
      })
      .Case(
          [&](ops::CheckFiniteOp) { return R(results(cpu::checkFinite(in))); })
      .Case([&](ops::EmbeddingGradOp e) {
        return R(results(cpu::embeddingGrad(
            in[0], in[1], static_cast<int64_t>(e.getNumEmbeddings()))));
      })
      .Case([&](ops::CrossEntropyGradOp c) {
        return R(results(cpu::crossEntropyGrad(
            in[0], in[1], in[2], lossReduction(c.getReduction()),
            c.getIgnoreIndexOrDefault())));
      })
      .Case([&](ops::AttentionLseOp a) {
        rt::HostTensor lse;
        std::vector<rt::HostTensor> out = results(cpu::attention(
            in[0], in[1], in[2], a.getCausal(), scaleOf(a),
            cpu::attentionOperands("attention_lse", in, 3).valid, &lse));
        out.push_back(std::move(lse));
        return R(std::move(out));
      })
      .Case([&](ops::AttentionGradOp a) {
        cpu::AttentionOperands x =
            cpu::attentionOperands("attention_grad", in, 4);
        cpu::AttentionGrads g =
            cpu::attentionGrad(in[0], in[1], in[2], in[3], a.getCausal(),
                               scaleOf(a), x.valid, x.out, x.lse);
        std::vector<rt::HostTensor> out = results(std::move(g.dq));
        out.push_back(std::move(g.dk));
        out.push_back(std::move(g.dv));
        return R(std::move(out));
      })
      .Case([&](ops::SgdUpdateOp s) {
        cpu::SgdHyper h;
        h.momentum = s.getMomentum().convertToDouble();
        h.dampening = s.getDampening().convertToDouble();
        h.weightDecay = s.getWeightDecay().convertToDouble();
        h.nesterov = s.getNesterov();
        // Operands: param, grad, step, lr[, momentum_buffer].
        const rt::HostTensor *buf = in.size() > 4 ? &in[4] : nullptr;
        cpu::SgdResult r = cpu::sgdUpdate(in[0], in[1], in[2], in[3], buf, h);
        std::vector<rt::HostTensor> out = results(std::move(r.param));
        if (r.momentumBuffer)
          out.push_back(std::move(*r.momentumBuffer));
        return R(std::move(out));
      })
      .Case([&](ops::AdamwUpdateOp a) {
        return R(results(cpu::adamwUpdate(in[0], in[1], in[2], in[3], in[4],
                                          in[5], adamHyperOf(a))));
      })
      .Case([&](ops::LambUpdateOp l) {
        return R(results(cpu::lambUpdate(in[0], in[1], in[2], in[3], in[4],
                                         in[5], adamHyperOf(l))));
      })
      .Default([](Operation *) { return R(); });
}
} // namespace

std::vector<rt::HostTensor> evalStepOp(Operation &op, Operands in) {
  if (auto kind = unaryKindOf(op))
    return {cpu::unary(*kind, in[0])};
  if (auto kind = binaryKindOf(op))
    return {cpu::binary(*kind, in[0], in[1])};
  if (auto kind = reduceKindOf(op)) {
    // The three reductions share their attributes (Step_ReduceOp in ODS).
    auto dims = op.getAttrOfType<DenseI64ArrayAttr>("dims");
    return {cpu::reduce(*kind, in[0], toVector(dims.asArrayRef()),
                        op.getAttr("keepdim") != nullptr)};
  }
  if (auto results = evalTrain(op, in))
    return std::move(*results);
  return {evalSingle(op, in)};
}

} // namespace step
