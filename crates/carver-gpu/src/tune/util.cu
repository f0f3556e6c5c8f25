// Helpers of the tuning worker beside ../cuda/common.cuh (types, random numbers, fill_16 and
// poison_u16), which is compiled in front of this file: the error of an output against a
// reference. Compiled at run time with NVRTC; no headers.

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
    GRID_STRIDE_LOOP(i, n) {
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

// n random fp8 values (e5m2 when `e5m2`, else e4m3), uniform in [-1, 1) rounded to the nearest
// representable value. (cvt packs two: the second source lands in the low byte.)
extern "C" __global__ void fill_fp8(unsigned char* out, u64 n, u64 seed, int e5m2) {
    GRID_STRIDE_LOOP(i, n) {
        const float v = uniform(i, seed);
        u16 pair;
        if (e5m2) {
            asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(v));
        } else {
            asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(v));
        }
        out[i] = (unsigned char)(pair & 0xFFu);
    }
}

// The fp8 values of `in` as bf16 (`bf16`) or f16: exact, since every e4m3 and e5m2 value is a
// bf16 and an f16 value. The reference GEMM of an fp8 problem runs on these copies.
extern "C" __global__ void fp8_to_16(const unsigned char* in, u16* out, u64 n, int e5m2,
                                     int bf16) {
    GRID_STRIDE_LOOP(i, n) {
        const u16 pair = in[i];
        u32 halves;
        if (e5m2) {
            asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(halves) : "h"(pair));
        } else {
            asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair));
        }
        const u16 h = (u16)(halves & 0xFFFFu);
        if (bf16) {
            float f;
            asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
            out[i] = f32_to_16(f, 1);
        } else {
            out[i] = h;
        }
    }
}
