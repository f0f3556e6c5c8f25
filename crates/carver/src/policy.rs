//! The policy: which configurations of a family are worth pricing for a problem.
//!
//! Roller's rules, applied to a family's legal space:
//! - **Alignment.** Tiles come from the family's sizes, which are multiples of the tensor
//!   instruction shape; a family's warp layouts only accept tiles its instruction divides. A
//!   dimension that is contiguous in memory gets at least [`MIN_ROW_BYTES`] per tile row (two
//!   32-byte sectors; 128-byte rows where the tile allows). Shared-memory bank conflicts are not a
//!   pruning rule because every family here swizzles its shared-memory layout (Triton's and
//!   TileLang's swizzled layouts, the 128-byte TMA swizzle of `cuda-sm90`), so the cost model
//!   prices conflict-free reads.
//! - **Growth along the best-reuse dimension.** Roller grows a tile greedily, one dimension at a
//!   time, to avoid pricing the whole space. Here pricing is microseconds, so every aligned tile up
//!   to the size that covers the problem is a candidate, and the cost model's traffic terms (the
//!   data reuse growth maximizes) decide; best-bound-first pricing (below) then spends its time on
//!   the tiles growth would have reached, without the greedy path's local optima.
//! - **Padding.** No tile larger than the smallest that covers a dimension, and none whose padding
//!   exceeds [`MAX_PADDING_WASTE`] (unless no size does better): shapes the tiles do not divide
//!   get an answer with bounded waste.
//! - **Reduction step, stages, rasterization, split-K.** Every `block_k` the family allows (with
//!   whole rows when K is contiguous); for every structure the pipeline depth the model prefers
//!   (pricing the deepest depth of each occupancy level); the launch-order group that moves the
//!   fewest DRAM bytes given what the L2 holds, and none when A and B fit in the L2 or there is one
//!   tile row; split-K only when the tiles cannot fill twice the SMs. Structures in the
//!   ranking's diversity window also get a shallower depth ([`variant_depth`]).
//! - **Duplicates and dominated points.** One warp layout per tile and warp count; mma.sync is not
//!   priced where wgmma can run the tile; deeper pipelines at equal occupancy, and groups that move
//!   no fewer bytes, are not priced separately.
//!
//! What is left is a few hundred structures; they are priced best lower bound first, and pricing
//! stops as soon as the next bound shows that nothing left could be picked by a top-k ranking,
//! which typically leaves a few dozen to price.

use carver_arch::{Arch, InstructionFamily};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::cost::{
    PairTerms, Pricer, StructureTerms, TileGroup, blocks_per_sm, launch_order_matters,
    registers_for_blocks,
};
use crate::dtype::Layout;
use crate::family::{FamilyRules, Resources, WarpLayout, check_config, check_fits};
use crate::problem::Problem;
pub use crate::rank::Candidate;
use crate::rank::{PickBound, window_for};
use crate::tile::{Raster, RasterOrder, TileConfig};

/// Largest fraction of a padded tile grid that may be padding (unless no tile does better).
pub const MAX_PADDING_WASTE: f64 = 0.5;

/// Block sizes along one dimension of extent `dim`: no size beyond the smallest that covers the
/// dimension, and none whose padding exceeds [`MAX_PADDING_WASTE`].
fn useful_sizes(sizes: &[u32], dim: u64) -> Vec<u32> {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let cover = sorted.iter().copied().find(|&s| u64::from(s) >= dim);
    let waste = |s: u32| {
        let padded = dim.div_ceil(u64::from(s)) * u64::from(s);
        (padded - dim) as f64 / padded as f64
    };
    let smallest_waste = sorted
        .iter()
        .map(|&s| waste(s))
        .fold(f64::INFINITY, f64::min);
    sorted
        .into_iter()
        .filter(|&s| cover.is_none_or(|c| s <= c))
        .filter(|&s| waste(s) <= MAX_PADDING_WASTE.max(smallest_waste))
        .collect()
}

/// Bytes of contiguous memory a tile row should cover: two 32-byte sectors. Shorter rows make
/// every block fetch partial lines and multiply the requests per byte.
pub const MIN_ROW_BYTES: u32 = 64;

/// Sizes along a dimension that is contiguous in memory for some operand: at least
/// [`MIN_ROW_BYTES`] per row, or the covering size when the dimension itself is shorter.
fn contiguous_sizes(sizes: &[u32], dim: u64, elem_bytes: u32) -> Vec<u32> {
    let useful = useful_sizes(sizes, dim);
    let long_rows: Vec<u32> = useful
        .iter()
        .copied()
        .filter(|&s| s * elem_bytes >= MIN_ROW_BYTES)
        .collect();
    if long_rows.is_empty() {
        useful.iter().copied().max().into_iter().collect()
    } else {
        long_rows
    }
}

/// Every configuration the policy keeps, priced, in no particular order.
///
/// Tiles larger than the problem are pruned first; a family whose smallest legal tile is still
/// larger than a tiny problem (TileLang needs 128 threads' worth of tile) gets its whole list.
pub fn candidates(family: &dyn FamilyRules, p: &Problem, arch: &Arch) -> Vec<Candidate> {
    candidates_for_topk(family, p, arch, None)
}

/// Structures a search typically expands, and prices, for one problem: its lists are sized for
/// them up front, since growing them was 5-6% of a generic recommendation's instructions
/// (callgrind; docs/RESULTS.md, "the search's lists sized up front").
const TYPICAL_STRUCTURES: usize = 1024;
const TYPICAL_PRICED: usize = 512;

