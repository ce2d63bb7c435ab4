#!/usr/bin/env python3
"""The CPU backend reproduces the reference interpreter bit for bit.

For the MLP and the tiny GPT-2, the same @train_step is compiled twice by
stepc: as MLIR (run by step-interp, op by op) and as a .step artifact (run
by step-run through the plan: memory-planned arena, constants section,
Session host API). Three steps on three different batches; every loss,
param and optimizer-state tensor must be equal bit for bit (f32): both run
the same reference kernels in the same order, so any difference is a bug in
the plan, the arena placement, the artifact or the runtime. (Parity of the
interpreter's steps with PyTorch is e2e.train_parity's job.)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

STEPS = 3
OPTIONS = ["--optimizer=adamw,lr=1e-2,wd=0.1", "--clip=0.5",
           "--schedule=cosine,warmup=2,total=10"]


def run(cmd, env=None):
    """Runs cmd (in env, where given); exits the test with its output if it
    fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"FAIL: `{' '.join(cmd)}` exited {proc.returncode}:\n"
                 f"{proc.stdout}{proc.stderr}")
    return proc.stdout


def load(folder):
    return {f[:-4]: np.load(os.path.join(folder, f))
            for f in os.listdir(folder) if f.endswith(".npy")}


def batches(inputs, rng):
    """STEPS batches shaped like the example's: floats redrawn, integer
    inputs (labels, tokens) permuted so they stay valid."""
    out = []
    for _ in range(STEPS):
        b = {}
        for name, x in inputs.items():
            if np.issubdtype(x.dtype, np.floating):
                b[name] = rng.standard_normal(x.shape).astype(x.dtype)
            else:
                b[name] = rng.permutation(x.reshape(-1)).reshape(x.shape)
        out.append(b)
    return out


def check_case(name, model_dir, tools, work):
    stepc, interp, step_run = tools
    mlir = os.path.join(work, "step.mlir")
    artifact = os.path.join(work, "model.step")
    run([stepc, os.path.join(model_dir, "model.mlir"), "--train", *OPTIONS,
         "-o", mlir])
    run([stepc, os.path.join(model_dir, "model.mlir"), "--train", *OPTIONS,
         "--no-kernels", "-o", artifact])
    params = load(os.path.join(model_dir, "params"))
    data = batches(load(os.path.join(model_dir, "inputs")),
                   np.random.default_rng(5))

    # The interpreter, step by step, feeding each step's outputs back.
    state, losses = dict(params), []
    for k, batch in enumerate(data):
        step_in = os.path.join(work, f"interp_in{k}")
        step_out = os.path.join(work, f"interp_out{k}")
        os.makedirs(step_in)
        for n, v in {**state, **batch}.items():
            np.save(os.path.join(step_in, n + ".npy"), v)
        out = run([interp, mlir, "--inputs", step_in, "--out", step_out])
        losses.append(re.search(r"^loss = (\S+)$", out, re.M).group(1))
        state = {n: v for n, v in load(step_out).items() if n != "loss"}

    # The runtime: numbered batch folders, one step-run call.
    feed = os.path.join(work, "batches")
    for k, batch in enumerate(data):
        d = os.path.join(feed, f"{k:04d}")
        os.makedirs(d)
        for n, v in batch.items():
            np.save(os.path.join(d, n + ".npy"), v)
    run_out = os.path.join(work, "run_out")
    out = run([step_run, artifact, "--params", os.path.join(model_dir, "params"),
               "--inputs", feed, "--steps", str(STEPS), "--backend=cpu",
               "--out", run_out])
    run_losses = re.findall(r"^step \d+ loss = (\S+)$", out, re.M)
    if run_losses != losses:
        sys.exit(f"FAIL {name}: losses differ: interpreter {losses}, "
                 f"step-run {run_losses}")
    got = load(run_out)
    if set(got) != set(state):
        sys.exit(f"FAIL {name}: step-run wrote {sorted(got)}, the interpreter "
                 f"{sorted(state)}")
    for n, want in state.items():
        if got[n].dtype != want.dtype or got[n].tobytes() != want.tobytes():
            diff = np.max(np.abs(got[n].astype(np.float64) -
                                 want.astype(np.float64)))
            sys.exit(f"FAIL {name}: '{n}' differs after {STEPS} steps "
                     f"(max abs diff {diff:g})")
    print(f"{name}: {STEPS} steps, losses {losses}, {len(state)} tensors "
          f"bit-identical")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for tool in ["stepc", "step-interp", "step-run", "mlp-example",
                 "gpt2-example"]:
        ap.add_argument("--" + tool, required=True)
    a = ap.parse_args()
    tools = (a.stepc, a.step_interp, a.step_run)
    work = tempfile.mkdtemp(prefix="stepjit-runtime-parity-")
    try:
        mlp = os.path.join(work, "mlp")
        run([a.mlp_example, "--in", "12", "--hidden1", "16", "--hidden2", "16",
             "--classes", "5", "--batch", "8", "--out", mlp])
        os.makedirs(os.path.join(work, "mlp_run"))
        check_case("mlp", mlp, tools, os.path.join(work, "mlp_run"))
        gpt = os.path.join(work, "gpt")
        run([a.gpt2_example, "--emit-model", gpt, "--context", "16",
             "--batch", "4"])
        os.makedirs(os.path.join(work, "gpt_run"))
        check_case("gpt2", gpt, tools, os.path.join(work, "gpt_run"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
