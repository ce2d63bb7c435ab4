#!/usr/bin/env python3
"""A run killed with SIGKILL at any moment resumes bit-identically.

The MLP is compiled with fp16 mixed precision (dynamic loss scaling: the
scale and its tracker are step state), AdamW (moments, step counter) and a
cosine schedule, and trained for STEPS steps by step-run over BATCHES
numbered batch folders (BATCHES does not divide STEPS, so the resumed run
must also pick up the data-loader position). The reference run never
stops. Then, for each of KILLS kill points drawn uniformly over the length
of an uninterrupted checkpointing run (a seeded RNG; the seed is printed),
a fresh run with `--checkpoint-every` is started with `--resume`, killed
with SIGKILL at that moment (every other point is killed twice, the second
time while resuming), and run once more to the end. After each kill the
checkpoint folder must be absent or a complete checkpoint (its manifest
there, a valid step count); the final params and state must equal the
reference's bit for bit, and every loss the resumed run prints must equal
the reference's loss of the same step.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from runtime_parity import load, run

STEPS = 16
BATCHES = 5
KILLS = 20
OPTIONS = ["--optimizer=adamw,lr=1e-2,wd=0.1", "--clip=1.0",
           "--schedule=cosine,warmup=3,total=30", "--amp=fp16"]


def losses(text):
    return {int(k): v for k, v in
            re.findall(r"^step (\d+) loss = (\S+)$", text, re.M)}


def same_tensors(got, want, what):
    if sorted(got) != sorted(want):
        sys.exit(f"FAIL {what}: tensors {sorted(got)} != {sorted(want)}")
    for n, v in want.items():
        if got[n].dtype != v.dtype or got[n].tobytes() != v.tobytes():
            sys.exit(f"FAIL {what}: '{n}' differs from the uninterrupted run")


def check_checkpoint(folder, what):
    """After a kill the folder is absent or a complete checkpoint."""
    if not os.path.exists(folder):
        return None
    manifest = os.path.join(folder, "manifest.json")
    if not os.path.isfile(manifest):
        sys.exit(f"FAIL {what}: {folder} exists without a manifest: "
                 f"{sorted(os.listdir(folder))}")
    with open(manifest) as f:
        m = json.load(f)
    if not 1 <= m["step"] <= STEPS:
        sys.exit(f"FAIL {what}: checkpoint at step {m['step']}")
    for name, entry in m["tensors"].items():
        if os.path.getsize(os.path.join(folder, entry["file"])) != \
                entry["bytes"]:
            sys.exit(f"FAIL {what}: {entry['file']} is not complete")
    return m["step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for tool in ["stepc", "step-run", "mlp-example"]:
        ap.add_argument("--" + tool, required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kills", type=int, default=KILLS)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed} (rerun with --seed {seed})")
    rng = random.Random(seed)

    work = tempfile.mkdtemp(prefix="stepjit-checkpoint-kill-")
    try:
        mlp = os.path.join(work, "mlp")
        run([a.mlp_example, "--in", "12", "--hidden1", "32", "--hidden2",
             "32", "--classes", "5", "--batch", "16", "--out", mlp])
        artifact = os.path.join(work, "mlp.step")
        run([a.stepc, os.path.join(mlp, "model.mlir"), "--train", *OPTIONS,
             "--no-kernels", "-o", artifact])
        inputs = load(os.path.join(mlp, "inputs"))
        data = np.random.default_rng(3)
        feed = os.path.join(work, "batches")
        for k in range(BATCHES):
            d = os.path.join(feed, f"{k:04d}")
            os.makedirs(d)
            for name, x in inputs.items():
                v = (data.standard_normal(x.shape).astype(x.dtype)
                     if np.issubdtype(x.dtype, np.floating)
                     else data.permutation(x.reshape(-1)).reshape(x.shape))
                np.save(os.path.join(d, name + ".npy"), v)

        def cmd(out, *extra):
            return [a.step_run, artifact, "--params",
                    os.path.join(mlp, "params"), "--inputs", feed,
                    "--steps", str(STEPS), "--backend=cpu", "--out", out,
                    *extra]

        ref_out = os.path.join(work, "ref")
        ref_losses = losses(run(cmd(ref_out)))
        ref = load(ref_out)
        if len(ref_losses) != STEPS:
            sys.exit(f"FAIL: the reference printed {len(ref_losses)} losses")

        # Checkpointing changes nothing, and its wall time bounds the kills.
        ckpt = os.path.join(work, "ckpt0")
        start = time.monotonic()
        out = os.path.join(work, "out0")
        text = run(cmd(out, "--checkpoint", ckpt, "--checkpoint-every", "2",
                       "--resume"))
        span = time.monotonic() - start
        same_tensors(load(out), ref, "uninterrupted checkpointing run")
        if losses(text) != ref_losses:
            sys.exit("FAIL: checkpointing changed the losses")
        print(f"uninterrupted run with a checkpoint every 2 steps: {span:.2f} s")

        landed = {"none": 0, "mid": 0, "done": 0}
        for i in range(a.kills):
            ckpt = os.path.join(work, f"ckpt{i + 1}")
            out = os.path.join(work, f"out{i + 1}")
            args = cmd(out, "--checkpoint", ckpt, "--checkpoint-every", "2",
                       "--resume")
            times = []
            for _ in range(1 + i % 2):
                t = rng.uniform(0, 0.85 * span)
                times.append(f"{t:.3f}")
                proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                time.sleep(t)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                at = check_checkpoint(ckpt, f"kill point {i + 1}")
            landed["none" if at is None else
                   "done" if at == STEPS else "mid"] += 1
            resumed = subprocess.run(args, capture_output=True, text=True)
            if resumed.returncode != 0:
                sys.exit(f"FAIL kill point {i + 1} (killed at {times} s): "
                         f"the resumed run exited {resumed.returncode}:\n"
                         f"{resumed.stdout}{resumed.stderr}")
            printed = losses(resumed.stdout)
            first = (at or 0) + 1
            if sorted(printed) != list(range(first, STEPS + 1)):
                sys.exit(f"FAIL kill point {i + 1}: resumed after step "
                         f"{at} but printed steps {sorted(printed)}")
            for k, v in printed.items():
                if v != ref_losses[k]:
                    sys.exit(f"FAIL kill point {i + 1}: step {k} loss {v}, "
                             f"uninterrupted {ref_losses[k]}")
            same_tensors(load(out), ref, f"kill point {i + 1} (killed at "
                                         f"{times} s, resumed after {at})")
            print(f"kill point {i + 1}: killed at {times} s, checkpoint at "
                  f"step {at}, resumed to {STEPS}: bit-identical")
        print(f"{a.kills} kill points: {landed['none']} before the first "
              f"checkpoint, {landed['mid']} mid-run, {landed['done']} after "
              f"the last; all bit-identical")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
