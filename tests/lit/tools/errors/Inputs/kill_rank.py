"""Kills one rank of an mpirun job once its output shows a line, and
reports how the job ended, for FileCheck.

    kill_rank.py --rank=R --after=TEXT [--timeout=S] -- mpirun ... CMD ...

Starts the job, reads its output (stdout and stderr merged) until a line
contains TEXT, then SIGKILLs the process of rank R: a descendant of this
mpirun whose environment has OMPI_COMM_WORLD_RANK=R (only processes this
script started are ever signalled). Prints "killed rank R after "TEXT"",
the last lines of the job's output, and "exit code: N". If the job runs
past S seconds in all it is killed and "timed out after S s" is printed:
the test then fails, as a run that hangs when a rank dies must.
"""
import argparse
import collections
import os
import signal
import subprocess
import sys
import threading
import time

from rc import report  # rc.py beside this script


def children(pid):
    """Every descendant of `pid`, from /proc."""
    parents = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents[ppid].append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in parents[todo.pop()]:
            out.append(c)
            todo.append(c)
    return out


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(var.split(b"=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    # The job prints a line per step: keep the last ones only.
    tail = collections.deque(maxlen=40)
    seen = threading.Event()

    def read():
        for line in iter(proc.stdout.readline, b""):
            text = line.decode(errors="replace")
            tail.append(text)
            if a.after in text:
                seen.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    deadline = time.monotonic() + a.timeout
    killed = False
    while not killed and proc.poll() is None and time.monotonic() < deadline:
        if seen.wait(0.1):
            for pid in children(proc.pid):
                if rank_of(pid) == a.rank:
                    os.kill(pid, signal.SIGKILL)
                    killed = True
            if not killed:
                time.sleep(0.1)
    if killed:
        print(f'killed rank {a.rank} after "{a.after}"')
    try:
        status = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        status = None
    reader.join(timeout=5)
    report("".join(tail), status, a.timeout)


if __name__ == "__main__":
    main()
