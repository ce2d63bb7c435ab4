"""Harness of the PyTorch parity tests (tests/e2e/op_parity.py): dtypes and
storage conversions, torch references, tolerances, comparison, the Case
class, input generation, and running step-interp on one case.

How references are computed
---------------------------
* f32, integers, i1: PyTorch on the same inputs, in the same dtype.
* f16/bf16: PyTorch's f32 op on the half inputs widened to f32 (exact), each
  result rounded once to the half type. This is PyTorch's CPU "opmath"
  contract (half ops are computed in float and rounded on store), and it is
  the step dialect's documented semantics. It is not torch's native half
  kernel because the installed torch (1.13) lacks most f16 CPU kernels
  (exp_vml_cpu, addmm, softmax, layer_norm ... raise an error for
  'Half') and several of its bf16 kernels round intermediates to bf16
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

import os
import subprocess
import zlib

import numpy as np
import torch

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
# Running step-interp on one case
# ---------------------------------------------------------------------------

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
