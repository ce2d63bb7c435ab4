"""What the CUDA emulation tests (tests/e2e/cuda_emulation*.py) share: the
values a bf16 element holds, and building a generated kernel with a
harness against cuda_emu.h and running it."""
import glob
import os
import re
import subprocess
import sys

import numpy as np

EMU = os.path.dirname(os.path.abspath(__file__))


def rounded(a, dt):
    """The values an element of type `dt` ("f32"/"float", "bf16"/
    "__nv_bfloat16" or "f16"/"__half") holds: rounded to nearest even."""
    a = np.asarray(a, dtype=np.float32)
    if dt in ("f32", "float"):
        return a
    if dt in ("f16", "__half"):
        return a.astype(np.float16).astype(np.float32)
    u = a.reshape(-1).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).reshape(a.shape)


def dump_kernels(stepc, model, tmp, dump, flags=()):
    """stepc's CUDA sources of `model` compiled with `flags` (--no-kernels:
    no NVRTC) into `dump`, one <kernel>.cu each."""
    subprocess.run([stepc, model, *flags, "--no-kernels",
                    "--dump-kernels", dump, "-o", os.path.join(tmp, "x.step")],
                   check=True,
                   env=dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "c")))


def single_kernel(stepc, name, mlir, tmp, fuse):
    """Compiles the model text `mlir` (fused or --no-fuse), which must give
    exactly one kernel; returns (its file, its source, its block size, its
    name, its pointer parameters as (const or None, type, name))."""
    model = os.path.join(tmp, name + ".mlir")
    with open(model, "w") as f:
        f.write(mlir)
    dump = os.path.join(tmp, name + "_k")
    dump_kernels(stepc, model, tmp, dump, [] if fuse else ["--no-fuse"])
    kernels = sorted(glob.glob(os.path.join(dump, "*.cu")))
    if len(kernels) != 1:
        sys.exit(f"FAIL {name}: expected one kernel, got "
                 f"{[os.path.basename(k) for k in kernels]}")
    src = open(kernels[0]).read()
    sig = re.search(r"void __launch_bounds__\((\d+)(?:, \d+)?\) (\w+)\(([^)]*)\)", src)
    params = [re.match(r"(const )?(.+?) \*(?:__restrict__ )?(\w+)", p.strip())
              .groups() for p in sig.group(3).split(",")]
    return kernels[0], src, int(sig.group(1)), sig.group(2), params


def host_source(cuda_source):
    """A generated kernel's source for the host compiler: without the CUDA
    headers, which cuda_emu.h stands in for, and without the block-scope
    `extern __shared__ ... smem[]` (cuda_emu.h defines smem as one global
    array; dropping the declaration lets cuda_emu_sync.h make the other
    __shared__ arrays static)."""
    src = re.sub(r"#include <(cuda_bf16|cuda_fp16|mma)\.h>", "", cuda_source)
    return re.sub(r"extern __shared__[^;]*\bsmem\[\];", "", src)


def fill(template, values):
    """`template` with each whole-word KEY of `values` replaced."""
    for key, val in values.items():
        template = re.sub(r"\b%s\b" % key, str(val), template)
    return template


def build_and_run(cxx, work, kernel_source, harness):
    """Writes kernel.inc (the kernel, host_source'd) and main.cpp (the
    harness, which includes it) into `work`, compiles them with `cxx`
    against this folder's headers and runs the program there."""
    with open(os.path.join(work, "kernel.inc"), "w") as f:
        f.write(host_source(kernel_source))
    with open(os.path.join(work, "main.cpp"), "w") as f:
        f.write(harness)
    exe = os.path.join(work, "kernel")
    # No _FORTIFY_SOURCE: its longjmp check refuses a jump to another
    # fiber's stack (cuda_emu.h switches fibers with _longjmp).
    subprocess.run([cxx, "-std=c++20", "-O1", "-U_FORTIFY_SOURCE", "-pthread",
                    "-w", "-I", EMU,
                    "-I", work, os.path.join(work, "main.cpp"), "-o", exe],
                   check=True)
    subprocess.run([exe], cwd=work, check=True)
