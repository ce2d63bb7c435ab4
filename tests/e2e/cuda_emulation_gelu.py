#!/usr/bin/env python3
"""The CUDA kernels of GELU's tanh form (step.gelu and step.gelu_grad,
approximate tanh), run on the CPU, against float64.

The kernels (compiler/codegen/ElementwiseKernels.cpp, docs/codegen.md
"GELU") compute 0.5 x (1 + tanh u) as x sigmoid(2u) = x / (1 + e^-2u)
with one ex2 and one rcp, and the gradient as s + 2 x s c u' (s the
sigmoid, c = 1 - s taken as e s or 1 - s, whichever does not cancel).
stepc --dump-kernels writes each op's kernel (f32 and bf16); this test
compiles it with the host compiler against tests/e2e/emu/cuda_emu.h and
compares every element with the float64 values of the same functions
(through the sigmoid, which float64 evaluates without cancelling):

- f32: within 2e-5 of the exact value's terms (|gelu|, or |s| + |2 x s c
  u'| for the gradient: the gradient crosses zero near x = -0.75), or
  below 1e-30 where the exact value is (the negative tail underflows).
  The f32 argument of the exponential carries a few ulp, which the
  exponential turns into |2u| ulp of relative error (8e-6 at x = -8.2);
  on a GPU ex2.approx and rcp.approx add about 3 ulp. The tanh form in
  f32 (the CPU kernels', PyTorch's) loses the negative tail (1 + tanh u
  cancels: 0.8% off at x = -4.5, 0 from x = -5.8 on), so this test takes
  float64 and not the CPU backend as the reference;
- bf16: the f32 result rounded once: within half a bf16 ulp plus the f32
  bound;
- special values as the CPU kernels give them: NaN stays NaN, gelu(+inf)
  = +inf, gelu(-inf) = NaN (x times 0), gelu(-0) = -0, gelu'(+-inf) =
  NaN, gelu' of an x whose square is past f32's range NaN (inf * 0 in
  both forms); other finite inputs give finite results (gelu(-1e20) =
  -0, gelu'(1e4) = 1, gelu'(-1e4) = 0).

Inputs: a sweep over [-12, 12], normal draws, the tails (-100, 1e4,
-1e4, 1e20, -1e20), subnormals and the specials; gradients a uniform in
[-2, 2]. Grids of 1, 2 and 5 blocks give the same bits.

Usage: cuda_emulation_gelu.py --stepc STEPC --cxx CXX
"""
import argparse
import math
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run, rounded, single_kernel  # noqa: E402

N = 5000
SQRT_2_PI = math.sqrt(2.0 / math.pi)
KAPPA = 0.044715

HARNESS = r"""
#include "cuda_emu.h"
#include "kernel.inc"
#include "emu_io.h"
int main() {
DECLS
  std::vector<TYPE> out(NUM);
  const unsigned grids[] = {1, 2, 5};
  for (int run = 0; run < 3; ++run) {
    poison(out);
    emuLaunch(grids[run], BLOCK, [&] { KERNEL(ARGS); });
    writeRaw("out_" + std::to_string(run) + ".bin", out);
  }
}
"""


def model(dt, grad):
    t = f"tensor<{N}x{dt}>"
    if grad:
        return f"""module {{
  func.func @forward(%d: {t} {{step.kind = "input", step.name = "d"}}, %x: {t} {{step.kind = "input", step.name = "x"}}) -> ({t} {{step.name = "g"}}) {{
    %g = step.gelu_grad %d, %x approximate tanh : {t}
    return %g : {t}
  }}
}}
"""
    return f"""module {{
  func.func @forward(%x: {t} {{step.kind = "input", step.name = "x"}}) -> ({t} {{step.name = "y"}}) {{
    %y = step.gelu %x approximate tanh : {t}
    return %y : {t}
  }}
}}
"""


def exact(x, d):
    """float64 gelu(x), d gelu'(x), and the magnitudes of their terms."""
    with np.errstate(all="ignore"):
        u = SQRT_2_PI * (x + KAPPA * x ** 3)
        s = 0.5 * (1.0 + np.tanh(u))  # exact enough for u >= 0
        neg = u < 0
        s[neg] = 1.0 / (1.0 + np.exp(-2.0 * u[neg]))
        c = 1.0 / (1.0 + np.exp(2.0 * u))  # 1 - s
        y = x * s
        du = SQRT_2_PI * (1.0 + 3 * KAPPA * x * x)
        right = 2.0 * x * s * c * du
        g = d * (s + right)
        return y, np.abs(y), g, np.abs(d) * (np.abs(s) + np.abs(right))


