#!/usr/bin/env bash
# Installs, with apt on Debian 12, what building and testing StepJIT needs
# and is missing, plus any EXTRA packages given (ci-sanitize.sh adds clang).
#   tools/dev/install-deps.sh [EXTRA...]
# Uses sudo when not run as root. quickstart.sh and ci-sanitize.sh call it.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config
          llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
          libopenblas-dev libgtest-dev nlohmann-json3-dev libcli11-dev
          libopenmpi-dev openmpi-bin
          python3 python3-numpy python3-torch python3-jsonschema
          "$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi
