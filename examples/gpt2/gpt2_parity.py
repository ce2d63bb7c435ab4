#!/usr/bin/env python3
"""PyTorch parity of the traced GPT-2 (ctest e2e.gpt2_parity).

1. Runs `gpt2-example --emit-model DIR` (a few size/seed settings): the
   model, its initial params and one batch of byte windows of the text.
2. Checks the params: GPT-2's names and shapes, and their initialization
   (zeros/ones where exact, the standard deviation of the normal ones).
3. Rebuilds the model in plain PyTorch from the written files (written
   independently of examples/gpt2: explicit causal attention, GPT-2's Conv1D
   layout) and compares its loss with the one gpt2-example printed (the
   in-process reference interpreter).
4. Runs `step-interp model.mlir --inputs <params + inputs> --out ...` and
   checks it prints and writes the same loss, bit for bit.
5. Runs step-interp again with random params of a larger scale and compares
   with PyTorch: at GPT-2's init (std 0.02, residual branches nearly zero)
   the loss is ~ln(V) whatever the blocks compute, so mistakes inside them
   (a non-causal mask, erf GELU, k and v swapped) hide below the tolerance.

Usage: gpt2_parity.py --gpt2-example PATH --step-interp PATH
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

# Relative tolerance of the loss against PyTorch. Both sides compute in f32
# with different summation orders (OpenBLAS sgemm vs PyTorch's kernels, the
# softmax of attention, layer-norm statistics, the log-sum-exp of the loss);
# through a few blocks that stays around 1e-7 relative. A semantic error (a
# missing residual, a wrong head split, q/k/v columns swapped, an untied or
# transposed LM head, a non-causal mask, erf GELU for tanh) moves the loss by
# far more than 1e-4, so 1e-5 keeps a wide margin on both sides.
REL_TOL = 1e-5

# (vocab, context, layers, heads, width, batch, seed): the default tiny
# model, and an odd-sized one so that no size is accidentally symmetric
# (vocab 131 still covers the ASCII bytes of the shipped text).
CONFIGS = [
    (256, 32, 2, 2, 32, 8, 0),
    (131, 7, 3, 3, 12, 3, 42),
]


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}\n"
                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout


def printed_loss(stdout):
    m = re.search(r"^loss = (\S+)$", stdout, re.MULTILINE)
    if not m:
        sys.exit(f"FAIL: no 'loss = ...' line in:\n{stdout}")
    return float(m.group(1))


def load_dir(folder):
    return {f[:-4]: torch.from_numpy(np.load(os.path.join(folder, f)))
            for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def expected_params(V, T, L, C):
    """name -> (shape, init): init is "zeros", "ones" or a normal's std."""
    proj = 0.02 / math.sqrt(2 * L)
    p = {"wte": ((V, C), 0.02), "wpe": ((T, C), 0.02),
         "ln_f.weight": ((C,), "ones"), "ln_f.bias": ((C,), "zeros")}
    for i in range(L):
        for ln in ("ln_1", "ln_2"):
            p[f"h.{i}.{ln}.weight"] = ((C,), "ones")
            p[f"h.{i}.{ln}.bias"] = ((C,), "zeros")
        for name, n_in, n_out, std in (("attn.c_attn", C, 3 * C, 0.02),
                                       ("attn.c_proj", C, C, proj),
                                       ("mlp.c_fc", C, 4 * C, 0.02),
                                       ("mlp.c_proj", 4 * C, C, proj)):
            p[f"h.{i}.{name}.weight"] = ((n_in, n_out), std)
            p[f"h.{i}.{name}.bias"] = ((n_out,), "zeros")
    return p


def check_params(cfg, params):
    V, T, L, H, C, B, seed = cfg
    want = expected_params(V, T, L, C)
    if set(params) != set(want):
        sys.exit(f"FAIL: {cfg}: params differ: missing "
                 f"{sorted(set(want) - set(params))}, unexpected "
                 f"{sorted(set(params) - set(want))}")
    for name, (shape, init) in want.items():
        t = params[name]
        if tuple(t.shape) != shape or t.dtype != torch.float32:
            sys.exit(f"FAIL: {cfg}: {name} is {t.dtype} {tuple(t.shape)}, "
                     f"expected float32 {shape}")
        if init == "zeros" or init == "ones":
            if not torch.equal(t, torch.full(shape, float(init == "ones"))):
                sys.exit(f"FAIL: {cfg}: {name} is not all {init}")
        elif t.numel() >= 256:
            # The sample std of n normals is within a few 1/sqrt(2n) of the
            # true one; 20% is > 6 such errors for n >= 256, and far below
            # the factor sqrt(2 L) that separates the c_proj init.
            got = t.std().item()
            if abs(got - init) > 0.2 * init or abs(t.mean().item()) > init:
                sys.exit(f"FAIL: {cfg}: {name}: std {got:.4g} (mean "
                         f"{t.mean().item():.3g}), expected N(0, {init:.4g})")


