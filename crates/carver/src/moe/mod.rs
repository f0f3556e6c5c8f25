//! Fused mixture-of-experts layers: the template ([`MoeTemplate`]), the fused-MoE Triton kernel's
//! space ([`space`]), its cost ([`cost`], built on the dense Triton model), routing expectations
//! ([`routing`]) and the file names serving engines look for ([`file_name`]).
//!
//! ```
//! use carver::moe::{MoeTemplate, recommend_moe};
//! use carver::TopK;
//!
//! let db = carver_arch::HardwareDb::embedded().unwrap();
//! let h100 = db.get("h100").unwrap();
//! let mixtral = MoeTemplate::new(8, 2, 4096, 14336).with_tp(2);
//! let hints = recommend_moe(&mixtral, h100, 64, TopK::DEFAULT).unwrap();
//! assert_eq!(hints[0].rank, 1);
//! ```

pub mod cost;
pub mod file_name;
pub mod routing;
pub mod space;
pub mod template;

use carver_arch::Arch;

pub use cost::{Gemm, GemmPrediction};
pub use file_name::{Engine, config_file_name, device_name};
pub use space::{MoeConfig, check_moe_config, exceeds_registers, legal_space, whole_space};
pub use template::{MoeDtype, MoeProblem, MoeTemplate, Routing};

use crate::cost::Pricer;
use crate::error::CarverError;
use crate::template::MAX_DIM;
use crate::topk::TopK;
use cost::{GemmVariants, predict_gemm, pricers_for, time_of, variants};
use space::BLOCK_M;

/// The batch sizes vLLM's tuner writes (benchmark_moe.py, `batch_sizes` default).
pub const BATCH_SIZES: [u64; 18] = [
    1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096,
];

/// One ranked configuration of the fused-MoE kernel: one config shared by both GEMMs, as the
/// kernel's callers use it, ranked by the sum of their times.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeHint {
    /// 1-based position in the ranking.
    pub rank: usize,
    pub config: MoeConfig,
    /// Gate/up plus down, microseconds.
    pub time_us: f64,
    pub gate_up: GemmPrediction,
    pub down: GemmPrediction,
}

/// The ranking for one batch size.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeBatch {
    /// Tokens in the batch.
    pub m: u64,
    pub hints: Vec<MoeHint>,
}

/// A whole config file's worth of rankings for one GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeFile {
    pub problem: MoeProblem,
    /// The GPU's name as the engines spell it in file names.
    pub device_name: String,
    /// vLLM's file name for this layer on this GPU.
    pub file_name: String,
    pub batches: Vec<MoeBatch>,
}

/// The `topk` best configurations of the fused-MoE kernel for a batch of `m` tokens.
pub fn recommend_moe(
    template: &MoeTemplate,
    arch: &Arch,
    m: u64,
    topk: TopK,
) -> Result<Vec<MoeHint>, CarverError> {
    let problem = template.validate(arch)?;
    let rankable = rankable_space(&problem, arch);
    rank_batch(&problem, &rankable, arch, m, topk)
}

/// Rankings for every batch size of `batch_sizes` (vLLM's tuner's [`BATCH_SIZES`] when `None`):
/// what a config file is made of.
pub fn recommend_moe_file(
    template: &MoeTemplate,
    arch: &Arch,
    batch_sizes: Option<&[u64]>,
    topk: TopK,
) -> Result<MoeFile, CarverError> {
    let problem = template.validate(arch)?;
    let sizes = batch_sizes.unwrap_or(&BATCH_SIZES);
    check_batch_sizes(sizes, problem.topk)?;
    let rankable = rankable_space(&problem, arch);
    let batches = sizes
        .iter()
        .map(|&m| {
            Ok(MoeBatch {
                m,
                hints: rank_batch(&problem, &rankable, arch, m, topk)?,
            })
        })
        .collect::<Result<_, CarverError>>()?;
    Ok(MoeFile {
        device_name: device_name(arch),
        file_name: config_file_name(&problem, arch, Engine::Vllm),
        problem,
        batches,
    })
}

/// Batch sizes must be distinct (they are the file's keys) and each from 1 to what 32-bit row
/// indexing allows once multiplied by top-k.
pub fn check_batch_sizes(sizes: &[u64], topk: u32) -> Result<(), CarverError> {
    let bad = |reason: String| CarverError::InvalidMoe {
        field: "batch_sizes".into(),
        reason,
    };
    if sizes.is_empty() {
        return Err(bad("is empty; give at least one batch size".into()));
    }
    let max = MAX_DIM / u64::from(topk.max(1));
    for (i, &m) in sizes.iter().enumerate() {
        if m == 0 || m > max {
            return Err(bad(format!(
                "{m} is out of range; accepted: 1 to {max} tokens"
            )));
        }
        if sizes[..i].contains(&m) {
            return Err(bad(format!(
                "{m} appears twice; each batch size is one key of the file"
            )));
        }
    }
    Ok(())
}

