//! Prices a fused-MoE configuration with the dense Triton model of `crate::cost`, one GEMM at a
//! time, for one batch of `M` tokens.
//!
//! The fused-MoE kernel (vLLM `fused_moe_kernel`) is a grouped GEMM: tokens are sorted by expert
//! and each expert's rows padded to `BLOCK_SIZE_M` (`moe_align_block_size`); block `pid_m` reads
//! its expert id and multiplies that expert's gathered rows by that expert's weights. The grid is
//! `cdiv(padded rows, BM) x cdiv(N_out, BN)` in `GROUP_SIZE_M` order. That is the dense model's
//! batched GEMM with one batch per *active* expert:
//!
//! - batch = expected active experts, `sum_e 1 - (1 - q_e)^M` (each streams its own weight slice
//!   from DRAM: the dense model's per-batch B; a slice that fits in the L2 is read once however
//!   many row blocks of its expert run, `Pricer`'s `b_fits_l2`);
//! - row blocks per active expert = expected `sum_e E[ceil(count_e / BM)]` over the active
//!   experts ([`super::routing`]). A whole number of blocks per batch is what the dense model
//!   takes, so a fractional expectation is priced at the two neighbouring whole numbers and
//!   interpolated;
//! - A rows are gathered through the sorted token ids: pointer loads (no TMA descriptor can
//!   describe them) of `BLOCK_SIZE_K` contiguous elements per row, which is the dense Triton
//!   family's `cp.async` path with row-major A (line efficiency of `BLOCK_SIZE_K` rows);
//! - B is `[E, N_out, K]` with K contiguous: column-major K x N per expert.
//!
//! Waves, occupancy, L2 and DRAM traffic, latency and the epilogue are the dense model's.
//! Blocks past the padded rows exit after one load (`pid_m * BM >= num_tokens_post_padded`) and
//! the routing-weight multiply is one scale per row: neither is priced. With block scales every
//! K step's product is scaled before it is accumulated (`Pricer::with_block_scales`).

use carver_arch::Arch;

use super::routing::Occupancy;
use super::space::{MoeConfig, resources_of, tile_of};
use super::template::MoeProblem;
use crate::cost::{OutOfLoop, Pricer, blocks_per_sm};
use crate::family::TritonRules;
use crate::prediction::Prediction;
use crate::problem::Problem;

/// Which of the layer's two GEMMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gemm {
    /// `[M * topk, hidden] x [hidden, 2N]`.
    GateUp,
    /// `[M * topk, N] x [N, hidden]`.
    Down,
}

impl Gemm {
    pub const BOTH: [Gemm; 2] = [Gemm::GateUp, Gemm::Down];
}

/// One GEMM's verdict for one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPrediction {
    /// Predicted time, microseconds (interpolated between whole row blocks per expert).
    pub time_us: f64,
    /// Rows the kernel computes, padding included: `BM * sum_e E[ceil(count_e / BM)]`.
    pub padded_rows: f64,
    /// Experts with at least one token, expected.
    pub active_experts: f64,
    /// Blocks with work: row blocks x `cdiv(N_out, BN)`.
    pub grid: f64,
    /// The dense model's full prediction at the nearest whole number of row blocks per expert
    /// (its breakdown says where the time goes).
    pub detail: Prediction,
}

/// A dense problem the dense model prices, with its share of the interpolation.
pub(crate) struct Variant {
    pub weight: f64,
    pub problem: Problem,
}

/// The dense problems standing for one GEMM at one `BLOCK_SIZE_M`.
pub(crate) struct GemmVariants {
    pub occupancy: Occupancy,
    pub n_out: u64,
    pub variants: Vec<Variant>,
}

