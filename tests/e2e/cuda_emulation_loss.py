#!/usr/bin/env python3
"""The cross-entropy kernels that stepc generates, run on the CPU.

cross_entropy and cross_entropy_grad keep one block per row and compute
the row's max and sum of exp in one sweep (online: a running max, the sum
rescaled when it grows, per-thread statistics merged by a fixed shuffle
tree; docs/codegen.md). No GPU here, so: stepc --dump-kernels writes the
CUDA C++ of small models, each with one kernel; this test compiles it with
the host compiler against tests/e2e/emu/cuda_emu_sync.h (blocks as CPU
threads, one after another) and compares every output with a float64
numpy reference.

Checks per kernel:
- values: |got - want| <= 1e-5 * mag + ulp/2 of the output type * |want|,
  mag the size of the terms (|logsumexp| + |x[t]| + 1 per loss row;
  (softmax + onehot) * |scale| per gradient element). The f32 statistics
  sum at most a few dozen terms per thread; a dropped or doubled element
  moves a gradient by about 1/C of softmax's sum, 1e-4 relative for the
  9000-wide rows, above the f32 bound;
- NaN exactly where the target is outside [0, C), 0 for ignored rows;
- determinism and coverage: three runs whose outputs must be bitwise
  equal. A kernel with a ticket (mean/sum loss) runs its exact grid with
  the blocks in increasing, decreasing and shuffled order, its __device__
  partials poisoned (NaN) before each run; a grid-stride kernel runs with
  1, 2 and 5 blocks. Outputs are poisoned before each run with NaN, then
  with 7777: an element a run leaves unwritten shows as a difference.

Pairs (step-fuse-loss): a loss and its gradient of the same logits in one
kernel (bf16 through AMP's casts, f32 bare; mean, sum and none; a loss
with an epilogue, times the seed): both
outputs against numpy as above, both bitwise what the kernels compiled
alone give (N <= 1024: the same grid for a mean or sum), and one sweep of
statistics.

Cases: unfused f32 and bf16 (as --amp=bf16 gives the loss), fused (a cast
prologue and a scale epilogue on the loss; a bias-add prologue and a bf16
cast epilogue on the gradient, i32 targets; AMP's widening prologue and
narrowing epilogue on the gradient, whose rows then move in 16-byte
vectors, as do unfused bf16 rows; the test requires that; such gradient
rows are also kept in shared memory between the two sweeps); reductions
mean, sum and none; rows of 1000 (one partial sweep of 64 threads x 16
loads), 9000 (256 threads, 512 for the 16-bit rows the gradient keeps
in shared memory; a second, partial sweep: the rescaling across
iterations) and GPT-2's 50304 (98 KB of bf16 kept in shared memory);
ignore_index -100 and 3; targets 1000 and -5 (NaN rows); a NaN logit
(its row NaN: the row max skips NaN, the sum carries it); -inf logits
(masked vocabulary): a row finite only in its first 100 columns (threads
and warps that see only -inf) and one -inf in columns [100, 8100) (threads
that see -inf first, finite logits in their second sweep).

Usage: cuda_emulation_loss.py --stepc STEPC --cxx CXX
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
CTYPE = {"f32": "float", "bf16": "__nv_bfloat16", "i64": "long long",
         "i32": "int"}
# Half an ulp of the stored result, relative to its value.
ROUND = {"f32": 2.0 ** -24, "bf16": 2.0 ** -8}


def shape_t(shape, dt):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), dt) if shape else \
        "tensor<%s>" % dt


def targets(n, c, ign, bad=False):
    """Row targets: one ignored row, with `bad` two outside [0, C)."""
    t = (np.arange(n) * 7919 + 13) % c
    t[1] = ign
    if bad:
        t[2], t[n - 1] = c, -5
    return t


def lse_rows(x):
    m = x.max(1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]


def loss_ref(x, t, ign, red):
    n, c = x.shape
    lse = lse_rows(x)
    ok = t != ign
    valid = (t >= 0) & (t < c)
    xt = x[np.arange(n), np.clip(t, 0, c - 1)]
    loss = np.where(valid, lse - xt, np.nan)
    mag = np.abs(lse) + np.abs(xt) + 1
    loss = np.where(ok, loss, 0.0)
    mag = np.where(ok, mag, 0.0)
    if red == "none":
        return loss, mag
    count = ok.sum()
    if red == "mean":
        return np.array(loss.sum() / count), np.array(mag.sum() / count)
    return np.array(loss.sum()), np.array(mag.sum())


def grad_ref(x, t, g, ign, red):
    n, c = x.shape
    p = np.exp(x - lse_rows(x)[:, None])
    ok = t != ign
    valid = (t >= 0) & (t < c)
    onehot = np.zeros_like(p)
    onehot[np.arange(n)[valid], t[valid]] = 1.0
    s = g if red == "none" else np.full(n, g[0] if g.ndim else g)
    if red == "mean":
        s = s / ok.sum()
    d = (p - onehot) * s[:, None]
    d = np.where(valid[:, None], d, np.nan)
    d = np.where(ok[:, None], d, 0.0)
    mag = np.where(ok[:, None], (p + onehot) * np.abs(s)[:, None], 0.0)
    return d, mag


def ce_case(name, n, c, dt, red, ign=None, ti="i64", bad=False,
            masked=False, grad=False, fuse=False, nan_logit=False):
    """step.cross_entropy(_grad) of [n, c] logits of type dt; with
    `nan_logit` the last row has one NaN logit (its loss and its whole
    gradient row are NaN, as PyTorch's)."""
    ignore = -100 if ign is None else ign
    attr = f"reduction = {red}" + ("" if ign is None
                                   else f" ignore_index = {ign}")
    x_t, y_t = shape_t([n, c], dt), shape_t([n], ti)
    g_shape = [n] if red == "none" else []
    if not grad:
        out_t = shape_t([n] if red == "none" else [], dt)
        if fuse:  # cast prologue (bf16 logits), scale epilogue
            xf = shape_t([n, c], "f32")
            of = shape_t([], "f32")
            args = [("y", [n], ti), ("x", [n, c], "bf16"), ("s", [], "f32")]
            body = f"""    %0 = step.cast %x : {shape_t([n, c], "bf16")} -> {xf}
    %1 = step.cross_entropy %0, %y {attr} : {xf}, {y_t} -> {of}
    %r = step.mul %1, %s : {of}"""
            out_dt = "f32"
        else:
            args = [("x", [n, c], dt), ("y", [n], ti)]
            body = f"    %r = step.cross_entropy %x, %y {attr} : {x_t}, " \
                   f"{y_t} -> {out_t}"
            out_dt = dt
    else:
        g_t = shape_t(g_shape, "f32" if fuse else dt)
        if fuse == "cast":  # widening prologue, bf16 epilogue (AMP's)
            xf = shape_t([n, c], "f32")
            args = [("x", [n, c], "bf16"), ("y", [n], ti),
                    ("g", g_shape, "f32")]
            body = f"""    %0 = step.cast %x : {shape_t([n, c], "bf16")} -> {xf}
    %1 = step.cross_entropy_grad %0, %y, %g {attr} : {xf}, {y_t}, {g_t} -> {xf}
    %r = step.cast %1 : {xf} -> {shape_t([n, c], "bf16")}"""
            out_dt = "bf16"
        elif fuse:  # bias-add prologue, bf16 cast epilogue
            xf = shape_t([n, c], "f32")
            args = [("x", [n, c], "f32"), ("b", [n, c], "f32"),
                    ("y", [n], ti), ("g", g_shape, "f32")]
            body = f"""    %0 = step.add %x, %b : {xf}
    %1 = step.cross_entropy_grad %0, %y, %g {attr} : {xf}, {y_t}, {g_t} -> {xf}
    %r = step.cast %1 : {xf} -> {shape_t([n, c], "bf16")}"""
            out_dt = "bf16"
        else:
            args = [("x", [n, c], dt), ("y", [n], ti), ("g", g_shape, dt)]
            body = f"    %r = step.cross_entropy_grad %x, %y, %g {attr} : " \
                   f"{x_t}, {y_t}, {g_t} -> {x_t}"
            out_dt = dt
    out_shape = [n, c] if grad else ([n] if red == "none" else [])
    sig = ", ".join(f'%{a}: {shape_t(s, d)} {{step.kind = "input", '
                    f'step.name = "{a}"}}' for a, s, d in args)
    r_t = shape_t(out_shape, out_dt)
    mlir = f"""module {{
  func.func @forward({sig}) -> ({r_t} {{step.name = "r"}}) {{
{body}
    return %r : {r_t}
  }}
}}
"""

    def make(rng):
        vals = {}
        for a, s, d in args:
            if a == "y":
                vals[a] = targets(n, c, ignore, bad).astype(np.float64)
            elif a == "x":
                v = rng.normal(0, 2, s)
                if masked:  # threads that see only -inf; -inf, then not
                    t = targets(n, c, ignore, bad)
                    keep = v[[0, 2], t[[0, 2]]]
                    v[0, 100:] = -np.inf
                    v[2, 100:8100] = -np.inf
                    v[[0, 2], t[[0, 2]]] = keep  # a finite target logit
                if nan_logit:  # not the largest: a max that skips NaN
                    v[n - 1, c // 3] = np.nan  # must not hide it
                vals[a] = rounded(v, d).astype(np.float64)
            else:  # bias, loss gradient, scale
                vals[a] = rounded(rng.normal(0.5, 1, s), d).astype(np.float64)
        return vals

    def ref(v):
        x = v["x"] + v.get("b", 0.0)
        t = v["y"].astype(np.int64)
        if grad:
            return grad_ref(x, t, v["g"], ignore, red)
        want, mag = loss_ref(x, t, ignore, red)
        if fuse:
            return want * v["s"], mag * abs(v["s"])
        return want, mag
    # 16-byte vectors: bf16 logits read plainly (unfused, or through a
    # widening cast) in whole vectors; the gradient's stores too.
    vec = c % 8 == 0 and ((not fuse and dt == "bf16")
                          or (fuse and (not grad or fuse == "cast")))
    return dict(name=name, mlir=mlir, args=args, make=make,
                ref=lambda v: [ref(v)], outs=[(out_dt, out_shape)],
                fuse=fuse, vec=vec, vec_out="out0" if grad else None,
                seed=len(name))


def pair_case(name, n, c, dt, red, ign=None, ti="i64", bad=False,
              masked=False, scaled=False):
    """step-fuse-loss: a loss and its gradient of the same logits, one
    kernel (the gradient's, keeping the rows' losses). bf16 logits go
    through AMP's widening cast and the gradient back to bf16; f32 ones
    are read as they are. Also compiled alone: the loss and the gradient
    must come out of their own kernels with the same bits (a mean or sum
    loss: within the bound, its rows are added over another grid). With
    `scaled`, the loss is returned times the seed g (an epilogue, as
    gradient accumulation averages it)."""
    loss = ce_case(name, n, c, dt, red, ign=ign, ti=ti, bad=bad,
                   masked=masked)
    grad = ce_case(name, n, c, dt, red, ign=ign, ti=ti, bad=bad,
                   masked=masked, grad=True)
    attr = f"reduction = {red}" + ("" if ign is None
                                   else f" ignore_index = {ign}")
    g_shape = [n] if red == "none" else []
    x_t, y_t, g_t = (shape_t([n, c], dt), shape_t([n], ti),
                     shape_t(g_shape, "f32"))
    xf = shape_t([n, c], "f32")
    l_t = shape_t(g_shape, "f32")
    args = [("x", [n, c], dt), ("y", [n], ti), ("g", g_shape, "f32")]
    if dt == "f32":
        widen, x0, narrow, d = "", "%x", "", "%1"
    else:
        widen = f"    %0 = step.cast %x : {x_t} -> {xf}\n"
        x0, d = "%0", "%d"
        narrow = f"\n    %d = step.cast %1 : {xf} -> {x_t}"
    sig = ", ".join(f'%{a}: {shape_t(s, t)} {{step.kind = "input", '
                    f'step.name = "{a}"}}' for a, s, t in args)

    def model(results):
        outs = {"l": ("%ls" if scaled else "%l", l_t), "d": (d, x_t)}
        rets = ", ".join(outs[r][0] for r in results)
        types = ", ".join(f'{outs[r][1]} {{step.name = "{r}"}}'
                          for r in results)
        return f"""module {{
  func.func @forward({sig}) -> ({types}) {{
{widen}    %l = step.cross_entropy {x0}, %y {attr} : {xf}, {y_t} -> {l_t}
    %1 = step.cross_entropy_grad {x0}, %y, %g {attr} : {xf}, {y_t}, {g_t} -> {xf}{narrow}{scale}
    return {rets} : {", ".join(outs[r][1] for r in results)}
  }}
}}
"""
    scale = f"\n    %ls = step.mul %l, %g : {l_t}" if scaled else ""

    def loss_ref(v):
        want, mag = loss["ref"](v)[0]
        return [(want * v["g"], mag * np.abs(v["g"]))] if scaled \
            else [(want, mag)]
    vec = c % 8 == 0 and dt == "bf16"
    case = dict(name=name, mlir=model("ld"), args=args, make=grad["make"],
                ref=lambda v: loss_ref(v) + grad["ref"](v),
                outs=[("f32", g_shape), (dt, [n, c])], fuse=True, vec=vec,
                vec_out="out1", seed=len(name), pair=True)
    alone = [dict(case, name=name + "_loss_alone", mlir=model("l"),
                  fuse=dt != "f32" or scaled,
                  outs=case["outs"][:1], vec_out=None, pair=False,
                  ref=loss_ref),
             dict(case, name=name + "_grad_alone", mlir=model("d"),
                  fuse=dt != "f32",
                  outs=case["outs"][1:], pair=False, vec_out="out0",
                  ref=grad["ref"])]
    return case, alone


def cases():
    return [
        ce_case("loss_mean_7x1000_bf16", 7, 1000, "bf16", "mean"),
        ce_case("loss_sum_3x9000_f32_masked", 3, 9000, "f32", "sum", ign=3,
                masked=True),
        ce_case("loss_none_6x1000_f32_bad", 6, 1000, "f32", "none",
                bad=True),
        ce_case("loss_mean_6x1000_fused", 6, 1000, "bf16", "mean",
                fuse=True),
        ce_case("grad_mean_5x1000_bf16", 5, 1000, "bf16", "mean",
                grad=True),
        ce_case("grad_sum_3x9000_f32_masked", 3, 9000, "f32", "sum",
                masked=True, grad=True),
        ce_case("grad_none_6x1000_f32_bad", 6, 1000, "f32", "none", ign=3,
                bad=True, grad=True),
        ce_case("grad_mean_6x1000_fused_i32", 6, 1000, "f32", "mean",
                ti="i32", grad=True, fuse=True),
        ce_case("grad_mean_3x9000_castio_masked", 3, 9000, "bf16", "mean",
                masked=True, grad=True, fuse="cast"),
        # A NaN logit: the loss row and the gradient row all NaN.
        ce_case("loss_none_4x9000_bf16_nanlogit", 4, 9000, "bf16", "none",
                nan_logit=True),
        ce_case("grad_mean_4x9000_castio_nanlogit", 4, 9000, "bf16", "mean",
                grad=True, fuse="cast", nan_logit=True),
        # GPT-2's rows (vocabulary 50304): 98 KB kept in shared memory, 512
        # threads, 7 sweeps of 1024 vectors, the last partial.
        ce_case("grad_mean_2x50304_castio", 2, 50304, "bf16", "mean",
                grad=True, fuse="cast"),
    ]


def pairs():
    return [
        pair_case("pair_mean_3x9000_bf16_masked", 3, 9000, "bf16", "mean",
                  masked=True),
        pair_case("pair_sum_5x1000_f32_ign3_scaled", 5, 1000, "f32", "sum",
                  ign=3, scaled=True),
        pair_case("pair_none_6x1000_bf16_bad", 6, 1000, "bf16", "none",
                  ti="i32", bad=True),
    ]


HARNESS = r"""
#include "cuda_emu_sync.h"
// The target counts (blockReduce over ints): exact through a float slot
// for counts below 2^24.
inline int __shfl_xor_sync(unsigned m, int v, int lane) {
  return (int)__shfl_xor_sync(m, (float)v, lane);
}
#include "kernel.inc"
#include "emu_io.h"
int main() {
DECLS
  const std::vector<std::vector<unsigned>> orders = emuOrders(SPLIT, GRID);
  for (size_t run = 0; run < orders.size(); ++run) {
    const double bait = run == 1 ? 7777.0 : NAN;
POISON
PRE
    emuLaunchOrder(orders[run], BLOCK, [&] { KERNEL(ARGS); });
WRITES
  }
}
"""


def run_case(args, case, tmp):
    """Runs the case's kernel three times; returns its outputs."""
    path, src, block, name, params = single_kernel(
        args.stepc, case["name"], case["mlir"], tmp, case["fuse"])
    # The kernel's in<k> is operand k of the fusion or op: which function
    # argument that is, from the compiled IR.
    model = os.path.join(tmp, case["name"] + ".mlir")
    ir = os.path.join(tmp, "x.mlir")
    subprocess.run([args.stepc, model, "--emit", "mlir", "-o", ir]
                   + ([] if case["fuse"] else ["--no-fuse"]), check=True)
    line = next(ln for ln in open(ir)
                if re.search(r"step\.(fusion|cross_entropy)", ln))
    operands = line.split(" = ", 1)[1].split(" : ")[0]  # past "%0:2 = "
    order = [int(a) for a in re.findall(r"%arg(\d+)", operands)]
    if bool(case["fuse"]) != os.path.basename(path).startswith("fusion_"):
        sys.exit(f"FAIL {case['name']}: {os.path.basename(path)}")
    vec_in = "reinterpret_cast<const uint4 *>" in src
    vec_out = re.findall(r"__stcs\(reinterpret_cast<uint4 \*>\((out\d+)",
                         src)
    want_out = [case["vec_out"]] if case["vec"] and case["vec_out"] else []
    if vec_in != case["vec"] or sorted(set(vec_out)) != want_out:
        sys.exit(f"FAIL {case['name']}: vector loads {vec_in}, stores "
                 f"{vec_out}, expected {case['vec']}, {want_out}")
    if "ceBlockMerge(mx, sum" not in src:
        sys.exit(f"FAIL {case['name']}: not the one-sweep statistics")
    if case.get("pair") and src.count("ceBlockMerge(mx, sum") != 1:
        sys.exit(f"FAIL {case['name']}: the loss and its gradient do not "
                 f"share one sweep of statistics")
    # A mean gradient counts its targets in a one-block launch of its own
    # first (the kernel's name), then runs its rows (name + "_rows"), whose
    # block size the harness launches with.
    pre = ""
    rows_sig = re.search(r"__launch_bounds__\((\d+)(?:, \d+)?\) (%s_rows)\("
                         % name, src)
    if rows_sig:
        pre = ("    emuLaunch(1, %d, [&] { %s(ARGS); });" % (block, name))
        block, name = int(rows_sig.group(1)), rows_sig.group(2)
    if bool(rows_sig) != ("/ (float)count" in src):  # a mean's gradient
        sys.exit(f"FAIL {case['name']}: a launch counting the targets "
                 f"{'where no mean gradient needs one' if rows_sig else 'missing'}")
    partial = re.search(r"__device__ float \w+_partial\[(\d+)\];", src)
    split = partial is not None
    stale = ["    std::memset(%s, 0xff, sizeof %s);" % (p, p)
             for p in re.findall(
                 r"__device__ \S+ (\w+_(?:partial|count|live))\[", src)]
    grid = int(partial.group(1)) if split else 0

    rng = np.random.default_rng(case["seed"])
    vals = case["make"](rng)
    refs = case["ref"](vals)
    decls, poison, writes, argl, outs = [], [], [], [], []
    for const, ctype, pname in params:
        if const:
            k = int(pname[2:])
            a, shape, dt = case["args"][order[k]]
            if ctype != CTYPE[dt]:
                sys.exit(f"FAIL {case['name']}: {pname} is {ctype}")
            np.asarray(vals[a], dtype=np.float64).tofile(
                os.path.join(tmp, f"in{k}.bin"))
            decls.append(f"  auto {pname} = readRaw<{ctype}>(\"in{k}.bin\", "
                         f"{max(1, int(np.prod(shape)))});")
        else:
            out_dt, out_shape = case["outs"][len(outs)]
            if ctype != CTYPE[out_dt]:
                sys.exit(f"FAIL {case['name']}: {pname} is {ctype}")
            outs.append(pname)
            decls.append(f"  std::vector<{ctype}> {pname}("
                         f"{max(1, int(np.prod(out_shape)))});")
            poison.append(f"    poison({pname}, bait);")
            writes.append(f"    writeRaw(\"{pname}_\" + std::to_string(run) "
                          f"+ \".bin\", {pname});")
        argl.append(pname + ".data()")
    if len(outs) != len(case["outs"]):
        sys.exit(f"FAIL {case['name']}: {len(outs)} outputs")
    harness = fill(HARNESS, dict((("DECLS", "\n".join(decls)),
                     ("POISON", "\n".join(poison + stale)),
                     ("PRE", pre),
                     ("WRITES", "\n".join(writes)),
                     ("ARGS", ", ".join(argl)), ("SPLIT", int(split)),
                     ("GRID", grid), ("BLOCK", block), ("KERNEL", name))))
    build_and_run(args.cxx, tmp, src, harness)

    results = []
    for pname, (out_dt, _), (want, mag) in zip(outs, case["outs"], refs):
        want, mag = np.asarray(want), np.asarray(mag)
        runs = [np.fromfile(os.path.join(tmp, f"{pname}_{r}.bin"),
                            dtype=np.float32) for r in range(3)]
        got = runs[0].reshape(want.shape)
        for r in (1, 2):
            if runs[r].tobytes() != runs[0].tobytes():
                sys.exit(f"FAIL {case['name']}: {pname} differs between runs "
                         f"0 and {r} ({'block orders' if split else 'grids'}"
                         f"), or an element was left unwritten")
        nan = np.isnan(want)
        if (np.isnan(got) != nan).any():
            sys.exit(f"FAIL {case['name']}: {pname} NaN at "
                     f"{np.argwhere(np.isnan(got) != nan)[:5].tolist()}")
        w, g, m = want[~nan], got[~nan], mag[~nan]
        bound = 1e-5 * m + ROUND[out_dt] * np.abs(w)
        ratio = float((np.abs(g - w) / np.maximum(bound, 1e-30)).max()) \
            if w.size else 0.0
        print(f"{case['name']}: {name} {pname} block {block} "
              f"{'ticket grid %d' % grid if split else 'grid-stride'}: "
              f"{int(nan.sum())} NaN as expected, max err / bound {ratio:.3g}")
        if ratio > 1:
            sys.exit(f"FAIL {case['name']}: {pname} error above the bound")
        results.append(got)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--cxx", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-loss-") as tmp:
        for c in cases():
            run_case(args, c, tmp)
        for pair, (loss, grad) in pairs():
            both = run_case(args, pair, tmp)
            alone = run_case(args, loss, tmp) + run_case(args, grad, tmp)
            same = [both[k].tobytes() == alone[k].tobytes() for k in (0, 1)]
            # The rows' losses are the same bits; a mean or sum adds them
            # in the gradient's grid, one block per row up to 65535, and
            # the loss kernel's, up to 1024: the same grid (and bits) for
            # these N <= 1024 rows. (Rows past the grid, N > 65535, a
            # block adding several, are not run here: too many blocks for
            # the emulator.)
            if not all(same):
                sys.exit(f"FAIL {pair['name']}: not the bits of the kernels "
                         f"alone (loss {same[0]}, gradient {same[1]})")
            print(f"{pair['name']}: the bits of the kernels alone")
    print("ok")


if __name__ == "__main__":
    main()