/// The configurations a ranking of `topk` can pick from: [`candidates`] without the structures
/// whose lower bound shows they can be neither in the ranking's diversity window nor among the
/// `topk` fastest. The ranking of what is left is the ranking of the whole list.
pub fn candidates_for_topk(
    family: &dyn FamilyRules,
    p: &Problem,
    arch: &Arch,
    topk: Option<usize>,
) -> Vec<Candidate> {
    let Some(pricer) = Pricer::new(family, p, arch) else {
        return Vec::new();
    };
    let [bms, bns, bks] = family.block_sizes(p, arch);
    let e = p.in_bytes();
    // M is contiguous for a column-major A, N for a row-major B, K for the other two.
    let m_sizes = match p.layout_a {
        Layout::Col => contiguous_sizes(&bms, p.m, e),
        Layout::Row => useful_sizes(&bms, p.m),
    };
    let n_sizes = match p.layout_b {
        Layout::Row => contiguous_sizes(&bns, p.n, e),
        Layout::Col => useful_sizes(&bns, p.n),
    };
    let k_sizes = contiguous_sizes(&bks, p.k, e);
    let search = Search {
        pricer: &pricer,
        family,
        p,
        arch,
        order_matters: launch_order_matters(p, arch) && family.groups().len() > 1,
        window: window_for(family, p, arch),
    };
    let (mut out, mut terms) = search.run(&m_sizes, &n_sizes, &k_sizes, topk);
    if out.is_empty() {
        (out, terms) = search.run(&bms, &bns, &bks, topk);
    }
    let variants = depth_variants(&search, &out, &terms);
    out.extend(variants);
    let hedges = register_hedges(&search, &out, &terms);
    out.extend(hedges);
    out
}

/// Configurations whose register estimate is within its measured error of fitting one more
/// block per SM, priced as if that block fits: the hedges a top-k ranking may spend a slot on.
///
/// A compiler's register count is only known after compiling, and a block more per SM can
/// change a tile's time by a third (docs/RESULTS.md, "Hedging the register estimate"). For each
/// structure the search priced, the deepest pipeline at which one more block would fit by shared
/// memory, where only the estimate's excess keeps it out, is priced at that occupancy; it is
/// kept when it lands within the ranking's diversity window of the fastest prediction. The
/// ranking never makes a hedge its first pick (`rank::select`).
///
/// `candidates` starts with the structures the search priced, `terms` their terms.
fn register_hedges(
    search: &Search,
    candidates: &[Candidate],
    terms: &[StructureTerms],
) -> Vec<Candidate> {
    let Search {
        pricer,
        family,
        p,
        arch,
        ..
    } = *search;
    let (limit, shallowest) = search.variant_bounds(candidates);
    let mut out = Vec::with_capacity(candidates.len());
    for (c, terms) in candidates.iter().zip(terms) {
        let Some(margin) = family.register_estimate_margin(&c.tile, p) else {
            continue;
        };
        // Registers do not depend on the depth: the block more that registers keep out is the
        // same at every depth, and worth looking for only within the margin and the grid.
        let by_registers = blocks_per_sm(
            &c.tile,
            Resources {
                smem_bytes: 0,
                ..c.res
            },
            arch,
        );
        let wanted = registers_for_blocks(&c.tile, arch, by_registers + 1);
        if f64::from(c.res.registers_per_thread) > f64::from(wanted) * margin {
            continue;
        }
        if by_registers >= pricer.usable_occupancy(terms, &c.tile) {
            continue;
        }
        let hedged_blocks = by_registers + 1;
        // The deepest depth at which, with `wanted` registers, shared memory admits the block
        // more too; at every other depth the estimate's registers keep it out.
        for stages in (shallowest..=c.tile.stages).rev() {
            let tile = TileConfig { stages, ..c.tile };
            let Ok(res) = check_config(family, &tile, p, arch) else {
                continue;
            };
            let hedged = Resources {
                registers_per_thread: wanted,
                ..res
            };
            if blocks_per_sm(&tile, hedged, arch) < hedged_blocks {
                continue;
            }
            // A configuration already offered (a structure or a depth variant) is not offered
            // again.
            if candidates.iter().any(|o| o.tile == tile) {
                break;
            }
            if let Some(time) = pricer.time_with(terms, &tile, hedged_blocks) {
                let time_us = time * 1e6;
                if time_us <= limit && time_us < c.time_us {
                    out.push(Candidate {
                        tile,
                        res,
                        time_us,
                        depth_variant: false,
                        hedged_registers: Some(wanted),
                    });
                }
            }
            break;
        }
    }
    out
}

/// The depth of the one shallower variant the ranking may pick for a structure in its diversity
/// window when the model prefers `stages`: three quarters as deep (rounded), and at least one
/// stage shallower, but no shallower than `shallowest`.
///
/// The model prices depths that cost no occupancy alike (the deeper one wins its ties), yet
/// they measure apart: on the stored H100 sweeps the fastest of a large GEMM's tile was often
/// one stage shallower than the model's pick, and on the H200 (`benches/sm90/config_variants.py`,
/// docs/RESULTS.md, "Depths the model prices alike") rings of 10-12 stages of swapped 64-row
/// tiles ran fastest at 8 (2-11% faster, 6 of 6 shapes), rings of 5 of larger tiles at 4
/// (3-12%, 6 of 8), while one stage shallower than the deepest measured level with it. For the
/// depths up to 6 that most tiles fit, this is one stage shallower, as before. The variant lets
/// a top-k hedge that error; the ranking weighs it as a twin of its structure (`rank::select`).
pub fn variant_depth(stages: u32, shallowest: u32) -> Option<u32> {
    let three_quarters = (3 * stages + 2) / 4;
    let depth = three_quarters.min(stages.checked_sub(1)?);
    (depth >= shallowest).then_some(depth)
}

/// How many tile rows share a launch-order group in [`reduced_space`], where the grid has
/// several tile rows (Triton's customary `GROUP_SIZE_M`).
pub const REFERENCE_GROUP: u32 = 8;

