//===- fuzz-model.cpp - Structure-aware fuzzing of the training pipeline --===//
//
// The input bytes are not text: they are the choices of the random graph
// generator of the step-fuse tests (tests/unit/compiler/FuseGraphGen.h) in
// its model form, a small well-typed `func.func @forward` (DESIGN.md
// section 3) of elementwise chains, broadcasts, reshapes, casts,
// compare/select, reductions, softmax, layer_norm, cross_entropy and
// matmuls with params and inputs and a scalar f32 loss, and of the
// training options (optimizer, clipping, schedule, gradient accumulation,
// mixed precision, remat, offload, fusion, sharding). With those it does
// what `stepc --train -o MODEL.step` does: parse, verify, buildTrainStep
// (compiler/pipeline/Train.h, the verifier on after every pass) and
// planArtifact, then the runtime's side: the artifact's bytes read back and
// one step of a Session on the CPU backend with the generator's inputs.
//
// Every such model is inside the model contract, so a failure is a bug
// unless a pass refused it with a message of its own ("step-shard: ... a
// block ... may not be zero here"; the passes prefix their diagnostics with
// their name and document these limits): a crash or sanitizer report, a
// verifier error after a pass (a pass left invalid IR), a failure with no
// message or an "internal error", an exception from planning, reading or
// running the step. Its diagnostics and the model are printed.
//
//===----------------------------------------------------------------------===//

#include "FuseGraphGen.h"

#include "compiler/pipeline/PlanBuilder.h"
#include "compiler/pipeline/Train.h"
#include "dialects/step/StepOps.h"
#include "runtime/Artifact.h"
#include "runtime/Session.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

using step::fusegen::FuseGraph;

/// The generator's choices from the fuzzer's bytes: one or two bytes a
/// choice, zeros (the smallest choice) once the bytes run out. Tensor
/// contents do not steer the compiler, so they come from a fixed stream
/// instead of eating the input.
class BytesChoices : public step::fusegen::Choices {
public:
  explicit BytesChoices(FuzzedDataProvider &bytes) : bytes_(bytes) {}
  int64_t below(int64_t n) override {
    return bytes_.ConsumeIntegralInRange<int64_t>(0, n - 1);
  }
  double unit() override {
    return bytes_.ConsumeIntegral<uint16_t>() / 65536.0;
  }
  double uniform(double lo, double hi) override {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }

private:
  FuzzedDataProvider &bytes_;
  uint64_t state_ = 1;
};

/// Training options from the first bytes.
step::TrainOptions trainOptions(FuzzedDataProvider &bytes) {
  using step::OptimizerOptions;
  step::TrainOptions o;
  uint8_t kind = bytes.ConsumeIntegralInRange<uint8_t>(0, 2);
  o.optimizer.kind = kind == 0   ? OptimizerOptions::Kind::Sgd
                     : kind == 1 ? OptimizerOptions::Kind::Adamw
                                 : OptimizerOptions::Kind::Lamb;
  o.optimizer.lr = 1e-3;
  if (bytes.ConsumeBool() && kind == 0) // an SGD option only
    o.optimizer.momentum = 0.9;
  if (bytes.ConsumeBool())
    o.clipNorm = 1.0;
  uint8_t schedule = bytes.ConsumeIntegralInRange<uint8_t>(0, 2);
  if (schedule) {
    o.schedule.kind = schedule == 1 ? step::ScheduleOptions::Kind::Cosine
                                    : step::ScheduleOptions::Kind::Linear;
    o.schedule.warmup = 2;
    o.schedule.total = 10;
  }
  o.gradAccum = bytes.ConsumeIntegralInRange<int64_t>(1, 3);
  uint8_t amp = bytes.ConsumeIntegralInRange<uint8_t>(0, 2);
  o.amp.dtype = amp == 0 ? "" : amp == 1 ? "bf16" : "fp16";
  o.fuse = bytes.ConsumeBool();
  static const char *const kRemat[] = {"none", "auto", "max"};
  o.remat.mode = kRemat[bytes.ConsumeIntegralInRange<int>(0, 2)];
  static const char *const kOffload[] = {"none", "auto", "all"};
  o.offload.mode = kOffload[bytes.ConsumeIntegralInRange<int>(0, 2)];
  static const char *const kShard[] = {"none", "dp", "zero1", "zero2",
                                       "zero3"};
  // LAMB's trust ratio needs whole params: dp only (step-shard refuses).
  o.shard.mode = kShard[bytes.ConsumeIntegralInRange<int>(0, kind == 2 ? 1 : 4)];
  if (o.shard.mode != "none")
    o.shard.worldSize = 2;
  return o;
}

