#!/usr/bin/env python3
"""The column reduction kernels that stepc generates, run on the CPU.

A column reduction (the innermost dim kept: a bias or layer-norm weight
gradient) with few outputs is cut into row chunks: a block per (32 V
outputs, chunk) tile writes partials to a __device__ array and the last
block of each tile (an atomic ticket) combines them in a fixed order
(docs/codegen.md, "Reduction strategies"); a thread takes V = 4 adjacent
outputs (vector loads and stores) where the innermost kept dim is a
multiple of 4, else V = 1. No GPU here, so: stepc
--dump-kernels writes the CUDA C++ of small models, each with one kernel;
this test compiles it with the host compiler against
tests/e2e/emu/cuda_emu_sync.h (blocks one after another, their threads as fibers)
and compares every output with a float64 numpy reference.

Checks per kernel:
- values: |got - want| <= 1e-5 * sum|terms| + ulp/2 of the output type *
  |want| (f32 sums over at most a few hundred terms per partial; the bf16
  rounding of the stored result). A dropped or doubled row costs about
  sum|terms| / K >= 2e-4 * sum|terms|, well above the bound;
- determinism: a split kernel (it has a ticket) runs three times in a row
  with its blocks in increasing, decreasing and shuffled order, i.e. a
  different block combines the partials each time; the outputs must be
  bitwise equal; before each run the __device__ partials are poisoned
  with NaN, so a ticket left unreset (a block combining too early, from
  the previous run's partials) shows. A kernel without a ticket runs with grids of 1,
  2 and 5 blocks (its grid-stride loop) and must give the same bits too.

Cases: reduce_sum/mean/max over rows with row counts that are not a
multiple of the chunk, 1 to 37 chunks per tile, partial tiles of 32 and
128 outputs (V = 1 and 4),
a 3-d operand whose kept dims are not contiguous, too few rows to split,
and two fusions (cast and mul prologue with two roots, as layer_norm's
backward; an epilogue adding another input; layer norm's gradient with the
normalized x recomputed from x and row statistics, over columns and over
rows); f32 and bf16. And the row
kernels (the innermost dim reduced; EmitUtil.h, RowMapping): reductions,
a two-root row fusion, layer_norm (alone, and after a residual add whose
sum the fused kernel also stores) and softmax over rows of at most 1024
(a warp per row, 8 rows per block, the last block partly past the end)
and over longer rows (a block per row). And layer norm's backward written
out as step-autodiff builds it, which step-fuse-row-chains makes one
row_chain kernel (three stages of row reductions, then dx in f32 and bf16
and rstd), over rows of 768 (a warp each) and 1500 (a block each). And a
loop whose result a sum reads (step-fuse-loop-reductions: one reduction
kernel storing the loop's value where it reads each element) in the split
column, one-pass column and row kernels: every element of the stored
value must be written (the outputs are poisoned with NaN before each run);
the same with a bare step.gelu_grad as the loop (GPT-2's GELU backward and
the bias gradient).

Usage: cuda_emulation_reduce.py --stepc STEPC --cxx CXX
"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "emu"))
from emu_harness import build_and_run, fill, rounded, single_kernel  # noqa: E402
CTYPE = {"f32": "float", "bf16": "__nv_bfloat16"}
# Half an ulp of the stored result, relative to its value.
ROUND = {"f32": 2.0 ** -24, "bf16": 2.0 ** -8}


def shape_t(shape, dt):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), dt) if shape else \
        "tensor<%s>" % dt


def reduce_case(name, op, shape, dims, dt, fuse=False):
    """One unfused step.<op> over `dims` of one input."""
    out = [s for d, s in enumerate(shape) if d not in dims]
    x, y = shape_t(shape, dt), shape_t(out, dt)
    mlir = f"""module {{
  func.func @forward(%x: {x} {{step.kind = "input", step.name = "x"}}) -> ({y} {{step.name = "y"}}) {{
    %y = step.{op} %x dims = [{", ".join(map(str, dims))}] : {x} -> {y}
    return %y : {y}
  }}
}}
"""
    fn = {"reduce_sum": np.sum, "reduce_mean": np.mean,
          "reduce_max": np.max}[op]

    def ref(ins):
        v = ins[0]
        return [fn(v, axis=tuple(dims))], [np.abs(v).sum(axis=tuple(dims))]
    return dict(name=name, mlir=mlir, inputs=[(shape, dt)], outputs=[dt],
                ref=ref, fuse=fuse)


def layer_norm_grad_case(name, k, m):
    """Two roots of one prologue, as layer_norm's backward under bf16 AMP:
    sum(dy) and sum(dy * xhat), dy bf16 widened, xhat f32."""
    a, b = shape_t([k, m], "bf16"), shape_t([k, m], "f32")
    r = shape_t([m], "f32")
    mlir = f"""module {{
  func.func @forward(%dy: {a} {{step.kind = "input", step.name = "dy"}}, %xh: {b} {{step.kind = "input", step.name = "xh"}}) -> ({r} {{step.name = "db"}}, {r} {{step.name = "dw"}}) {{
    %c = step.cast %dy : {a} -> {b}
    %p = step.mul %c, %xh : {b}, {b}
    %db = step.reduce_sum %c dims = [0] : {b} -> {r}
    %dw = step.reduce_sum %p dims = [0] : {b} -> {r}
    return %db, %dw : {r}, {r}
  }}
}}
"""

    def ref(ins):
        dy, xh = ins
        return ([dy.sum(0), (dy * xh).sum(0)],
                [np.abs(dy).sum(0), np.abs(dy * xh).sum(0)])
    return dict(name=name, mlir=mlir, inputs=[([k, m], "bf16"),
                                              ([k, m], "f32")],
                outputs=["f32", "f32"], ref=ref, fuse=True)


def centred_case(name, m, k, dims):
    """Layer norm's gradient as step-fuse leaves it: the normalized x
    recomputed from x and the row statistics ((x - mean) * rstd, row
    vectors broadcast) and dy * gamma in the prologue of two sibling
    reductions, over rows (dims [1]: the two row means) or over columns
    (dims [0]: gamma's and beta's gradients)."""
    xt, dyt = shape_t([m, k], "f32"), shape_t([m, k], "bf16")
    v, g = shape_t([m], "f32"), shape_t([k], "f32")
    r = shape_t([k] if dims == [0] else [m], "f32")
    red = "reduce_sum" if dims == [0] else "reduce_mean"
    mlir = f"""module {{
  func.func @forward(%rstd: {v} {{step.kind = "input", step.name = "rstd"}}, %mean: {v} {{step.kind = "input", step.name = "mean"}}, %x: {xt} {{step.kind = "input", step.name = "x"}}, %gamma: {g} {{step.kind = "input", step.name = "gamma"}}, %dy: {dyt} {{step.kind = "input", step.name = "dy"}}) -> ({r} {{step.name = "a"}}, {r} {{step.name = "b"}}) {{
    %mb = step.broadcast_in_dim %mean, dims = [0] : {v} -> {xt}
    %xc = step.sub %x, %mb : {xt}
    %rb = step.broadcast_in_dim %rstd, dims = [0] : {v} -> {xt}
    %xh = step.mul %xc, %rb : {xt}
    %c = step.cast %dy : {dyt} -> {xt}
    %gb = step.broadcast_in_dim %gamma, dims = [1] : {g} -> {xt}
    %d = step.mul %c, %gb : {xt}
    %p = step.mul %d, %xh : {xt}
    %a = step.{red} %d dims = {dims} : {xt} -> {r}
    %b = step.{red} %p dims = {dims} : {xt} -> {r}
    return %a, %b : {r}, {r}
  }}
}}
"""

    def ref(ins):
        rstd, mean, x, gamma, dy = ins
        xh = (x - mean[:, None]) * rstd[:, None]
        d = dy * gamma[None, :]
        ax = 0 if dims == [0] else 1
        f = (lambda t: t.sum(ax)) if dims == [0] else (lambda t: t.mean(ax))
        return ([f(d), f(d * xh)],
                [f(np.abs(d)), f(np.abs(d * xh))])
    return dict(name=name, mlir=mlir,
                # In the fusion's input order (the harness's in<k> is
                # argument k): step-fuse collects them rstd first.
                inputs=[([m], "f32"), ([m], "f32"), ([m, k], "f32"),
                        ([k], "f32"), ([m, k], "bf16")],
                outputs=["f32", "f32"], ref=ref, fuse=True)


def epilogue_case(name, k, m, dt):
    """A root and an epilogue reading another input at the output index."""
    x, r = shape_t([k, m], dt), shape_t([m], dt)
    mlir = f"""module {{
  func.func @forward(%x: {x} {{step.kind = "input", step.name = "x"}}, %a: {r} {{step.kind = "input", step.name = "a"}}) -> ({r} {{step.name = "s"}}, {r} {{step.name = "e"}}) {{
    %s = step.reduce_sum %x dims = [0] : {x} -> {r}
    %e = step.add %a, %s : {r}, {r}
    return %s, %e : {r}, {r}
  }}
}}
"""

    def ref(ins):
        x, a = ins
        s = x.sum(0)
        if dt == "bf16":  # the epilogue adds the rounded root result
            s_r = rounded(s, dt)
        else:
            s_r = s
        return [s, a + s_r], [np.abs(x).sum(0), np.abs(x).sum(0) + np.abs(a)]
    return dict(name=name, mlir=mlir, inputs=[([k, m], dt), ([m], dt)],
                outputs=[dt, dt], ref=ref, fuse=True)


def row_stats_case(name, m, k, dt):
    """Two roots over rows of one prologue, as layer_norm's backward: the
    row means of x and of x * y."""
    a, r = shape_t([m, k], dt), shape_t([m], "f32")
    b = shape_t([m, k], "f32")
    mlir = f"""module {{
  func.func @forward(%x: {a} {{step.kind = "input", step.name = "x"}}, %y: {b} {{step.kind = "input", step.name = "y"}}) -> ({r} {{step.name = "mx"}}, {r} {{step.name = "mxy"}}) {{
    %c = step.cast %x : {a} -> {b}
    %p = step.mul %c, %y : {b}, {b}
    %mx = step.reduce_mean %c dims = [1] : {b} -> {r}
    %mxy = step.reduce_mean %p dims = [1] : {b} -> {r}
    return %mx, %mxy : {r}, {r}
  }}
}}
"""

    def ref(ins):
        x, y = ins
        return ([x.mean(1), (x * y).mean(1)],
                [np.abs(x).mean(1), np.abs(x * y).mean(1)])
    return dict(name=name, mlir=mlir, inputs=[([m, k], dt), ([m, k], "f32")],
                outputs=["f32", "f32"], ref=ref, fuse=True)


def ln_grad_tail(xt, dyt, v, g, columns, residual, lead=1):
    """What row_chain_case and row_chain_saved_stats_case share: the extra
    results and argument, and the ops from xhat (%xh) and rstd's broadcast
    (%rb) on: dy * gamma, its means, dx (plus the residual gradient), dx
    in bf16 and the column sums; rows over the first `lead` dims."""
    rows = "[" + ", ".join(str(d) for d in range(lead)) + "]"
    last = f"[{lead}]"
    col_results = "".join(f', {g} {{step.name = "{n}"}}'
                          for n in ["db", "dw"][:columns])
    col_ops = "".join([f"""
    %db = step.reduce_sum %c dims = {rows} : {xt} -> {g}""", f"""
    %cx = step.mul %c, %xh : {xt}
    %dw = step.reduce_sum %cx dims = {rows} : {xt} -> {g}"""][:columns])
    col_ret = ("".join([", %db", ", %dw"][:columns]), f", {g}" * columns)
    res_arg = (f', %res: {xt} {{step.kind = "input", step.name = "res"}}'
               if residual else "")
    dx_op = (f"""%dx0 = step.mul %rb, %w : {xt}
    %dx = step.add %dx0, %res : {xt}""" if residual else
             f"%dx = step.mul %rb, %w : {xt}")
    ops = f"""    %c = step.cast %dy : {dyt} -> {xt}
    %gb = step.broadcast_in_dim %gamma, dims = {last} : {g} -> {xt}
    %d = step.mul %c, %gb : {xt}
    %a = step.reduce_mean %d dims = {last} : {xt} -> {v}
    %p = step.mul %d, %xh : {xt}
    %b = step.reduce_mean %p dims = {last} : {xt} -> {v}
    %ab = step.broadcast_in_dim %a, dims = {rows} : {v} -> {xt}
    %bb = step.broadcast_in_dim %b, dims = {rows} : {v} -> {xt}
    %t = step.mul %xh, %bb : {xt}
    %u = step.sub %d, %ab : {xt}
    %w = step.sub %u, %t : {xt}
    {dx_op}
    %dxb = step.cast %dx : {xt} -> {dyt}{col_ops}
