//! The fused-MoE Triton kernel's configurations: vLLM's own tuning space
//! (`benchmarks/kernels/benchmark_moe.py`, `get_configs_compute_bound`, CUDA branch), filtered by
//! what compiles and what block-quantized fp8 allows.

use carver_arch::Arch;
use serde::{Deserialize, Serialize};

use super::template::MoeProblem;
use crate::family::Resources;
use crate::family::{ConfigError, Family, FamilyRules, TritonRules, compute_layout};
use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

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

    /// Shared memory Triton's pipeliner allocates: `num_stages` buffers of an A and a B tile.
    pub fn smem_bytes(&self, p: &MoeProblem) -> u64 {
        u64::from(self.num_stages)
            * (u64::from(self.block_m) + u64::from(self.block_n))
            * u64::from(self.effective_block_k(p))
            * u64::from(p.dtype.input().bytes())
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

/// The configuration in the dense model's terms, for `gemm` (its warp layout follows Triton's:
/// wgmma warpgroups when a warpgroup can own 64 rows, else mma.sync).
pub(crate) fn tile_of(
    c: &MoeConfig,
    gemm: &Problem,
    p: &MoeProblem,
    arch: &Arch,
) -> Option<TileConfig> {
    let wgmma_ok = c.block_m >= 64 && c.num_warps % 4 == 0;
    let layout = compute_layout(c.block_m, c.block_n, c.num_warps, wgmma_ok, gemm, arch)
        // A tile too small for the warps: Triton still runs it, the extra warps share the work.
        .or_else(|| compute_layout(c.block_m, c.block_n, c.num_warps, false, gemm, arch))
        .or_else(|| {
            let l = compute_layout(c.block_m, c.block_n, 4, false, gemm, arch)?;
            Some(crate::family::WarpLayout {
                warps_m: l.warps_m * (c.num_warps / 4),
                ..l
            })
        })?;
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
        smem_bytes: c.smem_bytes(p),
        registers_per_thread: regs.min(arch.registers.per_thread_max).min(per_block_cap),
    }
}

/// Whether Triton would spill registers for `c` (its register estimate for the gate/up GEMM's
/// tile above the GPU's per-thread limit). vLLM's tuner space keeps such configs and Triton
/// compiles them, spilling the accumulator to local memory; the dense Triton family rejects the
/// same tiles (`family::check_fits`), so the recommender never picks one.
pub fn would_spill(c: &MoeConfig, p: &MoeProblem, arch: &Arch) -> bool {
    tile_of(c, &p.gate_up, p, arch).is_none_or(|tile| {
        registers_per_thread(&tile, &p.gate_up, p) > arch.registers.per_thread_max
    })
}

/// Triton's register estimate for one thread of `tile`: the dense family's, plus, with block
/// scales, a second fp32 accumulator. The block-scaled kernel scales each `BLOCK_SIZE_K` step's
/// product before adding it (`acc += dot(a, b) * a_scale * b_scale`), so the step's product
/// lives in registers beside the accumulator. On an H100, every 128x128 tile with 4 warps and
/// every 128x256 or 256x128 tile compiled with 70-438 registers spilled in fp8 block mode
/// (`benches/moe/runs/h100-2026-11-25-fp8-qwen3-30b`, the `binaries` record) while none of
/// the bf16 picks spilled.
fn registers_per_thread(tile: &TileConfig, gemm: &Problem, p: &MoeProblem) -> u32 {
    let dense = TritonRules.resources(tile, gemm).registers_per_thread;
    if p.block_shape.is_none() {
        return dense;
    }
    let product =
        u64::from(tile.block_m) * u64::from(tile.block_n) / u64::from(tile.threads().max(1));
    dense.saturating_add(u32::try_from(product).unwrap_or(u32::MAX))
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
