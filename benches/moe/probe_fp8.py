"""One fused-MoE GEMM (gate/up) timed alone, per config, in bf16, fp8 with per-tensor scales and
fp8 with [128, 128] block scales: how much the block-scaled loop costs each tile shape, with the
registers Triton compiled. A measurement for the cost model's block-scale terms.

    python3 benches/moe/probe_fp8.py --experts 8 --topk 2 --hidden 6144 --n 4096 --tokens 4096
    python3 benches/moe/probe_fp8.py ... --configs M256_N128_K64_G1_w8_s4,M128_N256_K64_G1_w8_s4
"""
import argparse
import json
import os
import sys

import torch
from carver import moe_kernel as mk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import parse_config_key  # noqa: E402
from probe_gemms import timed as timed_launches  # noqa: E402

CONFIGS = [
    (64, 128, 128, 32, 4, 3), (64, 128, 128, 16, 4, 4), (128, 128, 128, 16, 8, 3), (128, 128, 128, 1, 8, 5),
    (64, 256, 128, 16, 8, 4), (64, 256, 128, 16, 8, 5), (128, 128, 128, 16, 4, 3), (128, 256, 128, 16, 8, 3),
]


def timed(fn, reps):
    """Median microseconds of one launch of `fn` (probe_gemms' timer, one launch to rotate)."""
    return timed_launches([fn], reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=6144)
    ap.add_argument("--n", type=int, default=4096, help="per-shard intermediate size")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--configs", help="comma-separated config keys (default: the probe's eight)")
    ap.add_argument("--out")
    a = ap.parse_args()
    configs = CONFIGS
    if a.configs:
        keys = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
        configs = [tuple(parse_config_key(k.strip())[n] for n in keys) for k in a.configs.split(",") if k.strip()]
    x, w1, w2, tw, ti = mk.random_problem(a.tokens, a.experts, a.topk, a.hidden, a.n)
    pairs = a.tokens * a.topk
    h = torch.empty((pairs, 2 * a.n), dtype=x.dtype, device=x.device)
    w1_pt, s1_pt = mk.quantize_weights_fp8(w1)
    w1_bl, s1_bl = mk.quantize_weights_fp8(w1, [128, 128])
    x_pt, xs_pt = mk._quant_fp8(x)
    x_bl, xs_bl = mk._quant_fp8(x, [128, 128])
    flops = 2.0 * pairs * 2 * a.n * a.hidden
    rows = []
    print(f"E={a.experts} top-{a.topk} K={a.hidden} 2N={2 * a.n} M={a.tokens}: gate/up GEMM alone, median of {a.reps}")
    print(f"{'config':26s} {'bf16 us':>9s} {'fp8 pt us':>9s} {'fp8 blk us':>10s} {'blk/pt':>7s} {'blk TF/s':>8s}  regs/spills (bf16, pt, blk)")
    for bm, bn, bk, g, w, s in configs:
        cfg = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g, "num_warps": w, "num_stages": s}
        sid, eid, npp = mk.align_block_size(ti, bm, a.experts)
        res = {}
        try:
            res["bf16"] = timed(lambda: mk.invoke_gemm(x, w1, h, None, sid, eid, npp, a.topk, False, cfg), a.reps)
            res["bf16_regs"] = mk.last_binary_resources()["gate_up"]
            res["pt"] = timed(lambda: mk.invoke_gemm(x_pt, w1_pt, h, None, sid, eid, npp, a.topk, False, cfg, xs_pt, s1_pt), a.reps)
            res["pt_regs"] = mk.last_binary_resources()["gate_up"]
            res["blk"] = timed(lambda: mk.invoke_gemm(x_bl, w1_bl, h, None, sid, eid, npp, a.topk, False, cfg, xs_bl, s1_bl, [128, 128]), a.reps)
            res["blk_regs"] = mk.last_binary_resources()["gate_up"]
        except Exception as e:  # a config Triton cannot compile here: report and go on
            print(f"{mk.config_key(cfg):26s} failed: {str(e)[:120]}")
            continue
        rows.append({"config": cfg, **res})
        print(f"{mk.config_key(cfg):26s} {res['bf16']:9.1f} {res['pt']:9.1f} {res['blk']:10.1f} {res['blk'] / res['pt']:7.2f} "
              f"{flops / res['blk'] / 1e6:8.0f}  {res['bf16_regs']} {res['pt_regs']} {res['blk_regs']}")
    if a.out:
        json.dump({"args": vars(a), "device": torch.cuda.get_device_name(), "rows": rows}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