/// A tile without its pipeline depth and launch order: its structure.
fn structure_of(t: &TileConfig) -> TileConfig {
    TileConfig {
        stages: 0,
        raster: Raster {
            group: 0,
            ..t.raster
        },
        ..*t
    }
}

/// Which of `tiles` (a family's whole legal space) belong to the reduced whole space a ranking
/// is measured against (`carver::reference_configs`): every structure without a cluster or
/// persistence (which the model treats as near-twins of the plain structure), at its deepest
/// legal ring and that ring's depth variant ([`variant_depth`], `shallowest` the family's
/// shallowest depth), in launch-order groups of [`REFERENCE_GROUP`] tile rows (of 1 when the
/// structure has no such group).
pub fn reduced_space(tiles: &[TileConfig], shallowest: u32) -> Vec<bool> {
    let plain = |t: &TileConfig| !t.persistent && t.cluster_m * t.cluster_n == 1;
    // Per plain structure, its deepest legal ring in groups of REFERENCE_GROUP and of 1.
    let mut deepest: HashMap<TileConfig, [Option<u32>; 2]> = HashMap::new();
    for t in tiles.iter().filter(|t| plain(t)) {
        let slot = match t.raster.group {
            REFERENCE_GROUP => 0,
            1 => 1,
            _ => continue,
        };
        let d = &mut deepest.entry(structure_of(t)).or_default()[slot];
        *d = Some(d.map_or(t.stages, |d| d.max(t.stages)));
    }
    tiles
        .iter()
        .map(|t| {
            let Some(&[grouped, alone]) = deepest.get(&structure_of(t)).filter(|_| plain(t)) else {
                return false;
            };
            let (group, d) = match (grouped, alone) {
                (Some(d), _) => (REFERENCE_GROUP, d),
                (None, Some(d)) => (1, d),
                (None, None) => return false,
            };
            t.raster.group == group
                && (t.stages == d || Some(t.stages) == variant_depth(d, shallowest))
        })
        .collect()
}

/// The slowest time within the diversity `window` of the fastest of `candidates`.
fn window_limit(candidates: &[Candidate], window: f64) -> f64 {
    let best = candidates
        .iter()
        .map(|c| c.time_us)
        .fold(f64::INFINITY, f64::min);
    best * (1.0 + window)
}

impl Search<'_> {
    /// What bounds every variant (depth or register hedge) of `candidates`: the slowest time
    /// within the diversity window of the fastest, and the family's shallowest depth.
    fn variant_bounds(&self, candidates: &[Candidate]) -> (f64, u32) {
        (
            window_limit(candidates, self.window),
            self.family.stage_range().0,
        )
    }
}

/// The depth variant ([`variant_depth`]) of each candidate within the diversity window of the
/// fastest, priced (`terms`: the candidates' structure terms, which do not depend on the depth).
fn depth_variants(
    search: &Search,
    candidates: &[Candidate],
    terms: &[StructureTerms],
) -> Vec<Candidate> {
    let Search {
        pricer,
        family,
        p,
        arch,
        ..
    } = *search;
    let (limit, shallowest) = search.variant_bounds(candidates);
    let mut out = Vec::with_capacity(candidates.len());
    for (c, terms) in candidates
        .iter()
        .zip(terms)
        .filter(|(c, _)| c.time_us <= limit)
    {
        let Some(stages) = variant_depth(c.tile.stages, shallowest) else {
            continue;
        };
        let tile = TileConfig { stages, ..c.tile };
        let Ok(res) = check_config(family, &tile, p, arch) else {
            continue;
        };
        if let Some(time) = pricer.time_with(terms, &tile, blocks_per_sm(&tile, res, arch)) {
            out.push(Candidate {
                tile,
                res,
                time_us: time * 1e6,
                depth_variant: true,
                hedged_registers: None,
            });
        }
    }
    out
}

/// Best-bound-first search over one set of block sizes.
///
/// Structures come in groups (block M and N, split-K factor, persistence) whose lower bound
/// holds for every structure in them ([`Pricer::group_lower_bound`]). Groups and structures
/// wait in one queue ordered by bound: a group is expanded into its legal structures, with
/// their own bounds, only when it reaches the front, and a structure is priced when it does.
/// The search stops once the front's bound rules out everything left.
struct Search<'a> {
    pricer: &'a Pricer<'a>,
    family: &'a dyn FamilyRules,
    p: &'a Problem,
    arch: &'a Arch,
    /// Whether the launch order can change DRAM traffic (the family has groups to choose).
    order_matters: bool,
    /// The ranking's diversity window for this problem (`rank::window_for`).
    window: f64,
}

/// What waits in the queue: a block size pair or a group not yet expanded, or a structure (of
/// an expanded group) not yet priced.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Pair(u32),
    Group(u32),
    Structure(u32),
}

/// One structure (everything but the pipeline depth and the launch order), legal at the
/// shallowest depth, with its resources there and its model terms.
#[derive(Clone, Copy)]
struct Structure {
    tile: TileConfig,
    res: Resources,
    terms: StructureTerms,
}

