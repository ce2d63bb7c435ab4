"""Parity cases: training ops (StepTrainOps.td): stop_gradient, the fused
gradients embedding_grad, cross_entropy_grad and attention_grad, the overflow check
check_finite, and the optimizer updates sgd_update, adamw_update and
lamb_update.

Oracles
-------
* embedding_grad / cross_entropy_grad / attention_grad: PyTorch autograd
  of F.embedding / F.cross_entropy / the attention softmax(q k^T s + mask) v
  (the .grad of the table / the logits / q, k and v after backward(grad)),
  through opmath, so f16/bf16 are computed in f32 and rounded once.
* check_finite: all(torch.isfinite(t).all() for t in operands), the
  negated found_inf of torch.cuda.amp.GradScaler, on the same inputs.
* sgd_update / adamw_update, f32: torch.optim.SGD / torch.optim.AdamW
  (single-tensor path, foreach=False) stepped K times on a cloned param
  with .grad set to the k-th gradient; our op is called K times in one
  function, its state fed from call to call, and the final param and state
  are compared. AdamW cases may start at a later step from a given state
  (the optimizer's state dict is seeded with it).
* lamb_update: PyTorch has no LAMB; the reference is the formula of the
  op's description written with torch f32 ops (norms in float64).
* f16/bf16 updates: every intermediate state is returned, and each call k is
  checked on its own against one f32 torch step (the optimizer, or the LAMB
  formula) from the state our call k-1 produced, rounded once (opmath). A
  half-precision chain cannot be compared end to end with torch's: a one-ulp
  difference in a rounded state is legitimately carried to later steps.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from .cases_nn import attention_case, cross_entropy_inputs, torch_attention
from .harness import (Case, EXACT, FLOATS, HALVES, INF, INTS, NAN, REL,
                      T_MOVE, ULP,
                      acc_tol, as_f64, compare, flt, from_torch, gen, opmath,
                      rng_for, shape_str, store, to_torch, ttype)

# f32 optimizer results: both sides run the same f32 formula, but torch's
# vectorized add(alpha=)/addcmul may fuse a multiply-add that we round twice,
# so each step may differ by ~1 f32 ulp of its terms; over K <= 5 chained
# steps that stays far below 1e-5 of the tensor's largest |value|. Normwise
# (floor 'max') because a param or a moment can cancel to ~0 while the
# terms it came from are O(1).
T_UPD32 = REL(1e-5, "max", "f32 optimizer step(s): same formula and order as "
              "torch.optim; a fused multiply-add in torch's vectorized "
              "kernels moves each step by ~1 ulp of its terms; normwise "
              "<= 1e-5 after K <= 5 steps")
# f16/bf16 optimizer step from identical (our) state: both compute in f32 and
# round once; the f32 values differ by the fused-multiply-add ulp above,
# which can move the rounded half result by at most 1 ulp.
T_UPD16 = ULP(1, "f16/bf16 optimizer step from the same state: f32 on both "
              "sides (differing by ~1 f32 ulp, a fused multiply-add), one "
              "rounding: <= 1 ulp")

I64S = ttype((), "i64")
F32S = ttype((), "f32")


def _f64attrs(d):
    """An attr-dict of f64 attributes (and unit attributes for True)."""
    items = []
    for k, v in d.items():
        if v is True:
            items.append(k)
        elif v is not None and v is not False:
            items.append("%s = %s : f64" % (k, flt(v)))
    return " {%s}" % ", ".join(items) if items else ""


# ---------------------------------------------------------------------------
# stop_gradient, embedding_grad, cross_entropy_grad
# ---------------------------------------------------------------------------

def _grad_cases():
    cases = []
    for dt in FLOATS + INTS + ("i1",):
        shape = (3, 5)
        nm = "stop_gradient.%s.%s" % (dt, shape_str(shape))
        x = gen(rng_for(nm), shape, dt)
        cases.append(Case(nm, [(x, dt)], "%%r0 = step.stop_gradient %%a0 : %s"
                          % ttype(shape, dt), [(shape, dt)], [x], [T_MOVE]))

    # (indices shape, V, D, index range): repeated indices accumulate.
    emb_plans = [((5,), 10, 6, 10), ((2, 3), 10, 6, 10), ((), 10, 6, 10),
                 ((0,), 10, 6, 10), ((2, 0, 2), 4, 3, 4), ((64,), 4, 8, 4),
                 ((8, 32), 50, 16, 50), ((6,), 7, 0, 7)]
    for dt in FLOATS:
        for it in INTS:
            for ishape, v, d, hi in emb_plans:
                if it == "i32" and ishape not in ((5,), (64,)):
                    continue
                nm = "embedding_grad.%s.%s.%s_V%d_D%d" % (dt, it, shape_str(ishape), v, d)
                r = rng_for(nm)
                idx = gen(r, ishape, it, kind="int", lo=0, hi=hi)
                gshape = tuple(ishape) + (d,)
                g = gen(r, gshape, dt)

                def fn(i, g, v=v, d=d):
                    w = torch.zeros(v, d, dtype=g.dtype, requires_grad=True)
                    F.embedding(i.long(), w).backward(g)
                    return w.grad
                (want,) = opmath(fn, [(idx, it), (g, dt)], [dt])
                cases.append(Case(nm, [(idx, it), (g, dt)],
                                  "%%r0 = step.embedding_grad %%a0, %%a1 num_embeddings = %d : %s, %s -> %s"
                                  % (v, ttype(ishape, it), ttype(gshape, dt), ttype((v, d), dt)),
                                  [((v, d), dt)], [want], [acc_tol(dt)]))

    for nm, r, dt, it, n, c, red, ign, logits, t in cross_entropy_inputs(
            "cross_entropy_grad"):
        gshape = (n,) if red == "none" else ()
        g = gen(r, gshape, dt, kind="uniform", lo=-2, hi=2)
        ii = -100 if ign is None else ign

        def fn(x, y, g, red=red, ii=ii):
            x = x.detach().requires_grad_(True)
            F.cross_entropy(x, y.long(), reduction=red,
                            ignore_index=ii).backward(g)
            return x.grad
        (want,) = opmath(fn, [(logits, dt), (t, it), (g, dt)], [dt])
        cases.append(Case(nm, [(logits, dt), (t, it), (g, dt)],
                          "%%r0 = step.cross_entropy_grad %%a0, %%a1, %%a2 reduction = %s%s : %s, %s, %s -> %s"
                          % (red, " ignore_index = %d" % ign if ign is not None else "",
                             ttype((n, c), dt), ttype((n,), it), ttype(gshape, dt),
                             ttype((n, c), dt)),
                          [((n, c), dt)], [want], [acc_tol(dt)]))
    # attention_grad: torch autograd of the spelled-out attention (as in
    # cases_nn.py) for dq, dk, dv. Shapes cover Tq < Tk, Tq > Tk, several
    # 64-row tiles of the CPU kernel with a causal diagonal crossing them,
    # and an empty query.
    att_plans = [  # (q shape, Tk, Dv, causal, scale)
        ((4, 8), 4, 8, False, None), ((2, 3, 5, 8), 5, 8, True, None),
        ((2, 3, 7), 5, 4, True, None), ((2, 6, 4), 3, 5, True, 0.25),
        ((2, 70, 16), 75, 8, True, None), ((1, 130, 8), 130, 8, False, 0.5),
        ((1, 130, 8), 100, 8, True, None), ((2, 0, 8), 4, 8, False, None)]
    for dt in FLOATS:
        for qs, tk, dv, causal, scale in att_plans:
            ks, vs, os_, nm = attention_case("attention_grad", dt, qs, tk, dv,
                                             causal, scale)
            r = rng_for(nm)
            q, k, v, g = (gen(r, qs, dt), gen(r, ks, dt), gen(r, vs, dt),
                          gen(r, os_, dt))

            def fn(q, k, v, g, causal=causal, scale=scale):
                q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
                torch_attention(q, k, v, causal, scale).backward(g)
                return q.grad, k.grad, v.grad
            want = opmath(fn, [(q, dt), (k, dt), (v, dt), (g, dt)], [dt] * 3)
            types = [ttype(t, dt) for t in (qs, ks, vs, os_)]
            cases.append(Case(nm, [(q, dt), (k, dt), (v, dt), (g, dt)],
                              "%%r0, %%r1, %%r2 = step.attention_grad %%a0, %%a1, %%a2, %%a3%s%s : %s -> %s"
                              % (" causal" if causal else "",
                                 " scale = %s" % flt(scale) if scale else "",
                                 ", ".join(types), ", ".join(types[:3])),
                              [(qs, dt), (ks, dt), (vs, dt)], want,
                              [acc_tol(dt)], repeat=True))
    # attention_lse: the result and torch.logsumexp of the scaled, masked
    # scores (f32); attention_grad from the saved result and log-sum-exp
    # (torch's, rounded as stored): torch autograd as above.
    for dt in FLOATS:
        for qs, tk, dv, causal, scale in (((2, 3, 5, 8), 5, 8, True, None),
                                          ((2, 70, 16), 75, 8, True, None),
                                          ((1, 130, 8), 130, 8, False, 0.5)):
            ks, vs, os_, nm = attention_case("attention_lse", dt, qs, tk, dv,
                                             causal, scale)
            r = rng_for(nm)
            q, k, v, g = (gen(r, qs, dt), gen(r, ks, dt), gen(r, vs, dt),
                          gen(r, os_, dt))

            def lse_of(q, k, causal=causal, scale=scale):
                s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
                sc = torch.matmul(q, k.transpose(-1, -2)) * s
                if causal:
                    m = torch.ones(q.shape[-2], k.shape[-2],
                                   dtype=torch.bool).tril()
                    sc = sc.masked_fill(~m, float("-inf"))
                return torch.logsumexp(sc, -1)

            def fwd(q, k, v, causal=causal, scale=scale):
                return torch_attention(q, k, v, causal, scale), lse_of(q, k)
            o, lse = opmath(fwd, [(q, dt), (k, dt), (v, dt)], [dt, "f32"])
            types = [ttype(t, dt) for t in (qs, ks, vs, os_)]
            lse_t = ttype(qs[:-1], "f32")
            attrs = ("%s%s" % (" causal" if causal else "",
                               " scale = %s" % flt(scale) if scale else ""))
            cases.append(Case(nm, [(q, dt), (k, dt), (v, dt)],
                              "%%r0, %%r1 = step.attention_lse %%a0, %%a1, %%a2%s : %s -> %s, %s"
                              % (attrs, ", ".join(types[:3]), types[3], lse_t),
                              [(os_, dt), (qs[:-1], "f32")], [o, lse],
                              [acc_tol(dt), acc_tol("f32")]))

            def bwd(q, k, v, g, causal=causal, scale=scale):
                q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
                torch_attention(q, k, v, causal, scale).backward(g)
                return q.grad, k.grad, v.grad
            want = opmath(bwd, [(q, dt), (k, dt), (v, dt), (g, dt)], [dt] * 3)
            nm = nm.replace("attention_lse", "attention_grad_saved")
            # f16/bf16: dd = rowsum(g * out) reads out rounded to 16 bits
            # (as FlashAttention-2's backward does), and dS = P * (dP - dd)
            # cancels, so the gradient moves by ~2^-8 (bf16) or 2^-11 (f16)
            # of its largest element, not by an ulp of each.
            tol = acc_tol(dt) if dt == "f32" else REL(
                8 * (2.0 ** -8 if dt == "bf16" else 2.0 ** -11), "max",
                "f16/bf16 attention_grad from the saved result: rowsum(g * "
                "out) with out rounded to the element type; error normwise "
                "relative to the largest |result|, <= 8 units of its "
                "precision")
            cases.append(Case(nm, [(q, dt), (k, dt), (v, dt), (g, dt),
                                   (o, dt), (lse, "f32")],
                              "%%r0, %%r1, %%r2 = step.attention_grad %%a0, %%a1, %%a2, %%a3 saved(%%a4, %%a5 : %s, %s)%s : %s -> %s"
                              % (types[3], lse_t, attrs, ", ".join(types),
                                 ", ".join(types[:3])),
                              [(qs, dt), (ks, dt), (vs, dt)], want,
                              [tol], repeat=True))
    for dt in FLOATS:
        nm = "cross_entropy_grad.%s.large_logits" % dt
        logits = store([[1e4, 0.0, -1e4], [-60000.0, 60000.0, 0.0], [5.0, 5.0, 5.0]], dt)
        t, g = store([1, 0, 2], "i64"), store(1.5, dt)

        def fn(x, y, g):
            x = x.detach().requires_grad_(True)
            F.cross_entropy(x, y).backward(g)
            return x.grad
        (want,) = opmath(fn, [(logits, dt), (t, "i64"), (g, dt)], [dt])
        cases.append(Case(nm, [(logits, dt), (t, "i64"), (g, dt)],
                          "%%r0 = step.cross_entropy_grad %%a0, %%a1, %%a2 reduction = mean : %s, %s, %s -> %s"
                          % (ttype((3, 3), dt), ttype((3,), "i64"), ttype((), dt), ttype((3, 3), dt)),
                          [((3, 3), dt)], [want], [acc_tol(dt)]))
    return cases


# ---------------------------------------------------------------------------
# check_finite
# ---------------------------------------------------------------------------

T_BOOL = EXACT("check_finite is a boolean of exact per-element tests: equal")


def _check_finite_cases():
    cases = []
    lists = {  # name -> operand (shape, dtype) list
        "one_f32": [((4, 33), "f32")],
        "mixed": [((4, 33), "f32"), ((7,), "bf16"), ((), "f16")],
        "halves": [((3, 128), "bf16"), ((1000,), "f16")],
        "with_empty": [((0, 3), "f32"), ((5,), "f16"), ((2, 0), "bf16")],
        "only_empty": [((0,), "bf16")]}
    for lname, ops in lists.items():
        # None: every value finite; (k, v): v at the last element of operand
        # k, the first or the last non-empty one (so a later operand is
        # checked even when earlier ones are finite).
        full = [k for k, (shape, _) in enumerate(ops) if np.prod(shape) > 0]
        poisons = [None]
        for k in sorted({full[0], full[-1]} if full else set()):
            poisons += [(k, v) for v in (NAN, INF, -INF)]
        for poison in poisons:
            nm = "check_finite.%s.%s" % (lname, "finite" if poison is None else
                                         "op%d_%s" % (poison[0], poison[1]))
            r = rng_for(nm)
            args = []
            for k, (shape, dt) in enumerate(ops):
                a = gen(r, shape, dt, scale=100)
                if poison is not None and poison[0] == k:
                    a.reshape(-1)[-1] = store(poison[1], dt)
                args.append((a, dt))
            ok = all(bool(torch.isfinite(to_torch(a, dt)).all())
                     for a, dt in args)
            body = "%%r0 = step.check_finite %s : %s" % (
                ", ".join("%%a%d" % i for i in range(len(args))),
                ", ".join(ttype(s, dt) for s, dt in ops))
            cases.append(Case(nm, args, body, [((), "i1")],
                              [np.array(ok)], [T_BOOL]))
    # The largest finite value of each type is finite.
    edge = [(store([3.4028234663852886e38, -3.4028234663852886e38], "f32"), "f32"),
            (store([65504.0, -65504.0], "f16"), "f16"),
            (np.array([0x7f7f, 0xff7f], dtype=np.uint16), "bf16")]
    cases.append(Case("check_finite.largest_finite", edge,
                      "%r0 = step.check_finite %a0, %a1, %a2 : " +
                      ", ".join(ttype((2,), dt) for _, dt in edge),
                      [((), "i1")], [np.array(True)], [T_BOOL]))
    return cases


# ---------------------------------------------------------------------------
# Optimizer updates: the MLIR of K chained calls
# ---------------------------------------------------------------------------

def _chain(op, state_args, grad_args, t0, k, ty, attrs, nres, operands_fn,
           types_fn, all_results):
    """Body of k chained calls of `op` at steps t0..t0+k-1. state_args: the
    initial state names (param first); grad_args: one gradient name per call;
    operands_fn(state, grad, step) spells one call's operands; each call's
    results are the next call's state. Results: the last call's (as %r0..),
    or every call's when all_results (call j's as %r{j*nres}..)."""
    lines, state = [], list(state_args)
    for j in range(k):
        lines.append("%%t%d = step.constant dense<%d> : %s" % (j, t0 + j, I64S))
        if all_results:
            outs = ["%%r%d" % (j * nres + i) for i in range(nres)]
        elif j == k - 1:
            outs = ["%%r%d" % i for i in range(nres)]
        else:
            outs = ["%%s%d_%d" % (j, i) for i in range(nres)]
        lines.append("%s = step.%s %s%s : %s" % (
            ", ".join(outs), op, operands_fn(state, grad_args[j], "%%t%d" % j),
            attrs, types_fn(ty)))
        state = outs
    return lines


def _opt_case(nm, op, dt, shape, state, grads, lr, t0, attrs, nres,
              operands_fn, types_fn, f32_ref, step_ref):
    """One optimizer case. state: initial storage arrays (param first);
    grads: one storage array per call; f32_ref() -> final f32 results;
    step_ref(state_arrays, grad, step) -> one step's results (f32 values,
    rounded by the caller), used for halves."""
    k = len(grads)
    ty = ttype(shape, dt)
    args = [(s, dt) for s in state] + [(g, dt) for g in grads] + [(store(lr, "f32"), "f32")]
    names = ["%%a%d" % i for i in range(len(args))]
    sn, gn, lrn = names[:len(state)], names[len(state):-1], names[-1]
    ops_fn = lambda st, g, t: operands_fn(st, g, t, lrn)  # noqa: E731
    halves = dt in HALVES
    body = _chain(op, sn, gn, t0, k, ty, attrs, nres, ops_fn, types_fn, halves)
    if not halves:
        want = f32_ref()
        return Case(nm, args, body, [(shape, dt)] * nres, want, [T_UPD32])

    def check(outs, state=state, grads=grads):
        prev = list(state)
        details = []
        for j in range(k):
            got = outs[j * nres:(j + 1) * nres]
            ref = step_ref([torch.from_numpy(as_f64(s, dt).astype(np.float32)) for s in prev],
                           torch.from_numpy(as_f64(grads[j], dt).astype(np.float32)), t0 + j)
            for i, (o, w) in enumerate(zip(got, ref)):
                ok, detail, _ = compare(o, from_torch(w, dt), dt, T_UPD16)
                if not ok:
                    return False, "call %d (step %d) result %d: %s (tolerance: %s)" % (
                        j + 1, t0 + j, i, detail, T_UPD16.why)
                details.append(detail)
            prev = got
        return True, "; ".join(sorted(set(details)))
    return Case(nm, args, body, [(shape, dt)] * (nres * k), check=check)


# ---------------------------------------------------------------------------
# sgd_update
# ---------------------------------------------------------------------------

def _sgd_torch_steps(p, grads, lr, hy, buf=None, t0=1):
    """torch.optim.SGD from param p (f32) and, for t0 > 1, the given
    momentum buffer; one step per gradient. Returns [param(, buf)]."""
    p = p.clone().requires_grad_(True)
    opt = torch.optim.SGD([p], lr=lr, momentum=hy["momentum"],
                          dampening=hy["dampening"],
                          weight_decay=hy["weight_decay"],
                          nesterov=hy["nesterov"], foreach=False)
    if hy["momentum"] and t0 > 1:
        opt.state[p]["momentum_buffer"] = buf.clone()
    for g in grads:
        p.grad = g.clone()
        opt.step()
    out = [p.detach()]
    if hy["momentum"]:
        out.append(opt.state[p]["momentum_buffer"])
    return out


def _sgd_cases():
    cases = []
    plans = [  # (momentum, dampening, weight_decay, nesterov, steps)
        (0.0, 0.0, 0.0, False, 1), (0.0, 0.0, 1e-2, False, 3),
        (0.9, 0.0, 0.0, False, 1), (0.9, 0.0, 5e-4, False, 4),
        (0.9, 0.1, 1e-2, False, 3), (0.9, 0.0, 1e-2, True, 4),
        (0.5, 0.0, 0.0, True, 2)]
    for dt in ("f32", "bf16", "f16"):
        for shape in [(4, 33), (7,), (), (0, 3)]:
            for mom, damp, wd, nest, k in plans:
                if dt == "f16" and shape != (4, 33):
                    continue
                hy = {"momentum": mom, "dampening": damp, "weight_decay": wd,
                      "nesterov": nest}
                nm = "sgd_update.%s.%s_m%g_d%g_wd%g%s_steps%d" % (
                    dt, shape_str(shape), mom, damp, wd, "_nesterov" if nest else "", k)
                r = rng_for(nm)
                p = gen(r, shape, dt)
                # The buffer operand is not read at step 1 (PyTorch creates
                # it from d_p): pass garbage to prove it.
                state = [p] + ([gen(r, shape, dt, scale=100)] if mom else [])
                grads = [gen(r, shape, dt) for _ in range(k)]
                lr = float(np.float32(0.05))
                attrs = _f64attrs({"momentum": mom or None, "dampening": damp or None,
                                   "weight_decay": wd or None, "nesterov": nest})
                nres = 2 if mom else 1

                def operands(st, g, t, lrn, mom=mom):
                    return "%s, %s, %s, %s" % (st[0], g, t, lrn) + (
                        " momentum_buffer " + st[1] if mom else "")

                def types(ty, mom=mom):
                    ins = [ty, ty, I64S, F32S] + ([ty] if mom else [])
                    outs = [ty] * (2 if mom else 1)
                    return "(%s) -> (%s)" % (", ".join(ins), ", ".join(outs))

                def f32_ref(p=p, grads=grads, lr=lr, hy=hy):
                    outs = _sgd_torch_steps(to_torch(p, "f32"),
                                            [to_torch(g, "f32") for g in grads], lr, hy)
                    return [from_torch(o, "f32") for o in outs]

                def step_ref(st, g, t, lr=lr, hy=hy):
                    return _sgd_torch_steps(st[0], [g], lr, hy,
                                            st[1] if len(st) > 1 else None, t0=t)
                cases.append(_opt_case(nm, "sgd_update", dt, shape, state, grads, lr,
                                       1, attrs, nres, operands, types, f32_ref, step_ref))
    return cases


# ---------------------------------------------------------------------------
# adamw_update, lamb_update
# ---------------------------------------------------------------------------

def _adamw_torch_steps(p, m, v, grads, lr, hy, t0):
    """torch.optim.AdamW from param p with state (m, v) after t0 - 1 steps
    (zeros and t0 = 1 give a fresh optimizer); one step per gradient."""
    p = p.clone().requires_grad_(True)
    opt = torch.optim.AdamW([p], lr=lr, betas=(hy["beta1"], hy["beta2"]),
                            eps=hy["eps"], weight_decay=hy["weight_decay"],
                            foreach=False)
    if t0 > 1:
        opt.state[p] = {"step": torch.tensor(float(t0 - 1)),
                        "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    for g in grads:
        p.grad = g.clone()
        opt.step()
    s = opt.state[p]
    return [p.detach(), s["exp_avg"], s["exp_avg_sq"]]


def _lamb_torch_steps(p, m, v, grads, lr, hy, t0):
    """LAMB as step.lamb_update's description states it, in torch f32 ops
    (Python-float coefficients, as AdamW's) with float64 norms."""
    b1, b2, eps, wd = hy["beta1"], hy["beta2"], hy["eps"], hy["weight_decay"]
    for j, g in enumerate(grads):
        t = t0 + j
        m = m * b1 + (1 - b1) * g
        v = v * b2 + (1 - b2) * g * g
        r = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps) + wd * p
        pn, rn = p.double().norm().item(), r.double().norm().item()
        trust = pn / rn if pn > 0 and rn > 0 else 1.0
        p = p - (lr * trust) * r
    return [p, m, v]


