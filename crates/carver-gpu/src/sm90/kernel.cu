// carver's Hopper GEMM, the `cuda-sm90` kernel family: C[M, N] = A[M, K] * B[K, N].
//
// Compiled at run time with NVRTC for sm_90a, once per configuration. The host puts in front of
// this file the configuration's #defines and `wgmma_tile`, the one wgmma instruction of the tile
// (its operand list depends on BN, so it is generated):
//   BM, BN, BK          block tile (BK x element size = 128 bytes, the swizzle span)
//   STAGES              depth of the shared-memory ring
//   CONSUMERS           wgmma warpgroups (1 or 2); each owns BM / CONSUMERS rows of the tile
//   GROUP_M             launch-order group: tile rows walked together down a column band
//   PERSISTENT          1: a grid of at most one wave loops over tiles
//   CLUSTER_M           CTAs per cluster along M (1 or 2); a pair shares its B tile, each CTA
//                       loading half of it with TMA multicast into both
//   B_KMAJOR            1: B is stored N x K (K contiguous); 0: K x N (N contiguous)
//   OUT_BF16            1: C is bf16; 0: C is f16
//
// Structure: warpgroup 0 is the producer; one elected thread issues TMA loads (128-byte swizzle)
// of A and B tiles into a STAGES-deep ring, each stage guarded by a `full` mbarrier (TMA
// transaction bytes) and an `empty` mbarrier (one arrival per consumer warp). Warpgroups 1..=
// CONSUMERS wait for `full`, issue wgmma m64nBNk16 from shared-memory descriptors, keep fp32
// accumulators in registers and release a stage once the wgmma reading it has completed. The
// epilogue converts to 16 bits and stores straight from registers, predicated on M and N (TMA
// zero-fills rows and columns past the matrix edge on the loads, including the last K tile).
// With CLUSTER_M = 2 the two CTAs of a cluster compute vertically adjacent tiles: each loads
// its own A tile and half of the shared B tile, multicast to both; a stage is refilled only
// once the consumers of both CTAs have released it (remote mbarrier arrivals).
//
// No headers: NVRTC has no <cstdint>, and everything here is inline PTX.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

// A CUtensorMap as the driver encodes it: 128 opaque bytes, passed by value.
struct __align__(64) TmaMap {
    u64 words[16];
};

#define THREADS (128 * (CONSUMERS + 1))
#define ROWS_PER_CONSUMER (BM / CONSUMERS)
#define M_SLABS (ROWS_PER_CONSUMER / 64)
#define A_STAGE_BYTES (BM * 128)
#define B_STAGE_BYTES (BN * 128)
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)
// One TMA box of row-major B: 64 columns (128 bytes) x BK rows.
#define B_BOX_BYTES (64 * 128)

#if BK * 2 != 128
#error "BK x element size must be 128 bytes"
#endif
#if ROWS_PER_CONSUMER % 64 != 0
#error "BM must be 64 x CONSUMERS x m-iterations"
#endif
#if BN % 16 != 0 || BN > 256
#error "BN must be a multiple of 16 up to 256"
#endif
#if !B_KMAJOR && BN % 64 != 0
#error "row-major B needs BN to be a multiple of 64"
#endif
#if CLUSTER_M != 1 && CLUSTER_M != 2
#error "CLUSTER_M must be 1 or 2"
#endif

__device__ __forceinline__ u32 smem_u32(const void* p) {
    u64 a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (u32)a;
}

// ---- mbarriers ----------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Waits until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done;
    do {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// ---- TMA ----------------------------------------------------------------------------------

__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaMap* map, u32 bar, int inner,
                                            int outer) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"((u64)map), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}

#if CLUSTER_M > 1
// Loads one box and writes it, at the same offset, into the shared memory of every CTA of the
// cluster in `mask`, completing bytes on the mbarrier at the same offset in each.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const TmaMap* map, u32 bar,
                                                      int inner, int outer, u16 mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"((u64)map), "r"(inner), "r"(outer), "r"(bar), "h"(mask)
        : "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Arrives on the mbarrier at shared address `bar` of CTA `cta` of the cluster. No cluster-scope
// release: what it orders are wgmma reads already completed by wgmma.wait_group, and a
// `.release.cluster` arrive costs a GPU-wide memory barrier per call (it halved the speed).
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 cta) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(bar),
        "r"(cta)
        : "memory");
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}
#endif

// Releases stage `s` to the producers: one arrival per consumer warp on the `empty` barrier of
// every CTA of the cluster (each of them may refill this stage in both).
__device__ __forceinline__ void release_stage(u32 empty_bar) {
#if CLUSTER_M > 1
#pragma unroll
    for (u32 cta = 0; cta < CLUSTER_M; ++cta) mbar_arrive_cluster(empty_bar, cta);
#else
    mbar_arrive(empty_bar);
#endif
}

