//! carver's own Hopper GEMM family: TMA loads into a ring of `stages` shared-memory buffers
//! guarded by mbarriers, one producer warpgroup, `consumers` wgmma warpgroups
//! (m64nNk16), grouped or persistent tile order, optionally split along K (`split_k` blocks per
//! tile write fp32 partials that a second kernel sums in a fixed order, so results are
//! deterministic), over a batch of equally shaped matmuls. Inputs are bf16 or f16
//! (m64nNk16), or fp8 e4m3 / e5m2 (m64nNk32) with a per-tensor scale: C = alpha * A B.
//! A small-M path swaps A and B in the wgmma (`swap_ab`): its 64-row slabs run along N and
//! block M, as few as 8 rows, is its N, so a decode tile does no tensor work past M.
//! wgmma reads 8-bit operands only K-major, so fp8 needs B stored N x K (`Layout::Col`).
//!
//! This module is the single definition of the family's space and legality: the kernel
//! generator in `carver-gpu` instantiates exactly the [`Sm90Params`] this module accepts.
//! The kernel loads row-major B in 64-column boxes, so for row-major B block N is a multiple
//! of 64; the space below leaves the other points out.
//!
//! TMA needs every row of A and B to start a multiple of 16 bytes after the previous one. An
//! operand whose rows do not is first copied into a buffer of the same shape with rows padded
//! to 16 bytes ([`tma_leading_dim`]); the kernel then reads that copy, its tensor map keeping
//! the true extent, so the padding is never read. The copies are part of the family's time
//! ([`FamilyRules::repack`]).

use std::ops::RangeInclusive;

use carver_arch::{Arch, InstructionFamily};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{
    ConfigError, Family, FamilyRules, LoadPath, LoadPaths, ProblemRejected, Repack, Resources,
    SplitKReduction, WarpLayout, native_object,
};
use crate::dtype::{DType, Layout};
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

pub struct Sm90Rules;

/// Threads of one warpgroup: the producer is one, and so is each consumer.
pub const WARPGROUP_THREADS: u32 = 128;
/// Rows of one `wgmma` (m64nNk16): each consumer's rows come in slabs of this many.
pub const WGMMA_ROWS: u32 = 64;
/// The finest `wgmma` N step (n8): with A and B swapped, block M is a multiple of it.
pub const WGMMA_N_MIN: u32 = 8;
/// Block M on the swapped path (block M is wgmma's N) is a multiple of this (beside 8), so that
/// a tile can fit a mid M (80, 96, 160 rows, ...) without computing rows past it.
const SWAPPED_BLOCK_M_STEP: u32 = 16;
/// The small tiles the swapped path always offers (decode and small M).
const SWAPPED_SMALL_BLOCK_MS: [u32; 4] = [8, 16, 32, 48];
/// The swapped path also offers the tiles that split M into this many or fewer equal rows of
/// tiles (rounded up to the step): each wastes less than one step of rows.
const SWAPPED_FITTED_TILE_ROWS: u64 = 4;
/// The `wgmma` N step: block N is a multiple of it.
pub const WGMMA_N_STEP: u32 = 16;
/// Largest block M: at most four 64-row slabs per block.
pub const MAX_BLOCK_M: u32 = 256;
/// Largest block N: the widest `wgmma` (n256).
pub const MAX_BLOCK_N: u32 = 256;
/// Consumer warpgroups per block.
pub const CONSUMERS: RangeInclusive<u32> = 1..=2;
/// Depths of the shared-memory ring. Small tiles stream with deep rings (cuBLAS's small-M
/// kernels on the H200 run 12 to 16 stages: `benches/sm90/cublas_kernels.py`).
pub const STAGES: RangeInclusive<u32> = 2..=16;
/// SM cycles starting one more block costs this kernel beyond its tiles' work: its set-up
/// (barrier initialisation, the tensor maps' first fetch, the block-wide sync) and its exit.
/// Measured on the H200 (`benches/sm90/block_start.py`, 2026-11-29): three tiles, each on grids
/// of 1-8 waves of one block per SM and 1-16 main-loop iterations; a wave of launched blocks
/// took 1.01, 1.08 and 1.61 us more than a wave of tiles of a persistent grid, of which the
/// model without this term priced 0.19-0.22 us (its first stage's latency). The rest, 0.82,
/// 0.89 and 1.39 us, is 1,500 to 2,540 cycles at the 1,830 MHz the model counts in; 1,600 is
/// about the median (0.89 us, 1,630 cycles) (docs/RESULTS.md, "A block's start").
const BLOCK_START_CYCLES: f64 = 1_600.0;
/// CTAs per cluster along M (2: the pair shares B through TMA multicast).
pub const CLUSTER_M: RangeInclusive<u32> = 1..=2;
/// Blocks sharing one output tile's K loop (1: no split).
pub const SPLIT_K: RangeInclusive<u32> = 1..=16;
/// Bytes of one block-K row in the 128-byte swizzle TMA uses: block K x element size.
pub const SWIZZLE_BYTES: u32 = 128;
/// Columns of one TMA box of row-major B (N contiguous): 128 bytes, the swizzle span, of 16-bit
/// elements. With row-major B, block N is a multiple of it.
pub const ROW_MAJOR_B_BOX_COLUMNS: u32 = 64;
/// Registers a consumer thread may hold after `setmaxnreg.inc` (kernel.cu).
pub const CONSUMER_REGISTER_CAP: u32 = 232;
/// Registers counted beside the accumulators: what a consumer thread needs for descriptors,
/// addresses and loop state, and what the producer warpgroup keeps after `setmaxnreg.dec`.
pub const REGISTER_RESERVE: u32 = 40;
/// Most fp32 accumulators one consumer thread can hold under the cap.
pub const MAX_ACCUMULATORS: u32 = CONSUMER_REGISTER_CAP - REGISTER_RESERVE;
/// Most fp32 accumulators per consumer thread with A and B swapped when each consumer owns
/// more than one 64-row slab of N: `[one consumer, two consumers]`, each `(without split-K,
/// with it)`. The swapped epilogue stores values one at a time, each with its own address, and
/// ptxas spills sooner than the accumulator budget alone says. Compiled with NVRTC 13.0 for
/// sm_90a, all 280 swapped tiles of block M 16-256, block N 64-256, one or two consumers, with
/// and without a split of 2, both B layouts (2026-11-25): every tile within these compiled
/// without spilling; one past them spilled for some block N (one consumer: 160 without a
/// split, 128 with; two: 144 and 112). Tiles of one slab per consumer never spilled.
pub const MAX_SWAPPED_MULTI_SLAB_ACCUMULATORS: [(u32, u32); 2] = [(144, 112), (128, 96)];
/// Shared memory beside the ring: two 8-byte mbarriers (full, empty) per stage, padded to the
/// 1 KiB alignment the 128-byte swizzle needs for the ring.
pub const BARRIER_BYTES: u64 = 1024;
/// TMA's rule for a tensor map's global strides: a multiple of 16 bytes.
pub const TMA_STRIDE_BYTES: u64 = 16;

