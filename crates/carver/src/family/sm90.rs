//! carver's own Hopper GEMM family: TMA loads into a ring of `stages` shared-memory buffers
//! guarded by mbarriers, one producer warpgroup, `consumers` wgmma warpgroups
//! (m64nNk16), grouped or persistent tile order.
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

use carver_arch::{Arch, InstructionFamily};
use serde::{Deserialize, Serialize};

use super::{
    Family, FamilyRules, LoadPath, LoadPaths, Repack, Resources, SplitKReduction, WarpLayout,
};
use crate::dtype::{DType, Layout};
use crate::error::CarverError;
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

pub struct Sm90Rules;

/// Row-major B (N contiguous) is loaded in boxes of 64 columns (128 bytes, the swizzle span),
/// so block N must be a multiple of 64; column-major B only needs the wgmma step of 16.
fn row_major_b_step(p: &Problem) -> u32 {
    match p.layout_b {
        Layout::Row => 64,
        Layout::Col => 16,
    }
}

/// Registers a consumer thread may hold after `setmaxnreg` rebalancing (producer keeps 40).
pub const CONSUMER_REGISTER_CAP: u32 = 232;
/// Bytes of one block-K row in the 128-byte swizzle TMA uses.
pub const SWIZZLE_BYTES: u32 = 128;
/// TMA's rule for a tensor map's global strides: a multiple of 16 bytes.
pub const TMA_STRIDE_BYTES: u64 = 16;

/// Leading dimension, in elements, the kernel reads an operand with whose rows hold `cols`
/// contiguous elements of `elem_bytes` bytes: `cols` when those rows are a multiple of 16 bytes
/// (the operand is read in place), else `cols` rounded up to one (the operand's padded copy).
pub fn tma_leading_dim(cols: u64, elem_bytes: u32) -> u64 {
    let per_16_bytes = (TMA_STRIDE_BYTES / u64::from(elem_bytes.max(1))).max(1);
    cols.div_ceil(per_16_bytes) * per_16_bytes
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
}

impl Sm90Params {
    pub fn from_tile(c: &TileConfig) -> Self {
        Self {
            block_m: c.block_m,
            block_n: c.block_n,
            block_k: c.block_k,
            stages: c.stages,
            consumers: c.warps_m / 4,
            group_m: c.raster.group,
            cluster_m: c.cluster_m,
            persistent: c.persistent,
        }
    }

    pub fn to_tile(self) -> TileConfig {
        TileConfig {
            block_m: self.block_m,
            block_n: self.block_n,
            block_k: self.block_k,
            warps_m: 4 * self.consumers,
            warps_n: 1,
            producer_warps: 4,
            stages: self.stages,
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group: self.group_m,
            },
            split_k: 1,
            cluster_m: self.cluster_m,
            cluster_n: 1,
            persistent: self.persistent,
            mma: InstructionFamily::Wgmma,
        }
    }

    /// Rows of the tile each consumer warpgroup computes per wgmma slab pass.
    pub fn rows_per_consumer(self) -> u32 {
        self.block_m / self.consumers.max(1)
    }
}

impl FamilyRules for Sm90Rules {
    fn id(&self) -> Family {
        Family::CudaSm90
    }