/// The dense problems of `gemm` for `m` tokens at `block_m`, given the routing's expectations.
pub(crate) fn variants(
    p: &MoeProblem,
    gemm: Gemm,
    m: u64,
    block_m: u32,
    occ: Occupancy,
) -> GemmVariants {
    let base = match gemm {
        Gemm::GateUp => &p.gate_up,
        Gemm::Down => &p.down,
    };
    let experts = occ.active_experts.round().clamp(1.0, f64::from(p.experts));
    let blocks = (occ.row_blocks / experts).max(1.0);
    let rows = (m * u64::from(p.topk)) as f64 / experts;
    let (lo, hi) = (blocks.floor(), blocks.ceil());
    let bm = u64::from(block_m);
    let problem = |whole: f64, weight: f64| {
        let whole = whole as u64;
        // As many real rows as the routing gives, within the whole number of blocks.
        let m_rows = (rows.round() as u64).clamp((whole - 1) * bm + 1, whole * bm);
        Variant {
            weight,
            problem: Problem {
                m: m_rows,
                batch: experts as u64,
                ..base.clone()
            },
        }
    };
    let variants = if lo == hi {
        vec![problem(lo, 1.0)]
    } else {
        vec![problem(lo, hi - blocks), problem(hi, blocks - lo)]
    };
    GemmVariants {
        occupancy: occ,
        n_out: base.n,
        variants,
    }
}

/// Bytes of the shortest contiguous run at which weight rows stream at the full DRAM rate: two
/// 128-byte L2 lines. On an H100, 16-row tiles reading the K-contiguous expert weights in runs of
/// one line (BLOCK_SIZE_K 64 in bf16) reached 0.93-0.96 of the best 128- or 256-element config
/// at every N tile, on every model of `benches/moe/runs/h100-2026-11-25-main{1,2}` (M 8-128,
/// weight-bandwidth bound); runs of 256 and 512 bytes were level with each other. HBM serves
/// adjacent lines of one open DRAM row more cheaply than lines in different rows.
const FULL_RATE_RUN_BYTES: u64 = 256;
/// Streaming rate of one-line (128-byte) runs relative to `FULL_RATE_RUN_BYTES` runs, measured
/// as above.
const ONE_LINE_RUN_EFFICIENCY: f64 = 0.95;

/// Share of the DRAM rate the expert weights stream at with `c`: each block reads its weight
/// tile as `BLOCK_SIZE_N` rows of `BLOCK_SIZE_K` contiguous elements (the whole row when the
/// GEMM's K is no longer: then consecutive rows are contiguous too).
pub(crate) fn weight_stream_efficiency(c: &MoeConfig, gemm: &Problem, p: &MoeProblem) -> f64 {
    let bk = u64::from(c.effective_block_k(p));
    if bk >= gemm.k {
        return 1.0;
    }
    let run = bk * u64::from(p.dtype.input().bytes());
    if run >= FULL_RATE_RUN_BYTES {
        1.0
    } else {
        // Shorter than a line: only part of each fetched line is used as well.
        ONE_LINE_RUN_EFFICIENCY * (run as f64 / 128.0).min(1.0)
    }
}

/// Dependent L2 round trips a block of the fused-MoE kernel makes before it can address its
/// first stage: the count of padded rows (blocks past it exit), then its rows' pair ids and its
/// expert id, from which its A rows and its expert's weights are addressed. The index arrays are
/// small and read by every block, so they are L2 hits.
const INDEX_LOADS_BEFORE_FIRST_STAGE: u32 = 2;

/// Instructions each warp of a fused-MoE block issues whatever its tile (Nsight Compute on the
/// H200, Triton 3.6, eleven down GEMMs of one or two K steps: docs/RESULTS.md, "A block's own
/// path follows its loads"): the index loads, the routing weight, the loop's control.
const OWN_PATH_BASE_INSTRUCTIONS: f64 = 260.0;
/// Instructions a warp issues per 16-byte chunk each of its threads loads in one stage: the
/// gathered rows' and the expert's addresses and masks, computed once for the block, the copy
/// itself and its shared-memory address (the same eleven GEMMs: 257 + 67 a chunk reproduced
/// 424 to 1,768 instructions a warp within 25%).
const OWN_PATH_INSTRUCTIONS_PER_CHUNK: f64 = 67.0;
/// Cycles between a warp's instructions when it has its scheduler to itself: each waits for the
/// one before (Nsight Compute's warp latency per issued instruction, 4.4-5.1, for blocks alone
/// on their SM; a Hopper SM has four schedulers).
const DEPENDENT_ISSUE_CYCLES: f64 = 4.5;

