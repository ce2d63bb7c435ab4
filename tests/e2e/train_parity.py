#!/usr/bin/python3
"""Whole-training-step parity with PyTorch (ctest e2e.train_parity).

    train_parity.py --stepc PATH --step-interp PATH --mlp-example PATH
                    --gpt2-example PATH [--filter SUBSTR] [--jobs N]
                    [--seed N] [--keep DIR] [-v]

For each case below (a model, an optimizer, a schedule, clipping, gradient
accumulation), with the same initial params and the same batches (a new one
per step, drawn here with numpy):
  ours:  `stepc model.mlir --train ... --emit=mlir` builds @train_step, and
         `step-interp` runs it STEPS times, each step's outputs (params,
         opt.* state) merged into the next step's inputs;
  torch: the model written in PyTorch (train_parity_ref.py), loss.backward(),
         clip_grad_norm_, optimizer.step(), LambdaLR.step().
After every step it compares the loss, every param and every optimizer state
tensor, and opt.step; the step-1 loss is the forward pass of the initial
params, so it checks the whole pipeline's forward against torch. It prints a
table of the largest errors per case and exits 1 naming case, step and
tensor of every violation. See docs/training.md for the table of checks.
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_parity_ref import (gpt2_loss, make_optimizer,  # noqa: E402
                              mlp_loss, schedule_factor)

STEPS = 3

# Error of a tensor a (ours) against b (torch), normwise:
#     err = max|a - b| / max(max|b|, TINY)
# Normwise rather than elementwise because an element (a bias, a moment) can
# cancel to ~0 while the terms it came from are O(max|b|); TINY only keeps an
# all-zero reference from dividing by zero (no compared tensor is all zero).
TINY = 1e-30
# Tolerance: both sides compute in f32 with different summation orders
# (OpenBLAS sgemm vs torch's matmul, reduction and softmax orders, a fused
# multiply-add in torch's optimizer kernels). Measured: our gradients are as
# close to float64 as torch's own f32 ones (~3e-7 of max|g| per tensor), the
# losses agree to ~1e-7. SGD moves a param by lr * g, linear in g, so params
# stay ~1e-7 apart; AdamW and LAMB divide by sqrt(v) + eps, which amplifies
# an absolute gradient error by up to lr / (4 eps) -- hence the eps of ADAMW
# below. Over 16 seeds (--seed 0..15) the largest errors were 2e-7 (losses),
# 1.7e-6 (params), 2.6e-6 (opt state). Mutations of the reference (schedule
# one update late, Adam's coupled weight decay, no clipping, nesterov or
# dampening ignored, gradient K times too large, LAMB trust ratio 1, clip
# 1e-4 larger) give errors of 2e-4 .. 0.3. 1e-5 sits >= 6x above the noise
# and >= 20x below the smallest of those.
REL_TOL = 1e-5

MLP = dict(kind="mlp", sizes=dict(in_=16, hidden1=32, hidden2=32, classes=5),
           batch=8, seed=3)
# examples/gpt2's default tiny model (vocab 256, 2 layers, 2 heads, width 32)
# with context 16 and batch 4 to keep the runtime low. Its params are the
# example's init plus N(0, 0.1) noise ("spread"): GPT-2 initializes biases to
# zero, so after one AdamW step a bias is +-lr and the normwise error of the
# param is the error of the update relative to lr itself -- the
# ill-conditioned comparison described at ADAMW. Mid-training-like params
# also make every block matter (see examples/gpt2/gpt2_parity.py).
GPT = dict(kind="gpt", sizes=dict(vocab=256, context=16, layers=2, heads=2,
                                  width=32), batch=4, seed=5, spread=0.1)

# AdamW's eps: eps / (|g| + eps)^2 <= 1 / (4 eps) bounds how much one
# update moves per unit of absolute gradient error, so with PyTorch's
# eps = 1e-8 an element whose gradient is ~1e-8 (or exactly 0 in exact
# arithmetic: softmax ignores the key bias, so d loss / d b_k == 0 and both
# sides return +-1e-12 rounding noise) turns f32 noise into an O(lr) update
# that two correct implementations do not share. Measured: our gradients
# are as close to float64 as torch's own f32 ones (~3e-7 of max|g| per
# tensor, e ~ 2e-8 absolute), yet with eps = 1e-8 params differ by 1e-4 ..
# 2e-3. eps = 1e-4 bounds that effect by lr * e / (4 eps) ~ 6e-7 of a param
# of size 0.3, while eps stays far below the typical |g| (1e-3 .. 1e-1) so
# the update is still Adam's. PyTorch's eps = 1e-8 itself is covered per op
# by e2e.op_parity.train (adamw_update on given gradients).
ADAMW = "adamw,lr=1e-2,wd=0.1,eps=1e-4"
WARM_COS = "cosine,warmup=2,total=10"
# (name, model, --optimizer, --schedule, --clip (0: off), --grad-accum)
# The clip values are below every step's global gradient norm (the script
# checks that clipping is active). The first accumulation cases use SGD
# without clipping on purpose: AdamW and clipping are invariant to the
# gradient's scale, so they would hide a wrong 1/K.
CASES = [
    ("mlp.adamw_clip_cosine", MLP, ADAMW, WARM_COS, 0.1, 1),
    # PyTorch's defaults (eps 1e-8, weight decay 0.01): the MLP has no
    # gradient that cancels to rounding noise, so the default eps is fine.
    ("mlp.adamw_defaults", MLP, "adamw,lr=1e-2", WARM_COS, 0.1, 1),
    # nanoGPT-style param groups: weight decay on matrices only.
    ("gpt.adamw_no_decay_vectors", GPT, ADAMW + ",wd_vectors=false", WARM_COS,
     0.3, 1),
    ("mlp.sgd_no_decay_vectors", MLP,
     "sgd,lr=0.1,momentum=0.9,wd=0.05,wd_vectors=false", "constant", 0, 1),
    ("gpt.adamw_clip_cosine", GPT, ADAMW, WARM_COS, 0.3, 1),
    ("mlp.sgd_momentum", MLP, "sgd,lr=0.1,momentum=0.9,dampening=0.1,wd=0.01",
     "linear,warmup=1,total=4,min_ratio=0.2", 0, 1),
    ("mlp.sgd_nesterov", MLP, "sgd,lr=0.1,momentum=0.9,nesterov=true,wd=0.01",
     "constant", 0, 1),
    ("gpt.sgd_momentum", GPT, "sgd,lr=0.1,momentum=0.9,wd=0.01", WARM_COS,
     0, 1),
    ("gpt.sgd_nesterov", GPT, "sgd,lr=0.1,momentum=0.9,nesterov=true",
     "constant", 0, 1),
    ("mlp.accum4_sgd", MLP, "sgd,lr=0.1,momentum=0.9", "constant", 0, 4),
    ("gpt.accum4_sgd", GPT, "sgd,lr=0.1,momentum=0.9", "constant", 0, 4),
    ("mlp.accum4_adamw_clip", MLP, ADAMW, WARM_COS, 0.1, 4),
    ("gpt.accum4_adamw_clip", GPT, ADAMW, WARM_COS, 0.3, 4),
    ("mlp.lamb", MLP, "lamb,lr=1e-2,wd=0.01", WARM_COS, 0, 1),
    ("mlp.lamb_clip", MLP, "lamb,lr=1e-2,wd=0.1", "constant", 0.1, 1),
]


class Failure(Exception):
    pass


def run(cmd, what):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise Failure(f"{what}: cannot run {cmd[0]}: {e}")
    if proc.returncode != 0:
        raise Failure(f"{what}: `{' '.join(cmd)}` exited {proc.returncode}:\n"
                      f"{proc.stdout}{proc.stderr}")
    return proc.stdout


def load_dir(folder):
    return {f[:-4]: np.load(os.path.join(folder, f))
            for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def emit_model(args, m, tmp):
    """Runs the example: model.mlir (traced with the micro-batch) and its
    initial params. Returns (model path, params)."""
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
        for n, v in params.items():
            params[n] = (v + rng.normal(0.0, m["spread"], v.shape)).astype(
                np.float32)
    return os.path.join(out, "model.mlir"), params


def make_batch(m, rows, step):
    """Batch `step` (0-based) of `rows` rows, the same for every case of a
    model with the same number of rows."""
    rng = np.random.default_rng([m["seed"], rows, step])
    s = m["sizes"]
    if m["kind"] == "mlp":
        return {"x": rng.standard_normal((rows, s["in_"])).astype(np.float32),
                "y": rng.integers(0, s["classes"], rows, dtype=np.int64)}
    shape = (rows, s["context"])
    return {"tokens": rng.integers(0, s["vocab"], shape, dtype=np.int64),
            "targets": rng.integers(0, s["vocab"], shape, dtype=np.int64)}


def ours(args, case, model, params, tmp):
    """Compiles and runs STEPS steps; per step {name: array} (loss, params,
    opt.*)."""
    name, m, opt, sched, clip, k = case
    folder = os.path.join(tmp, name)
    argdir = os.path.join(folder, "args")
    os.makedirs(argdir)
    step_mlir = os.path.join(folder, "step.mlir")
    cmd = [args.stepc, model, "--train", "--optimizer=" + opt,
           "--schedule=" + sched, "--emit=mlir", "-o", step_mlir]
    if clip:
        cmd.append(f"--clip={clip}")
    if k > 1:
        cmd.append(f"--grad-accum={k}")
    run(cmd, name + ": stepc")
    for p, v in params.items():
        np.save(os.path.join(argdir, p + ".npy"), v)
    results = []
    for step in range(STEPS):
        for n, v in make_batch(m, k * m["batch"], step).items():
            np.save(os.path.join(argdir, n + ".npy"), v)
        out = os.path.join(folder, f"out{step + 1}")
        run([args.step_interp, step_mlir, "--inputs", argdir, "--out", out],
            f"{name}: step {step + 1}: step-interp")
        res = load_dir(out)
        results.append(res)
        for n, v in res.items():  # the next step's params and state
            if n != "loss":
                np.save(os.path.join(argdir, n + ".npy"), v)
    return results


def reference(case, params):
    """PyTorch's STEPS steps on the K*B batches; per step {name: array} and
    the global gradient norm before clipping."""
    name, m, opt, sched, clip, k = case
    P = {n: torch.tensor(v, requires_grad=True) for n, v in params.items()}
    optimizer = make_optimizer(opt, list(P.values()))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                  schedule_factor(sched))
    results, norms = [], []
    for step in range(STEPS):
        batch = {n: torch.from_numpy(v)
                 for n, v in make_batch(m, k * m["batch"], step).items()}
        optimizer.zero_grad()
        if m["kind"] == "mlp":
            loss = mlp_loss(P, batch)
        else:
            loss = gpt2_loss(P, batch, m["sizes"]["heads"])
        loss.backward()
        if clip:
            norms.append(float(torch.nn.utils.clip_grad_norm_(
                list(P.values()), clip)))
        optimizer.step()
        scheduler.step()
        res = {"loss": loss.detach().numpy(), "opt.step": step + 1}
        for n, p in P.items():
            res[n] = p.detach().numpy().copy()
            for slot, v in optimizer.state[p].items():
                if slot != "step" and v is not None:
                    res[f"opt.{slot}.{n}"] = v.detach().numpy().copy()
        results.append(res)
    return results, norms


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), TINY))


def compare(case, got, want, norms):
    """Returns (row of max errors, violations)."""
    name, m, opt, sched, clip, k = case
    bad = []
    row = {"fwd": (0.0, ""), "loss": (0.0, ""), "param": (0.0, ""),
           "state": (0.0, ""), "norms": norms}
    if clip:
        for step, n in enumerate(norms):
            if not n > clip:
                bad.append(f"{name}: step {step + 1}: clip {clip} not active "
                           f"(global grad norm {n:.4g}); lower it")
    for step, (g, w) in enumerate(zip(got, want)):
        where = f"{name}: step {step + 1}"
        if set(g) != set(w):
            bad.append(f"{where}: outputs differ from torch's: missing "
                       f"{sorted(set(w) - set(g))}, unexpected "
                       f"{sorted(set(g) - set(w))}")
            continue
        for n in sorted(w):
            if n == "opt.step":
                if g[n].dtype != np.int64 or int(g[n]) != w[n]:
                    bad.append(f"{where}: opt.step is {g[n]!r} ({g[n].dtype})"
                               f", expected {w[n]} (int64)")
                continue
            if g[n].shape != w[n].shape or g[n].dtype != w[n].dtype:
                bad.append(f"{where}: {n}: {g[n].dtype}{list(g[n].shape)}, "
                           f"torch {w[n].dtype}{list(w[n].shape)}")
                continue
            err = rel_err(g[n], w[n])
            # The step-1 loss is the forward pass of the initial params:
            # the differential check of the whole pipeline's forward.
            col = ("fwd" if n == "loss" and step == 0 else "loss"
                   if n == "loss" else "state" if n.startswith("opt.")
                   else "param")
            if not err <= row[col][0]:
                row[col] = (err, f"{n}@{step + 1}")
            what = "loss (forward of initial params)" if col == "fwd" else n
            if not err <= REL_TOL:  # also catches NaN
                bad.append(f"{where}: {what}: rel err {err:.3e} > {REL_TOL:g} "
                           f"(max|ours - torch| / max|torch|; max|torch| = "
                           f"{np.max(np.abs(w[n])):.4g})")
    return row, bad


def run_case(args, case, models, tmp):
    start = time.time()
    model, params = models[case[1]["kind"]]
    try:
        got = ours(args, case, model, params, tmp)
        want, norms = reference(case, params)
        row, bad = compare(case, got, want, norms)
    except Failure as e:
        row, bad = None, [str(e)]
    except Exception as e:  # a bug of this script or a malformed output
        row, bad = None, [f"{case[0]}: {type(e).__name__}: {e}"]
    return case[0], row, bad, time.time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for tool in ("stepc", "step-interp", "mlp-example", "gpt2-example"):
        ap.add_argument("--" + tool, required=True)
    ap.add_argument("--filter", default="", help="run cases whose name has it")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0,
                    help="added to the seeds of params and batches")
    ap.add_argument("--keep", help="keep the generated files under this dir")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print every violation in full")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for m in (MLP, GPT):
        m["seed"] += args.seed
    cases = [c for c in CASES if args.filter in c[0]]
    if not cases:
        sys.exit(f"FAIL: no case matches --filter {args.filter!r}")
    start = time.time()
    tmp = args.keep or tempfile.mkdtemp(prefix="train_parity_")
    os.makedirs(tmp, exist_ok=True)
    failures = []
    try:
        models = {}
        for m in (MLP, GPT):
            if any(c[1] is m for c in cases):
                models[m["kind"]] = emit_model(args, m, tmp)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(lambda c: run_case(args, c, models, tmp),
                                 cases))
    except Failure as e:
        sys.exit(f"FAIL: {e}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    # Largest error per case: fwd = step-1 loss (forward of the initial
    # params), loss = steps 2..STEPS, param / state = over all steps, with
    # the tensor and step where it occurred.
    print(f"{'case':23} {'fwd loss':>8} {'loss':>8} {'param':>8} "
          f"{'(worst param@step)':26} {'opt state':>9} {'time':>6}  result")
    for name, row, bad, secs in rows:
        if row is None:
            print(f"{name:23} {'-':>8} {'-':>8} {'-':>8} {'':26} {'-':>9} "
                  f"{secs:5.1f}s  ERROR")
            failures += bad
            continue
        print(f"{name:23} {row['fwd'][0]:8.1e} {row['loss'][0]:8.1e} "
              f"{row['param'][0]:8.1e} {row['param'][1]:26} "
              f"{row['state'][0]:9.1e} {secs:5.1f}s  "
              f"{'FAIL' if bad else 'ok'}")
        if args.verbose:
            print(f"{'':23} worst state {row['state'][1]}; global grad norm"
                  f" per step (clip cases): "
                  f"{', '.join('%.4g' % n for n in row['norms']) or '-'}")
        failures += bad
    shown = failures if args.verbose else failures[:20]
    for f in shown:
        print("FAIL " + f)
    if len(shown) < len(failures):
        print(f"... and {len(failures) - len(shown)} more (-v shows all)")
    print(f"{len(rows) - sum(1 for r in rows if r[2])} passed, "
          f"{sum(1 for r in rows if r[2])} failed "
          f"(tolerance {REL_TOL:g} normwise, {STEPS} steps, "
          f"{time.time() - start:.1f}s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
