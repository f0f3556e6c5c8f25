//! The fused-MoE Triton kernel's configurations: vLLM's own tuning space
//! (`benchmarks/kernels/benchmark_moe.py`, `get_configs_compute_bound`, CUDA branch), filtered by
//! what compiles and what block-quantized fp8 allows.

use carver_arch::Arch;
use serde::{Deserialize, Serialize};

use super::template::MoeProblem;
use crate::family::Resources;
use crate::family::{ConfigError, Family, FamilyRules, TritonRules};
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};
use carver_arch::InstructionFamily;

/// vLLM's tuner's axes (benchmark_moe.py, `get_configs_compute_bound`, non-ROCm).
pub const BLOCK_M: [u32; 5] = [16, 32, 64, 128, 256];
pub const BLOCK_N: [u32; 4] = [32, 64, 128, 256];
pub const BLOCK_K: [u32; 3] = [64, 128, 256];
pub const GROUP_M: [u32; 4] = [1, 16, 32, 64];
pub const NUM_WARPS: [u32; 2] = [4, 8];
pub const NUM_STAGES: [u32; 4] = [2, 3, 4, 5];

/// One configuration of the fused-MoE kernel, in its own parameter names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MoeConfig {
    #[serde(rename = "BLOCK_SIZE_M")]
    pub block_m: u32,
    #[serde(rename = "BLOCK_SIZE_N")]
    pub block_n: u32,
    #[serde(rename = "BLOCK_SIZE_K")]
    pub block_k: u32,
    #[serde(rename = "GROUP_SIZE_M")]
    pub group_m: u32,
    pub num_warps: u32,
    pub num_stages: u32,
}

impl MoeConfig {
    /// The K block the kernel really runs: vLLM's `invoke_fused_moe_kernel` lowers
    /// `BLOCK_SIZE_K` to `min(BLOCK_SIZE_K, block_n, block_k)` of the quantization block.
    pub fn effective_block_k(&self, p: &MoeProblem) -> u32 {
        match p.block_shape {
            Some([n, k]) => self.block_k.min(n.min(k)),
            None => self.block_k,
        }
    }

    /// Whether every value is one of the tuner's.
    pub fn in_space(&self) -> bool {
        BLOCK_M.contains(&self.block_m)
            && BLOCK_N.contains(&self.block_n)
            && BLOCK_K.contains(&self.block_k)
            && GROUP_M.contains(&self.group_m)
            && NUM_WARPS.contains(&self.num_warps)
            && NUM_STAGES.contains(&self.num_stages)
    }

    /// Shared memory of `num_stages` buffers of an A and a B tile: what vLLM's tuner space is
    /// filtered by here (`carver.moe_kernel.tuner_space`, the harness's legal space). Triton
    /// allocates less for `mma.sync` tiles ([`MoeConfig::allocated_smem_bytes`]).
    pub fn smem_bytes(&self, p: &MoeProblem) -> u64 {
        u64::from(self.num_stages) * self.stage_bytes(p)
    }

    /// One stage's A and W tiles.
    fn stage_bytes(&self, p: &MoeProblem) -> u64 {
        (u64::from(self.block_m) + u64::from(self.block_n))
            * u64::from(self.effective_block_k(p))
            * u64::from(p.dtype.input().bytes())
    }

    /// Shared memory Triton allocates for the loop when it runs on `mma`
    /// ([`TritonRules::pipelined_buffers`]), which sets how many blocks share an SM. The tuner
    /// space is still filtered by [`MoeConfig::smem_bytes`], as vLLM's tuner and the harness
    /// filter it.
    pub(crate) fn allocated_smem_bytes(&self, p: &MoeProblem, mma: InstructionFamily) -> u64 {
        u64::from(TritonRules::pipelined_buffers(self.num_stages, mma)) * self.stage_bytes(p)
    }
}

