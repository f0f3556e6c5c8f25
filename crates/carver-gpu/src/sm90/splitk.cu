// The second kernel of a split-K `cuda-sm90` GEMM: C[b, r, col] = sum over s of
// partials[b][s][r][col], in the order s = 0, 1, ..., so the result does not depend on which
// block finished first. `partials` is the GEMM's fp32 workspace ([batch][splits][M][ldw], see
// kernel.cu); C is row-major M x N per matrix, bf16 (`out_bf16` = 1) or f16.
//
// Each thread sums COLUMNS adjacent columns of a row: one 16-byte load per split (ldw is a
// multiple of the GEMM's block N, so every such vector lies inside the row and is aligned), the
// loads of LOADS splits issued before any is added, so that a thread keeps several loads in
// flight instead of waiting for each (Nsight Compute on the H200, 2026-11-28: one column a
// thread, one load at a time, took 12.1 us to sum 3 x 240 x 5120 partials, stalled on
// its loads 10 cycles per instruction). Blocks of 256 threads along a row (x) and rows along y,
// looping over the rows past the grid. No headers: NVRTC has no <cstdint>.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

// COLUMNS is one float4; the host's launch geometry reads it (SPLITK_COLUMNS_PER_THREAD).
#define COLUMNS 4
#define LOADS 4

__device__ __forceinline__ u16 to_16(float v, int out_bf16) {
    u16 r;
    if (out_bf16) {
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
    } else {
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
    }
    return r;
}

extern "C" __global__ void __launch_bounds__(256)
    carver_sm90_splitk_reduce(const float* __restrict__ partials, u16* __restrict__ c, int M,
                              int N, int ldw, int splits, int batch, int out_bf16) {
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * COLUMNS;
    if (col >= N) return;
    const u64 slice = (u64)M * (u64)ldw;
    const u64 rows = (u64)batch * (u64)M;
    for (u64 br = blockIdx.y; br < rows; br += gridDim.y) {
        const u64 b = br / (u64)M;
        const u64 r = br - b * (u64)M;
        const float* p = partials + b * (u64)splits * slice + r * (u64)ldw + col;
        float sum[COLUMNS] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s0 = 0; s0 < splits; s0 += LOADS) {
            float4 v[LOADS];
#pragma unroll
            for (int i = 0; i < LOADS; ++i) {
                if (s0 + i < splits) v[i] = *reinterpret_cast<const float4*>(p + (u64)(s0 + i) * slice);
            }
#pragma unroll
            for (int i = 0; i < LOADS; ++i) {
                if (s0 + i < splits) {
                    sum[0] += v[i].x;
                    sum[1] += v[i].y;
                    sum[2] += v[i].z;
                    sum[3] += v[i].w;
                }
            }
        }
        u16* out = c + br * (u64)N + col;
        if (col + COLUMNS <= N && ((u64)out & 7) == 0) {
            const u32 lo = (u32)to_16(sum[0], out_bf16) | ((u32)to_16(sum[1], out_bf16) << 16);
            const u32 hi = (u32)to_16(sum[2], out_bf16) | ((u32)to_16(sum[3], out_bf16) << 16);
            asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(out), "r"(lo), "r"(hi) : "memory");
        } else {
#pragma unroll
            for (int i = 0; i < COLUMNS; ++i) {
                if (col + i < N) out[i] = to_16(sum[i], out_bf16);
            }
        }
    }
}
