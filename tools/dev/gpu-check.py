#!/usr/bin/env python3
"""The GPU checks of a session that has a device, in two calls.

The device machine has CUDA but no LLVM/MLIR, so artifacts are compiled
here and run there (docs/runtime.md, "Checking on a GPU"):

  prepare (here)   emits the MLP and a small GPT-2 with the examples,
                   compiles one artifact per case with stepc (kernels for
                   the default archs), writes numbered batch folders, runs
                   every case on the CPU backend for the reference
                   (params, optimizer state, losses), and copies the
                   header-only libraries the runtime build needs, all under
                   one git-ignored folder (default carry/) for the device
                   tool's `carry`.
  run (there)      runs every case with step-run --backend=cuda (or the
                   backend named) from the same params and batches, and
                   compares losses and every tensor written with the CPU
                   reference: relative error max|a - b| / max|b| within
                   the case's bound (1e-4 for f32, as gpu_parity.py; 1e-2
                   for bf16/fp16). Step times are the median of the
                   --trace wall times after the first two steps, the last
                   (timed op by op) left out; the trace's slowest ops of
                   the last step, with the GB/s and TFLOP/s they reached,
                   go to top_kernels (docs/profiling.md). Writes
                   OUT/gpu-check.json and prints one line per case; exits 1
                   when a case fails or errs.

`dry-run` prepares without kernels into a temporary folder and runs every
case (DRY_STEPS steps) on the CPU backend, which must reproduce the
references bit for bit
(the ctest tools.gpu_check_dry_run), so the script is known to work before
a device is lent.
"""
import argparse
import glob
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

STEPS = 10
# The dry run's steps: every batch (BATCHES, so each of gpt2_buckets'
# buckets) and one step timed between the two first and the last.
DRY_STEPS = 4
BATCHES = 3
# The valid length of each batch of the model with a symbolic T (gpt2_dyn,
# context 64): buckets 64, 16 and 32 of --buckets=T:16,32,64.
DYN_LENGTHS = [64, 13, 30]

# What a case must meet (the CUDA run against the CPU reference; errors are
# max|a - b| / max|b| per tensor):
#  - "f32": every param and state tensor within the bound, the losses too.
#  - "low" (fp16/bf16 AMP): a one-ulp difference in an activation flips a
#    ReLU or a near-zero gradient now and then, and AdamW turns that into an
#    lr-sized update of a few elements, so a per-tensor bound of 1e-2 is
#    noise-limited (measured on the CPU, 2026-11-25: a single-rounding
#    epilogue against the CPU's two roundings moves mlp_fp16's fc2.weight
#    by 4e-2 after 10 steps, 14 of 8192 elements). Instead: the losses
#    within LOW_LOSS, at most LOW_FRACTION of all param elements off by
#    more than 1e-3 of their tensor's max, and every tensor within the
#    case's bound as a backstop. LOW_LOSS: fp16's loss noise measured
#    1.2e-5 (CPU emulation) and 1.3e-5 (H200); bf16 keeps 3 fewer mantissa
#    bits (8x the ulp) and measured 1.5e-4 on an H200 (2026-11-26), so
#    5e-4 for bf16 (a 1% lr error moves fp16's losses by 1.3e-3).
# AdamW runs with eps=1e-4 (as e2e.train_parity, docs/training.md): with
# 1e-8 an element whose gradient is rounding noise (the key bias of
# attention: its true gradient is 0) gets an update of lr * g / eps that
# two correct summation orders disagree on by 100%. An SGD case keeps a
# per-tensor gradient-scale bug visible (Adam normalizes it away).
LOW_LOSS = {"fp16": 1e-4, "bf16": 5e-4}
LOW_FRACTION = 0.01
# The backstop's other way through for a "low" tensor: where the GPU and
# the CPU place their roundings differently (a fused kernel keeping a
# chain in f32 where the CPU rounds each op), the two 16-bit results can
# be as far apart as either is from the f32 step (measured 2026-11-27:
# GPT-2's layer-0 Adam moments 4.2e-2 between the CPU's bf16 and f32
# steps, 4.8e-2 between the H200's and the CPU's bf16). So a tensor over
# the bound still passes when the GPU's result is no further from the same
# case's f32 result (the LOW_F32 case, on the CPU) than LOW_F32_SLACK
# times the CPU's own 16-bit result is: as close to full precision as
# the reference, give or take noise.
LOW_F32 = {"mlp_fp16": "mlp", "gpt2_bf16": "gpt2", "gpt2_bf16_tuned": "gpt2",
           "gpt2_bf16_nofuse": "gpt2_nofuse", "gpt2_bf16_gelu_epi": "gpt2",
           "gpt2_bf16_saved_ds": "gpt2", "gpt2_bf16_bgrad_epi": "gpt2",
           "gpt2_bf16_atomic_dq": "gpt2",
           "mlp_fp16_offload_optimizer": "mlp"}
