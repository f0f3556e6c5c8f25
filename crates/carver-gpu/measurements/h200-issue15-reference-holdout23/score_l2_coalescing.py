#!/usr/bin/env python3
"""Top-1 and best-of-8 of two rankings on this directory's reference runs: the run's own model
(its top-8 is part of the reference) and the L2-coalescing model, whose top-8 `carver tune --topk 8` timed in the
same device call (l2-coalescing-top8/). A pick the reference timed takes the reference's time; one it did not
takes the separate tune's. The best is the reference's best (ratios capped at 1). Run from the
repository root."""
import glob, gzip, json, math, os
d = os.path.dirname(os.path.abspath(__file__))
def key(c): return json.dumps(c, sort_keys=True)
def load(p): return json.load(gzip.open(p))["results"][0]
rows, missing = [], 0
for f in sorted(glob.glob(d + "/*.json.gz")):
    name = os.path.basename(f)[:-8]
    ref = load(f)
    rt = {key(c["config"]): c["measured_time_us"] for c in ref["candidates"] if c.get("measured_time_us")}
    own = sorted([c for c in ref["candidates"] if c["model_rank"] and c["model_rank"] <= 8], key=lambda c: c["model_rank"])
    ot = [rt.get(key(c["config"])) for c in own]
    other_path = os.path.join(d, "l2-coalescing-top8", name + ".json.gz")
    if os.path.exists(other_path):
        other = sorted(load(other_path)["candidates"], key=lambda c: c["model_rank"])[:8]
        missing += sum(key(c["config"]) not in rt for c in other)
        xt = [rt.get(key(c["config"])) or c.get("measured_time_us") for c in other]
    else:
        xt = ot  # the same top-8
    best = min(rt.values())
    r = lambda t: min(1.0, best / t)
    rows.append((name, r(ot[0]), max(r(t) for t in ot if t), r(xt[0]), max(r(t) for t in xt if t)))
g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
for row in rows:
    print("%-28s run's model %.3f %.3f   other %.3f %.3f" % row)
for i, label in ((1, "run's model top-1"), (2, "run's model best-of-8"), (3, "other top-1"), (4, "other best-of-8")):
    xs = [row[i] for row in rows]
    print(f"{label}: geomean {g(xs):.3f}, worst {min(xs):.3f}")
print(f"{missing} picks of the other ranking timed only by its own tune")