/// The cluster shapes (m, n) of the space: every size of [`CLUSTER_M`], none along N.
const CLUSTER_SHAPES: [(u32, u32); 2] = [(*CLUSTER_M.start(), 1), (*CLUSTER_M.end(), 1)];

/// Block N must be a multiple of this: the `wgmma` step, or the TMA box of row-major B.
fn block_n_step(layout_b: Layout) -> u32 {
    match layout_b {
        Layout::Row => ROW_MAJOR_B_BOX_COLUMNS,
        Layout::Col => WGMMA_N_STEP,
    }
}

/// Block M sizes the swapped path offers for `m` rows besides the multiples of 64 (which serve
/// both layouts): the small tiles, and those that split `m` into 1 to
/// [`SWAPPED_FITTED_TILE_ROWS`] equal tile rows.
fn swapped_block_ms(m: u64) -> Vec<u32> {
    let step = u64::from(SWAPPED_BLOCK_M_STEP);
    let fitted = (1..=SWAPPED_FITTED_TILE_ROWS).filter_map(|rows| {
        let block = m.div_ceil(rows).div_ceil(step) * step;
        u32::try_from(block)
            .ok()
            .filter(|&b| b <= MAX_BLOCK_N && b > *SWAPPED_SMALL_BLOCK_MS.last().unwrap_or(&0))
    });
    SWAPPED_SMALL_BLOCK_MS.into_iter().chain(fitted).collect()
}

/// Leading dimension, in elements, the kernel reads an operand with whose rows hold `cols`
/// contiguous elements of `elem_bytes` bytes: `cols` when those rows are a multiple of 16 bytes
/// (the operand is read in place), else `cols` rounded up to one (the operand's padded copy).
pub fn tma_leading_dim(cols: u64, elem_bytes: u32) -> u64 {
    let per_16_bytes = (TMA_STRIDE_BYTES / u64::from(elem_bytes.max(1))).max(1);
    cols.div_ceil(per_16_bytes) * per_16_bytes
}

