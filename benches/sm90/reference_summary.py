#!/usr/bin/env python3
"""Where the model's picks land against the reduced whole space of `carver tune --reference`
runs: per shape, the reference's best time over the time of the model's top-1 (model rank 1)
and over the best of its top-k (ranks 1 to k), with the rank the reference's best had; then
geomean and worst. The picks are part of the reference, so no ratio exceeds 1; the reference is
a subset of the whole space, so each ratio is an upper bound on the ratio to the exhaustive best.
Then the model's fidelity over every configuration each run timed: per shape, Spearman's rank
correlation of predicted and measured time and the median absolute error of the prediction.

    benches/sm90/reference_summary.py [--topk 8] RUN.json [...]

With `--carver BIN` it also scores another ranking on the same runs: BIN's cuda-sm90 top-k for
each shape (`BIN recommend --arch ARCH --target cuda-sm90 ... --format json`), each pick's time
looked up among the run's measurements. A pick the run did not time counts as no help, so that
best-of-k is a lower bound; the count of such picks is printed. With `--any-group` a pick the run
did not time takes the time of the same configuration in another launch-order group (the reduced
space times one group per structure), where the run timed one: an approximation, said so.

    benches/sm90/reference_summary.py --carver OLD/carver --arch h200 RUN.json.xz [...]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys

# Spearman's rank correlation and the median absolute error, as the Triton harness reports them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "triton"))
import fidelity  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def load(path):
    return stored.load(path)


def config_key(config):
    """A configuration as a lookup key (fields written only when set take their defaults)."""
    return json.dumps(dict({"split_k": 1, "swap_ab": False}, **config), sort_keys=True)


def shape_rows(path, topk):
    """(name, M, N, K, measured count, top-1 ratio, best-of-k ratio, rank of the best) of
    every shape of one run that measured its top-1 and at least one other configuration."""
    report = load(path)
    rows = []
    for r in report["results"]:
        timed = [(c["model_rank"], c["measured_time_us"]) for c in r.get("candidates") or []
                 if c.get("measured_time_us")]
        if not timed:
            continue
        best_rank, best = min(timed, key=lambda t: t[1])
        top1 = [t for rank, t in timed if rank == 1]
        picks = [t for rank, t in timed if rank <= topk]
        if not top1 or len(timed) <= len(picks):
            continue
        s = r["shape"]
        name = s.get("name") or f"{s['m']}x{s['n']}x{s['k']}"
        rows.append((name, s["m"], s["n"], s["k"], len(timed), best / top1[0], best / min(picks),
                     best_rank))
    return rows


def other_picks(path, topk, carver, arch, any_group=False):
    """(name, top-1 ratio or None, best-of-k ratio or None, picks not timed) of another binary's
    cuda-sm90 top-k on every shape of one run, its picks' times looked up in the run."""
    rows = []
    for r in load(path)["results"]:
        timed = {config_key(c["config"]): c["measured_time_us"] for c in r.get("candidates") or []
                 if c.get("measured_time_us") and c.get("config")}
        if not timed:
            continue
        s = r["shape"]
        cmd = [carver, "recommend", "--arch", arch, "--target", "cuda-sm90", "--m", str(s["m"]),
               "--n", str(s["n"]), "--k", str(s["k"]), "--batch", str(s.get("batch", 1)),
               "--dtype", r.get("dtype", "bf16"), "--topk", str(topk), "--format", "json"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"error: {' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
        hints = json.loads(out.stdout)["results"][0]["hints"]
        times = [timed.get(config_key(h["config"])) for h in hints]
        if any_group:
            # Fewest groups first: the reduced space's own (8, or 1 without tile rows to group).
            times = [t or next((timed[k] for g in (8, 1, 4, 16, 32, 64)
                                if (k := config_key(dict(h["config"], group_m=g))) in timed), None)
                     for t, h in zip(times, hints)]
        best = min(timed.values())
        known = [t for t in times if t]
        name = s.get("name") or f"{s['m']}x{s['n']}x{s['k']}"
        rows.append((name, best / times[0] if times and times[0] else None,
                     best / min(known) if known else None, sum(t is None for t in times)))
    return rows


def shape_fidelity(path):
    """(name, configurations, Spearman, median |error|) of the model's predicted times against
    the measured ones, over every configuration of each shape of one run."""
    report = load(path)
    rows = []
    for r in report["results"]:
        pairs = [(c["predicted_time_us"], c["measured_time_us"]) for c in r.get("candidates") or []
                 if c.get("measured_time_us") and c.get("predicted_time_us")]
        if len(pairs) < 3:
            continue
        pred, meas = [p for p, _ in pairs], [m for _, m in pairs]
        s = r["shape"]
        name = s.get("name") or f"{s['m']}x{s['n']}x{s['k']}"
        rows.append((name, len(pairs), fidelity.spearman(pred, meas),
                     fidelity.median_abs_rel_error(pred, meas)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--carver", help="another binary whose cuda-sm90 picks to score on the runs")
    ap.add_argument("--arch", default="h200", help="the arch --carver plans for (default h200)")
    ap.add_argument("--any-group", action="store_true",
                    help="a --carver pick not timed takes its time in another launch-order group")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args(argv)
    rows = [row for path in a.runs for row in shape_rows(path, a.topk)]
    if not rows:
        raise SystemExit("error: no run holds a shape with its top-1 and a reference measured")
    print(f"{'shape':26} {'M':>6} {'N':>6} {'K':>6} {'timed':>6} {'top-1':>6} "
          f"{f'best-of-{a.topk}':>10} {'rank of best':>12}")
    for name, m, n, k, count, top1, best_k, rank in rows:
        print(f"{name[:26]:26} {m:6} {n:6} {k:6} {count:6} {top1:6.3f} {best_k:10.3f} {rank:12}")
    top1s, bests = [r[5] for r in rows], [r[6] for r in rows]
    print(f"top-1 geomean {geomean(top1s):.3f}, worst {min(top1s):.3f}; best-of-{a.topk} geomean "
          f"{geomean(bests):.3f}, worst {min(bests):.3f}; over {len(rows)} shapes")
    fid = [row for path in a.runs for row in shape_fidelity(path)]
    print(f"\nmodel fidelity: {'shape':26} {'configs':>7} {'spearman':>8} {'median |err|':>12}")
    for name, n, rho, err in fid:
        print(f"                {name[:26]:26} {n:7} {rho:8.3f} {100 * err:11.1f}%")
    rhos = [r[2] for r in fid if r[2] is not None]
    errs = [r[3] for r in fid if r[3] is not None]
    if rhos and errs:
        print(f"median over shapes: spearman {statistics.median(rhos):.3f}, median |error| "
              f"{100 * statistics.median(errs):.1f}%")
    if a.carver:
        other = [row for path in a.runs
                 for row in other_picks(path, a.topk, a.carver, a.arch, a.any_group)]
        print(f"\n{a.carver}'s picks: {'shape':26} {'top-1':>6} {f'best-of-{a.topk}':>10} "
              f"{'not timed':>9}")
        for name, top1, best_k, missing in other:
            fmt = lambda x: f"{x:.3f}" if x else "-"  # noqa: E731
            print(f"    {name[:26]:26} {fmt(top1):>6} {fmt(best_k):>10} {missing:9}")
        top1s = [r[1] or 0.0 for r in other]
        bests = [r[2] or 0.0 for r in other]
        if other and min(bests) > 0:
            print(f"  top-1 geomean {geomean(top1s) if min(top1s) > 0 else 0:.3f}; best-of-{a.topk} "
                  f"geomean at least {geomean(bests):.3f}, worst {min(bests):.3f}; "
                  f"{sum(r[3] for r in other)} picks not timed"
                  + (" (a pick in another group stands for one not timed)" if a.any_group else ""))
    return rows


if __name__ == "__main__":
    main()
