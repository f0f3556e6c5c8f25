//! Triton's tiled matmul: `BLOCK_SIZE_M/N/K`, `GROUP_SIZE_M`, `SPLIT_K`, `num_warps`,
//! `num_stages`. Powers of two of at least 16 for blocks, as `tl.dot` and `tl.arange` require.

use carver_arch::{Arch, ComputeClass, InstructionFamily};

use super::{
    ConfigError, Family, FamilyRules, LoadPath, LoadPaths, ProblemRejected, Resources,
    SplitKReduction, WarpLayout, accumulator_registers, field_u32, leading_dims_divisible,
    staged_elements_per_operand,
};
use super::{compute_layout, native_object};
use crate::dtype::DType;
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

pub struct TritonRules;

const BLOCKS: [u32; 5] = [16, 32, 64, 128, 256];
const WARPS: [u32; 4] = [1, 2, 4, 8];

/// Registers a thread holds per element of A staged through registers: the value and a 32-bit
/// offset (the upper half of the address is shared). With this count carver's blocks per SM
/// match Triton 3.6's sm_90 binaries on 353 of 454 wgmma configs with A staged, against 229 of
/// 321 with a 64-bit pointer per element, and the A-staged shapes' top-1 went from 0.70-0.81 of
/// the exhaustive best to 0.83-0.97 (docs/RESULTS.md, "Registers of a staged operand").
const STAGED_A_REGISTERS: u32 = 2;
/// Per element of B staged through registers: the value and a 64-bit pointer. Triton 3.6 compiles
/// B-staged tiles to more registers than their A-staged twins (256x64x64 with 4 warps: 255
/// against 237), and at 2 per element B-staged tiles near the register cap were picked and ran
/// at 0.73 of their prediction (same section).
const STAGED_B_REGISTERS: u32 = 3;

/// How far carver's register estimate can be above the registers that fit one more block per SM
/// while Triton 3.6's ptxas still fits that block, as the largest estimate / threshold ratio seen
/// with one more block in the compiled sm_90 binaries (the 2,380 of
/// `benches/triton/runs/compiled-sm90-2026-11-25` and the nine H100 sweeps of 2026-11-25; none
/// above it): wgmma tiles with every operand loaded in vectors 1.05, `mma.sync` tiles 1.20, tiles
/// with A staged through registers 1.25 (docs/RESULTS.md, "Hedging the register estimate").
/// Split-K tiles get no hedge (see `register_estimate_margin`).
const REGISTER_MARGIN_WGMMA: f64 = 1.05;
/// `wgmma` instructions per SM sub-partition an iteration of Triton 3.6's loop issues without
/// stalling. The loop issues an iteration's `wgmma`s (one per 64 rows, instruction width of
/// columns and K step of the tile, each spanning the four sub-partitions), waits for the previous
/// iteration's, then loads the next stage into the freed buffer. Nsight Compute on the H200
/// (`benches/triton/ncu_probe.py`, 8192^3, 2026-11-28): the configs issuing 8 (128 x 128 x 64,
/// 64 x 256 x 64 and 128 x 256 x 64, 8 warps) stall on the tensor pipe ("math pipe throttle")
/// 0.12-0.38 cycles per instruction and keep it 77-83% busy; their twins at BLOCK_SIZE_K 128
/// (16) stall 1.25-1.46 and keep it 37-63% busy, with barrier stalls 3-4x as long
/// (docs/RESULTS.md, "Why BLOCK_SIZE_K 128 stalls").
const QUEUED_WGMMA_INSTRUCTIONS: u32 = 8;
const REGISTER_MARGIN_MMA_SYNC: f64 = 1.20;
const REGISTER_MARGIN_STAGED: f64 = 1.25;

impl TritonRules {
    /// Triton specializes integer arguments on divisibility by 16 (elements); only an operand
    /// whose leading dimension is divisible gets vectorized loads pipelined with cp.async.
    fn paths(problem: &Problem) -> LoadPaths {
        let (a, b) = leading_dims_divisible(problem, 16);
        LoadPaths::where_aligned(a, b, LoadPath::CpAsync)
    }

    pub(crate) fn layout(
        &self,
        block_m: u32,
        block_n: u32,
        warps: u32,
        problem: &Problem,
        arch: &Arch,
    ) -> Option<WarpLayout> {
        // Triton on sm_90 emits wgmma (MMAv3) when a warpgroup can own 64 rows.
        let wgmma_ok = block_m >= 64 && warps % 4 == 0 && block_n >= 16;
        compute_layout(
            block_m,
            block_n,
            warps,
            wgmma_ok,
            problem,
            arch,
            triton_mma_sync_warps,
        )
    }

