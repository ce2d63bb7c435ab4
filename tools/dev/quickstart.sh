#!/usr/bin/env bash
# StepJIT quick start on Debian 12: install what is missing, build, then
#   quickstart.sh mlp   - run the MLP examples (trace and write a model; train
#                         one on 2-D spirals, writing loss.csv and loss.svg)
#   quickstart.sh test  - run the whole test suite (ctest: lit, unit, PyTorch parity)
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail

mode=${1:-mlp}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}

"$root/tools/dev/install-deps.sh"

# CMake finds the python3 that imports torch itself (Debian's /usr/bin/python3).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"

case "$mode" in
  mlp)
    out="$build/mlp-run"
    "$build/examples/mlp-example" --out "$out"
    echo "quickstart: model and initial params written to $out"
    "$build/examples/mlp-train" --out "$out/train"
    echo "quickstart: loss curve written to $out/train/loss.svg"
    ;;
  test)
    ctest --test-dir "$build" --output-on-failure -j "$jobs"
    ;;
  *)
    echo "usage: $0 [mlp|test]" >&2
    exit 2
    ;;
esac
