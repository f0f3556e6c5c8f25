// Helpers of the tuning worker: random 16-bit inputs, NaN poison, and the error of an output
// against a reference. Compiled at run time with NVRTC; no headers.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

// splitmix64 finalizer: a good hash of consecutive integers.
__device__ __forceinline__ u64 mix(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [-1, 1), a multiple of 2^-23.
__device__ __forceinline__ float uniform(u64 i, u64 seed) {
    return (float)(u32)(mix(seed * 0x100000001B3ull + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__device__ __forceinline__ u16 f32_to_16(float v, int bf16) {
    u16 h;
    if (bf16) {
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    } else {
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    }
    return h;
}

__device__ __forceinline__ float f16_to_32(u16 h, int bf16) {
    float f;
    if (bf16) {
        u32 bits = ((u32)h) << 16;
        asm("mov.b32 %0, %1;" : "=f"(f) : "r"(bits));
    } else {
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    }
    return f;
}

extern "C" __global__ void fill_16(u16* out, u64 n, u64 seed, int bf16) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        out[i] = f32_to_16(uniform(i, seed), bf16);
    }
}

// 0xFFFF is a NaN in both bf16 and f16: an output the kernel did not write cannot pass.
extern "C" __global__ void poison_16(u16* out, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        out[i] = 0xFFFFu;
    }
}

#define DIFF_THREADS 256

// sums[0] += sum (out - ref)^2 over finite outputs, sums[1] += sum ref^2,
// bad[0] += number of outputs that are NaN or infinite (unwritten entries are NaN).
extern "C" __global__ void __launch_bounds__(DIFF_THREADS)
    diff_16(const u16* out, const u16* ref, u64 n, int bf16, double* sums, u64* bad) {
    __shared__ double s_err[DIFF_THREADS];
    __shared__ double s_ref[DIFF_THREADS];
    __shared__ u64 s_bad[DIFF_THREADS];
    double err = 0.0, norm = 0.0;
    u64 nonfinite = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u16 o = out[i];
        const float r = f16_to_32(ref[i], bf16);
        const u16 exponent_mask = bf16 ? 0x7F80u : 0x7C00u;
        if ((o & exponent_mask) == exponent_mask) {
            nonfinite += 1;
        } else {
            const double d = (double)f16_to_32(o, bf16) - (double)r;
            err += d * d;
        }
        norm += (double)r * (double)r;
    }
    s_err[threadIdx.x] = err;
    s_ref[threadIdx.x] = norm;
    s_bad[threadIdx.x] = nonfinite;
    __syncthreads();
    for (int stride = DIFF_THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            s_err[threadIdx.x] += s_err[threadIdx.x + stride];
            s_ref[threadIdx.x] += s_ref[threadIdx.x + stride];
            s_bad[threadIdx.x] += s_bad[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        asm volatile("red.global.add.f64 [%0], %1;" ::"l"(sums), "d"(s_err[0]) : "memory");
        asm volatile("red.global.add.f64 [%0], %1;" ::"l"(sums + 1), "d"(s_ref[0]) : "memory");
        asm volatile("red.global.add.u64 [%0], %1;" ::"l"(bad), "l"(s_bad[0]) : "memory");
    }
}