/// A rule of the `cuda-sm90` family that a configuration breaks: the recommender and the kernel
/// generator (`carver-gpu`) reject with the same value.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum Sm90Violation {
    #[error("inputs are {0}; accepted: bf16, f16, e4m3, e5m2")]
    Input(DType),

    #[error("A is {a} and B is {b}; accepted: the same type for both")]
    MixedInputs { a: DType, b: DType },

    #[error(
        "{0} inputs with B stored K x N; wgmma reads 8-bit operands only K-major: store B as N x K (layout `rc`)"
    )]
    Fp8RowMajorB(DType),

    #[error(
        "{input} rows must start 16 bytes apart: K = {k} is not a multiple of 16; accepted: K a multiple of 16"
    )]
    Fp8UnalignedRows { input: DType, k: u64 },

    #[error("the output is {0}; accepted: bf16, f16")]
    Output(DType),

    #[error(
        "{consumers} consumer warpgroups; accepted: {} to {}",
        CONSUMERS.start(),
        CONSUMERS.end()
    )]
    Consumers { consumers: u32 },

    #[error(
        "block_m = {block_m} with {consumers} consumer warpgroups; accepted: a multiple of {WGMMA_ROWS} x consumers, at most {MAX_BLOCK_M}"
    )]
    BlockM { block_m: u32, consumers: u32 },

    #[error("block_n = {block_n}; accepted: multiples of {WGMMA_N_STEP} up to {MAX_BLOCK_N}")]
    BlockN { block_n: u32 },

    #[error(
        "block_m = {block_m} with A and B swapped (block M is wgmma's N); accepted: a multiple of {WGMMA_N_MIN} up to {MAX_BLOCK_N}"
    )]
    SwappedBlockM { block_m: u32 },

    #[error(
        "block_n = {block_n} with A and B swapped and {consumers} consumer warpgroups (block N is wgmma's rows); accepted: a multiple of {WGMMA_ROWS} x consumers, at most {MAX_BLOCK_M}"
    )]
    SwappedBlockN { block_n: u32, consumers: u32 },

    #[error(
        "block_n = {block_n}; row-major B is loaded in {ROW_MAJOR_B_BOX_COLUMNS}-column boxes, so block_n must be a multiple of {ROW_MAJOR_B_BOX_COLUMNS}"
    )]
    RowMajorBlockN { block_n: u32 },

    #[error(
        "block_k = {block_k}; the {SWIZZLE_BYTES}-byte swizzle needs block_k x element size = {SWIZZLE_BYTES} bytes (block_k = {} for {elem_bytes}-byte elements)",
        SWIZZLE_BYTES / (*elem_bytes).max(1)
    )]
    BlockK { block_k: u32, elem_bytes: u32 },

    #[error("stages = {stages}; accepted: {} to {}", STAGES.start(), STAGES.end())]
    Stages { stages: u32 },

    #[error("group_m = 0; accepted: at least 1")]
    GroupM,

    #[error(
        "split_k = {split_k}; accepted: {} to {}",
        SPLIT_K.start(),
        SPLIT_K.end()
    )]
    SplitK { split_k: u32 },

    #[error(
        "split_k = {split_k} leaves some splits without K blocks; accepted: 1 to {k_tiles} (the K blocks of {block_k})"
    )]
    SplitBeyondK {
        split_k: u32,
        k_tiles: u64,
        block_k: u32,
    },

    #[error(
        "cluster_m = {cluster_m}; accepted: clusters of {} to {} CTAs along M",
        CLUSTER_M.start(),
        CLUSTER_M.end()
    )]
    ClusterM { cluster_m: u32 },

    #[error(
        "each consumer thread would hold {accumulators} fp32 accumulators; at most {MAX_ACCUMULATORS} fit under the {CONSUMER_REGISTER_CAP}-register cap"
    )]
    Accumulators { accumulators: u32 },

    #[error(
        "with A and B swapped and several 64-row slabs per consumer, each consumer thread would hold {accumulators} fp32 accumulators; at most {limit} compile without spilling registers for this consumer count and split (the swapped epilogue stores its values one at a time)"
    )]
    SwappedAccumulators { accumulators: u32, limit: u32 },

    /// A tile the family's parameters cannot express: other warp arrangements, clusters along N.
    #[error(
        "cuda-sm90 runs one producer warpgroup and 64-row wgmma consumer warpgroups, without clusters along N"
    )]
    NotExpressible,
}

/// The family's native parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sm90Params {
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    pub stages: u32,
    /// Consumer warpgroups; each owns `block_m / consumers` rows.
    pub consumers: u32,
    /// Launch-order group size (tile rows per group).
    pub group_m: u32,
    /// CTAs per cluster along M (2 = the pair shares B through TMA multicast).
    pub cluster_m: u32,
    pub persistent: bool,
    /// Blocks sharing each tile's K loop; their fp32 partials are summed by a second kernel.
    /// (Absent from configurations written before split-K existed: 1.)
    #[serde(default = "no_split")]
    pub split_k: u32,
    /// The small-M path: wgmma's rows run along N (B's tile is its A operand, A's its B
    /// operand), block M is its N and the consumers share block N. (Absent when false, and from
    /// configurations written before it existed.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swap_ab: bool,
}

fn no_split() -> u32 {
    1
}

/// The generic tile's `(warps_m, warps_n)` for `consumers` warpgroups: each warpgroup's four
/// warps split 64 wgmma rows, which run along M, or along N when A and B are swapped.
fn warp_grid(consumers: u32, swap_ab: bool) -> (u32, u32) {
    // Saturating: a parsed (untrusted) config may name any count.
    let warps = consumers.saturating_mul(4);
    if swap_ab { (1, warps) } else { (warps, 1) }
}

/// [`warp_grid`] read back: `(warps along the wgmma rows, warps across them)` of a generic tile.
fn warps_along_rows(c: &TileConfig) -> (u32, u32) {
    if c.swap_ab {
        (c.warps_n, c.warps_m)
    } else {
        (c.warps_m, c.warps_n)
    }
}

impl Sm90Params {
    pub fn from_tile(c: &TileConfig) -> Self {
        Self {
            block_m: c.block_m,
            block_n: c.block_n,
            block_k: c.block_k,
            stages: c.stages,
            consumers: warps_along_rows(c).0 / 4,
            group_m: c.raster.group,
            cluster_m: c.cluster_m,
            persistent: c.persistent,
            split_k: c.split_k,
            swap_ab: c.swap_ab,
        }
    }

