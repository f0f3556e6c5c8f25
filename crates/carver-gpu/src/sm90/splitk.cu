// The second kernel of a split-K `cuda-sm90` GEMM: C[b, r, col] = sum over s of
// partials[b][s][r][col], in the order s = 0, 1, ..., so the result does not depend on which
// block finished first. `partials` is the GEMM's fp32 workspace ([batch][splits][M][ldw], see
// kernel.cu); C is row-major M x N per matrix, bf16 (`out_bf16` = 1) or f16.
//
// Blocks of 256 threads along a row (x) and rows along y, looping over the rows past the grid.
// No headers: NVRTC has no <cstdint>.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

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
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    const u64 slice = (u64)M * (u64)ldw;
    const u64 rows = (u64)batch * (u64)M;
    for (u64 br = blockIdx.y; br < rows; br += gridDim.y) {
        const u64 b = br / (u64)M;
        const u64 r = br - b * (u64)M;
        const float* p = partials + b * (u64)splits * slice + r * (u64)ldw + col;
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) sum += p[(u64)s * slice];
        c[br * (u64)N + col] = to_16(sum, out_bf16);
    }
}
