#!/usr/bin/env python3
"""The order in which attention_grad's register-level kernels take tiles.

Each launch is a grid-stride loop over slices x tiles work items; the first
statements of its body place item w: `b`, the slice, and the tile's row
(`i0` for the query tiles, last first; `j0` for the key tiles, first
first: the heaviest causal tiles first). When the rows those tiles stream
(K and V, or Q and G) of every slice do not fit kAttentionL2Bytes (24 MiB,
compiler/codegen/AttentionKernels.h), the slices go in groups that do, so
the blocks running together share them in L2 (docs/codegen.md). No GPU is
needed: stepc --dump-kernels writes the CUDA C++ of one attention_grad,
this test cuts the placing statements out of every such loop, compiles
them into a host program with the host compiler and runs them over every
w. It checks that every (slice, tile) is taken exactly once, that a group
holds only its own consecutive slices, that within a group the tiles go
in the kernel's order (query tiles decreasing, key tiles increasing), and
that GPT-2 124M's B = 8 shape (96 slices, exactly the 24 MiB) keeps the
plain walk (b = w % slices). Shapes: 256 slices (groups with a partial
last one), with saved dS (whose dq launch streams K only), and Tq != Tk,
Dv != D (each launch's own rows), and B = 8 with atomic dq (whose dk/dv
launch also adds into the slices' f32 dq accumulator: groups of 48). The loop bodies themselves run on the
emulator in codegen.cuda_emulation.

Usage: attention_item_order.py --stepc STEPC --cxx CXX
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

LOOP = re.compile(
    r"for \(long long w = blockIdx\.x; w < \(long long\)(\d+) \* (\d+);\s*"
    r"w \+= gridDim\.x\) \{\n(.*?)\n(\s*const int ([ij])0 = [^\n]*;)",
    re.S)


def model(b, h, tq, tk, d, dv, form):
    """attention_grad of q [b, h, tq, d], k [.., tk, d], v [.., tk, dv], from
    the saved output and log-sum-exp; causal where tq == tk; `form` the
    gradient's attribute (saved_ds, atomic_dq) or None."""
    q, k = f"tensor<{b}x{h}x{tq}x{d}xbf16>", f"tensor<{b}x{h}x{tk}x{d}xbf16>"
    v, o = f"tensor<{b}x{h}x{tk}x{dv}xbf16>", f"tensor<{b}x{h}x{tq}x{dv}xbf16>"
    lse = f"tensor<{b}x{h}x{tq}xf32>"
    args = ", ".join(f'%{n}: {t} {{step.kind = "input", step.name = "{n}"}}'
                     for n, t in (("q", q), ("k", k), ("v", v), ("g", o),
                                  ("o", o), ("l", lse)))
    causal = " causal" if tq == tk else ""
    attr = f" {{step.{form}}}" if form else ""
    return f"""module {{
  func.func @forward({args}) -> ({q}, {k}, {v}) {{
    %dq, %dk, %dv = step.attention_grad %q, %k, %v, %g saved(%o, %l : {o}, {lse}){causal}{attr} : {q}, {k}, {v}, {o} -> {q}, {k}, {v}
    return %dq, %dk, %dv : {q}, {k}, {v}
  }}
}}
"""


def loops(args, work, tag, shape, form=None):
    """(slices, tiles, placing statements, tile line, 'i' or 'j') of every
    tile loop in the kernels stepc writes for attention_grad of `shape`."""
    path = os.path.join(work, tag + ".mlir")
    with open(path, "w") as f:
        f.write(model(*shape, form))
    dump = os.path.join(work, tag)
    subprocess.run([args.stepc, path, "-o", os.path.join(work, tag + ".step"),
                    "--arch", "sm_80", "--dump-kernels", dump], check=True)
    found = []
    for name in sorted(os.listdir(dump)):
        with open(os.path.join(dump, name)) as f:
            src = f.read()
        if "_dkdv(" not in src:
            continue
        for m in LOOP.finditer(src):
            body = [ln for ln in m.group(3).split("\n")
                    if not ln.strip().startswith("//")]
            found.append((int(m.group(1)), int(m.group(2)), "\n".join(body),
                          m.group(4), m.group(5)))
    return found


