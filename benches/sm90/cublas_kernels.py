#!/usr/bin/env python3
"""Which kernels cuBLAS runs for small-M and mid-M long-K GEMMs, and how fast each is.

For every shape, with B stored K x N (`rr`, torch.matmul) and N x K (`rc`, F.linear), it records
under torch.profiler the names and GPU durations of the kernels one GEMM launches (a split-K
reduce shows up as a second kernel), times the GEMM with CUDA events over rotated inputs larger
than the L2, and reports the bandwidth B streams at. It also measures the copy bandwidth of the
device (read + write of a 2 GiB buffer), the ceiling decode GEMMs are judged against.

It reads only; it changes no GPU setting. Output: a table on stdout and JSON at --out.
"""

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

# (name, M, N, K): the issue-16 shapes below 0.95 of cuBLAS on the H200, and neighbours.
SHAPES = [
    ("l2-7b.qkv.m1", 1, 12288, 4096),
    ("phi4.down.m1", 1, 5120, 17920),
    ("l3-8b.qkv.m8", 8, 6144, 4096),
    ("l2-7b.qkv.m16", 16, 12288, 4096),
    ("qwen3-8b.qkv.m32", 32, 6144, 4096),
    ("l3-8b.down.m64", 64, 4096, 14336),
    ("granite8b.down.m128", 128, 4096, 12800),
    ("olmo2-13b.down.m256", 256, 5120, 13824),
    ("l2-7b.down.m512", 512, 4096, 11008),
]


def time_us(fn, sets, reps=200):
    for i in range(10):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        args = sets[i % len(sets)]
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def kernels_of(fn, args):
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn(*args)
        torch.cuda.synchronize()
    seen = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            d = seen.setdefault(ev.name, [])
            d.append(ev.device_time if hasattr(ev, "device_time") else ev.cuda_time)
    return [{"name": n, "us": statistics.median(t), "calls": len(t) / 5} for n, t in seen.items()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    result = {"device": torch.cuda.get_device_name(dev), "shapes": []}

    buf = torch.empty(1 << 30, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(buf)
    copy_us = time_us(lambda a, b: b.copy_(a), [(buf, dst)], reps=30)
    result["copy_tb_s"] = 2 * buf.numel() * 2 / (copy_us * 1e-6) / 1e12
    del buf, dst

    rows = []
    for name, m, n, k in SHAPES:
        bytes_b = n * k * 2
        copies = max(2, int(4 * l2 // bytes_b) + 1)
        entry = {"name": name, "m": m, "n": n, "k": k}
        for layout in ("rr", "rc"):
            sets = []
            for _ in range(copies):
                a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                b = torch.randn(k, n, device=dev, dtype=torch.bfloat16) if layout == "rr" else \
                    torch.randn(n, k, device=dev, dtype=torch.bfloat16)
                sets.append((a, b))
            fn = torch.matmul if layout == "rr" else F.linear
            us = time_us(fn, sets)
            ks = kernels_of(fn, sets[0])
            entry[layout] = {"us": us, "b_tb_s": bytes_b / (us * 1e-6) / 1e12,
                             "tflops": 2 * m * n * k / (us * 1e-6) / 1e12, "kernels": ks}
            rows.append((name, layout, us, entry[layout]["b_tb_s"],
                         " + ".join(f"{x['name'][:70]} ({x['us']:.1f})" for x in ks)))
            del sets
        result["shapes"].append(entry)

    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{result['device']}: copy {result['copy_tb_s']:.2f} TB/s (read + write)")
    print(f"{'shape':22} {'B':3} {'us':>7} {'TB/s':>5}  kernels (us)")
    for name, layout, us, bw, ks in rows:
        print(f"{name:22} {layout:3} {us:7.1f} {bw:5.2f}  {ks}")


if __name__ == "__main__":
    main()
