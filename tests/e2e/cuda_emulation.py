#!/usr/bin/env python3
"""The tiled attention kernels that stepc generates, run on the CPU.

No GPU here, and the CUDA kernels of attention and attention_grad are too
intricate (tiles, an online softmax, a grid split in two launches, a
module-scope statistics array) to trust on the CPU backend's word, which
runs other code. So: stepc --dump-kernels writes their CUDA C++; this test
compiles each with the host C++ compiler against tests/e2e/emu/cuda_emu.h
(a block's threads as fibers switched at barriers, __syncthreads a barrier), runs it on random inputs
over a small grid (so the grid-stride loops take several tiles per block),
after poisoning the outputs with NaN, and compares every output element
with a float64 reference written here: max|got - want| / max|want| within
1e-5 in f32, 1e-2 in bf16 (8 mantissa bits in and out).

Cases: GPT-2's causal attention (Tq = Tk = 70, a partial 64-row tile) with
heads of D = 24 (CUDA cores in both types), 64 and 128 (bf16: the tensor
core kernels, wmma emulated at the API's level; f32: 64- and 32-row
tiles; D = 64 also in f16, as --amp=fp16 gives it; and in bf16 at T = 130,
whose off-diagonal tiles the mma forward takes unmasked), and hand-written
models with a non-causal attention where
Tq != Tk and D != Dv (24/40: CUDA cores; 48/32: tensor cores in bf16);
each in f32 and bf16. A bf16 kernel whose widths are multiples of 16 must
be the tensor-core one. Valid lengths (`step.attention ... valid %len`, as
step-pad-dynamic gives): hand-written models, causal and not, on CUDA
cores, tensor cores and the one-row kernels of a very wide head (D =
1280), each kernel run for several lengths L (all, a partial last tile,
one tile and a row, one row, none): rows < L against the reference on the
inputs cut to L rows, rows >= L exactly 0. A training step's forward is
attention_lse (step-attention-stats), whose log-sum-exp is checked too,
and its gradient takes the saved result and log-sum-exp (the reference's,
rounded as stored); hand-written models of attention_grad alone check the
kernels' own statistics pass. With stepc --attention-saved-ds (GPT-2 at D =
64, T = 70 and 130; valid lengths at D = 64 causal and 48/32 not) the
gradient is three launches: statistics, dk/dv storing dS, and dq from dS
(every such compile must have a kernel with a `_dq` launch, and no other);
also non-causal with Tq = 37, Tk = 83. So, on the same models, with stepc
--attention-atomic-dq: statistics and a zeroed f32 accumulator, dk/dv
adding each tile's dq into it with atomicAdd, and dq rounded from it (a
`_dq` launch and a `_dqacc` accumulator in every such compile, in no
other; the emulated blocks run one after another, so the adds are
exact in their order, which the tolerance covers).

GPT-2's attention kernels are those of step-fuse-attention's fusions: q,
k and v strided views of the packed projection, the results written as
[B, T, H, D] (the kernels' `// step.port` lines say where; the inputs are
laid out and the results read back through them); so are those of a
hand-written model with GPT-2's head layout and heads of D = 1280 (the
one-row kernels).

Usage: cuda_emulation.py --stepc STEPC --gpt2-example GPT2 --cxx CXX
"""
import argparse
import glob
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run, dump_kernels, rounded  # noqa: E402
BOUND = {"float": 1e-5, "__nv_bfloat16": 1e-2, "__half": 2e-3}

