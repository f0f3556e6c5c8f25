# Temporary device check (not committed): Fp8LayerRunner on the GPU, as the interpreter test runs it on the CPU.
import torch
from carver import moe_kernel as mk
base = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=64, GROUP_SIZE_M=1, num_warps=4, num_stages=2)
for (tokens, E, topk, K, N) in [(7, 4, 2, 256, 128), (64, 8, 2, 1024, 512)]:
    x, w1, w2, tw, ti = mk.random_problem(tokens, E, topk, K, N, dtype="bf16", seed=3, device="cuda")
    for bs in (None, [128, 128]):
        q1, s1 = mk.quantize_weights_fp8(w1, bs)
        q2, s2 = mk.quantize_weights_fp8(w2, bs)
        out = mk.fused_moe(x, q1, q2, tw, ti, base, w1_scale=s1, w2_scale=s2, block_shape=bs)
        err = mk.rel_error(out, mk.moe_reference(x, q1, q2, tw, ti, s1, s2, bs))
        run = mk.Fp8LayerRunner(x, [q1, q1], [q2, q2], [s1, s1], [s2, s2], tw, ti, bs)
        e_layer = mk.rel_error(run.layer(base, 1), out)
        run.launch(base, 1)
        xf, w1f = mk._fake_quant(x, bs), mk._PerExpert(q1, s1, bs)
        h_ref = torch.stack([xf[p // topk] @ w1f[int(ti.view(-1)[p])].t() for p in range(ti.numel())])
        e_h = mk.rel_error(run.h.float(), h_ref)
        e_ref = mk.rel_error(run.reference(), mk.moe_reference(x, q1, q2, tw, ti, s1, s2, bs))
        ok = err < 2e-2 and e_layer < 1e-6 and e_h < 2e-2 and e_ref < 1e-6
        print(f"fp8 tokens={tokens} E={E} bs={bs}: fused {err:.2e} runner.layer {e_layer:.2e} launch.h {e_h:.2e} reference {e_ref:.2e} {'OK' if ok else 'FAIL'}")
