#!/usr/bin/env python3
"""How fast a block alone on its SM streams a GEMM's B strip, from the L2 and from DRAM, with and
without the 16-row GEMM that consumes it.

Every program of a Triton kernel reads a strip BN columns wide (rows of BN * 2 bytes, fp16), BK
rows a stage, pipelined `num_stages` deep. `--programs` programs (default 128: one an SM on the
H100 and H200) run at once. Two kernels:
- strip: sums what it reads (the sum is stored, so no load is dead);
- GEMM: multiplies a 16-row A (shared by every program, so it comes from the L2) by the strip
  with `tl.dot`, as Triton's GEMM loop does for a 16 x BN x BK tile.
And two windows:
- cold: every program walks its own strip of a matrix far larger than the L2 once;
- warm: every program re-reads a window of `--warm-rows` rows of its strip (the row offset is a
  scalar modulo, so the loads stay 16-byte vectors), which after the first pass sits in the L2.
The time of one iteration is the slope between two loop lengths (`--rows`), so the launch, the
pipeline's fill and the store cancel.

The question it answers (issue 15, the floor class): lone 16- and 32-row GEMM tiles at long K
take about 0.34 us an iteration at BLOCK_SIZE_K 128 whatever their depth, about twice what the
model prices. Is that the memory latency of a DRAM fetch (then the warm window is faster), a
per-SM cost of issuing the requests (then both windows take the same time), or the GEMM's own
loop (then the strip alone is faster)?

    python3 benches/triton/lone_strips.py --out lone.json
"""

import argparse
import json
import statistics
import sys

WIDTHS = (16, 32, 64, 128)
DEPTHS = (32, 64, 128)
WINDOWS = ("cold", "warm", "gemm_cold", "gemm_warm")


def ints(text, name, ap):
    try:
        return [int(x) for x in text.split(",")]
    except ValueError as e:
        ap.error(f"{name} takes comma-separated integers ({e})")


