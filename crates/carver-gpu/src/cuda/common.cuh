// Helpers shared by carver's run-time compiled CUDA sources (the calibration microbenchmarks
// and the tuning worker's helpers): the Rust side puts this text in front of each source.
// No headers: NVRTC has no <cstdint>, and nothing here needs more than built-ins.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

// Every thread of the grid visits indices of [0, n) a grid apart, so any grid covers any n.
#define GRID_STRIDE_LOOP(i, n) \
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

// splitmix64 finalizer: a good hash of consecutive integers.
__device__ __forceinline__ u64 mix(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [-1, 1), a multiple of 2^-23: element i of the stream named by `seed`.
__device__ __forceinline__ float uniform(u64 i, u64 seed) {
    return (float)(u32)(mix(seed * 0x100000001B3ull + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// A finite f32 rounded to the nearest bf16 (ties to even) or f16, as bits. The bf16 rounding is
// done by hand: `cvt.rn.bf16.f32` needs sm_80, and the calibration also runs on sm_75.
__device__ __forceinline__ u16 f32_to_16(float v, int bf16) {
    if (bf16) {
        u32 bits;
        asm("mov.b32 %0, %1;" : "=r"(bits) : "f"(v));
        bits += 0x7FFFu + ((bits >> 16) & 1u);
        return (u16)(bits >> 16);
    }
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// n random 16-bit floats (bf16 when `bf16`, else f16), uniform in [-1, 1).
extern "C" __global__ void fill_16(u16* out, u64 n, u64 seed, int bf16) {
    GRID_STRIDE_LOOP(i, n) {
        out[i] = f32_to_16(uniform(i, seed), bf16);
    }
}

// Sets n 16-bit words to 0xFFFF, a NaN in both bf16 and f16, so that an output the kernel did
// not write cannot pass for a result.
extern "C" __global__ void poison_u16(u16* out, u64 n) {
    GRID_STRIDE_LOOP(i, n) {
        out[i] = 0xFFFFu;
    }
}

