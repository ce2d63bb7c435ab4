"""Parity cases: elementwise ops (unary, binary, compare, select,
broadcasting) and casts."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from .harness import (ALL, Case, EXACT, FLOATS, HALVES, INF, INTS, NAN, NP,
                      NUMS, REL, TORCH, T_CAST, T_IEEE, T_MOVE, T_TRANS16,
                      T_TRANS32, ULP, WHY_GELU32, Tol, as_f64, from_torch,
                      gelu16_tol, gen, ilist, opmath, rng_for, shape_str,
                      store, to_torch, trans_tol, ttype)

# ---------------------------------------------------------------------------
# Elementwise: unary, binary, compare, select, broadcasting
# ---------------------------------------------------------------------------

# name -> (torch fn, input generator kwargs, allows ints, f32 tol, half tol)
UNARY = {
    "neg": (torch.neg, dict(kind="normal", scale=3), True, T_IEEE, T_IEEE),
    "abs": (torch.abs, dict(kind="normal", scale=3), True, T_IEEE, T_IEEE),
    "relu": (torch.relu, dict(kind="normal", scale=3), True, T_IEEE, T_IEEE),
    "exp": (torch.exp, dict(kind="normal", scale=4), False, T_TRANS32, T_TRANS16),
    "log": (torch.log, dict(kind="uniform", lo=1e-3, hi=50), False, T_TRANS32, T_TRANS16),
    "tanh": (torch.tanh, dict(kind="normal", scale=3), False, T_TRANS32, T_TRANS16),
    "sigmoid": (torch.sigmoid, dict(kind="normal", scale=6), False, T_TRANS32, T_TRANS16),
    "sqrt": (torch.sqrt, dict(kind="uniform", lo=0, hi=100), False, T_IEEE, T_IEEE),
    "rsqrt": (torch.rsqrt, dict(kind="uniform", lo=1e-3, hi=100), False,
              REL(1e-5, 1e-30, "f32 rsqrt: 1/sqrt(x) rounds twice (torch "
                  "also computes 1/sqrt), so results may differ by an ulp"),
              ULP(1, "f16/bf16 rsqrt: f32 1/sqrt(x) rounds twice before the "
                  "final rounding, so it may land 1 half ulp apart")),
    "erf": (torch.erf, dict(kind="normal", scale=2), False, T_TRANS32, T_TRANS16),
    "sin": (torch.sin, dict(kind="normal", scale=10), False, T_TRANS32, T_TRANS16),
    "cos": (torch.cos, dict(kind="normal", scale=10), False, T_TRANS32, T_TRANS16),
}
GELU32 = REL(1e-5, 1.0, WHY_GELU32)

SPECIAL_F = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-40, -1e-40,
             3e-5, -3e-5, 1e30, -1e30, 88.0, -88.0, 100.0, -100.0, 2.0, 1e4]
SPECIAL_I = {"i32": [-2**31, 2**31 - 1, 0, -1, 1, 7, -7],
             "i64": [-2**63, 2**63 - 1, 0, -1, 1, 2**40, -2**40]}


def gelu_grad16_tol(g, x, dt):
    """f16/bf16 gelu_grad: both sides compute g * gelu'(x) in f32 and round
    once; 1 + erf (1 + tanh) cancels for x << 0, so each side's absolute
    error is about |g| |x| 2^-24: 1 ulp, or at most max|g| max|x| 2^-23."""
    def most(a):
        v = as_f64(a, dt)
        return float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0))
    return Tol("ulp", gelu_grad16_tol.__doc__, n=1,
               abs_err=most(g) * most(x) * 2.0 ** -23)


def unary_case(name, op, dt, x, ref, tol, attr=""):
    t = ttype(x.shape, dt)
    (want,) = opmath(ref, [(x, dt)], [dt])
    return Case(name, [(x, dt)], "%%r0 = step.%s %%a0%s : %s" % (op, attr, t),
                [(x.shape, dt)], [want], [tol], elementwise=True)


def elementwise_cases():
    cases = []
    shapes_edge = [(), (0, 3), (1, 1, 1), (2, 1, 3, 1)]
    for op, (fn, g, ints, t32, t16) in UNARY.items():
        for dt in NUMS:
            if dt in INTS and not ints:
                continue
            tol = t32 if dt == "f32" else (t16 if dt in HALVES else T_MOVE)
            for shape in [(4, 7)] + (shapes_edge if dt == "f32" else []):
                nm = "unary.%s.%s.%s" % (op, dt, shape_str(shape))
                x = gen(rng_for(nm), shape, dt, **g)
                cases.append(unary_case(nm, op, dt, x, fn, tol))
            nm = "unary.%s.%s.specials" % (op, dt)
            x = store(SPECIAL_I[dt] if dt in INTS else SPECIAL_F, dt)
            cases.append(unary_case(nm, op, dt, x, fn, tol))
    for approx in ("none", "tanh"):
        fn = (lambda t, a=approx: F.gelu(t, approximate=a))
        for dt in FLOATS:
            for shape in [(4, 7), (64, 33)] + ([(), (0, 5)] if dt == "f32" else []):
                nm = "unary.gelu_%s.%s.%s" % (approx, dt, shape_str(shape))
                x = gen(rng_for(nm), shape, dt, scale=3)
                tol = GELU32 if dt == "f32" else gelu16_tol(x, dt)
                cases.append(unary_case(nm, "gelu", dt, x, fn, tol,
                                        " approximate " + approx))
            nm = "unary.gelu_%s.%s.specials" % (approx, dt)
            tol = GELU32 if dt == "f32" else T_TRANS16
            cases.append(unary_case(nm, "gelu", dt, store(SPECIAL_F, dt), fn,
                                    tol, " approximate " + approx))
    # step.gelu_grad against aten.gelu_backward (the op of gelu's VJP).
    # Tolerances as gelu's: 1 + erf (1 + tanh) cancels for x << 0 in both.
    for approx in ("none", "tanh"):
        fn = (lambda g, x, a=approx:
              torch.ops.aten.gelu_backward(g, x, approximate=a))
        for dt in FLOATS:
            for shape in [(4, 7), (64, 33)] + ([(), (0, 5)] if dt == "f32" else []):
                nm = "binary.gelu_grad_%s.%s.%s" % (approx, dt, shape_str(shape))
                r = rng_for(nm)
                g = gen(r, shape, dt, scale=2)
                x = gen(r, shape, dt, scale=3)
                (want,) = opmath(fn, [(g, dt), (x, dt)], [dt])
                tol = GELU32 if dt == "f32" else gelu_grad16_tol(g, x, dt)
                t = ttype(shape, dt)
                cases.append(Case(
                    nm, [(g, dt), (x, dt)],
                    "%%r0 = step.gelu_grad %%a0, %%a1 approximate %s : %s"
                    % (approx, t), [(shape, dt)], [want], [tol],
                    elementwise=True))

    # binary
    def bin_ref(op):
        return {"add": torch.add, "sub": torch.sub, "mul": torch.mul,
                "div": torch.div, "max": torch.maximum, "min": torch.minimum,
                "pow": torch.pow}[op]

    def binary_case(nm, op, dt, a, b, tol):
        fn = bin_ref(op)
        if op == "div" and dt in INTS:
            fn = (lambda x, y: torch.div(x, y, rounding_mode="trunc"))
        (want,) = opmath(fn, [(a, dt), (b, dt)], [dt])
        t = ttype(a.shape, dt)
        return Case(nm, [(a, dt), (b, dt)],
                    "%%r0 = step.%s %%a0, %%a1 : %s" % (op, t),
                    [(a.shape, dt)], [want], [tol], elementwise=True)

    bin_special = [(NAN, 1.0), (1.0, NAN), (NAN, NAN), (INF, 1.0),
                   (INF, -INF), (INF, INF), (-INF, -INF), (0.0, -0.0),
                   (-0.0, 0.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0),
                   (1e30, 1e30), (-1e-40, 1e-40), (2.0, 3.0), (-3.0, 2.0),
                   (-2.0, 3.0), (-2.0, 0.5), (0.0, -1.0), (-0.0, -1.0),
                   (2.0, 1000.0), (INF, -1.0), (1.0, NAN), (NAN, 0.0),
                   (65504.0, 2.0), (1e-30, 1e-30)]
    int_special = {"i32": [(2**31 - 1, 1), (-2**31, 1), (65536, 65536),
                           (7, -2), (-7, 2), (-7, -2), (0, 5), (-2**31, 2),
                           (2**31 - 1, -1), (5, 7)],
                   "i64": [(2**63 - 1, 1), (-2**63, 1), (2**32, 2**32),
                           (7, -2), (-7, 2), (-7, -2), (0, 5), (-2**63, 2),
                           (2**63 - 1, -1), (5, 7)]}
    for op in ("add", "sub", "mul", "div", "max", "min", "pow"):
        for dt in NUMS:
            if op == "pow" and dt in INTS:
                continue
            if op == "pow":
                tol = trans_tol(dt)
            else:
                tol = T_IEEE if dt in FLOATS else T_MOVE
            for shape in [(5, 6)] + ([(), (0, 4), (1, 1), (3, 1, 2)]
                                     if dt in ("f32", "i32") else []):
                nm = "binary.%s.%s.%s" % (op, dt, shape_str(shape))
                r = rng_for(nm)
                if op == "pow":
                    a = gen(r, shape, dt, kind="uniform", lo=0.05, hi=4)
                    b = gen(r, shape, dt, kind="uniform", lo=-4, hi=4)
                elif op == "div" and dt in INTS:
                    a = gen(r, shape, dt, kind="int", lo=-1000, hi=1000)
                    b = gen(r, shape, dt, kind="int", lo=1, hi=50)
                    b = np.where(r.random(shape) < 0.5, -b, b).astype(NP[dt])
                elif op == "div":
                    a = gen(r, shape, dt, scale=4)
                    b = gen(r, shape, dt, kind="uniform", lo=0.25, hi=4)
                    b = np.where(r.random(shape) < 0.5, store(-as_f64(b, dt), dt), b)
                else:
                    a = gen(r, shape, dt, scale=4)
                    # ties for max/min
                    b = np.where(r.random(shape) < 0.2, a,
                                 gen(r, shape, dt, scale=4)).astype(NP[dt])
                cases.append(binary_case(nm, op, dt, a, b, tol))
            nm = "binary.%s.%s.specials" % (op, dt)
            if dt in INTS:
                pairs = int_special[dt]
                if op == "div":  # MIN / -1 traps in C; torch's answer is UB
                    pairs = [(x, y) for x, y in pairs if y != 0 and
                             not (y == -1 and x < 0)]
            else:
                pairs = bin_special
            a = store([p[0] for p in pairs], dt)
            b = store([p[1] for p in pairs], dt)
            cases.append(binary_case(nm, op, dt, a, b, tol))
    # pow with a negative base and integral exponents
    for dt in FLOATS:
        nm = "binary.pow.%s.negbase_intexp" % dt
        r = rng_for(nm)
        a = gen(r, (4, 6), dt, kind="uniform", lo=-3, hi=3)
        b = gen(r, (4, 6), dt, kind="int", lo=-3, hi=4)
        cases.append(binary_case(nm, "pow", dt, a, b, trans_tol(dt)))

    # compare
    ops = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
           "gt": torch.gt, "ge": torch.ge}
    for d, fn in ops.items():
        for dt in ALL:
            for shape in [(6, 5)] + ([(), (0, 2)] if dt == "f32" else []):
                nm = "compare.%s.%s.%s" % (d, dt, shape_str(shape))
                r = rng_for(nm)
                if dt == "i1":
                    a, b = gen(r, shape, dt), gen(r, shape, dt)
                else:  # small integers so that ties are common
                    a = gen(r, shape, dt, kind="int", lo=-3, hi=4)
                    b = gen(r, shape, dt, kind="int", lo=-3, hi=4)
                (want,) = opmath(fn, [(a, dt), (b, dt)], ["i1"])
                cases.append(Case(nm, [(a, dt), (b, dt)],
                                  "%%r0 = step.compare %s, %%a0, %%a1 : %s"
                                  % (d, ttype(shape, dt)),
                                  [(shape, "i1")], [want], [T_MOVE],
                                  elementwise=True))
            if dt in FLOATS:
                nm = "compare.%s.%s.specials" % (d, dt)
                a = store([p[0] for p in bin_special], dt)
                b = store([p[1] for p in bin_special], dt)
                (want,) = opmath(fn, [(a, dt), (b, dt)], ["i1"])
                cases.append(Case(nm, [(a, dt), (b, dt)],
                                  "%%r0 = step.compare %s, %%a0, %%a1 : %s"
                                  % (d, ttype(a.shape, dt)),
                                  [(a.shape, "i1")], [want], [T_MOVE],
                                  elementwise=True))

    # select
    for dt in ALL:
        for shape in [(5, 4)] + ([(), (0, 3), (2, 1, 3)] if dt == "f32" else []):
            nm = "select.%s.%s" % (dt, shape_str(shape))
            r = rng_for(nm)
            m = gen(r, shape, "i1")
            a, b = gen(r, shape, dt), gen(r, shape, dt)
            (want,) = opmath(torch.where, [(m, "i1"), (a, dt), (b, dt)], [dt])
            cases.append(Case(nm, [(m, "i1"), (a, dt), (b, dt)],
                              "%%r0 = step.select %%a0, %%a1, %%a2 : %s, %s"
                              % (ttype(shape, "i1"), ttype(shape, dt)),
                              [(shape, dt)], [want], [T_MOVE],
                              elementwise=True))
    nm = "select.f32.nan_inf"
    a = store([NAN, INF, -INF, -0.0, 1.0], "f32")
    b = store([1.0, NAN, 0.0, 0.0, -INF], "f32")
    m = np.array([True, False, True, True, False])
    (want,) = opmath(torch.where, [(m, "i1"), (a, "f32"), (b, "f32")], ["f32"])
    cases.append(Case(nm, [(m, "i1"), (a, "f32"), (b, "f32")],
                      "%r0 = step.select %a0, %a1, %a2 : tensor<5xi1>, tensor<5xf32>",
                      [((5,), "f32")], [want], [T_MOVE]))

    # NumPy-style broadcasting written with step.broadcast_in_dim, checked
    # against torch's implicit broadcasting.
    bc = [  # (op, lhs shape, rhs shape, out shape, lhs dims, rhs dims)
        ("add", (4, 5), (5,), (4, 5), None, [1]),
        ("mul", (4, 5), (4, 1), (4, 5), None, [0, 1]),
        ("sub", (2, 3, 4), (), (2, 3, 4), None, []),
        ("max", (3, 1, 5), (1, 4, 1), (3, 4, 5), [0, 1, 2], [0, 1, 2]),
        ("div", (1,), (2, 3), (2, 3), [1], None),
        ("add", (0, 3), (3,), (0, 3), None, [1]),
        ("min", (6, 1), (1, 7), (6, 7), [0, 1], [0, 1]),
    ]
    for dt in ("f32", "bf16", "i64"):
        for op, ls, rs, os_, ld, rd in bc:
            if op == "div" and dt in INTS:
                continue
            nm = "broadcast_binary.%s.%s.%s_%s" % (op, dt, shape_str(ls), shape_str(rs))
            r = rng_for(nm)
            a = gen(r, ls, dt, scale=3)
            b = gen(r, rs, dt, kind="uniform", lo=0.5, hi=3) if op == "div" \
                else gen(r, rs, dt, scale=3)
            lines, names = [], []
            for k, (s, dims) in enumerate(((ls, ld), (rs, rd))):
                if dims is None:
                    names.append("%%a%d" % k)
                else:
                    lines.append("%%b%d = step.broadcast_in_dim %%a%d, dims = %s : %s -> %s"
                                 % (k, k, ilist(dims), ttype(s, dt), ttype(os_, dt)))
                    names.append("%%b%d" % k)
            lines.append("%%r0 = step.%s %s, %s : %s" % (op, names[0], names[1],
                                                         ttype(os_, dt)))
            (want,) = opmath(bin_ref(op), [(a, dt), (b, dt)], [dt])
            cases.append(Case(nm, [(a, dt), (b, dt)], lines, [(os_, dt)], [want],
                              [T_IEEE if dt in FLOATS else T_MOVE]))
    return cases


# ---------------------------------------------------------------------------
# Casts
# ---------------------------------------------------------------------------

def cast_source(rng, src, dst):
    """Inputs for src -> dst whose torch result is defined (float -> int out
    of range or NaN is undefined behaviour in torch)."""
    n = 40
    if src == "i1":
        return gen(rng, (n,), "i1")
    if src in INTS:
        v = list(rng.integers(-2**20, 2**20, size=n - 8))
        v += [0, 1, -1, 65504, 65519, 65520, 2**24 - 1, -(2**24 - 1)]
        if src == "i64" and dst in INTS + ("i1",):
            v[:6] = [2**40 + 5, -2**35 - 1, 2**32, 2**31, -2**31 - 1, 2**63 - 1]
        return store(v, src)
    # float source
    if dst in INTS:
        big = 2e9 if dst == "i32" else 1e18
        v = list(rng.standard_normal(n - 12) * 1000)
        v += [0.5, -0.5, 1.5, -1.5, 2.7, -2.7, 0.0, -0.0, 1e-30, 65504.0,
              min(big, 65504.0) if src == "f16" else big,
              -(min(big, 65504.0) if src == "f16" else big)]
        return store(v, src)
    v = list(rng.standard_normal(n - 24) * 100)
    v += [NAN, INF, -INF, 0.0, -0.0, 1e-30, -1e-30, 1e-8, 3e-5, 6e-8, 1e5,
          65519.0, 65520.0, 3e38, -3e38, 1.00390625, 1.01171875, 1.0009765625,
          1.00048828125, 1e-40, 255.5, 256.5, 257.0, 0.1]
    return store(v, src)


def cast_cases():
    cases = []
    for src in ALL:
        for dst in ALL:
            nm = "cast.%s_to_%s" % (src, dst)
            x = cast_source(rng_for(nm), src, dst)
            (want,) = opmath(lambda t: t.to(TORCH[dst]), [(x, src)], [dst]) \
                if src not in HALVES else \
                [from_torch(to_torch(x, src).to(TORCH[dst]), dst)]
            cases.append(Case(nm, [(x, src)],
                              "%%r0 = step.cast %%a0 : %s -> %s" % (
                                  ttype(x.shape, src), ttype(x.shape, dst)),
                              [(x.shape, dst)], [want], [T_CAST],
                              elementwise=True))
    # Edge shapes
    for shape in [(), (0, 4), (2, 1, 3)]:
        for src, dst in [("f32", "bf16"), ("i64", "f32"), ("bf16", "i1")]:
            nm = "cast.%s_to_%s.%s" % (src, dst, shape_str(shape))
            x = gen(rng_for(nm), shape, src, scale=10)
            want = from_torch(to_torch(x, src).to(TORCH[dst]), dst)
            cases.append(Case(nm, [(x, src)],
                              "%%r0 = step.cast %%a0 : %s -> %s" % (
                                  ttype(shape, src), ttype(shape, dst)),
                              [(shape, dst)], [want], [T_CAST]))
    # Large integers into bf16 / f32 / f16: the result should be the
    # integer rounded to nearest even *once*. torch's int -> bf16 goes
    # through float (two roundings); this case records what torch gives.
    for src in INTS:
        for dst in ("bf16", "f32", "f16"):
            nm = "cast.%s_to_%s.large_ints" % (src, dst)
            r = rng_for(nm)
            hi = 2**31 - 1 if src == "i32" else 2**62
            v = list(r.integers(2**24, hi, size=24))
            v += [2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**25 + 2**17 + 1,
                  2**24 + 1, 2**24 + 3, 16777217 * 3]
            x = store(v, src)
            want = from_torch(to_torch(x, src).to(TORCH[dst]), dst)
            cases.append(Case(nm, [(x, src)],
                              "%%r0 = step.cast %%a0 : %s -> %s" % (
                                  ttype(x.shape, src), ttype(x.shape, dst)),
                              [(x.shape, dst)], [want], [T_CAST],
                              elementwise=True))
    # The documented step contract where torch is undefined: float -> int
    # truncates toward zero, saturates out of range, and maps NaN to 0.
    for src in FLOATS:
        for dst in INTS:
            nm = "cast.%s_to_%s.contract_saturate_nan" % (src, dst)
            x = store([NAN, INF, -INF, 3e38, -3e38, 1e19, -1e19, 3e9, -3e9,
                       -0.9, 0.9], src)
            info = np.iinfo(NP[dst])
            xf = as_f64(x, src)
            want = np.array([0 if math.isnan(f) else
                             (info.max if f >= 2.0 ** (info.bits - 1) else
                              (info.min if f < -2.0 ** (info.bits - 1) else int(f)))
                             for f in xf], dtype=NP[dst])
            cases.append(Case(nm, [(x, src)],
                              "%%r0 = step.cast %%a0 : %s -> %s" % (
                                  ttype(x.shape, src), ttype(x.shape, dst)),
                              [(x.shape, dst)], [want],
                              [EXACT("documented step semantics (torch leaves "
                                     "these undefined)")], elementwise=True))
    return cases
