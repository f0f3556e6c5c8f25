#!/usr/bin/env python3
"""Paired timings of one cuda-sm90 configuration and its variants in one parameter.

For every shape of stored `carver tune --format json` results (M between --min-m and --max-m),
the stored winner is timed with `carver bench --config` as it is but with no cluster (the
base), then with each variant of --variants, `FIELD=VALUE` pairs of cuda-sm90's own terms
(`stages=8`: an 8-deep ring; `cluster_m=2`: two CTAs along M sharing B's tile), in a rotating
order so that drift does not favour one; cuBLAS is timed in each call. A variant
`bin:LABEL=PATH` times the same configuration with another carver binary (a kernel change,
compared with `--as-stored` so that the base keeps its cluster). Shapes are taken worst (against
cuBLAS) first, until --budget-s runs out. One JSON line per call in OUT, a table last.
(`cluster_n` variants need the kernel of `4a3c167`, measured and reverted: docs/RESULTS.md,
"clusters along N that share A".)

    benches/sm90/config_variants.py --bin target/gpu-run/carver --out pairs.jsonl \\
        RESULTS.json.xz [...]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def load(path):
    return stored.load(path)


def tile_rows(shape, winner):
    """How many tiles the winner's grid has along M (ceil(M / block_m))."""
    return -(-shape["m"] // winner["block_m"])


def shapes(paths, min_m, max_m, max_tile_rows=None):
    seen, out = set(), []
    for path in paths:
        for r in load(path)["results"]:
            s, w = r["shape"], r.get("winner")
            key = (s["m"], s["n"], s["k"], s.get("batch", 1))
            if not w or not min_m <= s["m"] <= max_m or key in seen or s.get("batch", 1) != 1:
                continue
            if max_tile_rows is not None and tile_rows(s, w) > max_tile_rows:
                continue
            seen.add(key)
            out.append((r["speedup_vs_cublas"], s, r.get("layout", "rr"), r.get("dtype"), w))
    return sorted(out, key=lambda t: t[0])


def parse_variants(text):
    """`FIELD=VALUE,...` as [(label, field, value)], where `bin:LABEL=PATH` is the same
    configuration timed with another carver binary (field "bin", value the path); a clear error
    for anything else."""
    out = []
    for item in text.split(","):
        field, sep, value = item.strip().partition("=")
        if field.startswith("bin:") and sep and value and len(field) > 4:
            out.append((field[4:], "bin", value))
            continue
        if not sep or not field or not value.isdigit():
            raise SystemExit(f"error: variant `{item}`: expected FIELD=VALUE with a whole number "
                             "value, e.g. stages=8 or cluster_m=2, or bin:LABEL=PATH (another "
                             "carver binary)")
        out.append((f"{field}={value}", field, int(value)))
    return out


def base_config(winner, as_stored=False):
    """What every variant is compared with: the stored winner without a cluster, or as it was
    stored (`as_stored`: binary comparisons, where the configuration does not change)."""
    if as_stored:
        return dict(winner)
    base = dict(winner, cluster_m=1)
    base.pop("cluster_n", None)
    return base


def variant_config(base, variant):
    """`base` with one parameter changed (`variant` from `parse_variants`, or None: as it is;
    a binary variant leaves it as it is)."""
    config = dict(base)
    if variant is not None and variant[1] != "bin":
        _, field, value = variant
        config[field] = value
    return config


def rotated(items, i):
    """`items` starting at position `i` (modulo), so that no variant always runs first."""
    i %= len(items)
    return items[i:] + items[:i]


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


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-m", type=int, default=512)
    ap.add_argument("--min-m", type=int, default=1)
    ap.add_argument("--variants", default="cluster_m=2")
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--max-tile-rows", type=int, default=None,
                    help="only winners with at most this many tiles along M")
    ap.add_argument("--as-stored", action="store_true",
                    help="time the stored winner as it is (with its cluster) as the base")
    ap.add_argument("results", nargs="+")
    a = ap.parse_args(argv)
    variants = parse_variants(a.variants)
    runs = [None] + variants
    labels = ["base"] + [v[0] for v in variants]
    start = time.time()
    rows = []
    # One kernel cache per binary: their kernels differ under the same configuration.
    caches = {label: tempfile.mkdtemp() for label in labels}
    with open(a.out, "w") as out:
        for i, (speedup, shape, layout, dtype, winner) in enumerate(shapes(a.results, a.min_m, a.max_m, a.max_tile_rows)):
            if time.time() - start > a.budget_s:
                print(f"budget spent after {i} shapes", file=sys.stderr)
                break
            base = base_config(winner, a.as_stored)
            times = {}
            for variant in rotated(runs, i):
                label = "base" if variant is None else variant[0]
                config = variant_config(base, variant)
                binary = variant[2] if variant is not None and variant[1] == "bin" else a.bin
                rep = bench(binary, caches[label], shape, layout, dtype or "bf16", config)
                out.write(json.dumps({"shape": shape, "variant": label, "config": config,
                                      "stored_speedup": speedup, "report": rep}) + "\n")
                out.flush()
                if rep.get("measured_time_us"):
                    times[label] = (rep["measured_time_us"], rep["cublas_time_us"])
                else:
                    why = rep.get("error") or rep.get("failure")
                    print(f"{shape['name']} {label}: {str(why)[:200]}", file=sys.stderr)
            rows.append((shape, winner, times))
    print(f"{'shape':28} {'M':>5} {'tile':>10} swap  " + "  ".join(f"{c:>12}" for c in labels)
          + "  cuBLAS  " + "  ".join(f"{'base/' + c:>16}" for c in labels[1:]))
    ratios = {c: [] for c in labels[1:]}
    for shape, w, t in rows:
        if "base" not in t:
            continue
        line = f"{shape['name'][:28]:28} {shape['m']:5} {w['block_m']:>4}x{w['block_n']:<5} {'y' if w.get('swap_ab') else 'n':>4}  "
        line += "  ".join(f"{t[c][0]:12.1f}" if c in t else f"{'n/a':>12}" for c in labels)
        line += f"  {t['base'][1]:6.1f}  "
        for c in labels[1:]:
            if c in t:
                r = t["base"][0] / t[c][0]
                ratios[c].append(r)
                line += f"{r:16.3f}  "
            else:
                line += f"{'n/a':>16}  "
        print(line)
    for c, rs in ratios.items():
        if rs:
            print(f"{c}: geomean t(base)/t({c}) {geomean(rs):.3f} over {len(rs)}, "
                  f"min {min(rs):.3f}, max {max(rs):.3f}, faster in {sum(r > 1.01 for r in rs)}")
    return rows


if __name__ == "__main__":
    main()
