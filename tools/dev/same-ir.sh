#!/usr/bin/env bash
#===- same-ir.sh - The compiler's output does not depend on the host C++ compiler -===#
#
#   tools/dev/same-ir.sh BUILD_A BUILD_B
#
# Two build trees of this repository made by different C++ compilers (CI:
# build/ with g++, build-asan/ with clang). C++ leaves the order in which a
# call's arguments are evaluated unspecified (g++ goes right to left, clang
# left to right), so a builder call with two op-making arguments, e.g.
# create<SubOp>(loc, create<MulOp>(...), create<AddOp>(...)), makes its ops
# in a different order under each, and the traced model, the training step,
# its fusion groups and the choices of order-sensitive passes (step-remat's
# segments) then differ by compiler. This script traces the example models
# with each tree's examples and compiles them with each tree's stepc under
# a set of options, and fails on the first pair of outputs that differ.
#
#===-------------------------------------------------------------------------------===#
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_A BUILD_B" >&2
  exit 2
fi
a=$1
b=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/step-same-ir.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

differ() {
  echo "same-ir: $1 differs between $a and $b:" >&2
  diff "$2" "$3" | head -20 >&2
  exit 1
}

# The models, traced by each tree's examples.
models=()
trace() { # NAME TOOL ARGS...
  local name=$1 tool=$2
  shift 2
  "$a/examples/$tool" "$@" --out "$work/a.$name" > /dev/null
  "$b/examples/$tool" "$@" --out "$work/b.$name" > /dev/null
  cmp -s "$work/a.$name/model.mlir" "$work/b.$name/model.mlir" ||
    differ "the traced $name model" "$work/a.$name/model.mlir" \
      "$work/b.$name/model.mlir"
  models+=("$work/a.$name/model.mlir")
}
trace mlp mlp-example
# gpt2-example takes --emit-model DIR instead of --out.
for variant in plain pack dynamic; do
  flags=()
  [ $variant = pack ] && flags=(--pack)
  [ $variant = dynamic ] && flags=(--dynamic-context)
  for t in a b; do
    tree=$a
    [ $t = b ] && tree=$b
    "$tree/examples/gpt2-example" "${flags[@]}" \
      --emit-model "$work/$t.gpt2-$variant" > /dev/null
  done
  cmp -s "$work/a.gpt2-$variant/model.mlir" "$work/b.gpt2-$variant/model.mlir" ||
    differ "the traced gpt2 ($variant) model" \
      "$work/a.gpt2-$variant/model.mlir" "$work/b.gpt2-$variant/model.mlir"
  models+=("$work/a.gpt2-$variant/model.mlir")
done
models+=("$root/tests/lit/tools/stepc.mlir")

# Each model through each tree's stepc.
options=(
  "--optimizer=adamw,lr=3e-4,wd=0.1 --clip=1.0 --schedule=cosine,warmup=2,total=10"
  "--optimizer=sgd,momentum=0.9 --grad-accum=2 --no-fuse"
  "--optimizer=lamb --clip=0.5 --schedule=linear,warmup=2,total=10"
  "--optimizer=adamw --amp=bf16 --remat=max"
  "--optimizer=adamw --amp=fp16 --guard-finite --offload=all"
  "--optimizer=adamw --shard=zero3 --world-size=2"
)
compiled=0
for m in "${models[@]}"; do
  for o in "${options[@]}"; do
    rc_a=0
    # shellcheck disable=SC2086  # $o is a list of options
    "$a/tools/stepc" "$m" --train $o --emit=mlir -o "$work/a.mlir" \
      2> "$work/a.err" || rc_a=$?
    rc_b=0
    # shellcheck disable=SC2086
    "$b/tools/stepc" "$m" --train $o --emit=mlir -o "$work/b.mlir" \
      2> "$work/b.err" || rc_b=$?
    if [ $rc_a -ne 0 ] || [ $rc_b -ne 0 ]; then
      # A combination a pass refuses for this model (a documented limit,
      # exit 1) must be refused by both trees alike, with the same message;
      # anything else (a crash, a sanitizer's 70) is a failure.
      if [ $rc_a -ne 1 ] || [ $rc_b -ne 1 ]; then
        echo "same-ir: stepc $m --train $o exited $rc_a in $a, $rc_b in $b" >&2
        cat "$work/a.err" "$work/b.err" >&2
        exit 1
      fi
      cmp -s "$work/a.err" "$work/b.err" ||
        differ "the refusal of $m with $o" "$work/a.err" "$work/b.err"
      continue
    fi
    cmp -s "$work/a.mlir" "$work/b.mlir" ||
      differ "the step of $m with $o" "$work/a.mlir" "$work/b.mlir"
    compiled=$((compiled + 1))
  done
done
if [ $compiled -eq 0 ]; then
  echo "same-ir: no step compiled in either tree; nothing was compared" >&2
  exit 1
fi
echo "same-ir: ${#models[@]} traced models and $compiled compiled steps are the same in $a and $b"
