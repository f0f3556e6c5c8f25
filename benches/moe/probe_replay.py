"""Scores the installed carver's per-GEMM predictions against stored probes of the fused-MoE
kernel's two GEMMs (`probe_gemms.py --out X.json`: each GEMM of each config timed alone), offline.

For every probe file and each GEMM (gate/up, down, and their sum, the layer), the share of config
pairs the model orders as measured (pairs measured within 5% of each other are left out), and
the layer's top-1 among the probed configs: the best measured sum over the sum of the config the
model prices fastest. A measurement of the model's terms GEMM by GEMM, which the whole-layer
sweeps (`rescore.py`) cannot separate.

    python3 benches/moe/probe_replay.py [-v] benches/moe/runs/h200-2026-11-29-probe-*/*.json

The event-timed probes carry a few microseconds of the L2 write-back of the buffer written
before each launch; it is common to a file's configs, so orderings within a file hold.
"""

import argparse
import itertools
import json
import math
import sys

import carver
from carver.moe_kernel import config_key

# Pairs measured closer than this (log ratio) are ties, left out of the orderings.
TIE = 0.05
COLUMNS = {"gate_up": (0,), "down": (1,), "sum": (0, 1)}


def probe_points(path, arch):
    """[(config key, measured (gate/up, down) us, predicted (gate/up, down) us)] of one probe
    file, or None when it is not a probe file or the model cannot price its layer."""
    with open(path) as f:
        d = json.load(f)
    a = d.get("args")
    if not isinstance(a, dict) or "rows" not in d:
        return None
    block = [int(v) for v in a["block_shape"].split(",")] if a.get("block_shape") else None
    try:
        r = carver.recommend_moe(a["experts"], a["topk"], a["hidden"], a["n"], tp=1, arch=arch,
                                 batch_sizes=[a["tokens"]], candidates=1024,
                                 dtype=a.get("dtype") or "bf16", block_shape=block)
    except carver.CarverError as e:
        print(f"{path}: not priced: {e}", file=sys.stderr)
        return None
    hints = {config_key(h.config): h for h in r.batches[0].hints}
    points = []
    for row in d["rows"]:
        k = config_key(row["config"])
        measured = (row.get("gate_up_us"), row.get("down_us"))
        if k in hints and all(measured):
            h = hints[k]
            points.append((k, measured, (h.gate_up["time_us"], h.down["time_us"])))
    return a, points


def orderings(points, cols):
    """(pairs ordered as measured, pairs compared) over the summed columns `cols`."""
    right = compared = 0
    for x, y in itertools.combinations(points, 2):
        mx, my = (sum(p[1][c] for c in cols) for p in (x, y))
        px, py = (sum(p[2][c] for c in cols) for p in (x, y))
        if abs(math.log(mx / my)) < TIE:
            continue
        compared += 1
        right += (mx < my) == (px < py)
    return right, compared


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probes", nargs="+", help="probe_gemms.py JSON files")
    ap.add_argument("--arch", default="h200", help="the GPU the probes ran on")
    ap.add_argument("-v", "--verbose", action="store_true", help="every config, measured and priced")
    a = ap.parse_args(argv)
    totals = {g: [0, 0] for g in COLUMNS}
    top1 = []
    for path in a.probes:
        got = probe_points(path, a.arch)
        if got is None or len(got[1]) < 2:
            continue
        args, points = got
        line = []
        for g, cols in COLUMNS.items():
            right, compared = orderings(points, cols)
            totals[g][0] += right
            totals[g][1] += compared
            line.append(f"{g} {right}/{compared}")
        best = min(sum(p[1]) for p in points)
        pick = min(points, key=lambda p: sum(p[2]))
        top1.append(best / sum(pick[1]))
        print(f"{path.split('/')[-1]:24s} M {args['tokens']:<5d} {args.get('dtype') or 'bf16':9s} "
              f"{len(points):2d} configs, ordered: {', '.join(line)}; top-1 {top1[-1]:.3f} ({pick[0]})")
        if a.verbose:
            for k, m, p in sorted(points, key=lambda p: sum(p[1])):
                print(f"    {k:26s} measured {m[0]:7.1f} {m[1]:7.1f}   priced {p[0]:7.1f} {p[1]:7.1f}")
    if not top1:
        raise SystemExit("error: no probe file with two or more priced configs")
    geomean = math.exp(sum(math.log(x) for x in top1) / len(top1))
    shares = ", ".join(f"{g} {r}/{n} = {r / max(n, 1):.3f}" for g, (r, n) in totals.items())
    print(f"all: ordered as measured: {shares}; top-1 geomean {geomean:.4f}, worst {min(top1):.3f}")


if __name__ == "__main__":
    main()