# A model whose attention is not causal, with Tq != Tk and D != Dv; the
# loss sum(o * o) gives attention_grad a non-trivial upstream gradient.
def noncausal(s, tq, tk, d, dv):
    """A model whose attention is not causal (q [2, S/2, Tq, D], k, v with
    Tk rows); the loss sum(o * o) gives attention_grad a non-trivial
    upstream gradient."""
    q, k, v, o = (f"tensor<2x{s // 2}x{tq}x{d}xf32>",
                  f"tensor<2x{s // 2}x{tk}x{d}xf32>",
                  f"tensor<2x{s // 2}x{tk}x{dv}xf32>",
                  f"tensor<2x{s // 2}x{tq}x{dv}xf32>")
    return f"""module {{
  func.func @forward(%q: {q} {{step.kind = "param", step.name = "q"}}, %k: {k} {{step.kind = "param", step.name = "k"}}, %v: {v} {{step.kind = "param", step.name = "v"}}) -> (tensor<f32> {{step.name = "loss"}}) {{
    %o = step.attention %q, %k, %v : {q}, {k}, {v} -> {o}
    %sq = step.mul %o, %o : {o}, {o}
    %l = step.reduce_sum %sq dims = [0, 1, 2, 3] : {o} -> tensor<f32>
    return %l : tensor<f32>
  }}
}}
"""


def padded(s, t, d, dv, causal):
    """A model whose attention takes a valid length `len` (an input)."""
    q, v = f"tensor<2x{s // 2}x{t}x{d}xf32>", f"tensor<2x{s // 2}x{t}x{dv}xf32>"
    c = " causal" if causal else ""
    return f"""module {{
  func.func @forward(%q: {q} {{step.kind = "param", step.name = "q"}}, %k: {q} {{step.kind = "param", step.name = "k"}}, %v: {v} {{step.kind = "param", step.name = "v"}}, %len: tensor<i64> {{step.kind = "input", step.name = "len"}}) -> (tensor<f32> {{step.name = "loss"}}) {{
    %o = step.attention %q, %k, %v valid %len{c} : {q}, {q}, {v}, tensor<i64> -> {v}
    %sq = step.mul %o, %o : {v}, {v}
    %l = step.reduce_sum %sq dims = [0, 1, 2, 3] : {v} -> tensor<f32>
    return %l : tensor<f32>
  }}
}}
"""


def grad_model(s, t, d, dv, causal, dtype):
    """A model whose forward is an attention_grad (no saved statistics: the
    kernel's own pass over the keys) of valid length `len`, in `dtype`."""
    q, v = (f"tensor<2x{s // 2}x{t}x{d}x{dtype}>",
            f"tensor<2x{s // 2}x{t}x{dv}x{dtype}>")
    c = " causal" if causal else ""
    arg = lambda n, ty: f'%{n}: {ty} {{step.kind = "param", step.name = "{n}"}}'
    return f"""module {{
  func.func @forward({arg("q", q)}, {arg("k", q)}, {arg("v", v)}, {arg("g", v)}, %len: tensor<i64> {{step.kind = "input", step.name = "len"}}) -> ({q}, {q}, {v}) {{
    %d:3 = step.attention_grad %q, %k, %v, %g valid %len{c} : {q}, {q}, {v}, {v}, tensor<i64> -> {q}, {q}, {v}
    return %d#0, %d#1, %d#2 : {q}, {q}, {v}
  }}
}}
"""


def packed_heads(b, h, t, d):
    """GPT-2's head layout around a causal attention of very wide heads:
    q, k, v sliced out of one packed param [B, T, 3 H D], split into H
    heads and transposed; the output transposed back. Under
    step-fuse-attention every kernel (the one-row kernels here: even
    16-row tiles of D = 1280 pass the shared memory) reads and writes the
    heads in place."""
    c = h * d
    w, x = f"tensor<{b}x{t}x{3 * c}xf32>", f"tensor<{b}x{t}x{c}xf32>"
    r, q = f"tensor<{b}x{t}x{h}x{d}xf32>", f"tensor<{b}x{h}x{t}x{d}xf32>"
    lines = []
    for n, k in (("q", 0), ("k", 1), ("v", 2)):
        lines.append(f"    %{n}s = step.slice %w start = [0, 0, {k * c}] limit = [{b}, {t}, {(k + 1) * c}] strides = [1, 1, 1] : {w} -> {x}")
        lines.append(f"    %{n}r = step.reshape %{n}s : {x} -> {r}")
        lines.append(f"    %{n} = step.transpose %{n}r, perm = [0, 2, 1, 3] : {r} -> {q}")
    body = "\n".join(lines)
    return f"""module {{
  func.func @forward(%w: {w} {{step.kind = "param", step.name = "w"}}) -> (tensor<f32> {{step.name = "loss"}}) {{
{body}
    %o = step.attention %q, %k, %v causal : {q}, {q}, {q} -> {q}
    %ot = step.transpose %o, perm = [0, 2, 1, 3] : {q} -> {r}
    %sq = step.mul %ot, %ot : {r}, {r}
    %l = step.reduce_sum %sq dims = [0, 1, 2, 3] : {r} -> tensor<f32>
    return %l : tensor<f32>
  }}
}}
"""


