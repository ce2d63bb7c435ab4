"""PyTorch's side of examples/gpt2/bench/bench.py: the same GPT-2 step
(torch_gpt2.py) timed in eager mode or under torch.compile, step by step as
step-bench times StepJIT's, and one more step profiled (torch.profiler)
for the report's time by category."""

import contextlib
import gc
import json
import os
import tempfile
import time

import torch

from report import stats, torch_categories
from torch_gpt2 import build_model, make_optimizer


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def amp_context(device, amp):
    if amp == "bf16":
        return lambda: torch.autocast(device_type=device.type,
                                      dtype=torch.bfloat16)
    return contextlib.nullcontext


def time_torch(model, fn, opt, tokens, targets, device, amp, clip, warmup,
               steps):
    """W + N steps of forward, backward, (clip), AdamW; each timed alone and
    ending with the loss on the host, as step-bench's Session::step does.
    Returns (losses of all steps, times of all steps)."""
    ctx = amp_context(device, amp)
    params = list(model.parameters())
    losses, times = [], []
    for _ in range(warmup + steps):
        sync(device)
        t0 = time.perf_counter()
        with ctx():
            loss = fn(tokens, targets)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(value)
    return losses, times


def free(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def profile_torch(model, fn, opt, tokens, targets, device, args):
    """One more step under torch.profiler: {kernel name: seconds} of its
    device kernels (on the CPU: each ATen op's own time), and the 15
    taking the most."""
    from torch.profiler import ProfilerActivity, profile
    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda
                             else ProfilerActivity.CPU]) as prof:
        time_torch(model, fn, opt, tokens, targets, device, args.amp,
                   args.clip, 0, 1)
    kernels = {}
    if cuda:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
        for e in events:
            if str(e.get("cat", "")).lower() == "kernel":
                kernels[e["name"]] = (kernels.get(e["name"], 0.0)
                                      + e["dur"] * 1e-6)
    else:
        for a in prof.key_averages():
            if a.self_cpu_time_total > 0:
                kernels[a.key] = a.self_cpu_time_total * 1e-6
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:15]
    return kernels, [{"name": k, "us": v * 1e6} for k, v in top]


def run_torch(kind, cfg, params, batch, device, args, opt_cfg):
    """kind: "eager" or "compile". Returns the result dict (or a skip)."""
    tokens = torch.from_numpy(batch["tokens"]).to(device)
    targets = torch.from_numpy(batch["targets"]).to(device)
    warmup, steps = args.warmup, args.steps
    res = {}

    def fresh():
        model = build_model(cfg, params, device)  # ValueError: the caller's
        opt, impl = make_optimizer(model, opt_cfg, device)
        return model, opt, impl

    if kind == "compile":
        if not hasattr(torch, "compile"):
            return {"skipped": f"torch {torch.__version__} has no "
                               f"torch.compile (needs torch >= 2.0)"}
        # The first call compiles: keep it out of the timed steps.
        warmup = max(warmup, 1)
    mode = None if args.compile_mode == "default" else args.compile_mode
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model, opt, impl = fresh()
    fn = model
    try:
        if kind == "compile":
            fn = torch.compile(model, mode=mode)
        losses, times = time_torch(model, fn, opt, tokens, targets, device,
                                   args.amp, args.clip, warmup, steps)
    except Exception as e:  # torch.compile may fail where eager works
        if kind != "compile":
            raise
        model = opt = fn = None
        free(device)
        return {"skipped": f"torch.compile failed: {type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''}"}
    res["step_seconds"] = stats(times[warmup:])
    res["losses"] = losses
    if not args.no_profile:
        try:
            kernels, top = profile_torch(model, fn, opt, tokens, targets,
                                         device, args)
            res["categories"] = torch_categories(kernels)
            res["profiled_kernels"] = top
        except Exception as e:  # the profiler is optional to the benchmark
            res["categories_skipped"] = f"{type(e).__name__}: {e}"
    res["warmup"] = warmup
    res["optimizer_impl"] = impl
    res["peak_bytes"] = (torch.cuda.max_memory_allocated(device)
                         if device.type == "cuda" else None)
    res["peak_bytes_what"] = (
        "torch.cuda.max_memory_allocated over the run: params, grads, "
        "optimizer state, activations, temporaries"
        if device.type == "cuda" else "not measured on the CPU")
    if kind == "eager":
        res["compile_seconds"] = {"cold": None, "warm": None}
    else:
        med = res["step_seconds"]["median"]
        res["compile_mode"] = args.compile_mode
        # Compile time = the first call (trace + compile + one step) minus a
        # typical step. Warm: torch._dynamo.reset() and a fresh module, with
        # the kernel caches of this process and of disk now filled (what a
        # second run of the program sees).
        cold = times[0] - med
        warm = None
        model = opt = fn = None
        free(device)
        if not args.no_compile_warm:
            try:
                torch._dynamo.reset()
                model, opt, _ = fresh()
                fn = torch.compile(model, mode=mode)
                _, t = time_torch(model, fn, opt, tokens, targets, device,
                                  args.amp, args.clip, 1, 0)
                warm = max(t[0] - med, 0.0)
            except Exception as e:
                res["compile_warm_skipped"] = f"{type(e).__name__}: {e}"
        res["compile_seconds"] = {"cold": max(cold, 0.0), "warm": warm,
                                  "first_call_seconds": times[0]}
    model = opt = fn = None
    free(device)
    return res