LOW_F32_SLACK = 1.5

# name, model, stepc flags, bound, kind. World-size-1 sharded steps keep
# their collectives: on the GPU they are NCCL calls on the collective stream.
CASES = [
    ("mlp", "mlp", [], 1e-4, "f32"),
    ("mlp_nofuse", "mlp", ["--no-fuse"], 1e-4, "f32"),
    ("mlp_fp16", "mlp", ["--amp=fp16", "--loss-scale=dynamic"], 2e-2, "low"),
    ("gpt2", "gpt2", [], 1e-4, "f32"),
    ("gpt2_sgd", "gpt2", ["--optimizer=sgd,lr=0.1"], 1e-5, "f32"),
    ("gpt2_nofuse", "gpt2", ["--no-fuse"], 1e-4, "f32"),
    ("gpt2_bf16", "gpt2", ["--amp=bf16"], 2e-2, "low"),
    # No fusion: tells a fused kernel's rounding (or bug) from an op's.
    ("gpt2_bf16_nofuse", "gpt2", ["--amp=bf16", "--no-fuse"], 2e-2, "low"),
    # The same step run with step-run --tune-matmuls (RUN_FLAGS).
    ("gpt2_bf16_tuned", "gpt2", ["--amp=bf16"], 2e-2, "low"),
    # GELU's forward and backward as cuBLASLt epilogues (GELU_AUX_BIAS,
    # DGELU_BGRAD): stepc --gelu-epilogues, not yet run on a GPU.
    ("gpt2_gelu_epi", "gpt2", ["--gelu-epilogues"], 1e-4, "f32"),
    ("gpt2_bf16_gelu_epi", "gpt2", ["--amp=bf16", "--gelu-epilogues"], 2e-2,
     "low"),
    # The q/k/v bias gradient in the weight gradient's cuBLASLt call
    # (BGRADA): stepc --bgrad-epilogues, not yet run on a GPU.
    ("gpt2_bgrad_epi", "gpt2", ["--bgrad-epilogues"], 1e-4, "f32"),
    ("gpt2_bf16_bgrad_epi", "gpt2", ["--amp=bf16", "--bgrad-epilogues"], 2e-2,
     "low"),
    # attention's gradient in three launches, dS stored by the dk/dv one
    # for a dq one: stepc --attention-saved-ds (the mma kernels: bf16),
    # not yet run on a GPU.
    ("gpt2_bf16_saved_ds", "gpt2", ["--amp=bf16", "--attention-saved-ds"],
     2e-2, "low"),
    # dq added into an f32 accumulator with atomics by the dk/dv launch
    # (FlashAttention-2's backward): stepc --attention-atomic-dq, not yet
    # run on a GPU; dq's bits may differ from run to run.
    ("gpt2_bf16_atomic_dq", "gpt2", ["--amp=bf16", "--attention-atomic-dq"],
     2e-2, "low"),
    ("gpt2_offload_all", "gpt2", ["--offload=all"], 1e-4, "f32"),
    ("gpt2_remat_max", "gpt2", ["--remat=max"], 1e-4, "f32"),
    # T symbolic, three buckets; the batches' lengths (DYN_LENGTHS) pick
    # each of them: on the GPU three plans, one CUDA graph each, one set
    # of params and state.
    ("gpt2_buckets", "gpt2_dyn", ["--buckets=T:16,32,64"], 1e-4, "f32"),
    ("gpt2_dp1_nccl", "gpt2", ["--shard=dp", "--world-size=1"], 1e-4, "f32"),
    ("gpt2_zero3_1_nccl", "gpt2", ["--shard=zero3", "--world-size=1"], 1e-4,
     "f32"),
    # ZeRO-Offload: pinned params and state, the update as host functions
    # in the graph (the CPU kernels, so a few ulp from the NVRTC update).
    ("gpt2_offload_optimizer", "gpt2", ["--offload-optimizer"], 1e-4, "f32"),
    ("mlp_fp16_offload_optimizer", "mlp",
     ["--amp=fp16", "--loss-scale=dynamic", "--offload-optimizer"], 2e-2,
     "low"),
]
TRAIN = ["--optimizer=adamw,lr=1e-3,eps=1e-4", "--clip=1.0"]
# step-run flags of a case (its stepc flags are in CASES).
RUN_FLAGS = {"gpt2_bf16_tuned": ["--tune-matmuls"]}