def torch_loss(P, tokens, targets, heads):
    """GPT-2 as a PyTorch user writes it, from the param tensors."""
    B, T = tokens.shape
    V, C = P["wte"].shape
    D = C // heads
    layers = sum(1 for n in P if n.endswith(".ln_1.weight"))

    def ln(x, name):
        return F.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"],
                            eps=1e-5)

    def conv1d(x, name):  # GPT-2's Conv1D: weight stored [in, out]
        return torch.addmm(P[name + ".bias"], x.reshape(-1, x.shape[-1]),
                           P[name + ".weight"]).view(*x.shape[:-1], -1)

    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = P["wte"][tokens] + P["wpe"][torch.arange(T)]
    for i in range(layers):
        h = f"h.{i}"
        q, k, v = conv1d(ln(x, h + ".ln_1"), h + ".attn.c_attn").split(C, 2)
        q, k, v = (z.view(B, T, heads, D).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + conv1d(y, h + ".attn.c_proj")
        m = F.gelu(conv1d(ln(x, h + ".ln_2"), h + ".mlp.c_fc"),
                   approximate="tanh")
        x = x + conv1d(m, h + ".mlp.c_proj")
    logits = ln(x, "ln_f") @ P["wte"].t()  # LM head tied to wte
    return F.cross_entropy(logits.view(-1, V), targets.view(-1)).item()


def stress_params(params, seed):
    """Random params where every block matters: weights N(0, 0.3), biases
    N(0, 0.3), layer-norm weights 1 + N(0, 0.3)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, t in params.items():
        v = rng.normal(0.0, 0.3, size=tuple(t.shape))
        if name.endswith(".weight") and t.dim() == 1:
            v += 1.0
        out[name] = v.astype(np.float32)
    return out


def interp_loss(interp, model, folder, res):
    stdout = run([interp, model, "--inputs", folder, "--out", res])
    return printed_loss(stdout), float(np.load(os.path.join(res, "loss.npy")))


def compare(what, ours, ref):
    rel = abs(ours - ref) / abs(ref)
    print(f"{what}: interpreter {ours!r}, torch {ref!r}, rel err {rel:.2e}")
    if not rel <= REL_TOL:
        sys.exit(f"FAIL: {what}: loss {ours} vs torch {ref}: relative error "
                 f"{rel:.3e} > {REL_TOL}")


def check_ir(cfg, text):
    """Choices too small to move the loss beyond float noise, read from the
    model file: tanh GELU (it differs from erf GELU by < 5e-4) and causal
    attention in each block, and the LM head as one transpose_b matmul."""
    L = cfg[2]
    counts = {
        "tanh gelu": (r"step\.gelu \S+ approximate tanh :", L),
        "gelu": (r"step\.gelu ", L),
        "causal attention": (r"step\.attention [^:]* causal", L),
        "attention": (r"step\.attention ", L),
        "tied head": (r"step\.matmul [^:]* transpose_b :", 1),
    }
    for what, (pattern, want) in counts.items():
        got = len(re.findall(pattern, text))
        if got != want:
            sys.exit(f"FAIL: {cfg}: {got} x {what} in model.mlir, "
                     f"expected {want}")


def check_config(gpt2, interp, cfg, tmp):
    V, T, L, H, C, B, seed = cfg
    out = os.path.join(tmp, f"gpt2_{seed}")
    stdout = run([gpt2, "--vocab", str(V), "--context", str(T), "--layers",
                  str(L), "--heads", str(H), "--width", str(C), "--batch",
                  str(B), "--seed", str(seed), "--emit-model", out])
    ours = printed_loss(stdout)

    params = load_dir(os.path.join(out, "params"))
    inputs = load_dir(os.path.join(out, "inputs"))
    check_params(cfg, params)
    with open(os.path.join(out, "model.mlir")) as f:
        check_ir(cfg, f.read())
    tokens, targets = inputs["tokens"], inputs["targets"]
    assert tokens.dtype == torch.int64 and tokens.shape == (B, T)
    assert targets.dtype == torch.int64 and targets.shape == (B, T)
    # Targets are the tokens shifted by one within each window.
    assert torch.equal(tokens[:, 1:], targets[:, :-1])

    compare(f"{cfg} init", ours, torch_loss(params, tokens, targets, H))

    # step-interp reads one folder with a <step.name>.npy per argument.
    model = os.path.join(out, "model.mlir")
    merged = os.path.join(tmp, f"args_{seed}")
    os.makedirs(merged)
    for sub in ("params", "inputs"):
        for f in os.listdir(os.path.join(out, sub)):
            shutil.copy(os.path.join(out, sub, f), merged)
    tool, written = interp_loss(interp, model, merged,
                                os.path.join(tmp, f"res_{seed}"))
    # Same IR (after a print/parse round trip), same kernels, same inputs:
    # the reference interpreter is deterministic, so the bits must match.
    if not (tool == ours and written == np.float32(ours)):
        sys.exit(f"FAIL: {cfg}: step-interp gives {tool} (file {written}), "
                 f"gpt2-example printed {ours}")

    stress = stress_params(params, seed)
    for name, v in stress.items():
        np.save(os.path.join(merged, name + ".npy"), v)
    tool, _ = interp_loss(interp, model, merged,
                          os.path.join(tmp, f"res_stress_{seed}"))
    ref = torch_loss({n: torch.from_numpy(v) for n, v in stress.items()},
                     tokens, targets, H)
    compare(f"{cfg} random params", tool, ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpt2-example", required=True)
    ap.add_argument("--step-interp", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="gpt2_parity_") as tmp:
        for cfg in CONFIGS:
            check_config(args.gpt2_example, args.step_interp, cfg, tmp)
    print("PASS")


if __name__ == "__main__":
    main()
