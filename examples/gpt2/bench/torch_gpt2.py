"""The GPT-2 of examples/gpt2 as a trainable torch.nn.Module, for bench.py.

Same param names and layouts as the traced model (GPT-2's Conv1D weights
stored [in, out], `wte`, `wpe`, `h.<i>.*`, `ln_f.*`), a tied LM head, GELU
tanh, pre-LN, causal attention; loaded from the .npy files that
`gpt2-example --emit-model` writes. AdamW in stepc's `wd_vectors=false`
param groups.
"""

import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class Conv1D(nn.Module):
    """GPT-2's Conv1D: y = x @ weight + bias, weight stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x):
        y = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return y.view(*x.shape[:-1], y.shape[-1])


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.c_attn = Conv1D(width, 3 * width)   # columns: q | k | v
        self.c_proj = Conv1D(width, width)
        if not HAS_SDPA:
            mask = torch.tril(torch.ones(context, context, dtype=torch.bool))
            self.register_buffer("causal", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        D = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.heads, D).transpose(1, 2)
                   for z in (q, k, v))
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
            att = att.softmax(dim=-1)
            y = att.to(v.dtype) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = Conv1D(width, 4 * width)
        self.c_proj = Conv1D(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads, context)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """Pre-LN GPT-2 with the param names of examples/gpt2 (`wte`, `wpe`,
    `h.<i>.ln_1.weight`, ..., `ln_f.bias`) and an LM head tied to wte."""

    def __init__(self, vocab, context, layers, heads, width):
        super().__init__()
        self.wte = nn.Parameter(torch.empty(vocab, width))
        self.wpe = nn.Parameter(torch.empty(context, width))
        self.h = nn.ModuleList(Block(width, heads, context)
                               for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        pos = torch.arange(T, device=tokens.device)
        x = F.embedding(tokens, self.wte) + F.embedding(pos, self.wpe)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte)   # tied head: x @ wte^T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               targets.view(-1))


def load_npy_dir(folder):
    return {f[:-4]: np.load(os.path.join(folder, f))
            for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def build_model(cfg, params, device):
    model = GPT2(cfg["vocab"], cfg["context"], cfg["layers"], cfg["heads"],
                 cfg["width"])
    want = {n: tuple(p.shape) for n, p in model.named_parameters()}
    have = {n: tuple(a.shape) for n, a in params.items()}
    if want != have:
        raise ValueError(f"the emitted params do not match the PyTorch model: missing "
             f"{sorted(set(want) - set(have))}, unexpected "
             f"{sorted(set(have) - set(want))}, shapes differ for "
             f"{sorted(n for n in set(want) & set(have) if want[n] != have[n])}")
    model.load_state_dict({n: torch.from_numpy(a) for n, a in params.items()},
                          strict=True)
    return model.to(device)


def make_optimizer(model, opt_cfg, device):
    """AdamW with stepc's `wd_vectors=false` groups. On CUDA the fused
    implementation where this torch has it (its fastest), else the default.
    Returns (optimizer, implementation name)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": opt_cfg["wd"]},
              {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=opt_cfg["lr"], betas=(opt_cfg["beta1"], opt_cfg["beta2"]),
              eps=opt_cfg["eps"])
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError, ValueError):
            pass
    return torch.optim.AdamW(groups, **kw), "default"
