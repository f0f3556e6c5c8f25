//! Ranking: order priced candidates and choose a top-k that hedges the model's errors.
//!
//! The first pick is the fastest prediction of the configurations priced as estimated (a
//! register hedge, priced at one block more per SM, never comes first). Later picks trade a
//! little predicted time for difference from what is already picked, because the model's errors
//! are correlated between similar configurations: eight near-copies of one tile succeed or fail
//! together.

use carver_arch::Arch;

use crate::family::{FamilyRules, LoadPaths, Resources};
use crate::problem::Problem;
use crate::tile::TileConfig;

/// A priced configuration: the policy keeps only its predicted time; the full prediction is
/// worked out for the few the ranking picks.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub tile: TileConfig,
    pub res: Resources,
    pub time_us: f64,
    /// A shallower pipeline depth the policy added for a structure it also offers at the depth
    /// the model prefers (`policy::variant_depth`).
    pub depth_variant: bool,
    /// A hedge on the family's register estimate (`policy::register_hedges`): the registers per
    /// thread its time assumes, fewer than `res` estimates but within the estimate's measured
    /// error, so that one more block fits per SM. `None` for a configuration priced as estimated.
    pub hedged_registers: Option<u32>,
}

impl Candidate {
    /// The resources its time was priced with: the estimate, or the hedge's registers.
    pub fn priced_resources(&self) -> Resources {
        Resources {
            registers_per_thread: self
                .hedged_registers
                .unwrap_or(self.res.registers_per_thread),
            ..self.res
        }
    }
}

/// How far behind the best a prediction may be and still be picked for diversity: the spread of
/// the model's own error, measured for two classes of problem (`examples/winner_gap.rs` on the
/// H100 sweeps and exhaustive runs). With every operand loaded in vectors, a configuration
/// within 2% of the measured best was predicted within 10% of the best prediction on every
/// shape (median 0%, 90th percentile 6.6%). With an operand staged through registers, the
/// model's least accurate terms, such a configuration was predicted up to 32% behind.
pub fn diversity_window(paths: LoadPaths) -> f64 {
    if paths.any_staged() {
        STAGED_DIVERSITY_WINDOW
    } else {
        DIVERSITY_WINDOW
    }
}

/// The window of `family`'s ranking for `problem` on `arch`.
pub fn window_for(family: &dyn FamilyRules, problem: &Problem, arch: &Arch) -> f64 {
    diversity_window(family.load_paths(problem, arch))
}

/// The window where every operand is loaded in vectors (see [`diversity_window`]).
pub const DIVERSITY_WINDOW: f64 = 0.12;
/// The window where an operand is staged through registers (see [`diversity_window`]).
pub const STAGED_DIVERSITY_WINDOW: f64 = 0.35;
/// Predicted-time penalty per unit of similarity to the closest already-picked candidate.
pub const SIMILARITY_PENALTY: f64 = 0.15;

/// The configuration's parameters, the structural ones first: the order that breaks ties in
/// predicted time.
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

/// The entries of [`key`] that similarity compares, in 16-bit lanes (the last one unused) so
/// that a comparison is a few vector instructions. Tile parameters are far below 65536.
fn signature(c: &Candidate) -> [u16; 8] {
    let k = key(c);
    let mut out = [0u16; 8];
    for (lane, &v) in out.iter_mut().zip(&k[..SIMILAR]) {
        *lane = v as u16;
    }
    out
}

/// How many of the structural parameters two candidates have in common (0 to [`SIMILAR`]).
fn shared_parameters(a: &[u16; 8], b: &[u16; 8]) -> u8 {
    // The unused lane is equal in every signature.
    (a.iter().zip(b).filter(|(x, y)| x == y).count() - 1) as u8
}

