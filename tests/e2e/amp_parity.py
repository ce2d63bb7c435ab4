#!/usr/bin/python3
"""Mixed-precision parity with PyTorch autocast (ctest e2e.amp_parity).

    amp_parity.py --step-opt PATH --step-interp PATH --mlp-example PATH
                  --gpt2-example PATH [--seed N] [--keep DIR]

For the MLP (examples/mlp) and a tiny GPT-2 (examples/gpt2), with the
params and inputs the example program writes:
  ours:  step-opt model.mlir [--step-amp=...] --step-autodiff, then
         step-interp --func=forward_backward: the loss (and the MLP's
         logits) and one f32 `grad.<param>` per param (params are f32 master
         weights; step-amp's cast VJP returns f32 gradients);
  torch: the same model written in PyTorch (GPT-2's Conv1D as HF's
         torch.addmm(bias, x, W), the MLP's layers likewise), loss.backward(),
         the .grad of the f32 params.
Three runs per model:
  f32   no --step-amp vs torch in f32: the baseline. It shows that both
        sides compute the same model (errors ~1e-7, as e2e.train_parity),
        so what the bf16 row adds is rounding, not a different model;
  bf16  --step-amp="dtype=bf16" vs the forward under
        torch.autocast("cpu", dtype=torch.bfloat16);
  fp16  (MLP only) --step-amp="dtype=fp16 loss-scale=none" vs a manual fp16
        emulation in torch (autocast has no fp16 on the CPU in torch 1.13):
        matmul operands rounded to fp16, the product computed in f32 (f32
        accumulation) and rounded to fp16, the bias rounded to fp16 and the
        bias add rounded to fp16 (step-amp's policy: the add follows its
        fp16 activation), relu on those values, cross_entropy in f32. The
        casts are autograd ops, so the backward rounds the cotangents to
        fp16 where step's backward holds them in fp16.

Error of a tensor a (ours) against b (torch), normwise:
    err = ||a - b||_2 / ||b||_2
Normwise because bf16 rounds each element to 2^-8 of ITS magnitude, and a
gradient element that cancels to ~0 (a sum of +-terms) keeps an absolute
error proportional to the terms, not to itself: elementwise relative error
is unbounded there and says nothing about the step an optimizer takes.

The two bf16 policies are not identical, so the bf16 error is rounding
noise of a few bf16 steps (2^-8 = 3.9e-3 relative per rounding), not ~0:
  - torch's addmm rounds matmul + bias once; step rounds the matmul result
    to bf16, then the bias add (one more rounding per linear layer);
  - torch computes attention's softmax in bf16 (softmax is not on the CPU
    autocast lists in torch 1.13) and rounds q k^T, the scaled scores and
    the probabilities; step.attention on bf16 q, k, v keeps the scores
    and the softmax in full precision inside the op (the interpreter: in
    double) and rounds the output once;
  - layer_norm and cross_entropy run in f32 on both sides (the residual
    stream is f32 in torch by type promotion, in step by the "follow"
    rule: the widest activation);
  - the backward rounds cotangents to bf16 at different points (torch's
    autocast casts and addmm's backward vs step's cast and matmul VJPs).
Every such rounding is an independent error of ~2^-9 relative (round to
nearest) of the value rounded; they add up over the K-term contractions
of the backward and over the layers.

The MLP's hidden layers (fc1, fc2) sit behind relu, whose derivative
jumps at 0: a pre-activation within one rounding of 0 (|h| < ~2^-9 of the
terms summed into it, ~0.1-0.3% of the elements) gets opposite signs in two
correct bf16 runs, and its whole cotangent passes in one run and is 0 in
the other. k such kinks among N active elements move a gradient by
~sqrt(k / N) normwise, a few percent: torch's own autocast gradients differ
from its f32 ones by ~10% there, and step's from torch's by 0.4% (no kink
hit, seed 5) up to 9% (seeds with kinks). The output layer (fc3), the
logits, the loss and every GPT-2 tensor (GELU and softmax are smooth) stay
at the ~1e-2 of bf16 rounding.

What AMP must change: checks that the runs are genuinely 16-bit, not f32
within a tolerance wide enough to hide it: every step.matmul of @forward
has 16-bit operands after step-amp, and every bf16 result differs from
step's own f32 result by more than AMP_MIN_DIFF (AMP_MIN_DIFF_LOSS for the
loss, a mean over the batch in which the roundings average out).

Measured (2-core CPU, 2026-11-21, --seed 0..15; ||step - torch|| /
||torch||, the worst tensor of each group over the 16 seeds; the last
column is the smallest distance of step's bf16 result from its f32 one):
  group          f32 vs f32  bf16 vs autocast  bound  bf16 vs step f32
  loss (both)      1.1e-7       2.3e-4 (gpt)    1e-3     >= 3.0e-6
  mlp logits       0            5.1e-3          2e-2     >= 3.4e-3
  mlp fc3          1.2e-7       5.6e-3          2e-2     >= 1.5e-3
  mlp fc1, fc2     1.8e-7       8.8e-2          3e-1     >= 2.8e-3
  gpt gradients    5.4e-7       1.2e-2          4e-2     >= 1.3e-3
  fp16 vs the emulation (mlp, every tensor): <= 1.1e-7 (bit-identical but
  for the loss: the emulation rounds where step rounds); bound 1e-3;
  fp16 vs step f32 >= 1.3e-4 (loss aside).
The bf16 bounds are 3.4-4.3x above those measurements. Default run (seed
0): ~1 s of work, ~2 s with the interpreter start-ups.

Plain Python (numpy, torch); prints a table of every tensor's errors and
exits 1 naming each violation.
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------
# Models and tolerances
# ---------------------------------------------------------------------------

# The MLP at a size where the contractions are long enough (K = 128, 64)
# for bf16 accumulation effects to show; batch 32.
MLP = dict(kind="mlp", sizes=dict(in_=128, hidden1=64, hidden2=64,
                                  classes=10), batch=32, seed=7)
# examples/gpt2's tiny model (vocab 256, 2 layers, 2 heads, width 32),
# context 16, batch 4. Its params are the example's init plus N(0, 0.1)
# noise, as in e2e.train_parity: at GPT-2's init (std 0.02, zero biases)
# the residual branches are nearly zero and the loss is ~ln(V) whatever the
# blocks compute, so the attention and MLP gradients would be tiny and a
# wrong rounding inside them would hide.
GPT = dict(kind="gpt", sizes=dict(vocab=256, context=16, layers=2, heads=2,
                                  width=32), batch=4, seed=5, spread=0.1)

# f32 vs f32: both sides in f32 with different summation orders; the same
# 1e-5 normwise bound as e2e.train_parity / e2e.grad_parity (measured
# ~1e-7). A failure here means the reference model is not step's model.
F32_TOL = 1e-5
# bf16 vs torch.autocast, per tensor group (group_of); measured worst
# over 16 seeds in the module docstring, each bound 3-4x above it.
BF16_TOL = {
    # f32 cross_entropy (both sides) of bf16-rounded logits: the logits'
    # roundings, 2^-9 relative each, average out over the batch's terms.
    "loss": 1e-3,
    # One rounding apart per layer (addmm rounds matmul + bias once, step
    # rounds the matmul and then the add), 3 layers.
    "logits": 2e-2,
    # fc3: contractions over the batch of bf16 activations and the bf16
    # cotangent of the logits; no relu below the cotangent.
    "mlp-out": 2e-2,
    # fc1, fc2: behind relu, whose derivative jumps where a pre-activation
    # is within one rounding of 0 (module docstring): a few percent.
    "mlp-hidden": 3e-1,
    # Every GPT-2 gradient: bf16 linears and attention, f32 layer_norm and
    # residual stream, smooth GELU/softmax, the longest chains (wte, the
    # first block) ~10 roundings deep.
    "gpt": 4e-2,
}
# fp16 vs the emulation of step's fp16 rounding points: only f32
# summation order differs, which flips a rounding to fp16 (one step of
# 2^-11 relative of that element) in rare elements. Measured <= 1.1e-7.
FP16_TOL = 1e-3
# A bf16 result must differ from step's own f32 result by more than this
# (normwise): f32 reorderings give ~1e-7, bf16 rounding >= 1.3e-3
# (measured minimum over tensors and 16 seeds, the loss aside).
AMP_MIN_DIFF = 1e-4
# The loss is a mean of per-example terms whose bf16 errors average out:
# measured >= 3.0e-6 from f32 (f32 noise ~1e-7).
AMP_MIN_DIFF_LOSS = 1e-6
# fp16 rounds 8x finer: its logits and gradients are >= 1.3e-4 from f32
# (MLP, 16 seeds). Its loss is not checked: the average over the batch
# brings it to ~5e-7 .. 5e-6 from f32, too close to f32 noise (1e-7).
AMP_MIN_DIFF_FP16 = 1e-5


def group_of(kind, name):
    if name in ("loss", "logits"):
        return name
    if kind == "gpt":
        return "gpt"
    return "mlp-out" if name.startswith("fc3.") else "mlp-hidden"


# ---------------------------------------------------------------------------
# PyTorch models (names and layouts of examples/mlp/MLP.h and
# examples/gpt2/Model.cpp; weights stored [in, out])
# ---------------------------------------------------------------------------


def addmm_linear(x, w, b):
    """HF GPT-2 Conv1D: torch.addmm(bias, x2d, W). Under CPU autocast
    addmm is a lower-precision op: one bf16 product with the bias inside."""
    lead = x.shape[:-1]
    y = torch.addmm(b, x.reshape(-1, x.shape[-1]), w)
    return y.view(*lead, w.shape[1])


def fp16(t):
    """Rounds to fp16 and back; autograd rounds the cotangent likewise."""
    return t.half().float()


def fp16_linear(x, w, b):
    """step-amp's fp16 policy for matmul + bias, emulated in f32."""
    y = fp16(fp16(x) @ fp16(w))
    return fp16(y + fp16(b))


