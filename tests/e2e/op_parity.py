#!/usr/bin/python3
"""PyTorch parity tests of the step dialect on the CPU reference interpreter.

    op_parity.py STEP_INTERP [--group G]... [--filter SUBSTR] [--jobs N]
                 [--keep DIR] [--list] [-v]

For every op of the `step` dialect that PyTorch has, each case writes a small
.mlir file holding one function, random inputs (fixed seed per case) as .npy
files, runs `step-interp FILE --func=case --inputs DIR --out DIR`, and compares
each result with PyTorch on the CPU. Error cases check that step-interp exits 1
with a message naming the op (or the input file) at fault.

Plain Python (no pytest): it needs only numpy and torch. One line per case,
then a summary line `N passed, M failed`; the exit status is 1 when any case
failed (ctest reads it).

How references are computed
---------------------------
* f32, integers, i1: PyTorch on the same inputs, in the same dtype.
* f16/bf16: PyTorch's f32 op on the half inputs widened to f32 (exact), each
  result rounded once to the half type. This is PyTorch's CPU "opmath"
  contract (half ops are computed in float and rounded on store), and it is
  the step dialect's documented semantics. It is not torch's native half
  kernel because the installed torch (1.13) lacks most f16 CPU kernels
  (exp_vml_cpu, addmm, softmax, layer_norm ... raise "not implemented for
  'Half'") and several of its bf16 kernels round intermediates to bf16
  (measured: gelu(tanh), log_softmax, layer_norm, cross_entropy's
  log_softmax differ from the f32 result by thousands of ulps), which is a
  1.13 quirk, not the semantics StepJIT targets.

Tolerances (each Tol below carries its reason; failures print it)
------------------------------------------------------------------
* exact: bitwise equality (+0 == -0, any NaN == any NaN). Data movement,
  integer ops, comparisons, casts, and IEEE basic operations (+ - * / sqrt,
  max/min/neg/abs/relu) whose results are correctly rounded. For f16/bf16
  inputs f32 holds +-*/ and sqrt results with >= 2p+2 bits, so rounding the
  f32 result once to the half type is the correctly rounded half result
  (no double-rounding error), hence bitwise too.
* ulp(1): f16/bf16 results of transcendental or accumulating ops: both sides
  compute in f32 (or wider) and round once; the f32 values may differ by a
  few f32 ulps (glibc libm vs SLEEF, or summation order), which can move the
  rounded half result by at most one half ulp.
* rel(1e-5, floor): f32 results, err = |got - want| / max(|want|, floor) per
  element, <= 1e-5 (about 84 f32 ulps). floor = 1e-30 for per-element
  accurate functions (it only relaxes denormals, whose relative precision is
  poor); floor = 'max' (the largest |want| of the tensor) for ops that sum
  many terms (matmul, reductions, softmax, norms, losses, attention): their
  per-element error is bounded relative to the magnitude of the terms, not of
  a result that cancels to near 0.
"""

import argparse
import concurrent.futures
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)  # deterministic, order-stable torch references

# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------

FLOATS = ("f32", "f16", "bf16")
HALVES = ("f16", "bf16")
INTS = ("i32", "i64")
NUMS = FLOATS + INTS
ALL = NUMS + ("i1",)

# numpy storage dtype per step dtype; bf16 travels as its raw bits ('<u2').
NP = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2"),
      "i32": np.dtype("<i4"), "i64": np.dtype("<i8"), "i1": np.dtype("|b1")}
TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
         "i32": torch.int32, "i64": torch.int64, "i1": torch.bool}


def to_torch(a, dt):
    a = np.array(a, dtype=NP[dt], order="C")  # keeps rank 0, unlike
    # np.ascontiguousarray, which promotes it to rank 1
    if dt == "bf16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def from_torch(t, dt):
    t = t.detach().to(TORCH[dt]).contiguous()
    if dt == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    return t.numpy().copy()


def store(values, dt):
    """Numeric values -> storage array of `dt`, rounded as torch's .to()
    (floats go through f32, which is exact for the values used here)."""
    v = np.asarray(values)
    if dt in FLOATS:
        return from_torch(torch.from_numpy(
            np.array(v, dtype=np.float32, order="C")), dt)
    return np.array(v, dtype=NP[dt], order="C")


def as_f64(a, dt):
    """Storage array -> float64 values (bf16 bits widened exactly)."""
    a = np.asarray(a)
    if dt == "bf16":
        b = (a.reshape(-1).astype(np.uint32) << 16).view(np.float32)
        return b.astype(np.float64).reshape(a.shape)
    return a.astype(np.float64)


def ttype(shape, dt):
    """tensor<...> type; a negative dim is dynamic ('?')."""
    dims = "".join(("%dx" % d) if d >= 0 else "?x" for d in shape)
    return "tensor<%s%s>" % (dims, dt)


def flt(v):
    """An MLIR float literal (the lexer needs a '.')."""
    return "%.17e" % v


def ilist(xs):
    return "[" + ", ".join(str(int(x)) for x in xs) + "]"


# id(expected array) -> (array, fn, args, out_dts, k): lets a failing case
# re-run its reference in float64 to tell a kernel bug from rounding error of
# torch's own f32 computation (diagnosis only; it never changes a verdict).
_ORACLES = {}