def inputs(rng, dt):
    x = np.concatenate([
        np.linspace(-12.0, 12.0, 3000),
        rng.normal(0.0, 2.0, N - 3000 - 16),
        [-100.0, 1e4, -1e4, 1e20, -1e20, 1e-40, -1e-40, 0.0, -0.0,
         np.inf, -np.inf, np.nan, -0.7518, 3.0, -3.0, 30.0]])
    d = rng.uniform(-2.0, 2.0, N)
    d[-16:] = 1.0  # the tails and specials: gelu' itself
    return rounded(x, dt), rounded(d, dt)


def run(args, tmp, dt, grad):
    name = f"gelu{'_grad' if grad else ''}_{dt}"
    work = os.path.join(tmp, name)
    os.makedirs(work)
    _, src, block, kernel, params = single_kernel(
        args.stepc, name, model(dt, grad), work, False)
    if "stepExp2(" not in src or "stepRcp(1.0f + e)" not in src:
        sys.exit(f"FAIL {name}: {kernel} is not the ex2/rcp form")
    rng = np.random.default_rng(5 + grad)
    x, d = inputs(rng, dt)
    ins = [d, x] if grad else [x]
    ctype = "float" if dt == "f32" else "__nv_bfloat16"
    decls = []
    for k, v in enumerate(ins):
        v.astype(np.float64).tofile(os.path.join(work, f"in{k}.bin"))
        decls.append(f'  auto in{k} = readRaw<{ctype}>("in{k}.bin", {N});')
    args_ = ", ".join([f"in{k}.data()" for k in range(len(ins))] +
                      ["out.data()"])
    if len(params) != len(ins) + 1:
        sys.exit(f"FAIL {name}: {kernel} has parameters {params}")
    harness = (HARNESS.replace("DECLS", "\n".join(decls))
               .replace("TYPE", ctype).replace("NUM", str(N))
               .replace("BLOCK", str(block)).replace("KERNEL", kernel)
               .replace("ARGS", args_))
    build_and_run(args.cxx, work, src, harness)
    runs = [np.fromfile(os.path.join(work, f"out_{r}.bin"), dtype=np.float32)
            for r in range(3)]
    for r in (1, 2):
        if runs[r].tobytes() != runs[0].tobytes():
            sys.exit(f"FAIL {name}: grids 1 and {[1, 2, 5][r]} differ")
    got = runs[0].astype(np.float64)
    y, ymag, g, gmag = exact(x.astype(np.float64), d.astype(np.float64))
    want, mag = (g, gmag) if grad else (y, ymag)

    # The specials, as the CPU kernels give them.
    special = {np.inf: np.nan if grad else np.inf, -np.inf: np.nan}
    for i in np.flatnonzero(~np.isfinite(x)):
        w = np.nan if np.isnan(x[i]) else special[float(x[i])]
        ok = np.isnan(got[i]) if np.isnan(w) else got[i] == w
        if not ok:
            sys.exit(f"FAIL {name}: x = {x[i]!r}: got {got[i]!r}, want {w!r}")
    if not grad:
        zero = np.flatnonzero((x == 0) & np.signbit(x))
        if not all(got[i] == 0 and np.signbit(got[i]) for i in zero):
            sys.exit(f"FAIL {name}: gelu(-0) is not -0")
    fin = np.isfinite(x)
    if grad:  # x^2 past f32's range: inf * 0 in 2 x s c u', NaN as the CPU
        huge = fin & (np.abs(x.astype(np.float64)) > 1.8446744e19)
        if not np.isnan(got[huge]).all():
            sys.exit(f"FAIL {name}: gelu' of {x[huge]} is {got[huge]}, "
                     "not NaN")
        fin &= ~huge
    if not np.isfinite(got[fin]).all():
        i = int(np.flatnonzero(fin & ~np.isfinite(got))[0])
        sys.exit(f"FAIL {name}: x = {x[i]!r}: got {got[i]!r}")
    half_ulp = 2.0 ** -8 if dt == "bf16" else 0.0  # 8 significant bits
    bound = 2e-5 * mag[fin] + half_ulp * np.abs(want[fin]) + 1e-30
    err = np.abs(got[fin] - want[fin])
    ratio = err / bound
    worst = int(np.argmax(ratio))
    i = int(np.flatnonzero(fin)[worst])
    print(f"{name}: {kernel}: {int(fin.sum())} finite inputs, max err / "
          f"bound {ratio[worst]:.3g} (x = {x[i]!r}: got {got[i]!r}, want "
          f"{want[i]!r})")
    if ratio[worst] > 1:
        sys.exit(f"FAIL {name}: error above the bound")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-gelu-") as tmp:
        for dt in ("f32", "bf16"):
            for grad in (False, True):
                run(args, tmp, dt, grad)
    print("ok")


if __name__ == "__main__":
    main()
