"""A fused mixture-of-experts layer on a Triton kernel, with the meta-parameters of vLLM's and
SGLang's fused-MoE kernel, and a PyTorch reference of the same layer.

    from carver import moe_kernel as mk
    x, w1, w2, topk_weights, topk_ids = mk.random_problem(tokens=64, experts=8, topk=2,
                                                          hidden=4096, intermediate=7168)
    cfg = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 16,
           "num_warps": 4, "num_stages": 3}
    y = mk.fused_moe(x, w1, w2, topk_weights, topk_ids, cfg)   # [tokens, hidden]
    y_ref = mk.moe_reference(x, w1, w2, topk_weights, topk_ids)

The layer: for each token, its top-k experts' `down(silu(gate(x)) * up(x))`, weighted by the
routing weights and summed. `w1` is `[E, 2N, K]` (gate rows first, then up rows; K = hidden
size), `w2` is `[E, K, N]` (N = intermediate size per tensor-parallel shard): the layout vLLM
uses, K contiguous in both. ONE config serves both GEMMs, as the kernel's callers use it.

Steps: `align_block_size` (a PyTorch version of vLLM's moe_align_block_size: pairs sorted by
expert, each expert's list padded to BLOCK_SIZE_M), the gate/up GEMM (A rows gathered by token),
SiLU-and-mul, the down GEMM (routing weight applied in its epilogue), and the sum over top-k.

This module imports PyTorch and Triton only when a function needs them; without them the
functions that need them raise `carver.MissingDependencyError` (an ImportError). The config
helpers (`default_config`, `tuner_space`, `smem_bytes`, `config_key`) need neither.
"""

import math
import time

from ._carver import InvalidInputError, MissingDependencyError

__all__ = [
    "CONFIG_KEYS", "TUNER_SPACE", "DTYPES", "default_config", "tuner_space", "smem_bytes",
    "config_key", "check_config", "align_block_size", "invoke_gemm", "fused_moe", "moe_reference",
    "random_problem", "random_routing", "silu_and_mul", "LayerRunner", "QueuedTimer",
]

# The six keys of a vLLM/SGLang fused-MoE config entry, in the files' order.
CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
# vLLM's tuner space (benchmarks/kernels/benchmark_moe.py), the space carver ranks.
TUNER_SPACE = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}
# The dtype names of carver's MoE template (activation dtype for the layer).
DTYPES = ("bf16", "fp16", "fp8_w8a8")
# Hopper's opt-in shared memory per block (H100 and H200): 227 KiB.
DEFAULT_SMEM_LIMIT = 232448


def _torch():
    try:
        import torch
    except ImportError as e:
        raise MissingDependencyError(
            f"carver.moe_kernel needs PyTorch, which cannot be imported ({e}); install it with "
            "`pip install torch` (a CUDA build, to run the kernel on a GPU)"
        ) from e
    return torch


def _kernel():
    try:
        from . import _moe_triton
    except ImportError as e:
        raise MissingDependencyError(
            f"carver.moe_kernel needs Triton to run the fused-MoE kernel, which cannot be imported "
            f"({e}); install it with `pip install triton` (carver.recommend_moe gives the configs "
            "without it)"
        ) from e
    return _moe_triton.fused_moe_gemm


# ---------------------------------------------------------------------------------------------
# Configs
# ---------------------------------------------------------------------------------------------

def config_key(cfg):
    """A short stable name: 'M64_N128_K64_G16_w4_s3'."""
    return "M{BLOCK_SIZE_M}_N{BLOCK_SIZE_N}_K{BLOCK_SIZE_K}_G{GROUP_SIZE_M}_w{num_warps}_s{num_stages}".format(**cfg)