/// Why `c` cannot run on `arch` (`Ok` = it is a legal point of the space).
pub fn check_moe_config(c: &MoeConfig, p: &MoeProblem, arch: &Arch) -> Result<(), ConfigError> {
    let rule = |what: String| Err(ConfigError::rule(Family::Triton, what));
    if !c.in_space() {
        return rule(format!(
            "{c:?} is outside vLLM's tuning space (BLOCK_SIZE_M {BLOCK_M:?}, BLOCK_SIZE_N \
             {BLOCK_N:?}, BLOCK_SIZE_K {BLOCK_K:?}, GROUP_SIZE_M {GROUP_M:?}, num_warps \
             {NUM_WARPS:?}, num_stages {NUM_STAGES:?})"
        ));
    }
    // benchmark_moe.py drops block-quantized configs whose BLOCK_SIZE_K is not a multiple of
    // block_k or whose BLOCK_SIZE_N is not a multiple of block_n.
    if let Some([bn, bk]) = p.block_shape
        && (c.block_k % bk != 0 || c.block_n % bn != 0)
    {
        return rule(format!(
            "with block_shape [{bn}, {bk}] BLOCK_SIZE_N must be a multiple of {bn} and \
             BLOCK_SIZE_K of {bk}"
        ));
    }
    let smem = c.smem_bytes(p);
    let allowed = arch.smem_per_block();
    if smem > allowed {
        return Err(ConfigError::SharedMemory {
            needed: smem,
            allowed,
        });
    }
    let threads = 32 * c.num_warps;
    if threads > arch.sm.max_threads_per_block {
        return Err(ConfigError::Threads {
            threads,
            allowed: arch.sm.max_threads_per_block,
        });
    }
    tile_of(c, &p.gate_up, p, arch).ok_or_else(|| {
        ConfigError::rule(
            Family::Triton,
            "no tensor instruction of this GPU runs this dtype",
        )
    })?;
    Ok(())
}

/// The configuration in the dense model's terms, for `gemm`, with the warp layout Triton gives
/// it (`TritonRules::layout`: wgmma warpgroups when a warpgroup can own 64 rows, else mma.sync).
pub(crate) fn tile_of(
    c: &MoeConfig,
    gemm: &Problem,
    p: &MoeProblem,
    arch: &Arch,
) -> Option<TileConfig> {
    let layout = TritonRules.layout(c.block_m, c.block_n, c.num_warps, gemm, arch)?;
    Some(TileConfig {
        block_m: c.block_m,
        block_n: c.block_n,
        block_k: c.effective_block_k(p),
        warps_m: layout.warps_m,
        warps_n: layout.warps_n,
        producer_warps: 0,
        stages: c.num_stages,
        raster: Raster {
            order: RasterOrder::GroupedRows,
            group: c.group_m,
        },
        split_k: 1,
        cluster_m: 1,
        cluster_n: 1,
        persistent: false,
        mma: layout.mma,
        swap_ab: false,
    })
}

/// What one block of `tile` holds: the pipeline's shared memory, and Triton's register estimate
/// capped at the GPU's limit (Triton spills rather than refusing to compile).
pub(crate) fn resources_of(
    c: &MoeConfig,
    tile: &TileConfig,
    gemm: &Problem,
    p: &MoeProblem,
    arch: &Arch,
) -> Resources {
    let regs = registers_per_thread(tile, gemm, p);
    let per_block_cap = arch.registers.per_block / tile.threads().max(1);
    Resources {
        smem_bytes: c.allocated_smem_bytes(p, tile.mma),
        registers_per_thread: regs.min(arch.registers.per_thread_max).min(per_block_cap),
    }
}

