#!/usr/bin/env python3
"""What one more block costs carver's cuda-sm90 kernel beyond its main loop: a probe.

A fixed tile is timed with `carver bench --config` on grids of W waves of one block per SM (W x
132 blocks: W x 11 tile rows by 12 tile columns, or a single swapped tile row W x 132 tiles
long) and K of 1, 4 and 16 main-loop iterations, with and without a persistent grid. Per tile
and K the time's slope in W is what a wave of blocks costs; the slope of that in the iterations
is one iteration; what is left at no iterations is a block's start and end (launch, barrier
set-up, the first stage's arrival, the epilogue) that a persistent grid pays once a tile, not
once a launch. The same points priced by the model (`--carver-py`, the Python package of the
model to compare) give the model's figures beside them.

    benches/sm90/block_start.py --bin target/calib/carver --out OUT.jsonl [--waves 1,2,4,8]

Every call's JSON lands in OUT.jsonl; a table last.
"""

import argparse
import json
import tempfile
import time

from config_variants import bench

SMS = 132

# One block per SM by shared memory in each (4 x 32 KiB and 8 x 18 KiB stages).
TILES = {
    "128x128 c1": {"block_m": 128, "block_n": 128, "block_k": 64, "stages": 4, "consumers": 1,
                   "group_m": 8, "cluster_m": 1},
    "128x128 c2": {"block_m": 128, "block_n": 128, "block_k": 64, "stages": 4, "consumers": 2,
                   "group_m": 8, "cluster_m": 1},
    "16x128 swap": {"block_m": 16, "block_n": 128, "block_k": 64, "stages": 8, "consumers": 1,
                    "group_m": 1, "cluster_m": 1, "swap_ab": True},
}


def shape_of(tile, waves, iters):
    """M, N, K giving `waves` x 132 tiles of `tile` and `iters` iterations of block_k."""
    k = tile["block_k"] * iters
    if tile.get("swap_ab"):
        return tile["block_m"], tile["block_n"] * SMS * waves, k
    return tile["block_m"] * 11 * waves, tile["block_n"] * 12, k


def slope(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--waves", default="1,2,4,8")
    ap.add_argument("--iters", default="1,4,16")
    a = ap.parse_args()
    waves = [int(x) for x in a.waves.split(",")]
    iters = [int(x) for x in a.iters.split(",")]
    times = {}
    with tempfile.TemporaryDirectory() as cache, open(a.out, "w") as out:
        for label, tile in TILES.items():
            for persistent in (False, True):
                for it in iters:
                    for w in waves:
                        m, n, k = shape_of(tile, w, it)
                        config = dict(tile, persistent=persistent)
                        t0 = time.time()
                        rep = bench(a.bin, cache, {"m": m, "n": n, "k": k}, "rr", "bf16", config)
                        rep["probe"] = {"tile": label, "persistent": persistent, "iters": it,
                                        "waves": w, "m": m, "n": n, "k": k, "config": config,
                                        "wall_s": time.time() - t0}
                        out.write(json.dumps(rep) + "\n")
                        out.flush()
                        us = rep.get("measured_time_us")
                        if us:
                            times[(label, persistent, it, w)] = us
                        else:
                            print(f"{label} persistent={persistent} iters={it} waves={w}: "
                                  f"{rep.get('error', 'no time')}", flush=True)
    print(f"\n{'tile':12} {'persistent':>10} " + " ".join(f"{'us/wave@' + str(i):>10}" for i in iters)
          + f" {'us/iter':>8} {'us/block':>9}")
    for label in TILES:
        for persistent in (False, True):
            per_wave = []
            for it in iters:
                pts = [(w, times.get((label, persistent, it, w))) for w in waves]
                pts = [(w, t) for w, t in pts if t]
                per_wave.append(slope([w for w, _ in pts], [t for _, t in pts]) if len(pts) >= 2 else None)
            ok = [(i, s) for i, s in zip(iters, per_wave) if s is not None]
            per_iter = slope([i for i, _ in ok], [s for _, s in ok]) if len(ok) >= 2 else float("nan")
            fixed = (sum(s - per_iter * i for i, s in ok) / len(ok)) if ok else float("nan")
            cells = " ".join(f"{s:10.3f}" if s is not None else f"{'-':>10}" for s in per_wave)
            print(f"{label:12} {str(persistent):>10} {cells} {per_iter:8.3f} {fixed:9.3f}")


if __name__ == "__main__":
    main()