/// A hash of a configuration's fields (FxHash's step: a multiply by an odd constant after
/// mixing each field in). Lookups by it compare the configurations themselves too.
fn tile_hash(t: &TileConfig) -> u64 {
    [
        t.block_m,
        t.block_n,
        t.block_k,
        t.warps_m,
        t.warps_n,
        t.producer_warps,
        t.stages,
        t.raster.group,
        t.split_k,
        t.cluster_m,
        t.cluster_n,
        u32::from(t.persistent),
        t.mma as u32,
        u32::from(t.swap_ab),
    ]
    .iter()
    .fold(0u64, |h, &f| {
        (h.rotate_left(5) ^ u64::from(f)).wrapping_mul(0x517c_c1b7_2722_0a95)
    })
}

/// A hash of `t` without its pipeline depth: equal for a structure and its depth variants.
fn structure_hash(t: &TileConfig) -> u64 {
    tile_hash(&TileConfig { stages: 0, ..*t })
}

/// The factor on a candidate's time when it shares `n` structural parameters with the
/// closest pick so far: `1 + SIMILARITY_PENALTY * n / SIMILAR`.
fn penalty(n: u8) -> f64 {
    1.0 + SIMILARITY_PENALTY * (f64::from(n) / SIMILAR as f64)
}

/// A candidate of the diversity window not picked yet.
struct Open {
    time: f64,
    /// Its index in the window.
    slot: usize,
    /// How many picks its `closest` accounts for.
    seen: usize,
    /// The most structural parameters it shares with one of those picks.
    closest: u8,
}

/// `time` as an integer in the order of `f64::total_cmp`: integer comparisons are cheaper.
fn ordered_bits(time: f64) -> u64 {
    let bits = time.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The inverse of [`ordered_bits`].
#[cfg(test)]
fn from_ordered_bits(bits: u64) -> f64 {
    f64::from_bits(if bits >> 63 == 1 {
        bits & !(1 << 63)
    } else {
        !bits
    })
}

/// Past this time nothing is picked from the diversity window: it is either behind the best by
/// more than the window, or slower than the k-th fastest even with the largest penalty (then
/// one of the k fastest is open at every pick and scores lower, and wins ties, being faster).
fn window_limit(best: f64, kth: f64, window: f64) -> f64 {
    (best * (1.0 + window)).min(kth * (1.0 + SIMILARITY_PENALTY))
}

/// No candidate slower than this is picked by [`select`]: past the diversity window's limit only
/// the fastest of the k fastest twin classes are taken (`kth` is the k-th class's time).
fn pick_limit(best: f64, kth: f64, window: f64) -> f64 {
    kth.max(window_limit(best, kth, window))
}

/// A configuration's twin class: the configuration with neither persistence nor a cluster.
/// Both change how the grid's tiles are scheduled, not the tile or its pipeline; the model prices
/// twins within a few percent of each other and they measure so (the H200 reference runs: the
/// four twins of `olmo2-7b.down.m272`'s first pick took 53.4-56.4 us, `aya32b.qkv.m1`'s 49.0-50.8
/// us), so a twin of a pick hedges little of the model's error ([`select`]). Compared by a hash
/// first: the ranking compares classes for every candidate it weighs.
#[derive(Clone, Copy, Debug)]
struct TwinClass {
    hash: u64,
    tile: TileConfig,
}

impl PartialEq for TwinClass {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.tile == other.tile
    }
}

fn twin_class(t: &TileConfig) -> TwinClass {
    let tile = TileConfig {
        persistent: false,
        cluster_m: 1,
        cluster_n: 1,
        ..*t
    };
    TwinClass {
        hash: tile_hash(&tile),
        tile,
    }
}

/// The fastest time of each of the `k` fastest twin classes seen (fewer until `k` are).
struct FastestClasses {
    k: usize,
    /// (fastest time, twin class), unordered; at most `k`.
    classes: Vec<(f64, TwinClass)>,
    /// The slowest of those times (`kth`).
    slowest: f64,
}

