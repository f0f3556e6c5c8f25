//! TileLang's GEMM template as its autotuner sees it: `block_M`, `block_N`, `block_K`,
//! `num_stages`, `thread_num`, `enable_rasteration`.

use carver_arch::Arch;

use super::{
    ConfigError, Family, FamilyRules, LoadPaths, ProblemRejected, Resources, SplitKReduction,
    WarpLayout, accumulator_registers, field_u32,
};
use super::{compute_layout, mma_sync_warps, native_object, tma_or_cp_async};
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

pub struct TileLangRules;

/// Tile rows per group when `enable_rasteration` is on (TileLang's default swizzle panel).
pub const RASTER_PANEL: u32 = 10;

const BLOCKS: [u32; 5] = [16, 32, 64, 128, 256];
const THREADS: [u32; 2] = [128, 256];

impl TileLangRules {
    fn layout(
        &self,
        block_m: u32,
        block_n: u32,
        threads: u32,
        problem: &Problem,
        arch: &Arch,
    ) -> Option<WarpLayout> {
        // TileLang's T.gemm issues wgmma on sm_90 for whole 64-row warpgroup slabs.
        compute_layout(
            block_m,
            block_n,
            threads / 32,
            block_m % 64 == 0,
            problem,
            arch,
            mma_sync_warps,
        )
    }
}

impl FamilyRules for TileLangRules {
    fn id(&self) -> Family {
        Family::TileLang
    }

    fn check_problem(&self, _problem: &Problem, _arch: &Arch) -> Result<(), ProblemRejected> {
        Ok(())
    }

    fn block_sizes(&self, problem: &Problem, _arch: &Arch) -> [Vec<u32>; 3] {
        let min_k = (32 / problem.in_bytes()).max(16);
        let ks = [32, 64, 128].into_iter().filter(|&k| k >= min_k).collect();
        [BLOCKS.to_vec(), BLOCKS.to_vec(), ks]
    }

    fn warp_layouts(
        &self,
        block_m: u32,
        block_n: u32,
        problem: &Problem,
        arch: &Arch,
    ) -> Vec<WarpLayout> {
        THREADS
            .iter()
            .filter(|&&t| (t / 32) * 256 <= block_m * block_n)
            .filter_map(|&t| self.layout(block_m, block_n, t, problem, arch))
            .collect()
    }

    fn stage_range(&self) -> (u32, u32) {
        (1, 4)
    }

    fn groups(&self) -> &'static [u32] {
        &[1, RASTER_PANEL]
    }

    fn split_ks(&self) -> &'static [u32] {
        &[1]
    }

    fn load_paths(&self, problem: &Problem, arch: &Arch) -> LoadPaths {
        tma_or_cp_async(problem, arch)
    }

    fn split_k_reduction(&self) -> SplitKReduction {
        SplitKReduction::SeparateReduce
    }

    fn resources(&self, c: &TileConfig, problem: &Problem) -> Resources {
        let e = u64::from(problem.in_bytes());
        let pipeline = u64::from(c.stages.max(1))
            * u64::from(c.block_m + c.block_n)
            * u64::from(c.block_k)
            * e;
        Resources {
            smem_bytes: pipeline,
            registers_per_thread: accumulator_registers(c, problem) + 40,
        }
    }

    fn check_rules(
        &self,
        c: &TileConfig,
        _problem: &Problem,
        _arch: &Arch,
    ) -> Result<(), ConfigError> {
        let rule = |what: String| Err(ConfigError::rule(Family::TileLang, what));
        if !THREADS.contains(&c.threads()) {
            return rule(format!("thread_num = {}; accepted: 128, 256", c.threads()));
        }
        if c.block_m % 16 != 0 || c.block_n % 16 != 0 || c.block_k % 16 != 0 {
            return rule(format!(
                "blocks of {} x {} x {}; block sizes must be multiples of 16",
                c.block_m, c.block_n, c.block_k
            ));
        }
        if c.split_k != 1 || c.cluster_m * c.cluster_n != 1 || c.persistent {
            return rule(
                "the TileLang GEMM template has no split-K, clusters or persistence".into(),
            );
        }
        Ok(())
    }

    fn native(&self, c: &TileConfig) -> serde_json::Value {
        native_object([
            ("block_K", c.block_k.into()),
            ("block_M", c.block_m.into()),
            ("block_N", c.block_n.into()),
            ("enable_rasteration", (c.raster.group > 1).into()),
            ("num_stages", c.stages.into()),
            ("thread_num", c.threads().into()),
        ])
    }

    fn parse_native(
        &self,
        v: &serde_json::Value,
        problem: &Problem,
        arch: &Arch,
    ) -> Result<TileConfig, ConfigError> {
        let (block_m, block_n) = (field_u32(v, "block_M")?, field_u32(v, "block_N")?);
        let threads = field_u32(v, "thread_num")?;
        let layout = self
            .layout(block_m, block_n, threads, problem, arch)
            .ok_or_else(|| {
                ConfigError::native(
                    "thread_num",
                    format!("= {threads} cannot tile a {block_m} x {block_n} block"),
                )
            })?;
        let raster = v
            .get("enable_rasteration")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        Ok(TileConfig {
            block_m,
            block_n,
            block_k: field_u32(v, "block_K")?,
            warps_m: layout.warps_m,
            warps_n: layout.warps_n,
            producer_warps: 0,
            stages: field_u32(v, "num_stages")?,
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group: if raster { RASTER_PANEL } else { 1 },
            },
            split_k: 1,
            cluster_m: 1,
            cluster_n: 1,
            persistent: false,
            mma: layout.mma,
            swap_ab: false,
        })
    }
}
