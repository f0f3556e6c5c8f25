#!/usr/bin/env python3
"""How long one main-loop iteration of a lone thin Triton block takes with fp8 e4m3 operands
against f16 ones, on the GPU here: the k-step chain of `mma.sync` tiles when Triton converts fp8
to f16 first (sm_90: `cvt.rn.f16x2.e4m3x2`, then `m16n8k16.f16`).

128 programs (one an SM on the H100 and H200) each compute a BLOCK_M x BLOCK_N strip of
C = A x B^T (A M x K row-major, B N x K with K contiguous, as the fused-MoE kernel's weights) at
two lengths of K; the slope between them is one iteration of a block alone on its SM. At the
deepest pipelines the memory is hidden and the iteration is the warp's k-steps (docs/RESULTS.md,
"A warp's k-steps wait for each other", which measured 63 cycles a k16 step for bf16/f16 tiles).

    python3 benches/triton/fp8_chain_probe.py --out $OUT/fp8_chain.json

Prints a table (us an iteration, and cycles a k16 step at the SM clock given) and writes every
timing as JSON.
"""

import argparse
import itertools
import json

import torch
import triton
import triton.language as tl


@triton.jit
def strip_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :] * K + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16))


def time_us(fn, reps):
    """Median of `reps` launches, each queued behind a 256 MiB write (no host cost inside)."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in pairs:
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) * 1e3 for s, e in pairs)
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=128)
    ap.add_argument("--k", default="4096,16384", help="the two lengths of K")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--clock-mhz", type=float, default=1830.0, help="SM clock the cycles are counted at")
    ap.add_argument("--out")
    a = ap.parse_args()
    k_short, k_long = (int(x) for x in a.k.split(","))
    rows = []
    dtypes = {"f16": torch.float16, "e4m3": torch.float8_e4m3fn}
    space = itertools.product((16, 32), (32,), (64, 128, 256), (1, 2, 4), (4, 6))
    print(f"{'tile':>14s} {'warps':>5s} {'stages':>6s} {'f16 us/it':>9s} {'e4m3 us/it':>10s} "
          f"{'f16 cyc/k16':>11s} {'e4m3 cyc/k16':>12s}")
    for bm, bn, bk, warps, stages in space:
        n = bn * a.programs
        row = {"block_m": bm, "block_n": bn, "block_k": bk, "num_warps": warps, "num_stages": stages}
        for name, dt in dtypes.items():
            per_k = {}
            for k in (k_short, k_long):
                a_t = torch.randn((bm, k), device="cuda").to(dt)
                b_t = torch.randn((n, k), device="cuda").to(dt)
                c_t = torch.empty((bm, n), device="cuda", dtype=torch.float16)
                try:
                    fn = lambda: strip_gemm[(a.programs,)](a_t, b_t, c_t, bm, n, k, BLOCK_M=bm, BLOCK_N=bn,
                                                           BLOCK_K=bk, num_warps=warps, num_stages=stages)
                    per_k[k] = time_us(fn, a.reps)
                except Exception as e:  # out of resources: report and go on
                    per_k = None
                    row[f"{name}_error"] = str(e)[:160]
                    break
            if per_k:
                iters = (k_long - k_short) / bk
                it_us = (per_k[k_long] - per_k[k_short]) / iters
                row[f"{name}_us"] = per_k
                row[f"{name}_iteration_us"] = it_us
                row[f"{name}_cycles_per_k16"] = it_us * a.clock_mhz / (bk / 16)
        rows.append(row)

        def cell(key, fmt):
            return format(row[key], fmt) if key in row else "-"
        print(f"{bm:4d}x{bn:3d}x{bk:3d} {warps:5d} {stages:6d} {cell('f16_iteration_us', '9.3f')} "
              f"{cell('e4m3_iteration_us', '10.3f')} {cell('f16_cycles_per_k16', '11.0f')} "
              f"{cell('e4m3_cycles_per_k16', '12.0f')}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "device": torch.cuda.get_device_name(), "triton": triton.__version__,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