/// Whether two priced configs are twins the model cannot tell apart: the same tile, warps and
/// stages (so they differ only in GROUP_SIZE_M, a launch order) and the same predicted time.
pub fn are_twins(a: (f64, &MoeConfig), b: (f64, &MoeConfig)) -> bool {
    let same_structure = |x: &MoeConfig, y: &MoeConfig| {
        (x.block_m, x.block_n, x.block_k, x.num_warps, x.num_stages)
            == (y.block_m, y.block_n, y.block_k, y.num_warps, y.num_stages)
    };
    same_structure(a.1, b.1) && same_time(a.0, b.0)
}

/// Predicted times the model does not tell apart (equal but for rounding).
fn same_time(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The ranking with every twin of a config ranked above it moved behind all configs that have
/// none, in order. Where a batch puts one row block on each expert, the launch order changes
/// nothing the model prices, and the top eight were as few as two structures (four
/// GROUP_SIZE_M twins each). Measured, the best of a batch size was most often another tile
/// (`benches/moe/runs`). Twins stay in the ranking, and `moe_tune` measures GROUP_SIZE_M next to
/// its first picks. The first config never moves, so the file's choice does not change.
fn defer_twins(sorted: Vec<(f64, MoeConfig)>) -> Vec<(f64, MoeConfig)> {
    let mut first: Vec<(f64, MoeConfig)> = Vec::with_capacity(sorted.len());
    let mut twins = Vec::new();
    for (t, c) in sorted {
        // Twins have equal times, so a config's twins ranked above it are its neighbours in the
        // sorted order: only the kept ones just before it need a look.
        let twin_above = first
            .iter()
            .rev()
            .take_while(|(u, _)| same_time(t, *u))
            .any(|(u, d)| are_twins((t, &c), (*u, d)));
        if twin_above {
            twins.push((t, c));
        } else {
            first.push((t, c));
        }
    }
    first.extend(twins);
    first
}

/// The configs the recommender ranks for a layer: the legal space without those Triton would
/// spill. It depends on the layer and the GPU, not the batch size, so a file works it out once.
fn rankable_space(p: &MoeProblem, arch: &Arch) -> Vec<MoeConfig> {
    legal_space(p, arch)
        .into_iter()
        .filter(|c| !exceeds_registers(c, p, arch))
        .collect()
}

fn rank_batch(
    p: &MoeProblem,
    rankable: &[MoeConfig],
    arch: &Arch,
    m: u64,
    topk: TopK,
) -> Result<Vec<MoeHint>, CarverError> {
    check_batch_sizes(&[m], p.topk)?;
    let no_legal = || CarverError::NoLegalConfig {
        target: "fused-moe".into(),
        arch: arch.key().to_string(),
    };
    let occupancy = p.routing.occupancy(m, &BLOCK_M);
    let gemms: Vec<[GemmVariants; 2]> = BLOCK_M
        .iter()
        .zip(&occupancy)
        .map(|(&bm, &occ)| Gemm::BOTH.map(|g| variants(p, g, m, bm, occ)))
        .collect();
    // Every variant priced, or none: a missing pricer would leave a GEMM unpriced.
    let pricers: Vec<[Vec<Pricer<'_>>; 2]> = gemms
        .iter()
        .map(|[gate_up, down]| Some([pricers_for(gate_up, arch)?, pricers_for(down, arch)?]))
        .collect::<Option<_>>()
        .ok_or_else(no_legal)?;
    let mut priced: Vec<(f64, MoeConfig)> = rankable
        .iter()
        .filter_map(|c| {
            let i = BLOCK_M.iter().position(|&bm| bm == c.block_m)?;
            let mut total = 0.0;
            for (g, pr) in gemms[i].iter().zip(&pricers[i]) {
                total += time_of(c, g, pr, p, arch)?;
            }
            Some((total, *c))
        })
        .collect();
    if priced.is_empty() {
        return Err(no_legal());
    }
    // Ties go to more warps, then to the configuration itself (deterministic). The model
    // prices a tile's warp count alike where neither bound moves with it, but each thread of
    // the gathering kernel then holds twice the accumulators and row pointers: Triton 3.6
    // compiles 128 x 128 x 64 to 214 registers a thread with 4 warps and 116 with 8, and the
    // stored sweeps time the 4-warp twin slower (`warp_ties_go_to_more_warps`).
    priced.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(b.1.num_warps.cmp(&a.1.num_warps))
            .then(a.1.cmp(&b.1))
    });
    defer_twins(priced)
        .into_iter()
        .take(topk.get())
        .enumerate()
        .map(|(rank, (_, c))| {
            let i = BLOCK_M
                .iter()
                .position(|&bm| bm == c.block_m)
                .ok_or_else(no_legal)?;
            let [gate_up, down] =
                [0, 1].map(|j| predict_gemm(&c, &gemms[i][j], &pricers[i][j], p, arch));
            let (gate_up, down) = gate_up.zip(down).ok_or_else(no_legal)?;
            Ok(MoeHint {
                rank: rank + 1,
                config: c,
                time_us: gate_up.time_us + down.time_us,
                gate_up,
                down,
            })
        })
        .collect()
}
