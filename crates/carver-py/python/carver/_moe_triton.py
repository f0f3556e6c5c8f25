"""The fused-MoE grouped GEMM as a Triton kernel (imported by `carver.moe_kernel` only when a
kernel is launched; importing this module needs Triton).

One launch computes, for every (token, expert) pair routed to an expert, one row of
`A[row] @ W[expert].T`:

- the pairs are listed in `sorted_ids`, grouped by expert and padded with the sentinel
  `num_valid` to a multiple of BLOCK_SIZE_M per expert, so every M-block of the list belongs to
  one expert (`expert_ids[block]`); `num_post_padded` says how many entries are real blocks;
- a pair id `p` is `token * top_k + slot`: the A row is `p // top_k` (the first GEMM gathers the
  token's hidden state; the second passes top_k = 1 and reads row `p` of the activation), the C
  row is `p`;
- weights are `[E, N, K]` with K contiguous; a [BLOCK_SIZE_K, BLOCK_SIZE_N] tile of W^T is read
  per step; accumulation is fp32; the routing weight of the pair multiplies the row when
  `mul_routed` is set (the down GEMM);
- the launch grid is cdiv(EM, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N) programs in grouped order
  (GROUP_SIZE_M M-blocks share a column sweep); programs whose M-block starts past
  `num_post_padded` return at once.

N, K, EM, the token counts, top_k and the routing flag are run-time arguments, so one binary per
(config, dtype, quantisation) serves every model and batch size: EM, num_valid, top_k and
mul_routed are kept out of Triton's integer specialisation (their values change the divisibility
and "== 1" flags from one batch size to the next).

QUANT: 0 = none (bf16/fp16 operands); 1 = fp8 w8a8 with per-tensor activation scale and
per-expert weight scale; 2 = fp8 w8a8 with block scales (activations [tokens, K / GROUP_K],
weights [E, N / GROUP_N, K / GROUP_K]); BLOCK_SIZE_K must divide GROUP_K then.
"""

import triton
import triton.language as tl


# Integers that vary with the batch, and the scale strides (their divisibility follows the model's
# dimensions / 128 and buys nothing for a few scale loads), are not specialised: one binary per
# config then serves every batch size and the precompile pool's small problem.
@triton.jit(do_not_specialize=["EM", "num_valid", "top_k", "mul_routed", "stride_asm", "stride_ask",
                               "stride_wse", "stride_wsn", "stride_wsk"])
def fused_moe_gemm(
    a_ptr, w_ptr, c_ptr, routed_w_ptr, sorted_ids_ptr, expert_ids_ptr, num_post_padded_ptr,
    a_scale_ptr, w_scale_ptr,
    N, K, EM, num_valid, top_k, mul_routed,
    stride_am, stride_ak, stride_we, stride_wn, stride_wk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_wse, stride_wsn, stride_wsk,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, QUANT: tl.constexpr, GROUP_N: tl.constexpr, GROUP_K: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    blocks_m = tl.cdiv(EM, BLOCK_SIZE_M)
    blocks_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * blocks_n
    group = pid // per_group
    first_m = group * GROUP_SIZE_M
    rows_in_group = min(blocks_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    num_post_padded = tl.load(num_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= num_post_padded:
        return

    list_pos = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    pair = tl.load(sorted_ids_ptr + list_pos).to(tl.int64)
    row_ok = pair < num_valid
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)

    # Columns wrap around N (the store is masked), so weight loads need no mask along N.
    cols = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_row = pair // top_k
    a_ptrs = a_ptr + a_row[:, None] * stride_am + ks[None, :] * stride_ak
    w_ptrs = w_ptr + expert * stride_we + cols[None, :] * stride_wn + ks[:, None] * stride_wk

    if QUANT == 1:
        a_scale = tl.load(a_scale_ptr)
        w_scale = tl.load(w_scale_ptr + expert * stride_wse)
    if QUANT == 2:
        as_ptrs = a_scale_ptr + a_row * stride_asm
        ws_ptrs = w_scale_ptr + expert * stride_wse + (cols // GROUP_N) * stride_wsn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - kb * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & (ks[None, :] < k_left), other=0.0)
        w = tl.load(w_ptrs, mask=ks[:, None] < k_left, other=0.0)
        if QUANT == 2:
            kg = (kb * BLOCK_SIZE_K) // GROUP_K
            sa = tl.load(as_ptrs + kg * stride_ask, mask=row_ok, other=0.0)
            sw = tl.load(ws_ptrs + kg * stride_wsk)
            acc += tl.dot(a, w) * sa[:, None] * sw[None, :]
        else:
            acc = tl.dot(a, w, acc=acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        w_ptrs += BLOCK_SIZE_K * stride_wk

    if QUANT == 1:
        acc = acc * (a_scale * w_scale)
    if mul_routed:
        rw = tl.load(routed_w_ptr + pair, mask=row_ok, other=0.0)
        acc = acc * rw[:, None]

    out_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + pair[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & (out_cols[None, :] < N))