def check_config(cfg, where="config"):
    """Raise InvalidInputError unless `cfg` has the six keys with positive integer values and
    power-of-two blocks of at least 16. Returns a plain dict of the six keys."""
    if not isinstance(cfg, dict):
        raise InvalidInputError(f"{where} must be a dict with keys {', '.join(CONFIG_KEYS)}; got {type(cfg).__name__}")
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise InvalidInputError(f"{where} lacks {', '.join(missing)} (a fused-MoE config has {', '.join(CONFIG_KEYS)})")
    out = {}
    for k in CONFIG_KEYS:
        v = cfg[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidInputError(f"{where}: {k} must be a positive integer, got {v!r}")
        out[k] = v
    for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
        if out[k] < 16 or out[k] & (out[k] - 1):
            raise InvalidInputError(f"{where}: {k} must be a power of two >= 16, got {out[k]}")
    if out["num_warps"] & (out["num_warps"] - 1):
        raise InvalidInputError(f"{where}: num_warps must be a power of two, got {out['num_warps']}")
    return out


def smem_bytes(cfg, elem_bytes=2):
    """Shared memory of `num_stages` A and W tiles: the filter of the tuner space (as
    `MoeConfig::smem_bytes` in Rust). Triton 3.6 allocates one stage fewer for tiles that run on
    `mma.sync` (fewer than 64 rows), which the model prices for occupancy."""
    return cfg["num_stages"] * (cfg["BLOCK_SIZE_M"] + cfg["BLOCK_SIZE_N"]) * cfg["BLOCK_SIZE_K"] * elem_bytes


def tuner_space(smem_limit=DEFAULT_SMEM_LIMIT, dtype="bf16", group_sizes=None, block_shape=None):
    """vLLM's tuner space filtered by shared memory (the legal space carver ranks), in a fixed
    order. `group_sizes` narrows GROUP_SIZE_M; fp8 with [bn, bk] block scales keeps, as vLLM's
    tuner does, BLOCK_SIZE_N a multiple of bn and BLOCK_SIZE_K a multiple of bk (the kernel then
    runs BLOCK_SIZE_K = bk, as vLLM's does: `effective_block_k`)."""
    elem = 1 if dtype == "fp8_w8a8" else 2
    out = []
    for bm in TUNER_SPACE["BLOCK_SIZE_M"]:
        for bn in TUNER_SPACE["BLOCK_SIZE_N"]:
            for bk in TUNER_SPACE["BLOCK_SIZE_K"]:
                if block_shape is not None and (bk % block_shape[1] or bn % block_shape[0]):
                    continue
                for g in (group_sizes or TUNER_SPACE["GROUP_SIZE_M"]):
                    for w in TUNER_SPACE["num_warps"]:
                        for s in TUNER_SPACE["num_stages"]:
                            c = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
                                 "GROUP_SIZE_M": g, "num_warps": w, "num_stages": s}
                            run = dict(c, BLOCK_SIZE_K=effective_block_k(bk, block_shape))
                            if smem_bytes(run, elem) <= smem_limit:
                                out.append(c)
    return out


def effective_block_k(block_k, block_shape=None):
    """The BLOCK_SIZE_K a launch runs: with [bn, bk] block scales at most bk, so that one K step
    reads one scale per row (vLLM's fused MoE lowers it the same way)."""
    return min(block_k, int(block_shape[1])) if block_shape else block_k


def default_config(m, experts, dtype="bf16", block_shape=None):
    """The config vLLM's fused MoE runs when it finds no tuned file (its `get_default_config`,
    as documented for bf16/fp16 and fp8): for bf16/fp16, BLOCK 16x32x64 with GROUP_SIZE_M 1 when
    the batch has at most as many tokens as there are experts, else 64x64x32 with GROUP_SIZE_M 8;
    fp8 with [bn, bk] block scales: 64 x bn x bk, GROUP_SIZE_M 32, 3 stages. vLLM leaves
    num_warps and num_stages to Triton's defaults (4 warps, 3 stages) where it does not set them.
    BLOCK_SIZE_K 32 and GROUP_SIZE_M 8 are outside the tuner space."""
    if dtype == "fp8_w8a8" and block_shape is not None:
        return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": block_shape[0], "BLOCK_SIZE_K": block_shape[1],
                "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 3}
    if m <= experts:
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
                "num_warps": 4, "num_stages": 3}
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
            "num_warps": 4, "num_stages": 3}