def mlp_forward(P, batch, linear):
    h = batch["x"]
    for i in (1, 2, 3):
        h = linear(h, P[f"fc{i}.weight"], P[f"fc{i}.bias"])
        if i < 3:
            h = torch.relu(h)
    return F.cross_entropy(h, batch["y"]), h


def gpt2_forward(P, batch, heads, linear):
    """Pre-LN GPT-2 blocks, fused c_attn, causal attention written out
    (matmul, scale, mask, softmax, matmul), tanh GELU, LM head tied to wte,
    mean cross-entropy over every token."""
    tokens, targets = batch["tokens"], batch["targets"]
    B, T = tokens.shape
    V, C = P["wte"].shape
    D = C // heads
    layers = sum(1 for n in P if n.endswith(".ln_1.weight"))

    def ln(x, name):
        return F.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"],
                            eps=1e-5)

    def conv1d(x, name):
        return linear(x, P[name + ".weight"], P[name + ".bias"])

    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = P["wte"][tokens] + P["wpe"][torch.arange(T)]
    for i in range(layers):
        h = f"h.{i}"
        q, k, v = conv1d(ln(x, h + ".ln_1"), h + ".attn.c_attn").split(C, 2)
        q, k, v = (z.reshape(B, T, heads, D).transpose(1, 2)
                   for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(y, h + ".attn.c_proj")
        m = F.gelu(conv1d(ln(x, h + ".ln_2"), h + ".mlp.c_fc"),
                   approximate="tanh")
        x = x + conv1d(m, h + ".mlp.c_proj")
    logits = ln(x, "ln_f") @ P["wte"].t()
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)), None


