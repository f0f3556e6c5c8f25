#!/usr/bin/env python3
"""Paired timings of one cuda-sm90 configuration and its variants in one parameter.

For every shape of stored `carver tune --format json` results (M between --min-m and --max-m),
the stored winner is timed with `carver bench --config` as it is (but with no cluster), then
with each variant of --variants, `FIELD=VALUE` pairs of cuda-sm90's own terms (`stages=8`:
an 8-deep ring; `cluster_m=2`: two CTAs along M sharing B's tile), in a rotating order so that
drift does not favour one; cuBLAS is timed in each call. Shapes are taken worst (against
cuBLAS) first, until --budget-s runs out. One JSON line per call in OUT, a table last.
(`cluster_n` variants need the kernel of `4a3c167`, measured and reverted: docs/RESULTS.md,
"clusters along N that share A".)

    benches/sm90/config_variants.py --bin target/gpu-run/carver --out pairs.jsonl \\
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


def shapes(paths, min_m, max_m):
    seen, out = set(), []
    for path in paths:
        for r in load(path)["results"]:
            s, w = r["shape"], r.get("winner")
            key = (s["m"], s["n"], s["k"], s.get("batch", 1))
            if not w or not min_m <= s["m"] <= max_m or key in seen or s.get("batch", 1) != 1:
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
    ap.add_argument("--min-m", type=int, default=1)
    ap.add_argument("--variants", default="cluster_m=2")
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("results", nargs="+")
    a = ap.parse_args()
    sizes = ["none"] + a.variants.split(",")
    start = time.time()
    rows = []
    cache = tempfile.mkdtemp()
    with open(a.out, "w") as out:
        for i, (speedup, shape, layout, dtype, winner) in enumerate(shapes(a.results, a.min_m, a.max_m)):
            if time.time() - start > a.budget_s:
                print(f"budget spent after {i} shapes", file=sys.stderr)
                break
            base = dict(winner, cluster_m=1)
            base.pop("cluster_n", None)
            order = sizes[i % len(sizes):] + sizes[: i % len(sizes)]
            times = {}
            for cn in order:
                config = dict(base)
                if cn != "none":
                    field, value = cn.split("=")
                    config[field] = int(value)
                rep = bench(a.bin, cache, shape, layout, dtype or "bf16", config)
                out.write(json.dumps({"shape": shape, "cluster_n": cn, "config": config,
                                      "stored_speedup": speedup, "report": rep}) + "\n")
                out.flush()
                if rep.get("measured_time_us"):
                    times[cn] = (rep["measured_time_us"], rep["cublas_time_us"])
                else:
                    times[cn] = None
                    why = rep.get("error") or rep.get("failure")
                    print(f"{shape['name']} {cn}: {str(why)[:200]}", file=sys.stderr)
            rows.append((shape, winner, times))
    print(f"{'shape':28} {'M':>5} {'tile':>10} swap  " + "  ".join(f"{c:>12}" for c in sizes)
          + "  cuBLAS  " + "  ".join(f"{'speedup ' + c.split('=')[0][-1] + c.split('=')[1]:>12}" for c in sizes[1:]))
    ratios = {c: [] for c in sizes[1:]}
    for shape, w, t in rows:
        if not t.get("none"):
            continue
        line = f"{shape['name'][:28]:28} {shape['m']:5} {w['block_m']:>4}x{w['block_n']:<5} {'y' if w.get('swap_ab') else 'n':>4}  "
        line += "  ".join(f"{t[c][0]:12.1f}" if t.get(c) else f"{'n/a':>12}" for c in sizes)
        line += f"  {t['none'][1]:6.1f}  "
        for c in sizes[1:]:
            if t.get(c):
                r = t["none"][0] / t[c][0]
                ratios[c].append(r)
                line += f"{r:12.3f}  "
            else:
                line += f"{'n/a':>12}  "
        print(line)
    for c, rs in ratios.items():
        if rs:
            g = math.exp(sum(map(math.log, rs)) / len(rs))
            print(f"{c}: geomean t(no cluster)/t({c}) {g:.3f} over {len(rs)}, "
                  f"min {min(rs):.3f}, max {max(rs):.3f}, faster in {sum(r > 1.01 for r in rs)}")


if __name__ == "__main__":
    main()
