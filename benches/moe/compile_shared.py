#!/usr/bin/env python3
"""Shared memory Triton allocates for the fused-MoE kernel, compiled without a GPU.

Compiles `carver._moe_triton.fused_moe_gemm` (bf16, no quantisation) for a GPU target with
Triton's own compiler (ptxas ships in the Triton wheel) and prints, per config, the `shared`
bytes of the binary over the bytes of one A and one W tile: the number of pipeline buffers
Triton keeps: num_stages with wgmma, num_stages - 1 with mma.sync, as
`benches/triton/compiled_resources.py` found for the dense kernel (docs/RESULTS.md, the ninth
held-out dense set). carver's model prices the same since the twenty-sixth session
(`TritonRules::pipelined_buffers`; docs/RESULTS.md, "Triton's stage buffers").

    python3 benches/moe/compile_shared.py --capability 90
    python3 benches/moe/compile_shared.py --capability 80

Needs Triton and the carver wheel installed (the kernel is `carver._moe_triton`'s).
"""

import argparse


CONSTEXPR = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "QUANT", "GROUP_N", "GROUP_K",
             "stride_ak", "stride_wk", "stride_cn")
POINTERS = {"a_ptr": "*bf16", "w_ptr": "*bf16", "c_ptr": "*bf16", "routed_w_ptr": "*fp32",
            "sorted_ids_ptr": "*i32", "expert_ids_ptr": "*i32", "num_post_padded_ptr": "*i32",
            "a_scale_ptr": "*fp32", "w_scale_ptr": "*fp32"}
# What the real launches specialise on: 16-byte aligned pointers, N, K and row strides.
DIVISIBLE = tuple(POINTERS) + ("N", "K", "stride_am", "stride_we", "stride_wn", "stride_cm")
CONFIGS = [(16, 32, 64, 4), (16, 64, 128, 4), (16, 128, 64, 4), (32, 64, 64, 4),
           (64, 128, 64, 4), (64, 128, 64, 8), (128, 128, 64, 8)]


def shared_bytes(capability, bm, bn, bk, warps, stages):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from carver._moe_triton import fused_moe_gemm as fn

    names = fn.arg_names
    signature = {n: POINTERS.get(n, "constexpr" if n in CONSTEXPR else "i32") for n in names}
    values = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1, "QUANT": 0,
              "GROUP_N": 0, "GROUP_K": 0, "stride_ak": 1, "stride_wk": 1, "stride_cn": 1}
    src = ASTSource(fn=fn, signature=signature,
                    constexprs={(names.index(k),): v for k, v in values.items()},
                    attrs={(names.index(n),): [["tt.divisibility", 16]] for n in DIVISIBLE})
    kernel = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                            options={"num_warps": warps, "num_stages": stages})
    return kernel.metadata.shared


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capability", type=int, default=90, help="compute capability as one number (90, 80)")
    ap.add_argument("--stages", default="2,3,4,5")
    args = ap.parse_args()
    print(f"sm_{args.capability}: BLOCK_SIZE_M N K warps stages -> shared bytes / bytes of one stage")
    for bm, bn, bk, warps in CONFIGS:
        for stages in (int(s) for s in args.stages.split(",")):
            shared = shared_bytes(args.capability, bm, bn, bk, warps, stages)
            per_stage = (bm + bn) * bk * 2
            print(f"{bm:4d} {bn:4d} {bk:4d} w{warps} s{stages}: {shared:7d} B = {shared / per_stage:.2f} stages")


if __name__ == "__main__":
    main()
