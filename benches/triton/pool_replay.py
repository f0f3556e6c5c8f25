#!/usr/bin/env python3
"""Pooled offline replay of carver binaries over every stored Triton sweep: `replay.py
--carver-bin` on each `benches/triton/runs/*/triton_sweep.json.xz` (with `--arch` of the GPU
the run's directory names: h200-... or h100-...), then, per binary, top-1 and best-of-8
geomean and worst over all shape runs, and per GPU. Every stored sweep shaped the model at some
point, so these figures are in-sample; they compare two models on the same data.

    python3 benches/triton/pool_replay.py BIN [BIN ...]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def arch_of(run_dir):
    """The GPU a run directory's name starts with."""
    name = os.path.basename(run_dir)
    return "h200" if name.startswith("h200") else "h100"


def replay(binary, sweep, arch):
    """{shape: {"top1", "best_of_k", ...}} of one binary on one sweep, or None on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "replay.json")
        p = subprocess.run([sys.executable, os.path.join(HERE, "replay.py"), "--sweep", sweep,
                            "--carver-bin", binary, "--carver-args", f"--arch {arch}",
                            "--json", out], capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(out):
            print(f"{sweep}: replay failed: {p.stderr.strip()[-300:]}", file=sys.stderr)
            return None
        with open(out) as f:
            return json.load(f)["carver"]["shapes"]


def pool(rows):
    """(count, top-1 geomean, worst, best-of-k geomean, worst) of [(gpu, top1, best_of_k)]."""
    g = lambda xs: math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs))
    top1, best = [r[1] for r in rows], [r[2] for r in rows]
    return len(rows), g(top1), min(top1), g(best), min(best)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--runs", default=os.path.join(HERE, "runs"))
    a = ap.parse_args(argv)
    sweeps = stored.find(os.path.join(a.runs, "*", "triton_sweep.json"))
    if not sweeps:
        raise SystemExit(f"error: no triton_sweep.json.xz (or .gz) under {a.runs}")
    out = {}
    for binary in a.binaries:
        rows = []
        for sweep in sweeps:
            arch = arch_of(os.path.dirname(sweep))
            for s in (replay(binary, sweep, arch) or {}).values():
                if s.get("top1") is not None:
                    rows.append((arch, s["top1"], s["best_of_k"]))
        out[binary] = rows
        for label, subset in [("all", rows)] + [(gpu, [r for r in rows if r[0] == gpu])
                                                 for gpu in ("h200", "h100")]:
            if subset:
                n, t, tw, b, bw = pool(subset)
                print(f"{binary} {label}: {n} shape runs, top-1 {t:.4f} (worst {tw:.3f}), "
                      f"best-of-8 {b:.4f} (worst {bw:.3f})")
    return out


if __name__ == "__main__":
    main()