/// Whether `c` needs more registers per thread than the GPU allows (Triton's need for the gate/up
/// GEMM's tile, [`registers_per_thread`]). vLLM's tuner space keeps such configs and Triton
/// compiles them: it spills to local memory, or, when the need is just over the limit, keeps the
/// block-scaled loop's scale loads out of registers until the step's tensor-core product is done,
/// so their latency is exposed every K step. The dense Triton family rejects the same tiles
/// (`family::check_fits`), and the recommender never picks one.
pub fn exceeds_registers(c: &MoeConfig, p: &MoeProblem, arch: &Arch) -> bool {
    tile_of(c, &p.gate_up, p, arch).is_none_or(|tile| {
        registers_per_thread(&tile, &p.gate_up, p) > arch.registers.per_thread_max
    })
}

/// Triton's register need for one thread of `tile`: the dense family's estimate, plus, with
/// block scales, the step's product and the scales that multiply it. The block-scaled kernel
/// scales each `BLOCK_SIZE_K` step's product before adding it (`acc += dot(a, b) * a_scale *
/// b_scale`), so the product lives in registers beside the accumulator.
fn registers_per_thread(tile: &TileConfig, gemm: &Problem, p: &MoeProblem) -> u32 {
    let dense = TritonRules.resources(tile, gemm).registers_per_thread;
    if p.block_shape.is_none() {
        return dense;
    }
    let product =
        u64::from(tile.block_m) * u64::from(tile.block_n) / u64::from(tile.threads().max(1));
    dense
        .saturating_add(u32::try_from(product).unwrap_or(u32::MAX))
        .saturating_add(block_scale_registers(tile))
}

/// Registers a thread holds for the block scales it loads every K step: the value and its
/// 64-bit pointer (three registers) per scale. The scale loads are plain loads in the loop
/// (Triton does not pipeline them): A's, one per accumulator row the thread owns; B's, when the
/// tile has at least as many columns as the block has threads, one per thread, shared through
/// shared memory, and otherwise in the accumulator's layout, each thread loading the scale of
/// every column it owns. That is Triton 3.6's layout choice, read off its TTGIR and SASS for sm_90
/// on every tile of vLLM's space with `BLOCK_SIZE_N` 128 or 256 (the ones [128, 128] block scales
/// allow): the count matches the scale loads of the compiled main loop on every such tile that
/// fits the register file but 32 x 128 with 8 warps (10 counted, 8 compiled). 128 x 128 with 8
/// warps loads 34 scales a thread, compiles to 255 registers and issues 16 of the loads after
/// the product's wait; that config measured at most 0.92 of each point's best on all 288 points
/// of the block-scaled runs in `benches/moe/runs`.
fn block_scale_registers(tile: &TileConfig) -> u32 {
    let threads = tile.threads().max(1);
    // mma.sync (m16n8) and wgmma (m64nN) fragments alike: a thread owns 2 of each warp's 16 rows
    // and 2 of every 8 columns.
    let rows = (tile.block_m / tile.warps_m.max(1)).div_ceil(8);
    let cols = if tile.block_n >= threads {
        tile.block_n / threads
    } else {
        (tile.block_n / tile.warps_n.max(1)).div_ceil(4)
    };
    3 * (rows + cols)
}

