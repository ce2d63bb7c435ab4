#!/usr/bin/env python3
"""The optimizer's multi-tensor kernels as stepc emits them, run on the CPU
(tests/e2e/emu/cuda_emu.h, cuda_emu_sync.h) against float64.

Segments whose code differs only in pointers and a few numbers share one
copy of that code after the dispatch, which binds each tensor's pointers
and numbers in a switch (compiler/codegen/SharedSegments.h; GPT-2 124M's
AdamW kernels: 48 tensors, 4 codes). Three kernels:

- AdamW over six tensors: two vectorized f32 tensors (4100 elements in 5
  blocks, and 520) share one code, three scalar ones (77, 15 and 9)
  another, and one with a bf16 gradient (64 elements) has its own,
  inlined. Every gradient is scaled by a rank-0 clip coefficient first
  (the prologue step-optimizer writes, loaded once before the loop).
- The global gradient norm and clip coefficient (form B: chunked sums of
  squares, the last block combining each tensor's partials in one loop
  over the tensors), six gradients of the same three kinds, the first in
  3 chunks.
- step.check_finite (--guard-finite) over five tensors of two codes, on
  finite values and with one NaN or infinity in a later chunk, a last
  element, a first element, a bf16 tensor.

A pointer bound to another tensor's, a wrong segment start, chunk or work
count, or a tensor left out gives wrong or unwritten (poisoned) results.
Each kernel runs at its full grid in increasing, decreasing and shuffled
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
# The global norm's gradients: the first in 3 chunks of 8192.
NORM_TENSORS = ((20000, "f32"), (77, "f32"), (520, "f32"), (15, "f32"),
                (64, "bf16"), (9, "f32"))
LR, STEP, COEF = 1e-2, 3, 0.5
BETA1, BETA2, EPS, WD = 0.9, 0.999, 1e-8, 0.1


def input_arg(name, ty):
    """@forward's argument %name of type ty, a model input."""
    return f'%{name}: {ty} {{step.kind = "input", step.name = "{name}"}}'


def gradient_f32(body, k, n, gt):
    """Gradient %g<k> of n elements of type gt as f32: itself, or a cast
    appended to `body`."""
    if gt == "f32":
        return f"%g{k}"
    body.append(f"    %gc{k} = step.cast %g{k} : tensor<{n}x{gt}> -> "
                f"tensor<{n}xf32>")
    return f"%gc{k}"


def model():
    """@forward: the clipped AdamW update of every tensor; arguments p, g,
    m, v of each tensor in turn, then t, lr, coef; returns p', m', v' of
    each in turn."""
    args, body, rets, types = [], [], [], []
    for k, (n, gt) in enumerate(TENSORS):
        t = f"tensor<{n}xf32>"
        for name, ty in (("p", t), ("g", f"tensor<{n}x{gt}>"), ("m", t),
                         ("v", t)):
            args.append(input_arg(f"{name}{k}", ty))
        g = gradient_f32(body, k, n, gt)
        body.append(f"    %c{k} = step.broadcast_in_dim %coef, dims = [] : "
                    f"tensor<f32> -> {t}")
        body.append(f"    %gs{k} = step.mul {g}, %c{k} : {t}")
        body.append(f"    %q{k}, %n{k}, %w{k} = step.adamw_update %p{k}, "
                    f"%gs{k}, %m{k}, %v{k}, %t, %lr {{weight_decay = {WD} : "
                    f"f64}} : {t}, tensor<i64>, tensor<f32>")
        rets += [f"%q{k}", f"%n{k}", f"%w{k}"]
        types += [t] * 3
    args += [input_arg("t", "tensor<i64>"), input_arg("lr", "tensor<f32>"),
             input_arg("coef", "tensor<f32>")]
    results = ", ".join(f'{ty} {{step.name = "r{j}"}}'
                        for j, ty in enumerate(types))
    return ("module {\n  func.func @forward(" + ", ".join(args) + ") -> (" +
            results + ") {\n" + "\n".join(body) + "\n    return " +
            ", ".join(rets) + " : " + ", ".join(types) + "\n  }\n}\n")


