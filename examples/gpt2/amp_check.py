"""ctest e2e.gpt2_bf16_vs_f32: trains the tiny GPT-2 for 200 steps in f32
and with --amp=bf16 (the same seed, data and schedule) and checks that the
bf16 run's loss (mean of the last 20 steps, which evens out batch noise) is
within 2% of the f32 run's (the mixed-precision issue's bar).

    python3 amp_check.py GPT2_EXAMPLE OUT_DIR [STEPS]

Plain Python (no numpy): any python3 runs it.
"""
import csv
import os
import subprocess
import sys


def train(exe, out, steps, amp):
    cmd = [exe, "--steps", str(steps), "--print-every", "50", "--out", out]
    if amp:
        cmd += ["--amp", amp]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "loss.csv")) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != steps:
        sys.exit(f"FAIL: {out}/loss.csv has {len(rows)} rows, expected {steps}")
    return [float(r["loss"]) for r in rows]


def main():
    exe, out = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    f32 = train(exe, os.path.join(out, "f32"), steps, None)
    bf16 = train(exe, os.path.join(out, "bf16"), steps, "bf16")
    tail = min(20, steps)
    a = sum(f32[-tail:]) / tail
    b = sum(bf16[-tail:]) / tail
    rel = abs(b - a) / a
    print(f"loss, mean of the last {tail} of {steps} steps: f32 {a:.4f}, "
          f"bf16 {b:.4f}, relative difference {100 * rel:.3f}% (bound 2%)")
    if not (f32[-1] < f32[0] and bf16[-1] < bf16[0]):
        sys.exit("FAIL: a run did not learn (last loss >= first)")
    if bf16 == f32:
        sys.exit("FAIL: the bf16 run equals the f32 run: --amp had no effect")
    if rel > 0.02:
        sys.exit("FAIL: bf16 is more than 2% away from f32")


if __name__ == "__main__":
    main()
