"""Writes the installed carver's first pick for every (model, TP, batch size) of a models.json set,
as the harness's `--previous` file takes it: {label: {M: config key}}. Made with the wheel of the
commit before a model change, it lets one device run time the old and the new model's picks
together.

    python3 benches/moe/top1_picks.py --set holdout6 --arch h100 --dtype fp8_w8a8 --block-shape 128,128 \
        --out benches/moe/picks/84212d8-h100-fp8-holdout6.json
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import carver  # noqa: E402
from carver.moe_kernel import config_key  # noqa: E402
from harness import BATCH_SIZES, MODEL_SETS, load_problems  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=MODEL_SETS, required=True)
    ap.add_argument("--models-file", default=os.path.join(HERE, "models.json"))
    ap.add_argument("--arch", required=True)
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp8_w8a8"), default="bf16")
    ap.add_argument("--block-shape", help="e.g. 128,128")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    block = [int(x) for x in args.block_shape.split(",")] if args.block_shape else None
    picks = {}
    for p in load_problems(args.models_file, args.set, None):
        rec = carver.recommend_moe(p["experts"], p["topk"], p["hidden"], p["intermediate"], tp=p["tp"],
                                   dtype=args.dtype, block_shape=block, arch=args.arch,
                                   batch_sizes=list(BATCH_SIZES), candidates=1)
        picks[p["label"]] = {str(b.m): config_key(b.hints[0].config) for b in rec.batches}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(picks, f, indent=1, sort_keys=True)
    print(f"{args.out}: {len(picks)} layers x {len(BATCH_SIZES)} batch sizes")


if __name__ == "__main__":
    main()