# ---------------------------------------------------------------------------------------------
# Routing and the align step
# ---------------------------------------------------------------------------------------------

def random_routing(tokens, experts, topk, seed=0, device="cuda"):
    """Uniform random routing: each token picks `topk` distinct experts uniformly; weights are a
    softmax of random logits over its picks (fp32). Returns (topk_weights, topk_ids int32)."""
    torch = _torch()
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.rand(tokens, experts, generator=g).topk(topk, dim=1).indices.to(torch.int32)
    w = torch.softmax(torch.randn(tokens, topk, generator=g), dim=1).float()
    return w.to(device), ids.to(device)


def align_block_size(topk_ids, block_m, experts):
    """Sort (token, slot) pairs by expert and pad each expert's run to a multiple of `block_m`.

    Returns (sorted_ids int32 [numel + E * (block_m - 1)], or [numel * block_m] when there are
    fewer pairs than experts, as vLLM's `moe_align_block_size` sizes it; expert_ids int32 [one
    per block of sorted_ids], num_post_padded int32 [1]). Pair id = token * topk + slot; padding
    holds the sentinel numel. The kernel's grid covers all of sorted_ids: blocks past
    num_post_padded exit after one load."""
    torch = _torch()
    flat = topk_ids.reshape(-1).to(torch.int64)
    numel = flat.numel()
    dev = flat.device
    counts = torch.bincount(flat, minlength=experts)[:experts]
    padded = (counts + block_m - 1) // block_m * block_m
    start_pad = torch.cumsum(padded, 0) - padded
    start_raw = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    sorted_exp = flat[order]
    rank = torch.arange(numel, device=dev) - start_raw[sorted_exp]
    pos = start_pad[sorted_exp] + rank
    cap = numel + experts * (block_m - 1)
    if numel < experts:
        # Each pair opens at most one block.
        cap = min(cap, numel * block_m)
    sorted_ids = torch.full((cap,), numel, dtype=torch.int32, device=dev)
    sorted_ids[pos] = order.to(torch.int32)
    blocks = (cap + block_m - 1) // block_m
    expert_ids = torch.zeros(blocks, dtype=torch.int32, device=dev)
    per_expert_blocks = padded // block_m
    used = torch.repeat_interleave(torch.arange(experts, device=dev, dtype=torch.int32), per_expert_blocks)
    expert_ids[: used.numel()] = used
    num_post_padded = padded.sum().reshape(1).to(torch.int32)
    return sorted_ids, expert_ids, num_post_padded


# ---------------------------------------------------------------------------------------------
# The kernel launch
# ---------------------------------------------------------------------------------------------

_DUMMIES = {}


def _dummy(device):
    torch = _torch()
    key = str(device)
    if key not in _DUMMIES:
        _DUMMIES[key] = torch.zeros(1, dtype=torch.float32, device=device)
    return _DUMMIES[key]


def grid_rows(sorted_len, rows, top_k, block_m):
    """Rows of sorted ids the grid covers (EM), as vLLM's `invoke_fused_moe_kernel` trims it:
    all of them, unless A has fewer rows than a block (tokens for gate/up; pairs for the down
    GEMM, launched with top_k 1), when each of A's pairs opens at most one block."""
    if rows < block_m:
        return min(sorted_len, rows * top_k * block_m)
    return sorted_len


# The binary of the latest launch, per GEMM (gate/up: False, down: True); read by
# `last_binary_resources`.
_LAST_BINARY = {}


def last_binary_resources():
    """Registers per thread and spilled registers of the latest gate/up and down launches, as
    Triton compiled them: {"gate_up": [regs, spills], "down": [...]} (None where unknown: not
    launched yet, or Triton's interpreter)."""
    out = {}
    for routed, name in ((False, "gate_up"), (True, "down")):
        b = _LAST_BINARY.get(routed)
        out[name] = [getattr(b, "n_regs", None), getattr(b, "n_spills", None)] if b is not None else None
    return out


