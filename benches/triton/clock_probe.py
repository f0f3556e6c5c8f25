#!/usr/bin/env python3
"""The SM clock and power a GPU holds while it runs one Triton matmul config back to back.

For each (shape, config), launches the harness's kernel (`kernel.py`) in a loop for `--seconds`,
while `nvidia-smi` samples the SM clock, the power draw and the active clock-event reasons every
50 ms (read only: nothing is set). Prints per config the median time per launch (CUDA events),
TFLOP/s, and the median clock and power over the samples after the first quarter of the loop.

The question it answers: do two configs the cost model prices alike (256 x 128 and 128 x 256 with
8 warps, issue 14/15) run at the same clock, or does the one moving more shared-memory bytes per
FLOP run slower because the GPU lowers its clock to stay in its power limit?

    python3 benches/triton/clock_probe.py --out results.json
    python3 benches/triton/clock_probe.py --shapes 8192x8192x8192 --configs 128x128x64w8s4,128x128x128w8s3 --out r.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHAPES = [(8192, 8192, 8192), (4096, 14336, 4096)]
CONFIGS = [
    (256, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
    (128, 256, 32, 8, 6), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
]


def config_of(bm, bn, bk, warps, stages):
    return {"kwargs": {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8,
                       "SPLIT_K": 1}, "num_warps": warps, "num_stages": stages}


def parse_shapes_and_configs(shapes_text, configs_text):
    """`MxNxK,...` and `BMxBNxBKwWsS,...` (either None for the probe's defaults); exits on bad text."""
    shapes, configs = SHAPES, CONFIGS
    try:
        if shapes_text:
            shapes = [tuple(int(x) for x in s.split("x")) for s in shapes_text.split(",")]
        if configs_text:
            configs = []
            for text in configs_text.split(","):
                tile, rest = text.split("w")
                warps, stages = rest.split("s")
                configs.append(tuple(int(x) for x in tile.split("x")) + (int(warps), int(stages)))
        if any(len(s) != 3 for s in shapes) or any(len(c) != 5 for c in configs):
            raise ValueError("wrong number of fields")
    except ValueError as e:
        raise SystemExit(f"error: --shapes takes MxNxK,... and --configs BMxBNxBKwWsS,... ({e})")
    return shapes, configs


def operands(m, n, k):
    """Random fp16 A (m x k) and B (k x n) and an empty C on the GPU."""
    import torch
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.float16)


def sample_while(fn, seconds):
    """Runs fn() until `seconds` pass while nvidia-smi samples; returns (fn's results, samples)."""
    query = "timestamp,clocks.sm,power.draw,clocks_event_reasons.active"
    proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-lms", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        out = fn(seconds)
    finally:
        proc.terminate()
        text, _ = proc.communicate(timeout=10)
    samples = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            try:
                samples.append({"clock_mhz": float(parts[1]), "power_w": float(parts[2]), "reasons": parts[3]})
            except ValueError:
                pass
    return out, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", help="MxNxK,... (default: the probe's two)")
    ap.add_argument("--configs", help="BMxBNxBKwWsS,... with GROUP_SIZE_M 8, no split (default: the probe's six)")
    args = ap.parse_args()
    shapes, configs = parse_shapes_and_configs(args.shapes, args.configs)

    import torch
    from kernel import matmul

    rows = []
    for m, n, k in shapes:
        a, b, c = operands(m, n, k)
        for cfg in configs:
            config = config_of(*cfg)
            matmul(a, b, c, config)
            torch.cuda.synchronize()

            def loop(seconds):
                times = []
                end = time.perf_counter() + seconds
                while time.perf_counter() < end:
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    for _ in range(10):
                        matmul(a, b, c, config)
                    e.record()
                    e.synchronize()
                    times.append(s.elapsed_time(e) * 100.0)  # us per launch
                return times

            times, samples = sample_while(loop, args.seconds)
            steady = samples[len(samples) // 4:] or samples
            us = statistics.median(times[len(times) // 4:] or times)
            row = {"shape": [m, n, k], "config": config, "us": us, "tflops": 2 * m * n * k / us / 1e6,
                   "clock_mhz": statistics.median(s["clock_mhz"] for s in steady) if steady else None,
                   "power_w": statistics.median(s["power_w"] for s in steady) if steady else None,
                   "reasons": sorted({s["reasons"] for s in steady}), "samples": len(samples)}
            rows.append(row)
            print(f"{m}x{n}x{k} {cfg}: {us:8.1f} us {row['tflops']:6.1f} TF/s  clock {row['clock_mhz']} MHz "
                  f"power {row['power_w']} W reasons {row['reasons']}", flush=True)
            time.sleep(1.0)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
