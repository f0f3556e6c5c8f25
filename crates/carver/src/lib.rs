//! carver's recommender: matmul template, kernel families, Roller-style policy, cost model and
//! ranking. Pure computation: no GPU, no I/O.
//!
//! [`Hint`], [`TileConfig`] and [`Prediction`] are the model's own types; their JSON form lives in
//! `carver-schema` (`carver_schema::Hint::from(&hint)`).
//!
//! ```
//! use carver::{Family, MatmulTemplate, TopK, recommend_hints};
//!
//! let db = carver_arch::HardwareDb::embedded().unwrap();
//! let h100 = db.get("h100").unwrap();
//! let template = MatmulTemplate::new(4096, 4096, 4096).with_family(Family::Triton);
//! let hints = recommend_hints(&template, h100, TopK::DEFAULT).unwrap();
//! assert_eq!(hints.len(), 8);
//! assert_eq!(hints[0].rank, 1);
//! // The first hint is a `triton.Config` dict.
//! assert!(hints[0].config["kwargs"]["BLOCK_SIZE_M"].is_u64());
//! ```

pub mod cost;
pub mod dtype;
mod error;
pub mod family;
pub mod moe;
pub mod policy;
mod prediction;
pub mod problem;
pub mod rank;
mod schema;
pub mod template;
mod tile;
mod topk;

use carver_arch::Arch;

pub use dtype::{DType, Layout};
pub use error::CarverError;
pub use family::{ConfigError, Family, FamilyRules};
pub use prediction::{Bound, Breakdown, Hint, Prediction};
pub use problem::Problem;
pub use template::MatmulTemplate;
pub use tile::{Raster, RasterOrder, TileConfig};
pub use topk::TopK;

/// The `topk` best configurations of the template's target for `arch`, best first.
pub fn recommend_hints(
    template: &MatmulTemplate,
    arch: &Arch,
    topk: TopK,
) -> Result<Vec<Hint>, CarverError> {
    let topk = topk.get();
    let problem = template.validate(arch)?;
    let family = template.family.rules();
    let all = policy::candidates_for_topk(family, &problem, arch, Some(topk));
    let no_legal = || CarverError::NoLegalConfig {
        target: template.family.to_string(),
        arch: arch.key().to_string(),
    };
    // The policy prices nothing when the arch has no peak for the problem's compute class.
    let pricer = cost::Pricer::new(family, &problem, arch).ok_or_else(no_legal)?;
    if all.is_empty() {
        return Err(no_legal());
    }
    // Only the picks get the full prediction (breakdown, bound); each was priced by the same
    // model, so it exists.
    let window = rank::window_for(family, &problem, arch);
    Ok(rank::select(&all, topk, window)
        .into_iter()
        .filter_map(|c| {
            let mut prediction = pricer.predict(&c.tile, c.priced_resources())?;
            // A hedge reports the estimate beside the registers its time assumes.
            prediction.registers_per_thread = c.res.registers_per_thread;
            prediction.hedged_registers = c.hedged_registers;
            Some((prediction, c))
        })
        .enumerate()
        .map(|(i, (prediction, c))| Hint {
            rank: i + 1,
            config: family.native(&c.tile),
            tile: c.tile,
            prediction,
        })
        .collect())
}

/// Every legal configuration of the template's family for `arch`, ranked by predicted time
/// (ties in the order [`family::space`] walks the space): what an exhaustive tuning run
/// measures. Unlike [`recommend_hints`] there is no pruning and no diversity.
pub fn rank_every_config(template: &MatmulTemplate, arch: &Arch) -> Result<Vec<Hint>, CarverError> {
    let problem = template.validate(arch)?;
    let family = template.family.rules();
    let no_legal = || CarverError::NoLegalConfig {
        target: template.family.to_string(),
        arch: arch.key().to_string(),
    };
    let pricer = cost::Pricer::new(family, &problem, arch).ok_or_else(no_legal)?;
    // Each legal point priced once, with the full prediction the hints carry.
    let mut priced: Vec<(TileConfig, Prediction)> = family::space(family, &problem, arch)
        .into_iter()
        .filter_map(|tile| {
            let res = family::check_config(family, &tile, &problem, arch).ok()?;
            Some((tile, pricer.predict(&tile, res)?))
        })
        .collect();
    if priced.is_empty() {
        return Err(no_legal());
    }
    // Stable: equal predictions keep the walk's order.
    priced.sort_by(|a, b| a.1.time_us.total_cmp(&b.1.time_us));
    Ok(priced
        .into_iter()
        .enumerate()
        .map(|(i, (tile, prediction))| Hint {
            rank: i + 1,
            config: family.native(&tile),
            tile,
            prediction,
        })
        .collect())
}

/// What a tuning run measures a ranking against when the family's whole space is too large to
/// time (cuda-sm90's is 35-42 thousand configurations a shape): the model's `topk` picks (ranks
/// 1 to k, as [`recommend_hints`] gives them), then the policy's reduced whole space
/// ([`policy::reduced_space`]: every plain structure at two depths, about 900 configurations for
/// cuda-sm90), ranked on from k + 1 by predicted time. It is part of the whole space, so its best is
/// never faster than the exhaustive best and a ratio to it is an upper bound on the ratio to the
/// exhaustive best; the picks are always in it, so no pick is ever faster than its best.
pub fn reference_configs(
    template: &MatmulTemplate,
    arch: &Arch,
    topk: TopK,
) -> Result<Vec<Hint>, CarverError> {
    let picks = recommend_hints(template, arch, topk)?;
    let every = rank_every_config(template, arch)?;
    let tiles: Vec<TileConfig> = every.iter().map(|h| h.tile).collect();
    let reduced = policy::reduced_space(&tiles, template.family.rules().stage_range().0);
    let k = picks.len();
    let rest: Vec<Hint> = every
        .into_iter()
        .zip(reduced)
        .filter(|(h, keep)| *keep && !picks.iter().any(|p| p.tile == h.tile))
        .map(|(h, _)| h)
        .collect();
    Ok(picks
        .into_iter()
        .chain(rest.into_iter().enumerate().map(|(i, h)| Hint {
            rank: k + 1 + i,
            ..h
        }))
        .collect())
}

/// Prices one configuration given in the target's own parameter names (for checking a
/// hand-written or another tool's config against the model).
pub fn predict_native(
    template: &MatmulTemplate,
    arch: &Arch,
    native: &serde_json::Value,
) -> Result<(TileConfig, Prediction), CarverError> {
    let problem = template.validate(arch)?;
    let family = template.family.rules();
    let illegal = |reason: ConfigError| CarverError::IllegalConfig {
        target: template.family.to_string(),
        arch: arch.key().to_string(),
        reason,
    };
    let tile = family
        .parse_native(native, &problem, arch)
        .map_err(illegal)?;
    let res = family::check_config(family, &tile, &problem, arch).map_err(illegal)?;
    let prediction = cost::predict(family, &problem, &tile, res, arch)
        .ok_or_else(|| illegal(ConfigError::NoBlockPerSm))?;
    Ok((tile, prediction))
}
