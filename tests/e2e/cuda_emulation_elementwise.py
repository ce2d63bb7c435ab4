#!/usr/bin/env python3
"""A bf16 elementwise fusion that stepc generates, run on the CPU, bit for
bit against numpy.

Inside a fusion, each bf16 op's f32 result is rounded to bf16 and widened
back as the unfused op's store would (docs/codegen.md, "Per-element
code"), so a fused chain equals the unfused ops bit for bit. No GPU here,
so: stepc --dump-kernels writes the CUDA C++ of one fused chain (x * y + z
- x, every op bf16), this test compiles it with the host compiler against
tests/e2e/emu/cuda_emu.h (whose bf16 conversion rounds to nearest even,
as cuda_bf16.h) and compares every output bit with a numpy reference that
rounds each op's float32 result to bf16. A fusion that kept an
intermediate in f32 (skipped a rounding) or rounded another way fails.

The inputs make the hard cases common: products of two bf16 values are
exact in f32 and land on a tie between two bf16 values about one time in
four; values near bf16's largest finite value (3.39e38) round up to
infinity; products overflow f32; subnormals, zeros of both signs,
infinities and NaN. Checks: every non-NaN output equal bit for bit, NaN
exactly where the reference has NaN; the kernel is one fusion that rounds
each op; a grid-stride launch with 1, 2 and 5 blocks gives the same bits.

A second kernel: pads summed (the gradient of slices), fused into one
loop, against numpy bit for bit (the padding tests and fill value); and
pads that tile the last dim with +0.0 fills (GPT-2's packed q/k/v
gradient), which the fused code reads as one concatenation (a piece's
element plus +0.0: -0 inputs, which the adds make +0, check the sign).

A third: the f32 -> bf16 casts of three arguments (AMP's copies of the
parameters), which step-fuse makes one multi_tensor kernel (form C: a
segment of blocks per tensor, the 6000-element one 4 per thread, the
77- and 15-element ones one shared copy of their scalar code), run at
its full grid in three block orders, against numpy's round to nearest
even bit for bit (ties, values past bf16's largest, subnormals, NaN).

Usage: cuda_emulation_elementwise.py --stepc STEPC --cxx CXX
"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run, rounded, single_kernel  # noqa: E402

N = 6000

MLIR = f"""module {{
  func.func @forward(%x: tensor<{N}xbf16> {{step.kind = "input", step.name = "x"}}, %y: tensor<{N}xbf16> {{step.kind = "input", step.name = "y"}}, %z: tensor<{N}xbf16> {{step.kind = "input", step.name = "z"}}) -> (tensor<{N}xbf16> {{step.name = "r"}}) {{
    %a = step.mul %x, %y : tensor<{N}xbf16>, tensor<{N}xbf16>
    %b = step.add %a, %z : tensor<{N}xbf16>, tensor<{N}xbf16>
    %r = step.sub %b, %x : tensor<{N}xbf16>, tensor<{N}xbf16>
    return %r : tensor<{N}xbf16>
  }}
}}
"""

# The gradient of three slices of a packed projection (GPT-2's q, k, v):
# each padded to the projection's shape (one with a fill value and a
# leading dim too), summed. step-fuse makes the pads and adds one loop
# kernel (vectorized: 180 elements).
PAD_MLIR = """module {
  func.func @forward(%a: tensor<2x5x6xbf16> {step.kind = "input", step.name = "a"}, %b: tensor<2x5x6xbf16> {step.kind = "input", step.name = "b"}, %c: tensor<1x5x6xbf16> {step.kind = "input", step.name = "c"}) -> (tensor<2x5x18xbf16> {step.name = "r"}) {
    %pa = step.pad %a low = [0, 0, 0] high = [0, 0, 12] value = 0.0 : tensor<2x5x6xbf16> -> tensor<2x5x18xbf16>
    %pb = step.pad %b low = [0, 0, 6] high = [0, 0, 6] value = 0.0 : tensor<2x5x6xbf16> -> tensor<2x5x18xbf16>
    %s = step.add %pa, %pb : tensor<2x5x18xbf16>, tensor<2x5x18xbf16>
    %pc = step.pad %c low = [1, 0, 12] high = [0, 0, 0] value = 0.3 : tensor<1x5x6xbf16> -> tensor<2x5x18xbf16>
    %r = step.add %s, %pc : tensor<2x5x18xbf16>, tensor<2x5x18xbf16>
    return %r : tensor<2x5x18xbf16>
  }
}
"""
# Three pads that tile the last dim (a concatenation), summed in another
# order than their windows.
CONCAT_MLIR = """module {
  func.func @forward(%a: tensor<2x5x6xbf16> {step.kind = "input", step.name = "a"}, %b: tensor<2x5x6xbf16> {step.kind = "input", step.name = "b"}, %c: tensor<2x5x6xbf16> {step.kind = "input", step.name = "c"}) -> (tensor<2x5x18xbf16> {step.name = "r"}) {
    %pa = step.pad %a low = [0, 0, 0] high = [0, 0, 12] value = 0.0 : tensor<2x5x6xbf16> -> tensor<2x5x18xbf16>
    %pb = step.pad %b low = [0, 0, 6] high = [0, 0, 6] value = 0.0 : tensor<2x5x6xbf16> -> tensor<2x5x18xbf16>
    %pc = step.pad %c low = [0, 0, 12] high = [0, 0, 0] value = 0.0 : tensor<2x5x6xbf16> -> tensor<2x5x18xbf16>
    %s = step.add %pc, %pa : tensor<2x5x18xbf16>, tensor<2x5x18xbf16>
    %r = step.add %pb, %s : tensor<2x5x18xbf16>, tensor<2x5x18xbf16>
    return %r : tensor<2x5x18xbf16>
  }
}
"""

HARNESS = r"""
#include "cuda_emu.h"
#include "kernel.inc"
#include "emu_io.h"
int main() {
  auto x = readRaw<__nv_bfloat16>("in0.bin", NUM0);
  auto y = readRaw<__nv_bfloat16>("in1.bin", NUM1);
  auto z = readRaw<__nv_bfloat16>("in2.bin", NUM2);
  std::vector<__nv_bfloat16> out(NUM);
  const unsigned grids[] = {1, 2, 5};
  for (int run = 0; run < 3; ++run) {
    poison(out);
    emuLaunch(grids[run], BLOCK, [&] { KERNEL(x.data(), y.data(), z.data(), out.data()); });
    writeRaw("out_" + std::to_string(run) + ".bin", out);
  }
}
"""


def inputs(rng):
    """Three bf16 vectors (as float32) full of rounding's edge cases."""
    def draw(scale):
        v = rng.normal(0, 1, N) * scale
        return rounded(v, "bf16")
    x, y, z = draw(4.0), draw(4.0), draw(4.0)
    n = N // 6
    # Near bf16's largest finite value: x * 1 + z rounds past it.
    x[:n] = rounded(rng.uniform(3.0e38, 3.39e38, n), "bf16")
    y[:n] = 1.0
    z[:n] = rounded(rng.uniform(1e36, 2e36, n), "bf16")
    # Products beyond f32's range, and tiny ones (subnormal f32).
    x[n:2 * n] = rounded(rng.uniform(1e30, 1e38, n), "bf16")
    y[n:2 * n] = rounded(rng.uniform(1e8, 1e10, n), "bf16")
    x[2 * n:3 * n] = rounded(rng.uniform(1e-30, 1e-20, n), "bf16")
    y[2 * n:3 * n] = rounded(rng.uniform(1e-18, 1e-9, n), "bf16")
    z[2 * n:3 * n] = 0.0
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-40,
                        3.3895e38, -3.3895e38, 1.0], dtype=np.float32)
    for k, v in enumerate((x, y, z)):
        at = 3 * n + k * 50
        v[at:at + 200] = rounded(rng.choice(special, 200), "bf16")
    return x, y, z