def harness(elem, inputs, outputs, launches):
    """main(): reads `inputs` ((name, C type, count): <name>.bin), poisons
    `outputs` (the same), runs `launches` ((grid, block, call)) and writes
    the outputs as <name>.bin."""
    lines = ['#include "cuda_emu_sync.h"', '#include "kernel.inc"',
             '#include "emu_io.h"', "int main() {"]
    for n, ty, count in inputs:
        lines.append(f'  auto {n} = readRaw<{ty}>("{n}.bin", {count});')
    for n, ty, count in outputs:
        lines.append(f"  std::vector<{ty}> {n}({count});")
        lines.append(f"  poison({n});")
    for grid, block, call in launches:
        lines.append(f"  emuLaunch({grid}, {block}, [&] {{ {call}; }});")
    for n, _, _ in outputs:
        lines.append(f'  writeRaw("{n}.bin", {n});')
    return "\n".join(lines + ["}", ""]).replace("ELEM", elem)


def reference(q, k, v, g, causal, scale):
    """float64 attention, its rows' log-sum-exp and its gradient, [S, T, D]
    arrays."""
    s = np.einsum("bid,bjd->bij", q, k) * scale
    if causal:
        tq, tk = s.shape[1:]
        s = np.where(np.arange(tk)[None, :] <= np.arange(tq)[:, None], s,
                     -np.inf)
    mx = s.max(axis=2, keepdims=True)
    p = np.exp(s - mx)
    lse = (mx + np.log(p.sum(axis=2, keepdims=True)))[:, :, 0]
    p /= p.sum(axis=2, keepdims=True)
    o = np.einsum("bij,bjc->bic", p, v)
    if g is None:
        return o, lse, None
    dp = np.einsum("bic,bjc->bij", g, v)
    ds = p * (dp - (p * dp).sum(axis=2, keepdims=True)) * scale
    return o, lse, (np.einsum("bij,bjd->bid", ds, k),
                    np.einsum("bij,bid->bjd", ds, q),
                    np.einsum("bij,bic->bjc", p, g))


