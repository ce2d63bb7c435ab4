//===- PlanBuilder.h - Lower a planned function to an artifact -*- C++ -*-===//
//
// The last compiler step before codegen: a function of step ops whose
// transient values carry `step.offsets` (step-memory-plan) becomes an
// rt::Artifact — one buffer per argument, constant and op result (but an
// optimizer update donated to its param's or state's buffer), one plan
// step per non-constant op with its attributes as JSON, constants' bytes in
// the "constants" section. The runtime (runtime/Plan.h) reads it without
// MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_PIPELINE_PLANBUILDER_H
#define STEP_COMPILER_PIPELINE_PLANBUILDER_H

#include "compiler/pipeline/Train.h"
#include "runtime/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

namespace step {

/// Lowers `f`. Throws rt::Error naming the op when an op lacks its offsets
/// or has a type the runtime cannot hold. A result named "guard.finite"
/// (step-optimizer's guard-finite) sets meta "guard"
/// (runtime/FiniteGuard.h); every step records its op's location. A result
/// named in its op's `step.donated` (pairs of result index and argument
/// number) is that argument's buffer.
rt::Artifact buildArtifact(mlir::func::FuncOp f);

/// The returned values of `f` that take a param or state argument's buffer
/// (the argument's number): optimizer updates written in place, where no
/// step reads what the write changes (Donation.cpp says when).
/// planArtifact marks them (`step.donated`) for the memory plan and
/// buildArtifact.
llvm::DenseMap<mlir::Value, unsigned> donatedResults(mlir::func::FuncOp f);

/// Marks the donatedResults of @`func` of `module` (with `donate`), runs
/// step-memory-plan on it and lowers it with buildArtifact; appends a
/// "step-memory-plan" record (arena bytes with and without reuse) to `report`.
/// Diagnostics go to the module's context; throws rt::Error when planning or
/// lowering fails.
rt::Artifact planArtifact(mlir::ModuleOp module, const std::string &func,
                          std::vector<PassRecord> *report = nullptr,
                          bool donate = true);

/// A location as rt::PlanStep::location: "file:line:col" ("file:line"
/// when the column is 0, as the tracing API records), looking through
/// names, call sites (the callee: where an inlined op was written) and
/// fused locations (the first known part); "" when unknown.
std::string locationString(mlir::Location loc);

/// An op's attributes as the plan's JSON (enum attributes as their words,
/// unit attributes as true, arrays as arrays); `step.*` annotations are left
/// out.
nlohmann::json attributesToJson(mlir::Operation *op);

} // namespace step

#endif // STEP_COMPILER_PIPELINE_PLANBUILDER_H