    fn check_problem(&self, p: &Problem, arch: &Arch) -> Result<(), CarverError> {
        let fail = |reason: String| {
            Err(CarverError::UnsupportedByTarget {
                target: "cuda-sm90".into(),
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
        if !matches!(p.a, DType::F16 | DType::Bf16) || p.acc != DType::F32 {
            return fail(format!(
                "inputs must be f16 or bf16 with f32 accumulation (got {} with {})",
                p.a, p.acc
            ));
        }
        if !matches!(p.c, DType::F16 | DType::Bf16) {
            return fail(format!("output must be f16 or bf16 (got {})", p.c));
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
            vec![64, 128, 192, 256],
            (1..=16)
                .map(|i| i * 16)
                .filter(|&n| n % row_major_b_step(p) == 0)
                .collect(),
            vec![64],
        ]
    }

    fn warp_layouts(
        &self,
        block_m: u32,
        _block_n: u32,
        _p: &Problem,
        _arch: &Arch,
    ) -> Vec<WarpLayout> {
        [1u32, 2]
            .into_iter()
            .filter(|&c| block_m % (64 * c) == 0)
            .map(|c| WarpLayout {
                warps_m: 4 * c,
                warps_n: 1,
                producer_warps: 4,
                mma: InstructionFamily::Wgmma,
            })
            .collect()
    }

    fn stage_range(&self) -> (u32, u32) {
        (2, 8)
    }

    fn groups(&self) -> &'static [u32] {
        &[1, 8, 16]
    }

    fn split_ks(&self) -> &'static [u32] {
        &[1]
    }

    fn clusters(&self) -> &'static [(u32, u32)] {
        &[(1, 1), (2, 1)]
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

    fn resources(&self, c: &TileConfig, p: &Problem) -> Resources {
        let e = u64::from(p.in_bytes());
        let ring =
            u64::from(c.stages) * u64::from(c.block_m + c.block_n) * u64::from(c.block_k) * e;
        // Two mbarriers (full, empty) of 8 bytes per stage, padded to the 1 KiB the 128-byte
        // swizzle needs for alignment of the ring.
        let barriers = 1024;
        let params = Sm90Params::from_tile(c);
        let acc = params.rows_per_consumer() * c.block_n / 128;
        Resources {
            smem_bytes: ring + barriers,
            registers_per_thread: acc + 40,
        }
    }

    fn check_rules(&self, c: &TileConfig, p: &Problem, _arch: &Arch) -> Result<(), String> {
        let params = Sm90Params::from_tile(c);
        if c.mma != InstructionFamily::Wgmma || c.warps_n != 1 || c.producer_warps != 4 {
            return Err(
                "cuda-sm90 uses one producer warpgroup and wgmma consumer warpgroups".into(),
            );
        }
        if !(1..=2).contains(&params.consumers) || c.warps_m % 4 != 0 {
            return Err(format!(
                "{} consumer warpgroups; accepted: 1, 2",
                params.consumers
            ));
        }
        if params.rows_per_consumer() % 64 != 0 {
            return Err(format!(
                "block_m = {} is not 64 x consumers x m-iterations",
                c.block_m
            ));
        }
        if c.block_n % 16 != 0 || !(16..=256).contains(&c.block_n) {
            return Err(format!(
                "block_n = {}; accepted: multiples of 16 up to 256",
                c.block_n
            ));
        }
        if c.block_k * p.in_bytes() != SWIZZLE_BYTES {
            return Err(format!(
                "block_k = {}; the 128-byte swizzle needs block_k x element size = 128 bytes",
                c.block_k
            ));
        }
        if !(2..=8).contains(&c.stages) {
            return Err(format!("stages = {}; accepted: 2 to 8", c.stages));
        }
        if c.split_k != 1 || c.cluster_n != 1 || !(1..=2).contains(&c.cluster_m) {
            return Err("no split-K; clusters of 1 or 2 along M".into());
        }
        let step = row_major_b_step(p);
        if c.block_n % step != 0 {
            return Err(format!(
                "block_n = {}; row-major B is loaded in 64-column boxes, so block_n must be a multiple of {step}",
                c.block_n
            ));
        }
        let acc = params.rows_per_consumer() * c.block_n / 128;
        if acc + 40 > CONSUMER_REGISTER_CAP {
            return Err(format!(
                "each consumer thread would hold {acc} accumulators; at most {} fit under the {} register cap",
                CONSUMER_REGISTER_CAP - 40,
                CONSUMER_REGISTER_CAP
            ));
        }
        Ok(())
    }

    fn native(&self, c: &TileConfig) -> serde_json::Value {
        serde_json::to_value(Sm90Params::from_tile(c)).expect("params serialize")
    }

    fn parse_native(
        &self,
        v: &serde_json::Value,
        _p: &Problem,
        _arch: &Arch,
    ) -> Result<TileConfig, String> {
        let params: Sm90Params = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
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