"""
    return col_results, col_ret, res_arg, ops


def ln_grad_ref(xh, rstd, dy, gamma, columns, res):
    """dx (plus `res` when not None) and its magnitude bound, then the
    column sums' wants and magnitudes, from xhat and rstd."""
    d = dy * gamma[None, :]
    a = d.mean(1, keepdims=True)
    b = (d * xh).mean(1, keepdims=True)
    dx = rstd[:, None] * (d - a - xh * b)
    # Magnitudes: each term's size, and the statistics' errors carried
    # through (|xh| * k terms of |d xh|).
    mag = np.abs(rstd[:, None]) * (np.abs(d) + np.abs(a) + np.abs(xh) *
                                   (np.abs(d * xh).mean(1, keepdims=True) +
                                    1))
    if res is not None:
        dx, mag = dx + res, mag + np.abs(res)
    cols = [dy.sum(0), (dy * xh).sum(0)][:columns]
    col_mags = [np.abs(dy).sum(0), np.abs(dy * xh).sum(0)][:columns]
    return dx, mag, cols, col_mags


def row_chain_case(name, m, k, columns=0, residual=False):
    """Layer norm's backward written out, as step-autodiff builds it under
    bf16 AMP: the mean of x, the variance of x - mean, the means of
    dy * gamma and of its product with xhat, then dx (f32, and rounded to
    bf16) and rstd; step-fuse-row-chains makes it one row_chain kernel.
    With `columns` 1 or 2, also the bias gradient (the sum over the rows of
    dy) or both the bias and weight gradients (and of dy * xhat), which
    join the chain as column reductions: the kernel and its `_cols`
    phase. With `residual`, dx also adds an incoming gradient (f32, as
    GPT-2's residual stream): only the stores read it, so the kernel asks
    its rows into L2 a row ahead (stepPrefetchL2)."""
    xt, dyt = shape_t([m, k], "f32"), shape_t([m, k], "bf16")
    v, g, s = shape_t([m], "f32"), shape_t([k], "f32"), shape_t([], "f32")
    col_results, col_ret, res_arg, tail = ln_grad_tail(xt, dyt, v, g,
                                                       columns, residual)
    mlir = f"""module {{
  func.func @forward(%x: {xt} {{step.kind = "input", step.name = "x"}}, %eps: {s} {{step.kind = "input", step.name = "eps"}}, %dy: {dyt} {{step.kind = "input", step.name = "dy"}}, %gamma: {g} {{step.kind = "input", step.name = "gamma"}}{res_arg}) -> ({v} {{step.name = "rstd"}}, {xt} {{step.name = "dx"}}, {dyt} {{step.name = "dxb"}}{col_results}) {{
    %mean = step.reduce_mean %x dims = [1] : {xt} -> {v}
    %mb = step.broadcast_in_dim %mean, dims = [0] : {v} -> {xt}
    %xc = step.sub %x, %mb : {xt}
    %sq = step.mul %xc, %xc : {xt}
    %var = step.reduce_mean %sq dims = [1] : {xt} -> {v}
    %eb = step.broadcast_in_dim %eps, dims = [] : {s} -> {v}
    %ve = step.add %var, %eb : {v}
    %rstd = step.rsqrt %ve : {v}
    %rb = step.broadcast_in_dim %rstd, dims = [0] : {v} -> {xt}
    %xh = step.mul %xc, %rb : {xt}
{tail}    return %rstd, %dx, %dxb{col_ret[0]} : {v}, {xt}, {dyt}{col_ret[1]}
  }}
}}
"""

    def ref(ins):
        x, eps, gamma, dy = [ins[order.index(j)] for j in range(4)]
        xc = x - x.mean(1, keepdims=True)
        rstd = 1.0 / np.sqrt((xc * xc).mean(1) + eps)
        xh = xc * rstd[:, None]
        res = ins[order.index(4)] if residual else None
        dx, mag, cols, col_mags = ln_grad_ref(xh, rstd, dy, gamma, columns,
                                              res)
        wants, mags = [rstd, dx, dx] + cols, [rstd, mag, mag] + col_mags
        return [wants[j] for j in outs], [mags[j] for j in outs]
    # The fusion's inputs and results: its members' in turn. The sum of dy
    # alone reads only an input, so step-fuse puts it before the chain, and
    # dy and the sum come first; with dy * xhat beside it, both come after.
    order = [3, 0, 1, 2] if columns == 1 else [0, 1, 2, 3]
    outs = [3, 0, 1, 2] if columns == 1 else list(range(3 + columns))
    inputs = [([m, k], "f32"), ([], "f32"), ([k], "f32"), ([m, k], "bf16")]
    if residual:  # read last, by the stores
        order, inputs = order + [4], inputs + [([m, k], "f32")]
    outputs = ["f32", "f32", "bf16"] + ["f32"] * columns
    return dict(name=name, mlir=mlir,
                source_has=["stepPrefetchL2(p_"] if residual else [],
                # The fusion's input order: its members' operands in turn.
                inputs=[inputs[j] for j in order],
                outputs=[outputs[j] for j in outs],
                ref=ref, fuse=True, positive=[order.index(1)])