impl FastestClasses {
    fn new(k: usize) -> Self {
        Self {
            k,
            classes: Vec::with_capacity(k),
            slowest: f64::NEG_INFINITY,
        }
    }

    fn push(&mut self, time: f64, tile: &TileConfig) {
        // With k classes known, a time no faster than all of them changes nothing (a class it
        // belongs to keeps its faster time).
        if self.is_full() && time >= self.slowest {
            return;
        }
        let class = twin_class(tile);
        if let Some(entry) = self.classes.iter_mut().find(|e| e.1 == class) {
            entry.0 = entry.0.min(time);
        } else if self.classes.len() < self.k {
            self.classes.push((time, class));
        } else if let Some(slowest) = self.classes.iter_mut().max_by(|a, b| a.0.total_cmp(&b.0)) {
            // A class pushed out earlier was slower than every class kept, so its fastest
            // time is never below one it comes back with.
            *slowest = (time, class);
        }
        self.slowest = self
            .classes
            .iter()
            .map(|e| e.0)
            .fold(f64::NEG_INFINITY, f64::max);
    }

    /// Whether `k` classes are known.
    fn is_full(&self) -> bool {
        self.classes.len() >= self.k
    }

    /// The `k`-th fastest class's time (of the slowest class when fewer are known).
    fn kth(&self) -> Option<f64> {
        (!self.classes.is_empty()).then_some(self.slowest)
    }
}

/// The pick limit of a top-k ranking while candidates are still being priced: the policy stops
/// pricing once the lower bound of everything left is past it. Infinite until `k` twin classes
/// are known.
pub(crate) struct PickBound {
    /// The ranking's diversity window.
    window: f64,
    fastest: FastestClasses,
    best: f64,
}

impl PickBound {
    pub(crate) fn new(k: usize, window: f64) -> Self {
        Self {
            window,
            fastest: FastestClasses::new(k),
            best: f64::INFINITY,
        }
    }

    pub(crate) fn push(&mut self, time: f64, tile: &TileConfig) {
        self.best = self.best.min(time);
        self.fastest.push(time, tile);
    }

    /// [`pick_limit`] of the times pushed so far.
    pub(crate) fn limit(&self) -> f64 {
        match self.fastest.kth() {
            Some(kth) if self.fastest.is_full() => pick_limit(self.best, kth, self.window),
            _ => f64::INFINITY,
        }
    }
}

