#!/usr/bin/env python3
"""The embedding_grad kernels that stepc generates, run on the CPU.

embedding_grad sums, for every table row v, the gradient rows of the
positions whose index is v, in increasing position order, in f32, rounded
once (docs/codegen.md). Up to 16 K positions the kernel sorts keys
v * N + p in one block (bitonic, shared memory) and a block per row and 256
columns reads its run; beyond, a block per row scans every index. No GPU here, so:
stepc --dump-kernels writes the CUDA C++ of small models (one kernel
each), this test compiles it with the host compiler against
tests/e2e/emu/cuda_emu_sync.h (blocks one after another, their threads as fibers) and compares every
output bit with a numpy reference that adds the same float32 values in the
same order (so the bits must match exactly, and a sort that reordered the
positions of a row, dropped or doubled one, would show).

Cases: the sorted path in f32 (148 positions, padded to 256 keys; a hot
index at half the positions, indices -1 and V skipped, rows no position
touches) and bf16 (1000 positions, 300 columns: two per thread), and the
scanning path (20,000 positions); each run on two grids for the per-row
launch (1 and 3 blocks: the grid-stride loop), outputs poisoned first.

Usage: cuda_emulation_embedding.py --stepc STEPC --cxx CXX
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run, rounded, single_kernel  # noqa: E402

CTYPE = {"f32": "float", "bf16": "__nv_bfloat16"}


def model(shape, v, d, dt, it):
    idx = "x".join(map(str, shape)) + "x" + it
    g = "x".join(map(str, shape)) + f"x{d}x{dt}"
    return f"""module {{
  func.func @forward(%i: tensor<{idx}> {{step.kind = "input", step.name = "i"}}, %g: tensor<{g}> {{step.kind = "input", step.name = "g"}}) -> (tensor<{v}x{d}x{dt}> {{step.name = "w"}}) {{
    %w = step.embedding_grad %i, %g num_embeddings = {v} : tensor<{idx}>, tensor<{g}> -> tensor<{v}x{d}x{dt}>
    return %w : tensor<{v}x{d}x{dt}>
  }}
}}
"""


def reference(idx, g, v, dt):
    """float32 sums in increasing position order, rounded once."""
    out = np.zeros((v, g.shape[1]), np.float32)
    for p in range(idx.size):
        if 0 <= idx[p] < v:
            out[idx[p]] += g[p]  # float32 + float32, in position order
    return rounded(out, dt) if dt == "bf16" else out


def run_case(args, tag, shape, v, d, dt, it, idx, sorted_path):
    rng = np.random.default_rng(len(tag))
    n = int(np.prod(shape))
    g = rng.normal(0, 1, (n, d)).astype(np.float32)
    if dt == "bf16":
        g = rounded(g, "bf16").astype(np.float32)
    want = reference(idx, g, v, dt)
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-emb-") as tmp:
        _, src, block, name, params = single_kernel(
            args.stepc, tag, model(shape, v, d, dt, it), tmp, True)
        if sorted_path != (name + "_rows(" in src):
            sys.exit(f"FAIL {tag}: expected the "
                     f"{'sorted' if sorted_path else 'scanning'} kernel")
        idx.astype(np.float64).tofile(os.path.join(tmp, "in0.bin"))
        g.astype(np.float64).tofile(os.path.join(tmp, "in1.bin"))
        call = f"{name}(i.data(), g.data(), w.data())"
        lines = ['#include "cuda_emu_sync.h"', '#include "kernel.inc"',
                 '#include "emu_io.h"', "int main() {",
                 f'  auto i = readRaw<{ {"i64": "long long", "i32": "int"}[it] }>'
                 f'("in0.bin", {n});',
                 f'  auto g = readRaw<{CTYPE[dt]}>("in1.bin", {n * d});',
                 f"  std::vector<{CTYPE[dt]}> w({v * d});"]
        for run, grid in enumerate((1, 3)):
            lines.append("  poison(w);")
            if sorted_path:
                lines.append(f"  emuLaunch(1, {block}, [&] {{ {call}; }});")
                lines.append(f"  emuLaunch({grid}, 256, [&] {{ "
                             f"{call.replace(name + '(', name + '_rows(')}; }});")
            else:
                lines.append(f"  emuLaunch({grid}, {block}, [&] {{ {call}; }});")
            lines.append(f'  writeRaw("w{run}.bin", w);')
        build_and_run(args.cxx, tmp, src, "\n".join(lines + ["}", ""]))
        for run in range(2):
            got = np.fromfile(os.path.join(tmp, f"w{run}.bin"),
                              dtype=np.float32).reshape(want.shape)
            if got.tobytes() != want.astype(np.float32).tobytes():
                bad = np.argwhere(got != want)
                r, c = (int(x) for x in bad[0])
                sys.exit(f"FAIL {tag} run {run}: {len(bad)} elements differ, "
                         f"first w[{r}, {c}] = {got[r, c]!r}, want "
                         f"{want[r, c]!r} ({int((idx == r).sum())} positions)")
    touched = len(set(int(x) for x in idx if 0 <= x < v))
    print(f"{tag} ({name}): {v} rows x {d} bit-equal, {n} positions, "
          f"{touched} rows touched")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    rng = np.random.default_rng(5)
    # Sorted, f32: half the positions one hot index, the rest spread over
    # a third of the rows, and two indices outside [0, V).
    idx = rng.integers(0, 100, 148)
    idx[::2] = 7
    idx[5], idx[77] = -1, 300
    run_case(args, "sorted_f32", (4, 37), 300, 40, "f32", "i64", idx, True)
    # Sorted, bf16, i32 indices, 300 columns.
    idx = rng.integers(0, 500, 1000)
    idx[rng.integers(0, 1000, 300)] = 3
    run_case(args, "sorted_bf16", (2, 500), 500, 300, "bf16", "i32", idx,
             True)
    # Scanning: 20,000 positions, more than the sort holds.
    idx = rng.integers(0, 40, 20000)
    run_case(args, "scan_f32", (4, 5000), 40, 8, "f32", "i32", idx, False)
    print("ok")


if __name__ == "__main__":
    main()
