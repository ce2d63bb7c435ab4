//===- Diagnostics.h - Source-line diagnostics that stay readable -*- C++ -*-===//
//
// MLIR's SourceMgrDiagnosticHandler prints `file:line:col: error: message`,
// then the source line and a caret. A traced model's `func.func` line holds
// every argument with its attributes (GPT-2 350M's model.mlir: one line of
// 25 KB), and every error a pass reports on the function (step-remat's "no
// plan fits the budget", step-shard's refusals) printed it whole. Here a
// line longer than kMaxEchoedLine characters is not echoed: the message and
// its file:line:col stay, as do the line and caret of every shorter line.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TOOLS_DIAGNOSTICS_H
#define STEP_TOOLS_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include "llvm/Support/MemoryBuffer.h"

namespace step::tools {

class ToolDiagnostics : public mlir::SourceMgrDiagnosticHandler {
public:
  static constexpr size_t kMaxEchoedLine = 240;

  ToolDiagnostics(llvm::SourceMgr &mgr, mlir::MLIRContext *ctx)
      : SourceMgrDiagnosticHandler(mgr, ctx) {
    setHandler([this](mlir::Diagnostic &d) {
      emit(d.getLocation(), d.str(), d.getSeverity());
      for (mlir::Diagnostic &note : d.getNotes())
        emit(note.getLocation(), note.str(), note.getSeverity());
      return mlir::success();
    });
  }

private:
  void emit(mlir::Location loc, const std::string &message,
            mlir::DiagnosticSeverity severity) {
    emitDiagnostic(loc, message, severity, lineIsShort(loc));
  }

  /// Whether the source line `loc` points at (if any) is short enough to
  /// echo.
  bool lineIsShort(mlir::Location loc) {
    auto file = loc->findInstanceOf<mlir::FileLineColLoc>();
    if (!file)
      return true;
    const llvm::MemoryBuffer *buffer = getBufferForFile(file.getFilename());
    if (!buffer)
      return true;
    llvm::StringRef rest = buffer->getBuffer();
    for (unsigned line = 1; line < file.getLine() && !rest.empty(); ++line)
      rest = rest.split('\n').second;
    return rest.split('\n').first.size() <= kMaxEchoedLine;
  }
};

} // namespace step::tools

#endif // STEP_TOOLS_DIAGNOSTICS_H