impl Search<'_> {
    /// The structures worth pricing, priced, with their terms.
    fn run(
        &self,
        bms: &[u32],
        bns: &[u32],
        bks: &[u32],
        topk: Option<usize>,
    ) -> (Vec<Candidate>, Vec<StructureTerms>) {
        let mut out = Vec::with_capacity(TYPICAL_PRICED);
        let mut terms = Vec::with_capacity(TYPICAL_PRICED);
        let Some(topk) = topk else {
            // The whole space: nothing to prune, no order needed.
            let (layouts, groups) = self.groups(bms, bns, bks);
            let mut structures = Vec::new();
            for (pair, group) in &groups {
                structures.clear();
                self.expand_into(&layouts[*pair], group, bks, &mut structures);
                for s in &structures {
                    if let Some(c) = self.price(s) {
                        out.push(c);
                        terms.push(s.terms);
                    }
                }
            }
            return (out, terms);
        };
        let Some(&longest_k) = bks.iter().max() else {
            return (out, terms);
        };
        let pairs: Vec<(u32, u32)> = bms
            .iter()
            .flat_map(|&bm| bns.iter().map(move |&bn| (bm, bn)))
            .collect();
        // Expanded pairs' warp layouts and groups (with their pair), and the expanded groups'
        // structures.
        let mut layouts: Vec<Vec<WarpLayout>> = vec![Vec::new(); pairs.len()];
        // Sized for a typical search up front (growing them was a few percent of a call).
        let mut groups: Vec<(usize, TileGroup)> = Vec::with_capacity(4 * pairs.len());
        let mut structures: Vec<Structure> = Vec::with_capacity(TYPICAL_STRUCTURES);
        // Each structure's lower bound, by structure.
        let mut bounds: Vec<f64> = Vec::with_capacity(TYPICAL_STRUCTURES);
        // Where each expanded group's structures lie in `structures`, by group.
        let mut expanded: Vec<Option<(usize, usize)>> = Vec::with_capacity(4 * pairs.len());
        // Best bound first. Bounds are finite and non-negative, so their bit patterns sort as
        // the numbers do.
        let key = |bound: f64| (bound * 1e6).to_bits();
        let pair_terms: Vec<PairTerms> = pairs
            .iter()
            .map(|&(bm, bn)| self.pricer.pair_terms(bm, bn, longest_k))
            .collect();
        let mut queue: BinaryHeap<Reverse<(u64, Node)>> = pair_terms
            .iter()
            .enumerate()
            .map(|(i, pair)| {
                let bound = self.pricer.pair_lower_bound(pair);
                Reverse((key(bound), Node::Pair(i as u32)))
            })
            .collect();
        queue.reserve(8 * pairs.len());
        let mut fastest = PickBound::new(topk, self.window);
        // The structure priced last, by index, and its price.
        let mut last_priced: Option<(usize, Option<Candidate>)> = None;
        while let Some(Reverse((bound_bits, node))) = queue.pop() {
            // Rounding in the bound's different order of sums must not prune a tie.
            if f64::from_bits(bound_bits) * (1.0 - 1e-9) > fastest.limit() {
                break;
            }
            match node {
                Node::Pair(i) => {
                    let (bm, bn) = pairs[i as usize];
                    let Some((pair_layouts, pair_groups)) = self.pair_groups(bm, bn, bks) else {
                        continue;
                    };
                    layouts[i as usize] = pair_layouts;
                    // A group's bound does not depend on persistence, the innermost loop of
                    // `pair_groups`: the persistent twin of a group takes the bound just
                    // computed.
                    let mut last: Option<(TileGroup, f64)> = None;
                    for g in pair_groups {
                        let bound = match last {
                            Some((prev, bound)) if prev.same_but_persistence(&g) => bound,
                            _ => self.pricer.group_lower_bound(&pair_terms[i as usize], &g),
                        };
                        last = Some((g, bound));
                        queue.push(Reverse((key(bound), Node::Group(groups.len() as u32))));
                        groups.push((i as usize, g));
                        expanded.push(None);
                    }
                }
                Node::Group(i) => {
                    let i = i as usize;
                    let (pair, group) = groups[i];
                    let first = structures.len();
                    // Legality, resources and terms do not read persistence: a persistent twin
                    // (`pair_groups` lists it right after its twin) reuses its twin's structures.
                    let twin = i
                        .checked_sub(1)
                        .filter(|&j| {
                            groups[j].0 == pair && groups[j].1.same_but_persistence(&group)
                        })
                        .and_then(|j| expanded[j]);
                    // Nor do their lower bounds.
                    match twin {
                        Some((from, to)) => {
                            for j in from..to {
                                let s = structures[j];
                                structures.push(Structure {
                                    tile: TileConfig {
                                        persistent: group.persistent,
                                        ..s.tile
                                    },
                                    ..s
                                });
                                bounds.push(bounds[j]);
                            }
                        }
                        None => {
                            self.expand_into(&layouts[pair], &group, bks, &mut structures);
                            bounds.extend(
                                structures[first..]
                                    .iter()
                                    .map(|s| self.pricer.lower_bound(&s.terms, &s.tile)),
                            );
                        }
                    }
                    expanded[i] = Some((first, structures.len()));
                    for (j, &bound) in bounds.iter().enumerate().skip(first) {
                        queue.push(Reverse((key(bound), Node::Structure(j as u32))));
                    }
                }
                Node::Structure(j) => {
                    let s = &structures[j as usize];
                    // A cluster twin of the structure just priced (`expand_into` lists them
                    // together, their bounds are equal) launching the same tiles has the same
                    // terms: it is priced the same.
                    let priced = match last_priced {
                        Some((prev, priced)) if cluster_twins(&structures[prev], s) => {
                            priced.map(|c: Candidate| Candidate {
                                tile: TileConfig {
                                    cluster_m: s.tile.cluster_m,
                                    cluster_n: s.tile.cluster_n,
                                    ..c.tile
                                },
                                ..c
                            })
                        }
                        _ => self.price(s),
                    };
                    last_priced = Some((j as usize, priced));
                    if let Some(best) = priced {
                        fastest.push(best.time_us, &best.tile);
                        out.push(best);
                        terms.push(s.terms);
                    }
                }
            }
        }
        (out, terms)
    }

    /// Every group of the space: the warp layouts of each block size pair, and the groups
    /// with the index of their pair's layouts ([`Search::pair_groups`]).
    #[allow(clippy::type_complexity)]
    fn groups(
        &self,
        bms: &[u32],
        bns: &[u32],
        bks: &[u32],
    ) -> (Vec<Vec<WarpLayout>>, Vec<(usize, TileGroup)>) {
        let mut pairs = Vec::with_capacity(bms.len() * bns.len());
        let mut out = Vec::new();
        for &bm in bms {
            for &bn in bns {
                let Some((layouts, groups)) = self.pair_groups(bm, bn, bks) else {
                    continue;
                };
                out.extend(groups.into_iter().map(|g| (pairs.len(), g)));
                pairs.push(layouts);
            }
        }
        (pairs, out)
    }

    /// The warp layouts of the block size pair `bm` x `bn` and its groups (`None` when no
    /// layout runs it). mma.sync runs at a fraction of wgmma's rate where both exist: a tile
    /// some warp count can run with wgmma is not priced with mma.sync.
    fn pair_groups(
        &self,
        bm: u32,
        bn: u32,
        bks: &[u32],
    ) -> Option<(Vec<WarpLayout>, Vec<TileGroup>)> {
        let (p, arch, family) = (self.p, self.arch, self.family);
        let sms = u64::from(arch.sm.count);
        let (&shortest_k, &longest_k) = (bks.iter().min()?, bks.iter().max()?);
        let most_k_tiles = p.k.div_ceil(u64::from(shortest_k));
        let tiles = p.m.div_ceil(u64::from(bm)) * p.n.div_ceil(u64::from(bn)) * p.batch;
        let mut layouts = family.warp_layouts(bm, bn, p, arch);
        let fastest_mma = layouts
            .iter()
            .map(|l| l.mma)
            .find(|&mma| mma != InstructionFamily::MmaSync);
        if fastest_mma.is_some() {
            layouts.retain(|l| l.mma != InstructionFamily::MmaSync);
        }
        let mma = fastest_mma.or(layouts.first().map(|l| l.mma))?;
        let least_compute_share = layouts
            .iter()
            .map(|l| {
                let compute = f64::from(l.warps_m * l.warps_n);
                compute / (compute + f64::from(l.producer_warps))
            })
            .fold(1.0, f64::min);
        let mut out = Vec::with_capacity(family.split_ks().len() * family.persistence().len());
        for &split in family.split_ks() {
            // Split K only when the tiles alone leave SMs idle, and keep at least two
            // iterations per split (for some block_k) so the pipeline has work.
            if split > 1 && (tiles >= 2 * sms || most_k_tiles < 2 * u64::from(split)) {
                continue;
            }
            for &persistent in family.persistence() {
                out.push(TileGroup {
                    block_m: bm,
                    block_n: bn,
                    split_k: split,
                    persistent,
                    mma,
                    longest_block_k: longest_k,
                    least_compute_share,
                });
            }
        }
        Some((layouts, out))
    }

    /// The legal structures of `group`.
    #[cfg(test)]
    fn expand(&self, layouts: &[WarpLayout], group: &TileGroup, bks: &[u32]) -> Vec<Structure> {
        let mut out = Vec::new();
        self.expand_into(layouts, group, bks, &mut out);
        out
    }

    /// [`Search::expand`], appending to `out`.
    fn expand_into(
        &self,
        layouts: &[WarpLayout],
        group: &TileGroup,
        bks: &[u32],
        out: &mut Vec<Structure>,
    ) {
        let (p, arch, family) = (self.p, self.arch, self.family);
        let split = group.split_k;
        out.reserve(layouts.len() * bks.len() * family.clusters().len());
        for layout in layouts {
            for &bk in bks {
                // At least two iterations per split.
                if split > 1 && p.k.div_ceil(u64::from(bk)) < 2 * u64::from(split) {
                    continue;
                }
                for &(cluster_m, cluster_n) in family.clusters() {
                    let tile = TileConfig {
                        block_m: group.block_m,
                        block_n: group.block_n,
                        block_k: bk,
                        warps_m: layout.warps_m,
                        warps_n: layout.warps_n,
                        producer_warps: layout.producer_warps,
                        stages: family.stage_range().0,
                        raster: Raster {
                            order: RasterOrder::GroupedRows,
                            group: family.groups()[0],
                        },
                        split_k: split,
                        cluster_m,
                        cluster_n,
                        persistent: group.persistent,
                        mma: layout.mma,
                        swap_ab: layout.swap_ab,
                    };
                    if let Some(res) = legal_at_shallowest(family, &tile, p, arch) {
                        let terms = self.pricer.terms(&tile);
                        out.push(Structure { tile, res, terms });
                    }
                }
            }
        }
    }

    /// The structure at its best launch order and pipeline depth (`None` when no depth fits).
    fn price(&self, s: &Structure) -> Option<Candidate> {
        let (p, arch, family, pricer) = (self.p, self.arch, self.family, self.pricer);
        // The launch order: the group that moves the fewest DRAM bytes, and among groups that
        // move as many (every group, when A and B fit in the L2) the one that launches a column
        // of tile rows together ([`choose_group`]). One tile row has no order to choose.
        let tiles_m = p.m.div_ceil(u64::from(s.tile.block_m));
        let base = if tiles_m > 1 && family.groups().len() > 1 {
            TileConfig {
                raster: choose_group(self, &s.terms, s.tile, s.res, tiles_m),
                ..s.tile
            }
        } else {
            s.tile
        };
        best_stages(pricer, &s.terms, family, p, arch, base, s.res)
    }
}

