#!/usr/bin/python3
"""PyTorch parity of the gradients step-autodiff builds.

    grad_parity.py STEP_OPT STEP_INTERP [--filter SUBSTR] [--jobs N]
                   [--keep DIR] [--list] [-v]

For each neural-network op of the step dialect (and a few compositions: an
MLP and a small transformer block with tied embeddings), each case writes a
model file (`func.func @forward` with params and inputs named by step.name,
returning a scalar f32 loss), its params and inputs as .npy files, runs

    step-opt model.mlir --step-autodiff -o joint.mlir
    step-interp joint.mlir --func=forward_backward --inputs DIR --out DIR

and compares `loss.npy` and every `grad.<param>.npy` with torch autograd of
the same computation, written independently in torch on the same values.

Tolerance (one for every case, all in f32): a tensor passes when
    max |got - want| <= 1e-5 * max(max |want|, 1e-30).
Why relative to the tensor's magnitude, not per element: a gradient is a
sum of products (matmul contractions, softmax and layer_norm backward terms
like g - sum(g*y)) whose elements cancel to near 0 while their rounding
error stays proportional to the terms. Both sides compute in f32 with
different summation orders (torch's vectorized kernels; the step
interpreter accumulates sums in double and rounds once), so each elementary
op may differ by ~1 ulp (6e-8) of the magnitude involved; 1e-5 leaves room
for chains of ~10-20 such ops (the transformer block) and still catches any
wrong term (a missing eps, a transposed matmul, a mask off by one key shift
gradients by far more than 1e-3 relative). A failing case also reports
torch's own f32 error against a float64 run of the same reference, to tell
a rounding-level difference from a wrong rule.

Plain Python (numpy, torch); one line per case, then `N passed, M failed`;
the exit status is 1 when any case failed (ctest reads it).
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity.cases_nn import documented_mask  # noqa: E402

torch.set_num_threads(1)  # deterministic, order-stable references

RTOL = 1e-5


# ---------------------------------------------------------------------------
# Model files
# ---------------------------------------------------------------------------

def ttype(shape, dt="f32"):
    return "tensor<%s%s>" % ("".join("%dx" % d for d in shape), dt)


def dims(rank):
    return "[" + ", ".join(str(i) for i in range(rank)) + "]"


class Case:
    """A model: params (trainable, f32) and inputs (data, any dtype), a
    body computing %loss from them, and the same computation in torch."""

    def __init__(self, name, params, inputs, body, torch_fn):
        self.name = name
        self.params = params  # name -> np.float32 array
        self.inputs = inputs  # name -> np array (f32, i32, i64)
        self.body = body
        self.torch_fn = torch_fn  # (dict of torch tensors) -> loss

    def mlir(self):
        args = []
        for kind, values in (("param", self.params), ("input", self.inputs)):
            for n, a in values.items():
                dt = {np.float32: "f32", np.int32: "i32",
                      np.int64: "i64"}[a.dtype.type]
                args.append('%%%s: %s {step.kind = "%s", step.name = "%s"}' %
                            (n, ttype(a.shape, dt), kind, n))
        return ("func.func @forward(%s)\n    -> (tensor<f32> {step.name = "
                '"loss"}) {\n  %s\n  return %%loss : tensor<f32>\n}\n' %
                (",\n    ".join(args), "\n  ".join(self.body)))

    def reference(self, dtype):
        """Loss and param gradients from torch autograd in `dtype`."""
        t = {}
        for n, a in self.params.items():
            t[n] = torch.tensor(a, dtype=dtype, requires_grad=True)
        for n, a in self.inputs.items():
            t[n] = torch.tensor(a, dtype=dtype if a.dtype == np.float32
                                else torch.int64)
        loss = self.torch_fn(t)
        loss.backward()
        grads = {n: t[n].grad.numpy() if t[n].grad is not None
                 else np.zeros(self.params[n].shape) for n in self.params}
        return loss.detach().numpy(), grads


def weighted(y_shape, y="%y"):
    """Body lines turning %y into %loss = sum(y * w), w an input: a plain
    sum would hide softmax's gradient (sum(softmax) == 1)."""
    t = ttype(y_shape)
    return ["%%yw = step.mul %s, %%w : %s" % (y, t),
            "%%loss = step.reduce_sum %%yw dims = %s : %s -> tensor<f32>" %
            (dims(len(y_shape)), t)]


