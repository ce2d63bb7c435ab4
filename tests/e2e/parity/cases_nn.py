"""Parity cases: neural-network ops (softmax, log_softmax, layer_norm,
embedding, cross_entropy, attention) and dropout."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from .harness import (Case, EXACT, FLOATS, INF, INTS, TORCH, T_MOVE, _fmt,
                      acc_tol, as_f64, flt, from_torch, gen, opmath, rng_for,
                      shape_str, store, to_torch, ttype)

# ---------------------------------------------------------------------------
# Neural-network ops
# ---------------------------------------------------------------------------

# (N, C, reduction, ignore_index or None, targets override); the rows with
# every target ignored check mean's 0/0 (NaN loss, zero gradient in torch).
CE_PLANS = [
    (8, 10, "mean", None, None), (8, 10, "sum", None, None),
    (8, 10, "none", None, None), (1, 1, "mean", None, None),
    (6, 5, "mean", None, [0, -100, 4, -100, 2, 1]),
    (6, 5, "sum", None, [0, -100, 4, -100, 2, 1]),
    (6, 5, "none", None, [0, -100, 4, -100, 2, 1]),
    (6, 5, "mean", 3, [3, 0, 3, 4, 1, 3]), (6, 5, "none", 3, [3, 0, 3, 4, 1, 3]),
    (6, 5, "mean", -1, [-1, 0, 1, 2, -1, 4]),
    (4, 5, "mean", None, [-100] * 4), (4, 5, "sum", None, [-100] * 4),
    (0, 5, "sum", None, None), (0, 5, "none", None, None),
    (64, 1000, "mean", None, None)]


def torch_attention(q, k, v, causal, scale):
    """torch.nn.functional.scaled_dot_product_attention (torch >= 2.0; 1.13
    lacks it) spelled out: top-left causal mask, scale 1/sqrt(D) by
    default."""
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    sc = torch.matmul(q, k.transpose(-1, -2)) * s
    if causal:
        m = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        sc = sc.masked_fill(~m, float("-inf"))
    return torch.matmul(torch.softmax(sc, -1), v)


def attention_case(op, dt, qs, tk, dv, causal, scale):
    """The k, v and result shapes and the case name of an attention (or
    attention_grad) case with query shape qs [..., Tq, D]."""
    lead, tq, d = tuple(qs[:-2]), qs[-2], qs[-1]
    ks, vs, os_ = lead + (tk, d), lead + (tk, dv), lead + (tq, dv)
    nm = "%s.%s.q%s_k%s_v%s%s%s" % (
        op, dt, shape_str(qs), shape_str(ks), shape_str(vs),
        "_causal" if causal else "", "_scale%g" % scale if scale else "")
    return ks, vs, os_, nm


def cross_entropy_inputs(op):
    """Logits and targets of every CE_PLANS row for each float and index
    dtype (i32 on two shapes only), with case names "<op>.<dt>.<it>...";
    yields (name, rng, dt, it, N, C, reduction, ignore_index, logits,
    targets), rng being the case's generator (rng_for) after those draws."""
    for dt in FLOATS:
        for it in INTS:
            for n, c, red, ign, tgt in CE_PLANS:
                if it == "i32" and (n, c) not in ((8, 10), (6, 5)):
                    continue
                nm = "%s.%s.%s.%dx%d_%s%s%s" % (
                    op, dt, it, n, c, red, "_ign%d" % ign if ign is not None else "",
                    "_targets" if tgt is not None else "")
                r = rng_for(nm)
                logits = gen(r, (n, c), dt, scale=3)
                t = gen(r, (n,), it, kind="int", lo=0, hi=c) if tgt is None \
                    else store(tgt, it)
                yield nm, r, dt, it, n, c, red, ign, logits, t


