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

packages=(cmake ninja-build g++ pkg-config
          llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
          libopenblas-dev libgtest-dev nlohmann-json3-dev libcli11-dev
          libopenmpi-dev openmpi-bin
          python3 python3-numpy python3-torch)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "quickstart: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

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
