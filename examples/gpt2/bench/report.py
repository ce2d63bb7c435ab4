"""The report of examples/gpt2/bench/bench.py: the device's name and bf16
peak, the model's FLOPs per token, tokens/s and MFU of a run, the markdown
table, the summary of a step-run trace's profiled step, and the parity
guard (StepJIT's first losses against PyTorch eager's)."""

import os
import platform
import re

import torch

# Dense bf16 tensor-core peak FLOP/s by device name (NVIDIA data sheets).
# The first matching substring wins; an unknown device gives no MFU unless
# --peak-flops is given. MFU is quoted against this bf16 peak also for
# --amp none runs (an f32 step cannot reach it: read it as "fraction of
# what the chip does at its best").
PEAK_BF16_FLOPS = [
    ("H100 PCIe", 756e12),
    ("H100 NVL", None),     # not on our list: pass --peak-flops
    ("H100", 989e12),       # H100 SXM
    ("H200", 989e12),
    ("A100", 312e12),
]

# Relative tolerance of the parity guard (first-step loss, StepJIT vs
# PyTorch eager). In f32 both sides compute the same math in different
# summation orders; their losses agree to ~1e-7 (e2e.gpt2_parity), 1e-4
# leaves a wide margin. On CUDA the matmul kernels differ more (cuBLASLt vs
# cuBLAS with their own split-K choices): 1e-3. bf16 rounds matmul operands
# to 8 mantissa bits on both sides, but not at the same places: 2e-2.
PARITY_TOL = {("none", "cpu"): 1e-4, ("none", "cuda"): 1e-3,
              ("bf16", "cpu"): 2e-2, ("bf16", "cuda"): 2e-2}

def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.MULTILINE)
            if m:
                name = m.group(1).strip()
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} cores, CPU)"


def peak_flops(device, name, override):
    if override:
        return override, "--peak-flops"
    if device.type != "cuda":
        return None, "no peak FLOP/s for a CPU: MFU is not computed"
    for key, flops in PEAK_BF16_FLOPS:
        if key in name:
            if flops is None:
                break
            return flops, f"{key}, bf16 dense tensor core (data sheet)"
    return None, f"unknown device '{name}': pass --peak-flops for MFU"


def model_flops_per_token(cfg, n_params, t=None):
    """Training FLOPs per token (PaLM, appendix B; nanoGPT's estimate_mfu):
    6 * N for the matmuls of forward (2N) and backward (4N), N the params
    without wpe (a lookup, no matmul; wte is counted: the tied head is a
    [C, V] matmul), plus 12 * L * C * T for attention's two T x T matmuls
    (q k^T and att v, forward and backward; counted over the full T x T as
    in the paper, although causal kernels skip half). t: the sequence
    length the step runs, when shorter than the context (a valid length in
    a padded bucket counts only its own tokens)."""
    n = n_params - cfg["context"] * cfg["width"]
    return 6 * n + 12 * cfg["layers"] * cfg["width"] * (t or cfg["context"])


def summarize(res, tokens_per_step, flops_per_token, peak):
    if "skipped" in res:
        return res
    med = res["step_seconds"]["median"]
    tps = tokens_per_step / med
    res["tokens_per_second"] = tps
    res["mfu"] = flops_per_token * tps / peak if peak else None
    return res


def rel(a, b):
    return abs(a - b) / abs(b) if b else abs(a - b)


def fmt_bytes(b):
    return "-" if b is None else f"{b / 2**20:,.1f} MiB"


def fmt_s(x, scale=1e3, unit=" ms"):
    if x is None:
        return "-"
    v = x * scale
    return f"{v:,.3f}{unit}" if v < 10 else f"{v:,.1f}{unit}"


