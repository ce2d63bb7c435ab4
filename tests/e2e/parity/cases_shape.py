"""Parity cases: shape ops (broadcast_in_dim, reshape, transpose, slice,
pad, concat, iota) and dynamic dims."""

import torch
import torch.nn.functional as F

from .harness import (ALL, Case, EXACT, INTS, NUMS, TORCH, T_IEEE, T_MOVE,
                      acc_tol, flt, from_torch, gen, ilist, opmath, rng_for,
                      shape_str, store, to_torch, trans_tol, ttype)

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