std::string describe(const step::TrainOptions &o) {
  return "optimizer " + std::to_string(static_cast<int>(o.optimizer.kind)) +
         (o.clipNorm ? " clip" : "") + " accum " +
         std::to_string(o.gradAccum) + " amp '" + o.amp.dtype + "' fuse " +
         std::to_string(o.fuse) + " remat " + o.remat.mode + " offload " +
         o.offload.mode + " shard " + o.shard.mode;
}

[[noreturn]] void bug(const std::string &what, const FuseGraph &g,
                      const step::TrainOptions &o,
                      const std::string &diagnostics) {
  std::fprintf(stderr,
               "fuzz-model: %s\noptions: %s\n--- diagnostics ---\n%s"
               "--- model ---\n%s\n",
               what.c_str(), describe(o).c_str(), diagnostics.c_str(),
               g.mlir.c_str());
  std::abort();
}

/// A pass's own refusal: "step-<pass>: why", not an internal error.
bool isRefusal(const std::string &message) {
  size_t colon = message.find(": ");
  return message.rfind("step-", 0) == 0 && colon != std::string::npos &&
         message.find(' ') > colon &&
         message.find("internal error") == std::string::npos;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider bytes(data, size);
  step::TrainOptions options = trainOptions(bytes);
  BytesChoices choices(bytes);
  step::fusegen::FuseGraphSize graphSize;
  graphSize.minActions = 1;
  graphSize.maxActions = 10;
  FuseGraph g = step::fusegen::generateFuseGraph(
      choices, graphSize, step::fusegen::GraphForm::Model);

  mlir::DialectRegistry registry;
  registry.insert<mlir::step::StepDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  bool refused = false, otherError = false;
  mlir::ScopedDiagnosticHandler collect(&ctx, [&](mlir::Diagnostic &d) {
    std::string text = d.str();
    diagnostics += text + "\n";
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error) {
      if (isRefusal(text))
        refused = true;
      else
        otherError = true;
    }
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(g.mlir, &ctx);
  if (!module || mlir::failed(mlir::verify(*module)))
    bug("the generator wrote a model that does not verify", g, options,
        diagnostics);
  if (mlir::failed(step::buildTrainStep(*module, options))) {
    if (refused && !otherError)
      return 0;
    bug("the training pipeline failed", g, options, diagnostics);
  }
  if (mlir::failed(mlir::verify(*module)))
    bug("the train step does not verify", g, options, diagnostics);

  try {
    step::rt::Artifact artifact = step::planArtifact(*module, "train_step");
    artifact = step::rt::parseArtifact(step::rt::artifactBytes(artifact),
                                       "fuzz-model.step");
    // A sharded step runs only on as many ranks as it was compiled for.
    if (options.shard.mode != "none")
      return 0;
    step::SessionOptions so;
    so.backend = step::Backend::Cpu;
    so.communicator = &step::rt::selfCommunicator();
    step::Session session(std::move(artifact), so);
    // Params from the generator's arguments; inputs repeated for every
    // micro-batch (the step takes k times the model's leading dim).
    std::map<std::string, step::rt::HostTensor> batch;
    for (size_t i = 0; i < g.args.size(); ++i) {
      const step::rt::HostTensor &t = g.args[i];
      if (g.argKinds[i] == "param") {
        session.set(g.argNames[i], t);
        continue;
      }
      step::rt::Shape shape = t.shape();
      shape[0] *= options.gradAccum;
      step::rt::HostTensor rows(t.dtype(), shape);
      for (int64_t k = 0; k < options.gradAccum; ++k)
        std::memcpy(static_cast<char *>(rows.raw()) + k * t.byteSize(),
                    t.raw(), t.byteSize());
      batch[g.argNames[i]] = std::move(rows);
    }
    session.step(batch);
  } catch (const std::exception &e) {
    bug(std::string("the compiled step failed: ") + e.what(), g, options,
        diagnostics);
  }
  return 0;
}
