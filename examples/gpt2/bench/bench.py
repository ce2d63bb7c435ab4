#!/usr/bin/env python3
"""GPT-2 training step: StepJIT against PyTorch eager and torch.compile.

One command, same model, same initial params, same batch, same optimizer:

1. `gpt2-example --emit-model DIR` writes the model (`model.mlir`), its
   initial params (`params/<name>.npy`) and one batch
   (`inputs/{tokens,targets}.npy`), and prints the forward loss of those
   params on StepJIT's reference interpreter.
2. `step-bench` compiles the training step (cold and warm) and times it
   (W untimed steps, then N timed ones) on the batch, over and over.
3. The same GPT-2 as a trainable `torch.nn.Module`, loaded from the same
   .npy files (GPT-2's param names, weights stored [in, out], tied LM head,
   GELU tanh, pre-LN, causal attention), trained with `torch.optim.AdamW`
   on the same batch: eager, then `torch.compile` where this torch has it.
4. A parity guard: `stepc` + `step-run` run the first steps of the same
   training step and their losses are compared with PyTorch's.

Prints one JSON object (also `--out FILE`) and a markdown table (appended
to `--markdown FILE` with the date and the device).

Run it with a python3 that imports torch and numpy (Debian's
/usr/bin/python3), from the repository root:

    /usr/bin/python3 examples/gpt2/bench/bench.py --build build
    /usr/bin/python3 examples/gpt2/bench/bench.py --preset tiny --steps 10

The default preset is `small` (GPT-2 124M) when torch sees a CUDA device,
else `tiny` (a config sized for a CPU).

Optimizer on both sides (nanoGPT's): AdamW, lr 6e-4, betas (0.9, 0.95),
eps 1e-8, weight decay 0.1 on params of rank >= 2 only (matrices and both
embeddings; biases and layer-norm params are not decayed), a constant
learning rate, no gradient clipping unless --clip. In stepc's terms
`adamw,lr=..,beta1=..,beta2=..,eps=..,wd=..,wd_vectors=false`
(docs/training.md); in PyTorch two param groups, the second with
weight_decay 0. Both apply the decay decoupled (`p *= 1 - lr * wd`) before
the Adam update, with bias correction, in f32.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np  # noqa: F401 (torch_gpt2 needs it; checked here)
    import torch
except ImportError as e:  # the python3 first on PATH may lack torch
    sys.exit(f"bench.py: error: {e}; run it with a python3 that imports torch "
             f"and numpy (e.g. /usr/bin/python3 on Debian)")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_gpt2 import HAS_SDPA, load_npy_dir  # noqa: E402
from torch_run import run_torch  # noqa: E402
from report import (device_name, markdown, model_flops_per_token,  # noqa: E402
                    peak_flops, stats, stepjit_categories, summarize,
                    torch_parity, trace_ops)
DEFAULT_TEXT = os.path.join(os.path.dirname(HERE), "data", "tiny.txt")

PRESETS = {
    # GPT-2 small (124M params), nanoGPT's vocab rounded up to 50304.
    "small": dict(vocab=50304, context=1024, layers=12, heads=12, width=768,
                  batch=8),
    # A CPU-sized model: a few seconds of steps on two cores.
    "tiny": dict(vocab=256, context=64, layers=2, heads=2, width=64, batch=8),
}


def fail(msg):
    sys.exit(f"bench.py: error: {msg}")


def note(msg):
    print(f"bench.py: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------- tools --

def find_tool(build, name, subdirs):
    for sub in subdirs:
        path = os.path.join(build, sub, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    tried = ", ".join(os.path.join(build, s, name) for s in subdirs)
    fail(f"{name} not found (looked for {tried}); build it first, e.g. "
         f"`cmake --build {build} --target {name}`, or pass --build DIR")


def run(cmd, what):
    note("$ " + " ".join(cmd))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        fail(f"{what}: cannot run {cmd[0]}: {e}")
    if proc.returncode != 0:
        fail(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
             f"--- stdout (tail)\n{proc.stdout[-4000:]}\n"
             f"--- stderr (tail)\n{proc.stderr[-4000:]}")
    return proc.stdout, time.perf_counter() - t0


# --------------------------------------------------------------- StepJIT --

def optimizer_string(o):
    return (f"adamw,lr={o['lr']!r},beta1={o['beta1']!r},"
            f"beta2={o['beta2']!r},eps={o['eps']!r},wd={o['wd']!r},"
            f"wd_vectors=false")


def stepc_options(args, opt_cfg):
    opts = ["--optimizer=" + optimizer_string(opt_cfg)]
    if args.clip > 0:
        opts.append(f"--clip={args.clip!r}")
    if args.amp == "bf16":
        opts.append("--amp=bf16")
    return opts + list(args.stepc_flag or [])


def run_step_bench(tool, model_dir, backend, args, opt_cfg, out_json):
    cmd = [tool, os.path.join(model_dir, "model.mlir"),
           "--params", os.path.join(model_dir, "params"),
           "--inputs", os.path.join(model_dir, "inputs"),
           *stepc_options(args, opt_cfg),
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--backend", backend, "--out", out_json]
    run(cmd, "step-bench")
    with open(out_json) as f:
        return json.load(f)


def run_step_run(stepc, step_run, model_dir, backend, args, opt_cfg, work):
    """The first --parity-steps losses of the same training step, compiled
    by stepc (without CUDA kernels for the CPU backend) and run by
    step-run, its last step traced (unless --no-profile). Returns (losses,
    seconds, the trace or None)."""
    artifact = os.path.join(work, "train.step")
    cmd = [stepc, os.path.join(model_dir, "model.mlir"), "--train",
           *stepc_options(args, opt_cfg), "-o", artifact]
    if backend == "cpu":
        cmd.append("--no-kernels")
    _, t_compile = run(cmd, "stepc")
    trace_file = os.path.join(work, "parity-trace.json")
    out, t_run = run([step_run, artifact,
                      "--params", os.path.join(model_dir, "params"),
                      "--inputs", os.path.join(model_dir, "inputs"),
                      "--steps", str(args.parity_steps),
                      "--backend", backend,
                      *([] if args.no_profile else ["--trace", trace_file])],
                     "step-run")
    losses = [float(v) for v in
              re.findall(r"^step \d+ loss = (\S+)$", out, re.MULTILINE)]
    if len(losses) != args.parity_steps:
        fail(f"step-run printed {len(losses)} losses, expected "
             f"{args.parity_steps}:\n{out}")
    trace = None
    if not args.no_profile:
        with open(trace_file) as f:
            trace = json.load(f)
    return losses, t_compile + t_run, trace


# ------------------------------------------------------------------ main --

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Benchmarks StepJIT's GPT-2 training step against "
                    "PyTorch eager and torch.compile (same init, data and "
                    "optimizer).")
    ap.add_argument("--build", default="build", help="build folder")
    ap.add_argument("--preset", choices=sorted(PRESETS),
                    help="small (GPT-2 124M) or tiny; default small when "
                         "torch sees a CUDA device (and --backend is not "
                         "cpu), else tiny")
    for name in ("layers", "heads", "width", "context", "vocab", "batch"):
        ap.add_argument("--" + name, type=int, help="override the preset")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--backend", choices=["auto", "cpu", "cuda"],
                    default="auto", help="auto: cuda when torch sees a device")
    ap.add_argument("--amp", choices=["bf16", "none"],
                    help="default: bf16 on CUDA, none on the CPU")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.1,
                    help="AdamW weight decay on params of rank >= 2")
    ap.add_argument("--clip", type=float, default=0.0,
                    help="global gradient-norm clip on both sides (0: off)")
    ap.add_argument("--seed", type=int, default=0, help="params and batch")
    ap.add_argument("--text", default=DEFAULT_TEXT,
                    help="text the batch is drawn from (bytes are tokens)")
    ap.add_argument("--parity-steps", type=int, default=3,
                    help="steps of stepc + step-run for the loss parity "
                         "guard (0: only the interpreter's forward loss)")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when the parity guard fails")
    ap.add_argument("--compile-mode", default="default",
                    choices=["default", "reduce-overhead", "max-autotune"],
                    help="torch.compile mode")
    ap.add_argument("--no-profile", action="store_true",
                    help="skip the profiled step of each run (StepJIT's "
                         "step-run --trace, PyTorch's torch.profiler) and "
                         "the report's time by category")
    ap.add_argument("--no-compile-warm", action="store_true",
                    help="skip the second (warm) torch.compile")
    ap.add_argument("--skip-compile", action="store_true",
                    help="skip torch.compile altogether")
    ap.add_argument("--skip-torch", action="store_true",
                    help="StepJIT alone: no PyTorch run (so no parity "
                         "guard), e.g. to compare StepJIT's plans with "
                         "each other (--stepc-flag)")
    ap.add_argument("--stepc-flag", action="append", metavar="FLAG",
                    help="one more stepc flag for the step (repeatable; "
                         "with --prepare it is recorded there), e.g. "
                         "--stepc-flag=--remat=max or "
                         "--stepc-flag=--buckets=T:512,1024")
    ap.add_argument("--step-run-flag", action="append", metavar="FLAG",
                    help="one more step-run flag for StepJIT's timed steps "
                         "(repeatable), e.g. --step-run-flag=--tune-matmuls")
    ap.add_argument("--dynamic-context", action="store_true",
                    help="trace T as a symbol (gpt2-example "
                         "--dynamic-context; compile with "
                         "--stepc-flag=--buckets=T:...)")
    ap.add_argument("--valid-length", type=int, metavar="N",
                    help="with --prepare --dynamic-context: the batch keeps "
                         "its first N positions (the step runs the bucket "
                         "that holds N)")
    ap.add_argument("--peak-flops", type=float,
                    help="peak FLOP/s for MFU (default: by device name)")
    ap.add_argument("--workdir", help="keep the emitted model and JSON here "
                                      "(default: a temporary folder)")
    ap.add_argument("--prepare", metavar="DIR",
                    help="here, with the compiler: compile the step (cold "
                         "and warm) and write to DIR what --prepared needs "
                         "on a machine with only the runtime (the artifact, "
                         "the batch, each param's shape and init statistics; "
                         "no params), then exit")
    ap.add_argument("--prepared", metavar="DIR",
                    help="run a --prepare'd DIR with step-run (from --build, "
                         "which needs no compiler) instead of gpt2-example "
                         "and step-bench; the params are drawn again there "
                         "from the recorded statistics")
    ap.add_argument("--out", help="write the JSON report here")
    ap.add_argument("--markdown", help="append the markdown table here")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.parity_steps < 0:
        ap.error("need --steps >= 1, --warmup >= 0, --parity-steps >= 0")
    if args.prepare and args.prepared:
        ap.error("--prepare and --prepared exclude each other")
    if args.valid_length is not None and not (args.prepare and
                                              args.dynamic_context):
        ap.error("--valid-length needs --prepare and --dynamic-context")
    return args


def main(argv=None):
    args = parse_args(argv)
    build = args.build
    if not os.path.isdir(build):
        fail(f"build folder '{build}' does not exist: build StepJIT first "
             f"(tools/dev/quickstart.sh) or pass --build DIR")
    prep = None
    gpt2 = bench = stepc = step_run = None
    if args.prepared:
        path = os.path.join(args.prepared, PREPARED)
        if not os.path.isfile(path):
            fail(f"--prepared {args.prepared}: no {PREPARED} in it (make it "
                 f"with --prepare DIR where the compiler is)")
        with open(path) as f:
            prep = json.load(f)
        step_run = find_tool(build, "step-run", ["tools/step-run", "tools"])
    else:
        gpt2 = find_tool(build, "gpt2-example", ["examples"])
        stepc = find_tool(build, "stepc", ["tools/stepc", "tools"])
        if not args.prepare:
            bench = find_tool(build, "step-bench",
                              ["tools/step-bench", "tools"])
            if args.parity_steps:
                step_run = find_tool(build, "step-run",
                                     ["tools/step-run", "tools"])
        if not os.path.isfile(args.text):
            fail(f"--text {args.text} does not exist")

    cuda_ok = torch.cuda.is_available()
    if args.backend == "cuda" and not cuda_ok:
        fail("--backend cuda, but torch sees no CUDA device (torch "
             f"{torch.__version__}, built with CUDA: "
             f"{torch.version.cuda is not None})")
    backend = args.backend if args.backend != "auto" else (
        "cuda" if cuda_ok else "cpu")
    device = torch.device("cuda" if backend == "cuda" else "cpu")
    if prep:
        # The step was compiled with these: PyTorch must match them.
        preset, cfg = prep["preset"], prep["config"]
        args.amp, args.clip = prep["amp"], prep["clip"]
        opt_cfg = prep["optimizer"]
        args.lr, args.beta1, args.beta2 = (opt_cfg["lr"], opt_cfg["beta1"],
                                           opt_cfg["beta2"])
        args.eps, args.wd = opt_cfg["eps"], opt_cfg["wd"]
        args.stepc_flag = prep.get("stepc_flags", [])
        args.dynamic_context = prep.get("dynamic_context", False)
    else:
        # --prepare is for a GPU elsewhere: GPT-2 small in bf16 by default.
        gpu = backend == "cuda" or args.prepare
        preset = args.preset or ("small" if gpu else "tiny")
        cfg = dict(PRESETS[preset])
        for k in cfg:
            if getattr(args, k) is not None:
                cfg[k] = getattr(args, k)
        if cfg["width"] % cfg["heads"]:
            fail(f"--width {cfg['width']} is not a multiple of --heads "
                 f"{cfg['heads']}")
        if args.amp is None:
            args.amp = "bf16" if gpu else "none"
        opt_cfg = dict(lr=args.lr, beta1=args.beta1, beta2=args.beta2,
                       eps=args.eps, wd=args.wd)
    torch.manual_seed(args.seed)
    if args.prepare:
        prepare_dir(args, cfg, preset, opt_cfg, gpt2, stepc, args.prepare)
        return

    tmp = None
    if args.workdir:
        work = os.path.abspath(args.workdir)
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="gpt2-bench-")
        work = tmp
    try:
        if prep:
            report = bench_prepared(args, prep, backend, device, work,
                                    step_run)
        else:
            report = bench_all(args, cfg, preset, backend, device, opt_cfg,
                               work, gpt2, bench, stepc, step_run)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    text = json.dumps(report, indent=2)
    print(text)
    table = markdown(report)
    print()
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + table)
    if args.strict and not report["parity"]["ok"]:
        fail("the parity guard failed (see 'parity' in the JSON)")


def emit_model(args, cfg, gpt2, model_dir):
    """gpt2-example --emit-model: returns (interpreter forward loss,
    seconds)."""
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)
    out, t_emit = run([gpt2, "--vocab", str(cfg["vocab"]),
                       "--context", str(cfg["context"]),
                       "--layers", str(cfg["layers"]),
                       "--heads", str(cfg["heads"]),
                       "--width", str(cfg["width"]),
                       "--batch", str(cfg["batch"]),
                       "--seed", str(args.seed), "--text", args.text,
                       *(["--dynamic-context"] if args.dynamic_context
                         else []),
                       "--emit-model", model_dir], "gpt2-example --emit-model")
    m = re.search(r"^loss = (\S+)$", out, re.MULTILINE)
    return (float(m.group(1)) if m else None), t_emit


def load_batch(folder):
    batch = load_npy_dir(folder)
    if set(batch) != {"tokens", "targets"}:
        fail(f"expected inputs tokens.npy and targets.npy in {folder}, "
             f"found {sorted(batch)}")
    return batch


def bench_all(args, cfg, preset, backend, device, opt_cfg, work, gpt2, bench,
              stepc, step_run):
    model_dir = os.path.join(work, "model")
    interp_loss, t_emit = emit_model(args, cfg, gpt2, model_dir)
    params = load_npy_dir(os.path.join(model_dir, "params"))
    batch = load_batch(os.path.join(model_dir, "inputs"))

    # StepJIT: step-bench, then the parity steps.
    sj = run_step_bench(bench, model_dir, backend, args, opt_cfg,
                        os.path.join(work, "step-bench.json"))
    if sj.get("backend") != backend:
        fail(f"step-bench ran on '{sj.get('backend')}', asked for '{backend}'")
    parity_losses, t_parity, trace = ([], 0.0, None)
    if args.parity_steps:
        parity_losses, t_parity, trace = run_step_run(
            stepc, step_run, model_dir, backend, args, opt_cfg, work)
    n_params = int(sum(a.size for a in params.values()))
    persistent = 3 * 4 * n_params + sum(a.nbytes for a in batch.values())
    stepjit = stepjit_result(sj, persistent, parity_losses)
    if trace is not None:  # the parity run's last step, timed op by op
        stepjit["categories"] = stepjit_categories(trace)
    return compare(args, cfg, preset, backend, device, opt_cfg, params, batch,
                   stepjit, interp_loss,
                   {"emit_model": t_emit, "parity_step_run": t_parity})


def stepjit_result(sj, persistent, parity_losses):
    """The report's StepJIT entry from a step-bench JSON (or one shaped like
    it). StepJIT's memory: the planned arena (activations, gradients,
    temporaries; step-memory-plan's peak) plus what stays resident for the
    whole run: the f32 params, AdamW's two f32 moments and the batch."""
    arena = sj.get("planned_peak_bytes")
    stepjit = {
        "step_seconds": {**{k: sj["step_seconds"][k]
                            for k in ("median", "min", "max", "samples")}},
        "compile_seconds": {"cold": sj["compile_seconds"]["cold"],
                            "warm": sj["compile_seconds"]["warm"]},
        "peak_bytes": None if arena is None else arena + persistent,
        "peak_bytes_what": "planned: step-bench's planned_peak_bytes (arena) "
                           "+ f32 params and AdamW moments + the batch",
        "planned_peak_bytes": arena,
        "persistent_bytes": persistent,
        "kernel_launches": sj.get("kernel_launches"),
        "bytes_per_step": sj.get("bytes_per_step"),
        "distinct_kernels": sj.get("distinct_kernels"),
        "plan_steps": sj.get("plan_steps"),
        "backend": sj.get("backend"),
        "last_loss": sj.get("last_loss"),
        "parity_losses": parity_losses,
    }
    s = stepjit["step_seconds"]
    s["spread"] = (s["max"] - s["min"]) / s["median"] if s["median"] else None
    return stepjit


