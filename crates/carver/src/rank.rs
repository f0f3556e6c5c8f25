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
///
/// Works on indices: candidates are large, and only the few near the best are ever compared.
pub fn select(all: Vec<Candidate>, topk: usize) -> Vec<Candidate> {
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_unstable_by(|&a, &b| by_time(&all[a], &all[b]));
    order.dedup_by(|a, b| key(&all[*a]) == key(&all[*b]));
    let Some(&first) = order.first() else {
        return Vec::new();
    };
    let best = all[first].prediction.time_us;
    // Past the window only the fastest remaining are taken, in order.
    let window = order
        .iter()
        .position(|&i| all[i].prediction.time_us > best * (1.0 + DIVERSITY_WINDOW))
        .unwrap_or(order.len());
    let mut picked: Vec<usize> = vec![first];
    let mut open: Vec<usize> = order[1..window.max(1)].to_vec();
    let mut beyond = order[window.max(1)..].iter();
    while picked.len() < topk {
        if open.is_empty() {
            match beyond.next() {
                Some(&i) => picked.push(i),
                None => break,
            }
            continue;
        }
        let (slot, _) = open
            .iter()
            .enumerate()
            .map(|(slot, &i)| {
                let closest = picked
                    .iter()
                    .map(|&p| similarity(&all[p], &all[i]))
                    .fold(0.0, f64::max);
                (
                    slot,
                    all[i].prediction.time_us * (1.0 + SIMILARITY_PENALTY * closest),
                )
            })
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
            .expect("open is not empty");
        picked.push(open.remove(slot));
    }
    let mut slots: Vec<Option<Candidate>> = all.into_iter().map(Some).collect();
    picked.into_iter().filter_map(|i| slots[i].take()).collect()
}