    pub fn to_tile(self) -> TileConfig {
        let (warps_m, warps_n) = warp_grid(self.consumers, self.swap_ab);
        TileConfig {
            block_m: self.block_m,
            block_n: self.block_n,
            block_k: self.block_k,
            warps_m,
            warps_n,
            producer_warps: 4,
            stages: self.stages,
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group: self.group_m,
            },
            split_k: self.split_k,
            cluster_m: self.cluster_m,
            cluster_n: 1,
            persistent: self.persistent,
            mma: InstructionFamily::Wgmma,
            swap_ab: self.swap_ab,
        }
    }

    /// wgmma's (rows, columns) of the tile: (block M, block N), or (block N, block M) with A
    /// and B swapped.
    pub fn wgmma_extent(self) -> (u32, u32) {
        if self.swap_ab {
            (self.block_n, self.block_m)
        } else {
            (self.block_m, self.block_n)
        }
    }

    /// wgmma rows of the tile each consumer warpgroup computes (in 64-row slabs).
    pub fn rows_per_consumer(self) -> u32 {
        self.wgmma_extent().0 / self.consumers.max(1)
    }

    /// fp32 accumulators each consumer thread holds: its rows x wgmma's columns over the
    /// warpgroup.
    pub fn accumulators_per_thread(self) -> u32 {
        let elements = u64::from(self.rows_per_consumer()) * u64::from(self.wgmma_extent().1);
        u32::try_from(elements / u64::from(WARPGROUP_THREADS)).unwrap_or(u32::MAX)
    }

    /// Registers per thread the recommender counts: the accumulators and the reserve.
    pub fn registers_per_thread(self) -> u32 {
        self.accumulators_per_thread()
            .saturating_add(REGISTER_RESERVE)
    }

    /// Threads per block: one producer warpgroup and the consumers.
    pub fn threads(self) -> u32 {
        WARPGROUP_THREADS.saturating_mul(self.consumers.saturating_add(1))
    }

    /// Dynamic shared memory of a block: the ring of `stages` A and B tiles of `elem_bytes`
    /// elements, and the mbarriers.
    pub fn dynamic_smem_bytes(self, elem_bytes: u32) -> u64 {
        let ring = u64::from(self.stages)
            * (u64::from(self.block_m) + u64::from(self.block_n))
            * u64::from(self.block_k)
            * u64::from(elem_bytes);
        ring + BARRIER_BYTES
    }

    /// Whether A, B (`input`) and C (`output`) have element types the kernel handles.
    pub fn check_element_types(input: DType, output: DType) -> Result<(), Sm90Violation> {
        let is_16_bit_float = |t: DType| matches!(t, DType::Bf16 | DType::F16);
        if !is_16_bit_float(input) && !input.is_fp8() {
            return Err(Sm90Violation::Input(input));
        }
        if !is_16_bit_float(output) {
            return Err(Sm90Violation::Output(output));
        }
        Ok(())
    }

    /// The element-type rules that also involve B's layout: 8-bit operands are read K-major.
    pub fn check_operands(
        input: DType,
        output: DType,
        layout_b: Layout,
    ) -> Result<(), Sm90Violation> {
        Self::check_element_types(input, output)?;
        if input.is_fp8() && layout_b == Layout::Row {
            return Err(Sm90Violation::Fp8RowMajorB(input));
        }
        Ok(())
    }

    /// Every rule of the family: whether the kernel can be instantiated with these parameters
    /// for inputs of type `input`, an output of type `output` and B stored `layout_b` (A and C
    /// are row-major). The one definition both the recommender and the kernel generator use;
    /// the GPU's own limits (shared memory per block) are checked apart.
    pub fn check(self, input: DType, output: DType, layout_b: Layout) -> Result<(), Sm90Violation> {
        Self::check_operands(input, output, layout_b)?;
        if !CONSUMERS.contains(&self.consumers) {
            return Err(Sm90Violation::Consumers {
                consumers: self.consumers,
            });
        }
        let slab = WGMMA_ROWS * self.consumers;
        if self.swap_ab {
            self.check_swapped_blocks(slab)?;
        } else {
            if self.block_m == 0 || self.block_m % slab != 0 || self.block_m > MAX_BLOCK_M {
                return Err(Sm90Violation::BlockM {
                    block_m: self.block_m,
                    consumers: self.consumers,
                });
            }
            if self.block_n == 0 || self.block_n % WGMMA_N_STEP != 0 || self.block_n > MAX_BLOCK_N {
                return Err(Sm90Violation::BlockN {
                    block_n: self.block_n,
                });
            }
        }
        if self.block_n % block_n_step(layout_b) != 0 {
            return Err(Sm90Violation::RowMajorBlockN {
                block_n: self.block_n,
            });
        }
        let elem_bytes = input.bytes();
        if u64::from(self.block_k) * u64::from(elem_bytes) != u64::from(SWIZZLE_BYTES) {
            return Err(Sm90Violation::BlockK {
                block_k: self.block_k,
                elem_bytes,
            });
        }
        if !STAGES.contains(&self.stages) {
            return Err(Sm90Violation::Stages {
                stages: self.stages,
            });
        }
        if self.group_m == 0 {
            return Err(Sm90Violation::GroupM);
        }
        if !CLUSTER_M.contains(&self.cluster_m) {
            return Err(Sm90Violation::ClusterM {
                cluster_m: self.cluster_m,
            });
        }
        if !SPLIT_K.contains(&self.split_k) {
            return Err(Sm90Violation::SplitK {
                split_k: self.split_k,
            });
        }
        let accumulators = self.accumulators_per_thread();
        if accumulators > MAX_ACCUMULATORS {
            return Err(Sm90Violation::Accumulators { accumulators });
        }
        if let Some(limit) = self.swapped_accumulator_limit()
            && accumulators > limit
        {
            return Err(Sm90Violation::SwappedAccumulators {
                accumulators,
                limit,
            });
        }
        Ok(())
    }

    /// The swapped path's own accumulator budget ([`MAX_SWAPPED_MULTI_SLAB_ACCUMULATORS`]), when
    /// it has one: A and B swapped and more than one 64-row slab of N per consumer.
    fn swapped_accumulator_limit(self) -> Option<u32> {
        let slabs = self.rows_per_consumer() / WGMMA_ROWS;
        if !self.swap_ab || slabs <= 1 {
            return None;
        }
        let (plain, split) = MAX_SWAPPED_MULTI_SLAB_ACCUMULATORS[usize::from(self.consumers > 1)];
        Some(if self.split_k > 1 { split } else { plain })
    }

    /// The block rules of the small-M path, where block N holds wgmma's 64-row slabs (`slab`
    /// rows per consumer pass) and block M is wgmma's N.
    fn check_swapped_blocks(self, slab: u32) -> Result<(), Sm90Violation> {
        if self.block_m == 0 || self.block_m % WGMMA_N_MIN != 0 || self.block_m > MAX_BLOCK_N {
            return Err(Sm90Violation::SwappedBlockM {
                block_m: self.block_m,
            });
        }
        if self.block_n == 0 || self.block_n % slab != 0 || self.block_n > MAX_BLOCK_M {
            return Err(Sm90Violation::SwappedBlockN {
                block_n: self.block_n,
                consumers: self.consumers,
            });
        }
        Ok(())
    }

    /// Whether every split has K blocks to work on for a K of `k` (a split without any would
    /// only write zeros).
    pub fn check_k(self, k: u64) -> Result<(), Sm90Violation> {
        let k_tiles = k.div_ceil(u64::from(self.block_k.max(1)));
        if u64::from(self.split_k) > k_tiles.max(1) {
            return Err(Sm90Violation::SplitBeyondK {
                split_k: self.split_k,
                k_tiles,
                block_k: self.block_k,
            });
        }
        Ok(())
    }

    /// Whether the operands' rows can be read: rows that are not 16 bytes apart are copied into
    /// padded rows first, a copy of 16-bit elements only, so 8-bit rows must be aligned
    /// (`rows_aligned`: A's and B's rows both start 16 bytes apart; K is their length).
    pub fn check_rows(input: DType, k: u64, rows_aligned: bool) -> Result<(), Sm90Violation> {
        if input.is_fp8() && !rows_aligned {
            return Err(Sm90Violation::Fp8UnalignedRows { input, k });
        }
        Ok(())
    }

    /// Bytes of the fp32 workspace split-K needs for `batch` M x N products: one slice of M
    /// rows per split, each row padded to whole tiles. None without a split.
    pub fn workspace_bytes(self, m: u64, n: u64, batch: u64) -> u64 {
        if self.split_k <= 1 {
            return 0;
        }
        batch * u64::from(self.split_k) * m * self.workspace_ld(n) * 4
    }

    /// Row length, in fp32 elements, of the split-K workspace: N rounded up to whole tiles, so
    /// that every block stores its full tile width.
    pub fn workspace_ld(self, n: u64) -> u64 {
        n.div_ceil(u64::from(self.block_n.max(1))) * u64::from(self.block_n)
    }
}

