"""Self-test of the parity harness: the comparator must catch what it
claims to."""

import numpy as np

from .harness import (INF, NAN, T_ACC32, T_IEEE, T_MOVE, T_TRANS16, T_TRANS32,
                      _ordered, compare, store)
from .cases_nn import _splitmix64, documented_mask

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