def rng_for(name):
    """A generator seeded by the case name (stable across runs)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def f32(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


# ---------------------------------------------------------------------------
# Cases: one op each
# ---------------------------------------------------------------------------

def softmax_cases():
    out = []
    for op, shape, dim in (("softmax", (4, 7), 1), ("softmax", (3, 4, 5), 0),
                           ("log_softmax", (2, 3, 6), 2),
                           ("log_softmax", (5, 3), 0)):
        name = "%s.dim%d.%s" % (op, dim, "x".join(map(str, shape)))
        rng = rng_for(name)
        fn = torch.softmax if op == "softmax" else torch.log_softmax
        out.append(Case(
            name, {"x": f32(rng, shape, -3, 3)}, {"w": f32(rng, shape)},
            ["%%y = step.%s %%x dim = %d : %s" % (op, dim, ttype(shape))] +
            weighted(shape),
            lambda t, fn=fn, dim=dim: (fn(t["x"], dim) * t["w"]).sum()))
    return out


def layer_norm_cases():
    out = []
    for shape, nrank, eps in (((4, 8), 1, 1e-5), ((2, 3, 4, 5), 2, 1e-5),
                              ((3, 6), 1, 0.1), ((7,), 1, 1e-5)):
        name = "layer_norm.%dd.%s.eps%g" % (nrank, "x".join(map(str, shape)),
                                            eps)
        rng = rng_for(name)
        norm = shape[len(shape) - nrank:]
        tx, tw = ttype(shape), ttype(norm)
        out.append(Case(
            name, {"x": f32(rng, shape, -2, 2), "g": f32(rng, norm, 0.5, 1.5),
                   "b": f32(rng, norm)}, {"w": f32(rng, shape)},
            ["%%y = step.layer_norm %%x, %%g, %%b eps = %.17e : %s, %s, %s" %
             (eps, tx, tw, tw)] + weighted(shape),
            lambda t, norm=norm, eps=eps: (F.layer_norm(
                t["x"], norm, t["g"], t["b"], eps) * t["w"]).sum()))
    return out


def embedding_cases():
    out = []
    for idt, ishape, v, d in ((np.int64, (3, 4), 6, 5), (np.int32, (9,), 4, 3)):
        name = "embedding.%s.%s" % (np.dtype(idt).name,
                                    "x".join(map(str, ishape)))
        rng = rng_for(name)
        # More positions than rows: repeated indices accumulate.
        idx = rng.integers(0, v, size=ishape).astype(idt)
        oshape = ishape + (d,)
        ti = ttype(ishape, "i64" if idt == np.int64 else "i32")
        out.append(Case(
            name, {"table": f32(rng, (v, d))},
            {"idx": idx, "w": f32(rng, oshape)},
            ["%%y = step.embedding %%idx, %%table : %s, %s -> %s" %
             (ti, ttype((v, d)), ttype(oshape))] + weighted(oshape),
            lambda t: (F.embedding(t["idx"], t["table"]) * t["w"]).sum()))
    return out


def cross_entropy_cases():
    out = []
    n, c = 9, 5
    for reduction, ignore in (("mean", None), ("sum", None), ("none", None),
                              ("mean", -100), ("sum", 2), ("mean", 2)):
        name = "cross_entropy.%s%s" % (
            reduction, "" if ignore is None else ".ignore%d" % ignore)
        rng = rng_for(name)
        tgt = rng.integers(0, c, size=(n,)).astype(np.int64)
        if ignore is not None:
            tgt[1::3] = ignore
        attr = "" if ignore in (None, -100) else " ignore_index = %d" % ignore
        ty = ttype((n,)) if reduction == "none" else "tensor<f32>"
        inputs = {"t": tgt}
        body = ["%%%s = step.cross_entropy %%x, %%t reduction = %s%s : %s, %s"
                " -> %s" % ("y" if reduction == "none" else "loss", reduction,
                            attr, ttype((n, c)), ttype((n,), "i64"), ty)]
        if reduction == "none":
            inputs["w"] = f32(rng, (n,))
            body += weighted((n,))

        def fn(t, reduction=reduction, ignore=ignore):
            l = F.cross_entropy(t["x"], t["t"], reduction=reduction,
                                ignore_index=-100 if ignore is None else ignore)
            return (l * t["w"]).sum() if reduction == "none" else l
        out.append(Case(name, {"x": f32(rng, (n, c), -3, 3)}, inputs, body,
                        fn))
    return out


def dropout_cases():
    shape, p, seed = (5, 7), 0.3, 123
    name = "dropout.p0.3"
    rng = rng_for(name)
    mask = documented_mask(seed, int(np.prod(shape)), p).reshape(shape)
    # The kernel multiplies kept elements by float(1 / (1 - p)) (NN.cpp).
    scale = float(np.float32(1.0 / (1.0 - p)))
    return [Case(
        name, {"x": f32(rng, shape)}, {"w": f32(rng, shape)},
        ["%%y = step.dropout %%x p = %.17e seed = %d : %s" %
         (p, seed, ttype(shape))] + weighted(shape),
        lambda t: (t["x"] * torch.tensor(mask, dtype=t["x"].dtype) * scale *
                   t["w"]).sum())]


def torch_attention(q, k, v, causal, scale):
    """softmax(q k^T * scale + mask) v, as scaled_dot_product_attention
    (which torch 1.13 lacks), with PyTorch's -inf top-left causal mask."""
    s = torch.matmul(q, k.transpose(-1, -2)) * (
        scale if scale is not None else 1.0 / np.sqrt(q.shape[-1]))
    if causal:
        tq, tk = s.shape[-2], s.shape[-1]
        hidden = torch.ones(tq, tk, dtype=torch.bool).triu(1)
        s = s.masked_fill(hidden, float("-inf"))
    return torch.matmul(torch.softmax(s, -1), v)