def markdown(report):
    cfg, r = report["config"], report["results"]
    head = (f"### GPT-2 `{report['preset']}` on {report['device']['name']}, "
            f"{report['date']}\n\n"
            f"V={cfg['vocab']}, T={cfg['context']}, L={cfg['layers']}, "
            f"H={cfg['heads']}, C={cfg['width']}, B={cfg['batch']} "
            f"({report['n_params']:,} params), amp {report['amp']}, "
            f"backend {report['device']['backend']}, torch "
            f"{report['torch_version']}, `{report['optimizer']['stepc']}`"
            f"{', clip ' + str(report['optimizer']['clip']) if report['optimizer']['clip'] else ''}"
            f"{''.join(', `' + f + '`' for f in report.get('stepc_flags', []))}"
            f"{', valid length ' + str(report['valid_length']) if report.get('valid_length') else ''}, "
            f"{report['steps']} timed steps after {report['warmup']} untimed. "
            f"Spread = (max - min) / median; MFU against "
            f"{'-' if report['peak_flops'] is None else '%.0f TFLOP/s' % (report['peak_flops'] / 1e12)}"
            f" ({report['peak_flops_source']}); StepJIT's memory is planned "
            f"(arena + params + AdamW state + batch), PyTorch's measured "
            f"(max_memory_allocated).")
    rows = ["| run | step median | min | max | spread | tokens/s | MFU "
            "| peak memory | compile cold / warm |",
            "|---|---|---|---|---|---|---|---|---|"]
    for key, label in (("stepjit", "StepJIT"), ("torch_eager", "PyTorch eager"),
                       ("torch_compile", "torch.compile")):
        x = r[key]
        if "skipped" in x:
            rows.append(f"| {label} | skipped: {x['skipped']} "
                        f"| | | | | | | |")
            continue
        s, c = x["step_seconds"], x["compile_seconds"]
        mfu = "-" if x["mfu"] is None else f"{100 * x['mfu']:.1f}%"
        comp = ("-" if c["cold"] is None else
                f"{c['cold']:.2f} s / " +
                ("-" if c["warm"] is None else f"{c['warm']:.2f} s"))
        rows.append(f"| {label} | {fmt_s(s['median'])} | {fmt_s(s['min'])} "
                    f"| {fmt_s(s['max'])} | {100 * s['spread']:.1f}% "
                    f"| {x['tokens_per_second']:,.0f} | {mfu} "
                    f"| {fmt_bytes(x['peak_bytes'])} | {comp} |")
    p = report["parity"]
    if "skipped" in p:
        tail = f"First-step loss not compared ({p['skipped']})."
    else:
        tail = (f"First-step loss: StepJIT {p['stepjit_first_loss']!r} vs "
                f"PyTorch {p['torch_first_loss']!r}, relative error "
                f"{p['first_loss_rel_err']:.2e} (tolerance "
                f"{p['tolerance']:g}, {'ok' if p['ok'] else 'NOT OK'}).")
    sj = r["stepjit"]
    mem = sj.get("device_memory")
    if mem:
        tail += (f" StepJIT on the device: planned arena "
                 f"{fmt_bytes(mem['arena_bytes'])}, allocated "
                 f"{fmt_bytes(mem['allocated_bytes'])} (arena, params, "
                 f"AdamW state, batch, constants, cuBLASLt workspace), "
                 f"cuMemGetInfo's measure {fmt_bytes(mem['measured_bytes'])}.")
    if sj.get("compile_host"):
        tail += (f" StepJIT's step was compiled (stepc, kernels included) on "
                 f"{sj['compile_host']} and run there with step-run "
                 f"(bench.py --prepare / --prepared).")
    prof = sj.get("profiled_step")
    if prof:
        tail += (f"\n\nStepJIT's kernels taking the most time in one step "
                 f"timed op by op ({prof['ops']} ops, "
                 f"{prof['op_seconds'] * 1e3:.1f} ms in all), summed over "
                 f"their launches:\n\n| op | kernel | launches | time "
                 f"| GB/s | TFLOP/s |\n|---|---|---|---|---|---|\n")
        for k in prof["top"]:
            tail += (f"| {k['op']} | `{k['name']}` | {k['launches']} "
                     f"| {k['us']:,.0f} us | {k['GB_per_s'] or 0:,.0f} "
                     f"| {k['TFLOP_per_s'] or 0:,.1f} |\n")
    return (f"{head}\n\n" + "\n".join(rows) + f"\n\n{tail}"
            f"{category_table(report)}\n")


# Where a step's time goes, in the same words for StepJIT and PyTorch, so
# the two can be set side by side. A StepJIT op falls in the first category
# any of its IR ops (a fusion's `fused_ops`) names; a PyTorch kernel (or,
# on the CPU, an ATen op) in the first whose words its name holds. Kernel
# names are what the libraries call them (cuBLAS/CUTLASS GEMMs, FlashAttention,
# Inductor's `triton_*_fused_<aten ops>`), so the split is approximate: a
# kernel that fuses a layer norm into a residual add counts as layer norm
# on both sides; bias gradients, GELU and the parameters' bf16 casts are
# "other" on both (but matmul on StepJIT's side with stepc --gelu-epilogues,
# where cuBLASLt computes GELU, its gradient and the MLP's bias gradient,
# and with --bgrad-epilogues, where it computes the q/k/v bias gradient).
CATEGORIES = ("matmul", "attention", "loss", "layer norm", "optimizer",
              "embedding", "other")
_STEPJIT_WORDS = (
    ("attention", ("step.attention",)),
    ("matmul", ("step.matmul",)),
    ("loss", ("step.cross_entropy",)),
    ("layer norm", ("step.layer_norm", "step.rsqrt")),
    ("optimizer", ("_update", "step.check_finite")),
    ("embedding", ("step.embedding",)),
)
_TORCH_WORDS = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "attn")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "aten::mm",
                "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul")),
    ("loss", ("log_softmax", "nll_loss", "cross_entropy")),
    ("layer norm", ("layer_norm",)),
    ("optimizer", ("adam", "multi_tensor", "foreach", "_amp_", "norm_")),
    ("embedding", ("embedding", "index_put", "indexing_backward",
                   "index_select")),
)


def _category(names, words):
    low = [n.lower() for n in names]
    for cat, ws in words:
        if any(w in n for n in low for w in ws):
            return cat
    return "other"