def nn_cases():
    cases = []
    for op, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        plans = [((4, 10), 1), ((4, 10), 0), ((2, 3, 5), 1), ((2, 3, 5), 2),
                 ((7,), 0), ((3, 1), 1), ((0, 5), 1), ((5, 0), 0), ((16, 1000), 1)]
        for dt in FLOATS:
            for shape, dim in plans:
                nm = "%s.%s.%s_dim%d" % (op, dt, shape_str(shape), dim)
                x = gen(rng_for(nm), shape, dt, scale=3)
                (want,) = opmath(lambda t, dim=dim: fn(t, dim), [(x, dt)], [dt])
                cases.append(Case(nm, [(x, dt)], "%%r0 = step.%s %%a0 dim = %d : %s"
                                  % (op, dim, ttype(shape, dt)), [(shape, dt)],
                                  [want], [acc_tol(dt)]))
            # stability and masking: huge logits, -inf entries, a row of -inf
            nm = "%s.%s.large_and_masked" % (op, dt)
            x = store([[1e4, 1e4 - 1, -1e4, 0.0], [-INF, 1.0, 2.0, -INF],
                       [-INF, -INF, -INF, -INF], [3.0, 3.0, 3.0, 3.0],
                       [60000.0, -60000.0, 0.0, 1.0]], dt)
            (want,) = opmath(lambda t: fn(t, 1), [(x, dt)], [dt])
            cases.append(Case(nm, [(x, dt)], "%%r0 = step.%s %%a0 dim = 1 : %s"
                              % (op, ttype(x.shape, dt)), [(x.shape, dt)], [want],
                              [acc_tol(dt)]))

    ln_plans = [((4, 8), (8,), 1e-5), ((2, 3, 8), (3, 8), 1e-5), ((16,), (16,), 1e-3),
                ((5, 1), (1,), 1e-5), ((3, 256), (256,), 1e-6), ((0, 4), (4,), 1e-5)]
    for dt in FLOATS:
        for xs, ws, eps in ln_plans:
            nm = "layer_norm.%s.%s_w%s_eps%g" % (dt, shape_str(xs), shape_str(ws), eps)
            r = rng_for(nm)
            x = gen(r, xs, dt, scale=2)
            x = store(as_f64(x, dt) + 3.0, dt)  # a mean far from 0
            w = gen(r, ws, dt, kind="uniform", lo=0.5, hi=1.5)
            b = gen(r, ws, dt, scale=0.5)
            # Normalizing over one element gives variance 0 and a scale of
            # 1/sqrt(eps) ~ 316: torch's f32 x*scale + (b - mean*scale)
            # then loses ~2e-3 relative to cancellation, while the exact
            # result is the bias. Compare that degenerate case with torch in
            # float64 (rounded once), the exact answer.
            wide = torch.float64 if int(np.prod(ws)) == 1 else torch.float32
            (want,) = opmath(lambda x, w, b, ws=ws, eps=eps:
                             F.layer_norm(x, ws, w, b, eps),
                             [(x, dt), (w, dt), (b, dt)], [dt], wide=wide)
            cases.append(Case(nm, [(x, dt), (w, dt), (b, dt)],
                              "%%r0 = step.layer_norm %%a0, %%a1, %%a2 eps = %s : %s, %s, %s"
                              % (flt(eps), ttype(xs, dt), ttype(ws, dt), ttype(ws, dt)),
                              [(xs, dt)], [want], [acc_tol(dt)]))
        nm = "layer_norm.%s.constant_rows" % dt
        x = store([[2.0] * 6, [-1.0] * 6, [0.0] * 6], dt)
        r = rng_for(nm)
        w, b = gen(r, (6,), dt), gen(r, (6,), dt)
        (want,) = opmath(lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-5),
                         [(x, dt), (w, dt), (b, dt)], [dt])
        cases.append(Case(nm, [(x, dt), (w, dt), (b, dt)],
                          "%%r0 = step.layer_norm %%a0, %%a1, %%a2 eps = %s : %s, %s, %s"
                          % (flt(1e-5), ttype((3, 6), dt), ttype((6,), dt), ttype((6,), dt)),
                          [((3, 6), dt)], [want], [acc_tol(dt)]))

    for dt in FLOATS:
        for it in INTS:
            for ishape in [(5,), (2, 3), (), (0,), (2, 0, 2)]:
                nm = "embedding.%s.%s.%s" % (dt, it, shape_str(ishape))
                r = rng_for(nm)
                w = gen(r, (10, 6), dt)
                idx = gen(r, ishape, it, kind="int", lo=0, hi=10)
                want = from_torch(F.embedding(to_torch(idx, it).long(),
                                              to_torch(w, dt).float()).to(TORCH[dt]), dt)
                out = tuple(ishape) + (6,)
                cases.append(Case(nm, [(idx, it), (w, dt)],
                                  "%%r0 = step.embedding %%a0, %%a1 : %s, %s -> %s"
                                  % (ttype(ishape, it), ttype((10, 6), dt), ttype(out, dt)),
                                  [(out, dt)], [want], [T_MOVE]))

    # cross_entropy
    for nm, _, dt, it, n, c, red, ign, logits, t in cross_entropy_inputs(
            "cross_entropy"):
        ii = -100 if ign is None else ign
        (want,) = opmath(lambda x, y, red=red, ii=ii:
                         F.cross_entropy(x, y.long(), reduction=red,
                                         ignore_index=ii),
                         [(logits, dt), (t, it)], [dt])
        out = (n,) if red == "none" else ()
        cases.append(Case(nm, [(logits, dt), (t, it)],
                          "%%r0 = step.cross_entropy %%a0, %%a1 reduction = %s%s : %s, %s -> %s"
                          % (red, " ignore_index = %d" % ign if ign is not None else "",
                             ttype((n, c), dt), ttype((n,), it), ttype(out, dt)),
                          [(out, dt)], [want], [acc_tol(dt)]))
    for dt in FLOATS:
        nm = "cross_entropy.%s.large_logits" % dt
        logits = store([[1e4, 0.0, -1e4], [-60000.0, 60000.0, 0.0], [5.0, 5.0, 5.0]], dt)
        t = store([1, 0, 2], "i64")
        (want,) = opmath(lambda x, y: F.cross_entropy(x, y, reduction="none"),
                         [(logits, dt), (t, "i64")], [dt])
        cases.append(Case(nm, [(logits, dt), (t, "i64")],
                          "%%r0 = step.cross_entropy %%a0, %%a1 reduction = none : %s, %s -> %s"
                          % (ttype((3, 3), dt), ttype((3,), "i64"), ttype((3,), dt)),
                          [((3,), dt)], [want], [acc_tol(dt)]))

    # attention
    att_plans = [  # (q shape, Tk, Dv, causal, scale)
        ((4, 8), 4, 8, False, None), ((4, 8), 4, 8, True, None),
        ((2, 3, 5, 8), 5, 8, True, None), ((2, 3, 5, 8), 5, 8, False, 0.5),
        ((2, 3, 7), 5, 4, False, None), ((2, 3, 7), 5, 4, True, None),  # Tq < Tk
        ((2, 6, 4), 3, 5, True, 0.25), ((2, 6, 4), 3, 5, False, None),  # Tq > Tk
        ((1, 1, 16), 1, 16, True, None), ((3, 64, 32), 64, 32, True, None),
        ((2, 0, 8), 4, 8, False, None)]
    for dt in FLOATS:
        for qs, tk, dv, causal, scale in att_plans:
            ks, vs, os_, nm = attention_case("attention", dt, qs, tk, dv,
                                             causal, scale)
            r = rng_for(nm)
            q, k, v = gen(r, qs, dt), gen(r, ks, dt), gen(r, vs, dt)

            def fn(q, k, v, causal=causal, scale=scale):
                return torch_attention(q, k, v, causal, scale)
            (want,) = opmath(fn, [(q, dt), (k, dt), (v, dt)], [dt])
            cases.append(Case(nm, [(q, dt), (k, dt), (v, dt)],
                              "%%r0 = step.attention %%a0, %%a1, %%a2%s%s : %s, %s, %s -> %s"
                              % (" causal" if causal else "",
                                 " scale = %s" % flt(scale) if scale else "",
                                 ttype(qs, dt), ttype(ks, dt), ttype(vs, dt), ttype(os_, dt)),
                              [(os_, dt)], [want], [acc_tol(dt)]))
    # attention with a valid length L: torch on the rows and keys cut to L,
    # zeros after (L clamped to [0, T]).
    for dt in FLOATS:
        for qs, causal, length in (((2, 70, 8), True, 37), ((2, 70, 8), False, 65),
                                   ((3, 9, 4), True, 1), ((3, 9, 4), False, 0),
                                   ((3, 9, 4), True, 20)):
            nm = "attention.%s.valid%d%s.%s" % (dt, length,
                                                 ".causal" if causal else "",
                                                 shape_str(qs))
            r = rng_for(nm)
            q, k, v = gen(r, qs, dt), gen(r, qs, dt), gen(r, qs, dt)
            n = max(0, min(length, qs[-2]))

            def fn(q, k, v, causal=causal, n=n):
                out = torch.zeros_like(q)
                if n:
                    out[..., :n, :] = torch_attention(
                        q[..., :n, :], k[..., :n, :], v[..., :n, :], causal,
                        None)
                return out
            (want,) = opmath(fn, [(q, dt), (k, dt), (v, dt)], [dt])
            t = ttype(qs, dt)
            cases.append(Case(nm, [(q, dt), (k, dt), (v, dt),
                                   (store(length, "i64"), "i64")],
                              "%%r0 = step.attention %%a0, %%a1, %%a2 valid %%a3%s : %s, %s, %s, tensor<i64> -> %s"
                              % (" causal" if causal else "", t, t, t, t),
                              [(qs, dt)], [want], [acc_tol(dt)]))
    return cases


