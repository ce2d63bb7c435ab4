//===- Donation.cpp - Updates written into their params' buffers ----------===//
//
// A training step "updates params and optimizer state in place"
// (DESIGN.md): the runtime carries the updated values into the next step.
// Without donation the updates are transient results in the arena and the
// CUDA executor copies each into its argument's buffer after the run
// (CudaExecutor::commitCarried): GPT-2 124M's AdamW moves 1.49 GB twice
// more and issues 444 copies a step, outside the step's graph. A donated
// result is planned into its argument's buffer instead, as XLA's
// input-output aliasing and JAX's donate_argnums do; commitCarried then has
// nothing to copy (the two buffers are one), and the CPU backend, which
// copies on write into any argument's buffer, gives the same values.
//
// Guarantee: a result takes an argument's buffer only where no step can
// read a value the write changed:
//  - the result is returned once, under the name of a param or state
//    argument in device memory, of the same dtype and shape (the pair the
//    Session carries);
//  - its op is a multi_tensor fusion of optimizer updates, not a host step
//    (MultiTensorKernels.cpp, form A: each thread loads every tensor
//    operand of an update at an element's index, vector or scalar, before
//    it stores that element's results, through pointers not marked
//    __restrict__), and the result comes from an update whose operands
//    include the argument's block argument, which nothing else in the body
//    reads; the argument is no other operand of the fusion;
//  - every other op reading the argument comes before the fusion in the
//    function (plan order) and runs in order with it: no collective, copy
//    (offload, reload) or host step, which may run beside the compute
//    stream;
//  - the step has no finite guard (rt::kGuardResult): a tripped guard keeps
//    the values the step read, for the CPU re-run that names the culprit.
// A run that fails part-way may leave some params updated and others not,
// as a donated buffer in XLA; the step is not retried on the same buffers.
//
// Cost: one walk over the function's ops and each fusion body's uses, O(ops
// + uses).
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/PlanBuilder.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"
#include "runtime/FiniteGuard.h"
#include "runtime/Plan.h"

#include <set>

namespace step {
using namespace mlir;
namespace ops = mlir::step;

namespace {

/// Whether `op` may run beside the compute stream or on the host.
bool asynchronous(Operation *op) {
  return op->hasAttr("step.host") || isa<ops::OffloadOp, ops::ReloadOp>(op) ||
         rt::isCollective(op->getName().getStringRef().str());
}

/// Whether fusion result `index` of `fusion` (a multi_tensor fusion of
/// optimizer updates) is yielded by an update that reads `arg`, the
/// fusion's operand once, through a block argument nothing else reads.
bool updateReads(ops::FusionOp fusion, unsigned index, Value arg) {
  if (fusion.getKind() != ops::kMultiTensorFusion ||
      fusion->hasAttr("step.host"))
    return false;
  Block &block = fusion.getBlock();
  // Form A: updates, and elementwise or view prologues of their operands.
  for (Operation &op : block.without_terminator()) {
    auto role = ops::fusionRole(&op);
    if (isa<ops::LambUpdateOp>(op) ||
        (role != ops::FusionRole::Update &&
         role != ops::FusionRole::Elementwise && role != ops::FusionRole::View))
      return false;
  }
  std::optional<unsigned> operand;
  for (OpOperand &o : fusion->getOpOperands())
    if (o.get() == arg) {
      if (operand)
        return false; // the argument twice
      operand = o.getOperandNumber();
    }
  if (!operand)
    return false;
  Operation *update = fusion.getYield()->getOperand(index).getDefiningOp();
  if (!update || update->getBlock() != &block ||
      ops::fusionRole(update) != ops::FusionRole::Update)
    return false;
  BlockArgument inner = block.getArgument(*operand);
  return !inner.use_empty() &&
         llvm::all_of(inner.getUsers(),
                      [&](Operation *user) { return user == update; });
}

} // namespace

llvm::DenseMap<Value, unsigned> donatedResults(func::FuncOp f) {
  llvm::DenseMap<Value, unsigned> donated;
  Block &body = f.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret)
    return donated;
  std::map<std::string, unsigned> argumentNamed;
  for (BlockArgument arg : f.getArguments()) {
    auto kind = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.kind");
    auto memory =
        f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.memory");
    if (kind && (kind.getValue() == "param" || kind.getValue() == "state") &&
        !(memory && memory.getValue() == "host"))
      argumentNamed[argumentName(f, arg.getArgNumber())] = arg.getArgNumber();
  }
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    if (resultName(f, i) == rt::kGuardResult)
      return donated;
  std::set<unsigned> taken;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    Value r = ret.getOperand(i);
    auto named = argumentNamed.find(resultName(f, i));
    auto result = dyn_cast<OpResult>(r);
    if (named == argumentNamed.end() || !result || !r.hasOneUse() ||
        donated.count(r) || taken.count(named->second))
      continue;
    BlockArgument arg = f.getArgument(named->second);
    auto fusion = dyn_cast<ops::FusionOp>(result.getOwner());
    if (arg.getType() != r.getType() || !fusion || fusion->getBlock() != &body)
      continue;
    if (!updateReads(fusion, result.getResultNumber(), arg))
      continue;
    // Every other reader of the argument: before the fusion, in order.
    bool inOrder = true;
    for (Operation *user : arg.getUsers())
      inOrder =
          inOrder && (user == fusion.getOperation() ||
                      (user->getBlock() == &body &&
                       user->isBeforeInBlock(fusion) && !asynchronous(user)));
    if (inOrder) {
      donated[r] = named->second;
      taken.insert(named->second);
    }
  }
  return donated;
}

} // namespace step