def train_flags(flags):
    """TRAIN with a case's own --optimizer in place of the default."""
    own = [f for f in flags if f.startswith("--optimizer=")]
    return [f for f in TRAIN if not (own and f.startswith("--optimizer="))]


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def must(cmd):
    code, out = run(cmd)
    if code != 0:
        sys.exit(f"gpu-check: `{' '.join(cmd)}` exited {code}:\n{out}")
    return out


def load(folder):
    return {os.path.basename(f)[:-4]: np.load(f)
            for f in glob.glob(os.path.join(folder, "*.npy"))}


def losses_of(text):
    return [float(v) for v in re.findall(r"^step \d+ loss = (\S+)$", text,
                                         re.M)]


def write_batches(inputs, folder, rng, lengths=None):
    """BATCHES numbered folders: the example's batch, rows permuted; with
    `lengths`, batch k keeps the first lengths[k] columns (positions)."""
    rows = next(iter(inputs.values())).shape[0]
    for k in range(BATCHES):
        order = np.arange(rows) if k == 0 else rng.permutation(rows)
        d = os.path.join(folder, f"{k:04d}")
        os.makedirs(d)
        for name, v in inputs.items():
            v = v[order]
            if lengths:
                v = np.ascontiguousarray(v[:, :lengths[k]])
            np.save(os.path.join(d, name + ".npy"), v)


def store_blobs(folder, blobs):
    """Moves the .npy files of `folder` into `blobs`, named by content (the
    cases that compute the same bits on the CPU share them); returns
    {tensor name: blob file}."""
    os.makedirs(blobs, exist_ok=True)
    index = {}
    for f in sorted(glob.glob(os.path.join(folder, "*.npy"))):
        with open(f, "rb") as h:
            digest = hashlib.sha256(h.read()).hexdigest()[:32] + ".npy"
        if not os.path.exists(os.path.join(blobs, digest)):
            shutil.move(f, os.path.join(blobs, digest))
        index[os.path.basename(f)[:-4]] = digest
    return index


def header_dir(name):
    """The include directory that holds `name` (e.g. CLI/CLI.hpp)."""
    for d in ["/usr/include", "/usr/local/include"]:
        if os.path.exists(os.path.join(d, name)):
            return d
    sys.exit(f"gpu-check: {name} not found under /usr/include")