def _adam_like_cases(op, torch_steps, default_eps):
    cases = []
    plans = [  # (beta1, beta2, eps, weight_decay, lr, first step, steps)
        (0.9, 0.999, default_eps, 0.01, 1e-3, 1, 1),
        (0.9, 0.999, default_eps, 0.01, 1e-3, 1, 5),
        (0.8, 0.95, 1e-6, 0.1, 3e-2, 1, 3),
        (0.9, 0.999, default_eps, 0.0, 1e-2, 7, 3),
        (0.0, 0.5, 1e-3, 0.05, 1e-1, 100, 2)]
    for dt in ("f32", "bf16", "f16"):
        for shape in [(4, 33), (9,), (), (0, 3)]:
            for b1, b2, eps, wd, lr, t0, k in plans:
                if dt == "f16" and shape != (4, 33):
                    continue
                hy = {"beta1": b1, "beta2": b2, "eps": eps, "weight_decay": wd}
                nm = "%s.%s.%s_b%g_%g_eps%g_wd%g_lr%g_from%d_steps%d" % (
                    op, dt, shape_str(shape), b1, b2, eps, wd, lr, t0, k)
                r = rng_for(nm)
                p = gen(r, shape, dt)
                if t0 == 1:
                    m, v = store(np.zeros(shape), dt), store(np.zeros(shape), dt)
                else:
                    m = gen(r, shape, dt, scale=0.1)
                    v = store(np.abs(as_f64(gen(r, shape, dt, scale=0.05), dt)), dt)
                grads = [gen(r, shape, dt) for _ in range(k)]
                # A few tiny gradients: sqrt(v) ~ eps is where eps matters.
                for g in grads:
                    if g.size > 4:
                        g.reshape(-1)[:2] = store([1e-7, -3e-8], dt)
                lr = float(np.float32(lr))
                attrs = _f64attrs({"beta1": b1, "beta2": b2, "eps": eps,
                                   "weight_decay": wd})

                def operands(st, g, t, lrn):
                    return ", ".join([st[0], g, st[1], st[2], t, lrn])

                def types(ty):
                    return "%s, %s, %s" % (ty, I64S, F32S)

                def f32_ref(p=p, m=m, v=v, grads=grads, lr=lr, hy=hy, t0=t0):
                    outs = torch_steps(to_torch(p, "f32"), to_torch(m, "f32"),
                                       to_torch(v, "f32"),
                                       [to_torch(g, "f32") for g in grads], lr, hy, t0)
                    return [from_torch(o, "f32") for o in outs]

                def step_ref(st, g, t, lr=lr, hy=hy):
                    return torch_steps(st[0], st[1], st[2], [g], lr, hy, t)
                cases.append(_opt_case(nm, op, dt, shape, [p, m, v], grads, lr, t0,
                                       attrs, 3, operands, types, f32_ref, step_ref))
    return cases