def compare(args, cfg, preset, backend, device, opt_cfg, params, batch,
            stepjit, interp_loss, seconds):
    """Runs PyTorch eager and torch.compile on the same params and batch
    (unless --skip-torch) and assembles the report around StepJIT's
    entry."""
    n_params = int(sum(a.size for a in params.values()))
    # The batch's own length: the context, or a valid length in a bucket.
    t = int(batch["tokens"].shape[1])
    tokens_per_step = cfg["batch"] * t

    # PyTorch.
    if args.skip_torch:
        eager = {"skipped": "--skip-torch"}
        comp = {"skipped": "--skip-torch"}
    else:
        note(f"torch {torch.__version__}: eager on {device}")
        try:  # a config the PyTorch model refuses
            eager = run_torch("eager", cfg, params, batch, device, args,
                              opt_cfg)
        except ValueError as e:
            fail(str(e))
        if args.skip_compile:
            comp = {"skipped": "--skip-compile"}
        else:
            note(f"torch.compile on {device}")
            comp = run_torch("compile", cfg, params, batch, device, args,
                             opt_cfg)

    name = device_name(device)
    peak, peak_source = peak_flops(device, name, args.peak_flops)
    fpt = model_flops_per_token(cfg, n_params, t)
    for r in (stepjit, eager, comp):
        summarize(r, tokens_per_step, fpt, peak)
    if args.skip_torch:
        losses = stepjit["parity_losses"]
        parity = {"skipped": "--skip-torch: no PyTorch run", "ok": True,
                  "stepjit_first_loss": losses[0] if losses else interp_loss}
    else:
        parity = torch_parity(args.amp, backend, args.warmup + args.steps,
                              stepjit, eager, interp_loss)
        if not parity["ok"]:
            note(f"WARNING: first-step loss StepJIT "
                 f"{parity['stepjit_first_loss']!r} vs PyTorch "
                 f"{parity['torch_first_loss']!r}: relative error "
                 f"{parity['first_loss_rel_err']:.3e} > {parity['tolerance']:g}")
    for r in (eager, comp):
        if "losses" in r:
            r["first_loss"] = r["losses"][0]
            r["last_loss"] = r["losses"][-1]

    return {
        "benchmark": "gpt2_train_step",
        "date": datetime.datetime.now(datetime.timezone.utc)
                .strftime("%Y-%m-%d %H:%M UTC"),
        "device": {"name": name, "backend": backend,
                   "host": platform.node(), "cpu_cores": os.cpu_count()},
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_tf32_matmul": (torch.backends.cuda.matmul.allow_tf32
                              if device.type == "cuda" else None),
        "torch_attention": ("F.scaled_dot_product_attention" if HAS_SDPA
                            else "explicit masked softmax"),
        "preset": preset,
        "config": cfg,
        "n_params": n_params,
        "tokens_per_step": tokens_per_step,
        "valid_length": t if t != cfg["context"] else None,
        "stepc_flags": list(args.stepc_flag or []),
        "amp": args.amp,
        "steps": args.steps,
        "warmup": args.warmup,
        "optimizer": {"stepc": optimizer_string(opt_cfg), "clip": args.clip,
                      "schedule": "constant",
                      "torch": f"torch.optim.AdamW(lr={args.lr}, betas=("
                               f"{args.beta1}, {args.beta2}), eps={args.eps}, "
                               f"weight_decay={args.wd} on dim >= 2 else 0)"},
        # MFU = flops_per_token * tokens_per_second / peak_flops, with
        # flops_per_token = 6 * (N - T*C) + 12 * L * C * T
        # (model_flops_per_token's comment).
        "flops_per_token": fpt,
        "peak_flops": peak,
        "peak_flops_source": peak_source,
        "results": {"stepjit": stepjit, "torch_eager": eager,
                    "torch_compile": comp},
        "parity": parity,
        "seconds": seconds,
    }