/// Every point of the space, in a fixed order (what an exhaustive sweep measures).
pub fn whole_space() -> Vec<MoeConfig> {
    let mut out = Vec::with_capacity(1920);
    for block_m in BLOCK_M {
        for block_n in BLOCK_N {
            for block_k in BLOCK_K {
                for num_warps in NUM_WARPS {
                    for num_stages in NUM_STAGES {
                        for group_m in GROUP_M {
                            out.push(MoeConfig {
                                block_m,
                                block_n,
                                block_k,
                                group_m,
                                num_warps,
                                num_stages,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// The legal points of the space for this layer on this GPU.
pub fn legal_space(p: &MoeProblem, arch: &Arch) -> Vec<MoeConfig> {
    whole_space()
        .into_iter()
        .filter(|c| check_moe_config(c, p, arch).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moe::{MoeDtype, MoeTemplate};
    use carver_arch::HardwareDb;

    /// The dynamic shared memory Nsight Compute read for fused-MoE configs on the H200
    /// (`benches/moe/runs/h200-2026-11-29-probe-*`): `num_stages - 1` stage buffers for
    /// `mma.sync` tiles, `num_stages` for `wgmma` tiles (64 rows or more, warps in fours).
    #[test]
    fn blocks_hold_the_stage_buffers_triton_allocates() {
        let db = HardwareDb::embedded().unwrap();
        let h200 = db.get("h200").unwrap();
        // (dtype, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages, bytes)
        let measured = [
            (MoeDtype::Bf16, 16, 32, 64, 4, 3, 12_288),
            (MoeDtype::Bf16, 16, 32, 128, 4, 2, 12_288),
            (MoeDtype::Bf16, 16, 32, 128, 4, 5, 49_152),
            (MoeDtype::Bf16, 32, 128, 64, 4, 3, 40_960),
            (MoeDtype::Bf16, 64, 64, 64, 4, 3, 49_152),
            (MoeDtype::Bf16, 64, 64, 128, 4, 4, 131_072),
            (MoeDtype::Bf16, 64, 128, 64, 8, 3, 73_728),
            (MoeDtype::Bf16, 64, 256, 64, 4, 5, 204_800),
            (MoeDtype::Bf16, 64, 256, 64, 8, 4, 163_840),
            (MoeDtype::Fp8W8a8, 16, 64, 128, 4, 4, 30_720),
            (MoeDtype::Fp8W8a8, 16, 128, 128, 4, 5, 73_728),
            (MoeDtype::Fp8W8a8, 64, 128, 256, 4, 4, 196_608),
            (MoeDtype::Fp8W8a8, 128, 128, 128, 8, 3, 98_304),
            (MoeDtype::Fp8W8a8, 256, 128, 128, 8, 4, 196_608),
        ];
        for (dtype, block_m, block_n, block_k, num_warps, num_stages, bytes) in measured {
            let p = MoeTemplate::new(128, 8, 2048, 768)
                .with_dtype(dtype)
                .validate(h200)
                .unwrap();
            let c = MoeConfig {
                block_m,
                block_n,
                block_k,
                group_m: 1,
                num_warps,
                num_stages,
            };
            let tile = tile_of(&c, &p.gate_up, &p, h200).unwrap();
            let res = resources_of(&c, &tile, &p.gate_up, &p, h200);
            assert_eq!(res.smem_bytes, bytes, "{c:?} {dtype:?}");
        }
    }

    /// Scale loads a thread issues per K step in the main loop of Triton 3.6's sm_90 binary of
    /// the block-scaled fused-MoE kernel (counted in its SASS), against three registers each.
    #[test]
    fn block_scale_registers_follow_the_compiled_scale_loads() {
        let db = HardwareDb::embedded().unwrap();
        let h100 = db.get("h100").unwrap();
        let p = MoeTemplate::new(128, 8, 4096, 1536)
            .with_dtype(MoeDtype::Fp8W8a8)
            .with_block_shape(Some([128, 128]))
            .validate(h100)
            .unwrap();
        // (BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps, scale loads in the compiled loop)
        let compiled = [
            (16, 128, 4, 3),
            (16, 128, 8, 6),
            (16, 256, 8, 3),
            (32, 128, 4, 5),
            (32, 256, 4, 6),
            (64, 128, 4, 3),
            (64, 128, 8, 18),
            (64, 256, 8, 3),
            (128, 128, 8, 34),
        ];
        for (block_m, block_n, num_warps, loads) in compiled {
            let c = MoeConfig {
                block_m,
                block_n,
                block_k: 128,
                group_m: 1,
                num_warps,
                num_stages: 3,
            };
            let tile = tile_of(&c, &p.gate_up, &p, h100).unwrap();
            assert_eq!(block_scale_registers(&tile), 3 * loads, "{c:?}");
        }
    }
}