impl FamilyRules for Sm90Rules {
    fn id(&self) -> Family {
        Family::CudaSm90
    }

    fn check_problem(&self, p: &Problem, arch: &Arch) -> Result<(), ProblemRejected> {
        let fail = |reason: String| {
            Err(ProblemRejected {
                family: Family::CudaSm90,
                reason,
            })
        };
        if !arch
            .instructions_for(p.class)
            .any(|i| i.family == InstructionFamily::Wgmma)
        {
            return fail(format!(
                "it needs wgmma (compute capability 9.0); {} is {}",
                arch.gpu.key, arch.gpu.compute_capability
            ));
        }
        if p.a != p.b {
            return fail(Sm90Violation::MixedInputs { a: p.a, b: p.b }.to_string());
        }
        if let Err(violation) = Sm90Params::check_operands(p.a, p.c, p.layout_b) {
            return fail(violation.to_string());
        }
        if let Err(violation) = Sm90Params::check_rows(p.a, p.k, p.aligned_a && p.aligned_b) {
            return fail(violation.to_string());
        }
        if p.acc != DType::F32 {
            return fail(format!("accumulation is {}; accepted: f32", p.acc));
        }
        if p.layout_a != Layout::Row {
            return fail("A must be row-major".into());
        }
        // A or B rows that are not 16-byte aligned are copied into aligned buffers (`repack`).
        Ok(())
    }

    /// One copy per operand whose rows are not 16-byte aligned: it reads the operand's
    /// elements and writes them into rows padded to 16 bytes.
    fn repack(&self, p: &Problem) -> Repack {
        let e = p.in_bytes();
        // Each operand as stored: rows of contiguous elements (A is row-major).
        let a = (p.m, p.k);
        let b = match p.layout_b {
            Layout::Row => (p.k, p.n),
            Layout::Col => (p.n, p.k),
        };
        let mut r = Repack::default();
        for ((rows, cols), aligned) in [(a, p.aligned_a), (b, p.aligned_b)] {
            if !aligned {
                r.kernels += 1;
                r.bytes += p.batch as f64
                    * rows as f64
                    * (cols + tma_leading_dim(cols, e)) as f64
                    * f64::from(e);
            }
        }
        r
    }

