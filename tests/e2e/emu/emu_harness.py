"""What the CUDA emulation tests (tests/e2e/cuda_emulation*.py) share: the
values a bf16 element holds, and building a generated kernel with a
harness against cuda_emu.h and running it."""
import functools
import glob
import hashlib
import os
import re
import shutil
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


# How every host program is compiled. No _FORTIFY_SOURCE: its longjmp check
# refuses a jump to another fiber's stack (cuda_emu.h switches fibers with
# _longjmp).
CXX_FLAGS = ["-std=c++20", "-O1", "-U_FORTIFY_SOURCE", "-pthread", "-w"]


@functools.lru_cache(maxsize=None)
def _pch_folder(cxx):
    """Where `cxx`'s precompiled emulator headers go, or None (no g++, or
    STEP_EMU_PCH_DIR unset: ctest sets it to a folder of the build tree).
    The folder is named by a key of the compiler, its flags and this
    folder's headers, so a changed header or compiler gets a new one; the
    other keys' folders are removed when a new one is made."""
    cache = os.environ.get("STEP_EMU_PCH_DIR")
    if not cache:
        return None
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True,
                                 text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    # g++ only: clang takes a PCH by -include-pch alone.
    if "Free Software Foundation" not in version:
        return None
    key = hashlib.sha256()
    for part in [cxx, version, *CXX_FLAGS]:
        key.update(part.encode() + b"\0")
    for h in sorted(glob.glob(os.path.join(EMU, "*.h"))):
        with open(h, "rb") as f:
            key.update(os.path.basename(h).encode() + b"\0" + f.read())
    folder = os.path.join(cache, key.hexdigest()[:24])
    if not os.path.isdir(folder):
        for old in glob.glob(os.path.join(cache, "*")):
            if old != folder:  # another test may be making it right now
                shutil.rmtree(old, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
    return folder


@functools.lru_cache(maxsize=None)
def _precompiled(cxx, header):
    """A folder whose `header`.gch g++ takes in place of `header` (cuda_emu.h
    or cuda_emu_sync.h: every harness includes one of them first), or None.
    Parsing cuda_emu.h and the standard headers under it is about half of a
    host program's compile (0.7 of 1.4 s), and the tests compile dozens.
    The .gch is written under a temporary name and renamed, so tests running
    at once never read half of one; where g++ finds it unusable it parses
    the header itself, so the program is the same either way."""
    folder = _pch_folder(cxx)
    if folder is None:
        return None
    gch = os.path.join(folder, header + ".gch")
    if not os.path.exists(gch):
        part = f"{gch}.{os.getpid()}.tmp"
        built = subprocess.run([cxx, *CXX_FLAGS, "-I", EMU, "-x", "c++-header",
                                os.path.join(EMU, header), "-o", part],
                               capture_output=True)
        if built.returncode != 0:
            if os.path.exists(part):
                os.remove(part)
            return None
        os.replace(part, gch)
    return folder


def build_and_run(cxx, work, kernel_source, harness):
    """Writes kernel.inc (the kernel, host_source'd) and main.cpp (the
    harness, which includes it) into `work`, compiles them with `cxx`
    against this folder's headers (the first of them precompiled, see
    _precompiled) and runs the program there."""
    with open(os.path.join(work, "kernel.inc"), "w") as f:
        f.write(host_source(kernel_source))
    with open(os.path.join(work, "main.cpp"), "w") as f:
        f.write(harness)
    exe = os.path.join(work, "kernel")
    first = re.search(r'^#include "(cuda_emu(?:_sync)?\.h)"', harness, re.M)
    pch = _precompiled(cxx, first.group(1)) if first else None
    subprocess.run([cxx, *CXX_FLAGS, *(["-I", pch] if pch else []),
                    "-I", EMU, "-I", work, os.path.join(work, "main.cpp"),
                    "-o", exe],
                   check=True)
    subprocess.run([exe], cwd=work, check=True)
