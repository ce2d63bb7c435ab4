#!/usr/bin/env python3
"""Draws the memory/FLOPs curve of `step-bench MODEL --remat-sweep=N` as SVG.

    plot-remat.py sweep.json out.svg [--title TEXT]

x: recomputed FLOPs as a share of the step's; y: planned peak (arena) as a
share of the peak without recomputation. One point per compile of the sweep
(none, auto, the budgets, max), labelled by mode. Standard library only, so
it runs on any Python 3 (no matplotlib needed).
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    with open(a.sweep) as f:
        sweep = json.load(f)
    base = sweep["peak_without_remat"]
    pts = []
    for p in sweep["remat_sweep"]:
        x = 100.0 * p.get("flop_overhead", 0.0)
        y = 100.0 * p["planned_peak_bytes"] / base
        pts.append((x, y, p.get("mode", "?"), p["planned_peak_bytes"]))
    pts.sort()
    w, h, left, bottom, top, right = 640, 420, 70, 50, 40, 20
    xmax = max(5.0, max(x for x, _, _, _ in pts) * 1.15)
    ymax = 105.0

    def sx(x):
        return left + (w - left - right) * x / xmax

    def sy(y):
        return h - bottom - (h - bottom - top) * y / ymax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">'
           f'{a.title}</text>']
    for i in range(0, 101, 20):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{sy(i)}" '
                   f'y2="{sy(i)}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{sy(i) + 4}" '
                   f'text-anchor="end">{i}%</text>')
    step = 5 if xmax <= 40 else 10
    for i in range(0, int(xmax) + 1, step):
        out.append(f'<line x1="{sx(i)}" x2="{sx(i)}" y1="{sy(0)}" '
                   f'y2="{sy(0) + 5}" stroke="black"/>')
        out.append(f'<text x="{sx(i)}" y="{sy(0) + 18}" '
                   f'text-anchor="middle">{i}%</text>')
    out.append(f'<line x1="{left}" x2="{w - right}" y1="{sy(0)}" y2="{sy(0)}" '
               f'stroke="black"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{sy(0)}" y2="{top}" '
               f'stroke="black"/>')
    out.append(f'<text x="{(w + left) / 2}" y="{h - 10}" text-anchor="middle">'
               f'recomputed FLOPs / step FLOPs</text>')
    out.append(f'<text transform="translate(16,{(h - bottom + top) / 2}) '
               f'rotate(-90)" text-anchor="middle">planned peak / peak '
               f'without recomputation</text>')
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _, _ in pts)
    out.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" '
               f'stroke-width="2"/>')
    for x, y, mode, peak in pts:
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" '
                   f'fill="#1f77b4"><title>{mode}: {peak} B, {x:.1f}% FLOPs'
                   f'</title></circle>')
        if mode in ("none", "auto", "max"):
            out.append(f'<text x="{sx(x) + 7:.1f}" y="{sy(y) - 7:.1f}">'
                       f'{mode}</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
