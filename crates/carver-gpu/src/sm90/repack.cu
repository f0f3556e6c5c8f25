// carver cuda-sm90 repack: copies an operand whose rows are not a multiple of 16 bytes (TMA's
// rule for global strides) into a buffer of the same shape whose rows are, so the GEMM's tensor
// maps accept it: `rows` rows of `cols` 16-bit elements, densely packed, become rows `ld`
// elements apart (`ld` = `cols` rounded up to 8 elements).
//
// Each thread writes one 16-byte chunk of a destination row with one vector store. The chunk's
// 8 source elements start at any 2-byte boundary, so the thread loads the two aligned 16-byte
// source vectors they straddle (its neighbour loads the same ones: the second load hits L1)
// and funnels out the 8 it needs with a shift fixed per row, one specialisation per shift so
// that every register index is constant (no local memory). Elements a row's last chunk holds
// past `cols` are padding the GEMM never reads (its tensor maps keep the true extent); they get
// what follows in the source (or zeros), so that a kernel wrongly reading them gets wrong results.
//
// The host launches blocks of 256 threads as (chunks of a row) x (rows) and the grid covers the
// rows with a stride loop. Compiled at run time with NVRTC; no headers.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

// One aligned 16-byte source vector `v` (elements 8v .. 8v+7) as four words; only the elements
// below `total` exist, the rest read as zero (the last vector of a buffer whose size is not a
// multiple of 16 bytes).
__device__ __forceinline__ void load_vector(const u16* __restrict__ src, u64 v, u64 total,
                                            u32 (&w)[4]) {
    if (8 * v + 8 <= total) {
        const uint4 x = __ldg(reinterpret_cast<const uint4*>(src) + v);
        w[0] = x.x;
        w[1] = x.y;
        w[2] = x.z;
        w[3] = x.w;
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const u64 e = 8 * v + 2 * i;
        const u32 lo = e < total ? (u32)__ldg(src + e) : 0u;
        const u32 hi = e + 1 < total ? (u32)__ldg(src + e + 1) : 0u;
        w[i] = lo | (hi << 16);
    }
}

// Elements S .. S+7 of the 16 in lo:hi, as one 16-byte vector.
template <int S>
__device__ __forceinline__ uint4 take(const u32 (&lo)[4], const u32 (&hi)[4]) {
    u32 w[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
    u32 o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = S + 2 * i;
        // An odd start takes the upper half of one word and the lower half of the next.
        o[i] = (e % 2 == 0) ? w[e / 2] : __byte_perm(w[e / 2], w[e / 2 + 1], 0x5432);
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

extern "C" __global__ void __launch_bounds__(256)
    carver_sm90_repack(const u16* __restrict__ src, uint4* __restrict__ dst, u64 rows, u64 cols,
                       u64 ld) {
    const u64 chunks = ld / 8;
    const u64 total = rows * cols;
    const u64 j = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (j >= chunks) {
        return;
    }
    for (u64 r = blockIdx.y * (u64)blockDim.y + threadIdx.y; r < rows;
         r += (u64)gridDim.y * blockDim.y) {
        const u64 first = r * cols + 8 * j;
        const u64 v = first / 8;
        const int shift = (int)(first % 8);
        u32 lo[4], hi[4] = {0u, 0u, 0u, 0u};
        load_vector(src, v, total, lo);
        // The second vector only when the chunk reaches into it and the row does too.
        if (shift != 0 && 8 * (v + 1) < r * cols + cols) {
            load_vector(src, v + 1, total, hi);
        }
        uint4 out;
        switch (shift) {
            case 0: out = take<0>(lo, hi); break;
            case 1: out = take<1>(lo, hi); break;
            case 2: out = take<2>(lo, hi); break;
            case 3: out = take<3>(lo, hi); break;
            case 4: out = take<4>(lo, hi); break;
            case 5: out = take<5>(lo, hi); break;
            case 6: out = take<6>(lo, hi); break;
            default: out = take<7>(lo, hi); break;
        }
        dst[r * chunks + j] = out;
    }
}
