"""carver.moe_kernel on the CPU: the align step (needs PyTorch) and the Triton kernel under
TRITON_INTERPRET=1 against the PyTorch reference (needs PyTorch and Triton; fp16 and fp8, since
Triton 3.6's interpreter computes bf16 dots wrongly). Skipped, with the reason, without them."""

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the MoE kernel tests need it")

from carver import moe_kernel as mk  # noqa: E402


def test_align_block_size_sorts_and_pads():
    ids = torch.tensor([[2, 3], [3, 2], [0, 3], [3, 1], [0, 1]], dtype=torch.int32)
    s, e, n = mk.align_block_size(ids, 4, 5)
    numel = 10
    assert int(n) == 16  # experts 0..3 hold 2, 2, 2, 4 pairs; expert 4 none
    assert s.numel() == numel + 5 * 3 and e.numel() == (s.numel() + 3) // 4
    flat = ids.reshape(-1)
    for b in range(int(n) // 4):
        block = s[b * 4:(b + 1) * 4]
        real = block[block < numel]
        assert (flat[real.long()] == e[b]).all()
    assert sorted(s[s < numel].tolist()) == list(range(numel))
    assert e[:4].tolist() == [0, 1, 2, 3]


def test_align_empty_experts_and_one_token():
    ids = torch.tensor([[7, 1]], dtype=torch.int32)
    s, e, n = mk.align_block_size(ids, 16, 8)
    assert int(n) == 32 and e[:2].tolist() == [1, 7]
    assert s[0].item() == 1 and s[16].item() == 0 and (s[1:16] == 2).all()


def test_align_sizes_sorted_ids_as_vllm():
    # Fewer pairs than experts: each pair opens at most one block.
    ids = torch.tensor([[7, 1], [5, 1]], dtype=torch.int32)
    s, e, n = mk.align_block_size(ids, 16, 64)
    assert s.numel() == 4 * 16 and e.numel() == 4 and int(n) == 48
    # Otherwise numel + E * (BM - 1).
    ids = torch.arange(12, dtype=torch.int32).reshape(6, 2) % 8
    s, e, n = mk.align_block_size(ids, 16, 8)
    assert s.numel() == 12 + 8 * 15


def test_grid_rows_trims_like_vllm():
    # gate/up at M 2, top-8, BM 16: A has 2 rows (< 16), so at most 2 * 8 blocks
    assert mk.grid_rows(4096, 2, 8, 16) == 2 * 8 * 16
    # ... but not at M 16 even though the 128 pairs would fit fewer blocks than sorted ids
    assert mk.grid_rows(4096, 16, 8, 16) == 4096
    # the down GEMM: A holds the pairs, top_k 1
    assert mk.grid_rows(4096, 12, 1, 16) == 12 * 16
    assert mk.grid_rows(100, 2, 8, 16) == 100


def test_reference_matches_dense_loop():
    x, w1, w2, tw, ti = mk.random_problem(5, 4, 2, 32, 16, dtype="fp16", seed=1, device="cpu")
    ref = mk.moe_reference(x, w1, w2, tw, ti)
    for t in range(5):
        acc = torch.zeros(32)
        for j in range(2):
            e = int(ti[t, j])
            h = x[t].float() @ w1[e].float().t()
            a = torch.nn.functional.silu(h[:16]) * h[16:]
            acc += tw[t, j] * (a @ w2[e].float().t())
        assert torch.allclose(ref[t], acc, atol=1e-4)


_INTERP = textwrap.dedent("""
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from carver import moe_kernel as mk
    cases = [  # tokens, experts, topk, hidden, intermediate, config overrides, zero-token expert
        (5, 4, 2, 48, 40, {}, None),
        (7, 6, 3, 64, 48, {"GROUP_SIZE_M": 4}, 2),
        (1, 8, 2, 32, 32, {}, None),
        (33, 3, 1, 80, 24, {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16}, None),
    ]
    base = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=1, num_warps=4, num_stages=2)
    for tokens, E, topk, K, N, over, zero in cases:
        x, w1, w2, tw, ti = mk.random_problem(tokens, E, topk, K, N, dtype="fp16", seed=tokens, device="cpu")
        if zero is not None:
            ti[ti == zero] = (zero + 1) % E
        cfg = dict(base, **over)
        err = mk.rel_error(mk.fused_moe(x, w1, w2, tw, ti, cfg), mk.moe_reference(x, w1, w2, tw, ti))
        print(tokens, E, topk, K, N, mk.config_key(cfg), err)
        assert err < 2e-3, err
    x, w1, w2, tw, ti = mk.random_problem(7, 4, 2, 256, 128, dtype="fp16", seed=3, device="cpu")
    cfg = dict(base, BLOCK_SIZE_K=64)
    for bs in (None, [128, 128]):
        q1, s1 = mk.quantize_weights_fp8(w1, bs)
        q2, s2 = mk.quantize_weights_fp8(w2, bs)
        out = mk.fused_moe(x, q1, q2, tw, ti, cfg, w1_scale=s1, w2_scale=s2, block_shape=bs)
        err = mk.rel_error(out, mk.moe_reference(x, q1, q2, tw, ti, s1, s2, bs))
        print("fp8", bs, err)
        assert err < 2e-3, err
        # BLOCK_SIZE_K above the scale block runs as the scale block's K (vLLM's rule)
        wide = dict(cfg, BLOCK_SIZE_K=256)
        assert mk.rel_error(mk.fused_moe(x, q1, q2, tw, ti, wide, w1_scale=s1, w2_scale=s2, block_shape=bs),
                            mk.moe_reference(x, q1, q2, tw, ti, s1, s2, bs)) < 2e-3
        # the harness's and moe_tune's timing runner computes the same layer, on any weight copy
        run = mk.Fp8LayerRunner(x, [q1, q1], [q2, q2], [s1, s1], [s2, s2], tw, ti, bs)
        assert mk.rel_error(run.layer(cfg, 1), out) < 1e-6
        # a timed launch is the two GEMMs alone, on activations quantised once: its gate/up
        # output is every (token, slot) pair's quantised row times its expert's weights
        run.launch(cfg, 1)
        xf, w1f = mk._fake_quant(x, bs), mk._PerExpert(q1, s1, bs)
        h_ref = torch.stack([xf[p // 2] @ w1f[int(ti.view(-1)[p])].t() for p in range(ti.numel())])
        assert mk.rel_error(run.h.float(), h_ref) < 2e-3, mk.rel_error(run.h.float(), h_ref)
        assert mk.rel_error(run.reference(), mk.moe_reference(x, q1, q2, tw, ti, s1, s2, bs)) < 1e-6
    print("OK")
""")


def test_kernel_in_interpreter_matches_reference():
    pytest.importorskip("triton", reason="Triton is not installed: the interpreter test needs it")
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p])
    r = subprocess.run([sys.executable, "-c", _INTERP], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout[-3000:] + r.stderr[-3000:]


def test_config_checks():
    with pytest.raises(mk.InvalidInputError, match="lacks num_stages"):
        mk.check_config({k: 16 for k in mk.CONFIG_KEYS[:-1]})
    with pytest.raises(mk.InvalidInputError, match="power of two"):
        mk.check_config(dict(BLOCK_SIZE_M=48, BLOCK_SIZE_N=32, BLOCK_SIZE_K=64, GROUP_SIZE_M=1, num_warps=4,
                             num_stages=3))


def test_timing_weights_rotate_copies_and_quantise_for_fp8():
    _, w1, w2, _, _ = mk.random_problem(1, 4, 2, 64, 32, dtype="bf16", seed=1, device="cpu")
    w1s, w2s, s1, s2 = mk.timing_weights(w1, w2)
    # tiny weights: as many copies as allowed, each the experts rolled by one more
    assert len(w1s) == len(w2s) == 16 and s1 is None and s2 is None
    assert torch.equal(w1s[1], w1.roll(1, dims=0)) and torch.equal(w2s[3], w2.roll(3, dims=0))
    q1s, q2s, s1s, s2s = mk.timing_weights(w1, w2, "fp8_w8a8", [32, 32])
    assert q1s[0].dtype == torch.float8_e4m3fn and len(s1s) == len(q1s) == 16
    q, s = mk.quantize_weights_fp8(w1.roll(2, dims=0), [32, 32])
    assert torch.equal(q1s[2].view(torch.uint8), q.view(torch.uint8)) and torch.equal(s1s[2], s)


def test_timing_weights_count_the_experts_a_small_batch_touches(monkeypatch):
    # 8 experts, hidden 64, N 32, bf16: 96 KiB of weights in all. Scale the cold-bytes target
    # down to 200 KiB so the rule shows at this size.
    monkeypatch.setattr(mk, "_COLD_BYTES", 200 * 1024)
    _, w1, w2, _, _ = mk.random_problem(1, 8, 2, 64, 32, dtype="bf16", seed=1, device="cpu")
    size = (w1.numel() + w2.numel()) * 2
    # All experts (no top-k given): 96 KiB -> ceil(200 / 96) = 3 copies.
    assert size == 96 * 1024 and len(mk.timing_weights(w1, w2)[0]) == 3
    # One token with top-2 of 8 touches a quarter of them: 24 KiB -> 9 copies.
    assert len(mk.timing_weights(w1, w2, topk=2, min_tokens=1)[0]) == 9
    # Many tokens touch nearly every expert: back to 3 copies.
    assert len(mk.timing_weights(w1, w2, topk=2, min_tokens=64)[0]) == 3
    # Never more than the memory cap allows.
    monkeypatch.setattr(mk, "_MAX_COPY_BYTES", 5 * size)
    assert len(mk.timing_weights(w1, w2, topk=2, min_tokens=1)[0]) == 5