def check_program(found):
    """A host program running each loop's placing statements over every w."""
    parts = ["#include <cstdio>", "#include <vector>", "int main() {",
             "  int bad = 0;"]
    for n, (slices, tiles, body, tile_line, which) in enumerate(found):
        group = re.search(r"ws_ = wg_ \* (\d+)", body)
        g = int(group.group(1)) if group else slices
        step = -1 if which == "i" else 1
        parts.append(f"""  {{ // loop {n}: {slices} slices x {tiles} tiles, groups of {g}
    std::vector<int> seen({slices} * {tiles}, 0);
    long long last = -1;
    for (long long w = 0; w < {slices}LL * {tiles}; ++w) {{
      const int warp = 0, g = 0; (void)warp; (void)g;
{body}
{tile_line}
      const long long tile = {which}0 / 64, grp = w / ({g}LL * {tiles});
      if (b < 0 || b >= {slices} || tile < 0 || tile >= {tiles}) {{
        std::printf("loop {n}: w %lld gives slice %lld tile %lld\\n", w, b, tile);
        ++bad; break;
      }}
      ++seen[b * {tiles} + tile];
      if (b / {g} != grp) {{
        std::printf("loop {n}: w %lld in group %lld takes slice %lld\\n", w, grp, b);
        ++bad; break;
      }}
      // Within a group the tiles go in the kernel's order.
      long long rank = {f"{tiles} - 1 - tile" if step < 0 else "tile"};
      long long first = w % ({g}LL * {tiles}) == 0;
      if (!first && rank < last) {{
        std::printf("loop {n}: w %lld goes back to tile %lld\\n", w, tile);
        ++bad; break;
      }}
      last = rank;
    }}
    for (long long i = 0; i < {slices}LL * {tiles}; ++i)
      if (seen[i] != 1) {{
        std::printf("loop {n}: slice %lld tile %lld taken %d times\\n",
                    i / {tiles}, i % {tiles}, seen[i]);
        ++bad; break;
      }}
  }}""")
    parts += ['  std::printf("%d loop(s) checked, %d bad\\n", ' + str(len(found))
              + ", bad);", "  return bad != 0;", "}"]
    return "\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stepc", required=True)
    ap.add_argument("--cxx", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        # 256 slices of T = 1024, D = 64: Q and G (K and V) rows 256 KiB a
        # slice, groups of 96 (96, 96, 64); with saved dS the dq launch
        # streams K only, 128 KiB a slice: groups of 192 (192, 64).
        big = loops(args, work, "big", (64, 4, 1024, 1024, 64, 64), False)
        big_ds = loops(args, work, "big_ds", (64, 4, 1024, 1024, 64, 64),
                       "saved_ds")
        # Tq 512, Tk 1024, Dv 32 (not causal): launch 1 streams K and V,
        # 1024 x 96 x 2 bytes a slice (groups of 128), the dk/dv launch Q
        # and G, 512 x 96 x 2 (256 fit: the plain walk).
        wide = loops(args, work, "wide", (64, 4, 512, 1024, 64, 32), False)
        # GPT-2 124M at B = 8: 96 slices of exactly 256 KiB fill the 24 MiB:
        # the plain walk, kernels byte for byte as before grouping.
        gpt2 = loops(args, work, "gpt2_b8", (8, 12, 1024, 1024, 64, 64))
        # Atomic dq: one tile loop (the dk/dv launch; its statistics and
        # rounding launches walk rows), which also adds into each slice's
        # f32 dq accumulator, 1024 x 64 x 4 bytes: 512 KiB a slice, so
        # B = 8 goes in two groups of 48.
        gpt2_adq = loops(args, work, "gpt2_b8_adq",
                         (8, 12, 1024, 1024, 64, 64), "atomic_dq")
        expect = [("big", big, [96, 96], 256, 2),
                  ("big_ds", big_ds, [96, 192], 256, 2),
                  ("wide", wide, [128], 256, 2), ("gpt2_b8", gpt2, [], 96, 2),
                  ("gpt2_b8_adq", gpt2_adq, [48], 96, 1)]
        for tag, found, groups, slices, nloops in expect:
            got = sorted(int(m.group(1)) for _, _, body, _, _ in found
                         for m in [re.search(r"ws_ = wg_ \* (\d+)", body)]
                         if m)
            if len(found) != nloops or got != sorted(groups):
                sys.exit(f"FAIL {tag}: {len(found)} tile loops, groups {got}, "
                         f"expected {nloops} loops, groups {sorted(groups)}")
            plain = [body for _, _, body, _, _ in found if "wg_" not in body]
            if any(f"b = w % {slices};" not in body for body in plain):
                sys.exit(f"FAIL {tag}: an ungrouped walk is not "
                         f"b = w % {slices}")
        src = os.path.join(work, "order.cpp")
        with open(src, "w") as f:
            f.write(check_program(big + big_ds + wide + gpt2 + gpt2_adq))
        exe = os.path.join(work, "order")
        subprocess.run([args.cxx, "-std=c++17", "-O1", src, "-o", exe],
                       check=True)
        r = subprocess.run([exe], capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            sys.exit("FAIL: " + r.stdout.strip().split("\n")[0])
    print("PASS attention_item_order")


if __name__ == "__main__":
    main()
