//===- PlanBuilder.cpp - Lower a planned function to an artifact ----------===//

#include "compiler/pipeline/PlanBuilder.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "passes/Activations.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "runtime/FiniteGuard.h"
#include "runtime/Profile.h"

#include "mlir/Pass/PassManager.h"

#include <map>

namespace step {
using namespace mlir;
namespace ops = mlir::step;

namespace {
std::string opString(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

nlohmann::json attributeToJson(StringRef name, Attribute attr,
                               Operation *op) {
  // The dialect's enums are i32 attributes: write their words.
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    int64_t v = i.getValue().getSExtValue();
    if (isa<ops::CompareOp>(op) && name == "direction")
      return ops::stringifyComparisonDirection(
                 static_cast<ops::ComparisonDirection>(v))
          .str();
    if (isa<ops::GeluOp, ops::GeluGradOp>(op) && name == "approximate")
      return ops::stringifyGeluApproximation(
                 static_cast<ops::GeluApproximation>(v))
          .str();
    if (name == "reduction")
      return ops::stringifyLossReduction(static_cast<ops::LossReduction>(v))
          .str();
    if (i.getType().isInteger(1))
      return v != 0;
    return v;
  }
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (isa<UnitAttr>(attr))
    return true;
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto a = dyn_cast<DenseI64ArrayAttr>(attr))
    return std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.str();
  // Enum attribute classes (if an op uses EnumAttr instead of I32EnumAttr).
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  throw rt::Error(opString(op) + ": attribute '" + name.str() + "' (" + text +
                  ") has no plan encoding");
}
} // namespace

std::string locationString(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    std::string s = file.getFilename().str() + ":" +
                    std::to_string(file.getLine());
    // The tracing API records no column (0).
    if (file.getColumn() != 0)
      s += ":" + std::to_string(file.getColumn());
    return s;
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return locationString(name.getChildLoc());
  // Inlined ops keep their own place as the callee.
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return locationString(call.getCallee());
  // Ops merged by CSE or canonicalization: the first place known.
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (std::string s = locationString(part); !s.empty())
        return s;
  return "";
}

nlohmann::json attributesToJson(Operation *op) {
  nlohmann::json j = nlohmann::json::object();
  for (NamedAttribute a : op->getAttrDictionary()) {
    StringRef name = a.getName().strref();
    // Optional operands' segment sizes: a plan step's operand list says
    // which it has (attention_grad's valid and saved tell themselves apart
    // by count, runtime/cpu/Kernels.h attentionOperands).
    if (name.starts_with("step.") || name == "operandSegmentSizes")
      continue;
    j[name.str()] = attributeToJson(name, a.getValue(), op);
  }
  return j;
}

/// The body of a fusion as a plan of its own (runtime/Plan.h): arguments
/// are the block's arguments, results the step.yield operands, and every
/// buffer is transient without an arena offset.
static std::shared_ptr<rt::Plan> buildFusionBody(ops::FusionOp fusion) {
  auto body = std::make_shared<rt::Plan>();
  body->function = "fusion";
  llvm::DenseMap<Value, int64_t> bufferOf;
  auto addBuffer = [&](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    auto dtype = toDType(type.getElementType());
    if (!dtype || !type.hasStaticShape())
      throw rt::Error("step.fusion: a value of a type the runtime cannot "
                      "hold");
    rt::BufferDesc d;
    d.name = "%" + std::to_string(body->buffers.size());
    d.dtype = *dtype;
    d.shape = rt::Shape(type.getShape());
    bufferOf[v] = static_cast<int64_t>(body->buffers.size());
    body->buffers.push_back(std::move(d));
    return bufferOf[v];
  };
  for (BlockArgument arg : fusion.getBlock().getArguments())
    body->arguments.push_back(addBuffer(arg));
  for (Operation &op : fusion.getBlock().without_terminator()) {
    rt::PlanStep step;
    step.op = op.getName().getStringRef().str();
    step.attrs = attributesToJson(&op);
    step.location = locationString(op.getLoc());
    for (Value v : op.getOperands())
      step.operands.push_back(bufferOf.lookup(v));
    for (Value r : op.getResults())
      step.results.push_back(addBuffer(r));
    body->steps.push_back(std::move(step));
  }
  for (auto [i, v] : llvm::enumerate(fusion.getYield()->getOperands())) {
    body->results.push_back(bufferOf.lookup(v));
    body->resultNames.push_back("result" + std::to_string(i));
  }
  return body;
}

