// Microbenchmarks of `carver arch calibrate`, compiled at run time with NVRTC after
// ../cuda/common.cuh (types, random numbers, fill_16 and poison_u16).

// A value that the accumulated XOR of real data practically never equals; the store under it
// keeps every load alive without adding traffic.
#define SINK_MAGIC 0x5eed5eedu

extern "C" __global__ void fill_u32(u32* out, u64 n, u64 seed) {
    GRID_STRIDE_LOOP(i, n) {
        out[i] = (u32)mix(seed * 0x100000001B3ull + i);
    }
}

#define L2_UNROLL 8

// Every thread reads 16-byte vectors of a buffer (a power of two of them, `mask` + 1) that fits
// well inside L2, L2_UNROLL independent loads in flight per thread. `ld.global.cg` caches in L2
// only, so the per-SM L1 cannot serve the repeats.
extern "C" __global__ void l2_read(const u32* buf, u32 mask, u32 iters, u32* sink) {
    const u32 stride = gridDim.x * blockDim.x;
    u32 idx = blockIdx.x * blockDim.x + threadIdx.x;
    u32 acc = 0;
    for (u32 it = 0; it < iters; ++it) {
        u32 v[L2_UNROLL][4];
#pragma unroll
        for (int k = 0; k < L2_UNROLL; ++k) {
            const u32* p = buf + 4ull * ((idx + (u32)k * stride) & mask);
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[k][0]), "=r"(v[k][1]), "=r"(v[k][2]), "=r"(v[k][3])
                         : "l"(p));
        }
#pragma unroll
        for (int k = 0; k < L2_UNROLL; ++k) {
            acc ^= v[k][0] ^ v[k][1] ^ v[k][2] ^ v[k][3];
        }
        idx += L2_UNROLL * stride;
    }
    if (acc == SINK_MAGIC) {
        sink[0] = acc;
    }
}

#define SMEM_THREADS 256
// Four 16-byte slots per thread: 16 KiB per block.
#define SMEM_WORDS (SMEM_THREADS * 4 * 4)

// `.volatile` keeps ptxas from merging the repeated loads of the same addresses (without it,
// ptxas kept 4 of every 32 loads and the figure came out 8x too high).
#define LDS(dst, offset)                                                                  \
    asm volatile("ld.volatile.shared.v4.u32 {%0,%1,%2,%3}, [%4+" #offset "];"             \
                 : "=r"(dst[0]), "=r"(dst[1]), "=r"(dst[2]), "=r"(dst[3])                 \
                 : "r"(base))
#define FOLD(src) (src[0] ^ src[1] ^ src[2] ^ src[3])

// A warp's 128-bit loads cover 512 consecutive bytes: no bank conflicts, four wavefronts each.
extern "C" __global__ void __launch_bounds__(SMEM_THREADS) smem_read(u32 iters, u32 seed, u32* sink) {
    __shared__ __align__(16) u32 tile[SMEM_WORDS];
    for (u32 i = threadIdx.x; i < SMEM_WORDS; i += SMEM_THREADS) {
        tile[i] = (i * 2654435761u) ^ seed;
    }
    __syncthreads();
    u32 base;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
        : "=r"(base)
        : "l"((u64)tile));
    base += threadIdx.x * 16u;
    u32 acc = 0;
    for (u32 it = 0; it < iters; ++it) {
        u32 a[4], b[4], c[4], d[4], e[4], f[4], g[4], h[4];
        LDS(a, 0);
        LDS(b, 4096);
        LDS(c, 8192);
        LDS(d, 12288);
        LDS(e, 0);
        LDS(f, 4096);
        LDS(g, 8192);
        LDS(h, 12288);
        acc ^= FOLD(a) ^ FOLD(b) ^ FOLD(c) ^ FOLD(d) ^ FOLD(e) ^ FOLD(f) ^ FOLD(g) ^ FOLD(h);
    }
    if (acc == SINK_MAGIC) {
        sink[blockIdx.x] = acc;
    }
}
