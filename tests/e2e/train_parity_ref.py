"""PyTorch references for tests/e2e/train_parity.py (ctest e2e.train_parity).

Written independently of the compiler: the models as a PyTorch user writes
them from the param tensors, the optimizers as torch.optim objects (LAMB,
which PyTorch lacks, as a torch.optim.Optimizer following the formula of
step.lamb_update in dialects/step/StepTrainOps.td), the LR schedule of
compiler/pipeline/Train.h (ScheduleOptions) for LambdaLR, and the parsers of
stepc's --optimizer / --schedule specs, so that one spec string drives both
sides. Importing this module has no side effects.
"""

import math

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------
# Models (names and layouts of examples/mlp/MLP.h and examples/gpt2/Model.cpp)
# ---------------------------------------------------------------------------


def mlp_loss(P, batch):
    """relu(x @ w1 + b1) -> relu(. @ w2 + b2) -> . @ w3 + b3, mean CE.
    Weights are stored [in, out] (y = x @ w + b)."""
    h = batch["x"]
    for i, act in ((1, True), (2, True), (3, False)):
        h = h @ P[f"fc{i}.weight"] + P[f"fc{i}.bias"]
        if act:
            h = torch.relu(h)
    return F.cross_entropy(h, batch["y"])


def gpt2_loss(P, batch, heads):
    """GPT-2: pre-LN blocks, fused c_attn (q, k, v columns), causal softmax
    attention, tanh GELU, Conv1D weights [in, out], LM head tied to wte,
    mean cross-entropy over every token."""
    tokens, targets = batch["tokens"], batch["targets"]
    B, T = tokens.shape
    V, C = P["wte"].shape
    D = C // heads
    layers = sum(1 for n in P if n.endswith(".ln_1.weight"))

    def ln(x, name):
        return F.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"],
                            eps=1e-5)

    def conv1d(x, name):
        return x @ P[name + ".weight"] + P[name + ".bias"]

    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = P["wte"][tokens] + P["wpe"][torch.arange(T)]
    for i in range(layers):
        h = f"h.{i}"
        q, k, v = conv1d(ln(x, h + ".ln_1"), h + ".attn.c_attn").split(C, 2)
        q, k, v = (z.view(B, T, heads, D).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(y, h + ".attn.c_proj")
        m = F.gelu(conv1d(ln(x, h + ".ln_2"), h + ".mlp.c_fc"),
                   approximate="tanh")
        x = x + conv1d(m, h + ".mlp.c_proj")
    logits = ln(x, "ln_f") @ P["wte"].t()
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


# ---------------------------------------------------------------------------
# stepc specs -> torch objects
# ---------------------------------------------------------------------------


def parse_spec(spec):
    """"adamw,lr=1e-2,wd=0.1" -> ("adamw", {"lr": "1e-2", "wd": "0.1"})."""
    kind, *rest = spec.split(",")
    return kind, dict(kv.split("=", 1) for kv in rest)


def make_optimizer(spec, params):
    """The torch optimizer stepc's --optimizer=SPEC means, with Train.h's
    defaults (PyTorch's; LAMB: AdamW's with eps 1e-6). foreach=False: the
    single-tensor code path, one param at a time as step's fused ops."""
    kind, kv = parse_spec(spec)
    f = {k: float(v) for k, v in kv.items()
         if k not in ("nesterov", "wd_vectors")}
    wd = f.get("wd", f.get("weight_decay", 0.0 if kind == "sgd" else 0.01))
    if kv.get("wd_vectors", "true") in ("false", "0"):
        # nanoGPT's two param groups: decay matrices and embeddings only.
        params = [{"params": [p for p in params if p.dim() >= 2]},
                  {"params": [p for p in params if p.dim() < 2],
                   "weight_decay": 0.0}]
    if kind == "sgd":
        return torch.optim.SGD(
            params, lr=f.get("lr", 1e-3), momentum=f.get("momentum", 0.0),
            dampening=f.get("dampening", 0.0), weight_decay=wd,
            nesterov=kv.get("nesterov", "false") in ("true", "1"),
            foreach=False)
    betas = (f.get("beta1", 0.9), f.get("beta2", 0.999))
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=f.get("lr", 1e-3), betas=betas,
                                 eps=f.get("eps", 1e-8), weight_decay=wd,
                                 foreach=False)
    if kind == "lamb":
        return Lamb(params, lr=f.get("lr", 1e-3), betas=betas,
                    eps=f.get("eps", 1e-6), weight_decay=wd)
    raise ValueError(f"unknown optimizer {kind!r}")


def schedule_factor(spec):
    """Train.h ScheduleOptions: the LR multiplier of update s (0-based), in
    double. For torch.optim.lr_scheduler.LambdaLR (optimizer.step() then
    scheduler.step(), so update s runs with factor(s))."""
    kind, kv = parse_spec(spec)
    w, T = int(kv.get("warmup", 0)), int(kv.get("total", 0))
    m = float(kv.get("min_ratio", 0.0))

    def factor(s):
        if s < w:
            return (s + 1) / w
        if kind == "constant":
            return 1.0
        p = min(1.0, (s - w) / max(1, T - w))
        shape = (1 + math.cos(math.pi * p)) / 2 if kind == "cosine" else 1 - p
        return m + (1 - m) * shape
    return factor


class Lamb(torch.optim.Optimizer):
    """step.lamb_update's description, per param, in f32 with the norms in
    float64:
        exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
        exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
        r = (exp_avg / (1 - beta1^t))
            / (sqrt(exp_avg_sq / (1 - beta2^t)) + eps) + weight_decay * param
        trust = |param| / |r| if both norms are > 0, else 1
        param = param - lr * trust * r
    """

    def __init__(self, params, lr, betas, eps, weight_decay):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t, g = st["step"], p.grad
                m = st["exp_avg"].mul_(b1).add_((1 - b1) * g)
                v = st["exp_avg_sq"].mul_(b2).add_((1 - b2) * g * g)
                r = (m / (1 - b1 ** t)) / (
                    (v / (1 - b2 ** t)).sqrt() + group["eps"])
                r = r + group["weight_decay"] * p
                pn, rn = p.double().norm(), r.double().norm()
                trust = (pn / rn).float() if pn > 0 and rn > 0 else 1.0
                p.sub_(group["lr"] * trust * r)
