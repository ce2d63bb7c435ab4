#!/usr/bin/env python3
"""The token-file input pipeline, end to end (docs/data.md).

1. gpt2-example --prepare writes train.tok / val.tok: the header read here
   by hand (magic, version, width, count) and the token bytes equal to the
   text's bytes, the last 10% held out.
2. step-run --tokens on a compiled tiny GPT-2: step k trains on batch k,
   whose windows this script works out itself (splitmix64 re-implemented
   from its published constants); the same batches written as .npy batch
   folders and run with --inputs give the same losses bit for bit, with
   the prefetcher 2 ahead and with --prefetch 0. A killed-and-resumed
   --tokens run (--checkpoint, --resume) ends with the same losses.
3. gpt2-example --data --eval-every: val.csv has one row per evaluation;
   with --patience 1 and an unreachable --min-delta the run stops after the
   second evaluation and says so.
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def read_tokens(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, count, zero = struct.unpack("<8sIIQQ", data[:32])
    assert magic == b"STEPTOK1", magic
    assert version == 1 and zero == 0, (version, zero)
    assert len(data) == 32 + count * width, (len(data), count, width)
    dtype = {1: "<u1", 2: "<u2", 4: "<u4"}[width]
    return np.frombuffer(data[32:], dtype=dtype).astype(np.int64)


def batch(tokens, b, t, seed, k):
    starts = len(tokens) - t
    x = np.zeros((b, t), np.int64)
    y = np.zeros((b, t), np.int64)
    for r in range(b):
        s = splitmix64(seed ^ splitmix64((k * b + r) & MASK)) % starts
        x[r] = tokens[s:s + t]
        y[r] = tokens[s + 1:s + t + 1]
    return x, y


def losses(out):
    return [float(v) for v in re.findall(r"^step \d+ loss = (\S+)$", out, re.M)]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print("FAIL: %s exited %d\n%s%s" % (" ".join(cmd), r.returncode,
                                           r.stdout, r.stderr))
        sys.exit(1)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpt2-example", required=True)
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--step-run", required=True)
    ap.add_argument("--text", required=True)
    a = ap.parse_args()
    cfg = ["--vocab", "256", "--context", "16", "--layers", "1", "--heads",
           "2", "--width", "16", "--batch", "4"]
    with tempfile.TemporaryDirectory() as work:
        # 1. --prepare.
        data = os.path.join(work, "data")
        run([a.gpt2_example, *cfg, "--text", a.text, "--prepare", data])
        with open(a.text, "rb") as f:
            text = np.frombuffer(f.read(), np.uint8).astype(np.int64)
        train, val = (read_tokens(os.path.join(data, n))
                      for n in ("train.tok", "val.tok"))
        held = int(round(len(text) * 0.1))
        assert len(val) == held and len(train) == len(text) - held, \
            (len(train), len(val), len(text))
        assert (np.concatenate([train, val]) == text).all()

        # 2. step-run --tokens against the same batches as .npy folders.
        model = os.path.join(work, "model")
        run([a.gpt2_example, *cfg, "--emit-model", model])
        step = os.path.join(work, "model.step")
        run([a.stepc, os.path.join(model, "model.mlir"), "--train",
             "--no-kernels", "--optimizer=adamw,lr=0.01", "-o", step])
        seed, steps = 7, 4
        folders = os.path.join(work, "batches")
        for k in range(steps):
            x, y = batch(train, 4, 16, seed, k)
            d = os.path.join(folders, "%04d" % k)
            os.makedirs(d)
            np.save(os.path.join(d, "tokens.npy"), x)
            np.save(os.path.join(d, "targets.npy"), y)
        common = [a.step_run, step, "--params", os.path.join(model, "params"),
                  "--steps", str(steps), "--backend=cpu"]
        ref = losses(run(common + ["--inputs", folders]))
        tok = os.path.join(data, "train.tok")
        ahead = losses(run(common + ["--tokens", tok, "--seed", str(seed)]))
        inline = losses(run(common + ["--tokens", tok, "--seed", str(seed),
                                      "--prefetch", "0"]))
        assert len(ref) == steps and ref == ahead == inline, (ref, ahead,
                                                              inline)
        ckpt = os.path.join(work, "ckpt")
        run(common[:-2] + ["2", "--backend=cpu", "--tokens", tok, "--seed",
                           str(seed), "--checkpoint", ckpt])
        resumed = losses(run(common + ["--tokens", tok, "--seed", str(seed),
                                       "--checkpoint", ckpt, "--resume"]))
        assert resumed == ref[2:], (resumed, ref)
        bad = subprocess.run(common + ["--tokens", tok, "--inputs", folders],
                             capture_output=True, text=True)
        assert bad.returncode != 0 and "excludes" in bad.stderr, bad.stderr

        # 3. Validation and early stopping.
        out = os.path.join(work, "out")
        log = run([a.gpt2_example, *cfg, "--data", data, "--steps", "40",
                   "--warmup", "5", "--eval-every", "10", "--eval-batches",
                   "2", "--out", out])
        with open(os.path.join(out, "val.csv")) as f:
            rows = f.read().split()
        assert rows[0] == "step,val_loss" and \
            [r.split(",")[0] for r in rows[1:]] == ["10", "20", "30", "40"], rows
        vals = [float(r.split(",")[1]) for r in rows[1:]]
        assert all(np.isfinite(vals)) and vals[-1] < vals[0], vals
        assert "input: waited" in log, log
        out2 = os.path.join(work, "out2")
        log = run([a.gpt2_example, *cfg, "--data", data, "--steps", "40",
                   "--warmup", "5", "--eval-every", "10", "--eval-batches",
                   "2", "--patience", "1", "--min-delta", "100", "--out",
                   out2])
        assert "early stop" in log, log
        with open(os.path.join(out2, "loss.csv")) as f:
            assert len(f.read().split()) == 1 + 20  # header + steps 1..20
    print("token_pipeline: OK (losses %s; val %s)" % (ref, vals))


if __name__ == "__main__":
    main()
