//===- sanitizer_options.cpp - Defaults of the sanitized binaries ---------===//
//
// Linked into every executable of a -DSTEP_SANITIZE=ON build (the end of the
// top-level CMakeLists.txt). The ASan, LSan and UBSan runtimes call these
// hooks at startup, so every instrumented binary has the same options however
// it is started: by ctest, as a subprocess of a python test, under mpirun, or
// by hand. ASAN_OPTIONS, LSAN_OPTIONS and UBSAN_OPTIONS from the environment
// are applied after these and win where they repeat a flag.
//
// exitcode=70 (EX_SOFTWARE) sets a sanitizer report apart from the exit
// codes our tools give bad input (1 and 2), so a test that expects a clean
// refusal fails when the refusal path itself has a memory error.
//
//===----------------------------------------------------------------------===//

#include "tools/dev/SanitizerPaths.h"

extern "C" {

/// Every report stops the process (the build also passes
/// -fno-sanitize-recover=all); leaks are checked at exit.
const char *__asan_default_options() {
  return "halt_on_error=1:detect_leaks=1:exitcode=70"
         ":check_initialization_order=1:strict_init_order=1"
         ":detect_stack_use_after_return=1"
         ":external_symbolizer_path=" STEP_LLVM_SYMBOLIZER;
}

/// Third-party leaks we cannot fix are listed, one reason each, in
/// tools/dev/lsan.supp; print_suppressions=0 keeps the stderr of a clean run
/// as the tools print it (python tests compare it).
const char *__lsan_default_options() {
  return "suppressions=" STEP_LSAN_SUPPRESSIONS ":print_suppressions=0";
}

const char *__ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1:exitcode=70"
         ":external_symbolizer_path=" STEP_LLVM_SYMBOLIZER;
}

} // extern "C"