def stepjit_categories(trace):
    """Seconds of the last step's ops in a step-run trace by category."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") in ("step", "input", "view"):
            continue
        a = e.get("args", {})
        names = [a.get("op") or ""] + [f.split(" @ ")[0]
                                       for f in a.get("fused_ops", [])]
        out[_category(names, _STEPJIT_WORDS)] += e["dur"] * 1e-6
    return out


def torch_categories(kernel_seconds):
    """{kernel or op name: seconds} of a profiled PyTorch step by
    category."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for name, sec in kernel_seconds.items():
        out[_category([name], _TORCH_WORDS)] += sec
    return out


def category_table(report):
    """Markdown: each category's time in one profiled step of every run
    that has one (StepJIT: its trace; PyTorch: torch.profiler)."""
    runs = [(label, report["results"][key].get("categories"))
            for key, label in (("stepjit", "StepJIT"),
                               ("torch_eager", "PyTorch eager"),
                               ("torch_compile", "torch.compile"))]
    runs = [(label, c) for label, c in runs if c]
    if not runs:
        return ""
    rows = ["| category | " + " | ".join(label for label, _ in runs) + " |",
            "|---|" + "---|" * len(runs)]
    for cat in CATEGORIES + ("total",):
        cells = []
        for _, c in runs:
            sec = sum(c.values()) if cat == "total" else c.get(cat, 0.0)
            cells.append(f"{sec * 1e3:,.2f} ms")
        rows.append(f"| {cat} | " + " | ".join(cells) + " |")
    what = ("the device's kernels" if report["device"]["backend"] == "cuda"
            else "each op's own CPU time, ATen's self time for PyTorch")
    return ("\n\nOne profiled step by category (" + what + "; the split "
            "by kernel name is approximate, report.py CATEGORIES):\n\n" +
            "\n".join(rows) + "\n")


def stats(times):
    """median, min, max of the timed steps and their spread (max - min) /
    median."""
    s = sorted(times)
    med = s[len(s) // 2]
    return {"median": med, "min": s[0], "max": s[-1],
            "spread": (s[-1] - s[0]) / med if med > 0 else None,
            "samples": len(s)}



def trace_ops(trace, n=15):
    """The last step's ops in a step-run trace (docs/profiling.md): their
    count, total seconds, and the n kernels (or library calls) taking the
    most time summed over their launches, with the bandwidth and FLOP/s
    they reached."""
    ops = [e for e in trace["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") not in ("step", "input",
                                                          "view")]
    by = {}
    for e in ops:
        a = e.get("args", {})
        k = by.setdefault((a.get("op"), e["name"]),
                          {"op": a.get("op"), "name": e["name"], "launches": 0,
                           "us": 0.0, "bytes": 0, "flops": 0})
        k["launches"] += 1
        k["us"] += e["dur"]
        k["bytes"] += a.get("bytes_read", 0) + a.get("bytes_written", 0)
        k["flops"] += a.get("flops", 0)
    top = sorted(by.values(), key=lambda k: -k["us"])[:n]
    for k in top:
        us = k["us"]
        k["GB_per_s"] = k["bytes"] / us / 1e3 if us > 0 else None
        k["TFLOP_per_s"] = k["flops"] / us / 1e6 if us > 0 else None
    return len(ops), sum(e["dur"] for e in ops) * 1e-6, top


def torch_parity(amp, backend, steps, stepjit, eager, interp_loss):
    """The parity guard: the first-step loss (forward of the initial
    params) of StepJIT's compiled step (step-run; else the reference
    interpreter's forward that --emit-model printed) against PyTorch
    eager's first step, and both last steps' losses (step `steps`: both
    sides ran that many on the same batch)."""
    parity_losses = stepjit["parity_losses"]
    torch_losses = eager["losses"]
    first_sj = parity_losses[0] if parity_losses else interp_loss
    tol = PARITY_TOL[(amp, backend)]
    first_err = rel(first_sj, torch_losses[0])
    per_step = [{"step": i + 1, "stepjit": a, "torch": torch_losses[i],
                 "rel_err": rel(a, torch_losses[i])}
                for i, a in enumerate(parity_losses) if i < len(torch_losses)]
    last_idx = steps - 1
    parity = {
        "stepjit_first_loss": first_sj,
        "stepjit_first_loss_from": ("step-run" if parity_losses
                                    else "reference interpreter (forward)"),
        "torch_first_loss": torch_losses[0],
        "first_loss_rel_err": first_err,
        "tolerance": tol,
        "ok": first_err <= tol,
        # gpt2-example's forward on the reference interpreter: always f32
        # (no AMP), so under --amp bf16 it differs from the first step's.
        "interpreter_forward_loss": interp_loss,
        "interpreter_rel_err": (None if interp_loss is None
                                else rel(interp_loss, torch_losses[0])),
        "steps": per_step,
        # step-bench and eager both ran W + N steps on the same batch: the
        # loss of the last one after W + N - 1 identical updates.
        "last_step": last_idx + 1,
        "stepjit_last_loss": stepjit.get("last_loss"),
        "torch_last_loss": torch_losses[last_idx],
        "last_loss_rel_err": (None if stepjit.get("last_loss") is None
                              else rel(stepjit["last_loss"],
                                       torch_losses[last_idx])),
    }
    return parity