def opmath(fn, args, out_dts, wide=torch.float32):
    """torch reference: fn on the inputs (f16/bf16 widened to f32), each
    float result rounded once to its dtype. args: [(storage, dt)].
    wide=torch.float64 widens every float input to f64 instead (diagnosis)."""
    targs = []
    for a, dt in args:
        t = to_torch(a, dt)
        if dt in FLOATS and (dt in HALVES or wide == torch.float64):
            t = t.to(wide)
        targs.append(t)
    outs = fn(*targs)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    res = [from_torch(o, dt) for o, dt in zip(outs, out_dts)]
    if wide == torch.float32:
        for k, r in enumerate(res):
            _ORACLES[id(r)] = (r, fn, args, out_dts, k)
    return res


def f64_diagnosis(got, want, dt, tol):
    """For a failed float result: how far `got` and torch's f32 reference
    are from torch computing in float64 (rounded once to dt)."""
    entry = _ORACLES.get(id(want))
    if entry is None or entry[0] is not want or dt not in FLOATS:
        return ""
    _, fn, args, out_dts, k = entry
    try:
        ref64 = opmath(fn, args, out_dts, wide=torch.float64)[k]
    except Exception as e:  # some torch CPU kernels lack f64 versions
        return " [f64 diagnosis unavailable: %s]" % str(e)[:80]
    ok_s, d_s, _ = compare(got, ref64, dt, tol)
    ok_t, d_t, _ = compare(want, ref64, dt, tol)
    return (" [vs torch in float64: step %s (%s); torch-f32 reference %s (%s)]"
            % ("within tolerance" if ok_s else "OUTSIDE tolerance", d_s.split(";")[0],
               "within tolerance" if ok_t else "OUTSIDE tolerance", d_t.split(";")[0]))


# ---------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------

class Tol:
    def __init__(self, kind, why, n=0, rtol=0.0, floor=0.0, abs_err=0.0):
        self.kind, self.why, self.n, self.rtol, self.floor = \
            kind, why, n, rtol, floor
        # kind "ulp" only: an element also passes when |got - want| <= abs_err.
        self.abs_err = abs_err

    def __str__(self):
        if self.kind == "exact":
            return "exact"
        if self.kind == "ulp":
            if self.abs_err:
                return "<=%d ulp or abs<=%.3g" % (self.n, self.abs_err)
            return "<=%d ulp" % self.n
        return "rel<=%g floor=%s" % (self.rtol, self.floor)


def EXACT(why):
    return Tol("exact", why)


def ULP(n, why):
    return Tol("ulp", why, n=n)


def REL(rtol, floor, why):
    return Tol("rel", why, rtol=rtol, floor=floor)


WHY_MOVE = "data movement / integer / boolean result: must be bit-identical"
WHY_IEEE = ("IEEE basic operation, correctly rounded in f32 on both sides; "
            "for f16/bf16 the f32 result holds >= 2p+2 bits so one rounding "
            "is correct: bit-identical")
WHY_TRANS32 = ("f32 transcendental: glibc libm (step) vs SLEEF/vectorized "
               "(torch) are each within a few ulp; rel 1e-5 = ~84 ulp; floor "
               "1e-30 only relaxes denormal results")
WHY_TRANS16 = ("f16/bf16 transcendental: both compute in f32 and round once; "
               "the f32 values may differ by a few f32 ulp (libm vs SLEEF), "
               "moving the rounded half result by at most 1 ulp")
WHY_ACC32 = ("f32 op that sums many terms in a different order/precision "
             "(step accumulates in double, torch in f32): error normwise "
             "relative to the largest |result|, <= 1e-5")
WHY_ACC16 = ("f16/bf16 op computed in f32 or wider by both and rounded once; "
             "accumulation order moves the f32 value by a few f32 ulp, the "
             "rounded result by at most 1 ulp")
WHY_GELU32 = ("f32 gelu: 1 + erf(x/sqrt2) (or 1 + tanh) cancels for x << 0, "
              "so the absolute error is ~|x| * 2^-24 from a 1-ulp erf/tanh "
              "difference; floor 1.0 = absolute 1e-5 below |y| = 1")

T_MOVE = EXACT(WHY_MOVE)
T_CAST = EXACT("conversion: exact, or one IEEE round-to-nearest-even, or "
               "truncation / two's-complement wrap: bit-identical")
T_IEEE = EXACT(WHY_IEEE)
T_TRANS32 = REL(1e-5, 1e-30, WHY_TRANS32)
T_TRANS16 = ULP(1, WHY_TRANS16)
T_ACC32 = REL(1e-5, "max", WHY_ACC32)
T_ACC16 = ULP(1, WHY_ACC16)


def gelu16_tol(x, dt):
    """f16/bf16 gelu: both sides evaluate 0.5*x*(1 + erf(x/sqrt2)) (or the
    tanh form) in f32, where 1 + erf cancels for x << 0: each side's absolute
    error is about |x| * 2^-24 (one f32 ulp of the 1 + erf term times |x|/2,
    twice), which can be several half ulps of a tiny result. torch's own
    scalar and vectorized paths differ by 2-3 f16 ulps there. So: 1 ulp, or
    an absolute error of at most max|x| * 2^-23."""
    xmax = float(np.max(np.abs(as_f64(x, dt)[np.isfinite(as_f64(x, dt))]),
                        initial=0.0))
    return Tol("ulp", gelu16_tol.__doc__, n=1, abs_err=xmax * 2.0 ** -23)


def trans_tol(dt):
    return T_TRANS32 if dt == "f32" else T_TRANS16


def acc_tol(dt):
    return T_ACC32 if dt == "f32" else T_ACC16


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------

def _ordered(bits, width):
    """Sign-magnitude float bits -> integers ordered like the values (so the
    difference is the ulp distance; +0 and -0 both map to 0)."""
    b = bits.astype(np.int64)
    sign = np.int64(1) << (width - 1)
    mag = b & (sign - 1)
    return np.where(b & sign, -mag, mag)


