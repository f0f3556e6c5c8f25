#!/usr/bin/env python3
"""Two `compare-run.sh` tune runs of the same shape sets (new and old binary, one device call)
compared two ways:

- paired: every configuration timed in both runs (a top-8 candidate of both rankings), old time
  over new time, grouped by --group (which configurations a kernel change touches);
- tuned: per set, cuBLAS time over each run's winner (cuBLAS the faster of its two timings of
  the shape), geomean and worst.

    benches/sm90/compare_runs.py NEW_DIR OLD_DIR [--group streamed|split|swap|none]
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def tile_grid(shape, config):
    """Tiles along M and along N of the configuration's grid for the shape."""
    return -(-shape["m"] // config["block_m"]), -(-shape["n"] // config["block_n"])


def group_of(shape, config, how):
    if how == "streamed":
        rows, cols = tile_grid(shape, config)
        return "streamed" if rows == 1 or cols == 1 else "not streamed"
    if how == "split":
        return "split" if config.get("split_k", 1) > 1 else "unsplit"
    if how == "swap":
        return "swapped" if config.get("swap_ab") else "not swapped"
    return "all"


def shape_key(shape):
    return shape["m"], shape["n"], shape["k"], shape.get("batch", 1)


def timed(result):
    """{config as sorted JSON: measured us} of one shape's candidates that ran."""
    return {json.dumps(c["config"], sort_keys=True): c["measured_time_us"]
            for c in result.get("candidates") or [] if c.get("measured_time_us")}


def compare(new_dir, old_dir, how):
    """(paired {group: [old/new]}, tuned [(set, new ratios, old ratios)]) where ratios are
    [(cuBLAS / winner, shape name)]."""
    paired, tuned = {}, []
    for path in stored.find(os.path.join(new_dir, "*.json")):
        name = os.path.basename(path)
        olds = stored.find(os.path.join(old_dir, stored.stem(path) + ".json"))
        if not olds:
            continue
        new = stored.load(path)["results"]
        old = {shape_key(r["shape"]): r for r in stored.load(olds[0])["results"]}
        new_ratios, old_ratios = [], []
        for r in new:
            o = old.get(shape_key(r["shape"]))
            if o is None:
                continue
            old_times = timed(o)
            for config, t in timed(r).items():
                if config in old_times:
                    g = group_of(r["shape"], json.loads(config), how)
                    paired.setdefault(g, []).append(old_times[config] / t)
            if r.get("winner_time_us") and o.get("winner_time_us"):
                cublas = min(r["cublas_time_us"], o["cublas_time_us"])
                new_ratios.append((cublas / r["winner_time_us"], r["shape"]["name"]))
                old_ratios.append((cublas / o["winner_time_us"], r["shape"]["name"]))
        tuned.append((name, new_ratios, old_ratios))
    return paired, tuned


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new_dir")
    ap.add_argument("old_dir")
    ap.add_argument("--group", choices=["streamed", "split", "swap", "none"], default="none")
    a = ap.parse_args(argv)
    paired, tuned = compare(a.new_dir, a.old_dir, a.group)
    if not tuned:
        raise SystemExit(f"error: no set of {a.new_dir} has a run of the same name in {a.old_dir}")
    for g, rs in sorted(paired.items()):
        print(f"paired, {g}: old/new geomean {geomean(rs):.3f} over {len(rs)} configurations "
              f"({min(rs):.3f}-{max(rs):.3f})")
    print(f"{'set':32} {'new vs cuBLAS':>22} {'old vs cuBLAS':>22}")
    for name, new, old in tuned:
        if not new:
            continue
        cell = lambda rs: f"{geomean([x for x, _ in rs]):.3f} / {min(rs)[0]:.3f}"
        print(f"{name:32} {cell(new):>22} {cell(old):>22}   worst new: {min(new)[1]}")
    return paired, tuned


if __name__ == "__main__":
    main()
