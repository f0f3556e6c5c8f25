// carver's Hopper GEMM, the `cuda-sm90` kernel family: C[b, M, N] = alpha * A[b, M, K] * B[b, K, N]
// for each of `batch` equally shaped, densely stacked matmuls (batch 1: one matmul). Inputs are
// 16-bit (bf16 or f16, wgmma k16) or 8-bit (fp8 e4m3 or e5m2, wgmma k32, B stored N x K: wgmma
// reads 8-bit operands K-major only); `alpha` is the product of fp8's per-tensor scales (1 for
// 16-bit inputs).
//
// Compiled at run time with NVRTC for sm_90a, once per configuration. The host puts in front of
// this file the configuration's #defines and `wgmma_tile`, the one wgmma instruction of the tile
// (its operand list depends on BN, so it is generated):
//   BM, BN, BK          block tile (BK x element size = 128 bytes, the swizzle span)
//   ELEM_BYTES          bytes of one input element: 2 (bf16, f16) or 1 (e4m3, e5m2)
//   STAGES              depth of the shared-memory ring
//   CONSUMERS           wgmma warpgroups (1 or 2); each owns BM / CONSUMERS rows of the tile
//   GROUP_M             launch-order group: tile rows walked together down a column band
//   PERSISTENT          1: a grid of at most one wave loops over tiles
//   CLUSTER_M           CTAs per cluster along M (1 or 2); a pair shares its B tile, each CTA
//                       loading half of it with TMA multicast into both
//   SPLIT_K             blocks sharing one tile's K loop, each over a contiguous share of the K
//                       tiles; with more than 1 each writes its fp32 partial tile to `partials`
//                       (see below) and `carver_sm90_splitk_reduce` (splitk.cu) sums them
//   B_KMAJOR            1: B is stored N x K (K contiguous); 0: K x N (N contiguous)
//   SWAP_AB             1: the small-M path. wgmma's rows run along N instead of M: B's tile
//                       is wgmma's A operand (64-row slabs of N, transposed when B is K x N)
//                       and A's tile its B operand, so BM (8 to 256, a multiple of 8) is
//                       wgmma's N and a decode tile does no MMA work on rows past M. The
//                       consumers split BN; the epilogue stores straight from registers
//                       (C is small when M is). A cluster of 2 shares B's tile between two
//                       tiles of M as it does without the swap (B's tile is laid out alike).
//   OUT_BF16            1: C is bf16; 0: C is f16
//
// Structure: warpgroup 0 is the producer; one elected thread issues TMA loads (128-byte swizzle)
// of A and B tiles (evict-first in L2 for an operand only one tile row or column reads) into a
// STAGES-deep ring, each stage guarded by a `full` mbarrier (TMA
// transaction bytes) and an `empty` mbarrier (one arrival per consumer warp). Warpgroups 1..=
// CONSUMERS wait for `full`, issue wgmma m64nBNk16 from shared-memory descriptors, keep fp32
// accumulators in registers and release a stage once the wgmma reading it has completed (TMA
// zero-fills rows and columns past the matrix edge on the loads, including the last K tile).
// Epilogue: a consumer keeps the tile's last stage instead of releasing it, and each of its warps
// uses its own 16 rows of that stage's A tile (2 KiB, which no other warp or TMA touches until the
// release) to stage its output 16 x 64 at a time: stmatrix writes the 16-bit values (16-byte
// chunks XOR-swizzled by row, free of bank conflicts), then each lane reads back 16 bytes and
// stores them to C, 8 lanes per 128-byte row. Stores are predicated on M and N; when rows of C
// do not start on 16-byte boundaries (N not a multiple of 8), the warp instead writes one row at
// a time, two values a lane (one 4-byte store where the address allows, else two 2-byte ones).
// In a persistent grid the producer meanwhile prefetches the next tile into the other stages.
// With SPLIT_K > 1 the consumers instead store their fp32 accumulators straight from registers
// into the workspace, laid out [batch][SPLIT_K][M][ldw] with ldw = N rounded up to whole tiles
// (so every column a block stores exists; rows are predicated on M).
// Tensor maps are 3-D (columns, rows, batch): the batch index is the third coordinate, so a
// box never crosses from one matrix of the batch into the next.
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
// wgmma's M (its rows, in 64-row slabs shared out among the consumers) and N (its columns).
#if SWAP_AB
#define WG_ROWS BN
#define WG_COLS BM
#else
#define WG_ROWS BM
#define WG_COLS BN
#endif
#define ROWS_PER_CONSUMER (WG_ROWS / CONSUMERS)
#define M_SLABS (ROWS_PER_CONSUMER / 64)
#define A_STAGE_BYTES (BM * 128)
#define B_STAGE_BYTES (BN * 128)
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)
// One TMA box of row-major B: 64 columns (128 bytes) x BK rows.
#define B_BOX_BYTES (64 * 128)

