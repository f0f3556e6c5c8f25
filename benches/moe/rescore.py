"""Scores the installed carver's top-k against a stored MoE run, offline: for each (model, TP,
batch size) of moe_results.json(.xz|.gz), carver's picks now against the run's measured times (the
sweep's and the final re-timing's). A pick the run did not time counts as no help, so the
best-of-k printed is a lower bound; the run's own figures are printed beside it. Also the
model's ranking of the configs the run did time ("among measured": its first and its best of k
among them), which compares two models on the same data without that bias.

    python3 benches/moe/rescore.py benches/moe/runs/h200-2026-11-25-v2-holdout/moe_results.json.xz

With `--pooled` it prints only the pooled "among measured" first picks of all the runs given, by
GPU, dtype (bf16, fp8 per tensor, fp8 block-scaled) and the layer's per-shard N (or, with `--by m`,
the batch size): the in-sample figure of a model change, the same points before and after.

    python3 benches/moe/rescore.py --pooled benches/moe/runs/*/moe_results.json.xz
"""

import argparse
import json
import math
import os
import sys

import carver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402
from carver.moe_kernel import config_key


def geomean(xs):
    return math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs))


def dtype_class(args):
    if args.get("block_shape"):
        return "fp8 block-scaled"
    return "fp8 per tensor" if args.get("dtype") == "fp8_w8a8" else (args.get("dtype") or "bf16")


# The size classes `--pooled` reports: the dimension's name and the upper bounds of its classes.
SIZE_CLASSES = {"n": ("N", (256, 768)), "m": ("M", (2, 32, 512))}


def size_classes(by):
    """The class labels of `by` ("n" or "m"), smallest first."""
    name, bounds = SIZE_CLASSES[by]
    return [f"{name} <= {b}" for b in bounds] + [f"{name} > {bounds[-1]}"]


def size_class(value, by):
    name, bounds = SIZE_CLASSES[by]
    return next((f"{name} <= {b}" for b in bounds if value <= b), f"{name} > {bounds[-1]}")


def rescore(path, topk, quiet=False, pooled=None, by="n"):
    """Prints the run's scores (unless `quiet`); appends each point's "among measured" first pick
    to `pooled[(gpu, dtype class, N or M class)]` when given (`by`: "n" or "m")."""
    doc = stored.load(path)
    args = doc.get("args", {})
    now_top1, now_best, run_best, unmeasured = [], [], [], 0
    among_top1, among_best = [], []
    per_model = []
    for e in doc["entries"]:
        p = e["problem"]
        rec = carver.recommend_moe(p["experts"], p["topk"], p["hidden"], p["intermediate"], tp=p["tp"],
                                   arch=doc["arch"], batch_sizes=[b["m"] for b in e["batches"]], candidates=1024,
                                   dtype=args.get("dtype") or "bf16", block_shape=args.get("block_shape"))
        entry_top1, entry_default = [], []
        for b, rb in zip(e["batches"], rec.batches):
            measured = dict(b["sweep_us"])
            measured.update(b["final_us"])
            ranked = [measured.get(config_key(h.config)) for h in rb.hints]
            timed = [t for t in ranked if t][:topk]
            if timed:
                among = [min(1.0, b["best_us"] / t) for t in timed]
                among_top1.append(among[0])
                among_best.append(max(among))
                if pooled is not None:
                    size = size_class(p["n"] if by == "n" else b["m"], by)
                    pooled.setdefault((doc["arch"], dtype_class(args), size), []).append(among[0])
            times = ranked[:topk]
            unmeasured += sum(t is None for t in times)
            ratios = [min(1.0, b["best_us"] / t) if t else 0.0 for t in times]
            now_top1.append(ratios[0])
            now_best.append(max(ratios))
            run_best.append(b["scores"]["carver_best8"])
            entry_top1.append(ratios[0])
            entry_default.append(b["scores"]["default"] or 0.0)
        per_model.append((e["label"], geomean(entry_top1), min(entry_top1), geomean(entry_default)))
    n = len(now_best)
    if quiet:
        return
    print(f"{path}: {n} (model, TP, batch size) points; {unmeasured} of {topk * n} picks not timed in the run")
    print(f"  the run's carver best-of-8:      geomean {geomean(run_best):.3f}, worst {min(run_best):.3f}")
    print(f"  installed carver best-of-{topk}, at least: geomean {geomean(now_best):.3f}, worst {min(now_best):.3f}")
    print(f"  installed carver top-1, at least:   geomean {geomean(now_top1):.3f}, worst {min(now_top1):.3f}")
    print(f"  among measured configs: top-1 geomean {geomean(among_top1):.3f}, worst {min(among_top1):.3f}; "
          f"best-of-{topk} geomean {geomean(among_best):.3f}, worst {min(among_best):.3f}")
    for label, top1, worst, default in per_model:
        print(f"    {label:28s} installed top-1 {top1:.3f} (worst {worst:.3f}); the run's default {default:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="moe_results.json, .json.xz or .json.gz files")
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--pooled", action="store_true",
                    help="print only the pooled first picks among measured configs, by GPU, dtype and N")
    ap.add_argument("--by", choices=("n", "m"), default="n",
                    help="with --pooled: classes of the layer's per-shard N (default) or of the batch size M")
    args = ap.parse_args()
    pooled = {} if args.pooled else None
    for path in args.runs:
        rescore(path, args.topk, quiet=args.pooled, pooled=pooled, by=args.by)
    if pooled:
        print("first pick among the configs each run timed, over the run's best (geomean, worst, points)")
        for gpu, dtype in sorted({k[:2] for k in pooled}):
            everything = [r for k, v in pooled.items() if k[:2] == (gpu, dtype) for r in v]
            parts = [f"{c}: {geomean(pooled[(gpu, dtype, c)]):.4f}" for c in size_classes(args.by)
                     if (gpu, dtype, c) in pooled]
            print(f"  {gpu} {dtype:17s} {geomean(everything):.4f}, worst {min(everything):.3f}, "
                  f"{len(everything)} points ({'; '.join(parts)})")


if __name__ == "__main__":
    main()