def row_chain_saved_stats_case(name, m, k, columns=0, residual=False,
                               batch=None):
    """Layer norm's backward once step-layer-norm-stats hands it the
    forward's mean and rstd (inputs of one value a row): xhat from them,
    the means of dy * gamma and of its product with xhat (one stage), then
    dx; the kernel loads a row's mean and rstd once (`// a row's value`),
    not at every element. `columns` and `residual` as row_chain_case; with
    `batch`, the m rows are [batch, m / batch] (GPT-2's [B, T] statistics
    of a [B, T, C] x)."""
    lead_shape = [batch, m // batch] if batch else [m]
    xt = shape_t(lead_shape + [k], "f32")
    dyt = shape_t(lead_shape + [k], "bf16")
    v, g = shape_t(lead_shape, "f32"), shape_t([k], "f32")
    lead = len(lead_shape)
    rows = "[" + ", ".join(str(d) for d in range(lead)) + "]"
    col_results, col_ret, res_arg, tail = ln_grad_tail(xt, dyt, v, g,
                                                       columns, residual,
                                                       lead)
    mlir = f"""module {{
  func.func @forward(%x: {xt} {{step.kind = "input", step.name = "x"}}, %mean: {v} {{step.kind = "input", step.name = "mean"}}, %rstd: {v} {{step.kind = "input", step.name = "rstd"}}, %dy: {dyt} {{step.kind = "input", step.name = "dy"}}, %gamma: {g} {{step.kind = "input", step.name = "gamma"}}{res_arg}) -> ({xt} {{step.name = "dx"}}, {dyt} {{step.name = "dxb"}}{col_results}) {{
    %mb = step.broadcast_in_dim %mean, dims = {rows} : {v} -> {xt}
    %xc = step.sub %x, %mb : {xt}
    %rb = step.broadcast_in_dim %rstd, dims = {rows} : {v} -> {xt}
    %xh = step.mul %xc, %rb : {xt}
{tail}    return %dx, %dxb{col_ret[0]} : {xt}, {dyt}{col_ret[1]}
  }}
}}
"""

    def ref(ins):
        x, mean, rstd, dy, gamma = [ins[order.index(j)] for j in range(5)]
        x, dy = x.reshape(m, k), dy.reshape(m, k)
        mean, rstd = mean.reshape(m), rstd.reshape(m)
        xh = (x - mean[:, None]) * rstd[:, None]
        res = ins[order.index(5)].reshape(m, k) if residual else None
        dx, mag, cols, col_mags = ln_grad_ref(xh, rstd, dy, gamma, columns,
                                              res)
        wants, mags = [dx, dx] + cols, [mag, mag] + col_mags
        return [wants[j] for j in outs], [mags[j] for j in outs]
    xs = lead_shape + [k]
    inputs = [(xs, "f32"), (lead_shape, "f32"), (lead_shape, "f32"),
              (xs, "bf16"), ([k], "f32")] + ([(xs, "f32")] if residual else [])
    # The fusion's inputs and results in the order step-fuse makes them:
    # with the column sums first (they join from before the chain), dy,
    # the statistics and x, then gamma; without, gamma first.
    order = [3, 2, 1, 0, 4] if columns else [4, 3, 2, 1, 0]
    if residual:
        order.append(5)
    outs = [2, 3, 0, 1] if columns == 2 else list(range(2 + columns))
    outputs = ["f32", "bf16"] + ["f32"] * columns
    return dict(name=name, mlir=mlir, source_has=["// a row's value"],
                inputs=[inputs[j] for j in order],
                outputs=[outputs[j] for j in outs],
                ref=ref, fuse=True)  # rstd of either sign: the formula


def loop_reduction_case(name, k, m, dims):
    """A loop and the sum of its result (step-fuse-loop-reductions), as a
    bias gradient after GELU's backward: g = bf16(a * b + a) is stored
    (returned) and summed over `dims` by the same kernel, each element
    stored where the reduction reads it (split, column or row)."""
    x, xf = shape_t([k, m], "bf16"), shape_t([k, m], "f32")
    r = shape_t([m] if dims == [0] else [k], "bf16")
    mlir = f"""module {{
  func.func @forward(%a: {x} {{step.kind = "input", step.name = "a"}}, %b: {x} {{step.kind = "input", step.name = "b"}}) -> ({x} {{step.name = "g"}}, {r} {{step.name = "s"}}) {{
    %af = step.cast %a : {x} -> {xf}
    %bf = step.cast %b : {x} -> {xf}
    %p = step.mul %af, %bf : {xf}
    %q = step.add %p, %af : {xf}
    %g = step.cast %q : {xf} -> {x}
    %s = step.reduce_sum %g dims = {dims} : {x} -> {r}
    return %g, %s : {x}, {r}
  }}
}}
"""

    def ref(ins):
        b, a = ins  # the fusion's input order: b first
        g = rounded(a * b + a, "bf16")
        ax = dims[0]
        return [g, g.sum(ax)], [np.abs(g), np.abs(g).sum(ax)]
    return dict(name=name, mlir=mlir, inputs=[([k, m], "bf16"),
                                              ([k, m], "bf16")],
                outputs=["bf16", "bf16"], ref=ref, fuse=True)


def dgelu_tanh(x):
    """gelu'(x), tanh form, in the dtype of x (op by op as the kernels)."""
    one, half = x.dtype.type(1), x.dtype.type(0.5)
    beta, kappa = x.dtype.type(0.7978845608028654), x.dtype.type(0.044715)
    t = np.tanh(beta * (x + kappa * (x * x * x)))
    inner = beta * (one + x.dtype.type(0.134145) * (x * x))
    return half * (one + t) + half * x * (one - t * t) * inner


def gelu_grad_reduction_case(name, k, m, dims):
    """GPT-2's GELU backward and bias gradient: g = gelu_grad(a, b) (tanh,
    bf16 in f32, rounded once) stored and summed over `dims` by one kernel
    (step-fuse-loop-reductions takes the bare op as a loop of one). g
    against float64 (a half ulp, and 1e-5 |a| (1 + |b|) where 1 + tanh
    cancels); the sum against the sum of g computed in f32 and rounded."""
    x = shape_t([k, m], "bf16")
    r = shape_t([m] if dims == [0] else [k], "bf16")
    mlir = f"""module {{
  func.func @forward(%a: {x} {{step.kind = "input", step.name = "a"}}, %b: {x} {{step.kind = "input", step.name = "b"}}) -> ({x} {{step.name = "g"}}, {r} {{step.name = "s"}}) {{
    %g = step.gelu_grad %a, %b approximate tanh : {x}
    %s = step.reduce_sum %g dims = {dims} : {x} -> {r}
    return %g, %s : {x}, {r}
  }}
}}
"""

    def ref(ins):
        a, b = ins
        exact = a * dgelu_tanh(b)
        stored = rounded(a.astype(np.float32) *
                         dgelu_tanh(b.astype(np.float32)), "bf16")
        ax = dims[0]
        return ([exact, stored.sum(ax)],
                [np.abs(a) * (1 + np.abs(b)), np.abs(stored).sum(ax)])
    return dict(name=name, mlir=mlir, inputs=[([k, m], "bf16"),
                                              ([k, m], "bf16")],
                outputs=["bf16", "bf16"], ref=ref, fuse=True)


def layer_norm_case(name, m, k, dt):
    """step.layer_norm over rows of k (eps 1e-5), weight and bias of the
    operand's type."""
    x, w = shape_t([m, k], dt), shape_t([k], dt)
    mlir = f"""module {{
  func.func @forward(%x: {x} {{step.kind = "input", step.name = "x"}}, %w: {w} {{step.kind = "input", step.name = "w"}}, %b: {w} {{step.kind = "input", step.name = "b"}}) -> ({x} {{step.name = "y"}}) {{
    %y = step.layer_norm %x, %w, %b eps = 1.000000e-05 : {x}, {w}, {w}
    return %y : {x}
  }}
}}
"""

    def ref(ins):
        x, w, b = ins
        xh = (x - x.mean(1, keepdims=True)) / np.sqrt(
            x.var(1, keepdims=True) + 1e-5)
        # The f32 statistics' error, relative to the row's scale (|x|
        # ~ 1, k <= a few thousand), times what the output multiplies.
        return [xh * w + b], [np.abs(xh * w) * 10 + np.abs(b)]
    return dict(name=name, mlir=mlir,
                inputs=[([m, k], dt), ([k], dt), ([k], dt)],
                outputs=[dt], ref=ref, fuse=False)


def residual_layer_norm_case(name, m, k):
    """GPT-2's residual add and layer_norm as step-fuse makes them one
    kernel: the f32 stream plus a bf16 branch, normalized and cast to bf16,
    the sum yielded too (a warp's row kept in registers stores it from
    there, not from its prologue again)."""
    r, d = shape_t([m, k], "f32"), shape_t([m, k], "bf16")
    w = shape_t([k], "f32")
    mlir = f"""module {{
  func.func @forward(%d: {d} {{step.kind = "input", step.name = "d"}}, %r: {r} {{step.kind = "input", step.name = "r"}}, %w: {w} {{step.kind = "input", step.name = "w"}}, %b: {w} {{step.kind = "input", step.name = "b"}}) -> ({r} {{step.name = "s"}}, {d} {{step.name = "y"}}) {{
    %c = step.cast %d : {d} -> {r}
    %s = step.add %r, %c : {r}
    %y = step.layer_norm %s, %w, %b eps = 1.000000e-05 : {r}, {w}, {w}
    %yb = step.cast %y : {r} -> {d}
    return %s, %yb : {r}, {d}
  }}
}}
"""

    def ref(ins):
        d, r, w, b = ins  # the fusion's inputs in the order it reads them
        s = r + d
        xh = (s - s.mean(1, keepdims=True)) / np.sqrt(
            s.var(1, keepdims=True) + 1e-5)
        # The sum is one f32 rounding: the bound's ROUND term, and 1e-8 of
        # slack against float64 noise in the ratio.
        return [s, xh * w + b], [np.abs(s) * 1e-3,
                                 np.abs(xh * w) * 10 + np.abs(b)]
    return dict(name=name, mlir=mlir,
                inputs=[([m, k], "bf16"), ([m, k], "f32"), ([k], "f32"),
                        ([k], "f32")],
                outputs=["f32", "bf16"], ref=ref, fuse=True)


def softmax_case(name, m, k, dt):
    """step.softmax over rows of k."""
    x = shape_t([m, k], dt)
    mlir = f"""module {{
  func.func @forward(%x: {x} {{step.kind = "input", step.name = "x"}}) -> ({x} {{step.name = "y"}}) {{
    %y = step.softmax %x dim = 1 : {x}
    return %y : {x}
  }}
}}
"""

    def ref(ins):
        x = ins[0]
        e = np.exp(x - x.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        return [p], [p * 10]
    return dict(name=name, mlir=mlir, inputs=[([m, k], dt)], outputs=[dt],
                ref=ref, fuse=False)


def cases():
    out = []
    for dt in ("f32", "bf16"):
        # V = 4: 14 chunks of 72 rows (the last 64), 1 tile of 128
        # outputs, 25 lanes of 32 used.
        out.append(reduce_case(f"sum_1000x100_{dt}", "reduce_sum",
                               [1000, 100], [0], dt))
        # 35 chunks: lanes combine 4 or 5 partials each.
        out.append(reduce_case(f"sum_2500x64_{dt}", "reduce_sum",
                               [2500, 64], [0], dt))
        # V = 1 (33 outputs): 37 chunks of 136 rows, the last of 104; one
        # output in tile 2.
        out.append(reduce_case(f"sum_5000x33_{dt}", "reduce_sum",
                               [5000, 33], [0], dt))
        # V = 4, 3 tiles of 128 outputs (the last of 44): 13 chunks.
        out.append(reduce_case(f"sum_900x300_{dt}", "reduce_sum",
                               [900, 300], [0], dt))
        # Kept dims 0 and 2 (not contiguous; V = 4 in runs of 40), 4 chunks.
        out.append(reduce_case(f"sum_6x300x40_d1_{dt}", "reduce_sum",
                               [6, 300, 40], [1], dt))
        # Reduced dims 0 and 1 merge into 1800 rows: 25 chunks.
        out.append(reduce_case(f"sum_300x6x40_d01_{dt}", "reduce_sum",
                               [300, 6, 40], [0, 1], dt))
        # Too few rows to cut: the one-pass column kernel.
        out.append(reduce_case(f"sum_100x100_{dt}", "reduce_sum",
                               [100, 100], [0], dt))
        out.append(epilogue_case(f"fused_epilogue_2500x64_{dt}", 2500, 64,
                                 dt))
    out.append(reduce_case("mean_1000x100_f32", "reduce_mean", [1000, 100],
                           [0], "f32"))
    out.append(reduce_case("max_1000x100_bf16", "reduce_max", [1000, 100],
                           [0], "bf16"))
    out.append(layer_norm_grad_case("fused_ln_grad_1000x100", 1000, 100))
    out.append(layer_norm_grad_case("fused_ln_grad_3000x80", 3000, 80))
    out.append(centred_case("centred_cols_1000x100", 1000, 100, [0]))
    out.append(centred_case("centred_rows_77x768", 77, 768, [1]))
    # Row kernels: rows of at most 1024 one per warp, 8 per block (77 rows:
    # the last block's warps 5-7 past the end); longer rows a block each.
    for dt in ("f32", "bf16"):
        out.append(reduce_case(f"rows_sum_77x768_{dt}", "reduce_sum",
                               [77, 768], [1], dt))
        out.append(row_stats_case(f"fused_row_means_77x768_{dt}", 77, 768,
                                  dt))
        out.append(layer_norm_case(f"layer_norm_77x768_{dt}", 77, 768, dt))
        out.append(softmax_case(f"softmax_77x100_{dt}", 77, 100, dt))
    out.append(reduce_case("rows_max_9x3000_f32", "reduce_max", [9, 3000],
                           [1], "f32"))
    out.append(reduce_case("rows_sum_4x2x33_d2_f32", "reduce_sum", [4, 2, 33],
                           [2], "f32"))
    out.append(layer_norm_case("layer_norm_9x1500_f32", 9, 1500, "f32"))
    out.append(residual_layer_norm_case("residual_layer_norm_77x768", 77,
                                        768))
    out.append(residual_layer_norm_case("residual_layer_norm_9x1500", 9,
                                        1500))
    # step-fuse-row-chains: a warp per row (the last block partly past the
    # end), and a block per row.
    out.append(row_chain_case("row_chain_ln_grad_77x768", 77, 768))
    out.append(row_chain_case("row_chain_ln_grad_9x1500", 9, 1500))
    # With the bias and weight gradients as column reductions: 10 blocks
    # of warp rows (24 columns a lane); 38 blocks of 1024-element rows (32
    # a lane: room for the bias gradient only); 40-element rows (2 a lane,
    # the second partly past the row), the grid capped at 256 blocks of 8
    # rows for 2100 rows.
    out.append(row_chain_case("row_chain_cols_77x768", 77, 768, 2))
    out.append(row_chain_case("row_chain_cols_300x1024", 300, 1024, 1))
    out.append(row_chain_case("row_chain_cols_2100x40", 2100, 40, 2))
    out.append(row_chain_case("row_chain_residual_cols_300x768", 300, 768, 2,
                              residual=True))
    # The same after step-layer-norm-stats: mean and rstd are inputs.
    out.append(row_chain_saved_stats_case("row_chain_stats_77x768", 77, 768))
    out.append(row_chain_saved_stats_case("row_chain_stats_cols_300x768",
                                          300, 768, 2, residual=True))
    out.append(row_chain_saved_stats_case("row_chain_stats_cols_2100x40",
                                          2100, 40, 2))
    # GPT-2's shapes: [B, T] statistics of a [B, T, C] x (rows over two
    # dims), with the residual gradient and both column sums.
    out.append(row_chain_saved_stats_case("row_chain_stats_btc_3x100x768",
                                          300, 768, 2, residual=True,
                                          batch=3))
    # step-fuse-loop-reductions: the loop's result stored by the split
    # column kernel (35 chunks), the one-pass column kernel and a row one.
    out.append(loop_reduction_case("loop_colsum_2500x64", 2500, 64, [0]))
    out.append(loop_reduction_case("loop_colsum_100x100", 100, 100, [0]))
    out.append(loop_reduction_case("loop_rowsum_77x768", 77, 768, [1]))
    out.append(gelu_grad_reduction_case("gelu_grad_colsum_2500x64", 2500, 64,
                                        [0]))
    out.append(gelu_grad_reduction_case("gelu_grad_rowsum_77x768", 77, 768,
                                        [1]))
    out.append(softmax_case("softmax_9x2000_f32", 9, 2000, "f32"))
    return out


HARNESS = r"""
#include "cuda_emu_sync.h"
#include "kernel.inc"
#include "emu_io.h"
int main() {
DECLS
  const std::vector<std::vector<unsigned>> orders = emuOrders(SPLIT, GRID);
  for (size_t run = 0; run < orders.size(); ++run) {
POISON
    emuLaunchOrder(orders[run], BLOCK, [&] { KERNEL(ARGS); });
THEN
WRITES
  }
}
"""


def run_case(args, case, tmp):
    _, src, block, name, params = single_kernel(
        args.stepc, case["name"], case["mlir"], tmp, case["fuse"])
    for text in case.get("source_has", []):
        if text not in src:
            sys.exit(f"FAIL {case['name']}: the kernel has no {text!r}")
    ticket = re.search(r"__device__ unsigned int \w+_ticket\[(\d+)\];", src)
    partial = re.search(r"__device__ \S+ \w+_partial0?\[(\d+) \* (\d+)\];",
                        src)
    split = ticket is not None
    # Partials left by the previous run are poisoned (all bits set: NaN):
    # a block that combined before every partial of this run was written
    # (a ticket not reset) would show.
    stale = ["    std::memset(%s, 0xff, sizeof %s);" % (p, p)
             for p in re.findall(
                 r"__device__ [\w ]+? (\w+_(?:partial|cacc)\d*)\[", src)]
    grid = int(ticket.group(1)) * int(partial.group(1)) if split else 0
    # A row_chain kernel with column reductions: its blocks write a
    # partial per column (row blockIdx.x of [G, K]), which its `_cols`
    # phase adds up; so run at its own grid G, in several block orders.
    cols = re.search(r"__device__ [\w ]+? \w+_cacc\d+\[(\d+) \* (\d+)\];",
                     src)
    then = ""
    if cols:
        split, grid = True, int(cols.group(1))
        then = (f"    emuLaunch({(int(cols.group(2)) + 31) // 32}, 256, [&] "
                f"{{ {name}_cols(ARGS); }});")

    rng = np.random.default_rng(len(case["name"]))
    ins = []
    for k, (shape, dt) in enumerate(case["inputs"]):
        # Zero mean: sums cancel, so a lost row shows against |want|.
        v = rounded(rng.normal(0, 1, shape), dt)
        if k in case.get("positive", []):  # eps: a small positive scalar
            v = rounded(np.abs(v) * 1e-3 + 1e-5, dt)
        np.asarray(v, dtype=np.float64).tofile(os.path.join(tmp, f"in{k}.bin"))
        ins.append(v.astype(np.float64))
    wants, mags = case["ref"](ins)
    decls, poison, writes, argl = [], [], [], []
    for const, ctype, pname in params:
        if const:
            k = int(pname[2:])
            n = int(np.prod(case["inputs"][k][0]))
            decls.append(f"  auto {pname} = readRaw<{ctype}>(\"in{k}.bin\", "
                         f"{n});")
        else:
            j = int(pname[3:])
            if ctype != CTYPE[case["outputs"][j]]:
                sys.exit(f"FAIL {case['name']}: {pname} is {ctype}")
            decls.append(f"  std::vector<{ctype}> {pname}("
                         f"{np.asarray(wants[j]).size});")
            poison.append(f"    poison({pname});")
            writes.append(f"    writeRaw(\"{pname}_\" + std::to_string(run) "
                          f"+ \".bin\", {pname});")
        argl.append(pname + ".data()")
    harness = fill(HARNESS, dict((("DECLS", "\n".join(decls)),
                     ("POISON", "\n".join(poison + stale)),
                     ("THEN", then),
                     ("WRITES", "\n".join(writes)),
                     ("ARGS", ", ".join(argl)), ("SPLIT", int(split)),
                     ("GRID", grid), ("BLOCK", block), ("KERNEL", name))))
    build_and_run(args.cxx, tmp, src, harness)

    worst = 0.0
    for j, (want, mag) in enumerate(zip(wants, mags)):
        want, mag = np.asarray(want), np.asarray(mag)
        runs = [np.fromfile(os.path.join(tmp, f"out{j}_{r}.bin"),
                            dtype=np.float32) for r in range(3)]
        got = runs[0].reshape(want.shape)
        if not np.isfinite(got).all():  # poisoned with NaN before the run
            sys.exit(f"FAIL {case['name']}: out{j} has "
                     f"{int((~np.isfinite(got)).sum())} unwritten/non-finite "
                     f"elements")
        for r in (1, 2):
            if runs[r].tobytes() != runs[0].tobytes():
                sys.exit(f"FAIL {case['name']}: out{j} differs between runs "
                         f"0 and {r} ({'block orders' if split else 'grids'})")
        bound = 1e-5 * mag + ROUND[case["outputs"][j]] * np.abs(want)
        ratio = float((np.abs(got - want) / np.maximum(bound, 1e-30)).max())
        worst = max(worst, ratio)
        print(f"{case['name']}: {name} out{j} "
              f"{'split grid %d' % grid if split else 'one pass'}: "
              f"max err / bound {ratio:.3g}")
    if worst > 1:
        sys.exit(f"FAIL {case['name']}: error above the bound")
    return split


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--cxx", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepjit-emu-reduce-") as tmp:
        splits = [run_case(args, c, tmp) for c in cases()]
    if not any(splits) or all(splits):
        sys.exit("FAIL: the cases should cover split and one-pass kernels")
    print("ok")


if __name__ == "__main__":
    main()