def attention_cases():
    out = []
    for causal in (False, True):
        for scale in (None, 0.3):
            for lead, tq, tk, d, dv in (((2, 3), 5, 6, 4, 3), ((), 4, 3, 5, 5)):
                name = "attention.%s.%s.%s" % (
                    "causal" if causal else "full",
                    "default_scale" if scale is None else "scale%g" % scale,
                    "x".join(map(str, lead + (tq, tk, d, dv))))
                rng = rng_for(name)
                qs, ks, vs, os_ = (lead + (tq, d), lead + (tk, d),
                                   lead + (tk, dv), lead + (tq, dv))
                attrs = (" causal" if causal else "") + (
                    "" if scale is None else " scale = %.17e" % scale)
                out.append(Case(
                    name, {"q": f32(rng, qs, -2, 2), "k": f32(rng, ks, -2, 2),
                           "v": f32(rng, vs)}, {"w": f32(rng, os_)},
                    ["%%y = step.attention %%q, %%k, %%v%s : %s, %s, %s -> %s" %
                     (attrs, ttype(qs), ttype(ks), ttype(vs), ttype(os_))] +
                    weighted(os_),
                    lambda t, causal=causal, scale=scale: (torch_attention(
                        t["q"], t["k"], t["v"], causal, scale) * t["w"]).sum()))
    return out


# ---------------------------------------------------------------------------
# Cases: compositions
# ---------------------------------------------------------------------------

