#!/usr/bin/env python3
"""Instructions per loop of generated kernels, from their SASS: what a
kernel change does to the work an element costs, without a GPU.

For each .cu file (stepc --dump-kernels DIR writes them) compiles a cubin
with nvcc for the given architecture and stepc's code options (-fmad=false),
disassembles it with cuobjdump -sass and prints, per kernel entry point,
ptxas's registers and spills, then every loop (a backward branch: its
address range) with its instruction count and the counts of chosen opcodes
(MUFU.EX2, global loads and stores by width). Compare two builds' kernels
by running it on each dump.

The CUDA toolkit here has nvcc and ptxas but may lack cuobjdump; NVIDIA
ships it on PyPI (`pip install nvidia-cuda-cuobjdump`, the binary under
site-packages/nvidia/cu13/bin), which --cuobjdump points to.

Usage: sass-loops.py [--arch sm_90] [--cuobjdump PATH] [--nvcc PATH]
                     FILE.cu [FILE.cu ...]
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

OPCODES = ("MUFU.EX2", "LDG", "STG", "LDS", "STS", "BAR", "SHFL", "HMMA",
           "ATOM", "RED", "REDG", "CCTL")


def instructions(sass):
    """[(kernel, address, text)] of a cuobjdump -sass listing."""
    out, kernel = [], None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            kernel = m.group(1)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and kernel:
            out.append((kernel, int(m.group(1), 16), m.group(2)))
    return out


def opcode(text):
    """The instruction's opcode with its modifiers, its predicate dropped."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def loops(code):
    """(start, end, body) of every backward branch in one kernel's code."""
    at = {a: i for i, (a, _) in enumerate(code)}
    for i, (a, text) in enumerate(code):
        m = re.search(r"\bBRA\s+(?:`\(.*?\)\s*)?0x([0-9a-f]+)", text)
        if m:
            target = int(m.group(1), 16)
            if target <= a and target in at:
                yield target, a, [t for _, t in code[at[target]:i + 1]]


def summary(body):
    counts = collections.Counter()
    for text in body:
        op = opcode(text)
        for want in OPCODES:
            if op == want or op.startswith(want + "."):
                counts[op] += 1
    return ", ".join(f"{op} {n}" for op, n in sorted(counts.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvcc", default=shutil.which("nvcc")
                    or "/usr/local/cuda/bin/nvcc")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump")
                    or "cuobjdump")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    if not (os.path.exists(args.cuobjdump) or shutil.which(args.cuobjdump)):
        sys.exit(f"sass-loops: no cuobjdump at '{args.cuobjdump}': install "
                 "it (pip install nvidia-cuda-cuobjdump) and pass --cuobjdump")
    with tempfile.TemporaryDirectory(prefix="stepjit-sass-") as tmp:
        for path in args.files:
            cubin = os.path.join(tmp, "k.cubin")
            built = subprocess.run(
                [args.nvcc, "-cubin", "-arch=" + args.arch, "-fmad=false",
                 "-std=c++17", "-Xptxas", "-v", path, "-o", cubin],
                capture_output=True, text=True)
            if built.returncode != 0:
                sys.exit(f"sass-loops: nvcc failed on {path}:\n"
                         f"{built.stderr}")
            usage = {}
            kernel = None
            for line in built.stderr.splitlines():
                m = re.search(r"Compiling entry function '(\w+)'", line)
                kernel = m.group(1) if m else kernel
                m = re.search(r"Used (\d+) registers", line)
                if m and kernel:
                    usage[kernel] = m.group(1) + " registers"
                m = re.search(r"(\d+) bytes spill stores", line)
                if m and kernel and m.group(1) != "0":
                    usage[kernel + "/spill"] = m.group(1) + " B spilled"
            sass = subprocess.run([args.cuobjdump, "-sass", cubin],
                                  capture_output=True, text=True, check=True)
            by_kernel = collections.defaultdict(list)
            for k, a, text in instructions(sass.stdout):
                by_kernel[k].append((a, text))
            print(f"== {path} ({args.arch})")
            for k, code in sorted(by_kernel.items()):
                extra = usage.get(k + "/spill", "")
                print(f"  {k}: {len(code)} instructions, "
                      f"{usage.get(k, '? registers')}"
                      + (f", {extra}" if extra else ""))
                for start, end, body in loops(code):
                    print(f"    loop {start:#x}-{end:#x}: {len(body)} "
                          f"instructions; {summary(body)}")


if __name__ == "__main__":
    main()
