//! Ranking: order priced candidates and choose a top-k that hedges the model's errors.
//!
//! The first pick is the fastest prediction. Later picks trade a little predicted time for
//! difference from what is already picked, because the model's errors are correlated between
//! similar configurations: eight near-copies of one tile succeed or fail together.

use crate::policy::Candidate;

/// How far behind the best a prediction may be and still be picked for diversity.
pub const DIVERSITY_WINDOW: f64 = 0.35;
/// Predicted-time penalty per unit of similarity to the closest already-picked candidate.
pub const SIMILARITY_PENALTY: f64 = 0.15;

/// The configuration's parameters, the structural ones first (see [`SIMILAR`]).
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

/// How many leading entries of [`key`] similarity compares: block M, N and K, warps, stages,
/// split-K and launch-order group.
const SIMILAR: usize = 7;

/// Share of the structural parameters two candidates have in common (0 to 1).
fn similarity(a: &[u32; 10], b: &[u32; 10]) -> f64 {
    let same = a[..SIMILAR]
        .iter()
        .zip(&b[..SIMILAR])
        .filter(|(x, y)| x == y)
        .count();
    same as f64 / SIMILAR as f64
}

/// Sorts candidates and picks `topk` of them: best first, then diverse near-best ones.
///
/// Works on compact (time, key, index) entries: only the few candidates near the best are ever
/// compared, and comparing through the candidates themselves is slower.
pub fn select(all: &[Candidate], topk: usize) -> Vec<Candidate> {
    let mut entries: Vec<(f64, [u32; 10], usize)> = all
        .iter()
        .enumerate()
        .map(|(i, c)| (c.time_us, key(c), i))
        .collect();
    entries.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    entries.dedup_by(|a, b| a.1 == b.1);
    let Some(first) = entries.first() else {
        return Vec::new();
    };
    let best = first.0;
    // Past the window only the fastest remaining are taken, in order.
    let window = entries
        .iter()
        .position(|e| e.0 > best * (1.0 + DIVERSITY_WINDOW))
        .unwrap_or(entries.len())
        .max(1);
    let mut picked: Vec<usize> = vec![first.2];
    // Each open entry with its similarity to the closest pick so far, kept up to date as picks
    // are made (one comparison per open entry and pick).
    let mut open: Vec<(usize, f64)> = (1..window)
        .map(|e| (e, similarity(&first.1, &entries[e].1)))
        .collect();
    let mut beyond = entries[window..].iter();
    while picked.len() < topk {
        if open.is_empty() {
            match beyond.next() {
                Some(e) => picked.push(e.2),
                None => break,
            }
            continue;
        }
        let (slot, _) = open
            .iter()
            .enumerate()
            .map(|(slot, &(e, closest))| {
                (slot, entries[e].0 * (1.0 + SIMILARITY_PENALTY * closest))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
            .expect("open is not empty");
        let (new, _) = open.remove(slot);
        picked.push(entries[new].2);
        for (e, closest) in &mut open {
            *closest = closest.max(similarity(&entries[new].1, &entries[*e].1));
        }
    }
    picked.into_iter().map(|i| all[i]).collect()
}
