#!/usr/bin/env python3
"""Ranks started from the environment (no MPI) run sharded steps over TCP.

Two step-run processes get STEP_RANK, STEP_WORLD_SIZE, STEP_MASTER_ADDR and
STEP_MASTER_PORT (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT for
the second case) and run the MLP's zero2 step (AdamW, clipping) for three
steps, each on its rows of the global batch of 8:
  - losses, params and optimizer state agree with one process on the
    global batch within 1e-5 normwise (shard_parity's bound);
  - a sharded run checkpointed after step 2 (collective Session::save) and
    resumed ends bit-identical to the three-step run;
  - a rank killed with SIGKILL mid-run ends the other rank too: it exits 1
    naming the rank that closed its connection, instead of waiting;
  - tensor parallelism on a 2 x 2 mesh (tp:2 on four ranks), whose group
    collectives run on TCP's lockstep groups, agrees with one process
    within 1e-5 too.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from runtime_parity import load, run
from shard_parity import ADAMW, write_batches

N = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd, names=("STEP_RANK", "STEP_WORLD_SIZE", "STEP_MASTER_ADDR",
                       "STEP_MASTER_PORT"), n=N):
    port = str(free_port())
    procs = []
    for r in range(n):
        env = dict(os.environ)
        env.update(zip(names, [str(r), str(n), "127.0.0.1", port]))
        env["STEP_CONNECT_TIMEOUT"] = "60"
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs, what):
    outs = [p.communicate(timeout=300) for p in procs]
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            sys.exit(f"FAIL {what}: rank {r} exited {p.returncode}:\n{out}{err}")
    return [float(v) for v in
            re.findall(r"^step \d+ loss = (\S+)$", outs[0][0], re.M)]


def same(a, b):
    return set(a) == set(b) and all(a[k].tobytes() == b[k].tobytes()
                                    for k in a)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for tool in ["stepc", "step-run", "mlp-example"]:
        ap.add_argument("--" + tool, required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="stepjit-env-launch-")
    try:
        ref_dir, loc_dir = os.path.join(work, "ref"), os.path.join(work, "loc")
        for d, batch in [(ref_dir, 8), (loc_dir, 8 // N)]:
            run([a.mlp_example, "--in", "12", "--hidden1", "16", "--hidden2",
                 "16", "--classes", "5", "--batch", str(batch), "--out", d])
        feed = os.path.join(work, "batches")
        write_batches(load(os.path.join(ref_dir, "inputs")), feed,
                      np.random.default_rng(7))
        params = os.path.join(ref_dir, "params")
        ref_step, dp_step = (os.path.join(work, f) for f in
                             ("ref.step", "zero2.step"))
        run([a.stepc, os.path.join(ref_dir, "model.mlir"), "--train", *ADAMW,
             "--no-kernels", "-o", ref_step])
        run([a.stepc, os.path.join(loc_dir, "model.mlir"), "--train", *ADAMW,
             "--no-kernels", "--shard=zero2", f"--world-size={N}", "-o",
             dp_step])

        def cmd(artifact, out, steps=3, *extra):
            return [a.step_run, artifact, "--params", params, "--inputs", feed,
                    "--steps", str(steps), "--backend=cpu", "--out", out,
                    *extra]

        ref_out = os.path.join(work, "ref_out")
        ref_losses = [float(v) for v in re.findall(
            r"^step \d+ loss = (\S+)$", run(cmd(ref_step, ref_out)), re.M)]
        want = load(ref_out)

        def check(losses, out, what):
            got = load(out)
            if set(got) != set(want) or len(losses) != 3 or any(
                    abs(x - y) > 1e-5 * abs(y)
                    for x, y in zip(losses, ref_losses)):
                sys.exit(f"FAIL {what}: losses {losses}, one process "
                         f"{ref_losses}; tensors {sorted(got)}")
            worst = max(np.linalg.norm(got[k].astype(np.float64) - w) /
                        max(np.linalg.norm(w.astype(np.float64)), 1e-30)
                        for k, w in want.items())
            if worst > 1e-5:
                sys.exit(f"FAIL {what}: worst rel. err {worst:.3g} > 1e-5")
            print(f"{what} over TCP, losses {losses}, worst rel. err "
                  f"{worst:.3g}")

        for names in [None, ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                             "MASTER_PORT")]:
            out = os.path.join(work, "env_out")
            procs = launch(cmd(dp_step, out), *([names] if names else []))
            check(finish(procs, "env launch"), out,
                  f"{'torchrun' if names else 'STEP_'} variables: zero2 on "
                  f"{N} ranks")
        straight = load(out)

        # tp:2 on 4 ranks: two groups of two, traced for a group's rows.
        tp_dir, tp_step = (os.path.join(work, f) for f in ("tp", "tp.step"))
        run([a.mlp_example, "--in", "12", "--hidden1", "16", "--hidden2",
             "16", "--classes", "5", "--batch", "4", "--out", tp_dir])
        run([a.stepc, os.path.join(tp_dir, "model.mlir"), "--train", *ADAMW,
             "--no-kernels", "--shard=tp:2", "--world-size=4", "-o",
             tp_step])
        out = os.path.join(work, "tp_out")
        check(finish(launch(cmd(tp_step, out), n=4), "tp mesh"), out,
              "tp:2 on a 2 x 2 mesh of 4 ranks")

        # Checkpointed after step 2 by both ranks, then resumed to step 3.
        ckpt = os.path.join(work, "ckpt")
        finish(launch(cmd(dp_step, os.path.join(work, "o2"), 2,
                          "--checkpoint", ckpt)), "checkpointing run")
        resumed = os.path.join(work, "resumed")
        tail = finish(launch(cmd(dp_step, resumed, 3, "--checkpoint", ckpt,
                                 "--resume")), "resumed run")
        if len(tail) != 1 or not same(load(resumed), straight):
            sys.exit(f"FAIL: the resumed sharded run printed {tail} and "
                     f"differs from the straight one")
        print("a sharded checkpoint after step 2, resumed: bit-identical")

        # A rank dies: the other stops with a message, it does not hang.
        procs = launch(cmd(dp_step, os.path.join(work, "long"), 100000))
        time.sleep(2)
        procs[1].send_signal(signal.SIGKILL)
        try:
            out, err = procs[0].communicate(timeout=60)
        except subprocess.TimeoutExpired:
            procs[0].kill()
            sys.exit("FAIL: rank 0 still runs 60 s after rank 1 was killed")
        procs[1].wait()
        if procs[0].returncode != 1 or \
                "rank 1 closed its connection" not in err:
            sys.exit(f"FAIL: rank 0 exited {procs[0].returncode} after rank "
                     f"1 died:\n{err}")
        print("rank 1 killed: rank 0 stopped with: " + err.strip())
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