def run_kernel(args, path, grad, shape, causal, work, lengths=(None,)):
    """Runs the kernel(s) of `path` once per valid length in `lengths`
    (None: the kernel has no valid operand) and checks every output against
    the float64 reference on the inputs cut to the valid rows (zeros
    after): the result and, when the kernel stores it (attention_lse), the
    log-sum-exp; the three gradients, from the forward's saved result and
    log-sum-exp when the kernel takes them (the reference's, rounded as
    the forward stores them)."""
    s, tq, tk, d, dv = shape
    src = open(path).read()
    sig = re.search(r"void __launch_bounds__\((\d+)(?:, \d+)?\) (\w+)\(([^)]*)\)", src)
    block, name = sig.group(1), sig.group(2)
    params = [re.match(r"(const )?(.+?) \*(?:__restrict__ )?(\w+)",
                       p.strip()).groups() for p in sig.group(3).split(",")]
    # The one-row kernels loop over rows and keys by warps, so any multiple
    # of 32 threads works: 2 warps keep their many warp sums quick to
    # emulate (the tiled kernels need their 256). The gradient's grid is at
    # most one block per slice (its statistics array has that many rows).
    grid_a = 3
    if ("threadIdx.x & 15" not in src and "wmma::" not in src
            and "stepMma" not in src):
        block, grid_a = "64", min(3, s)
    # What the kernel reads and writes where: `// step.port ROLE PARAM
    # offset=.. sizes=.. strides=.. buffer=..` (compiler/codegen/
    # AttentionPorts.cpp); inside an attention fusion q, k and v are
    # strided views of one buffer (GPT-2's packed projection), the results
    # views of theirs.
    ports = {}
    for m in re.finditer(r"^// step\.port (\w+) (\w+) offset=(\d+) "
                         r"sizes=([\d,]*) strides=([\d,]*) buffer=(\d+)$",
                         src, re.M):
        role, param = m.group(1), m.group(2)
        key = ("out:" if param.startswith("out") else "in:") + role
        ports[key] = (param, int(m.group(3)),
                      [int(x) for x in m.group(4).split(",") if x],
                      [int(x) for x in m.group(5).split(",") if x],
                      int(m.group(6)))
    if grad != ("out:dq" in ports) or "in:q" not in ports:
        sys.exit(f"FAIL {os.path.basename(path)}: ports {sorted(ports)}")
    elem = {n: ty for _, ty, n in params}[ports["in:q"][0]]
    has_valid = "in:valid" in ports
    saved = "in:out" in ports
    with_lse = "out:lse" in ports
    if has_valid != (lengths[0] is not None):
        sys.exit(f"FAIL {os.path.basename(path)}: valid operand "
                 f"{'present' if has_valid else 'missing'}")
    tensor_cores = "wmma::mma_sync" in src or "stepMma" in src
    if (elem != "float" and d % 16 == 0 and dv % 16 == 0 and max(d, dv) <= 256
            and not tensor_cores):
        sys.exit(f"FAIL {os.path.basename(path)}: a bf16 head of {d}/{dv} "
                 f"did not get the tensor-core kernel")
    rng = np.random.default_rng(len(name) + 7 * grad)
    q = rounded(rng.normal(0, 1.5, (s, tq, d)), elem)
    k = rounded(rng.normal(0, 1.5, (s, tk, d)), elem)
    v = rounded(rng.normal(0, 1, (s, tk, dv)), elem)
    g = rounded(rng.normal(0, 1, (s, tq, dv)), elem) if grad else None

    def strided(buf, key):
        """The port's view of a flat float64 buffer (writable)."""
        _, offset, sizes, strides, _ = ports[key]
        return np.lib.stride_tricks.as_strided(
            buf[offset:], shape=sizes, strides=[8 * x for x in strides])

    buffers = {}  # input param -> float64 buffer

    def put(role, a):
        """Scatters role's [S, T, W] array into its input buffer."""
        param, _, sizes, _, count = ports["in:" + role]
        buf = buffers.setdefault(param, np.zeros(count))
        strided(buf, "in:" + role)[...] = np.asarray(a).reshape(sizes)

    def ctype(role):
        return {"valid": "long long", "lse": "float"}.get(role, "ELEM")

    params = [p for _, _, p in params]
    kinds = {}  # param -> (C type, element count)
    for key, (param, _, _, _, count) in ports.items():
        kinds[param] = (ctype(key.split(":")[1]), count)
    call = ", ".join(p + ".data()" for p in params)
    inputs = [(p,) + kinds[p] for p in params if p.startswith("in")]
    outputs = [(p,) + kinds[p] for p in params if p.startswith("out")]
    # Small grids: each block's grid-stride loop takes several tiles.
    launches = [(grid_a, block, f"{name}({call})")]
    if name + "_dkdv(" in src:
        launches.append((2, block, f"{name}_dkdv({call})"))
    if name + "_dq(" in src:  # the saved-dS and atomic-dq third launch
        launches.append((3, block, f"{name}_dq({call})"))
    if name + "_dqacc[" in src:
        # Twice: the second step's dq is right only if launch 1 zeroes the
        # accumulator the first step left.
        launches = launches * 2
    main_cpp = harness(elem, inputs, outputs, launches)
    for i, length in enumerate(lengths):
        n_ok = tq if length is None else max(0, min(length, tq))
        for role, a in (("q", q), ("k", k), ("v", v), ("g", g)):
            if a is not None:
                put(role, a)
        if length is not None:
            put("valid", np.array(length, dtype=np.float64))
        # The reference on the inputs cut to the valid rows, zeros after.
        want = {"o": np.zeros((s, tq, dv)), "lse": np.zeros((s, tq)),
                "dq": np.zeros(q.shape), "dk": np.zeros(k.shape),
                "dv": np.zeros(v.shape)}
        if n_ok > 0:
            cut = n_ok if length is not None else None
            o, lse, grads = reference(
                q[:, :cut].astype(np.float64), k[:, :cut].astype(np.float64),
                v[:, :cut].astype(np.float64),
                None if g is None else g[:, :cut].astype(np.float64),
                causal, 1 / math.sqrt(d))
            want["o"][:, :o.shape[1]] = o
            want["lse"][:, :lse.shape[1]] = lse
            if grad:
                for n, w in zip(("dq", "dk", "dv"), grads):
                    want[n][:, :w.shape[1]] = w
        if saved: # as attention_lse stores them
            put("out", rounded(want["o"], elem).astype(np.float64))
            put("lse", want["lse"].astype(np.float32).astype(np.float64))
        for param, buf in buffers.items():
            buf.tofile(os.path.join(work, param + ".bin"))
        if i == 0:
            build_and_run(args.cxx, work, src, main_cpp)
        else:
            subprocess.run([os.path.join(work, "kernel")], cwd=work,
                           check=True)
        tag = os.path.basename(path) + ("" if length is None
                                        else f" L={length}")
        worst = 0.0
        got_params = {p: np.fromfile(os.path.join(work, p + ".bin"),
                                     dtype=np.float32).astype(np.float64)
                      for p, _, _ in outputs}
        for n in [r for r in ("o", "lse", "dq", "dk", "dv")
                  if "out:" + r in ports]:
            w = want[n]
            got = strided(got_params[ports["out:" + n][0]],
                          "out:" + n).reshape(w.shape)
            if not np.isfinite(got).all():
                sys.exit(f"FAIL {tag}: {n} has "
                         f"{int((~np.isfinite(got)).sum())} unwritten/"
                         f"non-finite elements")
            if length is not None and np.any(got[:, n_ok:] != 0):
                sys.exit(f"FAIL {tag}: {n} has non-zero padded rows")
            # Relative to the largest element, at least 1: with one visible
            # key (L = 1) dS is exactly 0, which a gradient from the saved
            # result reaches up to rounding only (dd = g . out, dP = g . v).
            err = float(np.abs(got - w).max() / max(np.abs(w).max(), 1.0))
            worst = max(worst, err)
            print(f"{tag} ({elem}{', tensor cores' if tensor_cores else ''}"
                  f"{', saved statistics' if saved else ''}) {n}: rel err "
                  f"{err:.3g}")
        if worst > BOUND[elem]:
            sys.exit(f"FAIL {tag}: rel err {worst:.3g} > {BOUND[elem]:g}")
    if not grad and lengths == (None,):
        nan_row(work, q, put, buffers, strided, ports, got_params, tq, tag)