# ---------------------------------------------------------------------------
# Errors (exit status 1 and the culprit named)
# ---------------------------------------------------------------------------

def _error_cases():
    cases = []
    g = gen(rng_for("err.train.g"), (3, 4), "f32")
    idx = store([1, 5, 2], "i64")
    cases.append(Case("train_error.embedding_grad_index_out_of_range",
                      [(idx, "i64"), (g, "f32")],
                      "%r0 = step.embedding_grad %a0, %a1 num_embeddings = 5 : "
                      "tensor<3xi64>, tensor<3x4xf32> -> tensor<5x4xf32>",
                      [((5, 4), "f32")], error=["step.embedding_grad", "index 5"]))
    lg, t = gen(rng_for("err.train.ce"), (2, 3), "f32"), store([0, -1], "i32")
    cases.append(Case("train_error.cross_entropy_grad_target_out_of_range",
                      [(lg, "f32"), (t, "i32"), (store(1.0, "f32"), "f32")],
                      "%r0 = step.cross_entropy_grad %a0, %a1, %a2 reduction = sum : "
                      "tensor<2x3xf32>, tensor<2xi32>, tensor<f32> -> tensor<2x3xf32>",
                      [((2, 3), "f32")], error=["step.cross_entropy_grad", "target -1"]))
    p = gen(rng_for("err.train.p"), (4,), "f32")
    cases.append(Case("train_error.adamw_update_step_zero",
                      [(p, "f32"), (store(0, "i64"), "i64"), (store(0.1, "f32"), "f32")],
                      "%r0, %r1, %r2 = step.adamw_update %a0, %a0, %a0, %a0, %a1, %a2 : "
                      "tensor<4xf32>, tensor<i64>, tensor<f32>",
                      [((4,), "f32")] * 3, error=["step.adamw_update", "step must be >= 1"]))
    return cases


def train_cases():
    return (_grad_cases() + _check_finite_cases() + _sgd_cases() +
            _adam_like_cases("adamw_update", _adamw_torch_steps, 1e-8) +
            _adam_like_cases("lamb_update", _lamb_torch_steps, 1e-6) +
            _error_cases())