# ---------------------------------------------------------------------------
# dropout (torch has no seeded dropout identical to step's: check properties)
# ---------------------------------------------------------------------------

def _splitmix64(x):
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def documented_mask(seed, n, p):
    """The mask runtime/cpu/Kernels.h documents (shared with CUDA)."""
    i = np.arange(n, dtype=np.uint64)
    bits = _splitmix64(np.uint64(seed) ^ _splitmix64(i)) >> np.uint64(40)
    return bits.astype(np.float64) * 2.0 ** -24 >= p


def torch_dropout_scale(p):
    """The factor torch.nn.functional.dropout multiplies kept f32 elements
    by: torch computes mask / (1 - p) in float, i.e. x * float(1/(1-p)),
    which is not always the correctly rounded x / (1 - p)."""
    torch.manual_seed(0)
    y = F.dropout(torch.ones(4096), p, training=True)
    return np.float32(y.max().item())


def dropout_cases():
    cases = []
    n = 100000
    for dt in FLOATS:
        for p in (0.1, 0.5, 0.9):
            seed = 42
            nm = "dropout.%s.p%g_n%d" % (dt, p, n)
            r = rng_for(nm)
            mag = r.uniform(0.5, 2.0, size=n)
            x = store(np.where(r.random(n) < 0.5, -mag, mag), dt)
            scale = torch_dropout_scale(p)

            def check(outs, x=x, dt=dt, p=p, scale=scale, seed=seed):
                y, y_again, y_other = outs
                xf = as_f64(x, dt).astype(np.float32)
                yf = as_f64(y, dt)
                kept = yf != 0
                frac = kept.mean()
                sigma = math.sqrt(p * (1 - p) / n)
                msgs = []
                # 1. the keep fraction is within 4 sigma of 1 - p
                if abs(frac - (1 - p)) > 4 * sigma:
                    msgs.append("keep fraction %.5f, expected %.5f +- 4*%.5f" %
                                (frac, 1 - p, sigma))
                # 2. kept elements equal torch's x * float(1/(1-p)) (f32
                #    product, rounded once to the half type): bitwise.
                want = store((xf * scale).astype(np.float32), dt)
                bad = np.nonzero(kept & (y != want))[0]
                if bad.size:
                    i = int(bad[0])
                    msgs.append("%d kept elements != x*%r, e.g. at %d x=%s got %s want %s"
                                % (bad.size, float(scale), i, _fmt(x, dt, i),
                                   _fmt(y, dt, i), _fmt(want, dt, i)))
                # (dropped elements are 0 by construction of `kept`: inputs
                # are never 0, so y == 0 exactly marks a dropped element.)
                # 3. the mask is the documented splitmix64 counter hash
                dm = documented_mask(seed, n, p)
                if not np.array_equal(dm, kept):
                    msgs.append("mask differs from the documented splitmix64 "
                                "hash at %d elements" % int((dm != kept).sum()))
                # 4. same seed -> same bits; other seed -> other mask
                if not np.array_equal(y, y_again):
                    msgs.append("same seed gave different outputs")
                if np.array_equal(y, y_other):
                    msgs.append("seeds 42 and 43 gave identical outputs")
                if msgs:
                    return False, "; ".join(msgs)
                return True, "keep %.4f (p=%g), kept == x*%r" % (frac, p, float(scale))
            t = ttype((n,), dt)
            cases.append(Case(nm, [(x, dt)],
                              ["%%r0 = step.dropout %%a0 p = %s seed = 42 : %s" % (flt(p), t),
                               "%%r1 = step.dropout %%a0 p = %s seed = 42 : %s" % (flt(p), t),
                               "%%r2 = step.dropout %%a0 p = %s seed = 43 : %s" % (flt(p), t)],
                              [((n,), dt)] * 3, check=check, repeat=True))
        nm = "dropout.%s.p0_identity" % dt
        x = gen(rng_for(nm), (64, 33), dt)
        cases.append(Case(nm, [(x, dt)], "%%r0 = step.dropout %%a0 p = %s seed = 7 : %s"
                          % (flt(0.0), ttype((64, 33), dt)), [((64, 33), dt)],
                          [from_torch(F.dropout(to_torch(x, dt).float(), 0.0, True), dt)],
                          [EXACT("p = 0 keeps everything with scale 1")]))
    return cases