def launch_timer(torch, reps):
    """`time_us(launch)`: one warm-up launch, then the median over `reps` launches of the time
    between CUDA events recorded around each, in microseconds."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]

    def time_us(launch):
        launch()
        torch.cuda.synchronize()
        for i in range(reps):
            events[i].record()
            launch()
        events[reps].record()
        torch.cuda.synchronize()
        return statistics.median(events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(reps))
    return time_us


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=128, help="programs a launch (default 128)")
    ap.add_argument("--rows", default="32768,131072",
                    help="two loop lengths in rows, short and long (default 32768,131072)")
    ap.add_argument("--warm-rows", type=int, default=512,
                    help="rows of the window the warm runs re-read (default 512)")
    ap.add_argument("--warps", default="1,2,4", help="warp counts (default 1,2,4)")
    ap.add_argument("--stages", default="2,3,4,6", help="pipeline depths (default 2,3,4,6)")
    ap.add_argument("--reps", type=int, default=10, help="timed launches a point (default 10)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    args.rows = ints(args.rows, "--rows", ap)
    args.warps = ints(args.warps, "--warps", ap)
    args.stages = ints(args.stages, "--stages", ap)
    if len(args.rows) != 2 or not 0 < args.rows[0] < args.rows[1]:
        ap.error("--rows takes two lengths, the shorter first")
    for r in args.rows + [args.warm_rows]:
        if r % max(DEPTHS):
            ap.error(f"every row count must be a multiple of {max(DEPTHS)}, got {r}")
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def read_strip(b_ptr, out_ptr, N, ROWS, WINDOW,
                   BK: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
        pid = tl.program_id(0)
        cols = pid * BN + tl.arange(0, BN)
        rows = tl.arange(0, BK)
        acc = tl.zeros((BK, BN), dtype=tl.float32)
        for k in tl.range(0, ROWS, BK, num_stages=STAGES):
            r0 = k % WINDOW  # a scalar: the loads stay contiguous along the row
            acc += tl.load(b_ptr + (r0 + rows)[:, None] * N + cols[None, :]).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc))

    @triton.jit
    def gemm_strip(a_ptr, b_ptr, out_ptr, N, K, ROWS, WINDOW,
                   BK: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
        pid = tl.program_id(0)
        cols = pid * BN + tl.arange(0, BN)
        rows = tl.arange(0, BK)
        am = tl.arange(0, 16)
        acc = tl.zeros((16, BN), dtype=tl.float32)
        for k in tl.range(0, ROWS, BK, num_stages=STAGES):
            r0 = k % WINDOW
            a = tl.load(a_ptr + am[:, None] * K + (r0 + rows)[None, :])
            b = tl.load(b_ptr + (r0 + rows)[:, None] * N + cols[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(out_ptr + pid * 16 * BN + am[:, None] * BN + tl.arange(0, BN)[None, :], acc)

    programs = args.programs
    short, long_ = args.rows
    widest = max(WIDTHS)
    # One launch of the long loop streams far more than the L2 holds, so cold loads miss it.
    b_buf = torch.randn(long_ * programs * widest, device="cuda", dtype=torch.float16)
    a_buf = torch.randn(16 * long_, device="cuda", dtype=torch.float16)
    out = torch.empty(programs * 16 * widest, device="cuda", dtype=torch.float32)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    time_us = launch_timer(torch, args.reps)

    points = []
    for bn in WIDTHS:
        n = programs * bn
        for bk in DEPTHS:
            for warps in args.warps:
                if bn * bk > 64 * 32 * warps:
                    continue  # the summing kernel's accumulator would spill
                for stages in args.stages:
                    point = {"bn": bn, "bk": bk, "warps": warps, "stages": stages,
                             "row_bytes": bn * 2, "stage_bytes": bn * bk * 2,
                             "programs": programs}
                    for window in WINDOWS:
                        times = []
                        for rows in (short, long_):
                            wrap = rows if window.endswith("cold") else args.warm_rows
                            if window.startswith("gemm"):
                                def launch(rows=rows, wrap=wrap):
                                    gemm_strip[(programs,)](a_buf, b_buf, out, n, long_, rows, wrap,
                                                            BK=bk, BN=bn, STAGES=stages,
                                                            num_warps=warps)
                            else:
                                def launch(rows=rows, wrap=wrap):
                                    read_strip[(programs,)](b_buf, out, n, rows, wrap, BK=bk,
                                                            BN=bn, STAGES=stages, num_warps=warps)
                            times.append(time_us(launch))
                        point[f"{window}_us"] = times
                        point[f"{window}_iter_us"] = (times[1] - times[0]) / ((long_ - short) / bk)
                    points.append(point)
                    print(f"BN {bn:3d} BK {bk:3d} w{warps} s{stages}: us an iteration, strip cold "
                          f"{point['cold_iter_us']:.3f} warm {point['warm_iter_us']:.3f}; GEMM cold "
                          f"{point['gemm_cold_iter_us']:.3f} warm {point['gemm_warm_iter_us']:.3f}",
                          flush=True)
    doc = {"tool": "benches/triton/lone_strips.py", "device": torch.cuda.get_device_name(),
           "l2_bytes": l2, "programs": programs, "rows": args.rows, "warm_rows": args.warm_rows,
           "points": points}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("best us an iteration (warps, stages) over the depths and warps tried")
    print(" BN  BK  " + "  ".join(f"{w:13s}" for w in WINDOWS))
    for bn in WIDTHS:
        for bk in DEPTHS:
            pts = [p for p in points if p["bn"] == bn and p["bk"] == bk]
            if not pts:
                continue
            cells = []
            for window in WINDOWS:
                b = min(pts, key=lambda p: p[f"{window}_iter_us"])
                cells.append(f"{b[f'{window}_iter_us']:.3f} ({b['warps']},{b['stages']})")
            print(f"{bn:3d} {bk:3d}  " + "  ".join(f"{c:13s}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
