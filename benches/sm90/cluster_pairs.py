#!/usr/bin/env python3
"""Paired timings of one cuda-sm90 configuration with and without a cluster along N.

For every shape of stored `carver tune --format json` results (M at most --max-m), the stored
winner is timed with `carver bench --config` as it is but with no cluster, then with clusters
of each size in --cluster-n along N (A's tile shared by TMA multicast), in a rotating order so
that drift does not favour one size; cuBLAS is timed in each call. Shapes are taken worst
(against cuBLAS) first, until --budget-s runs out. One JSON line per call in OUT, a table last.

    benches/sm90/cluster_pairs.py --bin target/gpu-run/carver --out pairs.jsonl \\
        RESULTS.json.gz [...]
"""

import argparse
import gzip
import json
import math
import subprocess
import sys
import tempfile
import time


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def shapes(paths, max_m):
    seen, out = set(), []
    for path in paths:
        for r in load(path)["results"]:
            s, w = r["shape"], r.get("winner")
            key = (s["m"], s["n"], s["k"], s.get("batch", 1))
            if not w or s["m"] > max_m or key in seen or s.get("batch", 1) != 1:
                continue
            seen.add(key)
            out.append((r["speedup_vs_cublas"], s, r.get("layout", "rr"), r.get("dtype"), w))
    return sorted(out, key=lambda t: t[0])


def bench(binary, cache, shape, layout, dtype, config):
    cmd = [
        binary, "--cache-dir", cache, "bench",
        "--m", str(shape["m"]), "--n", str(shape["n"]), "--k", str(shape["k"]),
        "--layout", layout, "--dtype", dtype, "--config", json.dumps(config),
        "--format", "json",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-400:]}
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-m", type=int, default=512)
    ap.add_argument("--cluster-n", default="2,4")
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("results", nargs="+")
    a = ap.parse_args()
    sizes = [1] + [int(x) for x in a.cluster_n.split(",")]
    start = time.time()
    rows = []
    cache = tempfile.mkdtemp()
    with open(a.out, "w") as out:
        for i, (speedup, shape, layout, dtype, winner) in enumerate(shapes(a.results, a.max_m)):
            if time.time() - start > a.budget_s:
                print(f"budget spent after {i} shapes", file=sys.stderr)
                break
            base = dict(winner, cluster_m=1)
            base.pop("cluster_n", None)
            order = sizes[i % len(sizes):] + sizes[: i % len(sizes)]
            times = {}
            for cn in order:
                config = dict(base, cluster_n=cn) if cn > 1 else base
                rep = bench(a.bin, cache, shape, layout, dtype or "bf16", config)
                out.write(json.dumps({"shape": shape, "cluster_n": cn, "config": config,
                                      "stored_speedup": speedup, "report": rep}) + "\n")
                out.flush()
                if rep.get("measured_time_us"):
                    times[cn] = (rep["measured_time_us"], rep["cublas_time_us"])
                else:
                    times[cn] = None
                    why = rep.get("error") or rep.get("failure")
                    print(f"{shape['name']} cluster_n={cn}: {str(why)[:200]}", file=sys.stderr)
            rows.append((shape, winner, times))
    print(f"{'shape':28} {'M':>5} {'tile':>10} swap  " + "  ".join(f"t(n{c})" for c in sizes)
          + "  cuBLAS  " + "  ".join(f"n{c}/n1" for c in sizes[1:]))
    ratios = {c: [] for c in sizes[1:]}
    for shape, w, t in rows:
        if not t.get(1):
            continue
        line = f"{shape['name'][:28]:28} {shape['m']:5} {w['block_m']:>4}x{w['block_n']:<5} {'y' if w.get('swap_ab') else 'n':>4}  "
        line += "  ".join(f"{t[c][0]:6.1f}" if t.get(c) else "   n/a" for c in sizes)
        line += f"  {t[1][1]:6.1f}  "
        for c in sizes[1:]:
            if t.get(c):
                r = t[1][0] / t[c][0]
                ratios[c].append(r)
                line += f"{r:6.3f}  "
            else:
                line += "   n/a  "
        print(line)
    for c, rs in ratios.items():
        if rs:
            g = math.exp(sum(map(math.log, rs)) / len(rs))
            print(f"cluster_n={c}: geomean t(n1)/t(n{c}) {g:.3f} over {len(rs)}, "
                  f"min {min(rs):.3f}, max {max(rs):.3f}, faster in {sum(r > 1.01 for r in rs)}")


if __name__ == "__main__":
    main()