    /// Shared-memory buffers Triton 3.6's software pipeliner allocates for an operand loaded
    /// `num_stages` deep into a tile that runs on `mma`: the `num_stages - 1` stages loaded ahead
    /// of the one the tensor instruction reads, and that one too where the instruction reads
    /// shared memory asynchronously (`wgmma`, `tcgen05`), so that the next load cannot
    /// overwrite it. Nsight Compute on the H200 read the dynamic shared memory of 14 dense
    /// 16-row configs (`benches/triton/runs/h200-2026-11-28-ncu-decode`) and of 20 fused-MoE
    /// configs (`benches/moe/runs/h200-2026-11-29-probe-*`) exactly so (docs/RESULTS.md,
    /// "Triton's stage buffers").
    pub(crate) fn pipelined_buffers(num_stages: u32, mma: InstructionFamily) -> u32 {
        match mma {
            InstructionFamily::MmaSync => num_stages.saturating_sub(1).max(1),
            InstructionFamily::Wgmma | InstructionFamily::Tcgen05 => num_stages.max(1),
        }
    }
}

/// Triton 3.6's arrangement of `warps` over a `block_m` x `block_n` tile on `mma.sync`
/// (`warpsPerTileV2`, AccelerateMatmul): each doubling goes to the dimension with more 16 x 8
/// instruction tiles left per warp, M on ties, and once every warp has one instruction tile the
/// rest go along M, repeating its rows. The TTGIR Triton 3.6 compiles for sm_90 arranges 16 x 32
/// with 8 warps as 2 x 4, 32 x 64 with 4 as 1 x 4 and 16 x 128 with 8 as 1 x 8
/// (`mma_sync_warps_follow_triton`).
pub(crate) fn triton_mma_sync_warps(block_m: u32, block_n: u32, warps: u32) -> (u32, u32) {
    let (mut tiles_m, mut tiles_n) = (block_m.div_ceil(16).max(1), block_n.div_ceil(8).max(1));
    let (mut warps_m, mut warps_n) = (1u32, 1u32);
    // Saturating: a parsed (untrusted) config may name billions of warps.
    while warps_m.saturating_mul(warps_n) < warps {
        if tiles_m >= tiles_n {
            warps_m = warps_m.saturating_mul(2);
            tiles_m = (tiles_m / 2).max(1);
        } else {
            warps_n = warps_n.saturating_mul(2);
            tiles_n /= 2;
        }
    }
    (warps_m, warps_n)
}

impl FamilyRules for TritonRules {
    fn id(&self) -> Family {
        Family::Triton
    }

    fn check_problem(&self, problem: &Problem, _arch: &Arch) -> Result<(), ProblemRejected> {
        if problem.acc == DType::F16 {
            return Err(ProblemRejected {
                family: Family::Triton,
                reason: "this kernel accumulates in f32 (or i32 for i8); f16 accumulation is not offered".into(),
            });
        }
        Ok(())
    }

    fn block_sizes(&self, problem: &Problem, _arch: &Arch) -> [Vec<u32>; 3] {
        // tl.dot needs K blocks of at least 16 elements and 32 bytes.
        let min_k = (32 / problem.in_bytes()).max(16);
        let ks = BLOCKS
            .iter()
            .copied()
            .filter(|&k| k >= min_k && k <= 128)
            .collect();
        [BLOCKS.to_vec(), BLOCKS.to_vec(), ks]
    }

    fn warp_layouts(
        &self,
        block_m: u32,
        block_n: u32,
        problem: &Problem,
        arch: &Arch,
    ) -> Vec<WarpLayout> {
        WARPS
            .iter()
            .filter(|&&w| w * 256 <= block_m * block_n)
            .filter_map(|&w| self.layout(block_m, block_n, w, problem, arch))
            .collect()
    }

    fn stage_range(&self) -> (u32, u32) {
        (2, 6)
    }