def prepare(a):
    carry = a.carry
    shutil.rmtree(carry, ignore_errors=True)
    os.makedirs(carry)
    tool = lambda *p: os.path.join(a.build, *p)
    models = {
        "mlp": [tool("examples", "mlp-example"), "--in", "64", "--hidden1",
                "128", "--hidden2", "64", "--classes", "10", "--batch", "32",
                "--out"],
        "gpt2": [tool("examples", "gpt2-example"), "--context", "64",
                 "--layers", "2", "--heads", "4", "--width", "128",
                 "--batch", "4", "--emit-model"],
    }
    models["gpt2_dyn"] = models["gpt2"][:-1] + ["--dynamic-context",
                                                "--emit-model"]
    rng = np.random.default_rng(5)
    for name, cmd in models.items():
        d = os.path.join(carry, "models", name)
        must(cmd + [d])
        write_batches(load(os.path.join(d, "inputs")),
                      os.path.join(d, "batches"), rng,
                      DYN_LENGTHS if name == "gpt2_dyn" else None)
    cases = []
    for name, model, flags, bound, kind in CASES:
        if a.only and name not in a.only:
            continue
        d = os.path.join(carry, "models", model)
        artifact = os.path.join(carry, name + ".step")
        must([tool("tools", "stepc"), os.path.join(d, "model.mlir"),
              "--train", *train_flags(flags), *flags, *(["--no-kernels"] if a.no_kernels
                                           else []), "-o", artifact])
        ref = os.path.join(carry, "ref-" + name)
        text = must([tool("tools", "step-run"), artifact, "--params",
                     os.path.join(d, "params"), "--inputs",
                     os.path.join(d, "batches"), "--steps", str(a.steps),
                     "--backend=cpu", "--out", ref, *RUN_FLAGS.get(name, [])])
        cases.append({"name": name, "model": model, "flags": flags,
                      "run_flags": RUN_FLAGS.get(name, []),
                      "bound": bound, "kind": kind,
                      "losses": losses_of(text),
                      "ref": store_blobs(ref, os.path.join(carry, "blobs"))})
        shutil.rmtree(ref)
    # The runtime's header-only dependencies, for an image without them.
    include = os.path.join(carry, "include")
    shutil.copytree(os.path.join(header_dir("nlohmann/json.hpp"), "nlohmann"),
                    os.path.join(include, "nlohmann"))
    shutil.copytree(os.path.join(header_dir("CLI/CLI.hpp"), "CLI"),
                    os.path.join(include, "CLI"))
    # NCCL's header (its library is dlopen'ed): the image may hold NCCL
    # only as PyTorch's pip package, without nccl.h.
    for d in ["/usr/local/cuda/include", "/usr/include", "/usr/local/include"]:
        if os.path.exists(os.path.join(d, "nccl.h")):
            shutil.copy(os.path.join(d, "nccl.h"), include)
            break
    else:
        print("gpu-check: nccl.h not found: the device build will refuse "
              "collectives (the dp1/zero3 cases fail)")
    with open(os.path.join(carry, "manifest.json"), "w") as f:
        json.dump({"steps": a.steps, "train": TRAIN, "cases": cases}, f,
                  indent=1)
    size = sum(os.path.getsize(p) for p in
               glob.glob(os.path.join(carry, "**"), recursive=True)
               if os.path.isfile(p))
    print(f"gpu-check: {len(cases)} cases in {carry} ({size / 2**20:.1f} MiB)")


def rel_err(got, want):
    got, want = got.astype(np.float64), want.astype(np.float64)
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    return float(np.max(np.abs(got - want)) /
                 max(float(np.max(np.abs(want))), 1e-30))


def top_kernels(trace, n=8):
    """The last step's slowest ops in the trace (docs/profiling.md), with
    the bandwidth and FLOP/s each reached."""
    ops = [e for e in trace["traceEvents"]
           if e["ph"] == "X" and e["cat"] not in ("step", "input", "view")]
    ops.sort(key=lambda e: -e["dur"])
    out = []
    for e in ops[:n]:
        us, args = e["dur"], e["args"]
        moved = args["bytes_read"] + args["bytes_written"]
        out.append({"name": e["name"], "op": args["op"], "us": us,
                    "bytes": moved, "flops": args["flops"],
                    "GB_per_s": moved / us / 1e3 if us > 0 else None,
                    "TFLOP_per_s": args["flops"] / us / 1e6 if us > 0
                    else None})
    return out


