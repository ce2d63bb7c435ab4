#!/usr/bin/env python3
"""The AdamW updates of six tensors as stepc's one multi_tensor kernel, run
on the CPU (tests/e2e/emu/cuda_emu.h) against AdamW computed in float64.

Segments whose code differs only in pointers and segment share one copy
of that code after the dispatch, which binds each tensor's pointers in a
switch (compiler/codegen/MultiTensorKernels.cpp; GPT-2 124M's AdamW
kernels: 48 tensors, 4 codes). The six tensors make the three cases: two
vectorized f32 tensors (4100 elements in 5 blocks, and 520) share one
code, three scalar ones (77, 15 and 9) another, and one with a bf16
gradient (64 elements) has its own, inlined. Every gradient is scaled by a rank-0 clip
coefficient first (the prologue step-optimizer writes, loaded once before
the loop). A pointer bound to another tensor's, a wrong segment start or
work count, or a tensor left out gives wrong or unwritten (NaN-poisoned)
elements.

The kernel runs at its full grid in increasing, decreasing and shuffled
block order, each giving the same bits. Which kernel parameter is which
tensor comes from step-opt --step-fuse's printed fusion (its operands and
the function's returns).

Usage: cuda_emulation_optimizer.py --stepc STEPC --step-opt STEP_OPT --cxx CXX
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run, fill, rounded, single_kernel  # noqa: E402

# (elements, gradient type); the bf16 one is cast to f32 before its update.
TENSORS = ((4100, "f32"), (77, "f32"), (520, "f32"), (15, "f32"),
           (64, "bf16"), (9, "f32"))
LR, STEP, COEF = 1e-2, 3, 0.5
BETA1, BETA2, EPS, WD = 0.9, 0.999, 1e-8, 0.1


def model():
    """@forward: the clipped AdamW update of every tensor; arguments p, g,
    m, v of each tensor in turn, then t, lr, coef; returns p', m', v' of
    each in turn."""
    args, body, rets, types = [], [], [], []
    for k, (n, gt) in enumerate(TENSORS):
        t = f"tensor<{n}xf32>"
        for name, ty in (("p", t), ("g", f"tensor<{n}x{gt}>"), ("m", t),
                         ("v", t)):
            args.append(f'%{name}{k}: {ty} {{step.kind = "input", '
                        f'step.name = "{name}{k}"}}')
        g = f"%g{k}"
        if gt != "f32":
            body.append(f"    %gc{k} = step.cast %g{k} : tensor<{n}x{gt}> "
                        f"-> {t}")
            g = f"%gc{k}"
        body.append(f"    %c{k} = step.broadcast_in_dim %coef, dims = [] : "
                    f"tensor<f32> -> {t}")
        body.append(f"    %gs{k} = step.mul {g}, %c{k} : {t}")
        body.append(f"    %q{k}, %n{k}, %w{k} = step.adamw_update %p{k}, "
                    f"%gs{k}, %m{k}, %v{k}, %t, %lr {{weight_decay = {WD} : "
                    f"f64}} : {t}, tensor<i64>, tensor<f32>")
        rets += [f"%q{k}", f"%n{k}", f"%w{k}"]
        types += [t] * 3
    args += ['%t: tensor<i64> {step.kind = "input", step.name = "t"}',
             '%lr: tensor<f32> {step.kind = "input", step.name = "lr"}',
             '%coef: tensor<f32> {step.kind = "input", step.name = "coef"}']
    results = ", ".join(f'{ty} {{step.name = "r{j}"}}'
                        for j, ty in enumerate(types))
    return ("module {\n  func.func @forward(" + ", ".join(args) + ") -> (" +
            results + ") {\n" + "\n".join(body) + "\n    return " +
            ", ".join(rets) + " : " + ", ".join(types) + "\n  }\n}\n")


HARNESS = r"""
#include "cuda_emu.h"
#include "kernel.inc"
#include "emu_io.h"
int main() {
DECLS
  for (int run = 0; run < 3; ++run) {
POISON
    emuLaunchOrder(emuOrders(true, GRID)[run], BLOCK, [&] { KERNEL(ARGS); });
WRITES
  }
}
"""


def fused_operands(step_opt, mlir_path):
    """For the one multi_tensor fusion of step-opt --step-fuse's output:
    the @forward argument each fusion operand is, and the fusion result
    each return operand is."""
    out = subprocess.run([step_opt, mlir_path, "--step-fuse"], check=True,
                         capture_output=True, text=True).stdout
    fusions = re.findall(r'= step\.fusion "multi_tensor"\(([^)]*)\)', out)
    if len(fusions) != 1:
        sys.exit(f"FAIL: {len(fusions)} multi_tensor fusions, expected 1:\n"
                 f"{out}")
    operands = [int(re.fullmatch(r"%arg(\d+)", a.strip()).group(1))
                for a in fusions[0].split(",")]
    ret = re.search(r"return ([^:]*) :", out).group(1)
    results = [int(re.fullmatch(r"%0#(\d+)", r.strip()).group(1))
               for r in ret.split(",")]
    return operands, results


def reference(p, g, m, v):
    """AdamW with decoupled weight decay (Loshchilov and Hutter; PyTorch's
    torch.optim.AdamW), float64, on the clipped gradient; also magnitudes
    of each result's terms for the error bound."""
    g = g * COEF
    m1 = BETA1 * m + (1 - BETA1) * g
    v1 = BETA2 * v + (1 - BETA2) * g * g
    bc1, bc2 = 1 - BETA1 ** STEP, 1 - BETA2 ** STEP
    step = LR / bc1 * m1 / (np.sqrt(v1) / np.sqrt(bc2) + EPS)
    p1 = p * (1 - LR * WD) - step
    mags = (np.abs(p) + np.abs(step), np.abs(BETA1 * m) + np.abs(g),
            BETA2 * v + g * g)
    return (p1, m1, v1), mags


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--step-opt", required=True)
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    vals = []  # @forward's arguments in order, as float64
    for n, gt in TENSORS:
        p = rng.normal(0, 1, n)
        g = rng.normal(0, 1, n)
        if gt == "bf16":
            g = rounded(g, "bf16").astype(np.float64)
        else:
            g = g.astype(np.float32).astype(np.float64)
        m = rng.normal(0, 0.1, n).astype(np.float32).astype(np.float64)
        v = np.abs(rng.normal(0, 0.01, n)).astype(np.float32).astype(
            np.float64)
        vals += [p.astype(np.float32).astype(np.float64), g, m, v]
    vals += [np.array([STEP], np.float64), np.array([LR], np.float32)
             .astype(np.float64), np.array([COEF], np.float64)]

    with tempfile.TemporaryDirectory(prefix="stepjit-emu-adamw-") as tmp:
        text = model()
        path = os.path.join(tmp, "adamw.mlir")
        with open(path, "w") as f:
            f.write(text)
        operands, results = fused_operands(args.step_opt, path)
        _, src, block, name, params = single_kernel(
            args.stepc, "adamw", text, tmp, True)
        body = src.split("__global__")[1]
        for want in ("if (code == 0) { // tensors 0, 2\n",
                     "else if (code == 1) { // tensors 1, 3, 5\n",
                     "code = 0, seg = 2;", "code = 1, seg = 5;",
                     "// tensor 4: 64 elements"):
            if want not in body:
                sys.exit(f"FAIL: {name} has no {want!r}:\n{src}")
        if "code = 2" in body or body.count("pow(0.90000000000000002") != 3:
            sys.exit(f"FAIL: {name} is not two shared codes and one own "
                     f"code:\n{src}")
        grid = int(max(re.findall(r"blocks \[\d+, (\d+)\)", body), key=int))
        decls, poison, writes, argl = [], [], [], []
        for const, ctype, pname in params:
            if const:
                a = operands[int(pname[2:])]
                vals[a].tofile(os.path.join(tmp, f"in{a}.bin"))
                decls.append(f"  auto {pname} = readRaw<{ctype}>(\"in{a}.bin\", "
                             f"{vals[a].size});")
            else:
                j = int(pname[3:])
                n = TENSORS[results.index(j) // 3][0]
                decls.append(f"  std::vector<{ctype}> {pname}({n});")
                poison.append(f"    poison({pname});")
                writes.append(f"    writeRaw(\"{pname}_\" + std::to_string(run)"
                              f" + \".bin\", {pname});")
            argl.append(pname + ".data()")
        harness = fill(HARNESS, {"DECLS": "\n".join(decls),
                                 "POISON": "\n".join(poison),
                                 "WRITES": "\n".join(writes),
                                 "ARGS": ", ".join(argl), "GRID": grid,
                                 "BLOCK": block, "KERNEL": name})
        build_and_run(args.cxx, tmp, src, harness)
        worst = 0.0
        for k, (n, gt) in enumerate(TENSORS):
            wants, mags = reference(*vals[4 * k:4 * k + 4])
            for r, what in enumerate(("param", "exp_avg", "exp_avg_sq")):
                j = results[3 * k + r]
                runs = [np.fromfile(os.path.join(tmp, f"out{j}_{o}.bin"),
                                    dtype=np.float32) for o in range(3)]
                if any(x.tobytes() != runs[0].tobytes() for x in runs[1:]):
                    sys.exit(f"FAIL: tensor {k} {what}: the block orders "
                             "differ")
                got = runs[0].astype(np.float64)
                if not np.isfinite(got).all():
                    sys.exit(f"FAIL: tensor {k} ({n} elements) {what}: "
                             f"{int((~np.isfinite(got)).sum())} elements "
                             "unwritten or not finite")
                # f32 arithmetic: a few roundings of each term.
                bound = 2e-6 * mags[r] + 1e-30
                ratio = float((np.abs(got - wants[r]) / bound).max())
                worst = max(worst, ratio)
                if ratio > 1:
                    i = int(np.argmax(np.abs(got - wants[r]) / bound))
                    sys.exit(f"FAIL: tensor {k} ({n} elements, {gt} "
                             f"gradient) {what}[{i}]: got {got[i]!r}, want "
                             f"{wants[r][i]!r}")
    print(f"{name}: {len(TENSORS)} AdamW updates in {grid} blocks (two "
          f"shared codes, one own) match float64 AdamW, max error / bound "
          f"{worst:.3g}, three block orders alike")
    print("ok")


if __name__ == "__main__":
    main()
