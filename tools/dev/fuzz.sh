#!/usr/bin/env bash
#===- fuzz.sh - Run the libFuzzer targets for a while -------------------===#
#
#   tools/dev/fuzz.sh BUILD_DIR SECONDS [TARGET...]
#
# Runs each fuzz target of a tree configured with -DSTEP_FUZZ=ON
# (tests/fuzz, docs/fuzzing.md) for SECONDS over a copy of its seed corpus
# tests/fuzz/corpus/<target>/, so the checked-in corpus never changes.
# TARGETs are artifact, npy, mlir, model (default: all that were built).
# Prints each run's last status line (executions, coverage, corpus) and
# exits non-zero when a target crashed, leaked, hung or ran out of memory,
# naming the input that did it; that input and the run's log stay in the
# work folder it prints. Set FUZZ_KEEP=1 to keep the work folders of clean
# runs too (their grown corpus), FUZZ_ARGS for more libFuzzer flags.
#
#===----------------------------------------------------------------------===#
set -u

if [ $# -lt 2 ] || ! [[ $2 =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [artifact|npy|mlir|model ...]" >&2
  exit 2
fi
build=$1
seconds=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(artifact npy mlir model)
  only_built=1
else
  only_built=0
fi

failed=0
ran=0
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz-$t
  if [ ! -x "$bin" ]; then
    if [ $only_built = 1 ]; then
      continue
    fi
    echo "fuzz.sh: $bin not found (configure with -DSTEP_FUZZ=ON and build fuzz-$t)" >&2
    failed=1
    continue
  fi
  seeds=$root/tests/fuzz/corpus/$t
  work=$(mktemp -d "${TMPDIR:-/tmp}/step-fuzz-$t.XXXXXX")
  mkdir -p "$work/corpus" "$work/crash"
  if [ -d "$seeds" ]; then
    cp "$seeds"/* "$work/corpus/" 2>/dev/null
  fi
  flags=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=3072
         -print_final_stats=1 -artifact_prefix="$work/crash/")
  if [ -f "$root/tests/fuzz/$t.dict" ]; then
    flags+=(-dict="$root/tests/fuzz/$t.dict")
  fi
  # The model target's input is a list of choices, not a file format:
  # short inputs already make every graph the generator can.
  if [ "$t" = model ]; then
    flags+=(-max_len=512)
  fi
  # shellcheck disable=SC2206
  extra=(${FUZZ_ARGS:-})
  echo "fuzz.sh: fuzz-$t for ${seconds}s over $(ls "$work/corpus" | wc -l) seeds ($work)"
  "$bin" "${flags[@]}" "${extra[@]}" "$work/corpus" > "$work/log" 2>&1
  rc=$?
  ran=$((ran + 1))
  grep -E "^#[0-9]+[[:space:]]+DONE" "$work/log" | tail -1 | sed "s/^/fuzz-$t: /"
  grep -E '^stat::' "$work/log" | sed "s/^/fuzz-$t: /"
  # libFuzzer also saves inputs slower than 10 s (slow-unit-*): a note, not
  # a failure (-timeout decides what is a hang).
  crashes=$(ls "$work/crash" 2>/dev/null | grep -v '^slow-unit-')
  for s in $(ls "$work/crash" 2>/dev/null | grep '^slow-unit-'); do
    echo "fuzz.sh: fuzz-$t: slow input (over 10 s): $work/crash/$s"
  done
  if [ $rc -ne 0 ] || [ -n "$crashes" ]; then
    failed=1
    echo "fuzz.sh: fuzz-$t FAILED (exit $rc); log: $work/log" >&2
    grep -E 'ERROR: |SUMMARY: |fuzz-[a-z]+: ' "$work/log" | head -5 >&2
    for c in $crashes; do
      echo "fuzz.sh: crashing input: $work/crash/$c" >&2
      echo "fuzz.sh:   reproduce: $bin $work/crash/$c" >&2
    done
  elif [ "${FUZZ_KEEP:-0}" = 1 ]; then
    echo "fuzz.sh: kept $work ($(ls "$work/corpus" | wc -l) inputs)"
  else
    rm -rf "$work"
  fi
done
if [ $ran = 0 ] && [ $failed = 0 ]; then
  echo "fuzz.sh: no fuzz target in $build/tests/fuzz (configure with -DSTEP_FUZZ=ON)" >&2
  exit 1
fi
exit $failed
