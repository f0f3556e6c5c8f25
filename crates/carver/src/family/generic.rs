//! Family-neutral hints (Roller's vocabulary: block, warp, reduction step, stages,
//! rasterization, split-K, cluster) for tuners carver has no dedicated family for.

use carver_arch::{Arch, InstructionFamily};
use serde_json::json;

use super::{
    ConfigError, Family, FamilyRules, LoadPaths, ProblemRejected, Resources, SplitKReduction,
    WarpLayout, accumulator_registers, mma_sync_warps, pick_mma, wgmma_warps,
};
use super::{native_object, tma_or_cp_async};
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

pub struct GenericRules;

const BLOCKS_MN: [u32; 8] = [16, 32, 48, 64, 96, 128, 192, 256];
const WARPS: [u32; 4] = [1, 2, 4, 8];

impl FamilyRules for GenericRules {
    fn id(&self) -> Family {
        Family::Generic
    }

    fn check_problem(&self, _problem: &Problem, _arch: &Arch) -> Result<(), ProblemRejected> {
        Ok(())
    }

    fn block_sizes(&self, problem: &Problem, arch: &Arch) -> [Vec<u32>; 3] {
        let k_step = arch
            .instructions_for(problem.class)
            .map(|i| i.k)
            .max()
            .unwrap_or(16);
        let ks = [16, 32, 64, 128]
            .into_iter()
            .filter(|&k| k % k_step == 0 && k * problem.in_bytes() >= 32)
            .collect();
        [BLOCKS_MN.to_vec(), BLOCKS_MN.to_vec(), ks]
    }

    fn warp_layouts(
        &self,
        block_m: u32,
        block_n: u32,
        problem: &Problem,
        arch: &Arch,
    ) -> Vec<WarpLayout> {
        let mut out = Vec::with_capacity(WARPS.len());
        // The instruction depends on the warps only through whether wgmma can run them.
        let (with_wgmma, without) = (
            pick_mma(arch, problem, true),
            pick_mma(arch, problem, false),
        );
        for &w in &WARPS {
            if w * 256 > block_m * block_n {
                continue;
            }
            let wgmma_ok = w % 4 == 0 && block_m % 64 == 0;
            let Some(mma) = (if wgmma_ok { with_wgmma } else { without }) else {
                continue;
            };
            let (wm, wn) = match mma {
                InstructionFamily::Wgmma => wgmma_warps(block_m, w),
                _ => mma_sync_warps(block_m, block_n, w),
            };
            if wm * wn == w && block_m % (wm * 16) == 0 && block_n % (wn * 8) == 0 {
                out.push(WarpLayout {
                    warps_m: wm,
                    warps_n: wn,
                    producer_warps: 0,
                    mma,
                    swap_ab: false,
                });
            }
        }
        out
    }

    fn stage_range(&self) -> (u32, u32) {
        (2, 8)
    }