def nan_row(work, q, put, buffers, strided, ports, before, tq, tag):
    """Runs the forward again with one element of one query row NaN: that
    row's result and log-sum-exp must be NaN (as the CPU kernel's), every
    other element the bits of the run before. (The mma kernels take a
    tile's score max by fmaxf, which skips NaN: the row's exponentials
    carry it instead.)"""
    r = tq // 2
    bad = q.copy()
    bad[0, r, 0] = np.nan
    put("q", bad)
    for param, buf in buffers.items():
        buf.tofile(os.path.join(work, param + ".bin"))
    subprocess.run([os.path.join(work, "kernel")], cwd=work, check=True)
    for n in [x for x in ("o", "lse") if "out:" + x in ports]:
        param = ports["out:" + n][0]
        got = np.fromfile(os.path.join(work, param + ".bin"),
                          dtype=np.float32).astype(np.float64)
        # [S, T, W] (the ports' sizes are [.., T, W] or [B, H, T, W])
        view = strided(got, "out:" + n).reshape(q.shape[0], tq, -1)
        old = strided(before[param].copy(), "out:" + n).reshape(view.shape)
        nan = np.isnan(view)
        want = np.zeros(view.shape, dtype=bool)
        want[0, r] = True  # slice 0, row r
        if (nan != want).any():
            sys.exit(f"FAIL {tag}: a NaN in query row {r} of slice 0 made "
                     f"{int(nan.sum())} {n} elements NaN, want "
                     f"{int(want.sum())} (its row)")
        if (view[~want] != old[~want]).any():
            sys.exit(f"FAIL {tag}: a NaN in query row {r} changed {n} "
                     f"elsewhere")
    print(f"{tag}: a NaN in query row {r} makes its row NaN, nothing else")
    put("q", q)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--gpt2-example", required=True)
    ap.add_argument("--cxx", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-") as tmp:
        models = []
        for tag, ctx, width, heads, batch in (("gpt2_d24", 70, 96, 4, 2),
                                              ("gpt2_d64", 70, 128, 2, 1),
                                              ("gpt2_d128", 40, 256, 2, 1),
                                              ("gpt2_d64_t130", 130, 128, 2,
                                               1)):
            d = os.path.join(tmp, tag)
            subprocess.run([args.gpt2_example, "--vocab", "256", "--context",
                            str(ctx), "--width", str(width), "--heads",
                            str(heads), "--layers", "1", "--batch", str(batch),
                            "--emit-model", d], check=True,
                           stdout=subprocess.DEVNULL)
            models.append((os.path.join(d, "model.mlir"),
                           (batch * heads, ctx, ctx, width // heads,
                            width // heads), True, (None,)))
        # fp16 AMP too, on D = 64: the f16 mma.sync kernels. T = 130: the
        # causal mma kernels' off-diagonal tiles, seen whole (no mask).
        # --attention-saved-ds: the gradient's dk/dv launch stores dS for a
        # third launch computing dq (causal T = 70 and 130; below, valid
        # lengths causal and not).
        saved_ds = ["--train", "--amp=bf16", "--attention-saved-ds"]
        atomic_dq = ["--train", "--amp=bf16", "--attention-atomic-dq"]
        flags = {models[1][0]: (["--train"], ["--train", "--amp=bf16"],
                                ["--train", "--amp=fp16"], saved_ds,
                                atomic_dq),
                 models[3][0]: (["--train", "--amp=bf16"], saved_ds,
                                atomic_dq)}
        for shape in ((6, 37, 45, 24, 40), (4, 37, 83, 48, 32),
                      (2, 20, 24, 144, 32)):
            path = os.path.join(tmp, "noncausal_%d_%d.mlir" % shape[3:])
            with open(path, "w") as f:
                f.write(noncausal(*shape))
            models.append((path, shape, False, (None,)))
            if shape[3] == 48:  # Tq 37, Tk 83: dS tiles 1 x 2 a slice
                flags[path] = (["--train"], ["--train", "--amp=bf16"],
                               saved_ds, atomic_dq)
        # Packed heads of D = 1280 (the one-row kernels, through ports), in
        # f32 (under --amp=bf16 the casts of the f32 param's heads would be
        # the attention's operands, not views).
        path = os.path.join(tmp, "packed_heads_1280.mlir")
        with open(path, "w") as f:
            f.write(packed_heads(1, 2, 8, 1280))
        models.append((path, (2, 8, 8, 1280, 1280), True, (None,)))
        flags[path] = (["--train"],)
        # Valid lengths: CUDA cores (D 24), tensor cores in bf16 (D 64 and
        # 48/32), the one-row kernels (D 1280: even 16-row tiles would pass
        # 160 KiB; few rows, its per-column warp sums are slow to emulate);
        # lengths: all, a partial second tile, one tile and a row, one row,
        # none, and past T.
        for s, t, d, dv, causal in ((4, 70, 24, 40, True),
                                    (2, 70, 64, 64, True),
                                    (2, 70, 48, 32, False),
                                    (2, 8, 1280, 16, True)):
            path = os.path.join(tmp, "valid_%d_%d_%s.mlir"
                                % (d, dv, "causal" if causal else "full"))
            with open(path, "w") as f:
                f.write(padded(s, t, d, dv, causal))
            lengths = (t, 37, 65, 1, 0, t + 30) if t > 64 else (t, 5, 0)
            models.append((path, (s, t, t, d, dv), causal, lengths))
            if d in (64, 48):
                flags[path] = (["--train"], ["--train", "--amp=bf16"],
                               saved_ds, atomic_dq)
        # Training steps above give the gradient the forward's saved
        # statistics (step-attention-stats); these are attention_grad alone,
        # whose kernels make their own pass over the keys: CUDA cores and
        # tensor cores.
        for s, t, d, dv, causal, dtype in ((4, 70, 24, 40, True, "f32"),
                                           (2, 70, 64, 32, False, "bf16")):
            path = os.path.join(tmp, "grad_%d_%s.mlir" % (d, dtype))
            with open(path, "w") as f:
                f.write(grad_model(s, t, d, dv, causal, dtype))
            flags[path] = ([],)
            models.append((path, (s, t, t, d, dv), causal, (t, 37, 0)))
        for model, shape, causal, lengths in models:
            for compile_flags in flags.get(model, (["--train"],
                                                   ["--train", "--amp=bf16"])):
                dump = os.path.join(tmp, "kernels")
                dump_kernels(args.stepc, model, tmp, dump, compile_flags)
                # Attention kernels, of the op or of an attention fusion
                # (step-fuse-attention: GPT-2's heads read in place, q and
                # k strided views of the one packed projection).
                in_place = dq_launches = accumulators = 0
                for f in sorted(glob.glob(os.path.join(dump, "*.cu"))):
                    text = open(f).read()
                    if "// step.port q " not in text:
                        continue
                    grad = "// step.port dq " in text
                    dq_launches += "_dq(" in text
                    accumulators += "_dqacc[" in text
                    qk = re.findall(r"^// step\.port [qk] (\w+) ", text, re.M)
                    in_place += len(set(qk)) == 1
                    work = os.path.join(tmp, "work")
                    os.makedirs(work, exist_ok=True)
                    run_kernel(args, f, grad, shape, causal, work, lengths)
                atomic = "--attention-atomic-dq" in compile_flags
                if (atomic or "--attention-saved-ds" in compile_flags) != (
                        dq_launches > 0) or atomic != (accumulators > 0):
                    sys.exit(f"FAIL {model} {compile_flags}: {dq_launches} "
                             f"attention kernels with a dq launch, "
                             f"{accumulators} with a dq accumulator")
                if ("gpt2_" in model or "packed_" in model) and in_place < 2:
                    sys.exit(f"FAIL {model} {compile_flags}: {in_place} "
                             f"attention kernels read q and k in place")
                for f in glob.glob(os.path.join(dump, "*")):
                    os.remove(f)
    print("ok")


if __name__ == "__main__":
    main()
