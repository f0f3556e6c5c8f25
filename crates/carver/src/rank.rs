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
    a.time_us
        .total_cmp(&b.time_us)
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
/// Works on indices: only the few candidates near the best are ever compared.
pub fn select(all: &[Candidate], topk: usize) -> Vec<Candidate> {
    // Sort compact (time, key, index) entries: comparing through the candidates is slower.
    let mut entries: Vec<(f64, [u32; 10], usize)> = all
        .iter()
        .enumerate()
        .map(|(i, c)| (c.time_us, key(c), i))
        .collect();
    entries.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    entries.dedup_by(|a, b| a.1 == b.1);
    let order: Vec<usize> = entries.into_iter().map(|e| e.2).collect();
    let Some(&first) = order.first() else {
        return Vec::new();
    };
    let best = all[first].time_us;
    // Past the window only the fastest remaining are taken, in order.
    let window = order
        .iter()
        .position(|&i| all[i].time_us > best * (1.0 + DIVERSITY_WINDOW))
        .unwrap_or(order.len());
    let mut picked: Vec<usize> = vec![first];
    // Each open candidate with its similarity to the closest pick so far, kept up to date as
    // picks are made (one comparison per open candidate and pick).
    let mut open: Vec<(usize, f64)> = order[1..window.max(1)]
        .iter()
        .map(|&i| (i, similarity(&all[first], &all[i])))
        .collect();
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
            .map(|(slot, &(i, closest))| {
                (slot, all[i].time_us * (1.0 + SIMILARITY_PENALTY * closest))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
            .expect("open is not empty");
        let (new, _) = open.remove(slot);
        picked.push(new);
        for (i, closest) in &mut open {
            *closest = closest.max(similarity(&all[new], &all[*i]));
        }
    }
    picked.into_iter().map(|i| all[i]).collect()
}
