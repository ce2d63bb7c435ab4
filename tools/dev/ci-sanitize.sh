#!/usr/bin/env bash
# CI stage: the whole test suite under AddressSanitizer + UndefinedBehavior-
# Sanitizer (LeakSanitizer included), built with clang-19 in its own tree.
#   ci-sanitize.sh          - configure, build, run every ctest test, then
#                             each fuzz target for FUZZ_SECONDS
# Environment: ASAN_BUILD_DIR (default build-asan; not BUILD_DIR, which
# names quickstart.sh's g++ tree), JOBS (default: number of
# cores), CTEST_ARGS (extra ctest arguments, e.g. "-R lit"), FUZZ_SECONDS
# (default 60; 0 skips the fuzz runs).
# clang rather than g++: the libFuzzer targets (-DSTEP_FUZZ=ON) are built in
# this same tree, so CI keeps one extra build, not two. The options every
# sanitized binary runs with and the leak suppressions are in
# tools/dev/sanitizer_options.cpp and tools/dev/lsan.supp
# (docs/reliability.md, "Sanitizers").
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${ASAN_BUILD_DIR:-$root/build-asan}
fuzz_seconds=${FUZZ_SECONDS:-60}
if ! [[ $fuzz_seconds =~ ^[0-9]+$ ]]; then
  echo "ci-sanitize: FUZZ_SECONDS must be a whole number of seconds, found '$fuzz_seconds'" >&2
  exit 2
fi
jobs=${JOBS:-$(nproc)}

# What quickstart.sh installs, plus clang with its sanitizer runtimes and
# llvm-symbolizer (llvm-19) for symbolized reports.
"$root/tools/dev/install-deps.sh" clang-19 libclang-rt-19-dev llvm-19

# Debug keeps assert() on (our asserts and MLIR's inline ones); the
# sanitizer option sets -O1 and line tables itself.
start=$SECONDS
# The CUDA emulation tests' host programs (generated kernels, not project
# code) are built by g++, as in the Release tree: faster than clang-19.
# A unity build (CMake joins up to 8 sources of a target into one
# translation unit): the MLIR, LLVM and standard headers are parsed, and
# their inline functions instrumented and compiled, once a batch instead of
# once a file, which about halves this tree's compile time. The Release tree
# (quickstart.sh) keeps one translation unit a file, so a source that
# compiles only with its batch's includes still fails there.
CC=clang-19 CXX=clang++-19 cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Debug -DSTEP_SANITIZE=ON -DSTEP_FUZZ=ON \
  -DCMAKE_UNITY_BUILD=ON -DSTEP_EMU_CXX="$(command -v g++)"
cmake --build "$build" -j "$jobs"
built=$SECONDS
echo "ci-sanitize: configure + build took $((built - start)) s"

status=0
# shellcheck disable=SC2086  # CTEST_ARGS is a list of words
ctest --test-dir "$build" --output-on-failure -j "$jobs" ${CTEST_ARGS:-} \
  || status=$?
echo "ci-sanitize: ctest took $((SECONDS - built)) s (exit $status)"

# Short fuzz runs (docs/fuzzing.md): FUZZ_SECONDS per target, two targets
# at a time (the machines CI runs on have two cores).
if [ "$fuzz_seconds" -gt 0 ]; then
  fuzz_start=$SECONDS
  "$root/tools/dev/fuzz.sh" "$build" "$fuzz_seconds" artifact npy &
  first=$!
  "$root/tools/dev/fuzz.sh" "$build" "$fuzz_seconds" mlir model || status=1
  wait "$first" || status=1
  echo "ci-sanitize: fuzz runs took $((SECONDS - fuzz_start)) s"
fi
exit "$status"
