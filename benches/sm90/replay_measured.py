#!/usr/bin/env python3
"""Scores the current binary's cuda-sm90 top-8 against configurations already timed on the GPU.

For every shape of the sets named, it asks `carver recommend --target cuda-sm90 --topk 8` for the
top-8 and looks each config up in the stored `carver tune` runs of one GPU (every measurement
directory given). Per set it prints how many of the eight were timed and the best of them
against the best any run timed for that shape: a check, without a GPU, of a model change whose
picks have mostly been timed before. Configs never timed count for nothing, so the figure is an
upper bound on what a run would lose and says nothing of untimed gains.

  benches/sm90/replay_measured.py --arch h200 --carver target/release/carver \\
      --runs crates/carver-gpu/measurements/h200-issue16-final ... \\
      --sets eval/holdout12-sm90-shapes.json eval/dev-shapes.json
"""

import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def load_runs(dirs):
    timed = {}  # (set name, shape name) -> {config json: [us, ...]}
    for d in dirs:
        for path in stored.find(os.path.join(d, "*.json")):
            set_name = os.path.basename(path).split(".")[0]
            for r in stored.load(path)["results"]:
                per = timed.setdefault((set_name, r["shape"]["name"]), {})
                for c in r["candidates"]:
                    if c.get("measured_time_us"):
                        per.setdefault(json.dumps(c["config"], sort_keys=True), []).append(
                            c["measured_time_us"])
    return timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True)
    ap.add_argument("--carver", default="target/release/carver")
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--sets", nargs="+", required=True)
    args = ap.parse_args()
    timed = load_runs(args.runs)
    print(f"{'set':28} {'shapes':>6} {'timed of 8':>10} {'geomean':>8} {'worst':>6}")
    for set_path in args.sets:
        set_name = os.path.basename(set_path).split(".")[0]
        ratios, covered, missing = [], [], []
        for s in json.load(open(set_path))["shapes"]:
            per = timed.get((set_name, s["name"]))
            if not per:
                continue
            out = subprocess.run(
                [args.carver, "recommend", "--arch", args.arch, "--target", "cuda-sm90",
                 "--m", str(s["M"]), "--n", str(s["N"]), "--k", str(s["K"]),
                 "--batch", str(s.get("batch", 1)), "--topk", "8", "--format", "json"],
                capture_output=True, text=True, check=True).stdout
            hints = json.loads(out)["results"][0]["hints"]
            got = [min(per[k]) for k in (json.dumps(h["config"], sort_keys=True) for h in hints)
                   if k in per]
            covered.append(len(got))
            if got:
                ratios.append(min(min(v) for v in per.values()) / min(got))
            else:
                missing.append(s["name"])
        if ratios:
            g = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"{set_name:28} {len(ratios):6} {sum(covered) / len(covered):10.1f} "
                  f"{g:8.3f} {min(ratios):6.3f}")
        for name in missing:
            print(f"  {name}: none of the top-8 was timed")


if __name__ == "__main__":
    main()