    fn block_sizes(&self, p: &Problem, _arch: &Arch) -> [Vec<u32>; 3] {
        [
            swapped_block_ms(p.m)
                .into_iter()
                .chain((1..=MAX_BLOCK_M / WGMMA_ROWS).map(|slabs| slabs * WGMMA_ROWS))
                .collect::<std::collections::BTreeSet<u32>>()
                .into_iter()
                .collect(),
            (1..=MAX_BLOCK_N / WGMMA_N_STEP)
                .map(|i| i * WGMMA_N_STEP)
                .filter(|&n| n % block_n_step(p.layout_b) == 0)
                .collect(),
            vec![SWIZZLE_BYTES / p.in_bytes().max(1)],
        ]
    }

    /// Consumers along M (wgmma slabs of block M), and the swapped path (A and B swapped in the
    /// wgmma, the consumers along N) for every block M that is a wgmma N.
    fn warp_layouts(
        &self,
        block_m: u32,
        block_n: u32,
        _p: &Problem,
        _arch: &Arch,
    ) -> Vec<WarpLayout> {
        let layout = |consumers: u32, swap_ab: bool| {
            let (warps_m, warps_n) = warp_grid(consumers, swap_ab);
            WarpLayout {
                warps_m,
                warps_n,
                producer_warps: 4,
                mma: InstructionFamily::Wgmma,
                swap_ab,
            }
        };
        let along_m = CONSUMERS
            .filter(|&c| block_m % (WGMMA_ROWS * c) == 0)
            .map(|c| layout(c, false));
        let swapped = CONSUMERS
            .filter(|&c| {
                block_m <= MAX_BLOCK_N
                    && block_m % WGMMA_N_MIN == 0
                    && block_n % (WGMMA_ROWS * c) == 0
            })
            .map(|c| layout(c, true));
        along_m.chain(swapped).collect()
    }

    fn stage_range(&self) -> (u32, u32) {
        (*STAGES.start(), *STAGES.end())
    }

