"""A plain Triton fp16 matmul, C = A @ B, the kernel every ranker's configs are timed on.

A is M x K and B is K x N, each in any layout expressible by strides (row-major or column-major);
C is M x N fp16, accumulated in fp32. Ragged M, N and K are handled with masks. Programs are launched
in grouped order (GROUP_SIZE_M rows of tiles at a time, for L2 reuse) and K can be split across a
second grid dimension (SPLIT_K): each split reduces a contiguous run of K tiles and adds its partial
sum with fp32 atomics into a zeroed fp32 workspace, which is then cast to fp16. The zeroing and the
cast are part of `matmul()`, so a timed call includes the whole split-K cost.

Config form (what carver emits for `--target triton`):
    {"kwargs": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": 8, "num_stages": 3}

Specialisation choices (they decide how many binaries a sweep compiles, not what is computed):
- M is not specialised (`do_not_specialize`): it only enters masks and the program-id mapping, so one
  binary per config serves every token count, as a serving deployment would want.
- SPLIT_K is a run-time argument, not a constexpr. Triton still specialises the value 1 to a
  constant, so SPLIT_K == 1 compiles to the plain store path; every SPLIT_K > 1 shares one binary
  with the atomic path (`do_not_specialize_on_alignment` keeps 16 from getting its own).
- EVEN_K (K a multiple of BLOCK_SIZE_K) is derived here, not a config field: it drops the K mask
  from the loads when no K tile is ragged. Contiguous split-K chunks start on tile boundaries, so
  EVEN_K is exact for every split.
"""

import torch
import triton
import triton.language as tl

from configs import unpack_config

INT32_LIMIT = 2**31 - 1


@triton.jit(do_not_specialize=["M"], do_not_specialize_on_alignment=["SPLIT_K"])
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    SPLIT_K,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    # Grouped launch order: walk GROUP_SIZE_M rows of output tiles column by column, so that
    # programs running at the same time share rows of A and columns of B in L2.
    pid = tl.program_id(axis=0)
    pid_k = tl.program_id(axis=1)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # This split's contiguous run of K tiles (possibly empty for the last splits).
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    tiles_per_split = tl.cdiv(k_tiles, SPLIT_K)
    kt_begin = pid_k * tiles_per_split
    kt_end = min(kt_begin + tiles_per_split, k_tiles)

    # Rows and columns past the edge wrap around (% M, % N): the loads stay in bounds without a
    # mask on M or N, and the wrapped results are dropped by the store mask.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + (kt_begin * BLOCK_SIZE_K + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (kt_begin * BLOCK_SIZE_K + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kt in range(kt_begin, kt_end):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - kt * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    if SPLIT_K == 1:
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(tl.float16), mask=c_mask)
    else:
        # The workspace is a contiguous row-major M x N fp32 buffer, zeroed before the launch.
        ws_ptrs = ws_ptr + offs_cm[:, None] * N + offs_cn[None, :]
        tl.atomic_add(ws_ptrs, acc, mask=c_mask, sem="relaxed")


def check_problem(a, b, c):
    M, K = a.shape
    K2, N = b.shape
    if K2 != K or tuple(c.shape) != (M, N):
        raise ValueError(f"shape mismatch: A {tuple(a.shape)}, B {tuple(b.shape)}, C {tuple(c.shape)}")
    for name, t in (("A", a), ("B", b), ("C", c)):
        if t.dtype != torch.float16:
            raise ValueError(f"{name} must be float16, got {t.dtype}")
    # The kernel indexes with 32-bit integers.
    for name, n in (("M*K", M * K), ("K*N", K * N), ("M*N", M * N)):
        if n > INT32_LIMIT:
            raise ValueError(f"{name}={n} exceeds the kernel's 32-bit indexing")
    return M, N, K


def make_launcher(As, Bs, Cs, config, ws=None):
    """Validate once and return `go(i)`, which computes Cs[i] = As[i] @ Bs[i] with this config and
    returns Triton's compiled kernel object (its n_regs, n_spills and metadata.shared describe the
    binary). The sets must share shapes and strides. `ws` is an fp32 buffer of >= M*N elements,
    needed when SPLIT_K > 1: each call zeroes it, the kernel adds into it, and it is cast into C.
    Everything that does not change between calls is bound here, to keep host cost per call low
    (the harness queues many short launches)."""
    kwargs, num_warps, num_stages = unpack_config(config)
    if not (len(As) == len(Bs) == len(Cs)) or not As:
        raise ValueError("As, Bs and Cs must be non-empty lists of equal length")
    M, N, K = check_problem(As[0], Bs[0], Cs[0])
    strides = (As[0].stride(0), As[0].stride(1), Bs[0].stride(0), Bs[0].stride(1), Cs[0].stride(0), Cs[0].stride(1))
    for a, b, c in zip(As, Bs, Cs):
        check_problem(a, b, c)
        if (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)) != strides:
            raise ValueError("all input sets must share strides")
    bm, bn, bk = kwargs["BLOCK_SIZE_M"], kwargs["BLOCK_SIZE_N"], kwargs["BLOCK_SIZE_K"]
    split_k = kwargs["SPLIT_K"]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split_k)
    runner = matmul_kernel[grid]
    tail = (M, N, K) + strides + (split_k,)
    meta = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=kwargs["GROUP_SIZE_M"],
                EVEN_K=(K % bk == 0), num_warps=num_warps, num_stages=num_stages)
    if split_k == 1:
        def go(i):
            c = Cs[i]
            return runner(As[i], Bs[i], c, c, *tail, **meta)  # ws_ptr unused on this path
        return go
    if ws is None or ws.dtype != torch.float32 or ws.numel() < M * N:
        raise ValueError(f"SPLIT_K={split_k} needs an fp32 workspace of >= {M * N} elements")
    ws_flat = ws[: M * N]
    ws_2d = ws_flat.view(M, N)

    def go_split(i):
        ws_flat.zero_()
        compiled = runner(As[i], Bs[i], Cs[i], ws_flat, *tail, **meta)
        Cs[i].copy_(ws_2d)
        return compiled
    return go_split


def launch(a, b, c, config, ws=None):
    """Compute c = a @ b with one config; return Triton's compiled kernel object."""
    return make_launcher([a], [b], [c], config, ws)(0)


def matmul(a, b, c, config, ws=None):
    """c = a @ b with one config (see make_launcher); returns c."""
    launch(a, b, c, config, ws)
    return c