def _isnan(a, dt):
    if dt == "bf16":
        a = a.astype(np.uint32)
        return ((a & 0x7F80) == 0x7F80) & ((a & 0x7F) != 0)
    return np.isnan(a)


def _fmt(a, dt, i):
    v = np.asarray(a).reshape(-1)[i]
    if dt == "bf16":
        return "%r (bf16 0x%04x)" % (float(as_f64(v, dt)), int(v))
    if dt == "f16":
        return "%r (f16 0x%04x)" % (float(v), int(np.asarray(v).view(np.uint16)))
    if dt == "f32":
        return "%r (0x%08x)" % (float(v), int(np.asarray(v, np.float32).view(np.uint32)))
    return repr(v.item() if hasattr(v, "item") else v)


def compare(got, want, dt, tol):
    """Returns (ok, detail, worst_flat_index)."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.dtype != NP[dt]:
        return False, "dtype %s, expected %s" % (got.dtype.str, NP[dt].str), None
    if got.shape != want.shape:
        return False, "shape %s, expected %s" % (got.shape, want.shape), None
    if got.size == 0:
        return True, "empty", None
    g, w = got.reshape(-1), want.reshape(-1)
    if dt not in FLOATS:
        bad = np.nonzero(g != w)[0]
        if bad.size:
            i = int(bad[0])
            return False, "%d elements differ; first at %d: got %s, want %s" % (
                bad.size, i, _fmt(g, dt, i), _fmt(w, dt, i)), i
        return True, "exact", None
    ng, nw = _isnan(g, dt), _isnan(w, dt)
    nanbad = np.nonzero(ng != nw)[0]
    if nanbad.size:
        i = int(nanbad[0])
        return False, "NaN mismatch at %d elements; first at %d: got %s, want %s" % (
            nanbad.size, i, _fmt(g, dt, i), _fmt(w, dt, i)), i
    ok = ~nw
    gf, wf = as_f64(g, dt), as_f64(w, dt)
    if tol.kind in ("exact", "ulp"):
        if dt == "f32":
            og = _ordered(g.view(np.uint32), 32)
            ow = _ordered(w.view(np.uint32), 32)
        else:
            og = _ordered(g.view(np.uint16), 16)
            ow = _ordered(w.view(np.uint16), 16)
        d = np.where(ok, np.abs(og - ow), 0)
        if tol.abs_err:
            d = np.where(np.abs(gf - wf) <= tol.abs_err, 0, d)
        i = int(np.argmax(d))
        worst = int(d[i])
        limit = 0 if tol.kind == "exact" else tol.n
        if worst > limit:
            return False, ("%d elements beyond %s; worst %d ulp at %d: got %s, "
                           "want %s" % (int((d > limit).sum()), tol, worst, i,
                                        _fmt(g, dt, i), _fmt(w, dt, i))), i
        return True, "max %d ulp" % worst, None
    # relative error with a floor
    infw = ok & np.isinf(wf)
    infbad = np.nonzero(infw & (gf != wf))[0]
    if infbad.size:
        i = int(infbad[0])
        return False, "inf mismatch at %d: got %s, want %s" % (
            i, _fmt(g, dt, i), _fmt(w, dt, i)), i
    fin = ok & ~infw
    if tol.floor == "max":
        floor = float(np.max(np.abs(wf[fin]))) if fin.any() else 0.0
        floor = max(floor, 1e-30)
    else:
        floor = float(tol.floor)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(fin, np.abs(gf - wf) / np.maximum(np.abs(wf), floor), 0.0)
    err = np.where(np.isnan(err), np.inf, err)
    i = int(np.argmax(err))
    if err[i] > tol.rtol:
        return False, ("%d elements beyond %s; worst rel err %.3g at %d: got "
                       "%s, want %s" % (int((err > tol.rtol).sum()), tol,
                                        err[i], i, _fmt(g, dt, i),
                                        _fmt(w, dt, i))), i
    return True, "max rel err %.2g" % err[i], None


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

class Case:
    """One function `@case` run once by step-interp.

    args: [(storage array, dt)], or (storage, dt, declared_shape
          [, declared_dt]) for error cases (storage None: no file); the
          function arguments are %a0, %a1, ...
    body: MLIR lines computing %r0, %r1, ... from the arguments
    results: [(shape, dt)] declared result types
    want: [storage array] expected results (with tols), or
    check: callable(outputs) -> (ok, detail) for custom checks, or
    error: [substrings] that stderr must contain, with exit status 1
    repeat: run twice and require bit-identical outputs
    elementwise: print the inputs at the worst element on failure
    """

    def __init__(self, name, args, body, results, want=None, tols=None,
                 check=None, error=None, repeat=False, elementwise=False):
        self.name = name
        # normalized to (storage or None, file dtype, declared shape,
        # declared dtype); error cases declare what the file does not hold,
        # and None writes no file at all.
        norm = []
        for a in args:
            a = tuple(a)
            if len(a) == 2:
                a += (np.shape(a[0]),)
            if len(a) == 3:
                a += (a[1],)
            norm.append(a)
        self.args = norm
        self.body = body if isinstance(body, list) else [body]
        self.results = results
        self.want = want
        self.tols = tols
        self.check = check
        self.error = error
        self.repeat = repeat
        self.elementwise = elementwise
        if want is not None and tols is not None and len(tols) == 1 < len(want):
            self.tols = tols * len(want)

    def mlir(self):
        params = ", ".join("%%a%d: %s" % (i, ttype(s, ddt))
                           for i, (_, _, s, ddt) in enumerate(self.args))
        rtypes = [ttype(s, dt) for s, dt in self.results]
        rsig = rtypes[0] if len(rtypes) == 1 else "(" + ", ".join(rtypes) + ")"
        lines = ["func.func @case(%s) -> %s {" % (params, rsig)]
        lines += ["  " + l for l in self.body]
        lines.append("  return %s : %s" % (
            ", ".join("%%r%d" % i for i in range(len(rtypes))),
            ", ".join(rtypes)))
        lines.append("}")
        return "\n".join(lines) + "\n"


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def shape_str(shape):
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


def gen(rng, shape, dt, kind="normal", scale=1.0, lo=0.0, hi=1.0):
    """Random storage array. kind: normal (N(0, scale)), uniform [lo, hi),
    int [lo, hi), bool."""
    shape = tuple(shape)
    if dt == "i1" or kind == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        if kind == "int":
            return store(rng.integers(int(lo), int(hi), size=shape), dt)
        return store(rng.integers(-1000, 1000, size=shape), dt)
    if kind == "uniform":
        v = rng.uniform(lo, hi, size=shape)
    elif kind == "int":
        v = rng.integers(int(lo), int(hi), size=shape).astype(np.float64)
    else:
        v = rng.standard_normal(size=shape) * scale
    return store(np.asarray(v, dtype=np.float32), dt)


NAN, INF = float("nan"), float("inf")

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


# ---------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------

def shape_cases():
    cases = []

    def one(nm, x, dt, line, out_shape, ref):
        want = from_torch(ref(to_torch(x, dt)), dt)
        return Case(nm, [(x, dt)], line, [(out_shape, dt)], [want], [T_MOVE])

    # broadcast_in_dim: (operand shape, dims, result shape)
    bcast = [((3,), [1], (2, 3)), ((2,), [0], (2, 3)), ((1, 3), [0, 1], (4, 3)),
             ((), [], (2, 3)), ((2, 1, 4), [0, 1, 2], (2, 3, 4)),
             ((3, 1), [1, 2], (5, 3, 4)), ((3,), [1], (0, 3)), ((1,), [0], (5,)),
             ((2, 3), [0, 1], (2, 3)), ((4,), [2], (2, 3, 4)),
             ((1, 1), [0, 2], (3, 2, 4)), ((), [], ()), ((), [], (1,)),
             ((3, 2), [1, 3], (2, 3, 1, 2))]
    for dt in ALL:
        for src, dims, out in bcast:
            nm = "broadcast_in_dim.%s.%s_to_%s_dims%s" % (
                dt, shape_str(src), shape_str(out), "".join(map(str, dims)))
            x = gen(rng_for(nm), src, dt)

            def ref(t, src=src, dims=dims, out=out):
                # operand dim k -> result dim dims[k]; the others are new
                view = [1] * len(out)
                for k, d in enumerate(dims):
                    view[d] = src[k]
                return torch.broadcast_to(t.reshape(view), out)
            cases.append(one(nm, x, dt, "%%r0 = step.broadcast_in_dim %%a0, dims = %s : %s -> %s"
                             % (ilist(dims), ttype(src, dt), ttype(out, dt)), out, ref))

    reshapes = [((2, 3, 4), (6, 4)), ((2, 3, 4), (24,)), ((24,), (2, 2, 3, 2)),
                ((1,), ()), ((), (1, 1)), ((0, 3), (3, 0)), ((4, 1, 5), (5, 4))]
    for dt in ALL:
        for src, out in reshapes:
            nm = "reshape.%s.%s_to_%s" % (dt, shape_str(src), shape_str(out))
            x = gen(rng_for(nm), src, dt)
            cases.append(one(nm, x, dt, "%%r0 = step.reshape %%a0 : %s -> %s"
                             % (ttype(src, dt), ttype(out, dt)), out,
                             lambda t, out=out: torch.reshape(t, out)))

    perms = [((2, 3), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [0, 2, 1]),
             ((2, 3, 4, 5), [3, 1, 0, 2]), ((2, 3), [0, 1]), ((1, 4, 1), [2, 1, 0]),
             ((0, 3), [1, 0]), ((7,), [0]), ((33, 17), [1, 0])]
    for dt in ALL:
        for src, perm in perms:
            out = tuple(src[p] for p in perm)
            nm = "transpose.%s.%s_perm%s" % (dt, shape_str(src), "".join(map(str, perm)))
            x = gen(rng_for(nm), src, dt)
            cases.append(one(nm, x, dt, "%%r0 = step.transpose %%a0, perm = %s : %s -> %s"
                             % (ilist(perm), ttype(src, dt), ttype(out, dt)), out,
                             lambda t, perm=perm: t.permute(*perm)))

    slices = [((4, 8), [0, 2], [4, 8], [1, 2]), ((4, 8), [1, 0], [3, 8], [1, 1]),
              ((5, 6, 7), [1, 0, 2], [5, 6, 7], [2, 3, 4]),
              ((4, 8), [2, 3], [2, 7], [1, 1]),  # empty result
              ((6,), [5], [6], [3]), ((3, 3), [0, 0], [3, 3], [5, 5]),
              ((), [], [], []), ((0, 4), [0, 1], [0, 3], [1, 1]),
              ((10,), [1], [9], [7])]
    for dt in ALL:
        for src, st, lim, strd in slices:
            out = tuple(-(-(l - s) // k) for s, l, k in zip(st, lim, strd))
            nm = "slice.%s.%s_%s_%s_%s" % (dt, shape_str(src), "".join(map(str, st)),
                                           "".join(map(str, lim)), "".join(map(str, strd)))
            x = gen(rng_for(nm), src, dt)
            idx = tuple(slice(s, l, k) for s, l, k in zip(st, lim, strd))
            cases.append(one(nm, x, dt,
                             "%%r0 = step.slice %%a0 start = %s limit = %s strides = %s : %s -> %s"
                             % (ilist(st), ilist(lim), ilist(strd), ttype(src, dt),
                                ttype(out, dt)), out, lambda t, idx=idx: t[idx]))

    pads = [((2, 3), [0, 1], [1, 0], 0.0), ((2, 3), [1, 2], [3, 0], -1.5),
            ((4,), [0], [0], 7.0), ((0, 2), [1, 0], [1, 1], 2.0),
            ((2, 1, 2), [1, 0, 2], [0, 2, 1], 0.1), ((), [], [], 3.0),
            ((3, 2), [2, 2], [2, 2], 1.0)]
    for dt in ALL:
        for src, lo, hi, val in pads:
            if dt == "i1":
                val = 1.0 if val != 0 else 0.0
            elif dt in INTS:
                val = float(int(val))
            out = tuple(s + l + h for s, l, h in zip(src, lo, hi))
            nm = "pad.%s.%s_lo%s_hi%s_v%g" % (dt, shape_str(src), "".join(map(str, lo)),
                                             "".join(map(str, hi)), val)
            x = gen(rng_for(nm), src, dt)

            def ref(t, lo=lo, hi=hi, val=val, out=out):
                if t.dim() > 0 and t.dtype != torch.bool:
                    spec = []
                    for l, h in zip(reversed(lo), reversed(hi)):
                        spec += [l, h]
                    try:
                        return F.pad(t, spec, mode="constant", value=val)
                    except RuntimeError:
                        pass
                # constant padding written out: fill, then place the operand
                y = torch.full(out, val).to(t.dtype)
                y[tuple(slice(l, l + s) for l, s in zip(lo, t.shape))] = t
                return y
            cases.append(one(nm, x, dt,
                             "%%r0 = step.pad %%a0 low = %s high = %s value = %s : %s -> %s"
                             % (ilist(lo), ilist(hi), flt(val), ttype(src, dt),
                                ttype(out, dt)), out, ref))

    concats = [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1),
               ([(2, 0, 3), (2, 4, 3)], 1), ([(3,), (3,)], 0),
               ([(1, 2, 2), (1, 2, 3)], 2), ([(5, 2)], 0)]
    for dt in ALL:
        for shapes, dim in concats:
            out = list(shapes[0])
            out[dim] = sum(s[dim] for s in shapes)
            out = tuple(out)
            nm = "concat.%s.%s_dim%d" % (dt, "_".join(shape_str(s) for s in shapes), dim)
            r = rng_for(nm)
            xs = [gen(r, s, dt) for s in shapes]
            want = from_torch(torch.cat([to_torch(x, dt) for x in xs], dim), dt)
            cases.append(Case(nm, [(x, dt) for x in xs],
                              "%%r0 = step.concat %s dim = %d : %s -> %s" % (
                                  ", ".join("%%a%d" % i for i in range(len(xs))), dim,
                                  ", ".join(ttype(s, dt) for s in shapes),
                                  ttype(out, dt)),
                              [(out, dt)], [want], [T_MOVE]))

    iotas = [((8,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 5), 2), ((0, 4), 1),
             ((3000,), 0), ((1, 300), 1)]
    for dt in NUMS:
        for shape, dim in iotas:
            nm = "iota.%s.%s_dim%d" % (dt, shape_str(shape), dim)
            try:
                ar = torch.arange(shape[dim], dtype=TORCH[dt])
            except RuntimeError:  # arange in a half type rounds each i once
                ar = torch.arange(shape[dim]).to(TORCH[dt])
            view = [1] * len(shape)
            view[dim] = shape[dim]
            want = from_torch(torch.broadcast_to(ar.reshape(view), shape), dt)
            cases.append(Case(nm, [], "%%r0 = step.iota dim = %d : %s" % (
                dim, ttype(shape, dt)), [(shape, dt)], [want],
                [EXACT("integers below 2^11 (f16) / 2^8 (bf16) are exact, "
                       "larger ones round once to nearest even on both sides")]))
    return cases


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


# ---------------------------------------------------------------------------
# Neural-network ops
# ---------------------------------------------------------------------------

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
    ce_plans = [  # (N, C, reduction, ignore_index or None, targets override)
        (8, 10, "mean", None, None), (8, 10, "sum", None, None),
        (8, 10, "none", None, None), (1, 1, "mean", None, None),
        (6, 5, "mean", None, [0, -100, 4, -100, 2, 1]),
        (6, 5, "sum", None, [0, -100, 4, -100, 2, 1]),
        (6, 5, "none", None, [0, -100, 4, -100, 2, 1]),
        (6, 5, "mean", 3, [3, 0, 3, 4, 1, 3]), (6, 5, "none", 3, [3, 0, 3, 4, 1, 3]),
        (6, 5, "mean", -1, [-1, 0, 1, 2, -1, 4]),
        (4, 5, "mean", None, [-100] * 4),  # all ignored: 0/0 = NaN
        (4, 5, "sum", None, [-100] * 4), (0, 5, "sum", None, None),
        (0, 5, "none", None, None), (64, 1000, "mean", None, None)]
    for dt in FLOATS:
        for it in INTS:
            for n, c, red, ign, tgt in ce_plans:
                if it == "i32" and (n, c) not in ((8, 10), (6, 5)):
                    continue
                nm = "cross_entropy.%s.%s.%dx%d_%s%s%s" % (
                    dt, it, n, c, red, "_ign%d" % ign if ign is not None else "",
                    "_targets" if tgt is not None else "")
                r = rng_for(nm)
                logits = gen(r, (n, c), dt, scale=3)
                t = gen(r, (n,), it, kind="int", lo=0, hi=c) if tgt is None \
                    else store(tgt, it)
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
            lead, tq, d = tuple(qs[:-2]), qs[-2], qs[-1]
            ks, vs, os_ = lead + (tk, d), lead + (tk, dv), lead + (tq, dv)
            nm = "attention.%s.q%s_k%s_v%s%s%s" % (
                dt, shape_str(qs), shape_str(ks), shape_str(vs),
                "_causal" if causal else "", "_scale%g" % scale if scale else "")
            r = rng_for(nm)
            q, k, v = gen(r, qs, dt), gen(r, ks, dt), gen(r, vs, dt)

            def fn(q, k, v, causal=causal, scale=scale):
                # torch.nn.functional.scaled_dot_product_attention (torch >=
                # 2.0; 1.13 lacks it) spelled out: top-left causal mask.
                s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
                sc = torch.matmul(q, k.transpose(-1, -2)) * s
                if causal:
                    m = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
                    sc = sc.masked_fill(~m, float("-inf"))
                return torch.matmul(torch.softmax(sc, -1), v)
            (want,) = opmath(fn, [(q, dt), (k, dt), (v, dt)], [dt])
            cases.append(Case(nm, [(q, dt), (k, dt), (v, dt)],
                              "%%r0 = step.attention %%a0, %%a1, %%a2%s%s : %s, %s, %s -> %s"
                              % (" causal" if causal else "",
                                 " scale = %s" % flt(scale) if scale else "",
                                 ttype(qs, dt), ttype(ks, dt), ttype(vs, dt), ttype(os_, dt)),
                              [(os_, dt)], [want], [acc_tol(dt)]))
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


# ---------------------------------------------------------------------------
# Dynamic dims ('?' in the function signature, concrete in the .npy files)
# ---------------------------------------------------------------------------

def dynamic_cases():
    cases = []
    D = -1  # a dynamic dim in ttype

    def dyn(nm, args, line, rshape, rdt, fn, tol):
        """args: [(storage, dt, declared shape)]."""
        want = opmath(fn, [(a, dt) for a, dt, _ in args], [rdt])
        return Case(nm, args, line, [(rshape, rdt)], want, [tol])

    for dt in ("f32", "bf16"):
        r = rng_for("dynamic." + dt)
        x = gen(r, (3, 8), dt)
        y = gen(r, (3, 8), dt)
        w = gen(r, (8, 5), dt)
        t = ttype((D, 8), dt)
        cases.append(dyn("dynamic.%s.exp" % dt, [(x, dt, (D, 8))],
                         "%%r0 = step.exp %%a0 : %s" % t, (D, 8), dt, torch.exp,
                         trans_tol(dt)))
        cases.append(dyn("dynamic.%s.add_both_dims" % dt,
                         [(x, dt, (D, D)), (y, dt, (D, D))],
                         "%%r0 = step.add %%a0, %%a1 : %s" % ttype((D, D), dt),
                         (D, D), dt, torch.add, T_IEEE))
        cases.append(dyn("dynamic.%s.matmul_M" % dt, [(x, dt, (D, 8)), (w, dt, (8, 5))],
                         "%%r0 = step.matmul %%a0, %%a1 : %s, %s -> %s"
                         % (t, ttype((8, 5), dt), ttype((D, 5), dt)),
                         (D, 5), dt, torch.matmul, acc_tol(dt)))
        cases.append(dyn("dynamic.%s.reduce_sum_static_dim" % dt, [(x, dt, (D, 8))],
                         "%%r0 = step.reduce_sum %%a0 dims = [1] : %s -> %s"
                         % (t, ttype((D,), dt)), (D,), dt,
                         lambda a: torch.sum(a, dim=[1]), acc_tol(dt)))
        cases.append(dyn("dynamic.%s.reduce_mean_dynamic_dim" % dt, [(x, dt, (D, 8))],
                         "%%r0 = step.reduce_mean %%a0 dims = [0] : %s -> %s"
                         % (t, ttype((8,), dt)), (8,), dt,
                         lambda a: torch.mean(a, dim=[0]), acc_tol(dt)))
        cases.append(dyn("dynamic.%s.softmax" % dt, [(x, dt, (D, 8))],
                         "%%r0 = step.softmax %%a0 dim = 1 : %s" % t, (D, 8), dt,
                         lambda a: torch.softmax(a, 1), acc_tol(dt)))
        cases.append(dyn("dynamic.%s.transpose" % dt, [(x, dt, (D, 8))],
                         "%%r0 = step.transpose %%a0, perm = [1, 0] : %s -> %s"
                         % (t, ttype((8, D), dt)), (8, D), dt,
                         lambda a: a.t(), T_MOVE))
        lg = gen(r, (6, 5), dt, scale=2)
        tg = store([0, 4, -100, 2, 1, 3], "i64")
        cases.append(dyn("dynamic.%s.cross_entropy" % dt,
                         [(lg, dt, (D, 5)), (tg, "i64", (D,))],
                         "%%r0 = step.cross_entropy %%a0, %%a1 reduction = mean : %s, %s -> %s"
                         % (ttype((D, 5), dt), ttype((D,), "i64"), ttype((), dt)),
                         (), dt, lambda a, b: F.cross_entropy(a, b), acc_tol(dt)))
    return cases


# ---------------------------------------------------------------------------
# Error cases: exit status 1 and a message naming the culprit
# ---------------------------------------------------------------------------

def error_cases():
    cases = []
    w = gen(rng_for("err.w"), (10, 4), "f32")
    idx = store([1, 10, 2], "i64")
    cases.append(Case("error.embedding_index_out_of_range", [(idx, "i64"), (w, "f32")],
                      "%r0 = step.embedding %a0, %a1 : tensor<3xi64>, tensor<10x4xf32> -> tensor<3x4xf32>",
                      [((3, 4), "f32")], error=["step.embedding", "10"]))
    idx = store([-1, 0], "i32")
    cases.append(Case("error.embedding_negative_index", [(idx, "i32"), (w, "f32")],
                      "%r0 = step.embedding %a0, %a1 : tensor<2xi32>, tensor<10x4xf32> -> tensor<2x4xf32>",
                      [((2, 4), "f32")], error=["step.embedding", "-1"]))
    x = gen(rng_for("err.shape"), (3, 5), "f32")
    cases.append(Case("error.input_wrong_shape", [(x, "f32", (3, 4))],
                      "%r0 = step.neg %a0 : tensor<3x4xf32>", [((3, 4), "f32")],
                      error=["{inputs}/arg0.npy"]))
    x = gen(rng_for("err.dtype"), (3, 4), "f32")
    cases.append(Case("error.input_wrong_dtype", [(x, "f32", (3, 4), "f16")],
                      "%r0 = step.neg %a0 : tensor<3x4xf16>", [((3, 4), "f16")],
                      error=["{inputs}/arg0.npy"]))
    x = gen(rng_for("err.missing"), (2,), "f32")
    cases.append(Case("error.input_missing", [(x, "f32"), (None, "f32", (2,))],
                      "%r0 = step.add %a0, %a1 : tensor<2xf32>", [((2,), "f32")],
                      error=["{inputs}/arg1.npy"]))
    x = gen(rng_for("err.max"), (0, 3), "f32")
    cases.append(Case("error.reduce_max_empty", [(x, "f32")],
                      "%r0 = step.reduce_max %a0 dims = [0] : tensor<0x3xf32> -> tensor<3xf32>",
                      [((3,), "f32")], error=["step.reduce_max"]))
    a, b = store([1, 2, 3], "i32"), store([1, 0, 1], "i32")
    cases.append(Case("error.integer_div_by_zero", [(a, "i32"), (b, "i32")],
                      "%r0 = step.div %a0, %a1 : tensor<3xi32>", [((3,), "i32")],
                      error=["step.div"]))
    lg, t = gen(rng_for("err.ce"), (2, 3), "f32"), store([0, 3], "i64")
    cases.append(Case("error.cross_entropy_target_out_of_range", [(lg, "f32"), (t, "i64")],
                      "%r0 = step.cross_entropy %a0, %a1 reduction = mean : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>",
                      [((), "f32")], error=["step.cross_entropy"]))
    return cases


# ---------------------------------------------------------------------------
# Harness self-test: the comparator must catch what it claims to
# ---------------------------------------------------------------------------

def selftest():
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)
    a = store([1.0, 2.0, NAN], "bf16")
    b = a.copy()
    b[0] += 1  # 1 ulp
    expect(compare(a, a, "bf16", T_IEEE)[0], "bf16 equal is exact")
    expect(not compare(b, a, "bf16", T_IEEE)[0], "1 ulp fails exact")
    expect(compare(b, a, "bf16", T_TRANS16)[0], "1 ulp passes ulp(1)")
    b[0] += 1
    expect(not compare(b, a, "bf16", T_TRANS16)[0], "2 ulp fails ulp(1)")
    expect(not compare(store([1.0, 2.0, 3.0], "bf16"), a, "bf16", T_TRANS16)[0],
           "NaN vs number fails")
    z = store([0.0, -0.0], "f16")
    expect(compare(z[::-1].copy(), z, "f16", T_IEEE)[0], "+0 == -0")
    s = store([0.0, -0.0], "f16").view(np.uint16)
    expect(_ordered(s, 16).tolist() == [0, 0], "zeros order to 0")
    h = store([-1.0, 1.0], "f16")
    h2 = h.view(np.uint16).copy()
    h2[0] += 1  # -1 -> next toward -inf
    expect(not compare(h2.view(np.float16), h, "f16", T_IEEE)[0], "negative 1 ulp")
    f = store([1.0, 1e-3], "f32")
    g = store([1.0 + 2e-5, 1e-3], "f32")
    expect(not compare(g, f, "f32", T_TRANS32)[0], "rel 2e-5 fails")
    g = store([1.0 + 5e-6, 1e-3 * (1 + 5e-6)], "f32")
    expect(compare(g, f, "f32", T_TRANS32)[0], "rel 5e-6 passes")
    expect(not compare(store([INF], "f32"), store([3e38], "f32"), "f32", T_ACC32)[0],
           "inf vs finite fails")
    expect(not compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32), "i32",
                       T_MOVE)[0], "int mismatch")
    expect(not compare(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32),
                       "f32", T_MOVE)[0], "shape mismatch")
    expect(not compare(np.zeros(2, np.float16), np.zeros(2, np.float32), "f32",
                       T_MOVE)[0], "dtype mismatch")
    expect(documented_mask(42, 8, 0.0).all(), "p = 0 keeps all")
    # splitmix64 reference vector: the first output for state 0 is
    # 0xe220a8397b1dcdaf (Vigna's splitmix64.c with x = 0).
    expect(int(_splitmix64(np.array([0], np.uint64))[0]) == 0xE220A8397B1DCDAF,
           "splitmix64 reference value")
    return problems


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

GROUPS = {
    "elementwise": elementwise_cases,
    "cast": cast_cases,
    "shape": shape_cases,
    "reduce": reduce_cases,
    "matmul": matmul_cases,
    "nn": nn_cases,
    "dropout": dropout_cases,
    "dynamic": dynamic_cases,
    "errors": error_cases,
}


def run_case(interp, case, root, idx):
    d = os.path.join(root, "%04d" % idx)
    ind, outd = os.path.join(d, "inputs"), os.path.join(d, "out")
    os.makedirs(ind)
    mlir = case.mlir()
    path = os.path.join(d, "case.mlir")
    with open(path, "w") as f:
        f.write(mlir)
    for i, (a, dt, _, _) in enumerate(case.args):
        if a is None:
            continue
        np.save(os.path.join(ind, "arg%d.npy" % i), np.asarray(a, dtype=NP[dt]))
    cmd = [interp, path, "--func=case", "--inputs", ind, "--out", outd]

    def invoke(out):
        try:
            return subprocess.run(cmd[:-1] + [out], capture_output=True,
                                  text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None
    p = invoke(outd)
    if p is None:
        return False, "step-interp timed out"
    if case.error is not None:
        if p.returncode != 1:
            return False, "expected exit status 1, got %d (stderr: %s)" % (
                p.returncode, p.stderr.strip()[:300])
        # The message itself (a line saying "error"), not just a note that
        # echoes the IR, must name the culprit.
        need = [s.replace("{inputs}", ind) for s in case.error]
        errs = [l for l in p.stderr.splitlines() if "error" in l]
        missing = [s for s in need if not any(s in l for l in errs)]
        if missing:
            return False, "no error line names %r: %s" % (missing, p.stderr.strip()[:400])
        return True, "exit 1: " + errs[0].strip()[:200]
    if p.returncode != 0:
        return False, "step-interp exit %d: %s" % (p.returncode, p.stderr.strip()[:600])
    outs = []
    for i, (shape, dt) in enumerate(case.results):
        f = os.path.join(outd, "result%d.npy" % i)
        if not os.path.exists(f):
            return False, "no %s" % f
        outs.append(np.load(f))
    if case.repeat:
        out2 = outd + "_again"
        p2 = invoke(out2)
        if p2 is None or p2.returncode != 0:
            return False, "second run failed"
        for i, o in enumerate(outs):
            o2 = np.load(os.path.join(out2, "result%d.npy" % i))
            if o.dtype != o2.dtype or not np.array_equal(
                    o.view(np.uint8), o2.view(np.uint8)):
                return False, "result%d differs between two runs" % i
    if case.check is not None:
        return case.check(outs)
    details = []
    for i, (o, w, tol, (shape, dt)) in enumerate(zip(outs, case.want, case.tols,
                                                     case.results)):
        ok, detail, worst = compare(o, w, dt, tol)
        if not ok:
            msg = "result%d: %s" % (i, detail)
            if case.elementwise and worst is not None:
                ins = ", ".join("a%d=%s" % (k, _fmt(a, adt, worst))
                                for k, (a, adt, s, _) in enumerate(case.args)
                                if np.shape(a) == tuple(shape))
                msg += " [inputs: %s]" % ins
            msg += f64_diagnosis(o, w, dt, tol)
            msg += " (tolerance: %s)" % tol.why
            return False, msg
        details.append(detail)
    return True, "; ".join(details)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("interp", help="path to step-interp")
    ap.add_argument("--group", action="append", choices=sorted(GROUPS),
                    help="run only these groups (default: all)")
    ap.add_argument("--filter", default="", help="run cases whose name has this")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--keep", help="keep the generated files under this folder")
    ap.add_argument("--list", action="store_true", help="list case names")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the detail of passing cases too")
    args = ap.parse_args()

    problems = selftest()
    if problems:
        for p in problems:
            print("FAIL harness.selftest: %s" % p)
        print("0 passed, %d failed" % len(problems))
        return 1

    cases = []
    for g in (args.group or sorted(GROUPS)):
        cases += [c for c in GROUPS[g]() if args.filter in c.name]
    if args.list:
        for c in cases:
            print(c.name)
        return 0
    if not os.access(args.interp, os.X_OK):
        print("FAIL setup: %s is not an executable" % args.interp)
        print("0 passed, 1 failed")
        return 1

    root = args.keep or tempfile.mkdtemp(prefix="step_op_parity_")
    if args.keep:
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
    passed = failed = 0
    failures = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
            futs = [ex.submit(run_case, args.interp, c, root, i)
                    for i, c in enumerate(cases)]
            for i, (c, fut) in enumerate(zip(cases, futs)):
                try:
                    ok, detail = fut.result()
                except Exception as e:  # a harness bug is a failure too
                    ok, detail = False, "harness exception: %r" % (e,)
                if ok:
                    passed += 1
                    print("PASS %s%s" % (c.name, "  (%s)" % detail if args.verbose else ""))
                else:
                    failed += 1
                    failures.append((c.name, detail, i))
                    print("FAIL %s  %s  [files: %s]" % (
                        c.name, detail, os.path.join(root, "%04d" % i)
                        if args.keep else "rerun with --keep DIR"))
                sys.stdout.flush()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("--- failed cases ---")
        for name, detail, _ in failures:
            print("FAIL %s" % name)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
