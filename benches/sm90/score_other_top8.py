#!/usr/bin/env python3
"""Top-1 and best-of-8 of two rankings on one directory of `carver tune --reference` runs
(`reference-run.sh`, one SHAPE.json.xz (or .json.gz) a shape): the run's own model, whose top-8 is part of the
reference, and another model whose top-8 `carver tune --topk 8` timed in the same device call
(OTHER_DIR/SHAPE.json.xz or .json.gz; a shape without one has the same top-8). A pick the reference timed
takes the reference's time, one it did not the separate tune's; the best is the reference's best
(ratios capped at 1).

    benches/sm90/score_other_top8.py RUN_DIR OTHER_SUBDIR
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def key(config):
    return json.dumps(config, sort_keys=True)


def load(path):
    return stored.load(path)["results"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("other_subdir")
    a = ap.parse_args()
    rows, missing = [], 0
    for f in stored.find(os.path.join(a.run_dir, "*.json")):
        name = stored.stem(f)
        ref = load(f)
        timed = {key(c["config"]): c["measured_time_us"] for c in ref["candidates"]
                 if c.get("measured_time_us")}
        own = sorted((c for c in ref["candidates"] if c["model_rank"] and c["model_rank"] <= 8),
                     key=lambda c: c["model_rank"])
        own_times = [timed.get(key(c["config"])) for c in own]
        other = stored.find(os.path.join(a.run_dir, a.other_subdir, name + ".json"))
        other_path = other[0] if other else None
        if other_path:
            other = sorted(load(other_path)["candidates"], key=lambda c: c["model_rank"])[:8]
            missing += sum(key(c["config"]) not in timed for c in other)
            other_times = [timed.get(key(c["config"])) or c.get("measured_time_us") for c in other]
        else:
            other_times = own_times
        best = min(timed.values())
        ratio = lambda t: min(1.0, best / t)  # noqa: E731
        rows.append((name, ratio(own_times[0]), max(ratio(t) for t in own_times if t),
                     ratio(other_times[0]), max(ratio(t) for t in other_times if t)))
    geomean = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    for row in rows:
        print("%-28s run's model %.3f %.3f   other %.3f %.3f" % row)
    for i, label in ((1, "run's model top-1"), (2, "run's model best-of-8"), (3, "other top-1"),
                     (4, "other best-of-8")):
        xs = [row[i] for row in rows]
        print(f"{label}: geomean {geomean(xs):.3f}, worst {min(xs):.3f}")
    print(f"{missing} picks of the other ranking timed only by its own tune")


if __name__ == "__main__":
    main()