    fn groups(&self) -> &'static [u32] {
        &[1, 4, 8, 16]
    }

    fn split_ks(&self) -> &'static [u32] {
        &[1, 2, 3, 4, 6, 8, 12, 16]
    }

    fn clusters(&self) -> &'static [(u32, u32)] {
        &[(1, 1)]
    }

    fn load_paths(&self, problem: &Problem, arch: &Arch) -> LoadPaths {
        tma_or_cp_async(problem, arch)
    }

    fn split_k_reduction(&self) -> SplitKReduction {
        SplitKReduction::SeparateReduce
    }

    fn resources(&self, c: &TileConfig, problem: &Problem) -> Resources {
        let e = u64::from(problem.in_bytes());
        Resources {
            smem_bytes: u64::from(c.stages)
                * u64::from(c.block_m + c.block_n)
                * u64::from(c.block_k)
                * e,
            registers_per_thread: accumulator_registers(c, problem) + 40,
        }
    }

    fn check_rules(
        &self,
        c: &TileConfig,
        problem: &Problem,
        arch: &Arch,
    ) -> Result<(), ConfigError> {
        let rule = |what: String| ConfigError::rule(Family::Generic, what);
        let ins = arch
            .instructions_for(problem.class)
            .find(|i| i.family == c.mma)
            .ok_or_else(|| {
                rule(format!(
                    "{} has no {} instruction for {}",
                    arch.gpu.key, c.mma, problem.class
                ))
            })?;
        let (wm, wn) = c.warp_tile();
        let m_unit = if c.mma == InstructionFamily::Wgmma {
            16
        } else {
            ins.m.min()
        };
        if wm == 0 || wm % m_unit != 0 || wn == 0 || wn % ins.n.min() != 0 || c.block_k % ins.k != 0
        {
            return Err(rule(format!(
                "warp tile {wm} x {wn} x {} is not a multiple of the {} shape ({m_unit} x {} x {})",
                c.block_k,
                c.mma,
                ins.n.min(),
                ins.k
            )));
        }
        if c.stages == 0 || c.split_k == 0 || c.raster.group == 0 {
            return Err(rule(format!(
                "stages = {}, split-K = {}, group = {}; each must be at least 1",
                c.stages, c.split_k, c.raster.group
            )));
        }
        Ok(())
    }

    fn native(&self, c: &TileConfig) -> serde_json::Value {
        native_object([
            ("block", json!([c.block_m, c.block_n])),
            ("cluster", json!([c.cluster_m, c.cluster_n])),
            ("mma", c.mma.name().into()),
            ("num_warps", c.compute_warps().into()),
            ("pipeline_stage", c.stages.into()),
            (
                "rasterization_plan",
                native_object([
                    ("group", c.raster.group.into()),
                    ("order", "grouped-rows".into()),
                ]),
            ),
            ("rstep", json!([c.block_k])),
            ("split_k", c.split_k.into()),
            (
                "warp",
                json!([c.block_m / c.warps_m, c.block_n / c.warps_n]),
            ),
        ])
    }

    fn parse_native(
        &self,
        v: &serde_json::Value,
        problem: &Problem,
        arch: &Arch,
    ) -> Result<TileConfig, ConfigError> {
        let pair = |key: &str| -> Result<(u32, u32), ConfigError> {
            let a = v
                .get(key)
                .and_then(|x| x.as_array())
                .ok_or_else(|| ConfigError::native(key, "is missing or not a list"))?;
            let get = |i: usize| {
                a.get(i)
                    .and_then(|x| x.as_u64())
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| {
                        ConfigError::native(
                            key,
                            format!("has no integer from 0 to 2^32 - 1 at position {i}"),
                        )
                    })
            };
            Ok((get(0)?, get(1).unwrap_or(1)))
        };
        let (block_m, block_n) = pair("block")?;
        let (warp_m, warp_n) = pair("warp")?;
        let (block_k, _) = pair("rstep")?;
        let (cluster_m, cluster_n) = pair("cluster").unwrap_or((1, 1));
        let warps_m = block_m / warp_m.max(1);
        let warps_n = block_n / warp_n.max(1);
        let num = |k: &str, d: u64| v.get(k).and_then(|x| x.as_u64()).unwrap_or(d) as u32;
        let mma = pick_mma(
            arch,
            problem,
            warps_m.checked_mul(warps_n).is_some_and(|w| w % 4 == 0) && block_m % 64 == 0,
        )
        .ok_or_else(|| {
            ConfigError::native(
                "mma",
                format!(
                    "cannot be chosen: {} has no tensor instruction for {}",
                    arch.gpu.key, problem.class
                ),
            )
        })?;
        Ok(TileConfig {
            block_m,
            block_n,
            block_k,
            warps_m,
            warps_n,
            producer_warps: 0,
            stages: num("pipeline_stage", 2),
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group: v
                    .pointer("/rasterization_plan/group")
                    .and_then(|x| x.as_u64())
                    .unwrap_or(1) as u32,
            },
            split_k: num("split_k", 1),
            cluster_m,
            cluster_n,
            persistent: false,
            mma,
            swap_ab: false,
        })
    }
}