def judge(want, got, want_losses, losses, kind, flags, bound, f32=None):
    """A run against its reference (the rules above CASES): the verdict
    and its figures, as gpu-check.json holds them. `want`/`got` map tensor
    names to arrays; `kind` is "f32" or "low"; `f32`, for a "low" case,
    the same step's full-precision result on the CPU (LOW_F32), or None."""
    errs = {k: rel_err(got[k], v) if k in got else float("inf")
            for k, v in want.items()}
    loss_err = max((abs(x - y) / max(abs(y), 1e-30)
                    for x, y in zip(losses, want_losses)),
                   default=float("inf"))
    if len(losses) != len(want_losses):
        loss_err = float("inf")
    worst = max(errs, key=errs.get)
    # Param elements off by more than 1e-3 of their tensor's max (state
    # excluded: Adam's v of a near-zero gradient is noise).
    off = total = 0
    for k, v in want.items():
        if k not in got or k.startswith("opt.") or \
                not np.issubdtype(v.dtype, np.floating):
            continue
        scale = max(float(np.max(np.abs(v))), 1e-30) if v.size else 1
        off += int(np.sum(np.abs(got[k].astype(np.float64) -
                                 v.astype(np.float64)) > 1e-3 * scale))
        total += v.size
    fraction = off / max(total, 1)
    verdict = {}
    if kind == "low":
        amp = "bf16" if "--amp=bf16" in flags else "fp16"
        # Tensors over the bound, each with (the GPU's, the CPU's) distance
        # from the f32 step where that is known.
        over = {k: e for k, e in errs.items() if not e <= bound}
        to_f32 = {k: (rel_err(got[k], f32[k]), rel_err(want[k], f32[k]))
                  for k in over if f32 is not None and k in f32 and k in got}
        backstop = all(k in to_f32 and math.isfinite(to_f32[k][0]) and
                       math.isfinite(to_f32[k][1]) and
                       to_f32[k][0] <= LOW_F32_SLACK * to_f32[k][1]
                       for k in over)
        ok = (loss_err <= LOW_LOSS[amp] and fraction <= LOW_FRACTION and
              backstop)
        if to_f32:
            verdict["over_bound_to_f32"] = {
                k: {"gpu": g, "cpu": c} for k, (g, c) in
                sorted(to_f32.items(), key=lambda x: -x[1][0] / max(
                    x[1][1], 1e-30))[:6]}
    else:
        ok = max(errs[worst], loss_err) <= bound
    verdict.update(ok=ok, kind=kind, worst_tensor=worst,
                   worst_rel_err=errs[worst], loss_rel_err=loss_err,
                   fraction_off=fraction,
                   errors=dict(sorted(errs.items(), key=lambda x: -x[1])[:6]))
    return verdict


