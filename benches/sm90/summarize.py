#!/usr/bin/env python3
"""Summarizes a benches/sm90/run.sh output directory: tuned winner vs cuBLAS per shape, and for
every exhaustive run the model's top-1 and best-of-top-8 as ratios to the exhaustive best (all
times from the exhaustive run itself), with the tuning wall times."""
import json
import math
import os
import pathlib
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402

out = pathlib.Path(sys.argv[1])


def results(name):
    for path in stored.find(str(out / f"{name}.json")):
        try:
            return stored.load(path)["results"]
        except (ValueError, KeyError):
            return []
    return []


def key(cfg):
    return json.dumps(cfg, sort_keys=True)


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


rows = []
print("shape                  winner us  cuBLAS us  vs cuBLAS  tune s  model rank")
for name in ["t4096", "t8192", "dev"]:
    for r in results(name):
        s = r["shape"]
        label = r.get("name") or f"{s['m']}x{s['n']}x{s['k']}"
        if r.get("error"):
            print(f"{label:<22} error: {r['error'][:80]}")
            continue
        ratio = r["speedup_vs_cublas"]
        rows.append((name, label, ratio))
        print(f"{label:<22} {r['winner_time_us']:>9.1f}  {r['cublas_time_us']:>9.1f}  {ratio:>9.3f}"
              f"  {r['total_wall_s']:>6.2f}  {r['winner_model_rank']}")
dev = [x for n, _, x in rows if n == "dev"]
if dev:
    print(f"dev shapes with M >= 256: geomean {geomean(dev):.3f} over {len(dev)} tuned")

ex_rows = []
for p in sorted(out.glob("ex-*.json*")):
    name = p.name[3:].split(".")[0]
    ex = results(f"ex-{name}")
    picks = json.loads((out / f"picks-{name}.json").read_text())["results"][0]["hints"]
    top8 = results(f"top8-{name}")
    if not ex or ex[0].get("error"):
        print(f"{name}: exhaustive run failed")
        continue
    e = ex[0]
    measured = {key(c["config"]): c["measured_time_us"] for c in e["candidates"]
                if c.get("measured_time_us")}
    best = min(measured.values())
    pick_times = [measured.get(key(h["config"])) for h in picks]
    top1 = best / pick_times[0] if pick_times[0] else None
    got = [t for t in pick_times if t]
    top8_ratio = best / min(got) if got else None
    t8 = top8[0]["total_wall_s"] if top8 and not top8[0].get("error") else float("nan")
    ex_rows.append((name, top1, top8_ratio))
    print(f"{name}: {len(measured)} of {len(e['candidates'])} configs measured, best {best:.1f} us "
          f"(cuBLAS {e['cublas_time_us']:.1f} us); model top-1 {top1 or float('nan'):.3f}, "
          f"best-of-8 {top8_ratio or float('nan'):.3f} of the exhaustive best "
          f"({len(got)} of 8 picks in the space); tuning wall time top-8 {t8:.1f} s vs "
          f"exhaustive {e['total_wall_s']:.1f} s")
if ex_rows:
    print(f"exhaustive shapes: top-1 geomean {geomean([r[1] for r in ex_rows]):.3f}, "
          f"best-of-8 geomean {geomean([r[2] for r in ex_rows]):.3f} over {len(ex_rows)} shapes")
