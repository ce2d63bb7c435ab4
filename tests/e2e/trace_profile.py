#!/usr/bin/env python3
"""step-run --trace and --profile on a small trained model (CPU backend).

The trace must validate against docs/trace.schema.json (the Chrome Trace
Event Format as step-run writes it, which Perfetto reads) and mean what it
says:
  - one "step K" event per step on the steps lane, in order, not
    overlapping, and one "read batch" event before each (three batch
    folders);
  - the last step's ops: exactly `plan_steps` of them, each inside its
    step's interval, in plan order (plan_step 0, 1, ...), each op on the
    compute lane;
  - the forward matmul x[4,3] @ w[3,5] is there with flops = 2*4*5*3 = 120
    (worked out here from the model's shapes, not by the code under test)
    and at least (4*3 + 3*5) * 4 bytes read;
  - a fused kernel lists its fused ops with their model lines;
  - the legacy keys (losses per step) are still there.
--profile prints a table whose rows are the labels of the trace's ops,
with calls a multiple of the two profiled steps (steps 2 and 3), and
shares of peak only when a peak is given.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema
import numpy as np

MODEL = """\
func.func @forward(%w: tensor<3x5xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<5xf32> {step.kind = "param", step.name = "b"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"},
                   %y: tensor<4x5xf32> {step.kind = "input", step.name = "y"})
    -> (tensor<f32> {step.name = "loss"}) {
  %h = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<5xf32> -> tensor<4x5xf32>
  %z = step.add %h, %bb : tensor<4x5xf32>
  %t = step.tanh %z : tensor<4x5xf32>
  %d = step.sub %t, %y : tensor<4x5xf32>
  %s = step.mul %d, %d : tensor<4x5xf32>
  %m = step.reduce_mean %s dims = [0, 1] : tensor<4x5xf32> -> tensor<f32>
  return %m : tensor<f32>
}
"""
STEPS = 3


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--step-run", required=True)
    ap.add_argument("--schema", required=True)
    a = ap.parse_args()
    with open(a.schema) as f:
        schema = json.load(f)

    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "model.mlir")
        with open(model, "w") as f:
            f.write(MODEL)
        artifact = os.path.join(work, "model.step")
        subprocess.run([a.stepc, model, "--train", "--no-kernels",
                        "--optimizer=adamw,lr=0.01", "-o", artifact],
                       check=True)
        rng = np.random.default_rng(3)
        params = os.path.join(work, "params")
        os.makedirs(params)
        np.save(os.path.join(params, "w.npy"),
                rng.standard_normal((3, 5)).astype(np.float32))
        np.save(os.path.join(params, "b.npy"), np.zeros(5, np.float32))
        inputs = os.path.join(work, "inputs")
        for k in range(STEPS):
            d = os.path.join(inputs, "%04d" % k)
            os.makedirs(d)
            np.save(os.path.join(d, "x.npy"),
                    rng.standard_normal((4, 3)).astype(np.float32))
            np.save(os.path.join(d, "y.npy"),
                    rng.standard_normal((4, 5)).astype(np.float32))

        trace_path = os.path.join(work, "trace.json")
        run = subprocess.run([a.step_run, artifact, "--params", params,
                              "--inputs", inputs, "--steps", str(STEPS),
                              "--backend=cpu", "--trace", trace_path,
                              "--profile"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            fail("step-run exited %d: %s" % (run.returncode, run.stderr))
        with open(trace_path) as f:
            trace = json.load(f)
        try:
            jsonschema.validate(trace, schema)
        except jsonschema.ValidationError as e:
            fail("the trace does not match the schema: %s" % e.message)

        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        lanes = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        for lane in ["steps", "input", "compute"]:
            if lane not in lanes:
                fail("no lane named %r: %r" % (lane, lanes))
        steps = [e for e in events if e["cat"] == "step"]
        if [e["name"] for e in steps] != ["step %d" % k
                                          for k in range(1, STEPS + 1)]:
            fail("step events: %r" % [e["name"] for e in steps])
        if any(e["tid"] != lanes["steps"] for e in steps):
            fail("a step event off the steps lane")
        for p, q in zip(steps, steps[1:]):
            if q["ts"] < p["ts"] + p["dur"] - 1e-3:
                fail("steps overlap: %r, %r" % (p, q))
        reads = [e for e in events if e["cat"] == "input"]
        if len(reads) != STEPS or any(e["tid"] != lanes["input"]
                                      for e in reads):
            fail("expected %d batch reads on the input lane, found %r"
                 % (STEPS, reads))
        for r, s in zip(reads, steps):
            if r["ts"] + r["dur"] > s["ts"] + 1e-3:
                fail("batch read %r ends after its step starts %r" % (r, s))

        last = steps[-1]
        ops = [e for e in events if e["cat"] not in ("step", "input")]
        if len(ops) != last["args"]["plan_steps"]:
            fail("%d op events for a plan of %d steps"
                 % (len(ops), last["args"]["plan_steps"]))
        if [e["args"]["plan_step"] for e in ops] != list(range(len(ops))):
            fail("op events not in plan order")
        start, end = last["ts"], last["ts"] + last["dur"]
        for e in ops:
            # Microsecond rounding of the printed times: 1e-3 us slack.
            if e["ts"] < start - 1e-3 or e["ts"] + e["dur"] > end + 1e-3:
                fail("op %r lies outside its step [%f, %f]" % (e, start, end))
            if e["tid"] != lanes["compute"]:
                fail("op %r off the compute lane" % e)
        forward = [e for e in ops if e["args"]["flops"] == 2 * 4 * 5 * 3
                   and e["cat"] == "matmul"]
        if not forward:
            fail("no matmul event with 120 FLOPs: %r"
                 % [(e["name"], e["args"]["flops"]) for e in ops])
        if forward[0]["args"]["bytes_read"] < (4 * 3 + 3 * 5) * 4:
            fail("the forward matmul reads %d bytes"
                 % forward[0]["args"]["bytes_read"])
        fused = [e for e in ops if "fused_ops" in e["args"]]
        if not fused:
            fail("no fused step in the trace")
        line = re.compile(re.escape(model) + r":\d+:\d+$")
        if not all(line.search(o) for e in fused
                   for o in e["args"]["fused_ops"] if "@" in o):
            fail("fused ops without their model lines: %r"
                 % fused[0]["args"]["fused_ops"])
        if not any("@" in o for e in fused for o in e["args"]["fused_ops"]):
            fail("no fused op names its model line")
        if [s["step"] for s in trace["steps"]] != list(range(1, STEPS + 1)):
            fail("legacy per-step records: %r" % trace["steps"])

        # --profile: the table's rows are the trace's labels; steps 2 and 3
        # were profiled, so every call count is even.
        table = run.stdout[run.stdout.index("profile:"):]
        if "profile: 2 step(s) on the cpu backend" not in table:
            fail("profile header: %r" % table)
        rows = [r for r in table.splitlines()[2:]
                if r and not r.startswith(("peaks:", "("))]
        labels = {e["name"] for e in ops if e["cat"] != "view"}
        seen = set()
        for r in rows:
            cols = r.split()
            label, calls = cols[0], int(cols[2])
            if calls % 2:
                fail("odd call count in %r" % r)
            seen.add(label)
        if not seen or not seen <= {l[:44] for l in labels}:
            fail("profile rows %r are not the trace's labels %r"
                 % (seen, labels))
        if "-" not in rows[0].split()[6]:
            fail("a share of peak without a peak: %r" % rows[0])
        peak = subprocess.run([a.step_run, artifact, "--params", params,
                               "--inputs", inputs, "--steps", "2",
                               "--backend=cpu", "--profile",
                               "--peak-bandwidth", "10",
                               "--peak-flops", "0.1"],
                              capture_output=True, text=True, check=True)
        first = peak.stdout.splitlines()
        first = first[[i for i, r in enumerate(first)
                       if r.startswith("profile:")][0] + 2]
        if not re.search(r"\d%", first.split()[6]):
            fail("no share of the given peak: %r" % first)
    print("trace_profile: OK (%d op events, idle between steps %.3f)"
          % (len(ops), trace["idle_between_steps"]))


if __name__ == "__main__":
    main()
