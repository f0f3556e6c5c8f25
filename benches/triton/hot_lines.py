#!/usr/bin/env python3
"""How the time of a lone block's loop grows when the blocks of a wave read the same tile at once.

`--programs` programs (default 128: one an SM on the H100 and H200) each stream a strip BN
columns wide down a row-major fp16 matrix, BK rows a stage, pipelined `--stages` deep, and sum
it. Programs `p` and `q` read the same strip when `p // G == q // G`: G blocks share every line
of their tile at the same moment, as the blocks of a GEMM's wave share the A tile of their tile
row (small M: every block of the row) or the B tile of their column. Two windows, as in
lone_strips.py: cold (one walk down a matrix far larger than the L2) and warm (a 512-row window
re-read, so it sits in the L2). The time of one iteration is the slope between two loop lengths.

A tile of 16 rows by BLOCK_SIZE_K 128 of a row-major A is 16 rows of 256 bytes: the strip BN 128,
BK 16 has the same lines.

The question it answers (issue 15, the floor class): lone 16-row GEMM blocks whose whole wave
reads one A tile run about twice as slow as the model prices; do the L2 slices holding a tile
that every block asks for at once serve it slower than the same bytes spread over many tiles?

    python3 benches/triton/hot_lines.py --out hot.json
"""

import argparse
import json
import sys

from lone_strips import launch_timer

TILES = ((128, 16), (128, 32), (32, 128), (64, 64))
GROUPS = (1, 2, 4, 8, 16, 32, 64, 128)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=128)
    ap.add_argument("--rows", default="32768,131072", help="short,long loop lengths in rows")
    ap.add_argument("--warps", default="2,4")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    short, long_ = (int(x) for x in args.rows.split(","))
    warps_list = [int(w) for w in args.warps.split(",")]
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def read_strip(b_ptr, out_ptr, N, ROWS, WINDOW, GROUP,
                   BK: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
        pid = tl.program_id(0)
        cols = (pid // GROUP) * BN + tl.arange(0, BN)
        rows = tl.arange(0, BK)
        acc = tl.zeros((BK, BN), dtype=tl.float32)
        for k in tl.range(0, ROWS, BK, num_stages=STAGES):
            r0 = k % WINDOW
            acc += tl.load(b_ptr + (r0 + rows)[:, None] * N + cols[None, :]).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc))

    programs = args.programs
    widest = max(bn for bn, _ in TILES)
    buf = torch.randn(long_ * programs * widest, device="cuda", dtype=torch.float16)
    out = torch.empty(programs, device="cuda", dtype=torch.float32)
    time_us = launch_timer(torch, args.reps)

    points = []
    for bn, bk in TILES:
        n = programs * bn
        for warps in warps_list:
            for group in GROUPS:
                if group > programs:
                    continue
                point = {"bn": bn, "bk": bk, "warps": warps, "stages": args.stages,
                         "sharers": group, "tile_bytes": bn * bk * 2, "programs": programs}
                for window in ("cold", "warm"):
                    times = []
                    for rows in (short, long_):
                        wrap = rows if window == "cold" else 512

                        def launch(rows=rows, wrap=wrap):
                            read_strip[(programs,)](buf, out, n, rows, wrap, group, BK=bk, BN=bn,
                                                    STAGES=args.stages, num_warps=warps)
                        times.append(time_us(launch))
                    point[f"{window}_us"] = times
                    point[f"{window}_iter_us"] = (times[1] - times[0]) / ((long_ - short) / bk)
                points.append(point)
                print(f"BN {bn:3d} BK {bk:3d} w{warps} s{args.stages} sharers {group:3d}: us an "
                      f"iteration cold {point['cold_iter_us']:.3f} warm {point['warm_iter_us']:.3f}",
                      flush=True)
    with open(args.out, "w") as f:
        json.dump({"tool": "benches/triton/hot_lines.py", "device": torch.cuda.get_device_name(),
                   "rows": [short, long_], "points": points}, f, indent=1)
    print("us an iteration by sharers (cold / warm)")
    print("BN  BK  w  " + " ".join(f"{g:>11d}" for g in GROUPS))
    for bn, bk in TILES:
        for warps in warps_list:
            row = [p for p in points if p["bn"] == bn and p["bk"] == bk and p["warps"] == warps]
            print(f"{bn:3d} {bk:3d} {warps}  " + " ".join(
                f"{p['cold_iter_us']:.3f}/{p['warm_iter_us']:.3f}" for p in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