HARNESS = r"""
#include "cuda_emu_sync.h"
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
    results = [int(re.fullmatch(r"%\d+#(\d+)", r.strip()).group(1))
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


def run_fused(args, tmp, label, text, vals, sizes, fused=True):
    """Compiles @forward `text` (one multi_tensor kernel; with fused=False
    one op's kernel whose parameters are @forward's arguments and results
    in order), runs it on the emulator at its full grid in three block
    orders with the arguments `vals` (float64 arrays, @forward's order) and
    returns (its name, its source, its grid, {return index: [three float64
    arrays]}); `sizes[i]` is return i's element count."""
    path = os.path.join(tmp, label + ".mlir")
    with open(path, "w") as f:
        f.write(text)
    if fused:
        operands, results = fused_operands(args.step_opt, path)
    else:
        operands, results = list(range(len(vals))), list(range(len(sizes)))
    _, src, block, name, params = single_kernel(args.stepc, label, text, tmp,
                                                True)
    body = src.split("__global__")[1]
    grid = int(max(re.findall(r"blocks \[\d+, (\d+)\)", body) or
                   re.findall(r"== (\d+) - 1;", body) or
                   re.findall(r"vb < (\d+)u; vb \+= gridDim.x", body),
                   key=int))
    decls, poison, writes, argl = [], [], [], []
    for const, ctype, pname in params:
        if const:
            a = operands[int(pname[2:])]
            vals[a].tofile(os.path.join(tmp, f"in{a}.bin"))
            decls.append(f"  auto {pname} = readRaw<{ctype}>(\"in{a}.bin\", "
                         f"{vals[a].size});")
        else:
            j = int(pname[3:])
            decls.append(f"  std::vector<{ctype}> {pname}"
                         f"({sizes[results.index(j)]});")
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
    runs = {}
    for i, j in enumerate(results):
        runs[i] = [np.fromfile(os.path.join(tmp, f"out{j}_{o}.bin"),
                               dtype=np.float32).astype(np.float64)
                   for o in range(3)]
        if any(x.tobytes() != runs[i][0].tobytes() for x in runs[i][1:]):
            sys.exit(f"FAIL: {name}: return {i} differs between block "
                     "orders")
        if not np.isfinite(runs[i][0]).all() or (runs[i][0] == 0xab).any():
            sys.exit(f"FAIL: {name}: return {i} has "
                     f"{int((~np.isfinite(runs[i][0])).sum())} unwritten or "
                     "non-finite elements")
    return name, src, grid, runs


def draw(rng, n, gt, scale=1.0):
    """n gradient values of type gt (exactly representable), float64."""
    g = rng.normal(0, scale, n)
    if gt == "bf16":
        return rounded(g, "bf16").astype(np.float64)
    return g.astype(np.float32).astype(np.float64)


def check_adamw(args, rng):
    vals = []  # @forward's arguments in order, as float64
    for n, gt in TENSORS:
        p = rng.normal(0, 1, n)
        g = draw(rng, n, gt)
        m = rng.normal(0, 0.1, n).astype(np.float32).astype(np.float64)
        v = np.abs(rng.normal(0, 0.01, n)).astype(np.float32).astype(
            np.float64)
        vals += [p.astype(np.float32).astype(np.float64), g, m, v]
    vals += [np.array([STEP], np.float64), np.array([LR], np.float32)
             .astype(np.float64), np.array([COEF], np.float64)]
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-adamw-") as tmp:
        sizes = [n for n, _ in TENSORS for _ in range(3)]
        name, src, grid, runs = run_fused(args, tmp, "adamw", model(), vals,
                                          sizes)
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
    worst = 0.0
    for k, (n, gt) in enumerate(TENSORS):
        wants, mags = reference(*vals[4 * k:4 * k + 4])
        for r, what in enumerate(("param", "exp_avg", "exp_avg_sq")):
            got = runs[3 * k + r][0]
            # f32 arithmetic: a few roundings of each term.
            bound = 2e-6 * mags[r] + 1e-30
            ratio = float((np.abs(got - wants[r]) / bound).max())
            worst = max(worst, ratio)
            if ratio > 1:
                i = int(np.argmax(np.abs(got - wants[r]) / bound))
                sys.exit(f"FAIL: tensor {k} ({n} elements, {gt} gradient) "
                         f"{what}[{i}]: got {got[i]!r}, want "
                         f"{wants[r][i]!r}")
    print(f"{name}: {len(TENSORS)} AdamW updates in {grid} blocks (two "
          f"shared codes, one own) match float64 AdamW, max error / bound "
          f"{worst:.3g}, three block orders alike")


def norm_model():
    """@forward: the global gradient norm and clip coefficient as
    step-optimizer writes them (each gradient squared, summed whole, the
    sums added in order, sqrt, clip / (norm + eps)); returns both."""
    args, body = [], []
    total = "%s"
    for k, (n, gt) in enumerate(NORM_TENSORS):
        t = f"tensor<{n}xf32>"
        args.append(input_arg(f"g{k}", f"tensor<{n}x{gt}>"))
        g = gradient_f32(body, k, n, gt)
        body += [f"    %q{k} = step.mul {g}, {g} : {t}",
                 f"    %r{k} = step.reduce_sum %q{k} dims = [0] : {t} -> "
                 f"tensor<f32>",
                 f"    %s{k} = step.add {total}, %r{k} : tensor<f32>"]
        total = f"%s{k}"
    # The zero, eps and clip (constants in step-optimizer's step) as
    # inputs: every fusion operand is then an argument.
    args += [input_arg(c, "tensor<f32>") for c in ("s", "eps", "clip")]
    body += [f"    %n = step.sqrt {total} : tensor<f32>",
             "    %d = step.add %n, %eps : tensor<f32>",
             "    %k = step.div %clip, %d : tensor<f32>"]
    return ("module {\n  func.func @forward(" + ", ".join(args) +
            ') -> (tensor<f32> {step.name = "norm"}, tensor<f32> '
            '{step.name = "coef"}) {\n' + "\n".join(body) +
            "\n    return %n, %k : tensor<f32>, tensor<f32>\n  }\n}\n")


def check_norm(args, rng):
    """The global-norm kernel (form B): its tensors' chunk loops shared as
    the updates' are, its partials combined by one loop over the tensors;
    against float64."""
    vals = [draw(rng, n, gt) for n, gt in NORM_TENSORS]
    vals += [np.zeros(1), np.array([np.float32(1e-6)], np.float64),
             np.ones(1)]
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-norm-") as tmp:
        name, src, grid, runs = run_fused(args, tmp, "norm", norm_model(),
                                          vals, [1, 1])
    body = src.split("__global__")[1]
    for want in ("if (code == 0) { // tensors 0, 2\n",
                 "else if (code == 1) { // tensors 1, 3, 5\n",
                 "// tensor 0: 20000 elements in 3 chunks",
                 "tot_[u] = blockReduce(q, SumOp(), 0.0f, sh);"):
        if want not in src:
            sys.exit(f"FAIL: {name} has no {want!r}:\n{src}")
    squares = sum(float((v * v).sum()) for v in vals[:len(NORM_TENSORS)])
    norm = np.sqrt(squares)
    # f32 sums of squares: about (m + 18) 2^-24 relative (docs/codegen.md).
    for i, (want, what) in enumerate(((norm, "norm"),
                                      (1.0 / (norm + 1e-6), "coef"))):
        got = runs[i][0][0]
        if abs(got - want) > 3e-6 * want:
            sys.exit(f"FAIL: {name}: {what} {got!r}, want {want!r}")
    print(f"{name}: the norm of {len(NORM_TENSORS)} gradients in {grid} "
          f"blocks (two shared codes, one own) matches float64 "
          f"({runs[0][0][0]!r} against {norm!r}), three block orders alike")


# step.check_finite's operands: the first in 3 chunks of 32 KiB; f32 read
# 16 bytes a load, bf16 an element a load.
FINITE_TENSORS = ((20000, "f32"), (7, "bf16"), (4096, "f32"), (9, "bf16"),
                  (8, "f32"))


def check_finite(args, rng):
    """step.check_finite's kernel (the gradients' guard, --guard-finite):
    its tensors' scans shared as the updates' are, run on finite values
    (result 1) and with one NaN or infinity placed in a later chunk, a
    last element, a first element (result 0)."""
    types = [f"tensor<{n}x{gt}>" for n, gt in FINITE_TENSORS]
    text = ("module {\n  func.func @forward(" + ", ".join(
        input_arg(f"g{k}", t) for k, t in enumerate(types)) +
        ') -> (tensor<i1> {step.name = '
        '"ok"}) {\n    %ok = step.check_finite ' + ", ".join(
        f"%g{k}" for k in range(len(types))) + " : " + ", ".join(types) +
        "\n    return %ok : tensor<i1>\n  }\n}\n")
    cases = (("finite", None, None, 1.0), ("inf in chunk 3", 0, 15000, 0.0),
             ("NaN last", 3, 8, 0.0), ("-inf first", 4, 0, 0.0),
             ("NaN in a bf16 tensor", 1, 3, 0.0))
    for what, k, i, want in cases:
        vals = [draw(rng, n, gt) for n, gt in FINITE_TENSORS]
        if k is not None:
            vals[k][i] = {"inf": np.inf, "NaN": np.nan,
                          "-inf": -np.inf}[what.split()[0]]
        with tempfile.TemporaryDirectory(prefix="stepjit-emu-finite-") as tmp:
            name, src, grid, runs = run_fused(args, tmp, "finite", text, vals,
                                              [1], fused=False)
        if "if (code == 0) { // tensors 0, 2, 4\n" not in src or \
                "if (code == 1) { // tensors 1, 3\n" not in src:
            sys.exit(f"FAIL: {name} does not share its two codes:\n{src}")
        if runs[0][0][0] != want:
            sys.exit(f"FAIL: {name} ({what}): {runs[0][0][0]!r}, want "
                     f"{want!r}")
    print(f"{name}: {len(FINITE_TENSORS)} tensors in {grid} virtual blocks "
          f"(two shared codes): {', '.join(c[0] for c in cases)} right, "
          "three block orders alike")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--step-opt", required=True)
    ap.add_argument("--cxx", default="c++")
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    check_adamw(args, rng)
    check_norm(args, rng)
    check_finite(args, rng)
    print("ok")


if __name__ == "__main__":
    main()
