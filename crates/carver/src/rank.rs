//! Ranking: order priced candidates and choose a top-k that hedges the model's errors.
//!
//! The first pick is the fastest prediction. Later picks trade a little predicted time for
//! difference from what is already picked, because the model's errors are correlated between
//! similar configurations: eight near-copies of one tile succeed or fail together.

use std::cmp::Ordering;

use crate::policy::Candidate;

/// How far behind the best a prediction may be and still be picked for diversity.
pub const DIVERSITY_WINDOW: f64 = 0.35;
/// Predicted-time penalty per unit of similarity to the closest already-picked candidate.
pub const SIMILARITY_PENALTY: f64 = 0.15;

/// Total order on candidates: predicted time, then the configuration itself (deterministic).
pub fn by_time(a: &Candidate, b: &Candidate) -> Ordering {
    a.prediction
        .time_us
        .total_cmp(&b.prediction.time_us)
        .then_with(|| key(a).cmp(&key(b)))
}

fn key(c: &Candidate) -> [u32; 10] {
    let t = &c.tile;
    [
        t.block_m,
        t.block_n,
        t.block_k,
        t.compute_warps(),
        t.stages,
        t.split_k,
        t.raster.group,
        t.cluster_m,
        u32::from(t.persistent),
        t.warps_m,
    ]
}

/// Share of the structural parameters two candidates have in common (0 to 1).
fn similarity(a: &Candidate, b: &Candidate) -> f64 {
    let (x, y) = (&a.tile, &b.tile);
    let same = [
        x.block_m == y.block_m,
        x.block_n == y.block_n,
        x.block_k == y.block_k,
        x.compute_warps() == y.compute_warps(),
        x.split_k == y.split_k,
        x.raster.group == y.raster.group,
        x.stages == y.stages,
    ];
    same.iter().filter(|&&s| s).count() as f64 / same.len() as f64
}

/// Sorts candidates and picks `topk` of them: best first, then diverse near-best ones.
pub fn select(mut all: Vec<Candidate>, topk: usize) -> Vec<Candidate> {
    all.sort_by(by_time);
    all.dedup_by(|a, b| key(a) == key(b));
    if all.len() <= topk {
        return all;
    }
    let best = all[0].prediction.time_us;
    let mut picked: Vec<Candidate> = Vec::with_capacity(topk);
    let mut rest = all;
    picked.push(rest.remove(0));
    while picked.len() < topk && !rest.is_empty() {
        let mut choice = 0;
        let mut choice_score = f64::INFINITY;
        for (i, cand) in rest.iter().enumerate() {
            let t = cand.prediction.time_us;
            if t > best * (1.0 + DIVERSITY_WINDOW) && i > 0 {
                break;
            }
            let closest = picked
                .iter()
                .map(|p| similarity(p, cand))
                .fold(0.0, f64::max);
            let score = t * (1.0 + SIMILARITY_PENALTY * closest);
            if score < choice_score {
                choice_score = score;
                choice = i;
            }
        }
        picked.push(rest.remove(choice));
    }
    picked
}