def mlp_case():
    """x @ W1 + b1 -> layer_norm -> gelu(tanh) -> @ W2 + b2 -> cross_entropy."""
    name = "compose.mlp"
    rng = rng_for(name)
    n, i, h, c = 8, 6, 10, 4
    params = {"W1": f32(rng, (i, h)), "b1": f32(rng, (h,)),
              "g": f32(rng, (h,), 0.5, 1.5), "beta": f32(rng, (h,)),
              "W2": f32(rng, (h, c)), "b2": f32(rng, (c,))}
    inputs = {"x": f32(rng, (n, i), -2, 2),
              "t": rng.integers(0, c, size=(n,)).astype(np.int64)}
    th, tc = ttype((n, h)), ttype((n, c))
    body = [
        "%%m1 = step.matmul %%x, %%W1 : %s, %s -> %s" % (
            ttype((n, i)), ttype((i, h)), th),
        "%%bb1 = step.broadcast_in_dim %%b1, dims = [1] : %s -> %s" % (
            ttype((h,)), th),
        "%%a1 = step.add %%m1, %%bb1 : %s" % th,
        "%%n1 = step.layer_norm %%a1, %%g, %%beta eps = 1.0e-05 : %s, %s, %s" % (
            th, ttype((h,)), ttype((h,))),
        "%%h1 = step.gelu %%n1 approximate tanh : %s" % th,
        "%%m2 = step.matmul %%h1, %%W2 : %s, %s -> %s" % (th, ttype((h, c)), tc),
        "%%bb2 = step.broadcast_in_dim %%b2, dims = [1] : %s -> %s" % (
            ttype((c,)), tc),
        "%%logits = step.add %%m2, %%bb2 : %s" % tc,
        "%%loss = step.cross_entropy %%logits, %%t reduction = mean : %s, %s "
        "-> tensor<f32>" % (tc, ttype((n,), "i64"))]

    def fn(t):
        a = F.layer_norm(t["x"] @ t["W1"] + t["b1"], (h,), t["g"], t["beta"],
                         1e-5)
        return F.cross_entropy(F.gelu(a, approximate="tanh") @ t["W2"] +
                               t["b2"], t["t"])
    return Case(name, params, inputs, body, fn)


def transformer_case():
    """Tied embeddings -> layer_norm -> causal attention (q, k, v
    projections) -> dropout -> residual -> layer_norm -> logits against the
    same table -> cross_entropy: the table's gradient sums two paths."""
    name = "compose.transformer_block"
    rng = rng_for(name)
    b, t_, d, v = 2, 5, 8, 11
    params = {"wte": f32(rng, (v, d)), "g1": f32(rng, (d,), 0.5, 1.5),
              "b1": f32(rng, (d,)), "Wq": f32(rng, (d, d)),
              "Wk": f32(rng, (d, d)), "Wv": f32(rng, (d, d)),
              "g2": f32(rng, (d,), 0.5, 1.5), "b2": f32(rng, (d,))}
    tok = rng.integers(0, v, size=(b, t_)).astype(np.int64)
    tgt = rng.integers(0, v, size=(b * t_,)).astype(np.int64)
    tgt[3] = -100
    p, seed = 0.3, 77
    th, tv, tw = ttype((b, t_, d)), ttype((b, t_, v)), ttype((d,))
    tdd = ttype((d, d))
    body = ["%%e = step.embedding %%tok, %%wte : %s, %s -> %s" % (
        ttype((b, t_), "i64"), ttype((v, d)), th),
        "%%h = step.layer_norm %%e, %%g1, %%b1 eps = 1.0e-05 : %s, %s, %s" % (
            th, tw, tw)]
    for proj in "qkv":
        body.append("%%%s = step.matmul %%h, %%W%s : %s, %s -> %s" % (
            proj, proj, th, tdd, th))
    body += [
        "%%a = step.attention %%q, %%k, %%v causal : %s, %s, %s -> %s" % (
            th, th, th, th),
        "%%ad = step.dropout %%a p = %.17e seed = %d : %s" % (p, seed, th),
        "%%r = step.add %%e, %%ad : %s" % th,
        "%%f = step.layer_norm %%r, %%g2, %%b2 eps = 1.0e-05 : %s, %s, %s" % (
            th, tw, tw),
        "%%lg = step.matmul %%f, %%wte transpose_b : %s, %s -> %s" % (
            th, ttype((v, d)), tv),
        "%%lf = step.reshape %%lg : %s -> %s" % (tv, ttype((b * t_, v))),
        "%%loss = step.cross_entropy %%lf, %%tgt reduction = mean : %s, %s -> "
        "tensor<f32>" % (ttype((b * t_, v)), ttype((b * t_,), "i64"))]
    mask = documented_mask(seed, b * t_ * d, p).reshape((b, t_, d))
    scale = float(np.float32(1.0 / (1.0 - p)))

    def fn(t):
        e = F.embedding(t["tok"], t["wte"])
        h = F.layer_norm(e, (d,), t["g1"], t["b1"], 1e-5)
        a = torch_attention(h @ t["Wq"], h @ t["Wk"], h @ t["Wv"], True, None)
        r = e + a * torch.tensor(mask, dtype=a.dtype) * scale
        f = F.layer_norm(r, (d,), t["g2"], t["b2"], 1e-5)
        return F.cross_entropy((f @ t["wte"].T).reshape(b * t_, v), t["tgt"])
    return Case(name, params, {"tok": tok, "tgt": tgt}, body, fn)