    fn groups(&self) -> &'static [u32] {
        &[1, 8]
    }

    fn split_ks(&self) -> &'static [u32] {
        &super::SPLIT_K_FACTORS
    }

    fn load_paths(&self, problem: &Problem, _arch: &Arch) -> LoadPaths {
        Self::paths(problem)
    }

    fn split_k_reduction(&self) -> SplitKReduction {
        SplitKReduction::AtomicWorkspace
    }

    /// Triton 3.6 lowers an fp8 `tl.dot` on `mma.sync` tiles to the f16 instruction
    /// (`m16n8k16`) after converting both operands (`cvt.rn.f16x2.e4m3x2`) on GPUs that also
    /// have a warpgroup or tensor-memory instruction (sm_90, sm_100), and to the native
    /// `m16n8k32.e4m3` where `mma.sync` is the only tensor path (sm_89, sm_120): the PTX of the
    /// fused-MoE kernel compiled for each target without a GPU (docs/RESULTS.md, "Triton runs
    /// fp8 `mma.sync` tiles in f16 on Hopper").
    fn mma_sync_operand_class(&self, class: ComputeClass, arch: &Arch) -> ComputeClass {
        let has_async_mma = arch.has_tensor_family(InstructionFamily::Wgmma)
            || arch.has_tensor_family(InstructionFamily::Tcgen05);
        if class == ComputeClass::Fp8 && has_async_mma {
            ComputeClass::F16
        } else {
            class
        }
    }

    fn resources(&self, c: &TileConfig, problem: &Problem) -> Resources {
        let e = u64::from(problem.in_bytes());
        let paths = Self::paths(problem);
        // An operand staged through registers has one shared-memory buffer whatever num_stages
        // says.
        let buffers = |path: LoadPath| match path {
            LoadPath::Registers => 1,
            LoadPath::CpAsync | LoadPath::Tma => {
                u64::from(Self::pipelined_buffers(c.stages, c.mma))
            }
        };
        let pipeline = (buffers(paths.a) * u64::from(c.block_m)
            + buffers(paths.b) * u64::from(c.block_n))
            * u64::from(c.block_k)
            * e;
        // The epilogue converts the accumulator layout through shared memory, reusing the
        // pipeline buffers once the main loop is done.
        let epilogue = u64::from(c.block_m) * u64::from(c.block_n) * u64::from(problem.c.bytes());
        let threads = c.threads();
        let vector_rows = c.block_m + c.block_n - paths.staged_rows(c.block_m, c.block_n);
        let vectors = (u64::from(vector_rows) * u64::from(c.block_k) * e).div_ceil(16);
        // A 64-bit pointer per 16-byte vector, and registers for each element staged through
        // registers.
        let (staged_a, staged_b) = staged_elements_per_operand(c, paths);
        let load_regs = STAGED_A_REGISTERS * staged_a
            + STAGED_B_REGISTERS * staged_b
            + (2 * vectors.div_ceil(u64::from(threads))).min(64) as u32;
        let operand_regs = match c.mma {
            InstructionFamily::MmaSync => {
                let (wm, wn) = c.warp_tile();
                // A and B fragments for one k16 step, double-buffered.
                (wm + wn) / 2
            }
            _ => 0,
        };
        Resources {
            smem_bytes: pipeline.max(epilogue),
            registers_per_thread: accumulator_registers(c, problem) + 24 + load_regs + operand_regs,
        }
    }

    fn register_estimate_margin(&self, c: &TileConfig, problem: &Problem) -> Option<f64> {
        let paths = Self::paths(problem);
        // Not measured where the estimate is biased low: B-staged tiles, and split-K tiles,
        // whose fp32 atomic epilogue takes registers the estimate does not count (none of the
        // split-K binaries within the margin fit the extra block; docs/RESULTS.md, "Hedging the
        // register estimate").
        if paths.b == LoadPath::Registers || c.split_k > 1 {
            return None;
        }
        Some(if paths.any_staged() {
            REGISTER_MARGIN_STAGED
        } else if c.mma == InstructionFamily::MmaSync {
            REGISTER_MARGIN_MMA_SYNC
        } else {
            REGISTER_MARGIN_WGMMA
        })
    }

    fn queued_wgmma_instructions(&self) -> Option<u32> {
        Some(QUEUED_WGMMA_INSTRUCTIONS)
    }

    fn check_rules(
        &self,
        c: &TileConfig,
        problem: &Problem,
        _arch: &Arch,
    ) -> Result<(), ConfigError> {
        let rule = |what: String| Err(ConfigError::rule(Family::Triton, what));
        for (name, v) in [
            ("BLOCK_SIZE_M", c.block_m),
            ("BLOCK_SIZE_N", c.block_n),
            ("BLOCK_SIZE_K", c.block_k),
        ] {
            if v < 16 || !v.is_power_of_two() {
                return rule(format!(
                    "{name} = {v}; Triton needs a power of two of at least 16"
                ));
            }
        }
        if !c.compute_warps().is_power_of_two() || c.producer_warps != 0 {
            return rule(format!(
                "num_warps = {}; it must be a power of two",
                c.compute_warps()
            ));
        }
        if c.stages == 0 {
            return rule("num_stages = 0; it must be at least 1".into());
        }
        if c.cluster_m * c.cluster_n != 1 || c.persistent {
            return rule("this Triton kernel has no clusters and is not persistent".into());
        }
        if c.split_k == 0 || u64::from(c.split_k) > problem.k.div_ceil(u64::from(c.block_k)) {
            return rule(format!(
                "SPLIT_K = {} leaves some splits without K blocks; accepted: 1 to {} (the K blocks)",
                c.split_k,
                problem.k.div_ceil(u64::from(c.block_k))
            ));
        }
        if c.raster.group == 0 {
            return rule("GROUP_SIZE_M = 0; it must be at least 1".into());
        }
        Ok(())
    }

    fn native(&self, c: &TileConfig) -> serde_json::Value {
        native_object([
            (
                "kwargs",
                native_object([
                    ("BLOCK_SIZE_K", c.block_k.into()),
                    ("BLOCK_SIZE_M", c.block_m.into()),
                    ("BLOCK_SIZE_N", c.block_n.into()),
                    ("GROUP_SIZE_M", c.raster.group.into()),
                    ("SPLIT_K", c.split_k.into()),
                ]),
            ),
            ("num_stages", c.stages.into()),
            ("num_warps", c.compute_warps().into()),
        ])
    }

    fn parse_native(
        &self,
        v: &serde_json::Value,
        problem: &Problem,
        arch: &Arch,
    ) -> Result<TileConfig, ConfigError> {
        let kw = v
            .get("kwargs")
            .ok_or_else(|| ConfigError::native("kwargs", "is missing"))?;
        let (block_m, block_n) = (
            field_u32(kw, "BLOCK_SIZE_M")?,
            field_u32(kw, "BLOCK_SIZE_N")?,
        );
        let warps = field_u32(v, "num_warps")?;
        let layout = self
            .layout(block_m, block_n, warps, problem, arch)
            .ok_or_else(|| {
                ConfigError::native(
                    "num_warps",
                    format!("= {warps} cannot tile a {block_m} x {block_n} block"),
                )
            })?;
        Ok(TileConfig {
            block_m,
            block_n,
            block_k: field_u32(kw, "BLOCK_SIZE_K")?,
            warps_m: layout.warps_m,
            warps_n: layout.warps_n,
            producer_warps: 0,
            stages: field_u32(v, "num_stages")?,
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group: field_u32(kw, "GROUP_SIZE_M").unwrap_or(1),
            },
            split_k: field_u32(kw, "SPLIT_K").unwrap_or(1),
            cluster_m: 1,
            cluster_n: 1,
            persistent: false,
            mma: layout.mma,
            swap_ab: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Family;
    use crate::template::MatmulTemplate;
    use carver_arch::HardwareDb;

    /// The `warpsPerCTA` of the `mma.sync` layouts in the TTGIR Triton 3.6 compiles for sm_90
    /// (the fused-MoE kernel, compiled without a GPU).
    #[test]
    fn mma_sync_warps_follow_triton() {
        // (BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps, warpsPerCTA)
        let compiled = [
            (16, 32, 8, (2, 4)),
            (16, 64, 4, (1, 4)),
            (16, 128, 8, (1, 8)),
            (32, 32, 4, (2, 2)),
            (32, 64, 4, (1, 4)),
            (32, 64, 8, (2, 4)),
            (32, 128, 4, (1, 4)),
            (32, 256, 4, (1, 4)),
        ];
        for (block_m, block_n, warps, layout) in compiled {
            assert_eq!(
                triton_mma_sync_warps(block_m, block_n, warps),
                layout,
                "{block_m} x {block_n}, {warps} warps"
            );
        }
        // Untrusted sizes end the search instead of overflowing.
        assert_eq!(triton_mma_sync_warps(16, 16, u32::MAX).0, 1 << 31);
    }

    /// The dynamic shared memory Nsight Compute read for 16-row Triton tiles of a 16 x 12288 x
    /// 4096 fp16 GEMM on the H200 (`benches/triton/runs/h200-2026-11-28-ncu-decode`): `mma.sync`
    /// tiles hold one stage buffer fewer than `num_stages`.
    #[test]
    fn mma_sync_tiles_hold_one_stage_buffer_fewer_than_num_stages() {
        let db = HardwareDb::embedded().unwrap();
        let h200 = db.get("h200").unwrap();
        let p = MatmulTemplate::new(16, 12288, 4096)
            .with_dtype(DType::F16)
            .with_family(Family::Triton)
            .validate(h200)
            .unwrap();
        // (BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages, bytes measured)
        let measured = [
            (32, 64, 4, 5, 24_576),
            (32, 128, 4, 5, 49_152),
            (32, 256, 4, 4, 73_728),
            (64, 64, 4, 5, 40_960),
            (64, 256, 4, 3, 81_920),
            (128, 64, 4, 4, 55_296),
            (256, 128, 4, 3, 139_264),
        ];
        for (block_n, block_k, warps, stages, bytes) in measured {
            let config = serde_json::json!({
                "kwargs": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k},
                "num_warps": warps,
                "num_stages": stages,
            });
            let tile = TritonRules.parse_native(&config, &p, h200).unwrap();
            assert_eq!(tile.mma, InstructionFamily::MmaSync);
            assert_eq!(
                TritonRules.resources(&tile, &p).smem_bytes,
                bytes,
                "{config}"
            );
        }
    }
}
