"""Keeps docs/errors.md honest: every row of its tables names a test, and
every test it names exists.

    check_errors_doc.py DOC REPO_ROOT

A row's "test" column holds one or more `PATH` or `PATH::ANCHOR`, PATH
relative to REPO_ROOT. What ANCHOR must match depends on the file:
  - a C++ file: `Suite.Name` is a TEST(Suite, Name), TEST_F or TEST_P;
  - a lit file (.mlir, .test): an upper-case FileCheck prefix is used by a
    RUN line (--check-prefix[es]) and has a check line `PREFIX:` (or
    `PREFIX-NEXT:` ...); any other anchor (`@name`) appears in the file;
  - anything else: the anchor appears in the file.
Prints each broken reference ("line N: ...") and exits 1, or prints how
many rows and references it checked.
"""
import os
import re
import sys

REF = re.compile(r"`([^`:]+?)(?:::([^`]+))?`")
PREFIX = re.compile(r"^[A-Z][A-Z0-9-]*$")


def anchor_problem(path, text, anchor):
    if path.endswith((".cpp", ".cc", ".h")):
        suite, _, name = anchor.partition(".")
        pattern = (r"TEST(?:_F|_P)?\(\s*" + re.escape(suite) + r"\s*,\s*" +
                   re.escape(name) + r"\s*\)")
        if not name or not re.search(pattern, text):
            return f"no TEST({suite}, {name}) in {path}"
        return None
    if path.endswith((".mlir", ".test")) and PREFIX.match(anchor):
        used = any(anchor in re.split(r"[,=\s]", m)
                   for m in re.findall(r"--check-prefix(?:es)?[= ](\S+)", text))
        if not used:
            return f"no RUN line of {path} checks prefix {anchor}"
        if not re.search(r"\b" + re.escape(anchor) + r"(?:-NEXT|-SAME|-NOT|-DAG)?:", text):
            return f"no {anchor}: check line in {path}"
        return None
    if anchor not in text:
        return f"'{anchor}' does not appear in {path}"
    return None


def main(doc, root):
    problems, rows, refs = [], 0, 0
    column = None
    with open(doc) as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if column is None:  # a table's header row
            lowered = [c.lower() for c in cells]
            column = lowered.index("test") if "test" in lowered else -1
            continue
        if column < 0 or set(line) <= set("|-: "):
            continue
        rows += 1
        if column >= len(cells):
            problems.append(f"line {number}: the row has no test column")
            continue
        found = REF.findall(cells[column])
        if not found:
            problems.append(f"line {number}: the row names no test")
        for path, anchor in found:
            refs += 1
            full = os.path.join(root, path)
            if not os.path.isfile(full):
                problems.append(f"line {number}: {path} does not exist")
                continue
            if anchor:
                with open(full, errors="replace") as t:
                    problem = anchor_problem(path, t.read(), anchor)
                if problem:
                    problems.append(f"line {number}: {problem}")
    for p in problems:
        print(f"{doc}: {p}")
    if problems:
        sys.exit(1)
    if rows == 0:
        sys.exit(f"{doc}: no table rows found")
    print(f"{doc}: {rows} rows, {refs} test references, all found")


if __name__ == "__main__":
    main(*sys.argv[1:])
