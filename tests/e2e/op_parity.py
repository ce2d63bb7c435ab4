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

Layout: this script parses the arguments and runs the cases; the harness
(references, tolerances, comparison, the Case class, running step-interp)
and the cases per op family live in the package parity/ next to it (see
parity/__init__.py). How references and tolerances are chosen is written
at the top of parity/harness.py.
"""

import argparse
import concurrent.futures
import os
import shutil
import sys
import tempfile

# The package parity/ lives next to this script; find it from any cwd.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from parity.harness import run_case  # noqa: E402
from parity.selftest import selftest  # noqa: E402
from parity.cases_elementwise import elementwise_cases, cast_cases  # noqa: E402
from parity.cases_shape import shape_cases, dynamic_cases  # noqa: E402
from parity.cases_reduce_linalg import reduce_cases, matmul_cases  # noqa: E402
from parity.cases_nn import nn_cases, dropout_cases  # noqa: E402
from parity.cases_errors import error_cases  # noqa: E402
from parity.cases_train import train_cases  # noqa: E402

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
    "train": train_cases,
}


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