// ---- wgmma --------------------------------------------------------------------------------

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor fields (PTX ISA, "Matrix Descriptor Format"): start address,
// leading-dimension byte offset and stride-dimension byte offset, all in 16-byte units, and the
// swizzle mode in bits 62-63 (1 = 128-byte swizzle).
__device__ __forceinline__ u64 desc_field(u32 bytes) { return (u64)((bytes & 0x3FFFF) >> 4); }

// K-major operand, 128-byte rows of K, 8-row swizzle atoms 1024 bytes apart.
__device__ __forceinline__ u64 desc_kmajor(u32 addr) {
    return desc_field(addr) | (desc_field(16) << 16) | (desc_field(1024) << 32) | (1ull << 62);
}

// N-major B (row-major K x N): 128-byte rows of 64 N-values, one row per k; 8-row swizzle
// atoms 1024 bytes apart along K (stride offset), 64-column boxes B_BOX_BYTES apart along N
// (leading offset).
__device__ __forceinline__ u64 desc_nmajor(u32 addr) {
    return desc_field(addr) | (desc_field(B_BOX_BYTES) << 16) | (desc_field(1024) << 32) |
           (1ull << 62);
}

// ---- output -------------------------------------------------------------------------------

__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
#if OUT_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ u16 to16(float v) {
    u16 r;
#if OUT_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
#endif
    return r;
}

// Stores C[row, col] and C[row, col + 1] where they lie inside the matrix.
__device__ __forceinline__ void store_pair(u16* c, int M, int N, int row, int col, float lo,
                                           float hi) {
    if (row >= M || col >= N) return;
    u16* p = c + (u64)row * (u64)N + (u64)col;
    if (col + 1 < N && (N & 1) == 0) {
        *reinterpret_cast<u32*>(p) = pack2(lo, hi);
    } else {
        p[0] = to16(lo);
        if (col + 1 < N) p[1] = to16(hi);
    }
}

// ---- launch order -------------------------------------------------------------------------

// Tile `t` in grouped order: GROUP_M tile rows are walked together, column by column, so that
// consecutive tiles share B columns and a group's A rows stay in L2.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = GROUP_M * tiles_n;
    const int group = t / per_group;
    const int first_m = group * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int r = t - group * per_group;
    tm = first_m + r % rows;
    tn = r / rows;
}

// ---- the kernel ---------------------------------------------------------------------------

#if CLUSTER_M > 1
#define CLUSTER_ATTR __cluster_dims__(CLUSTER_M, 1, 1)
#else
#define CLUSTER_ATTR
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_ATTR
    carver_sm90_gemm(const __grid_constant__ TmaMap tma_a, const __grid_constant__ TmaMap tma_b,
                     u16* __restrict__ c, int M, int N, int K) {
    // The ring, then the barriers: full[s] at bars + 8 s, empty[s] at bars + 8 (STAGES + s).
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = smem_u32(smem);
    const u32 bars = base + STAGES * STAGE_BYTES;
    const int tid = threadIdx.x;
    const int wg = tid / 128;

    if (tid == 0) {
        // The 128-byte swizzle pattern follows address bits: stages must be 1024-byte aligned.
        if ((base & 1023) != 0) asm volatile("trap;");
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (STAGES + s), 4 * CONSUMERS * CLUSTER_M);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#if CLUSTER_M > 1
    // Every CTA's barriers exist before any peer signals them.
    cluster_sync();
    const u32 rank = cluster_rank();
#else
    __syncthreads();
    const u32 rank = 0;
#endif

    // Work is handed out in units of CLUSTER_M vertically adjacent tiles; CTA `rank` of a
    // cluster takes tile row unit_row * CLUSTER_M + rank (past the last tile row when M runs
    // out: its loads are zero-filled and its stores predicated off, but it still loads its
    // half of B for its peer).
    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int unit_rows = (tiles_m + CLUSTER_M - 1) / CLUSTER_M;
    const int units = unit_rows * tiles_n;
    const int first_unit = blockIdx.x / CLUSTER_M;
    const int unit_stride = gridDim.x / CLUSTER_M;
    const int k_tiles = (K + BK - 1) / BK;

    if (wg == 0) {
        // Producer warpgroup: gives registers back to the consumers, one thread issues TMA.
#if CONSUMERS == 2
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
#endif
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];" ::"l"((u64)&tma_a) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"((u64)&tma_b) : "memory");
            u32 it = 0;
            for (int u = first_unit; u < units; u += unit_stride) {
                int um, tn;
                tile_coords(u, unit_rows, tiles_n, um, tn);
                const int tm = um * CLUSTER_M + (int)rank;
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const u32 s = it % STAGES;
                    // A fresh barrier counts as having completed the phase before its first,
                    // so the first pass over the ring does not wait.
                    mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) & 1) ^ 1);
                    const u32 full = bars + 8 * s;
                    mbar_expect_tx(full, STAGE_BYTES);
                    const u32 sa = base + s * STAGE_BYTES;
                    const u32 sb = sa + A_STAGE_BYTES;
                    tma_load_2d(sa, &tma_a, full, kt * BK, tm * BM);
