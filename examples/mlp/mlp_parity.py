#!/usr/bin/env python3
"""PyTorch parity of the traced MLP (ctest e2e.mlp_parity).

1. Runs mlp-example into a temporary folder (a few size/seed settings).
2. Rebuilds the same model in PyTorch on the CPU from the written params and
   batch, and compares its loss with the loss mlp-example printed (the
   in-process reference interpreter).
3. Runs `step-interp model.mlir --inputs <params + inputs> --out ...` on the
   written files and checks it prints and writes the same loss, bit for bit.

Usage: mlp_parity.py --mlp-example PATH --step-interp PATH
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

# Relative tolerance of the loss against PyTorch. Both sides compute in f32,
# but summation orders differ (OpenBLAS sgemm vs PyTorch's matmul kernels,
# and the log-sum-exp of the loss), so results differ by a few ulps per op;
# through three layers that stays around 1e-7 relative. A real semantic error
# (a missing bias or ReLU, a wrong init layout, a transposed weight) moves the
# loss by far more than 1e-3, so 1e-5 keeps a wide margin on both sides.
REL_TOL = 1e-5

# (in, hidden1, hidden2, classes, batch, seed): the default model, and a
# small odd-sized one so that no size is accidentally symmetric.
CONFIGS = [
    (784, 256, 128, 10, 32, 0),
    (13, 7, 5, 3, 9, 42),
]


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}\n"
                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout


def printed_loss(stdout):
    m = re.search(r"^loss = (\S+)$", stdout, re.MULTILINE)
    if not m:
        sys.exit(f"FAIL: no 'loss = ...' line in:\n{stdout}")
    return float(m.group(1))


def load(folder, name):
    return torch.from_numpy(np.load(os.path.join(folder, name + ".npy")))


def torch_loss(out):
    """The MLP as a PyTorch user writes it, from the written files."""
    params, inputs = os.path.join(out, "params"), os.path.join(out, "inputs")
    x, y = load(inputs, "x"), load(inputs, "y")
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    h = x
    for i, layer in enumerate(["fc1", "fc2", "fc3"]):
        # Weights are stored [in, out] (y = x @ w); nn.Linear's weight is
        # the transpose.
        w, b = load(params, layer + ".weight"), load(params, layer + ".bias")
        h = F.linear(h, w.t(), b)
        if i < 2:
            h = F.relu(h)
    return F.cross_entropy(h, y).item()


def check_config(mlp, interp, cfg, tmp):
    n_in, h1, h2, classes, batch, seed = cfg
    out = os.path.join(tmp, f"mlp_{seed}")
    stdout = run([mlp, "--in", str(n_in), "--hidden1", str(h1), "--hidden2",
                  str(h2), "--classes", str(classes), "--batch", str(batch),
                  "--seed", str(seed), "--out", out])
    ours = printed_loss(stdout)

    ref = torch_loss(out)
    rel = abs(ours - ref) / abs(ref)
    print(f"{cfg}: interpreter {ours!r}, torch {ref!r}, rel err {rel:.2e}")
    if not rel <= REL_TOL:
        sys.exit(f"FAIL: {cfg}: loss {ours} vs torch {ref}: relative error "
                 f"{rel:.3e} > {REL_TOL}")

    # step-interp reads one folder with a <step.name>.npy per argument:
    # merge params/ and inputs/ (see README.md).
    merged = os.path.join(tmp, f"args_{seed}")
    os.makedirs(merged)
    for sub in ("params", "inputs"):
        for f in os.listdir(os.path.join(out, sub)):
            shutil.copy(os.path.join(out, sub, f), merged)
    res = os.path.join(tmp, f"res_{seed}")
    stdout = run([interp, os.path.join(out, "model.mlir"), "--inputs", merged,
                  "--out", res])
    tool = printed_loss(stdout)
    written = float(np.load(os.path.join(res, "loss.npy")))
    # Same IR (after a print/parse round trip), same kernels, same inputs:
    # the reference interpreter is deterministic, so the bits must match.
    if not (tool == ours and written == np.float32(ours)):
        sys.exit(f"FAIL: {cfg}: step-interp gives {tool} (file {written}), "
                 f"mlp-example printed {ours}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlp-example", required=True)
    ap.add_argument("--step-interp", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="mlp_parity_") as tmp:
        for cfg in CONFIGS:
            check_config(args.mlp_example, args.step_interp, cfg, tmp)
    print("PASS")


if __name__ == "__main__":
    main()