def all_cases():
    return (softmax_cases() + layer_norm_cases() + embedding_cases() +
            cross_entropy_cases() + dropout_cases() + attention_cases() +
            [mlp_case(), transformer_case()])


# ---------------------------------------------------------------------------
# Running and comparing
# ---------------------------------------------------------------------------

def compare(got, want):
    """(ok, why): max |got - want| <= RTOL * max(max |want|, 1e-30)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False, "shape %s, expected %s" % (got.shape, want.shape)
    if not np.all(np.isfinite(got)):
        return False, "non-finite values"
    if want.size == 0:
        return True, "empty"
    err = float(np.max(np.abs(got - want))) / max(
        float(np.max(np.abs(want))), 1e-30)
    return err <= RTOL, "error %.1e" % err


def run_case(opt, interp, case, root, idx):
    d = os.path.join(root, "%02d_%s" % (idx, case.name))
    ind, outd = os.path.join(d, "inputs"), os.path.join(d, "out")
    os.makedirs(ind)
    model, joint = os.path.join(d, "model.mlir"), os.path.join(d, "joint.mlir")
    with open(model, "w") as f:
        f.write(case.mlir())
    for n, a in list(case.params.items()) + list(case.inputs.items()):
        np.save(os.path.join(ind, n + ".npy"), a)
    for cmd in ([opt, model, "--step-autodiff", "-o", joint],
                [interp, joint, "--func=forward_backward", "--inputs", ind,
                 "--out", outd]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            return False, "%s exit %d: %s" % (os.path.basename(cmd[0]),
                                               p.returncode, p.stderr[:600])
    want_loss, want = case.reference(torch.float32)
    wide_loss, wide = case.reference(torch.float64)
    results = [("loss", np.load(os.path.join(outd, "loss.npy")), want_loss,
                wide_loss)]
    for n in case.params:
        path = os.path.join(outd, "grad.%s.npy" % n)
        if not os.path.exists(path):
            return False, "no %s" % path
        results.append(("grad." + n, np.load(path), want[n], wide[n]))
    details, ok = [], True
    for n, got, w, w64 in results:
        good, why = compare(got, w)
        if good:
            details.append("%s %s" % (n, why))
            continue
        ok = False
        details.append("%s: %s > %g (torch f32 vs f64: %s)" % (
            n, why, RTOL, compare(w, w64)[1]))
    return ok, "; ".join(details)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("opt", help="path to step-opt")
    ap.add_argument("interp", help="path to step-interp")
    ap.add_argument("--filter", default="", help="run cases whose name has this")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--keep", help="keep the generated files under this folder")
    ap.add_argument("--list", action="store_true", help="list case names")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the errors of passing cases too")
    args = ap.parse_args()
    cases = [c for c in all_cases() if args.filter in c.name]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    for tool in (args.opt, args.interp):
        if not os.access(tool, os.X_OK):
            print("FAIL setup: %s is not an executable" % tool)
            print("0 passed, 1 failed")
            return 1
    root = args.keep or tempfile.mkdtemp(prefix="step_grad_parity_")
    if args.keep:
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
    passed, failed = 0, []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
            futs = [ex.submit(run_case, args.opt, args.interp, c, root, i)
                    for i, c in enumerate(cases)]
            for c, fut in zip(cases, futs):
                try:
                    ok, detail = fut.result()
                except Exception as e:  # a harness bug is a failure too
                    ok, detail = False, "harness exception: %r" % (e,)
                if ok:
                    passed += 1
                    print("PASS %s%s" % (c.name, "  (%s)" % detail
                                         if args.verbose else ""))
                else:
                    failed.append(c.name)
                    print("FAIL %s  %s" % (c.name, detail))
                sys.stdout.flush()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    for name in failed:
        print("FAIL %s" % name)
    print("%d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