#if CLUSTER_M == 1
#if B_KMAJOR
                    tma_load_2d(sb, &tma_b, full, kt * BK, tn * BN);
#else
#pragma unroll
                    for (int j = 0; j < BN / 64; ++j) {
                        tma_load_2d(sb + j * B_BOX_BYTES, &tma_b, full, tn * BN + j * 64, kt * BK);
                    }
#endif
#else
#if B_KMAJOR
                    // The B map's box is BN / CLUSTER_M rows of N: this CTA's share.
                    tma_load_2d_multicast(sb + rank * (BN / CLUSTER_M) * 128, &tma_b, full,
                                          kt * BK, tn * BN + (int)rank * (BN / CLUSTER_M),
                                          (u16)((1u << CLUSTER_M) - 1));
#else
#pragma unroll
                    for (int j = 0; j < BN / 64; ++j) {
                        if (j % CLUSTER_M == (int)rank) {
                            tma_load_2d_multicast(sb + j * B_BOX_BYTES, &tma_b, full,
                                                  tn * BN + j * 64, kt * BK,
                                                  (u16)((1u << CLUSTER_M) - 1));
                        }
                    }
#endif
#endif
                }
            }
        }
    } else {
#if CONSUMERS == 2
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#endif
        const int consumer = wg - 1;
        const int lt = tid % 128;
        const int warp = lt / 32;
        const int lane = lt % 32;
        float acc[M_SLABS][BN / 2];
        u32 it = 0;
        for (int u = first_unit; u < units; u += unit_stride) {
            int um, tn;
            tile_coords(u, unit_rows, tiles_n, um, tn);
            const int tm = um * CLUSTER_M + (int)rank;
#pragma unroll
            for (int mi = 0; mi < M_SLABS; ++mi) {
#pragma unroll
                for (int i = 0; i < BN / 2; ++i) acc[mi][i] = 0.0f;
            }
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const u32 s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const u32 sa = base + s * STAGE_BYTES + consumer * ROWS_PER_CONSUMER * 128;
                const u32 sb = base + s * STAGE_BYTES + A_STAGE_BYTES;
                wg_fence();
#pragma unroll
                for (int ks = 0; ks < BK / 16; ++ks) {
#if B_KMAJOR
                    const u64 db = desc_kmajor(sb + ks * 32);
#else
                    const u64 db = desc_nmajor(sb + ks * 16 * 128);
#endif
#pragma unroll
                    for (int mi = 0; mi < M_SLABS; ++mi) {
                        wgmma_tile(acc[mi], desc_kmajor(sa + mi * 64 * 128 + ks * 32), db);
                    }
                }
                wg_commit();
                // The wgmma group of the previous k-tile has finished reading its stage.
                wg_wait<1>();
                if (kt > 0) {
                    __syncwarp();
                    if (lane == 0) release_stage(bars + 8 * (STAGES + (it - 1) % STAGES));
                }
            }
            wg_wait<0>();
            if (k_tiles > 0) {
                __syncwarp();
                if (lane == 0) release_stage(bars + 8 * (STAGES + (it - 1) % STAGES));
            }

            // Epilogue. Accumulator i of an m64 slab holds row warp*16 + lane/4 (+8 when bit 1
            // of i is set), column (i/4)*8 + (lane%4)*2 + (i%2).
            const int row0 = tm * BM + consumer * ROWS_PER_CONSUMER + warp * 16 + lane / 4;
            const int col0 = tn * BN + (lane % 4) * 2;
#pragma unroll
            for (int mi = 0; mi < M_SLABS; ++mi) {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    const int row = row0 + mi * 64;
                    const int col = col0 + j * 8;
                    store_pair(c, M, N, row, col, acc[mi][4 * j], acc[mi][4 * j + 1]);
                    store_pair(c, M, N, row + 8, col, acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
                }
            }
        }
    }
#if CLUSTER_M > 1
    // No CTA leaves while a peer may still multicast into its ring or arrive on its barriers.
    __syncwarp();
    cluster_sync();
#endif
}
