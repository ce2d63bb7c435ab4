"""Parity cases: reductions and matmul."""

import torch

from .harness import (Case, FLOATS, INF, INTS, NAN, NUMS, T_ACC32, T_MOVE,
                      acc_tol, gen, ilist, opmath, rng_for, shape_str, store,
                      ttype)

# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

def reduce_cases():
    cases = []
    plans = [((4, 6), [1], False), ((4, 6), [0], True), ((4, 6), [0, 1], False),
             ((3, 4, 5), [0, 2], True), ((3, 4, 5), [1], False),
             ((3, 4, 5), [2, 0], False), ((2, 3, 4, 5), [1, 3], True),
             ((7,), [0], False), ((1, 5), [0], False), ((5, 1), [1], True),
             ((0, 3), [1], False), ((3, 0), [1], False), ((0, 3), [0], True),
             ((4, 6), [], False), ((), [], False), ((128, 257), [1], False)]
    for op in ("reduce_sum", "reduce_max", "reduce_mean"):
        for dt in (FLOATS if op == "reduce_mean" else NUMS):
            for shape, dims, keep in plans:
                if op == "reduce_max" and any(shape[d] == 0 for d in dims):
                    continue  # an error (as torch.amax): see the errors group
                out = [1 if d in dims else s for d, s in enumerate(shape)] if keep \
                    else [s for d, s in enumerate(shape) if d not in dims]
                out = tuple(out)
                nm = "%s.%s.%s_dims%s%s" % (op, dt, shape_str(shape),
                                           "".join(map(str, dims)), "_keep" if keep else "")
                r = rng_for(nm)
                if dt in INTS:
                    x = gen(r, shape, dt, kind="int", lo=-100, hi=100)
                else:
                    x = gen(r, shape, dt, scale=2)
                if not dims:
                    # torch reads dim=[] as "all dims"; over no dims the
                    # reduction is the identity, which step documents.
                    fn = (lambda t: t.clone())
                elif op == "reduce_sum":
                    fn = (lambda t, dims=dims, keep=keep:
                          torch.sum(t, dim=dims, keepdim=keep, dtype=t.dtype))
                elif op == "reduce_max":
                    fn = (lambda t, dims=dims, keep=keep:
                          torch.amax(t, dim=dims, keepdim=keep))
                else:
                    fn = (lambda t, dims=dims, keep=keep:
                          torch.mean(t, dim=dims, keepdim=keep))
                (want,) = opmath(fn, [(x, dt)], [dt])
                if dt in INTS or op == "reduce_max" or not dims:
                    tol = T_MOVE
                else:
                    tol = acc_tol(dt)
                cases.append(Case(nm, [(x, dt)],
                                  "%%r0 = step.%s %%a0 dims = %s%s : %s -> %s" % (
                                      op, ilist(dims), " keepdim" if keep else "",
                                      ttype(shape, dt), ttype(out, dt)),
                                  [(out, dt)], [want], [tol]))
    # NaN propagation and infinities
    for op, fn in (("reduce_max", lambda t: torch.amax(t, dim=[1])),
                   ("reduce_sum", lambda t: torch.sum(t, dim=[1])),
                   ("reduce_mean", lambda t: torch.mean(t, dim=[1]))):
        for dt in FLOATS:
            nm = "%s.%s.nan_inf" % (op, dt)
            x = store([[1.0, NAN, 3.0], [INF, 1.0, 2.0], [-INF, -INF, 0.0],
                       [INF, -INF, 1.0], [-1.0, -2.0, -0.5]], dt)
            (want,) = opmath(fn, [(x, dt)], [dt])
            cases.append(Case(nm, [(x, dt)], "%%r0 = step.%s %%a0 dims = [1] : %s -> %s"
                              % (op, ttype((5, 3), dt), ttype((5,), dt)),
                              [((5,), dt)], [want],
                              [acc_tol(dt) if op != "reduce_max" else T_MOVE]))
    # Big reductions: 1 << 20 elements.
    n = 1 << 20
    for op, fn in (("reduce_sum", lambda t: torch.sum(t, dim=[0])),
                   ("reduce_mean", lambda t: torch.mean(t, dim=[0])),
                   ("reduce_max", lambda t: torch.amax(t, dim=[0]))):
        for dt, kind in (("f32", "uniform"), ("f32", "normal"), ("bf16", "uniform"),
                         ("f16", "normal")):
            nm = "%s.%s.big_%d_%s" % (op, dt, n, kind)
            x = gen(rng_for(nm), (n,), dt, kind=kind, lo=0.0, hi=1.0)
            (want,) = opmath(fn, [(x, dt)], [dt])
            cases.append(Case(nm, [(x, dt)], "%%r0 = step.%s %%a0 dims = [0] : %s -> %s"
                              % (op, ttype((n,), dt), ttype((), dt)),
                              [((), dt)], [want],
                              [acc_tol(dt) if op != "reduce_max" else T_MOVE]))
    nm = "reduce_sum.i64.big_%d" % n
    x = gen(rng_for(nm), (n,), "i64", kind="int", lo=-2**40, hi=2**40)
    (want,) = opmath(lambda t: torch.sum(t, dim=[0]), [(x, "i64")], ["i64"])
    cases.append(Case(nm, [(x, "i64")], "%%r0 = step.reduce_sum %%a0 dims = [0] : %s -> %s"
                      % (ttype((n,), "i64"), ttype((), "i64")), [((), "i64")], [want],
                      [T_MOVE]))
    nm = "reduce_sum.f32.big_1024x1024_dims01"
    x = gen(rng_for(nm), (1024, 1024), "f32", scale=1.0)
    (want,) = opmath(lambda t: torch.sum(t, dim=[0, 1]), [(x, "f32")], ["f32"])
    cases.append(Case(nm, [(x, "f32")],
                      "%r0 = step.reduce_sum %a0 dims = [0, 1] : tensor<1024x1024xf32> -> tensor<f32>",
                      [((), "f32")], [want], [T_ACC32]))
    return cases


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------