rt::Artifact buildArtifact(func::FuncOp f) {
  rt::Artifact a;
  rt::Plan &plan = a.plan;
  plan.function = f.getName().str();
  auto arena = f->getAttrOfType<IntegerAttr>("step.arena_bytes");
  if (!arena)
    throw rt::Error("@" + plan.function +
                    " has no step.arena_bytes: run step-memory-plan first");
  plan.arenaBytes = arena.getInt();
  if (auto host = f->getAttrOfType<IntegerAttr>("step.host_bytes"))
    plan.hostBytes = host.getInt();

  llvm::DenseMap<Value, int64_t> bufferOf;
  auto addBuffer = [&](Value v, rt::BufferDesc d) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    auto dtype = type ? toDType(type.getElementType()) : std::nullopt;
    if (!type || !dtype || !type.hasStaticShape())
      throw rt::Error("@" + plan.function +
                      ": a value of a type the runtime cannot hold");
    d.dtype = *dtype;
    d.shape = rt::Shape(type.getShape());
    if (d.name.empty())
      d.name = "%" + std::to_string(plan.buffers.size());
    bufferOf[v] = static_cast<int64_t>(plan.buffers.size());
    plan.buffers.push_back(std::move(d));
    return bufferOf[v];
  };

  for (BlockArgument arg : f.getArguments()) {
    rt::BufferDesc d;
    d.name = argumentName(f, arg.getArgNumber());
    auto kind = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.kind");
    d.kind = rt::bufferKindFromName(kind ? kind.str() : "input");
    auto memory =
        f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.memory");
    d.host = memory && memory.getValue() == "host";
    plan.arguments.push_back(addBuffer(arg, d));
  }

  std::string &constants = a.sections["constants"];
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        plan.results.push_back(bufferOf.lookup(v));
        plan.resultNames.push_back(resultName(f, i));
      }
      continue;
    }
    if (auto c = dyn_cast<ops::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!dense)
        throw rt::Error("step.constant: only dense elements are supported");
      rt::HostTensor t = fromElementsAttr(dense);
      constants.resize((constants.size() + 63) / 64 * 64, '\0');
      rt::BufferDesc d;
      d.kind = rt::BufferKind::Constant;
      d.offset = static_cast<int64_t>(constants.size());
      constants.append(static_cast<const char *>(t.raw()), t.byteSize());
      addBuffer(c.getResult(), d);
      continue;
    }
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("step.offsets");
    if (!offsets ||
        offsets.size() != static_cast<int64_t>(op.getNumResults()))
      throw rt::Error(opString(&op) +
                      " has no step.offsets: run step-memory-plan first");
    rt::PlanStep step;
    step.op = op.getName().getStringRef().str();
    step.attrs = attributesToJson(&op);
    step.location = locationString(op.getLoc());
    step.flops = ops::opFlops(&op);
    step.host = op.hasAttr("step.host");
    if (auto fusion = dyn_cast<ops::FusionOp>(op))
      step.body = buildFusionBody(fusion);
    for (Value v : op.getOperands())
      step.operands.push_back(bufferOf.lookup(v));
    // Results written into an argument's buffer (Donation.cpp).
    std::map<int64_t, int64_t> donated = ops::donatedArguments(&op);
    for (auto [i, r] : llvm::enumerate(op.getResults())) {
      if (auto it = donated.find(static_cast<int64_t>(i));
          it != donated.end()) {
        if (it->second < 0 ||
            it->second >= static_cast<int64_t>(plan.arguments.size()))
          throw rt::Error(opString(&op) + ": step.donated names argument " +
                          std::to_string(it->second) + " of " +
                          std::to_string(plan.arguments.size()));
        bufferOf[r] = plan.arguments[it->second];
        step.results.push_back(bufferOf[r]);
        continue;
      }
      rt::BufferDesc d;
      d.kind = isa<ops::OffloadOp>(op) || step.host
                   ? rt::BufferKind::Host
                   : rt::BufferKind::Transient;
      d.offset = offsets[i];
      step.results.push_back(addBuffer(r, d));
    }
    plan.steps.push_back(std::move(step));
  }
  plan.validate();
  // step-optimizer's guard-finite result: the runtime checks it each step.
  for (const std::string &name : plan.resultNames)
    if (name == rt::kGuardResult)
      a.meta["guard"] = {{"finite", rt::kGuardResult}};
  return a;
}

rt::Artifact planArtifact(ModuleOp module, const std::string &func,
                          std::vector<PassRecord> *report, bool donate) {
  if (auto f = module.lookupSymbol<func::FuncOp>(func)) {
    // Donation (Donation.cpp): marked on the writing ops for the memory
    // plan, which gives those results no arena bytes, and for
    // buildArtifact; marks of an earlier call go first.
    f.walk([](Operation *op) { ops::setDonatedArguments(op, {}); });
    std::map<Operation *, std::map<int64_t, int64_t>> marks;
    if (donate)
      for (auto [value, arg] : donatedResults(f)) {
        auto r = cast<OpResult>(value);
        marks[r.getOwner()][r.getResultNumber()] = arg;
      }
    for (auto &[op, pairs] : marks)
      ops::setDonatedArguments(op, pairs);
  }
  PassManager pm(module.getContext());
  ops::MemoryPlanOptions options;
  options.funcName = func;
  pm.addPass(ops::createMemoryPlan(options));
  double start = rt::steadySeconds();
  if (failed(pm.run(module)))
    throw rt::Error("step-memory-plan failed on @" + func);
  auto f = module.lookupSymbol<func::FuncOp>(func);
  if (report) {
    PassRecord r;
    r.pass = "step-memory-plan";
    r.seconds = rt::steadySeconds() - start;
    r.opsBefore = r.opsAfter =
        static_cast<int64_t>(f.getBody().front().getOperations().size());
    for (const char *key : {"arena_bytes", "arena_bytes_no_reuse"})
      r.counts[key] =
          f->getAttrOfType<IntegerAttr>(std::string("step.") + key).getInt();
    if (auto host = f->getAttrOfType<IntegerAttr>("step.host_bytes"))
      r.counts["host_bytes"] = host.getInt();
    report->push_back(r);
  }
  return buildArtifact(f);
}

} // namespace step