def run_cases(a):
    carry = a.carry
    with open(os.path.join(carry, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(a.out, exist_ok=True)
    results, failed = [], 0
    cases = {c["name"]: c for c in manifest["cases"]}
    for c in manifest["cases"]:
        d = os.path.join(carry, "models", c["model"])
        out = os.path.join(a.out, c["name"])
        trace = os.path.join(a.out, c["name"] + ".trace.json")
        code, text = run([a.step_run, os.path.join(carry, c["name"] + ".step"),
                          "--params", os.path.join(d, "params"), "--inputs",
                          os.path.join(d, "batches"), "--steps",
                          str(manifest["steps"]), f"--backend={a.backend}",
                          "--out", out, "--trace", trace,
                          *c.get("run_flags", [])])
        r = {"name": c["name"], "flags": c["flags"], "bound": c["bound"]}
        if code != 0:
            r.update(ok=False, error=text.strip()[-2000:])
        else:
            want = {k: np.load(os.path.join(carry, "blobs", v))
                    for k, v in c["ref"].items()}
            losses = losses_of(text)
            f32 = None
            if c.get("kind") == "low" and LOW_F32.get(c["name"]) in cases:
                f32 = {k: np.load(os.path.join(carry, "blobs", v)) for k, v
                       in cases[LOW_F32[c["name"]]]["ref"].items()}
            verdict = judge(want, load(out), c["losses"], losses,
                            c.get("kind", "f32"), c["flags"], c["bound"], f32)
            with open(trace) as f:
                events = json.load(f)
            # Not the last step: it is timed op by op (outside the graph).
            walls = [s["wall_s"] for s in events["steps"]][2:-1]
            r.update(verdict, losses=losses,
                     step_s_median=statistics.median(walls) if walls else None,
                     top_kernels=top_kernels(events))
        failed += not r["ok"]
        results.append(r)
        if r["ok"] or "error" not in r:
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {c['name']}: worst "
                  f"{r['worst_tensor']} {r['worst_rel_err']:.3g}, losses "
                  f"{r['loss_rel_err']:.3g}, off {r['fraction_off']:.2%} "
                  f"(bound {c['bound']:g}, {r['kind']}), step "
                  f"{r['step_s_median']}")
            for k, d in list(r.get("over_bound_to_f32", {}).items())[:2]:
                print(f"     {k} from the f32 step: GPU {d['gpu']:.3g}, "
                      f"CPU {d['cpu']:.3g} (at most {LOW_F32_SLACK:g}x)")
        else:
            print(f"FAIL {c['name']}: step-run exited {code}: "
                  f"{r['error'][-400:]}")
    with open(os.path.join(a.out, "gpu-check.json"), "w") as f:
        json.dump({"backend": a.backend, "results": results}, f, indent=1)
    if a.exact:
        bad = [r["name"] for r in results
               if r.get("worst_rel_err") != 0 or r.get("loss_rel_err") != 0]
        if bad:
            print("FAIL: not bit-identical to the reference: " + ", ".join(bad))
            failed += 1
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("prepare", help="compile the cases and their CPU "
                                       "references (needs the compiler)")
    p.add_argument("--build", default="build", help="the build folder")
    p.add_argument("--carry", default="carry")
    p.add_argument("--only", nargs="*", help="these cases only")
    p.add_argument("--no-kernels", action="store_true",
                   help="stepc --no-kernels (a CPU dry run only)")
    p.add_argument("--steps", type=int, default=STEPS,
                   help=f"steps a case runs (default {STEPS})")
    r = sub.add_parser("run", help="run the cases and compare")
    r.add_argument("--step-run", required=True)
    r.add_argument("--carry", default="carry")
    r.add_argument("--out", required=True)
    r.add_argument("--backend", default="cuda")
    r.add_argument("--exact", action="store_true",
                   help="require bit-identical results (the CPU dry run)")
    d = sub.add_parser("dry-run", help="prepare without kernels and run on "
                                       "the CPU backend, bit for bit")
    d.add_argument("--build", default="build")
    a = ap.parse_args()
    if a.what == "prepare":
        if a.steps < 1:
            ap.error(f"--steps must be at least 1, found {a.steps}")
        prepare(a)
        return 0
    if a.what == "dry-run":
        work = tempfile.mkdtemp(prefix="stepjit-gpu-check-")
        try:
            a.carry, a.only, a.no_kernels = os.path.join(work, "carry"), None, True
            a.steps = DRY_STEPS
            prepare(a)
            a.step_run = os.path.join(a.build, "tools", "step-run")
            a.out, a.backend, a.exact = os.path.join(work, "out"), "cpu", True
            return run_cases(a)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return run_cases(a)


if __name__ == "__main__":
    sys.exit(main())