/// Whether two structures differ only in their cluster, and not in their terms: the model reads
/// a cluster only through the tiles it launches (test
/// `cluster_twins_launching_the_same_tiles_price_the_same`).
fn cluster_twins(a: &Structure, b: &Structure) -> bool {
    a.terms == b.terms
        && a.res == b.res
        && TileConfig {
            cluster_m: b.tile.cluster_m,
            cluster_n: b.tile.cluster_n,
            ..a.tile
        } == b.tile
}

/// The launch order (of the family's groups) whose main loop moves the fewest DRAM bytes; among
/// groups that move as many (all of them when A and B fit in the L2), a structure takes the
/// smallest group that covers its `tiles_m` tile rows (the largest when none does), so the
/// blocks that read one B panel (of a K split: the kernels walk each split's tiles in the
/// group's order) launch together.
///
/// Launched together, the readers of a B panel find it in the L2 at the same time (the L2 serves
/// simultaneous requests for a line once: docs/RESULTS.md, "Nsight Compute on the H200").
/// Measured on the H200 (`cuda-sm90`, at least two tile rows): on six fresh shapes, group 8 ran
/// 1.00-1.20x as fast as group 1 (median 1.06; `crates/carver-gpu/measurements/h200-issue15-group-ab`),
/// and over 31 unsplit pairs of the reference runs 0.97-1.34x (median 1.04); over 28 split pairs
/// 0.82-1.32x (geomean 1.03, 22 of them at least 1.00).
fn choose_group(
    search: &Search,
    terms: &StructureTerms,
    plain: TileConfig,
    res: Resources,
    tiles_m: u64,
) -> Raster {
    let (pricer, family) = (search.pricer, search.family);
    let occupancy = blocks_per_sm(&plain, res, search.arch);
    let with_group = |group| Raster {
        group,
        ..plain.raster
    };
    let traffic = |group| {
        let tile = TileConfig {
            raster: with_group(group),
            ..plain
        };
        pricer.launch_order_traffic(terms, &tile, occupancy)
    };
    // Among the groups that move the fewest bytes (the family lists them ascending): the first,
    // the first that covers the tile rows, and the last.
    let mut least = f64::INFINITY;
    let (mut covering, mut last) = (None, None);
    for &group in family.groups() {
        let bytes = if search.order_matters {
            traffic(group)
        } else {
            0.0
        };
        if bytes < least * (1.0 - 1e-9) {
            least = bytes;
            (covering, last) = (None, None);
        }
        if bytes <= least * (1.0 + 1e-9) {
            if covering.is_none() && u64::from(group) >= tiles_m {
                covering = Some(group);
            }
            last = Some(group);
        }
    }
    covering.or(last).map_or(plain.raster, with_group)
}