/// Cycles a fused-MoE block spends on its own path outside its K loop, beyond what the dense
/// model prices (its start, index loads, fill and iterations): the instructions one warp issues
/// one after another to address its tile and write it. A round of resident blocks lasts at least
/// one block's path, so where blocks run one to three K steps (the down GEMM at small per-shard
/// N) their time follows the rounds, not the bytes: measured on the H200, down GEMMs of 1-3 K
/// steps take 3.2-5.5 us a round (docs/RESULTS.md, "A round of short fused-MoE blocks").
fn out_of_loop(c: &MoeConfig, p: &MoeProblem) -> OutOfLoop {
    let threads = f64::from(32 * c.num_warps);
    let stage_bytes = f64::from(c.effective_block_k(p))
        * f64::from(c.block_m + c.block_n)
        * f64::from(p.dtype.input().bytes());
    let chunks = stage_bytes / 16.0 / threads;
    OutOfLoop {
        instructions_per_warp: OWN_PATH_BASE_INSTRUCTIONS
            + OWN_PATH_INSTRUCTIONS_PER_CHUNK * chunks,
        dependent_issue_cycles: DEPENDENT_ISSUE_CYCLES,
    }
}

/// The dense pricer as the fused-MoE kernel runs `c`: the expert weights at their streaming
/// rate, each block's start lengthened by its index loads, each round no shorter than one
/// block's own path, and with block scales each K step's product scaled before it is
/// accumulated.
///
/// The index loads weigh most where a block's main loop is short (the down GEMM's K is the
/// shard's intermediate size) and few blocks share an SM to hide them: measured on the H200
/// (`benches/moe/probe_gemms.py`, E 128, top-8, hidden 2048, N 192, 1024 tokens; docs/RESULTS.md,
/// "The fused-MoE kernel's short blocks"), the down GEMM of 64 x 64 with K 128 and 4 stages (one
/// block an SM) took 2.29x the time of K 64 (three); without them the model priced 1.51x.
fn moe_pricer<'a>(pricer: Pricer<'a>, c: &MoeConfig, gemm: &Problem, p: &MoeProblem) -> Pricer<'a> {
    let pricer = pricer
        .with_dram_efficiency(weight_stream_efficiency(c, gemm, p))
        .with_dependent_loads_before_start(INDEX_LOADS_BEFORE_FIRST_STAGE)
        .with_own_path_floor(out_of_loop(c, p));
    if p.block_shape.is_some() {
        pricer.with_block_scales()
    } else {
        pricer
    }
}