    fn groups(&self) -> &'static [u32] {
        &[1, 8, 16]
    }

    fn split_ks(&self) -> &'static [u32] {
        &super::SPLIT_K_FACTORS
    }

    fn clusters(&self) -> &'static [(u32, u32)] {
        &CLUSTER_SHAPES
    }

    fn persistence(&self) -> &'static [bool] {
        &[false, true]
    }

    fn load_paths(&self, _problem: &Problem, _arch: &Arch) -> LoadPaths {
        LoadPaths::both(LoadPath::Tma)
    }

    fn split_k_reduction(&self) -> SplitKReduction {
        SplitKReduction::SeparateReduce
    }

    fn block_start_cycles(&self) -> f64 {
        BLOCK_START_CYCLES
    }

    fn resources(&self, c: &TileConfig, p: &Problem) -> Resources {
        let params = Sm90Params::from_tile(c);
        Resources {
            smem_bytes: params.dynamic_smem_bytes(p.in_bytes()),
            registers_per_thread: params.registers_per_thread(),
        }
    }

    fn check_rules(&self, c: &TileConfig, p: &Problem, _arch: &Arch) -> Result<(), ConfigError> {
        // What Sm90Params cannot express would be lost by `from_tile`: reject it first.
        let (along, across) = warps_along_rows(c);
        let expressible = c.mma == InstructionFamily::Wgmma
            && across == 1
            && c.producer_warps == 4
            && along % 4 == 0
            && c.cluster_n == 1;
        if !expressible {
            return Err(Sm90Violation::NotExpressible.into());
        }
        let params = Sm90Params::from_tile(c);
        params.check(p.a, p.c, p.layout_b)?;
        params.check_k(p.k)?;
        Ok(())
    }

    /// [`Sm90Params`] as serde writes them (test `native_config_is_the_serialized_params`).
    fn native(&self, c: &TileConfig) -> serde_json::Value {
        let p = Sm90Params::from_tile(c);
        let fields = native_object([
            ("block_k", p.block_k.into()),
            ("block_m", p.block_m.into()),
            ("block_n", p.block_n.into()),
            ("cluster_m", p.cluster_m.into()),
            ("consumers", p.consumers.into()),
            ("group_m", p.group_m.into()),
            ("persistent", p.persistent.into()),
            ("split_k", p.split_k.into()),
            ("stages", p.stages.into()),
        ]);
        match (fields, p.swap_ab) {
            (serde_json::Value::Object(mut map), true) => {
                map.insert("swap_ab".to_owned(), true.into());
                serde_json::Value::Object(map)
            }
            (fields, _) => fields,
        }
    }

    fn parse_native(
        &self,
        v: &serde_json::Value,
        _p: &Problem,
        _arch: &Arch,
    ) -> Result<TileConfig, ConfigError> {
        let params: Sm90Params =
            serde_json::from_value(v.clone()).map_err(|e| ConfigError::NativeFormat {
                family: Family::CudaSm90,
                reason: e.to_string(),
            })?;
        Ok(params.to_tile())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::MatmulTemplate;
    use carver_arch::HardwareDb;

    fn problem(m: u64, n: u64, k: u64, layout_b: Layout) -> Problem {
        let db = HardwareDb::embedded().unwrap();
        MatmulTemplate::new(m, n, k)
            .with_dtype(DType::Bf16)
            .with_layouts(Layout::Row, layout_b)
            .with_family(Family::CudaSm90)
            .validate(db.get("h100").unwrap())
            .unwrap()
    }

    #[test]
    fn every_point_of_the_space_follows_the_shape_rules() {
        let arch = HardwareDb::embedded().unwrap().get("h100").unwrap().clone();
        for layout_b in [Layout::Row, Layout::Col] {
            let p = problem(4096, 4096, 4096, layout_b);
            let space: Vec<Sm90Params> = crate::family::space(&Sm90Rules, &p, &arch)
                .iter()
                .map(Sm90Params::from_tile)
                .collect();
            assert!(!space.is_empty());
            for params in space {
                // Only the accumulator budgets may reject a point of the space.
                match params.check(p.a, p.c, p.layout_b) {
                    Ok(())
                    | Err(Sm90Violation::Accumulators { .. })
                    | Err(Sm90Violation::SwappedAccumulators { .. }) => {}
                    Err(v) => panic!("{params:?}: {v}"),
                }
            }
        }
    }

    #[test]
    fn check_names_each_broken_rule() {
        let ok = Sm90Params {
            block_m: 128,
            block_n: 256,
            block_k: 64,
            stages: 4,
            consumers: 2,
            group_m: 8,
            cluster_m: 2,
            persistent: true,
            split_k: 1,
            swap_ab: false,
        };
        let check = |p: Sm90Params| p.check(DType::Bf16, DType::Bf16, Layout::Row);
        assert_eq!(check(ok), Ok(()));
        assert_eq!(
            ok.check(DType::F32, DType::Bf16, Layout::Row),
            Err(Sm90Violation::Input(DType::F32))
        );
        assert_eq!(
            ok.check(DType::F16, DType::F32, Layout::Row),
            Err(Sm90Violation::Output(DType::F32))
        );
        let cases = [
            (
                Sm90Params { consumers: 3, ..ok },
                Sm90Violation::Consumers { consumers: 3 },
            ),
            (
                Sm90Params { block_m: 320, ..ok },
                Sm90Violation::BlockM {
                    block_m: 320,
                    consumers: 2,
                },
            ),
            (
                Sm90Params { block_m: 0, ..ok },
                Sm90Violation::BlockM {
                    block_m: 0,
                    consumers: 2,
                },
            ),
            (
                Sm90Params { block_n: 272, ..ok },
                Sm90Violation::BlockN { block_n: 272 },
            ),
            (
                Sm90Params { block_n: 144, ..ok },
                Sm90Violation::RowMajorBlockN { block_n: 144 },
            ),
            (
                Sm90Params { block_k: 32, ..ok },
                Sm90Violation::BlockK {
                    block_k: 32,
                    elem_bytes: 2,
                },
            ),
            (
                Sm90Params {
                    block_k: u32::MAX,
                    ..ok
                },
                Sm90Violation::BlockK {
                    block_k: u32::MAX,
                    elem_bytes: 2,
                },
            ),
            (
                Sm90Params { stages: 17, ..ok },
                Sm90Violation::Stages { stages: 17 },
            ),
            (Sm90Params { group_m: 0, ..ok }, Sm90Violation::GroupM),
            (
                Sm90Params { cluster_m: 4, ..ok },
                Sm90Violation::ClusterM { cluster_m: 4 },
            ),
            (
                Sm90Params { block_m: 256, ..ok },
                Sm90Violation::Accumulators { accumulators: 256 },
            ),
        ];
        for (params, violation) in cases {
            assert_eq!(check(params), Err(violation), "{params:?}");
        }
        // The swapped path: block M is wgmma's N (multiples of 8), block N its 64-row slabs per
        // consumer, and a tighter accumulator budget (its epilogue stores element by element).
        let swapped = Sm90Params {
            block_m: 80,
            block_n: 128,
            swap_ab: true,
            ..ok
        };
        assert_eq!(check(swapped), Ok(()));
        let swapped_cases = [
            (
                Sm90Params {
                    block_m: 12,
                    ..swapped
                },
                Sm90Violation::SwappedBlockM { block_m: 12 },
            ),
            (
                Sm90Params {
                    block_m: 264,
                    ..swapped
                },
                Sm90Violation::SwappedBlockM { block_m: 264 },
            ),
            (
                Sm90Params {
                    block_n: 64,
                    ..swapped
                },
                Sm90Violation::SwappedBlockN {
                    block_n: 64,
                    consumers: 2,
                },
            ),
            (
                Sm90Params {
                    block_m: 160,
                    consumers: 1,
                    ..swapped
                },
                Sm90Violation::SwappedAccumulators {
                    accumulators: 160,
                    limit: 144,
                },
            ),
            (
                Sm90Params {
                    block_m: 128,
                    consumers: 1,
                    split_k: 2,
                    ..swapped
                },
                Sm90Violation::SwappedAccumulators {
                    accumulators: 128,
                    limit: 112,
                },
            ),
            (
                Sm90Params {
                    block_m: 112,
                    block_n: 256,
                    split_k: 2,
                    ..swapped
                },
                Sm90Violation::SwappedAccumulators {
                    accumulators: 112,
                    limit: 96,
                },
            ),
        ];
        // One slab per consumer has no budget of its own: 224 x 128 with two consumers and a
        // split (112 accumulators) is accepted.
        assert_eq!(
            check(Sm90Params {
                block_m: 224,
                split_k: 3,
                ..swapped
            }),
            Ok(())
        );
        for (params, violation) in swapped_cases {
            assert_eq!(check(params), Err(violation), "{params:?}");
        }
        assert!(
            Sm90Violation::SwappedAccumulators {
                accumulators: 160,
                limit: 144
            }
            .to_string()
            .contains("at most 144 compile without spilling")
        );
        // Column-major B only needs the wgmma step.
        assert_eq!(
            Sm90Params { block_n: 144, ..ok }.check(DType::Bf16, DType::F16, Layout::Col),
            Ok(())
        );
    }

    #[test]
    fn messages_say_what_is_accepted() {
        let texts = [
            Sm90Violation::Consumers { consumers: 3 }.to_string(),
            Sm90Violation::Stages { stages: 17 }.to_string(),
            Sm90Violation::ClusterM { cluster_m: 4 }.to_string(),
            Sm90Violation::BlockK {
                block_k: 32,
                elem_bytes: 2,
            }
            .to_string(),
            Sm90Violation::Accumulators { accumulators: 256 }.to_string(),
        ];
        assert_eq!(texts[0], "3 consumer warpgroups; accepted: 1 to 2");
        assert_eq!(texts[1], "stages = 17; accepted: 2 to 16");
        assert_eq!(
            texts[2],
            "cluster_m = 4; accepted: clusters of 1 to 2 CTAs along M"
        );
        assert!(
            texts[3].contains("block_k = 64 for 2-byte elements"),
            "{}",
            texts[3]
        );
        assert!(
            texts[4].contains("256 fp32 accumulators; at most 192 fit under the 232-register cap"),
            "{}",
            texts[4]
        );
    }

    #[test]
    fn native_config_is_the_serialized_params() {
        let db = HardwareDb::embedded().unwrap();
        let arch = db.get("h200").unwrap();
        let mut swapped = 0;
        // A decode shape (swapped tiles) and a square one.
        for p in [
            problem(16, 4096, 4096, Layout::Col),
            problem(4096, 4096, 4096, Layout::Row),
        ] {
            for tile in crate::family::space(&Sm90Rules, &p, arch) {
                swapped += usize::from(tile.swap_ab);
                assert_eq!(
                    Sm90Rules.native(&tile),
                    serde_json::to_value(Sm90Params::from_tile(&tile)).unwrap()
                );
            }
        }
        assert!(swapped > 0);
    }

    #[test]
    fn resources_are_the_params_figures() {
        let p = problem(4096, 4096, 4096, Layout::Row);
        let params = Sm90Params {
            block_m: 128,
            block_n: 256,
            block_k: 64,
            stages: 4,
            consumers: 2,
            group_m: 8,
            cluster_m: 1,
            persistent: false,
            split_k: 1,
            swap_ab: false,
        };
        let res = Sm90Rules.resources(&params.to_tile(), &p);
        assert_eq!(res.smem_bytes, 4 * (128 + 256) * 64 * 2 + 1024);
        assert_eq!(res.registers_per_thread, 128 + 40);
        assert_eq!(params.accumulators_per_thread(), 128);
        assert_eq!(params.threads(), 384);
    }

    #[test]
    fn swapped_tiles_fit_m_in_up_to_four_tile_rows() {
        // 160 rows: one tile of 160, two of 80, three of 54 -> 64, four of 40 (under 48: the
        // small tiles cover it).
        assert_eq!(swapped_block_ms(160), vec![8, 16, 32, 48, 160, 80, 64]);
        // 1537 rows need more than four tiles of at most 256: only the small tiles.
        assert_eq!(swapped_block_ms(1537), vec![8, 16, 32, 48]);
        assert_eq!(swapped_block_ms(1), vec![8, 16, 32, 48]);
        let p = problem(333, 4096, 4096, Layout::Row);
        let arch = HardwareDb::embedded().unwrap().get("h100").unwrap().clone();
        let [ms, _, _] = Sm90Rules.block_sizes(&p, &arch);
        // 333 rows: one tile would be 336 (past 256); 176 (two), 112 (three), 96 (four), with
        // the small tiles and the multiples of 64.
        assert_eq!(ms, vec![8, 16, 32, 48, 64, 96, 112, 128, 176, 192, 256]);
    }

    #[test]
    fn leading_dims_round_up_to_16_bytes() {
        assert_eq!(tma_leading_dim(999, 2), 1000);
        assert_eq!(tma_leading_dim(1000, 2), 1000);
        assert_eq!(tma_leading_dim(1, 2), 8);
        assert_eq!(tma_leading_dim(3001, 2), 3008);
        assert_eq!(tma_leading_dim(5, 4), 8);
        assert_eq!(tma_leading_dim(17, 1), 32);
    }

    #[test]
    fn repack_copies_exactly_the_unaligned_operands() {
        let f = Sm90Rules;
        assert_eq!(
            f.repack(&problem(1024, 1024, 1024, Layout::Row)),
            Repack::default()
        );
        // A (333 x 999 -> 1000) and row-major B (999 x 777 -> 784): read, then written padded.
        let r = f.repack(&problem(333, 777, 999, Layout::Row));
        assert_eq!(r.kernels, 2);
        assert_eq!(r.bytes, 2.0 * (333.0 * 1999.0 + 999.0 * 1561.0));
        // Only B's rows (N = 777) are unaligned.
        let r = f.repack(&problem(256, 777, 512, Layout::Row));
        assert_eq!(r.kernels, 1);
        assert_eq!(r.bytes, 2.0 * 512.0 * (777.0 + 784.0));
        // Column-major B (N x K) shares A's row length: K = 1000 is aligned, N is irrelevant.
        assert_eq!(
            f.repack(&problem(256, 777, 1000, Layout::Col)),
            Repack::default()
        );
        let r = f.repack(&problem(256, 777, 1001, Layout::Col));
        assert_eq!(r.kernels, 2);
        assert_eq!(r.bytes, 2.0 * (256.0 + 777.0) * (1001.0 + 1008.0));
    }
}
