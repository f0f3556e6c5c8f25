#!/usr/bin/env python3
"""DRAM read bandwidth when blocks read narrow column strips of a row-major matrix, as the B
panels of a GEMM's tiles do.

Every program of a Triton kernel reads a strip BN columns wide (rows of BN * 2 bytes, fp16) down
a share of K, BK rows a stage, pipelined `num_stages` deep, and sums it (the sum is stored, so no
load is dead). The matrix (K x N, 256 MiB by default) is far larger than the L2, and neighbouring
programs read neighbouring strips, as a GEMM's tile columns do. Every width runs the same number
of programs with the same bytes a stage (BK * BN fixed), so only the width of a row segment
differs between them. Per width, the fastest over the warp counts and depths; its efficiency is
that bandwidth over the fastest width's.

The question it answers (issue 15): stored sweeps price 64-byte B rows (BN 32) about a quarter
too fast on DRAM-bound shapes, although Nsight Compute read the same DRAM bytes for them; is a
narrow row's DRAM stream itself slower?

    python3 benches/triton/dram_segments.py --out segments.json
"""

import argparse
import json
import sys

WIDTHS = (16, 32, 64, 128, 256)
STAGE_ELEMENTS = 64 * 128


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16384, help="columns (default 16384)")
    ap.add_argument("--k", type=int, default=8192, help="rows (default 8192)")
    ap.add_argument("--programs", type=int, default=2048,
                    help="programs per launch, every width (default 2048)")
    ap.add_argument("--warps", default="2,4,8", help="warp counts to try (default 2,4,8)")
    ap.add_argument("--stages", default="3,4,6", help="pipeline depths to try (default 3,4,6)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    try:
        args.warps = [int(w) for w in args.warps.split(",")]
        args.stages = [int(s) for s in args.stages.split(",")]
    except ValueError as e:
        ap.error(f"--warps and --stages take comma-separated integers ({e})")
    for w in WIDTHS:
        bk = STAGE_ELEMENTS // w
        splits = max(1, args.programs // max(1, args.n // w))
        if args.n % w or args.k % (splits * bk):
            ap.error(f"--n {args.n}, --k {args.k} and --programs {args.programs} must divide evenly "
                     f"for strip width {w} (BK {bk}, {splits} programs a strip)")
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def read_strips(b_ptr, out_ptr, N, ROWS_PER_PROGRAM, SPLITS,
                    BK: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
        pid = tl.program_id(0)
        strip = pid // SPLITS
        part = pid % SPLITS
        cols = strip * BN + tl.arange(0, BN)
        rows = tl.arange(0, BK)
        acc = tl.zeros((BK, BN), dtype=tl.float32)
        start = part * ROWS_PER_PROGRAM
        for k in tl.range(start, start + ROWS_PER_PROGRAM, BK, num_stages=STAGES):
            acc += tl.load(b_ptr + (k + rows)[:, None] * N + cols[None, :]).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc))

    torch.manual_seed(0)
    b = torch.randn(args.k, args.n, device="cuda", dtype=torch.float16)
    out = torch.empty(args.programs, device="cuda", dtype=torch.float32)
    total_bytes = b.numel() * b.element_size()
    # fp32 sums of fp16 normals: the total is off by far less than this.
    want = b.double().sum().item()
    tolerance = 1e-2 * b.numel() ** 0.5
    rows = []
    for width in WIDTHS:
        bk = STAGE_ELEMENTS // width
        strips = args.n // width
        splits = max(1, args.programs // strips)
        programs = strips * splits
        rows_per_program = args.k // splits
        for warps in args.warps:
            for stages in args.stages:
                def launch():
                    read_strips[(programs,)](b, out, args.n, rows_per_program, splits,
                                             BK=bk, BN=width, STAGES=stages, num_warps=warps)
                launch()
                torch.cuda.synchronize()
                # The kernel summed every element: check against torch's sum of the strips.
                ok = abs(out[:programs].double().sum().item() - want) <= tolerance
                ms = triton.testing.do_bench(launch, warmup=25, rep=200, return_mode="median")
                gbs = total_bytes / (ms * 1e-3) / 1e9
                rows.append({"width_elements": width, "row_bytes": width * 2, "block_k": bk,
                             "warps": warps, "stages": stages, "programs": programs,
                             "median_ms": ms, "gb_per_s": gbs, "sum_ok": ok})
                print(f"BN {width:3d} ({width * 2:3d} B rows) BK {bk:3d} w{warps} s{stages}: "
                      f"{ms * 1e3:8.1f} us, {gbs:7.1f} GB/s{'' if ok else '  SUM MISMATCH'}",
                      flush=True)
    best = {}
    for r in rows:
        if r["sum_ok"] and r["gb_per_s"] > best.get(r["row_bytes"], {"gb_per_s": 0})["gb_per_s"]:
            best[r["row_bytes"]] = r
    top = max(r["gb_per_s"] for r in best.values())
    summary = {str(rb): {"gb_per_s": r["gb_per_s"], "efficiency": r["gb_per_s"] / top,
                         "warps": r["warps"], "stages": r["stages"]}
               for rb, r in sorted(best.items())}
    print("row bytes  best GB/s  efficiency  (warps, stages)")
    for rb, s in summary.items():
        print(f"{rb:>9}  {s['gb_per_s']:9.1f}  {s['efficiency']:10.3f}  ({s['warps']}, {s['stages']})")
    doc = {"tool": "benches/triton/dram_segments.py", "device": torch.cuda.get_device_name(),
           "matrix": {"k": args.k, "n": args.n, "bytes": total_bytes}, "runs": rows,
           "summary": summary}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0 if all(r["sum_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
