//===- Trace.h - The C++ tracing API (umbrella header) ----------*- C++ -*-===//
//
// Include this to write a model: Graph and Tensor (Graph.h), ops and
// operators (Ops.h), parameter initializers (Init.h). docs/tracing.md is the
// user guide; examples/mlp/mlp.cpp a complete program.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_TRACE_TRACE_H
#define STEP_COMPILER_TRACE_TRACE_H

#include "compiler/trace/Graph.h"
#include "compiler/trace/Init.h"
#include "compiler/trace/Ops.h"

#endif // STEP_COMPILER_TRACE_TRACE_H