def reference(x, y, z):
    with np.errstate(all="ignore"):
        a = rounded(x * y, "bf16")
        b = rounded(a + z, "bf16")
        return rounded(b - x, "bf16")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    x, y, z = inputs(rng)
    want = reference(x, y, z)
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-ew-") as tmp:
        _, src, block, name, params = single_kernel(
            args.stepc, "bf16_chain", MLIR, tmp, True)
        body = src.split("__global__")[1]
        if body.count("__float2bfloat16_rn(r0)") < 3:
            sys.exit(f"FAIL: {name} does not round each of its three ops")
        if len(params) != 4:
            sys.exit(f"FAIL: {name} has parameters {params}")
        for k, v in enumerate((x, y, z)):
            v.astype(np.float64).tofile(os.path.join(tmp, f"in{k}.bin"))
        harness = HARNESS.replace("NUM0", str(N)).replace(
            "NUM1", str(N)).replace("NUM2", str(N)).replace(
            "NUM", str(N)).replace("BLOCK", str(block)).replace(
            "KERNEL", name)
        build_and_run(args.cxx, tmp, src, harness)
        runs = [np.fromfile(os.path.join(tmp, f"out_{r}.bin"),
                            dtype=np.float32) for r in range(3)]
    for r in (1, 2):
        if runs[r].tobytes() != runs[0].tobytes():
            sys.exit(f"FAIL: {name}: grids 1 and {[1, 2, 5][r]} differ")
    got = runs[0]
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    if (nan_w != nan_g).any():
        i = int(np.flatnonzero(nan_w != nan_g)[0])
        sys.exit(f"FAIL: {name}: element {i}: got {got[i]!r}, want "
                 f"{want[i]!r} (x {x[i]!r}, y {y[i]!r}, z {z[i]!r})")
    ok = ~nan_w
    diff = got[ok].view(np.uint32) != want[ok].view(np.uint32)
    if diff.any():
        i = int(np.flatnonzero(ok)[np.flatnonzero(diff)[0]])
        sys.exit(f"FAIL: {name}: element {i}: got {got[i]!r}, want "
                 f"{want[i]!r} (x {x[i]!r}, y {y[i]!r}, z {z[i]!r}); "
                 f"{int(diff.sum())} of {int(ok.sum())} differ")
    with np.errstate(all="ignore"):
        ties = int((rounded(x * y, "bf16") != x * y).sum())
    print(f"{name}: {N} elements bit-equal ({int(nan_w.sum())} NaN, "
          f"{int(np.isinf(want).sum())} infinite, {ties} inexact products), "
          "grids 1, 2, 5 alike")
    check_pads(args, rng)
    check_param_casts(args, rng)
    print("ok")