# ----------------------------------------- split: compile here, run there --
#
# A GPU machine may have CUDA and PyTorch but no LLVM/MLIR, so no stepc: then
# --prepare compiles the step where the compiler is, and --prepared runs it
# where the GPU is, with step-run (built with -DSTEP_BUILD_COMPILER=OFF).
# GPT-2 small's params (500 MB of f32) do not travel: the folder records
# each param's shape, dtype, mean and standard deviation, and --prepared
# draws them again (normal with that mean and deviation; a constant where
# the deviation is 0: layer-norm scales, biases), the same draw for StepJIT
# and PyTorch. Not gpt2-example's values, but its distribution: the
# benchmark's losses and speeds do not depend on which draw.

PREPARED = "prepared.json"


def artifact_meta(path):
    """The manifest's `meta` of a .step file (docs/artifact.md)."""
    with open(path, "rb") as f:
        head = f.read(32)
        if head[:8] != b"STEPJIT\0":
            fail(f"{path} is not a StepJIT artifact (magic {head[:8]!r})")
        size = int.from_bytes(head[16:24], "little")
        return json.loads(f.read(size)).get("meta", {})


def prepare_dir(args, cfg, preset, opt_cfg, gpt2, stepc, out):
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gpt2-prepare-")
    try:
        model_dir = os.path.join(tmp, "model")
        interp_loss, _ = emit_model(args, cfg, gpt2, model_dir)
        params = load_npy_dir(os.path.join(model_dir, "params"))
        batch = load_batch(os.path.join(model_dir, "inputs"))
        stats_of = {}
        for name, a in params.items():
            x = a.astype("float64")
            stats_of[name] = {"shape": list(a.shape), "dtype": str(a.dtype),
                              "mean": float(x.mean()), "std": float(x.std())}
        inputs = os.path.join(out, "inputs")
        if os.path.isdir(inputs):
            shutil.rmtree(inputs)
        shutil.copytree(os.path.join(model_dir, "inputs"), inputs)
        if args.valid_length is not None:
            n = args.valid_length
            if not 1 <= n <= cfg["context"]:
                fail(f"--valid-length {n} is not in 1..{cfg['context']}")
            for k, a in batch.items():
                np.save(os.path.join(inputs, k + ".npy"),
                        np.ascontiguousarray(a[:, :n]))
            batch = load_batch(inputs)
        # Compile time: cold with an empty kernel cache, then warm (the
        # second compile of the same model, its cache filled).
        artifact = os.path.join(out, "train.step")
        cmd = [stepc, os.path.join(model_dir, "model.mlir"), "--train",
               *stepc_options(args, opt_cfg), "-o", artifact]
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  env=env)
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                fail(f"stepc failed (exit {proc.returncode}): "
                     f"{' '.join(cmd)}\n{proc.stderr[-4000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = artifact_meta(artifact)
    record = {"preset": preset, "config": cfg, "amp": args.amp,
              "optimizer": opt_cfg, "clip": args.clip, "seed": args.seed,
              "stepc_flags": list(args.stepc_flag or []),
              "dynamic_context": args.dynamic_context,
              "interpreter_forward_loss": interp_loss,
              "compile_seconds": {"cold": times[0], "warm": times[1]},
              "compile_host": f"{device_name(torch.device('cpu'))}, "
                              f"{platform.node()}",
              "planned_peak_bytes": meta.get("arena_bytes"),
              "params": stats_of,
              "batch_bytes": int(sum(a.nbytes for a in batch.values()))}
    with open(os.path.join(out, PREPARED), "w") as f:
        json.dump(record, f, indent=1)
    note(f"prepared {out}: {len(stats_of)} params, artifact "
         f"{os.path.getsize(artifact) / 2**20:.1f} MiB, compile cold "
         f"{times[0]:.2f} s, warm {times[1]:.2f} s")


def draw_params(prep, seed, folder):
    """The params again from their recorded statistics (see above)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    out = {}
    for name in sorted(prep["params"]):
        p = prep["params"][name]
        if p["std"] > 0:
            a = rng.normal(p["mean"], p["std"], p["shape"])
        else:
            a = np.full(p["shape"], p["mean"])
        a = a.astype(p["dtype"])
        np.save(os.path.join(folder, name + ".npy"), a)
        out[name] = a
    return out


def bench_prepared(args, prep, backend, device, work, step_run):
    cfg, opt_cfg = prep["config"], prep["optimizer"]
    params = draw_params(prep, args.seed, os.path.join(work, "params"))
    batch = load_batch(os.path.join(args.prepared, "inputs"))
    # W + N graph-replayed steps, then one more that step-run --trace times
    # op by op (left out of the step times; its ops are the profile).
    trace_file = os.path.join(work, "trace.json")
    total = args.warmup + args.steps + 1
    out, t_run = run([step_run, os.path.join(args.prepared, "train.step"),
                      "--params", os.path.join(work, "params"),
                      "--inputs", os.path.join(args.prepared, "inputs"),
                      "--steps", str(total), "--backend", backend,
                      "--trace", trace_file, *(args.step_run_flag or [])],
                     "step-run")
    losses = [float(v) for v in
              re.findall(r"^step \d+ loss = (\S+)$", out, re.MULTILINE)]
    if len(losses) != total:
        fail(f"step-run printed {len(losses)} losses, expected {total}:\n"
             f"{out}")
    with open(trace_file) as f:
        trace = json.load(f)
    walls = [s["wall_s"] for s in trace["steps"]][args.warmup:-1]
    n_ops, op_seconds, top = trace_ops(trace)
    sj = {"step_seconds": stats(walls),
          "compile_seconds": prep["compile_seconds"],
          "planned_peak_bytes": prep["planned_peak_bytes"],
          "backend": backend, "last_loss": losses[-2]}
    n_params = int(sum(a.size for a in params.values()))
    persistent = 3 * 4 * n_params + prep["batch_bytes"]
    stepjit = stepjit_result(sj, persistent, losses[:-1])
    stepjit["compile_host"] = prep["compile_host"]
    stepjit["step_run_flags"] = list(args.step_run_flag or [])
    # Measured on the device (step-run's trace, CUDA only): what the
    # executor allocated and what cuMemGetInfo says it took.
    stepjit["device_memory"] = trace.get("device_memory")
    stepjit["profiled_step"] = {"ops": n_ops, "op_seconds": op_seconds,
                                "top": top}
    stepjit["categories"] = stepjit_categories(trace)
    if args.parity_steps:
        stepjit["parity_losses"] = losses[:args.parity_steps]
    return compare(args, cfg, prep["preset"], backend, device, opt_cfg,
                   params, batch, stepjit, prep["interpreter_forward_loss"],
                   {"step_run": t_run})


if __name__ == "__main__":
    main()