/// Picks `topk` candidates: the fastest first, then, from those within the pick limit (`window`
/// behind the fastest at most: [`diversity_window`]), the one
/// with the lowest time penalized by its similarity to the closest pick so far (depth variants,
/// see [`Candidate::depth_variant`], and register hedges among them); once none is left there,
/// the fastest of the rest. A twin of a pick ([`twin_class`]: the same but for persistence or a
/// cluster) waits until nothing else is left within the window or among the fastest of the k
/// fastest twin classes. Every tie goes to the faster candidate, then to the smaller [`key`].
///
/// The candidates must have distinct keys (the policy prices each configuration once). Nothing
/// is sorted: the picks need only the fastest candidates and the window's minima.
pub fn select(all: &[Candidate], topk: usize, window: f64) -> Vec<Candidate> {
    if all.is_empty() || topk == 0 {
        return Vec::new();
    }
    let bits: Vec<u64> = all.iter().map(|c| ordered_bits(c.time_us)).collect();
    // The ranking's order: time, then key (only computed for equal times).
    let before = |a: usize, b: usize| {
        bits[a]
            .cmp(&bits[b])
            .then_with(|| key(&all[a]).cmp(&key(&all[b])))
    };
    // The policy's depth variants (a shallower depth of a structure it also priced deeper)
    // and register hedges (priced at an occupancy the estimate does not promise) compete in
    // the window like structures, each weighed by its similarity to the picks (a variant as a
    // twin of its structure, below), but neither set the window's bounds nor take the first
    // pick, nor fill slots past the window. (Either alone, which the policy never hands over,
    // ranks as structures.)
    let any_estimated = all
        .iter()
        .any(|c| !c.depth_variant && c.hedged_registers.is_none());
    let hedge_or_variant =
        |i: usize| any_estimated && (all[i].hedged_registers.is_some() || all[i].depth_variant);
    // The filtered lists below are sized for the whole input up front: growing them by doubling
    // was a tenth of a cuda-sm90 recommendation's instructions (callgrind).
    let mut estimated: Vec<usize> = Vec::with_capacity(all.len());
    estimated.extend((0..all.len()).filter(|&i| !hedge_or_variant(i)));
    let mut classes = FastestClasses::new(topk);
    for &i in &estimated {
        classes.push(all[i].time_us, &all[i].tile);
    }
    // With fewer classes than picks, every estimated candidate may be picked (and the policy,
    // whose limit stays infinite, priced all of them).
    let kth = if !classes.is_full() {
        estimated
            .iter()
            .map(|&i| all[i].time_us)
            .fold(f64::NEG_INFINITY, f64::max)
    } else {
        classes.kth().expect("some candidate is estimated")
    };
    let kth_bits = ordered_bits(kth);
    let best = estimated
        .iter()
        .map(|&i| all[i].time_us)
        .fold(f64::INFINITY, f64::min);
    let limit = ordered_bits(window_limit(best, kth, window));

    let mut window: Vec<usize> = Vec::with_capacity(all.len());
    window.extend((0..all.len()).filter(|&i| bits[i] <= limit));
    let first_slot = (0..window.len())
        .filter(|&slot| !hedge_or_variant(window[slot]))
        .min_by(|&a, &b| before(window[a], window[b]))
        .expect("the fastest candidate is within the limit");
    let signatures: Vec<[u16; 8]> = window.iter().map(|&i| signature(&all[i])).collect();
    // A depth variant waits for its structure (the same tile at the depth the policy prefers):
    // it hedges that pick, so it never ranks above it. Its structure is the first window slot
    // of an estimated candidate that differs from it only in a deeper pipeline, looked up by a
    // hash of the tile without its depth (at decode sizes, where everything is near the DRAM
    // floor, the window holds hundreds of variants).
    let mut by_structure: Vec<(u64, usize)> = Vec::new();
    if any_estimated {
        by_structure.reserve_exact(window.len());
        by_structure.extend(
            (0..window.len())
                .filter(|&slot| !hedge_or_variant(window[slot]))
                .map(|slot| (structure_hash(&all[window[slot]].tile), slot)),
        );
    }
    by_structure.sort_unstable();
    let structure_slot: Vec<Option<usize>> = window
        .iter()
        .map(|&i| {
            let v = &all[i];
            if !(any_estimated && v.depth_variant) {
                return None;
            }
            let hash = structure_hash(&v.tile);
            let from = by_structure.partition_point(|&(h, _)| h < hash);
            by_structure[from..]
                .iter()
                .take_while(|&&(h, _)| h == hash)
                .map(|&(_, slot)| slot)
                .find(|&slot| {
                    let o = &all[window[slot]].tile;
                    o.stages > v.tile.stages
                        && TileConfig {
                            stages: v.tile.stages,
                            ..*o
                        } == v.tile
                })
        })
        .collect();
    let factors: [f64; SIMILAR + 1] = std::array::from_fn(|n| penalty(n as u8));
    // Twin classes of the window's candidates and of the picks: a twin of a pick waits.
    let window_class: Vec<TwinClass> = window.iter().map(|&i| twin_class(&all[i].tile)).collect();
    let mut picked_classes: Vec<TwinClass> = Vec::with_capacity(topk);
    picked_classes.push(window_class[first_slot]);
    let mut picked: Vec<usize> = Vec::with_capacity(topk);
    picked.push(window[first_slot]);
    // Window slots of the picks from the window, for their signatures.
    let mut picked_slots: Vec<usize> = Vec::with_capacity(topk);
    picked_slots.push(first_slot);
    let mut open: Vec<Open> = Vec::with_capacity(window.len());
    open.extend(
        (0..window.len())
            .filter(|&slot| slot != first_slot)
            .map(|slot| Open {
                time: all[window[slot]].time_us,
                slot,
                seen: 0,
                closest: 0,
            }),
    );
    // Past the window only the fastest structures are taken, in order; they are among the
    // fastest of the k fastest twin classes.
    let mut beyond: Vec<usize> = Vec::with_capacity(estimated.len());
    beyond.extend(
        estimated
            .iter()
            .copied()
            .filter(|&i| bits[i] > limit && bits[i] <= kth_bits),
    );
    beyond.sort_unstable_by(|&a, &b| before(a, b));
    let mut rest = beyond.into_iter();
    // Twins of picks met past the window, for the last slots.
    let mut waiting: Vec<usize> = Vec::new();
    while picked.len() < topk {
        // The open candidate with the lowest penalized time. A candidate slower than the best
        // score so far cannot win (its penalty is at least 1), so its similarity to the picks
        // is brought up to date only when it might.
        // (position in `open`, score, window slot)
        let mut winner: Option<(usize, f64, usize)> = None;
        for (at, o) in open.iter_mut().enumerate() {
            if winner.is_some_and(|(_, score, _)| o.time > score) {
                continue;
            }
            if structure_slot[o.slot].is_some_and(|slot| !picked_slots.contains(&slot))
                || picked_classes.contains(&window_class[o.slot])
            {
                continue;
            }
            for &pick in &picked_slots[o.seen..] {
                o.closest = o
                    .closest
                    .max(shared_parameters(&signatures[pick], &signatures[o.slot]));
            }
            o.seen = picked_slots.len();
            // A depth variant is as close to its structure as a twin that shares every
            // structural parameter: the model cannot tell the two depths apart either.
            let closest = if structure_slot[o.slot].is_some() {
                SIMILAR
            } else {
                usize::from(o.closest)
            };
            let score = o.time * factors[closest];
            let wins = winner.is_none_or(|(_, best, slot)| {
                score
                    .total_cmp(&best)
                    .then_with(|| before(window[o.slot], window[slot]))
                    .is_lt()
            });
            if wins {
                winner = Some((at, score, o.slot));
            }
        }
        if let Some((at, _, _)) = winner {
            let new = open.swap_remove(at).slot;
            picked.push(window[new]);
            picked_slots.push(new);
            picked_classes.push(window_class[new]);
            continue;
        }
        // Nothing left in the window but twins of picks and variants whose structure is not
        // in it (those are never picked): the next fastest of another class past it.
        let mut next = None;
        for i in rest.by_ref() {
            let class = twin_class(&all[i].tile);
            if picked_classes.contains(&class) {
                waiting.push(i);
            } else {
                next = Some((i, class));
                break;
            }
        }
        let Some((i, class)) = next else {
            break;
        };
        picked.push(i);
        picked_classes.push(class);
    }
    // The twins of picks, fastest first, when nothing else is left.
    if picked.len() < topk {
        let mut twins: Vec<usize> = open
            .iter()
            .filter(|o| structure_slot[o.slot].is_none_or(|slot| picked_slots.contains(&slot)))
            .map(|o| window[o.slot])
            .chain(waiting)
            .chain(rest)
            .collect();
        twins.sort_unstable_by(|&a, &b| before(a, b));
        picked.extend(twins.into_iter().take(topk - picked.len()));
    }
    picked.into_iter().map(|i| all[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{DType, Layout};
    use crate::family::Family;
    use crate::policy::candidates;
    use crate::template::MatmulTemplate;
    use carver_arch::HardwareDb;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

        /// What `select` assumes of its input: the policy prices each configuration (as the
        /// ranking keys it) once.
        #[test]
        fn policy_candidates_have_distinct_keys(
            m in 1u64..=8192, n in 1u64..=8192, k in 1u64..=8192,
            target in prop::sample::select(Family::ALL.to_vec()),
            arch_key in prop::sample::select(vec!["h100-sxm", "a100-sxm4-80gb", "l40s", "b200"]),
            b_col in any::<bool>(),
        ) {
            let db = HardwareDb::embedded().unwrap();
            let arch = db.get(arch_key).unwrap();
            let tpl = MatmulTemplate::new(m, n, k)
                .with_dtype(DType::Bf16)
                .with_family(target)
                .with_layouts(Layout::Row, if b_col { Layout::Col } else { Layout::Row });
            let Ok(p) = tpl.validate(arch) else { return Ok(()) };
            let mut keys: Vec<[u32; 10]> = candidates(target.rules(), &p, arch).iter().map(key).collect();
            let count = keys.len();
            keys.sort_unstable();
            keys.dedup();
            prop_assert_eq!(keys.len(), count);
        }
    }

    /// A candidate with everything fixed but its block shape, depth and predicted time.
    fn candidate(
        block_m: u32,
        block_n: u32,
        stages: u32,
        time_us: f64,
        variant: bool,
    ) -> Candidate {
        use crate::tile::{Raster, RasterOrder};
        Candidate {
            tile: TileConfig {
                block_m,
                block_n,
                block_k: 64,
                warps_m: 2,
                warps_n: 1,
                producer_warps: 0,
                stages,
                raster: Raster {
                    order: RasterOrder::GroupedRows,
                    group: 8,
                },
                split_k: 1,
                cluster_m: 1,
                cluster_n: 1,
                persistent: false,
                mma: carver_arch::InstructionFamily::Wgmma,
                swap_ab: false,
            },
            res: Resources {
                smem_bytes: 0,
                registers_per_thread: 0,
            },
            time_us,
            depth_variant: variant,
            hedged_registers: None,
        }
    }

    /// Depth variants compete in the window like structures, weighed as twins of their
    /// structure (every structural parameter shared), after it; they neither take the first
    /// pick nor set the window, nor fill slots past it.
    #[test]
    fn depth_variants_compete_in_the_window_by_similarity() {
        let a = candidate(128, 256, 6, 100.0, false);
        let a_shallower = candidate(128, 256, 4, 100.0, true);
        let b = candidate(256, 128, 6, 105.0, false);
        let far = candidate(128, 128, 6, 150.0, false);
        let times = |picks: Vec<Candidate>| {
            picks
                .iter()
                .map(|c| (c.time_us, c.tile.stages))
                .collect::<Vec<_>>()
        };
        // b shares block K, warps, depth, split and group with a (5 of 7): 105 x (1 + 0.15 x
        // 5/7) = 116.25; a's variant counts as a twin: 100 x 1.15 = 115, so it comes before b.
        assert_eq!(
            times(select(&[far, b, a_shallower, a], 4, DIVERSITY_WINDOW)),
            [(100.0, 6), (100.0, 4), (105.0, 6), (150.0, 6)]
        );
        // A structure within 115 / 1.107 of it comes first.
        let c = candidate(256, 128, 6, 103.0, false);
        assert_eq!(
            times(select(&[c, a_shallower, a], 3, DIVERSITY_WINDOW)),
            [(100.0, 6), (103.0, 6), (100.0, 4)]
        );
        // A twin differing only outside the similarity signature (persistence) shares all 7
        // too: 100 x 1.15 = 115, a tie that the smaller depth breaks.
        let a_persistent = Candidate {
            tile: TileConfig {
                persistent: true,
                ..a.tile
            },
            ..a
        };
        assert_eq!(
            times(select(&[a_persistent, a_shallower, a], 3, DIVERSITY_WINDOW)),
            [(100.0, 6), (100.0, 4), (100.0, 6)]
        );
        // A variant is never the first pick, even when predicted faster than its structure.
        let quick_variant = candidate(128, 256, 4, 90.0, true);
        assert_eq!(
            times(select(&[quick_variant, a], 2, DIVERSITY_WINDOW)),
            [(100.0, 6), (90.0, 4)]
        );
        // Past the window nothing but the fastest structures: a far variant is not picked.
        let far_variant = candidate(128, 128, 4, 150.0, true);
        assert_eq!(
            times(select(&[far_variant, far, a], 3, DIVERSITY_WINDOW)),
            [(100.0, 6), (150.0, 6)]
        );
        // Variants alone (no policy hands those over) still get a ranking.
        assert_eq!(
            times(select(
                &[a_shallower, candidate(256, 128, 5, 106.0, true)],
                2,
                DIVERSITY_WINDOW
            )),
            [(100.0, 4), (106.0, 5)]
        );
    }

    /// A twin of a pick (the same but for persistence or a cluster) waits while another
    /// structure is left, in the window or past it, then fills the slots left, fastest first.
    #[test]
    fn twins_of_a_pick_wait_for_other_structures() {
        let a = candidate(128, 256, 6, 100.0, false);
        let twin = |persistent, cluster_m, time_us| Candidate {
            tile: TileConfig {
                persistent,
                cluster_m,
                ..a.tile
            },
            time_us,
            ..a
        };
        let (a_persistent, a_cluster) = (twin(true, 1, 100.0), twin(false, 2, 100.5));
        let b = candidate(256, 128, 6, 140.0, false);
        let picks = |all: &[Candidate], k| {
            select(all, k, DIVERSITY_WINDOW)
                .iter()
                .map(|c| (c.time_us, c.tile.persistent, c.tile.cluster_m))
                .collect::<Vec<_>>()
        };
        // b is past the window (112 us), the twins within it: b still comes second.
        assert_eq!(
            picks(&[a_cluster, b, a_persistent, a], 3),
            [(100.0, false, 1), (140.0, false, 1), (100.0, true, 1)]
        );
        assert_eq!(
            picks(&[a_cluster, b, a_persistent, a], 4),
            [
                (100.0, false, 1),
                (140.0, false, 1),
                (100.0, true, 1),
                (100.5, false, 2)
            ]
        );
        // A structure in the window comes before the twins too, whatever its similarity.
        let c = candidate(128, 256, 5, 108.0, false);
        assert_eq!(
            picks(&[a_cluster, c, a_persistent, a], 3),
            [(100.0, false, 1), (108.0, false, 1), (100.0, true, 1)]
        );
    }

    /// The k fastest twin classes keep each class's fastest time, whatever the order they come in.
    #[test]
    fn fastest_classes_keep_each_class_once() {
        let a = candidate(128, 256, 6, 0.0, false).tile;
        let a_persistent = TileConfig {
            persistent: true,
            ..a
        };
        let b = candidate(256, 128, 6, 0.0, false).tile;
        let c = candidate(64, 128, 6, 0.0, false).tile;
        let mut classes = FastestClasses::new(2);
        for (time, tile) in [(30.0, &c), (12.0, &a_persistent), (20.0, &b), (10.0, &a)] {
            classes.push(time, tile);
        }
        // a and its persistent twin are one class (10), then b (20); c was pushed out.
        assert_eq!(classes.kth(), Some(20.0));
        assert_eq!(classes.classes.len(), 2);
        classes.push(15.0, &c);
        assert_eq!(classes.kth(), Some(15.0));
    }

    #[test]
    fn ordered_bits_follow_total_cmp_and_invert() {
        let xs = [-3.5, -0.0, 0.0, 1e-300, 1.0, 2.5, 1e300, f64::INFINITY];
        for w in xs.windows(2) {
            assert!(ordered_bits(w[0]) < ordered_bits(w[1]), "{w:?}");
        }
        for x in xs {
            assert_eq!(from_ordered_bits(ordered_bits(x)).to_bits(), x.to_bits());
        }
    }
}