CAST_SIZES = (6000, 77, 15)
CAST_MLIR = "module {{\n  func.func @forward({args}) -> ({results}) {{\n{body}    return {rets} : {types}\n  }}\n}}\n".format(
    args=", ".join(f'%p{k}: tensor<{n}xf32> {{step.kind = "input", step.name = "p{k}"}}'
                   for k, n in enumerate(CAST_SIZES)),
    results=", ".join(f'tensor<{n}xbf16> {{step.name = "c{k}"}}'
                      for k, n in enumerate(CAST_SIZES)),
    body="".join(f"    %c{k} = step.cast %p{k} : tensor<{n}xf32> -> tensor<{n}xbf16>\n"
                 for k, n in enumerate(CAST_SIZES)),
    rets=", ".join(f"%c{k}" for k in range(len(CAST_SIZES))),
    types=", ".join(f"tensor<{n}xbf16>" for n in CAST_SIZES))

CAST_HARNESS = r"""
#include "cuda_emu.h"
#include "kernel.inc"
#include "emu_io.h"
#include <algorithm>
#include <random>
int main() {
  auto p0 = readRaw<float>("in0.bin", N0);
  auto p1 = readRaw<float>("in1.bin", N1);
  auto p2 = readRaw<float>("in2.bin", N2);
  std::vector<__nv_bfloat16> c0(N0), c1(N1), c2(N2);
  std::vector<unsigned> order(GRID);
  for (unsigned b = 0; b < GRID; ++b)
    order[b] = b;
  for (int run = 0; run < 3; ++run) {
    if (run == 1)
      std::reverse(order.begin(), order.end());
    if (run == 2)
      std::shuffle(order.begin(), order.end(), std::mt19937(3));
    poison(c0);
    poison(c1);
    poison(c2);
    emuLaunchOrder(order, BLOCK, [&] { KERNEL(pA.data(), pB.data(), pC.data(), cA.data(), cB.data(), cC.data()); });
    writeRaw("c0_" + std::to_string(run) + ".bin", c0);
    writeRaw("c1_" + std::to_string(run) + ".bin", c1);
    writeRaw("c2_" + std::to_string(run) + ".bin", c2);
  }
}
"""