#if BK * ELEM_BYTES != 128
#error "BK x element size must be 128 bytes"
#endif
#if ELEM_BYTES == 1 && !B_KMAJOR
#error "8-bit inputs need B stored N x K"
#endif
// wgmma instructions per stage: each consumes 32 bytes of K (k16 of 16-bit, k32 of 8-bit).
#define K_STEPS (128 / 32)
#if ROWS_PER_CONSUMER % 64 != 0
#error "wgmma's rows (BM, or BN with SWAP_AB) must be 64 x CONSUMERS x slabs"
#endif
#if SWAP_AB
#if BM % 8 != 0 || BM > 256
#error "with SWAP_AB, BM is wgmma's N: a multiple of 8 up to 256"
#endif
#elif BN % 16 != 0 || BN > 256
#error "BN must be a multiple of 16 up to 256"
#endif
#if !B_KMAJOR && BN % 64 != 0
#error "row-major B needs BN to be a multiple of 64"
#endif
#if CLUSTER_M != 1 && CLUSTER_M != 2
#error "CLUSTER_M must be 1 or 2"
#endif
#if SPLIT_K < 1
#error "SPLIT_K must be at least 1"
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

__device__ __forceinline__ void tma_load_3d(u32 dst, const TmaMap* map, u32 bar, int inner,
                                            int outer, int layer) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
        "l"((u64)map), "r"(inner), "r"(outer), "r"(layer), "r"(bar)
        : "memory");
}

// `tma_load_3d` for an operand that only one tile row (or column) of the grid reads: its lines
// are marked evict-first in L2, so that streaming it does not evict the other operand, which
// every tile re-reads. Where the streamed operand outgrows the L2 this was up to 8% faster
// (docs/RESULTS.md, "L2 eviction hints"); marking the re-read operand evict-last did not help,
// and hinting every load (with an evict-normal policy where neither operand is streamed) was
// up to 38% slower.
__device__ __forceinline__ void tma_load_3d_streamed(u32 dst, const TmaMap* map, u32 bar,
                                                     int inner, int outer, int layer) {
    asm volatile(
        "{\n"
        ".reg .b64 policy;\n"
        "createpolicy.fractional.L2::evict_first.b64 policy, 1.0;\n"
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], policy;\n"
        "}\n" ::"r"(dst),
        "l"((u64)map), "r"(inner), "r"(outer), "r"(layer), "r"(bar)
        : "memory");
}

// Loads one operand box, evict-first when the operand is streamed.
__device__ __forceinline__ void tma_load_operand(bool streamed, u32 dst, const TmaMap* map,
                                                 u32 bar, int inner, int outer, int layer) {
    if (streamed) {
        tma_load_3d_streamed(dst, map, bar, inner, outer, layer);
    } else {
        tma_load_3d(dst, map, bar, inner, outer, layer);
    }
}

#if CLUSTER_M > 1
// Loads one box and writes it, at the same offset, into the shared memory of every CTA of the
// cluster in `mask`, completing bytes on the mbarrier at the same offset in each.
__device__ __forceinline__ void tma_load_3d_multicast(u32 dst, const TmaMap* map, u32 bar,
                                                      int inner, int outer, int layer, u16 mask) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
        "l"((u64)map), "r"(inner), "r"(outer), "r"(layer), "r"(bar), "h"(mask)
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

// One value of C (the swapped epilogue stores values one at a time).
__device__ __forceinline__ u16 to_out(float x) {
    u16 r;
#if OUT_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
#endif
    return r;
}

