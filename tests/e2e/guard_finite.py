#!/usr/bin/env python3
"""stepc --guard-finite + step-run: a NaN at step K stops the run.

A model whose step.log sees a negative operand when the batch is shifted;
batches 0000 and 0001 are fine, 0002 makes the NaN. For the fused and the
unfused (--no-fuse) artifact: step-run --steps 3 --out OUT exits 1 with
"step-run: error: step 3 (batch .../0002): non-finite guard: ..." naming
step.log at its model.mlir line and column, prints the losses of steps 1
and 2 only, writes no OUT, and leaves the params folder byte for byte as
it was. The control run on batches 0000 and 0001 alone exits 0 and writes
OUT, so the failure is the guard's and nothing else's.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

MODEL = """\
func.func @forward(%w: tensor<3x5xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"},
                   %s: tensor<4x5xf32> {step.kind = "input", step.name = "s"})
    -> (tensor<f32> {step.name = "loss"}) {
  %h = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %t = step.tanh %h : tensor<4x5xf32>
  %u = step.add %t, %s : tensor<4x5xf32>
  %l = step.log %u : tensor<4x5xf32>
  %m = step.reduce_mean %l dims = [0, 1] : tensor<4x5xf32> -> tensor<f32>
  return %m : tensor<f32>
}
"""
LOG_LINE = 8  # of MODEL, 1-based; step.log starts at column 8


def digest(folder):
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        h.update(name.encode())
        with open(os.path.join(folder, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def check(tools, work, fuse):
    stepc, step_run = tools
    model = os.path.join(work, "model.mlir")
    with open(model, "w") as f:
        f.write(MODEL)
    artifact = os.path.join(work, "model.step")
    flags = [] if fuse else ["--no-fuse"]
    subprocess.run([stepc, model, "--train", "--guard-finite", "--no-kernels",
                    "--optimizer=sgd,lr=0.1", *flags, "-o", artifact],
                   check=True)
    rng = np.random.default_rng(5)
    params = os.path.join(work, "params")
    os.makedirs(params)
    np.save(os.path.join(params, "w.npy"),
            rng.standard_normal((3, 5)).astype(np.float32))
    inputs = os.path.join(work, "inputs")
    good = os.path.join(work, "good")
    for k, shift in enumerate([2.0, 2.0, -2.0]):
        for root in [inputs] + ([good] if shift > 0 else []):
            d = os.path.join(root, "%04d" % k)
            os.makedirs(d)
            np.save(os.path.join(d, "x.npy"),
                    rng.standard_normal((4, 3)).astype(np.float32))
            np.save(os.path.join(d, "s.npy"),
                    np.full((4, 5), shift, np.float32))
    before = digest(params)

    out = os.path.join(work, "out")
    run = subprocess.run([step_run, artifact, "--params", params,
                          "--inputs", inputs, "--steps", "3", "--out", out,
                          "--backend=cpu"], capture_output=True, text=True)
    where = re.escape(model) + ":%d:8" % LOG_LINE
    expected = (r"step-run: error: step 3 \(batch .*0002\): non-finite "
                r"guard: .* step\.log at " + where + r" \(")
    failures = []
    if run.returncode != 1:
        failures.append("exit code %d, expected 1" % run.returncode)
    if not re.search(expected, run.stderr):
        failures.append("stderr lacks /%s/:\n%s" % (expected, run.stderr))
    if re.findall(r"^step \d+ loss", run.stdout, re.M) != ["step 1 loss",
                                                          "step 2 loss"]:
        failures.append("stdout should hold steps 1 and 2:\n" + run.stdout)
    if os.path.exists(out):
        failures.append("--out was written")
    if digest(params) != before:
        failures.append("the params folder changed")

    control = subprocess.run([step_run, artifact, "--params", params,
                              "--inputs", good, "--steps", "2", "--out", out,
                              "--backend=cpu"], capture_output=True, text=True)
    if control.returncode != 0 or not os.path.exists(
            os.path.join(out, "w.npy")):
        failures.append("the control run failed (%d):\n%s" %
                        (control.returncode, control.stderr))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--step-run", required=True)
    args = ap.parse_args()
    failed = False
    for fuse in (True, False):
        with tempfile.TemporaryDirectory() as work:
            for f in check((args.stepc, args.step_run), work, fuse):
                failed = True
                print("FAIL (%s): %s" % ("fused" if fuse else "unfused", f))
    if failed:
        sys.exit(1)
    print("guard_finite: fused and unfused runs stop at step 3 naming step.log")


if __name__ == "__main__":
    main()