def matmul_cases():
    cases = []
    # (lhs shape as stored, rhs shape as stored, transpose_a, transpose_b)
    plans = [((4, 8), (8, 5), False, False), ((8, 4), (8, 5), True, False),
             ((4, 8), (5, 8), False, True), ((8, 4), (5, 8), True, True),
             ((2, 3, 4, 8), (2, 3, 8, 5), False, False),
             ((2, 3, 8, 4), (2, 3, 5, 8), True, True),
             ((3, 4, 8), (8, 5), False, False),  # rank-2 rhs shared by the batch
             ((3, 4, 8), (5, 8), False, True),
             ((2, 2, 8, 4), (8, 6), True, False),
             ((1, 1), (1, 1), False, False), ((1, 8), (8, 1), False, False),
             ((3, 0), (0, 4), False, False),  # K = 0: zeros
             ((0, 8), (8, 5), False, False), ((4, 8), (8, 0), False, False),
             ((64, 128), (128, 96), False, False), ((2, 33, 65), (2, 65, 17), False, False),
             ((64, 200), (48, 200), False, True)]
    for dt in FLOATS:
        for ls, rs, ta, tb in plans:
            la = list(ls)
            if ta:
                la[-2], la[-1] = la[-1], la[-2]
            rb = list(rs)
            if tb:
                rb[-2], rb[-1] = rb[-1], rb[-2]
            out = tuple(la[:-1]) + (rb[-1],)
            nm = "matmul.%s.%s_%s%s%s" % (dt, shape_str(ls), shape_str(rs),
                                         "_ta" if ta else "", "_tb" if tb else "")
            r = rng_for(nm)
            a, b = gen(r, ls, dt), gen(r, rs, dt)

            def fn(x, y, ta=ta, tb=tb):
                if ta:
                    x = x.transpose(-1, -2)
                if tb:
                    y = y.transpose(-1, -2)
                return torch.matmul(x, y)
            (want,) = opmath(fn, [(a, dt), (b, dt)], [dt])
            cases.append(Case(nm, [(a, dt), (b, dt)],
                              "%%r0 = step.matmul %%a0, %%a1%s%s : %s, %s -> %s" % (
                                  " transpose_a" if ta else "", " transpose_b" if tb else "",
                                  ttype(ls, dt), ttype(rs, dt), ttype(out, dt)),
                              [(out, dt)], [want], [acc_tol(dt)]))
    # A linear layer through broadcast_in_dim: x @ w^T + b.
    for dt in FLOATS:
        nm = "matmul.%s.linear_bias" % dt
        r = rng_for(nm)
        x, w, b = gen(r, (6, 16), dt), gen(r, (10, 16), dt), gen(r, (10,), dt)
        # torch F.linear rounds x @ w^T to the dtype before adding the bias;
        # step rounds after matmul too (two ops), so the reference does both.
        (mm,) = opmath(lambda x, w: x @ w.t(), [(x, dt), (w, dt)], [dt])
        (want,) = opmath(lambda m, b: m + b, [(mm, dt), (b, dt)], [dt])
        cases.append(Case(nm, [(x, dt), (w, dt), (b, dt)],
                          ["%%m = step.matmul %%a0, %%a1 transpose_b : %s, %s -> %s"
                           % (ttype((6, 16), dt), ttype((10, 16), dt), ttype((6, 10), dt)),
                           "%%bb = step.broadcast_in_dim %%a2, dims = [1] : %s -> %s"
                           % (ttype((10,), dt), ttype((6, 10), dt)),
                           "%%r0 = step.add %%m, %%bb : %s" % ttype((6, 10), dt)],
                          [((6, 10), dt)], [want], [acc_tol(dt)]))
    return cases