/// Resources of `tile` (at the family's shallowest depth) when it is legal there.
fn legal_at_shallowest(
    family: &dyn FamilyRules,
    tile: &TileConfig,
    p: &Problem,
    arch: &Arch,
) -> Option<Resources> {
    let res = family.resources(tile, p);
    // The numeric limits first: they reject more tiles than the family's rules, more cheaply.
    (check_fits(tile, res, arch).is_ok() && family.check_rules(tile, p, arch).is_ok())
        .then_some(res)
}

/// The pipeline depth the model prefers for one structure.
///
/// Legality is checked once at the shallowest depth; deeper pipelines differ only in shared
/// memory, which grows by a fixed amount per stage, so the deepest legal one is arithmetic.
fn best_stages(
    pricer: &Pricer,
    terms: &StructureTerms,
    family: &dyn FamilyRules,
    p: &Problem,
    arch: &Arch,
    base: TileConfig,
    res_lo: Resources,
) -> Option<Candidate> {
    let (lo, hi) = family.stage_range();
    let res_next = family.resources(
        &TileConfig {
            stages: lo + 1,
            ..base
        },
        p,
    );
    let per_stage = res_next.smem_bytes.saturating_sub(res_lo.smem_bytes);
    let room = arch.shared_memory.per_block_optin_bytes - res_lo.smem_bytes;
    let deepest = room
        .checked_div(per_stage)
        .map_or(hi, |extra| hi.min(lo + extra as u32));
    // A block that waits for its staged loads every iteration gains nothing the model sees from
    // a deeper ring of its other operand, so its depths tie and the deepest would win; yet the
    // deeper ring costs its prologue and shared memory. Over the stored sweeps one stage more
    // made B-staged configs 1.8-4.8% slower (geomean per depth, 7,087 pairs; docs/RESULTS.md,
    // "Staged configs prefer three quarters of their deepest ring"), while the shallowest depth
    // lost more than it won. Such a structure prefers its deepest ring's depth variant.
    let deepest = if pricer.any_staged() {
        variant_depth(deepest, lo).unwrap_or(deepest)
    } else {
        deepest
    };
    // Occupancy beyond what the grid can fill changes nothing the model (or the GPU) sees.
    let usable = pricer.usable_occupancy(terms, &base);
    let mut best: Option<(Candidate, u32)> = None;
    // Occupancy only falls as the pipeline deepens, and at equal usable occupancy a deeper
    // pipeline is never predicted slower: price only the deepest depth of each usable level.
    let mut priced_occupancy = 0;
    for stages in (lo..=deepest).rev() {
        if priced_occupancy >= usable {
            break;
        }
        let tile = TileConfig { stages, ..base };
        let res = match stages {
            s if s == lo => res_lo,
            s if s == lo + 1 => res_next,
            _ => family.resources(&tile, p),
        };
        let resident = blocks_per_sm(&tile, res, arch);
        let occupancy = resident.min(usable);
        if occupancy <= priced_occupancy {
            continue;
        }
        priced_occupancy = occupancy;
        let Some(time) = pricer.time_with(terms, &tile, resident) else {
            continue;
        };
        let time_us = time * 1e6;
        // Among depths within 1% of each other, prefer more resident blocks, then the deeper
        // pipeline: stages that cost no occupancy absorb the latency spread the mean hides.
        let better = match &best {
            None => true,
            Some((b, b_occupancy)) => {
                let bt = b.time_us;
                time_us < bt * 0.99 || (time_us <= bt * 1.01 && occupancy >= *b_occupancy)
            }
        };
        if better {
            let candidate = Candidate {
                tile,
                res,
                time_us,
                depth_variant: false,
                hedged_registers: None,
            };
            best = Some((candidate, occupancy));
        }
    }
    best.map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::family::Family;
    use crate::template::MatmulTemplate;
    use carver_arch::HardwareDb;
    use proptest::prelude::*;

    fn dim() -> impl Strategy<Value = u64> {
        prop_oneof![1u64..=64, 1u64..=4096, 4096u64..=32768]
    }

    /// Runs `check` on the search of one generated problem and its family's block sizes; a
    /// problem the arch or the family refuses passes.
    #[allow(clippy::too_many_arguments)]
    fn with_search(
        m: u64,
        n: u64,
        k: u64,
        target: Family,
        arch_key: &str,
        dtype: DType,
        b_col: bool,
        check: impl FnOnce(&Search, [Vec<u32>; 3]) -> Result<(), TestCaseError>,
    ) -> Result<(), TestCaseError> {
        let db = HardwareDb::embedded().unwrap();
        let arch = db.get(arch_key).unwrap();
        let tpl = MatmulTemplate::new(m, n, k)
            .with_dtype(dtype)
            .with_family(target)
            .with_layouts(Layout::Row, if b_col { Layout::Col } else { Layout::Row });
        let Ok(p) = tpl.validate(arch) else {
            return Ok(());
        };
        let family = target.rules();
        let Some(pricer) = Pricer::new(family, &p, arch) else {
            return Ok(());
        };
        let window = window_for(family, &p, arch);
        let search = Search {
            pricer: &pricer,
            family,
            p: &p,
            arch,
            order_matters: true,
            window,
        };
        check(&search, family.block_sizes(&p, arch))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

        /// A block size pair's bound holds for every group of the pair, and a group's for every
        /// structure the group expands to (and through the structure's own bound, for every
        /// depth and launch order of it).
        #[test]
        fn group_bound_is_below_its_structures(
            m in dim(), n in dim(), k in dim(),
            target in prop::sample::select(Family::ALL.to_vec()),
            arch_key in prop::sample::select(vec!["h100-sxm", "a100-sxm4-80gb", "l40s", "v100-sxm2", "b200"]),
            dtype in prop::sample::select(vec![DType::F16, DType::Bf16, DType::Tf32, DType::E4m3, DType::I8]),
            b_col in any::<bool>(),
        ) {
            with_search(m, n, k, target, arch_key, dtype, b_col, |search, [bms, bns, bks]| {
                let pricer = search.pricer;
                // A pair's bound holds for every group of the pair.
                for &bm in &bms {
                    for &bn in &bns {
                        let Some((_, groups)) = search.pair_groups(bm, bn, &bks) else { continue };
                        let pair = pricer.pair_terms(bm, bn, *bks.iter().max().unwrap());
                        let pair_bound = pricer.pair_lower_bound(&pair);
                        for group in groups {
                            let group_bound = pricer.group_lower_bound(&pair, &group);
                            prop_assert!(pair_bound <= group_bound * (1.0 + 1e-9),
                                "{bm} x {bn}: {pair_bound} > {group_bound} of {group:?}");
                        }
                    }
                }
                let (layouts, groups) = search.groups(&bms, &bns, &bks);
                for (pair, group) in groups {
                    let terms = pricer.pair_terms(group.block_m, group.block_n, group.longest_block_k);
                    let group_bound = pricer.group_lower_bound(&terms, &group);
                    for s in search.expand(&layouts[pair], &group, &bks) {
                        let bound = pricer.lower_bound(&s.terms, &s.tile);
                        prop_assert!(group_bound <= bound * (1.0 + 1e-9),
                            "{group:?}: {group_bound} > {bound} of {:?}", s.tile);
                    }
                }
                Ok(())
            })?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// What the search's reuse of a persistent group's structures assumes: expanding the
        /// persistent twin of a group gives the group's structures with persistence set, with
        /// the same resources and terms (legality and terms do not read persistence).
        #[test]
        fn a_persistent_twin_expands_to_its_twins_structures(
            m in dim(), n in dim(), k in dim(),
            target in prop::sample::select(Family::ALL.to_vec()),
            arch_key in prop::sample::select(vec!["h100-sxm", "h200", "a100-sxm4-80gb", "b200"]),
            dtype in prop::sample::select(vec![DType::F16, DType::Bf16, DType::E4m3]),
            b_col in any::<bool>(),
        ) {
            with_search(m, n, k, target, arch_key, dtype, b_col, |search, [bms, bns, bks]| {
                let (layouts, groups) = search.groups(&bms, &bns, &bks);
                for pair in groups.windows(2) {
                    let ((a_pair, a), (b_pair, b)) = (pair[0], pair[1]);
                    if a_pair != b_pair || !a.same_but_persistence(&b) {
                        continue;
                    }
                    let plain = search.expand(&layouts[a_pair], &a, &bks);
                    let twin = search.expand(&layouts[b_pair], &b, &bks);
                    prop_assert_eq!(plain.len(), twin.len());
                    for (x, y) in plain.iter().zip(&twin) {
                        prop_assert_eq!(TileConfig { persistent: b.persistent, ..x.tile }, y.tile);
                        prop_assert_eq!(x.res, y.res);
                        prop_assert_eq!(format!("{:?}", x.terms), format!("{:?}", y.terms));
                    }
                }
                Ok(())
            })?;
        }
    }

    /// Every pair of cluster twins ([`cluster_twins`]) among the structures of the whole space,
    /// each priced by the search.
    fn priced_cluster_twins(
        search: &Search,
        [bms, bns, bks]: [Vec<u32>; 3],
    ) -> Vec<[Option<Candidate>; 2]> {
        let (layouts, groups) = search.groups(&bms, &bns, &bks);
        let mut out = Vec::new();
        for (pair, group) in groups {
            let structures = search.expand(&layouts[pair], &group, &bks);
            for (i, a) in structures.iter().enumerate() {
                for b in structures[i + 1..].iter().filter(|b| cluster_twins(a, b)) {
                    out.push([search.price(a), search.price(b)]);
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

        /// The search prices a cluster twin as the structure before it: the model must read a
        /// cluster only through the tiles it launches.
        #[test]
        fn cluster_twins_launching_the_same_tiles_price_the_same(
            m in dim(), n in dim(), k in dim(),
            arch_key in prop::sample::select(vec!["h100-sxm", "h200"]),
            dtype in prop::sample::select(vec![DType::F16, DType::E4m3]),
            b_col in any::<bool>(),
        ) {
            with_search(m, n, k, Family::CudaSm90, arch_key, dtype, b_col, |search, sizes| {
                for [a, b] in priced_cluster_twins(search, sizes) {
                    let a = a.map(|c| (c.time_us, c.res, TileConfig { cluster_m: 1, ..c.tile }));
                    let b = b.map(|c| (c.time_us, c.res, TileConfig { cluster_m: 1, ..c.tile }));
                    prop_assert_eq!(a, b);
                }
                Ok(())
            })?;
        }
    }

    #[test]
    fn a_square_gemm_has_cluster_twins_priced_the_same() {
        with_search(
            4096,
            4096,
            4096,
            Family::CudaSm90,
            "h200",
            DType::F16,
            false,
            |search, sizes| {
                let twins = priced_cluster_twins(search, sizes);
                assert!(twins.len() > 10, "{} twins", twins.len());
                for [a, b] in twins {
                    let (a, b) = (a.unwrap(), b.unwrap());
                    assert_eq!(a.time_us, b.time_us);
                    assert_eq!(
                        TileConfig {
                            cluster_m: b.tile.cluster_m,
                            ..a.tile
                        },
                        b.tile
                    );
                }
                Ok(())
            },
        )
        .unwrap();
    }

    /// Where the launch order moves no DRAM bytes (both operands fit in the L2), a structure,
    /// split or not, launches a column of its tile rows together (the smallest group that
    /// covers them, else the largest).
    #[test]
    fn tile_rows_launch_together_when_the_order_moves_no_bytes() {
        let db = HardwareDb::embedded().unwrap();
        let arch = db.get("h200").unwrap();
        let family = Family::CudaSm90.rules();
        let mut checked = (0, 0);
        for (m, n, k) in [(192, 4096, 2048), (128, 1024, 8192), (96, 1024, 4096)] {
            let p = MatmulTemplate::new(m, n, k)
                .with_dtype(DType::Bf16)
                .with_family(Family::CudaSm90)
                .validate(arch)
                .unwrap();
            assert!(!launch_order_matters(&p, arch));
            for c in candidates_for_topk(family, &p, arch, Some(8)) {
                let tiles_m = p.m.div_ceil(u64::from(c.tile.block_m));
                let group = c.tile.raster.group;
                if tiles_m < 2 {
                    continue;
                }
                let covering = family
                    .groups()
                    .iter()
                    .copied()
                    .find(|&g| u64::from(g) >= tiles_m);
                assert_eq!(Some(group), covering.or(Some(16)), "{:?}", c.tile);
                if c.tile.split_k == 1 {
                    checked.0 += 1;
                } else {
                    checked.1 += 1;
                }
            }
        }
        assert!(checked.0 > 0 && checked.1 > 0, "{checked:?}");
    }

    /// Jais-13B's MLP at 64 tokens (64 x 13653 x 5120: N odd, so Triton stages B through
    /// registers): the H200 ran 64 x 64 x 64 with 16 K splits in 183.6 us with 5 stages and 385.7
    /// with 6, the model's first pick before this rule (docs/RESULTS.md, "Staged configs prefer
    /// three quarters of their deepest ring"). No structure of a staged problem is offered at the
    /// deepest ring it fits (its depth variant may be shallower still).
    #[test]
    fn staged_structures_stop_short_of_their_deepest_ring() {
        let db = HardwareDb::embedded().unwrap();
        let arch = db.get("h200").unwrap();
        let family = Family::Triton.rules();
        let p = MatmulTemplate::new(64, 13653, 5120)
            .with_family(Family::Triton)
            .validate(arch)
            .unwrap();
        assert!(family.load_paths(&p, arch).any_staged());
        let (lo, hi) = family.stage_range();
        let offered = candidates_for_topk(family, &p, arch, Some(8));
        assert!(!offered.is_empty());
        for c in offered.iter().filter(|c| c.hedged_registers.is_none()) {
            let fits =
                |stages| check_config(family, &TileConfig { stages, ..c.tile }, &p, arch).is_ok();
            let deepest = (lo..=hi).rev().find(|&s| fits(s)).unwrap();
            assert!(
                c.tile.stages < deepest || deepest == lo,
                "{:?} at its deepest ring ({deepest})",
                c.tile
            );
        }
    }

    #[test]
    fn variants_sit_three_quarters_as_deep_and_at_least_one_stage_shallower() {
        // The shallow rings most tiles fit: one stage shallower, as before.
        for (stages, variant) in [(3, 2), (4, 3), (5, 4), (6, 5)] {
            assert_eq!(variant_depth(stages, 2), Some(variant), "{stages}");
        }
        // Deep rings: three quarters (rounded), where the H200 ran them fastest.
        assert_eq!(variant_depth(8, 2), Some(6));
        assert_eq!(variant_depth(11, 2), Some(8));
        assert_eq!(variant_depth(12, 2), Some(9));
        assert_eq!(variant_depth(16, 2), Some(12));
        // Never below the family's shallowest depth, and none for a structure already there.
        assert_eq!(variant_depth(3, 3), None);
        assert_eq!(variant_depth(2, 2), None);
        assert_eq!(variant_depth(1, 1), None);
        assert_eq!(variant_depth(0, 0), None);
    }
}
