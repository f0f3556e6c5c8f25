#!/usr/bin/env python3
"""Hardware counters of Triton matmul configs, one profiled launch each, under Nsight Compute.

Run it under `ncu --profile-from-start off`: each (shape, config) is compiled and warmed up with the
profiler off, then launched once between `cudaProfilerStart` and `cudaProfilerStop`, so ncu captures
exactly one launch per config, in the order printed. Without ncu it still runs and prints times.

The question it answers (issues 14/15): why a BLOCK_SIZE_K 128 config runs 1.1-1.7x its BLOCK_SIZE_K
64 twin while the cost model prices them level: tensor-pipe use, warp stall reasons, shared-memory
bank conflicts and L2 traffic of each, side by side.

    ncu --clock-control none --profile-from-start off --set full -o probe \\
        python3 benches/triton/ncu_probe.py --shapes 8192x8192x8192 --configs 128x128x64w8s4,128x128x128w8s3
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from clock_probe import config_of, operands, parse_shapes_and_configs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="MxNxK,...")
    ap.add_argument("--configs", required=True, help="BMxBNxBKwWsS,... with GROUP_SIZE_M 8, no split")
    args = ap.parse_args()
    shapes, configs = parse_shapes_and_configs(args.shapes, args.configs)

    import torch
    from kernel import matmul

    for m, n, k in shapes:
        a, b, c = operands(m, n, k)
        for cfg in configs:
            config = config_of(*cfg)
            for _ in range(5):
                matmul(a, b, c, config)
            torch.cuda.synchronize()
            # 20 launches replayed from a CUDA graph: a small kernel timed from Python would time
            # the launcher instead.
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(20):
                    matmul(a, b, c, config)
            graph.replay()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            e.synchronize()
            torch.cuda.profiler.start()
            matmul(a, b, c, config)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print(f"{m}x{n}x{k} {'x'.join(map(str, cfg[:3]))}w{cfg[3]}s{cfg[4]}: "
                  f"{s.elapsed_time(e) * 50.0:8.1f} us unprofiled (CUDA graph of 20)", flush=True)


if __name__ == "__main__":
    main()
