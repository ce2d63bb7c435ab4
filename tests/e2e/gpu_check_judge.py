#!/usr/bin/env python3
"""tools/dev/gpu-check.py's verdicts on made-up results: the rules above
its CASES, one at a time, so that a GPU session's pass or fail means what
they say. No GPU, no compiler: arrays drawn here."""
import importlib.util
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "gpu_check", os.path.join(ROOT, "tools", "dev", "gpu-check.py"))
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)

rng = np.random.default_rng(3)
f32 = {"w": rng.standard_normal(1000).astype(np.float32),
       "opt.m": rng.standard_normal(100).astype(np.float32)}
LOSSES = [2.0, 1.5, 1.25]
BF16 = ["--amp=bf16"]
failures = []


def moved(ref, tensor, by):
    """`ref` with `tensor` moved by `by` of its max in one element."""
    out = {k: v.copy() for k, v in ref.items()}
    out[tensor][7] += by * np.max(np.abs(ref[tensor]))
    return out


def expect(what, verdict, ok):
    if verdict["ok"] != ok:
        failures.append(f"{what}: ok={verdict['ok']}, expected {ok}: "
                        f"{verdict}")


# The CPU's bf16 result: Adam's moment 4% from the f32 step.
cpu = moved(f32, "opt.m", 0.04)
# f32 kind: any tensor or loss over the bound fails.
expect("f32 within", gc.judge(f32, moved(f32, "w", 5e-5), LOSSES, LOSSES,
                              "f32", [], 1e-4), True)
expect("f32 over", gc.judge(f32, moved(f32, "w", 5e-4), LOSSES, LOSSES,
                            "f32", [], 1e-4), False)
expect("f32 loss", gc.judge(f32, f32, LOSSES, [2.0, 1.5, 1.3], "f32", [],
                            1e-4), False)
# low kind: the GPU's moment 5% from the CPU's bf16 (over the 2e-2 bound)
# but on the far side of the f32 step, 1% from it: passes with the f32
# step, fails without it.
gpu_near = moved(f32, "opt.m", -0.01)
expect("low, near f32", gc.judge(cpu, gpu_near, LOSSES, LOSSES, "low",
                                 BF16, 2e-2, f32), True)
expect("low, no f32", gc.judge(cpu, gpu_near, LOSSES, LOSSES, "low", BF16,
                               2e-2), False)
# ... 9% from the f32 step, over 1.5x the CPU's 4%: fails.
gpu_far = moved(f32, "opt.m", 0.09)
expect("low, far from f32", gc.judge(cpu, gpu_far, LOSSES, LOSSES, "low",
                                     BF16, 2e-2, f32), False)
# Within the bound needs no f32 step; the losses and the fraction of
# param elements off still count.
expect("low, within", gc.judge(cpu, moved(cpu, "opt.m", 0.01), LOSSES,
                               LOSSES, "low", BF16, 2e-2), True)
expect("low, loss", gc.judge(cpu, cpu, LOSSES, [2.0, 1.5, 1.26], "low",
                             BF16, 2e-2, f32), False)
many = {k: v.copy() for k, v in cpu.items()}
many["w"][:20] += 0.01 * np.max(np.abs(cpu["w"]))  # 2% of elements off
expect("low, elements off", gc.judge(cpu, many, LOSSES, LOSSES, "low", BF16,
                                     2e-2, f32), False)

for f in failures:
    print("FAIL", f)
print(f"gpu_check_judge: {9 - len(failures)} of 9 verdicts as expected")
sys.exit(1 if failures else 0)
