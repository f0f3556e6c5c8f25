"""The two GEMMs of one fused-MoE layer timed apart, per config (bf16, or fp8 w8a8 with per-tensor
or [128, 128] block scales): which of them holds a tile
shape's gap (the gate/up GEMM, [pairs, K] x [E, 2N, K], or the down GEMM, [pairs, N] x [E, K, N]
with the routing weight), with the registers Triton compiled. A measurement for the cost model.

    python3 benches/moe/probe_gemms.py --experts 128 --topk 6 --hidden 4096 --n 1408 --tokens 3072 \
        --configs M256_N128_K64_G1_w8_s4,M128_N256_K64_G1_w8_s4 --out $OUT/probe.json
    python3 benches/moe/probe_gemms.py ... --dtype fp8_w8a8 [--block-shape 128,128]

Each time is the median of `--reps` launches, each alone between two events. All launches are
queued before one synchronization, each behind a write of a 256 MiB buffer that evicts the L2
and keeps the GPU busy while the host prepares the next launch: a Triton launch's host cost
(tens of microseconds) would otherwise land inside a small GEMM's events. The weights are
rotated over copies as well, so each launch reads them from DRAM, as in a real model's layer.
"""
import argparse
import json
import os
import sys

import torch
from carver import moe_kernel as mk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import parse_config_key  # noqa: E402

KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


FLUSH_BYTES = 256 << 20


def timed(launches, reps):
    """Median microseconds of one launch; `launches` cycles through the weight copies."""
    for fn in launches:
        fn()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (start, end) in enumerate(pairs):
        flush.zero_()
        start.record()
        launches[i % len(launches)]()
        end.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) * 1e3 for start, end in pairs)
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experts", type=int, required=True)
    ap.add_argument("--topk", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--n", type=int, required=True, help="per-shard intermediate size")
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--configs", required=True, help="comma-separated config keys")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--copies", type=int, default=3, help="weight copies the launches rotate over")
    ap.add_argument("--dtype", choices=("bf16", "fp8_w8a8"), default="bf16")
    ap.add_argument("--block-shape", help="block scales of fp8 weights: 128,128 (default: per tensor)")
    ap.add_argument("--out")
    a = ap.parse_args()
    block = [int(v) for v in a.block_shape.split(",")] if a.block_shape else None
    if block and a.dtype != "fp8_w8a8":
        ap.error("--block-shape needs --dtype fp8_w8a8")
    configs = [{n: parse_config_key(k.strip())[n] for n in KEYS} for k in a.configs.split(",") if k.strip()]
    x, w1, w2, tw, ti = mk.random_problem(a.tokens, a.experts, a.topk, a.hidden, a.n)
    w1s = [w1] + [w1.clone() for _ in range(a.copies - 1)]
    w2s = [w2] + [w2.clone() for _ in range(a.copies - 1)]
    pairs = a.tokens * a.topk
    h = torch.empty((pairs, 2 * a.n), dtype=x.dtype, device=x.device)
    act = torch.randn((pairs, a.n), dtype=x.dtype, device=x.device)
    y = torch.empty((pairs, a.hidden), dtype=x.dtype, device=x.device)
    routed = tw.reshape(-1)
    # fp8: the GEMMs' inputs as the layer quantizes them (x and the activation per tensor, or per
    # token and K block), each weight copy quantized once.
    (gx, gxs), (dx, dxs) = (x, None), (act, None)
    s1s, s2s = [None] * len(w1s), [None] * len(w2s)
    if a.dtype == "fp8_w8a8":
        w1s, s1s = zip(*(mk.quantize_weights_fp8(w, block) for w in w1s))
        w2s, s2s = zip(*(mk.quantize_weights_fp8(w, block) for w in w2s))
        (gx, gxs), (dx, dxs) = mk._quant_fp8(x, block), mk._quant_fp8(act, block)
    rows = []
    print(f"E={a.experts} top-{a.topk} hidden={a.hidden} N={a.n} M={a.tokens} {a.dtype}"
          f"{' block ' + a.block_shape if block else ''}: each GEMM alone, median of {a.reps}")
    print(f"{'config':26s} {'gate/up us':>10s} {'down us':>8s} {'sum us':>8s}  regs/spills (gate/up, down)")
    for cfg in configs:
        sid, eid, npp = mk.align_block_size(ti, cfg["BLOCK_SIZE_M"], a.experts)
        try:
            gu = timed([lambda w=w, sc=sc: mk.invoke_gemm(gx, w, h, None, sid, eid, npp, a.topk, False, cfg, gxs, sc,
                                                         block) for w, sc in zip(w1s, s1s)], a.reps)
            gu_regs = mk.last_binary_resources()["gate_up"]
            dn = timed([lambda w=w, sc=sc: mk.invoke_gemm(dx, w, y, routed, sid, eid, npp, 1, True, cfg, dxs, sc,
                                                         block) for w, sc in zip(w2s, s2s)], a.reps)
            dn_regs = mk.last_binary_resources()["down"]
        except Exception as e:  # a config Triton cannot compile here: report and go on
            print(f"{mk.config_key(cfg):26s} failed: {str(e)[:120]}")
            continue
        rows.append({"config": cfg, "gate_up_us": gu, "down_us": dn, "gate_up_regs": gu_regs, "down_regs": dn_regs})
        print(f"{mk.config_key(cfg):26s} {gu:10.1f} {dn:8.1f} {gu + dn:8.1f}  {gu_regs} {dn_regs}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
