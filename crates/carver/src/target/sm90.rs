//! carver's own Hopper GEMM family: TMA loads into a ring of `stages` shared-memory buffers
//! guarded by mbarriers, one producer warpgroup, `consumers` wgmma warpgroups
//! (m64nNk16), grouped or persistent tile order.
//!
//! This module is the single definition of the family's space and legality: the kernel
//! generator in `carver-gpu` instantiates exactly the [`Sm90Params`] this module accepts.
//! The kernel loads row-major B in 64-column boxes, so for row-major B block N is a multiple
//! of 64; the space below leaves the other points out.

use carver_arch::{Arch, InstructionFamily};
use serde::{Deserialize, Serialize};

use super::{KernelFamily, LoadPath, Resources, SplitKReduction, Target, WarpLayout};
use crate::dtype::{DType, Layout};
use crate::error::CarverError;
use crate::template::Problem;
use carver_schema::{Raster, RasterOrder, TileConfig};

pub struct Sm90Family;

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

impl KernelFamily for Sm90Family {
    fn target(&self) -> Target {
        Target::CudaSm90
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
        if !(p.aligned_a && p.aligned_b) {
            return fail(
                "TMA needs every leading dimension of A and B to be a multiple of 16 bytes \
                 (a multiple of 8 elements for f16/bf16)"
                    .into(),
            );
        }
        Ok(())
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

    fn load_path(&self, _problem: &Problem, _arch: &Arch) -> LoadPath {
        LoadPath::Tma
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