// Stores four 8x8 matrices of 16-bit values held in the mma accumulator layout (thread t holds
// row t/4, columns 2(t%4) and 2(t%4)+1 of each, packed in one register); lanes 8q..8q+7 give
// the addresses of matrix q's eight rows.
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

__device__ __forceinline__ void lds128(u32 addr, u32 (&v)[4]) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ u32 lds32(u32 addr) {
    u32 v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void stg_f32x2(float* p, float x, float y) {
    asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(x), "f"(y) : "memory");
}

__device__ __forceinline__ void stg128(u16* p, const u32 (&v)[4]) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v[0]), "r"(v[1]),
                 "r"(v[2]), "r"(v[3])
                 : "memory");
}

// &C[row, col] (64-bit product, so that ptxas computes it at the store instead of keeping a
// pointer per pass live across the chunks, which spilled at 192 accumulators).
__device__ __forceinline__ u16* c_at(u16* c, int row, int N, int col) {
    u64 offset;
    asm volatile("mad.wide.s32 %0, %1, %2, %3;" : "=l"(offset) : "r"(row), "r"(N), "l"((u64)col));
    return c + offset;
}

// Barrier of one consumer warpgroup's 128 threads (id 0 is __syncthreads).
// Constant ids, so that ptxas reserves only the barriers used.
__device__ __forceinline__ void consumer_sync(int consumer) {
    if (consumer == 0) {
        asm volatile("bar.sync 1, 128;" ::: "memory");
    } else {
        asm volatile("bar.sync 2, 128;" ::: "memory");
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

// What work unit `u` computes. Units run through the batch's matrices, in each the K splits, in
// each every cluster of tiles in grouped order: tile row `tm` (of this CTA of the cluster),
// tile column `tn`, matrix `b`, the split's `slice` (b * SPLIT_K + split) and its K tiles
// [kt0, kt1) (shares differ by at most one tile; a split is empty only when K has fewer tiles
// than SPLIT_K).
struct Work {
    int tm, tn, b, slice, kt0, kt1;
};

__device__ __forceinline__ Work unit_work(int u, int unit_rows, int tiles_n, int k_tiles,
                                          u32 rank) {
    Work w;
    const int per_slice = unit_rows * tiles_n;
    w.slice = u / per_slice;
    int um;
    tile_coords(u - w.slice * per_slice, unit_rows, tiles_n, um, w.tn);
    w.tm = um * CLUSTER_M + (int)rank;
    w.b = w.slice / SPLIT_K;
    const int split = w.slice - w.b * SPLIT_K;
    w.kt0 = (int)((long long)split * k_tiles / SPLIT_K);
    w.kt1 = (int)((long long)(split + 1) * k_tiles / SPLIT_K);
    return w;
}

// ---- the kernel ---------------------------------------------------------------------------

#if CLUSTER_M > 1
#define CLUSTER_ATTR __cluster_dims__(CLUSTER_M, 1, 1)
#else
#define CLUSTER_ATTR
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_ATTR
    carver_sm90_gemm(const __grid_constant__ TmaMap tma_a, const __grid_constant__ TmaMap tma_b,
                     u16* __restrict__ c, float* __restrict__ partials, int M, int N, int K,
                     int batch, float alpha) {
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

    // Work is handed out in units of CLUSTER_M vertically adjacent tiles (of one matrix and one
    // K split); CTA `rank` of a cluster takes tile row unit_row * CLUSTER_M + rank (past the
    // last tile row when M runs out: its loads are zero-filled and its stores predicated off,
    // but it still loads its half of B for its peer).
    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int unit_rows = (tiles_m + CLUSTER_M - 1) / CLUSTER_M;
    const int units = unit_rows * tiles_n * SPLIT_K * batch;
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
            // A is read by one tile column when there is one, B by one tile row.
            const bool a_streamed = tiles_n == 1, b_streamed = tiles_m == 1;
            u32 it = 0;
            for (int u = first_unit; u < units; u += unit_stride) {
                const Work w = unit_work(u, unit_rows, tiles_n, k_tiles, rank);
                const int tm = w.tm, tn = w.tn, b = w.b;
                for (int kt = w.kt0; kt < w.kt1; ++kt, ++it) {
                    const u32 s = it % STAGES;
                    // A fresh barrier counts as having completed the phase before its first,
                    // so the first pass over the ring does not wait.
                    mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) & 1) ^ 1);
                    const u32 full = bars + 8 * s;
                    mbar_expect_tx(full, STAGE_BYTES);
                    const u32 sa = base + s * STAGE_BYTES;
                    const u32 sb = sa + A_STAGE_BYTES;
                    tma_load_operand(a_streamed, sa, &tma_a, full, kt * BK, tm * BM, b);
#if CLUSTER_M == 1
#if B_KMAJOR
                    tma_load_operand(b_streamed, sb, &tma_b, full, kt * BK, tn * BN, b);
#else
#pragma unroll
                    for (int j = 0; j < BN / 64; ++j) {
                        tma_load_operand(b_streamed, sb + j * B_BOX_BYTES, &tma_b, full,
                                         tn * BN + j * 64, kt * BK, b);
                    }
#endif
#else
#if B_KMAJOR
                    // The B map's box is BN / CLUSTER_M rows of N: this CTA's share.
                    tma_load_3d_multicast(sb + rank * (BN / CLUSTER_M) * 128, &tma_b, full,
                                          kt * BK, tn * BN + (int)rank * (BN / CLUSTER_M), b,
                                          (u16)((1u << CLUSTER_M) - 1));
#else
#pragma unroll
                    for (int j = 0; j < BN / 64; ++j) {
                        if (j % CLUSTER_M == (int)rank) {
                            tma_load_3d_multicast(sb + j * B_BOX_BYTES, &tma_b, full,
                                                  tn * BN + j * 64, kt * BK, b,
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
        float acc[M_SLABS][WG_COLS / 2];
        u32 it = 0;
        for (int u = first_unit; u < units; u += unit_stride) {
            const Work w = unit_work(u, unit_rows, tiles_n, k_tiles, rank);
            const int tm = w.tm, tn = w.tn;
            const int nk = w.kt1 - w.kt0;
#pragma unroll
            for (int mi = 0; mi < M_SLABS; ++mi) {
#pragma unroll
                for (int i = 0; i < WG_COLS / 2; ++i) acc[mi][i] = 0.0f;
            }
            for (int kt = w.kt0; kt < w.kt1; ++kt, ++it) {
                const u32 s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                wg_fence();
#if SWAP_AB
                // wgmma's B operand is the whole A tile; its A operand this consumer's slabs
                // of B's tile (64 rows of N are 64 x 128 bytes in both of B's layouts).
                const u32 sa = base + s * STAGE_BYTES;
                const u32 sb = sa + A_STAGE_BYTES + consumer * ROWS_PER_CONSUMER * 128;
#pragma unroll
                for (int ks = 0; ks < K_STEPS; ++ks) {
                    const u64 db = desc_kmajor(sa + ks * 32);
#pragma unroll
                    for (int mi = 0; mi < M_SLABS; ++mi) {
#if B_KMAJOR
                        const u64 da = desc_kmajor(sb + mi * 64 * 128 + ks * 32);
#else
                        const u64 da = desc_nmajor(sb + mi * 64 * 128 + ks * 16 * 128);
#endif
                        wgmma_tile(acc[mi], da, db);
                    }
                }
#else
                const u32 sa = base + s * STAGE_BYTES + consumer * ROWS_PER_CONSUMER * 128;
                const u32 sb = base + s * STAGE_BYTES + A_STAGE_BYTES;
#pragma unroll
                for (int ks = 0; ks < K_STEPS; ++ks) {
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
#endif
                wg_commit();
                // The wgmma group of the previous k-tile has finished reading its stage.
                wg_wait<1>();
                if (kt > w.kt0) {
                    __syncwarp();
                    if (lane == 0) release_stage(bars + 8 * (STAGES + (it - 1) % STAGES));
                }
            }
            wg_wait<0>();
#pragma unroll
            for (int mi = 0; mi < M_SLABS; ++mi) {
#pragma unroll
                for (int i = 0; i < WG_COLS / 2; ++i) acc[mi][i] *= alpha;
            }

#if SPLIT_K > 1 || SWAP_AB
            // The tile goes out straight from the registers; the last stage is no longer read.
            if (nk > 0) {
                __syncwarp();
                if (lane == 0) release_stage(bars + 8 * (STAGES + (it - 1) % STAGES));
            }
#endif
#if SWAP_AB
            {
                // Accumulator i of slab mi holds wgmma row (a column n of C) warp*16 + lane/4
                // (+8 when bit 1 of i is set) and wgmma column (a row m of C) (i/4)*8 +
                // (lane%4)*2 + (i%2). The 8 lanes of one (lane%4) write 8 adjacent n.
#if SPLIT_K > 1
                const int ldw = tiles_n * BN;
                float* out = partials + (u64)w.slice * (u64)M * (u64)ldw;
#else
                u16* const out = c + (u64)w.b * (u64)M * (u64)N;
                const int ldw = N;
#endif
#pragma unroll
                for (int mi = 0; mi < M_SLABS; ++mi) {
                    const int n0 = tn * BN + consumer * ROWS_PER_CONSUMER + mi * 64 + warp * 16 +
                                   lane / 4;
#pragma unroll
                    for (int j = 0; j < BM / 8; ++j) {
                        const int m0 = tm * BM + j * 8 + (lane % 4) * 2;
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const int m = m0 + (q & 1);
                            const int n = n0 + 8 * (q >> 1);
                            const float v = acc[mi][4 * j + q];
#if SPLIT_K > 1
                            if (m < M) out[(u64)m * (u64)ldw + n] = v;
#else
                            if (m < M && n < N) out[(u64)m * (u64)ldw + n] = to_out(v);
#endif
                        }
                    }
                }
            }
#elif SPLIT_K > 1
            {
                const int ldw = tiles_n * BN;
                float* out = partials + (u64)w.slice * (u64)M * (u64)ldw;
#pragma unroll
                for (int mi = 0; mi < M_SLABS; ++mi) {
                    // Accumulator layout as in the epilogue below.
                    const int row = tm * BM + consumer * ROWS_PER_CONSUMER + mi * 64 + warp * 16 +
                                    lane / 4;
                    float* r0 = out + (u64)row * (u64)ldw + tn * BN + (lane % 4) * 2;
                    float* r8 = r0 + 8 * (u64)ldw;
#pragma unroll
                    for (int j = 0; j < BN / 8; ++j) {
                        if (row < M) stg_f32x2(r0 + j * 8, acc[mi][4 * j], acc[mi][4 * j + 1]);
                        if (row + 8 < M)
                            stg_f32x2(r8 + j * 8, acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
                    }
                }
            }
#else
            u16* const cb = c + (u64)w.b * (u64)M * (u64)N;
            // Epilogue. The tile's last stage stays held (not released) until it is done: the
            // producer cannot refill it, the other consumer never reads this consumer's A rows,
            // and a cluster peer multicasts only into the B part. Each warp stages its output in
            // its own 16 A rows of that stage. (With no k-tile nothing was ever loaded.)
            const u32 held = nk > 0 ? (it - 1) % STAGES : 0;
            const u32 scratch = base + held * STAGE_BYTES + consumer * ROWS_PER_CONSUMER * 128 +
                                warp * 16 * 128;
            // Every warp's part of the warpgroup's wgmma has read those rows.
            consumer_sync(consumer);
            // Rows of C start on 16-byte boundaries: whole 16-byte stores (else narrower ones).
            const bool wide = (N & 7) == 0 && ((u64)cb & 15) == 0;
            // Row r of the buffer holds 8 chunks of 16 bytes; chunk x sits in slot x ^ (r % 8),
            // so the 8 rows of one stmatrix matrix, and the 4 rows one 16-byte read covers, hit
            // different banks. The buffer is 1 KiB aligned, so the swizzle is an XOR on the
            // address. stmatrix: lane l gives row (l/8 % 2) * 8 + l % 8 of chunk 2 jp + l/16,
            // whose slot is (2 jp) ^ (l/16 ^ l%8).
            const u32 st_addr = scratch + (((lane / 8) & 1) * 8 + (lane & 7)) * 128 +
                                (((lane / 16) ^ (lane & 7)) << 4);
            // Full 64-column chunks are read back in 4 passes of 4 rows: lane l reads chunk l%8
            // of row 4 pass + l/8 (slot: (l%8 ^ l/8) ^ 4 (pass % 2)).
            const u32 ld_addr = scratch + (lane / 8) * 128 + (((lane & 7) ^ (lane / 8)) << 4);
#pragma unroll
            for (int mi = 0; mi < M_SLABS; ++mi) {
                // Accumulator i of an m64 slab holds row warp*16 + lane/4 (+8 when bit 1 of i is
                // set), column (i/4)*8 + (lane%4)*2 + (i%2): the stmatrix fragment layout.
                const int row_base = tm * BM + consumer * ROWS_PER_CONSUMER + mi * 64 + warp * 16;
                if (row_base >= M) continue;
#pragma unroll
                for (int cc = 0; cc < (BN + 63) / 64; ++cc) {
                    // Columns of this chunk (the last may be 16, 32 or 48 wide).
                    const int width = BN - cc * 64 < 64 ? BN - cc * 64 : 64;
                    const int col_base = tn * BN + cc * 64;
                    if (col_base >= N) continue;
#pragma unroll
                    for (int jp = 0; jp < width / 16; ++jp) {
                        const int j = cc * 8 + 2 * jp;
                        stmatrix_x4(st_addr ^ (jp << 5), pack2(acc[mi][4 * j], acc[mi][4 * j + 1]),
                                    pack2(acc[mi][4 * j + 2], acc[mi][4 * j + 3]),
                                    pack2(acc[mi][4 * j + 4], acc[mi][4 * j + 5]),
                                    pack2(acc[mi][4 * j + 6], acc[mi][4 * j + 7]));
                    }
                    __syncwarp();
                    if (wide) {
                        // Read back 16 bytes a lane, 8 lanes along a row; N is a multiple of 8,
                        // so a chunk of 8 starting inside a row lies wholly inside it.
                        const int per_row = width / 8;
#pragma unroll
                        for (int pass = 0; pass < per_row / 2; ++pass) {
                            int r, x;
                            u32 addr;
                            if (per_row == 8) {
                                r = pass * 4 + lane / 8;
                                x = lane & 7;
                                addr = (ld_addr ^ ((pass & 1) << 6)) + pass * 512;
                            } else {
                                const int unit = pass * 32 + lane;
                                r = unit / per_row;
                                x = unit % per_row;
                                addr = scratch + r * 128 + ((x ^ (r & 7)) << 4);
                            }
                            u32 v[4];
                            lds128(addr, v);
                            const int row = row_base + r;
                            const int col = col_base + x * 8;
                            if (row < M && col < N) stg128(c_at(cb, row, N, col), v);
                        }
                    } else {
                        // One row per pass, lane l taking columns 2l and 2l + 1: each store
                        // instruction covers one contiguous run of the row. A pair is one 4-byte
                        // store where its address allows (the same for every lane of a row).
                        for (int r = 0; r < 16 && row_base + r < M; ++r) {
                            const int col = col_base + 2 * lane;
                            if (2 * lane < width && col < N) {
                                const u32 w = lds32(scratch + r * 128 +
                                                    (((lane / 4) ^ (r & 7)) << 4) + (lane & 3) * 4);
                                u16* p = c_at(cb, row_base + r, N, col);
                                if (col + 1 < N && ((u64)p & 3) == 0) {
                                    *reinterpret_cast<u32*>(p) = w;
                                } else {
                                    p[0] = (u16)(w & 0xFFFFu);
                                    if (col + 1 < N) p[1] = (u16)(w >> 16);
                                }
                            }
                        }
                    }
                    // The next chunk overwrites the buffer.
                    __syncwarp();
                }
            }
            if (nk > 0) {
                // The buffer was written through the generic proxy; TMA refills it next.
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                __syncwarp();
                if (lane == 0) release_stage(bars + 8 * (STAGES + held));
            }
#endif
        }
    }
#if CLUSTER_M > 1
    // No CTA leaves while a peer may still multicast into its ring or arrive on its barriers.
    __syncwarp();
    cluster_sync();
#endif
}
