#!/usr/bin/env python3
"""Summarizes `carver tune --shapes ... --format json` reports (benches/sm90/tune-sets.sh): per
shape the winner against cuBLAS timed in the same run, its K split and model rank, the tuning
wall time; per report the geomean and worst ratio, overall and for decode (M <= 64) shapes."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


for path in sys.argv[1:]:
    try:
        report = stored.load(path)
        results = report["results"]
    except (OSError, ValueError, KeyError):
        continue
    print(f"== {path} ({report['device']['name']})")
    print(f"{'shape':<24} {'batch':>5} {'winner us':>10} {'cuBLAS us':>10} {'vs cuBLAS':>9} {'split':>5} {'rank':>4} {'tune s':>6}")
    ratios, decode = [], []
    for r in results:
        s = r["shape"]
        label = s.get("name") or f"{s['m']}x{s['n']}x{s['k']}"
        if r.get("error") or not r.get("speedup_vs_cublas"):
            print(f"{label:<24} error: {str(r.get('error'))[:90]}")
            continue
        ratio = r["speedup_vs_cublas"]
        ratios.append(ratio)
        if s["m"] <= 64:
            decode.append(ratio)
        split = (r.get("winner") or {}).get("split_k", 1)
        print(f"{label:<24} {s.get('batch', 1):>5} {r['winner_time_us']:>10.1f} {r['cublas_time_us']:>10.1f}"
              f" {ratio:>9.3f} {split:>5} {r['winner_model_rank']:>4} {r['total_wall_s']:>6.2f}")
    if ratios:
        print(f"geomean {geomean(ratios):.3f}, worst {min(ratios):.3f} over {len(ratios)} shapes"
              + (f"; decode (M <= 64) {geomean(decode):.3f}, worst {min(decode):.3f} over {len(decode)}"
                 if decode else ""))