/// Predicted time of `c` for one GEMM's variants, seconds (`None`: no block fits an SM).
pub(crate) fn time_of(
    c: &MoeConfig,
    g: &GemmVariants,
    pricers: &[Pricer<'_>],
    p: &MoeProblem,
    arch: &Arch,
) -> Option<f64> {
    let mut total = 0.0;
    for (v, pricer) in g.variants.iter().zip(pricers) {
        let tile = tile_of(c, &v.problem, p, arch)?;
        let res = resources_of(c, &tile, &v.problem, p, arch);
        let pricer = moe_pricer(*pricer, c, &v.problem, p);
        let terms = pricer.terms(&tile);
        total += v.weight * pricer.time_with(&terms, &tile, blocks_per_sm(&tile, res, arch))?;
    }
    Some(total)
}

/// One pricer per variant of `g` (`None` when the GPU has no peak for the problem's class).
pub(crate) fn pricers_for<'a>(g: &'a GemmVariants, arch: &'a Arch) -> Option<Vec<Pricer<'a>>> {
    g.variants
        .iter()
        .map(|v| Pricer::new(&TritonRules, &v.problem, arch))
        .collect()
}

/// The full per-GEMM prediction of `c`, with `g`'s pricers (`pricers_for`).
pub(crate) fn predict_gemm(
    c: &MoeConfig,
    g: &GemmVariants,
    pricers: &[Pricer<'_>],
    p: &MoeProblem,
    arch: &Arch,
) -> Option<GemmPrediction> {
    let time = time_of(c, g, pricers, p, arch)?;
    let nearest = g
        .variants
        .iter()
        .zip(pricers)
        .max_by(|a, b| a.0.weight.total_cmp(&b.0.weight))?;
    let tile = tile_of(c, &nearest.0.problem, p, arch)?;
    let res = resources_of(c, &tile, &nearest.0.problem, p, arch);
    let detail = moe_pricer(*nearest.1, c, &nearest.0.problem, p).predict(&tile, res)?;
    let row_blocks = g.occupancy.row_blocks;
    Some(GemmPrediction {
        time_us: time * 1e6,
        padded_rows: row_blocks * f64::from(c.block_m),
        active_experts: g.occupancy.active_experts,
        grid: row_blocks * g.n_out.div_ceil(u64::from(c.block_n)) as f64,
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moe::{MoeDtype, MoeTemplate};
    use carver_arch::HardwareDb;

    /// Predicted time of `c` for one GEMM of the layer at `m` tokens, seconds.
    fn gemm_time(p: &MoeProblem, arch: &Arch, gemm: Gemm, m: u64, c: &MoeConfig) -> f64 {
        let occupancy = p.routing.occupancy(m, &[c.block_m])[0];
        let g = variants(p, gemm, m, c.block_m, occupancy);
        let pricers = pricers_for(&g, arch).unwrap();
        time_of(c, &g, &pricers, p, arch).unwrap()
    }

    /// Predicted time of `c` for the whole layer at `m` tokens, seconds.
    fn layer_time(p: &MoeProblem, arch: &Arch, m: u64, c: MoeConfig) -> f64 {
        Gemm::BOTH
            .iter()
            .map(|&gemm| gemm_time(p, arch, gemm, m, &c))
            .sum()
    }

    /// Runs `check` on layer `t` validated for the H200.
    fn on_h200<R>(t: MoeTemplate, check: impl FnOnce(&MoeProblem, &Arch) -> R) -> R {
        let db = HardwareDb::embedded().unwrap();
        let h200 = db.get("h200").unwrap();
        check(&t.validate(h200).unwrap(), h200)
    }

    /// A 4-warp config of tile `block_m` x `block_n` x `block_k`, `num_stages` deep.
    fn four_warps(block_m: u32, block_n: u32, block_k: u32, num_stages: u32) -> MoeConfig {
        MoeConfig {
            block_m,
            block_n,
            block_k,
            group_m: 1,
            num_warps: 4,
            num_stages,
        }
    }

    /// The down GEMM of Qwen3-30B-A3B at TP 4 has K 192: one or two K steps a block, so each
    /// block's start weighs on its time and resident blocks hide it. Measured on the H200 with
    /// the GEMMs timed alone (`benches/moe/probe_gemms.py`, 1024 tokens; docs/RESULTS.md, "The
    /// fused-MoE kernel's short blocks"): 64 x 64 with K 128 and 4 stages (one block an SM) took
    /// 2.29x the time of K 64 (three blocks an SM); without its index loads the model put it at
    /// 1.51x.
    #[test]
    fn index_loads_weigh_on_blocks_with_few_k_steps() {
        on_h200(MoeTemplate::new(128, 8, 2048, 768).with_tp(4), |p, h200| {
            let down_time =
                |block_k| gemm_time(p, h200, Gemm::Down, 1024, &four_warps(64, 64, block_k, 4));
            let ratio = down_time(128) / down_time(64);
            assert!(ratio > 1.6, "K 128 over K 64: {ratio}");
        });
    }

    /// Kimi-K2 at TP 16 has N 128: its down GEMM's blocks run one K step (K 128) or two (K 64),
    /// and at 4 tokens there are 7,168 of them. Measured on the H200 with Nsight Compute
    /// (docs/RESULTS.md, "A round of short fused-MoE blocks"): 16 x 32 with K 128 and 5 stages
    /// (4 blocks an SM, 3.5 us a round) took 47.2 us, K 64 (9 blocks an SM) 27.2 us, 1.74x.
    /// Without the floor of a block's own path the model priced 1.31x: resident blocks hid
    /// every block's path.
    #[test]
    fn a_round_of_one_step_blocks_lasts_a_blocks_path() {
        on_h200(
            MoeTemplate::new(384, 8, 7168, 2048).with_tp(16),
            |p, h200| {
                let down_time =
                    |block_k| gemm_time(p, h200, Gemm::Down, 4, &four_warps(16, 32, block_k, 5));
                let ratio = down_time(128) / down_time(64);
                assert!(ratio > 1.5, "K 128 over K 64: {ratio}");
                // Seven thousand one-step blocks take tens of microseconds, as measured, not the
                // 19-25 the model priced without the floor.
                assert!(down_time(64) > 25e-6, "K 64: {} us", down_time(64) * 1e6);
            },
        );
    }

    /// A block's own path grows with the loads each of its threads addresses: GLM-4.5 at TP 8,
    /// fp8 per tensor, one token. The down GEMM (K 192, one or two K steps a block) measured on
    /// the H200 (benches/moe/runs/h200-2026-11-29-probe-fp8-decode): 64 x 128 x 256, one block an
    /// SM, 1,768 instructions a warp, 18.6 us; 16 x 64 x 128, 759 instructions, 9.0 us (2.07x;
    /// Nsight Compute 16.4 and 6.5 us). With a fixed path outside the loop the model put it at
    /// 1.67x.
    #[test]
    fn a_blocks_own_path_follows_its_loads() {
        let glm = MoeTemplate::new(160, 8, 5120, 1536)
            .with_tp(8)
            .with_dtype(MoeDtype::Fp8W8a8);
        on_h200(glm, |p, h200| {
            let down = |c| gemm_time(p, h200, Gemm::Down, 1, &c);
            let ratio = down(four_warps(64, 128, 256, 4)) / down(four_warps(16, 64, 128, 4));
            assert!(ratio > 2.0, "64 x 128 x 256 over 16 x 64 x 128: {ratio}");
        });
    }

    /// With block scales every K step waits for its scale loads, which Triton does not pipeline:
    /// one block of two warpgroups per SM waits alone, two blocks of one warpgroup cover each
    /// other's waits. Measured on the H200 with the GEMMs timed alone
    /// (benches/moe/runs/h200-2026-11-28-v7-fp8-holdout9-gemms): at M >= 1024, 64 x 256 with 8
    /// warps took 1.07x the time of 64 x 128 with 4 warps (median of 16 points); without the wait
    /// the model put it at 0.91x.
    #[test]
    fn block_scaled_steps_wait_for_their_scale_loads() {
        let mixtral = MoeTemplate::new(8, 2, 4096, 14336)
            .with_tp(8)
            .with_dtype(MoeDtype::Fp8W8a8)
            .with_block_shape(Some([128, 128]));
        let config = |block_n, num_warps, num_stages| MoeConfig {
            block_m: 64,
            block_n,
            block_k: 128,
            group_m: 1,
            num_warps,
            num_stages,
        };
        on_h200(mixtral, |p, h200| {
            for m in [1024, 2048, 4096] {
                let wide = layer_time(p, h200, m, config(256, 8, 5));
                let narrow = layer_time(p, h200, m, config(128, 4, 4));
                assert!(
                    wide > narrow,
                    "M {m}: 64 x 256 x 8 warps {wide} <= 64 x 128 x 4 warps {narrow}"
                );
            }
        });
    }

    /// With block scales each K step's product is scaled before it is accumulated, after the
    /// step's tensor-core work: the two warpgroups of one 8-warp block do it in step, while two
    /// 4-warp blocks overlap one's scaling with the other's math. Measured on the H200
    /// (benches/moe/runs/h200-2026-11-25-v3-fp8*): at M >= 1024, 128 x 128 with 8 warps ran at
    /// 0.70-0.85 of 64 x 128 with 4 warps; per-tensor scales have no such step. (The recommender
    /// no longer ranks 128 x 128 with 8 warps in block mode: it needs more registers than a
    /// thread has. The term still prices it.)
    #[test]
    fn block_scales_cost_one_block_of_two_warpgroups_more_than_two_blocks() {
        let db = HardwareDb::embedded().unwrap();
        let h200 = db.get("h200").unwrap();
        let t = MoeTemplate::new(128, 8, 4096, 1536).with_dtype(MoeDtype::Fp8W8a8);
        let per_tensor = t.validate(h200).unwrap();
        let block = t.with_block_shape(Some([128, 128])).validate(h200).unwrap();
        let config = |block_m, num_warps| MoeConfig {
            block_m,
            block_n: 128,
            block_k: 128,
            group_m: 1,
            num_warps,
            num_stages: 4,
        };
        let ratio = |p: &MoeProblem| {
            layer_time(p, h200, 2048, config(128, 8)) / layer_time(p, h200, 2048, config(64, 4))
        };
        assert!(
            ratio(&block) > ratio(&per_tensor) * 1.05,
            "block scales: {} per-tensor: {}",
            ratio(&block),
            ratio(&per_tensor)
        );
        // Scaling only adds work.
        assert!(
            layer_time(&block, h200, 2048, config(64, 4))
                >= layer_time(&per_tensor, h200, 2048, config(64, 4))
        );
    }
}