def invoke_gemm(a, w, c, routed_w, sorted_ids, expert_ids, num_post_padded, top_k, mul_routed,
                cfg, a_scale=None, w_scale=None, block_shape=None):
    """One grouped GEMM launch: c[p] = a[p // top_k] @ w[expert(p)].T (times the routing weight
    of pair p when `mul_routed`), for the pairs listed in sorted_ids. `c` is [pairs, N]."""
    torch = _torch()
    kernel = _kernel()
    E, N, K = w.shape
    num_valid = c.shape[0]
    bm = cfg["BLOCK_SIZE_M"]
    em = grid_rows(sorted_ids.shape[0], a.shape[0], top_k, bm)
    quant = 0
    gn = gk = 0
    dummy = _dummy(c.device)  # fp32: the same pointer type in every launch (one binary)
    if a_scale is not None:
        quant = 2 if block_shape is not None else 1
        if block_shape is not None:
            gn, gk = int(block_shape[0]), int(block_shape[1])
    asc = a_scale if a_scale is not None else dummy
    wsc = w_scale if w_scale is not None else dummy
    if quant == 2:
        s_am, s_ak = a_scale.stride(0), a_scale.stride(1)
        s_we, s_wn, s_wk = w_scale.stride(0), w_scale.stride(1), w_scale.stride(2)
    elif quant == 1:
        s_am = s_ak = s_wn = s_wk = 0
        s_we = w_scale.stride(0) if w_scale.dim() > 0 else 0
    else:
        s_am = s_ak = s_we = s_wn = s_wk = 0
    grid = (triton_cdiv(em, bm) * triton_cdiv(N, cfg["BLOCK_SIZE_N"]),)
    _LAST_BINARY[bool(mul_routed)] = kernel[grid](
        a, w, c, routed_w if routed_w is not None else dummy, sorted_ids, expert_ids, num_post_padded,
        asc, wsc,
        N, K, em, num_valid, top_k, 1 if mul_routed else 0,
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c.stride(0), c.stride(1),
        s_am, s_ak, s_we, s_wn, s_wk,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=cfg["BLOCK_SIZE_N"],
        BLOCK_SIZE_K=effective_block_k(cfg["BLOCK_SIZE_K"], block_shape if quant == 2 else None),
        GROUP_SIZE_M=cfg["GROUP_SIZE_M"], QUANT=quant, GROUP_N=gn, GROUP_K=gk,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    return c


def triton_cdiv(a, b):
    return -(-a // b)


def silu_and_mul(h):
    """[rows, 2N] -> [rows, N]: silu(gate) * up, gate = the first N columns (vLLM's order)."""
    torch = _torch()
    n = h.shape[-1] // 2
    g = h[..., :n].float()
    return (torch.nn.functional.silu(g) * h[..., n:].float()).to(h.dtype)


def _quant_fp8(t, block_shape=None, per_row_groups=False):
    """Per-tensor (or [rows, K/bk] block) fp8 e4m3 quantisation of activations: (q, scale)."""
    torch = _torch()
    fmax = torch.finfo(torch.float8_e4m3fn).max
    if block_shape is None:
        s = (t.abs().max().float() / fmax).clamp(min=1e-12)
        return (t.float() / s).to(torch.float8_e4m3fn), s.reshape(1)
    bk = block_shape[1]
    rows, k = t.shape
    groups = triton_cdiv(k, bk)
    tp = torch.nn.functional.pad(t.float(), (0, groups * bk - k)).view(rows, groups, bk)
    s = (tp.abs().amax(dim=2) / fmax).clamp(min=1e-12)
    q = (tp / s[:, :, None]).view(rows, groups * bk)[:, :k].to(torch.float8_e4m3fn)
    return q.contiguous(), s.contiguous()


def fused_moe(x, w1, w2, topk_weights, topk_ids, cfg, *, aligned=None, w1_scale=None,
              w2_scale=None, block_shape=None, out=None):
    """The whole layer with one config for both GEMMs: [tokens, K] -> [tokens, K].

    bf16/fp16: x, w1, w2 of that dtype. fp8 w8a8: w1/w2 are float8_e4m3fn with w*_scale
    (per-expert [E] for per-tensor scaling, or [E, N/bn, K/bk] with `block_shape=[bn, bk]`);
    x stays bf16/fp16 and is quantised per launch (per tensor, or per token and K block).
    `aligned` is `align_block_size(topk_ids, BLOCK_SIZE_M, E)` when the caller has it."""
    torch = _torch()
    cfg = check_config(cfg)
    tokens, K = x.shape
    E, N2, K1 = w1.shape
    topk = topk_ids.shape[1]
    if K1 != K or w2.shape != (E, K, N2 // 2):
        raise InvalidInputError(f"shapes disagree: x {tuple(x.shape)}, w1 {tuple(w1.shape)}, w2 {tuple(w2.shape)} "
                                "(expected w1 [E, 2N, K], w2 [E, K, N])")
    N = N2 // 2
    fp8 = w1.dtype == torch.float8_e4m3fn
    if fp8 and (w1_scale is None or w2_scale is None):
        raise InvalidInputError("fp8 weights need w1_scale and w2_scale")
    if aligned is None:
        aligned = align_block_size(topk_ids, cfg["BLOCK_SIZE_M"], E)
    sorted_ids, expert_ids, npp = aligned
    pairs = tokens * topk
    h = torch.empty((pairs, N2), dtype=x.dtype, device=x.device)
    act = torch.empty((pairs, N), dtype=x.dtype, device=x.device)
    y = torch.empty((pairs, K), dtype=x.dtype, device=x.device)
    if fp8:
        xq, xs = _quant_fp8(x, block_shape)
        invoke_gemm(xq, w1, h, None, sorted_ids, expert_ids, npp, topk, False, cfg, xs, w1_scale, block_shape)
        act = silu_and_mul(h)
        aq, as_ = _quant_fp8(act, block_shape)
        invoke_gemm(aq, w2, y, topk_weights.reshape(-1), sorted_ids, expert_ids, npp, 1, True, cfg, as_,
                    w2_scale, block_shape)
    else:
        invoke_gemm(x, w1, h, None, sorted_ids, expert_ids, npp, topk, False, cfg)
        act = silu_and_mul(h)
        invoke_gemm(act, w2, y, topk_weights.reshape(-1), sorted_ids, expert_ids, npp, 1, True, cfg)
    res = y.view(tokens, topk, K).sum(dim=1)
    if out is not None:
        out.copy_(res)
        return out
    return res


def moe_reference(x, w1, w2, topk_weights, topk_ids, w1_scale=None, w2_scale=None, block_shape=None):
    """The layer in fp32 with PyTorch (expert by expert). With fp8 weights (scales given) the
    weights are dequantised and the activations go through the same fp8 quantisation the kernel
    path applies (x per tensor or per token and K block; the SiLU-and-mul output likewise)."""
    torch = _torch()
    tokens, K = x.shape
    E, N2, _ = w1.shape
    N = N2 // 2
    # weights are dequantised / upcast one expert at a time (a whole fp32 copy of a large
    # model's experts would not fit next to it)
    w1f = _PerExpert(w1, w1_scale, block_shape)
    w2f = _PerExpert(w2, w2_scale, block_shape)
    fp8 = w1_scale is not None
    xf = _fake_quant(x, block_shape) if fp8 else x.float()
    out = torch.zeros((tokens, K), dtype=torch.float32, device=x.device)
    ids = topk_ids.to(torch.int64)
    if fp8:
        # the kernel path rounds h and the activation to x's dtype, then quantises the activation
        # of all (token, slot) pairs together
        topk = ids.shape[1]
        pairs = torch.empty((tokens * topk, N), dtype=x.dtype, device=x.device)
        for e in torch.unique(ids).tolist():
            tok, slot = (ids == e).nonzero(as_tuple=True)
            h = (xf[tok] @ w1f[e].t()).to(x.dtype).float()
            pairs[tok * topk + slot] = (torch.nn.functional.silu(h[:, :N]) * h[:, N:]).to(x.dtype)
        act_q = _fake_quant(pairs, block_shape)
    for e in torch.unique(ids).tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        h = xf[tok] @ w1f[e].t()
        a = torch.nn.functional.silu(h[:, :N]) * h[:, N:]
        if fp8:
            a = act_q[tok * ids.shape[1] + slot]
        yv = a @ w2f[e].t()
        out.index_add_(0, tok, yv * topk_weights[tok, slot].float()[:, None])
    return out


def _fake_quant(t, block_shape):
    """t through the kernel path's fp8 activation quantisation, back in fp32."""
    q, s = _quant_fp8(t, block_shape)
    if block_shape is None:
        return q.float() * s
    bk = block_shape[1]
    return (q.float() * s.repeat_interleave(bk, dim=1)[:, : t.shape[1]])


class _PerExpert:
    def __init__(self, w, scale, block_shape):
        self.w, self.scale, self.bs = w, scale, block_shape

    def __getitem__(self, e):
        w = self.w[e].float()
        if self.scale is None:
            return w
        if self.bs is None:
            return w * self.scale[e].float()
        bn, bk = self.bs
        s = self.scale[e].float().repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)
        return w * s[: w.shape[0], : w.shape[1]]


def quantize_weights_fp8(w, block_shape=None):
    """[E, N, K] -> (float8_e4m3fn weights, scale [E] or [E, N/bn, K/bk])."""
    torch = _torch()
    fmax = torch.finfo(torch.float8_e4m3fn).max
    if block_shape is None:
        s = (w.abs().amax(dim=(1, 2)).float() / fmax).clamp(min=1e-12)
        return (w.float() / s.view(-1, 1, 1)).to(torch.float8_e4m3fn), s
    E, N, K = w.shape
    bn, bk = block_shape
    gn, gk = triton_cdiv(N, bn), triton_cdiv(K, bk)
    wp = torch.nn.functional.pad(w.float(), (0, gk * bk - K, 0, gn * bn - N))
    blocks = wp.view(E, gn, bn, gk, bk)
    s = (blocks.abs().amax(dim=(2, 4)) / fmax).clamp(min=1e-12)
    q = (blocks / s[:, :, None, :, None]).view(E, gn * bn, gk * bk)[:, :N, :K]
    return q.to(torch.float8_e4m3fn).contiguous(), s.contiguous()


def random_problem(tokens, experts, topk, hidden, intermediate, dtype="bf16", seed=0, device="cuda"):
    """Random-normal activations and weights (scaled so outputs stay O(1)) and uniform routing:
    (x [tokens, hidden], w1 [E, 2N, hidden], w2 [E, hidden, N], topk_weights, topk_ids)."""
    torch = _torch()
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    if tdt is None:
        raise InvalidInputError(f"random_problem: dtype {dtype!r}; accepted: bf16, fp16")
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((tokens, hidden), generator=g, device=device, dtype=tdt)
    w1 = torch.randn((experts, 2 * intermediate, hidden), generator=g, device=device, dtype=tdt) * (hidden ** -0.5)
    w2 = torch.randn((experts, hidden, intermediate), generator=g, device=device, dtype=tdt) * (intermediate ** -0.5)
    tw, ti = random_routing(tokens, experts, topk, seed=seed + 1, device=device)
    return x, w1, w2, tw, ti


def rel_error(out, ref):
    """Relative Frobenius error ||out - ref|| / ||ref|| (inf when out has NaN)."""
    torch = _torch()
    d = torch.linalg.vector_norm(out.float() - ref.float()).item()
    r = torch.linalg.vector_norm(ref.float()).item()
    if not math.isfinite(d):
        return float("inf")
    return d / r if r > 0 else d


class LayerRunner:
    """The two GEMMs of one layer for timing, with one config: the align step (per
    BLOCK_SIZE_M) and the activation between the GEMMs are computed once up front, so a call to
    `launch(cfg, i)` enqueues exactly the gate/up GEMM and the down GEMM (on weight copy i)."""

    def __init__(self, x, w1s, w2s, topk_weights, topk_ids):
        torch = _torch()
        self.x, self.w1s, self.w2s = x, list(w1s), list(w2s)
        self.tw, self.ti = topk_weights.reshape(-1).contiguous(), topk_ids
        self.tokens, self.K = x.shape
        self.E, N2, _ = self.w1s[0].shape
        self.N = N2 // 2
        self.topk = topk_ids.shape[1]
        pairs = self.tokens * self.topk
        self.h = torch.empty((pairs, N2), dtype=x.dtype, device=x.device)
        self.y = torch.empty((pairs, self.K), dtype=x.dtype, device=x.device)
        # A real activation (no zeros) for the down GEMM's input.
        self.act = (torch.randn((pairs, self.N), dtype=torch.float32, device=x.device) * 0.5).to(x.dtype)
        self._aligned = {}

    def aligned(self, bm):
        if bm not in self._aligned:
            self._aligned[bm] = align_block_size(self.ti, bm, self.E)
        return self._aligned[bm]

    def launch(self, cfg, i=0):
        s, e, n = self.aligned(cfg["BLOCK_SIZE_M"])
        j = i % len(self.w1s)
        invoke_gemm(self.x, self.w1s[j], self.h, None, s, e, n, self.topk, False, cfg)
        invoke_gemm(self.act, self.w2s[j], self.y, self.tw, s, e, n, 1, True, cfg)

    def reference(self):
        return moe_reference(self.x, self.w1s[0], self.w2s[0], self.tw.view(self.tokens, self.topk), self.ti)

    def layer(self, cfg, i=0):
        j = i % len(self.w1s)
        return fused_moe(self.x, self.w1s[j], self.w2s[j], self.tw.view(self.tokens, self.topk), self.ti, cfg,
                         aligned=self.aligned(cfg["BLOCK_SIZE_M"]))


class Fp8LayerRunner(LayerRunner):
    """LayerRunner for fp8 w8a8 weights (`quantize_weights_fp8`): `launch(cfg, i)` enqueues
    exactly the gate/up GEMM and the down GEMM on weight copy i. The activations' fp8
    quantisation (per tensor, or per token and K block) is done once up front, like the align
    step: it does not depend on the config, and this module's unfused PyTorch quantisation (a
    dozen kernels with fp32 intermediates, where vLLM runs one fused kernel) would add the same
    hundreds of microseconds to every config at large batches and compress the ratios between
    configs. `layer(cfg, i)` is the whole layer, quantisation included, for checking results."""

    def __init__(self, x, w1s, w2s, s1s, s2s, topk_weights, topk_ids, block_shape=None):
        super().__init__(x, w1s, w2s, topk_weights, topk_ids)
        self.s1s, self.s2s, self.block_shape = list(s1s), list(s2s), block_shape
        self.xq, self.xs = _quant_fp8(x, block_shape)
        # The down GEMM's input, quantised as the layer does.
        self.aq, self.as_ = _quant_fp8(self.act, block_shape)

    def launch(self, cfg, i=0):
        s, e, n = self.aligned(cfg["BLOCK_SIZE_M"])
        j = i % len(self.w1s)
        invoke_gemm(self.xq, self.w1s[j], self.h, None, s, e, n, self.topk, False, cfg, self.xs, self.s1s[j],
                    self.block_shape)
        invoke_gemm(self.aq, self.w2s[j], self.y, self.tw, s, e, n, 1, True, cfg, self.as_, self.s2s[j],
                    self.block_shape)

    def layer(self, cfg, i=0):
        j = i % len(self.w1s)
        return fused_moe(self.x, self.w1s[j], self.w2s[j], self.tw.view(self.tokens, self.topk), self.ti, cfg,
                         aligned=self.aligned(cfg["BLOCK_SIZE_M"]), w1_scale=self.s1s[j], w2_scale=self.s2s[j],
                         block_shape=self.block_shape)

    def reference(self):
        return moe_reference(self.x, self.w1s[0], self.w2s[0], self.tw.view(self.tokens, self.topk), self.ti,
                             self.s1s[0], self.s2s[0], self.block_shape)


# Bytes of weights a timing loop's launches read in turn before one comes back to the same
# bytes: about four times the L2 of an H100 or H200 (50 MB), so no launch finds its weights there.
_COLD_BYTES = 200e6
_MAX_COPIES = 16
# The copies of one timing loop never hold more than this much GPU memory.
_MAX_COPY_BYTES = 24e9


def timing_weights(w1, w2, dtype="bf16", block_shape=None, topk=None, min_tokens=1):
    """The weights a timing loop rotates through: copies (experts rolled) until the weights the
    launches touch are well beyond the L2, so back-to-back launches read them from DRAM as a
    model's layers do. With `topk`, what a launch touches is the experts `min_tokens` tokens
    route to, expected under uniform routing (a decode step of a small model touches a few
    experts: one copy of them would stay in the L2 from launch to launch); without it, all the
    experts. One copy when that is 100 MB or more, else enough for about 200 MB (2 to 16, and
    at most 24 GB in all). Quantised to e4m3 for fp8 w8a8. Returns (w1s, w2s, w1_scales,
    w2_scales); the scales are None unless fp8."""
    elem = 1 if dtype == "fp8_w8a8" else w1.element_size()
    size = (w1.numel() + w2.numel()) * elem
    experts = w1.shape[0]
    touched = 1.0 if topk is None else 1.0 - (1.0 - min(topk, experts) / experts) ** max(1, min_tokens)
    hot = size * touched
    copies = 1 if hot >= 100e6 else min(_MAX_COPIES, max(2, math.ceil(_COLD_BYTES / hot)))
    copies = max(1, min(copies, int(_MAX_COPY_BYTES // size)))
    w1s = [w1] + [w1.roll(i, dims=0).contiguous() for i in range(1, copies)]
    w2s = [w2] + [w2.roll(i, dims=0).contiguous() for i in range(1, copies)]
    if dtype != "fp8_w8a8":
        return w1s, w2s, None, None
    q1 = [quantize_weights_fp8(w, block_shape) for w in w1s]
    q2 = [quantize_weights_fp8(w, block_shape) for w in w2s]
    return [q for q, _ in q1], [q for q, _ in q2], [s for _, s in q1], [s for _, s in q2]



class QueuedTimer:
    """GPU time per launch of a layer, its launches queued behind a GPU sleep so that they run
    back to back. The sleep has to outlast the host's time to submit the whole batch: otherwise
    the queue drains and the events time the host, not the GPU. A fused-MoE layer's host cost is
    several kernel launches (the fp8 activations' quantisation adds more), up to several times
    its GPU time at small batches. So the sleep follows the host time measured on the previous
    batches (1.5x, at most 50 ms), and is skipped when one launch outlasts its host cost
    several times. `torch` is the module (a stand-in in the tests)."""

    def __init__(self, torch, max_reps):
        self.torch = torch
        self.ev = [torch.cuda.Event(enable_timing=True) for _ in range(max_reps + 1)]
        torch.cuda._sleep(100_000)
        torch.cuda.synchronize()
        rates = []
        for _ in range(3):
            self.ev[0].record()
            torch.cuda._sleep(10_000_000)
            self.ev[1].record()
            self.ev[1].synchronize()
            rates.append(10_000_000 / (self.ev[0].elapsed_time(self.ev[1]) * 1e3))
        self.cycles_per_us = max(rates)
        self.host_us = 100.0

    def run(self, launch, reps, est_us=None):
        """Per-rep microseconds of `reps` calls of `launch(rep)`; `est_us` is the launch's GPU
        time if known."""
        torch, ev = self.torch, self.ev
        if est_us is None or est_us < 4 * self.host_us:
            torch.cuda._sleep(int(self.cycles_per_us * min(50_000.0, self.host_us * reps * 1.5 + 20.0)))
        h0 = time.perf_counter()
        ev[0].record()
        for r in range(reps):
            launch(r)
            ev[r + 1].record()
        h1 = time.perf_counter()
        ev[reps].synchronize()
        self.host_us = 0.8 * self.host_us + 0.2 * ((h1 - h0) * 1e6 / reps)
        return [ev[r].elapsed_time(ev[r + 1]) * 1e3 for r in range(reps)]