def reference(m, params, inputs, mode):
    """Loss, logits (MLP) and the f32 grads of the f32 params in torch.
    mode: "f32", "bf16" (torch.autocast) or "fp16" (emulation)."""
    P = {n: torch.tensor(v, requires_grad=True) for n, v in params.items()}
    batch = {n: torch.from_numpy(v) for n, v in inputs.items()}
    linear = fp16_linear if mode == "fp16" else addmm_linear

    def forward():
        if m["kind"] == "mlp":
            return mlp_forward(P, batch, linear)
        return gpt2_forward(P, batch, m["sizes"]["heads"], linear)

    if mode == "bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, logits = forward()
    else:
        loss, logits = forward()
    # Backward outside the autocast region, as torch's AMP recipe says.
    loss.backward()
    out = {"loss": loss.detach().float().numpy()}
    if logits is not None:
        out["logits"] = logits.detach().float().numpy()
    for n, p in P.items():
        assert p.grad is not None and p.grad.dtype == torch.float32, n
        out[n] = p.grad.numpy()
    return out


# ---------------------------------------------------------------------------
# StepJIT side
# ---------------------------------------------------------------------------


class Failure(Exception):
    pass


def run(cmd, what):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failure(f"{what}: cannot run {cmd[0]}: {e}")
    if proc.returncode != 0:
        raise Failure(f"{what}: `{' '.join(cmd)}` exited {proc.returncode}:"
                      f"\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def load_dir(folder):
    return {f[:-4]: np.load(os.path.join(folder, f))
            for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def emit_model(args, m, tmp):
    """The example's model.mlir, params and inputs."""
    out = os.path.join(tmp, "model_" + m["kind"])
    s = m["sizes"]
    if m["kind"] == "mlp":
        cmd = [args.mlp_example, "--in", s["in_"], "--hidden1", s["hidden1"],
               "--hidden2", s["hidden2"], "--classes", s["classes"],
               "--out", out]
    else:
        cmd = [args.gpt2_example, "--vocab", s["vocab"], "--context",
               s["context"], "--layers", s["layers"], "--heads", s["heads"],
               "--width", s["width"], "--emit-model", out]
    cmd += ["--batch", m["batch"], "--seed", m["seed"]]
    run([str(c) for c in cmd], "emit " + m["kind"])
    params = load_dir(os.path.join(out, "params"))
    if m.get("spread"):
        rng = np.random.default_rng([m["seed"], 99])
        for n in sorted(params):
            params[n] = (params[n] + rng.normal(
                0.0, m["spread"], params[n].shape)).astype(np.float32)
    return (os.path.join(out, "model.mlir"), params,
            load_dir(os.path.join(out, "inputs")))


# The --step-amp option of each mode ("" = f32) and the element type its
# step.matmul ops must have afterwards.
AMP_FLAG = {"f32": ("", "f32"), "bf16": ("dtype=bf16", "bf16"),
            "fp16": ("dtype=fp16 loss-scale=none", "f16")}


def ours(args, m, model, params, inputs, mode, tmp):
    """step-opt [--step-amp] --step-autodiff, step-interp forward_backward:
    {"loss", "logits"?, param name: gradient}."""
    folder = os.path.join(tmp, f"{m['kind']}_{mode}")
    argdir, outdir = os.path.join(folder, "args"), os.path.join(folder, "out")
    os.makedirs(argdir)
    for n, v in list(params.items()) + list(inputs.items()):
        np.save(os.path.join(argdir, n + ".npy"), v)
    joint = os.path.join(folder, "joint.mlir")
    amp, elt = AMP_FLAG[mode]
    cmd = [args.step_opt, model]
    if amp:
        cmd.append("--step-amp=" + amp)
    run(cmd + ["--step-autodiff", "-o", joint],
        f"{m['kind']} {mode}: step-opt")
    with open(joint) as f:
        ir = f.read()
    # step.matmul ... : tensor<AxBxELT>, ... -- the operand types of a
    # matmul show whether the pass put it in 16 bits.
    # Only @forward's: step.attention's VJP recomputes the scores in f32.
    fwd = ir.split("func.func @forward_backward")[0]
    matmuls = [ln for ln in fwd.splitlines() if "step.matmul" in ln]
    if not matmuls or not all(f"x{elt}>" in ln.split(":")[-1]
                              for ln in matmuls):
        raise Failure(f"{m['kind']} {mode}: not every step.matmul of "
                      f"@forward in {joint} has {elt} operands after step-opt "
                      f"{amp or '(no amp)'}")
    run([args.step_interp, joint, "--func=forward_backward", "--inputs",
         argdir, "--out", outdir], f"{m['kind']} {mode}: step-interp")
    res = load_dir(outdir)
    got = {"loss": res.pop("loss")}
    if "logits" in res:
        got["logits"] = res.pop("logits")
    for n in params:
        g = res.pop("grad." + n, None)
        if g is None:
            raise Failure(f"{m['kind']} {mode}: no grad.{n} in {outdir}")
        if g.dtype != np.float32 or g.shape != params[n].shape:
            raise Failure(f"{m['kind']} {mode}: grad.{n} is {g.dtype}"
                          f"{list(g.shape)}, the param f32"
                          f"{list(params[n].shape)}")
        got[n] = g
    return got


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(kind, n, got, want, rows):
    """Appends tensor n's row to rows; returns its violations."""
    e32 = rel(got["f32"][n], want["f32"][n])
    e16 = rel(got["bf16"][n], want["bf16"][n])
    # torch in f32 as the reference of a bf16 run: for the table only.
    e16_vs_f32 = rel(got["bf16"][n], want["f32"][n])
    amp_diff = rel(got["bf16"][n], got["f32"][n])
    eh = rel(got["fp16"][n], want["fp16"][n]) if "fp16" in got else None
    rows.append((kind, n, e32, e16, e16_vs_f32, amp_diff, eh))
    what, g = f"{kind}: {n}", group_of(kind, n)
    min_diff = AMP_MIN_DIFF_LOSS if n == "loss" else AMP_MIN_DIFF
    bad = []
    # `not x <= bound` so that a NaN fails too.
    if not e32 <= F32_TOL:
        bad.append(f"{what}: f32 baseline rel err {e32:.3e} > {F32_TOL:g}: "
                   f"the torch model is not step's (no AMP involved)")
    if not e16 <= BF16_TOL[g]:
        bad.append(f"{what}: --step-amp=dtype=bf16 vs torch.autocast rel err"
                   f" {e16:.3e} > {BF16_TOL[g]:g} (group {g}; torch f32 is "
                   f"{e16_vs_f32:.3e} away)")
    if not amp_diff > min_diff:
        bad.append(f"{what}: step's bf16 result is within {amp_diff:.3e} of "
                   f"its f32 one (<= {min_diff:g}): step-amp had no effect")
    if eh is not None:
        if not eh <= FP16_TOL:
            bad.append(f"{what}: --step-amp=dtype=fp16 vs the torch fp16 "
                       f"emulation rel err {eh:.3e} > {FP16_TOL:g}")
        diff16 = rel(got["fp16"][n], got["f32"][n])
        if n != "loss" and not diff16 > AMP_MIN_DIFF_FP16:
            bad.append(f"{what}: step's fp16 result is within {diff16:.3e} "
                       f"of its f32 one (<= {AMP_MIN_DIFF_FP16:g}): step-amp "
                       f"had no effect")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for tool in ("step-opt", "step-interp", "mlp-example", "gpt2-example"):
        ap.add_argument("--" + tool, required=True)
    ap.add_argument("--seed", type=int, default=0,
                    help="added to the seeds of params and batches")
    ap.add_argument("--keep", help="keep the generated files under this dir")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for m in (MLP, GPT):
        m["seed"] += args.seed
    start = time.time()
    tmp = args.keep or tempfile.mkdtemp(prefix="amp_parity_")
    os.makedirs(tmp, exist_ok=True)
    bad, rows = [], []
    try:
        for m in (MLP, GPT):
            model, params, inputs = emit_model(args, m, tmp)
            modes = ("f32", "bf16", "fp16") if m["kind"] == "mlp" else (
                "f32", "bf16")
            got = {mode: ours(args, m, model, params, inputs, mode, tmp)
                   for mode in modes}
            want = {mode: reference(m, params, inputs, mode)
                    for mode in modes}
            for n in want["f32"]:
                bad += compare(m["kind"], n, got, want, rows)
    except Failure as e:
        bad.append(str(e))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    print("||step - torch|| / ||torch|| per tensor. f32: both in f32; "
          "bf16: --step-amp=dtype=bf16 vs\ntorch.autocast('cpu', "
          "torch.bfloat16); bf16~f32: step bf16 vs torch f32 (what an f32 "
          "policy\nwould be off by); amp diff: step bf16 vs step f32; fp16: "
          "--step-amp=dtype=fp16 vs the emulation")
    print(f"{'model':5} {'tensor':24} {'group':10} {'f32':>7} {'bf16':>7} "
          f"{'bound':>7} {'bf16~f32':>8} {'amp diff':>8} {'fp16':>7}")
    for kind, n, e32, e16, e16f, diff, eh in rows:
        g = group_of(kind, n)
        print(f"{kind:5} {n:24} {g:10} {e32:7.1e} {e16:7.1e} "
              f"{BF16_TOL[g]:7.1e} {e16f:8.1e} {diff:8.1e} "
              f"{'-' if eh is None else '%.1e' % eh:>7}")
    for b in bad:
        print("FAIL " + b)
    print(f"{'FAILED' if bad else 'passed'}: {len(rows)} tensors, "
          f"{len(bad)} violations ({time.time() - start:.1f}s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