def check_param_casts(args, rng):
    """CAST_MLIR's casts as one multi_tensor kernel, bit for bit."""
    ps = []
    for n in CAST_SIZES:
        # f32 values with bits below bf16's: half of them exact ties.
        v = rng.normal(0, 3, n).astype(np.float32)
        bits = v.view(np.uint32) & np.uint32(0xffff0000)
        bits[: n // 2] |= np.uint32(0x8000)  # exactly halfway
        v = bits.view(np.float32).copy()
        special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40,
                            -3e-39, 3.4e38, -3.39e38, 3.3895e38, 1.0],
                           dtype=np.float32)
        v[n // 2: n // 2 + 11] = special[: max(0, min(11, n - n // 2))]
        ps.append(v)
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-cast-") as tmp:
        _, src, block, name, params = single_kernel(
            args.stepc, "param_casts", CAST_MLIR, tmp, True)
        blocks = [int(b) for b in re.findall(r"blocks \[\d+, (\d+)\)", src)]
        if not name.startswith("fusion_") or len(blocks) != 3 or \
                "4 per thread" not in src:
            sys.exit(f"FAIL: {name} is not one multi_tensor kernel of three "
                     "segments, one vectorized")
        if not re.search(r"if \(code == 0\) \{ // tensors \d+, \d+\n", src) \
                or "code == 1" in src:
            sys.exit(f"FAIL: {name}: the scalar casts of 77 and 15 elements "
                     "do not share one code")
        # Tensor j of the kernel (in<j>, out<j>) by its size.
        sizes = [int(n) for n in re.findall(r"// tensor \d+: (\d+) elements",
                                            src)]
        if sorted(sizes) != sorted(CAST_SIZES):
            sys.exit(f"FAIL: {name}'s segments are of {sizes} elements")
        perm = [CAST_SIZES.index(n) for n in sizes]
        for k, v in enumerate(ps):
            v.astype(np.float64).tofile(os.path.join(tmp, f"in{k}.bin"))
        harness = CAST_HARNESS
        for key, val in (("N0", CAST_SIZES[0]), ("N1", CAST_SIZES[1]),
                         ("N2", CAST_SIZES[2]), ("GRID", max(blocks)),
                         ("BLOCK", block), ("KERNEL", name)):
            harness = re.sub(r"\b%s\b" % key, str(val), harness)
        for j, key in enumerate("ABC"):
            harness = harness.replace(f"p{key}.", f"p{perm[j]}.").replace(
                f"c{key}.", f"c{perm[j]}.")
        build_and_run(args.cxx, tmp, src, harness)
        for k, v in enumerate(ps):
            want = rounded(v.astype(np.float64), "bf16").astype(np.float32)
            for r in range(3):
                got = np.fromfile(os.path.join(tmp, f"c{k}_{r}.bin"),
                                  dtype=np.float32)
                nan = np.isnan(want)
                if (np.isnan(got) != nan).any() or \
                        got[~nan].tobytes() != want[~nan].tobytes():
                    i = int(np.flatnonzero((got != want) & ~nan)[0])
                    sys.exit(f"FAIL: {name} tensor {k} (order {r}): element "
                             f"{i}: got {got[i]!r}, want {want[i]!r} (from "
                             f"{v[i]!r})")
    print(f"{name}: casts of {', '.join(map(str, CAST_SIZES))} elements in "
          f"{max(blocks)} blocks bit-equal in three block orders")


def check_pads(args, rng):
    """PAD_MLIR's and CONCAT_MLIR's one fused kernel each against numpy,
    bit for bit, on every grid: the pads' index tests, fill value and
    clamped reads; the concatenation's pieces and signed zeros."""
    a, b = (rounded(rng.normal(0, 2, (2, 5, 6)), "bf16") for _ in range(2))
    c = rounded(rng.normal(0, 2, (1, 5, 6)), "bf16")
    pa, pb, pc = (np.zeros((2, 5, 18), np.float32) for _ in range(3))
    pa[:, :, :6] = a
    pb[:, :, 6:12] = b
    pc[:] = rounded(np.float32(0.3), "bf16")
    pc[1:, :, 12:] = c
    want = rounded(rounded(pa + pb, "bf16") + pc, "bf16").reshape(-1)
    run_pads(args, "pad_sum", PAD_MLIR, (a, b, c), want, concat=False)
    a, b, c = (rounded(rng.normal(0, 2, (2, 5, 6)), "bf16") for _ in range(3))
    for v in (a, b, c):  # zeros of both signs in every piece
        v.reshape(-1)[:4] = [-0.0, 0.0, -0.0, 1.0]
    pa, pb, pc = (np.zeros((2, 5, 18), np.float32) for _ in range(3))
    pa[:, :, :6], pb[:, :, 6:12], pc[:, :, 12:] = a, b, c
    want = rounded(pb + rounded(pc + pa, "bf16"), "bf16").reshape(-1)
    if not (np.signbit(want) == 0)[want == 0].all():
        sys.exit("FAIL: the reference's zeros are not all +0")
    run_pads(args, "concat", CONCAT_MLIR, (a, b, c), want, concat=True)


def run_pads(args, tag, mlir, ins, want, concat):
    """One fused pads-and-adds kernel, grids 1, 2 and 5, bit for bit."""
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-pad-") as tmp:
        _, src, block, name, params = single_kernel(
            args.stepc, tag, mlir, tmp, True)
        if not name.startswith("fusion_") or "Vec<" not in src:
            sys.exit(f"FAIL: {name} is not one vectorized loop fusion")
        if ("+ 0.0f;" in src) != concat:
            sys.exit(f"FAIL: {name}: the concatenation read "
                     f"{'missing' if concat else 'used'}")
        for k, v in enumerate(ins):
            v.astype(np.float64).tofile(os.path.join(tmp, f"in{k}.bin"))
        harness = HARNESS.replace("NUM0", str(ins[0].size)).replace(
            "NUM1", str(ins[1].size)).replace("NUM2", str(ins[2].size)).replace(
            "NUM", str(want.size)).replace("BLOCK", str(block)).replace(
            "KERNEL", name)
        build_and_run(args.cxx, tmp, src, harness)
        for r in range(3):
            got = np.fromfile(os.path.join(tmp, f"out_{r}.bin"),
                              dtype=np.float32)
            if got.tobytes() != want.astype(np.float32).tobytes():
                i = int(np.flatnonzero(got.view(np.uint32) !=
                                       want.astype(np.float32)
                                       .view(np.uint32))[0])
                sys.exit(f"FAIL: {name} (grid {[1, 2, 5][r]}): element {i}: "
                         f"got {got[i]!r}, want {want[i]!r}")
    print(f"{name}: {'a concatenation of three pads' if concat else 'three pads and two adds'}, "
          f"{want.size} elements bit-equal")

if __name__ == "__main__":
    main()
