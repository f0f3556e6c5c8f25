//! The policy: which configurations of a family are worth pricing for a problem.
//!
//! Roller's idea, applied to a family's legal space: tiles aligned to the tensor instruction and
//! to whole 128-byte rows, no tile larger than the problem needs (a bigger one only adds padding),
//! a bound on padding waste, split-K only when the tiles cannot fill the SMs, launch-order
//! groups only when there is more than one tile row, and for every remaining structure the
//! pipeline depth the cost model prefers. What is left is a few hundred points, each priced.

use carver_arch::{Arch, InstructionFamily};

use crate::cost::{Pricer, blocks_per_sm, launch_order_matters, launch_order_traffic};
use crate::dtype::Layout;
use crate::target::{KernelFamily, check_config};
use crate::template::Problem;
use carver_schema::Prediction;
use carver_schema::{Raster, RasterOrder, TileConfig};

/// Largest fraction of a padded tile grid that may be padding (unless no tile does better).
pub const MAX_PADDING_WASTE: f64 = 0.5;

/// A priced configuration.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub tile: TileConfig,
    pub prediction: Prediction,
}

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
pub fn candidates(family: &dyn KernelFamily, p: &Problem, arch: &Arch) -> Vec<Candidate> {
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
    let pruned = enumerate(
        &pricer,
        family,
        p,
        arch,
        &m_sizes,
        &n_sizes,
        &contiguous_sizes(&bks, p.k, e),
    );
    if !pruned.is_empty() {
        return pruned;
    }
    enumerate(&pricer, family, p, arch, &bms, &bns, &bks)
}

fn enumerate(
    pricer: &Pricer,
    family: &dyn KernelFamily,
    p: &Problem,
    arch: &Arch,
    bms: &[u32],
    bns: &[u32],
    bks: &[u32],
) -> Vec<Candidate> {
    let (stage_lo, stage_hi) = family.stage_range();
    let sms = u64::from(arch.sm.count);
    let order_matters = launch_order_matters(p, arch);
    let mut out = Vec::new();

    for &bm in bms {
        let tiles_m = p.m.div_ceil(u64::from(bm));
        for &bn in bns {
            let tiles = tiles_m * p.n.div_ceil(u64::from(bn)) * p.batch;
            let layouts = family.warp_layouts(bm, bn, p, arch);
            // mma.sync runs at a fraction of wgmma's rate where both exist: a tile some warp
            // count can run with wgmma is not priced with mma.sync.
            let has_wgmma = layouts.iter().any(|l| l.mma == InstructionFamily::Wgmma);
            for layout in layouts {
                if has_wgmma && layout.mma == InstructionFamily::MmaSync {
                    continue;
                }
                for &bk in bks {
                    let k_tiles = p.k.div_ceil(u64::from(bk));
                    for &split in family.split_ks() {
                        // Split K only when the tiles alone leave SMs idle, and keep at
                        // least two iterations per split so the pipeline has work.
                        if split > 1 && (tiles >= 2 * sms || k_tiles < 2 * u64::from(split)) {
                            continue;
                        }
                        let plain = TileConfig {
                            block_m: bm,
                            block_n: bn,
                            block_k: bk,
                            warps_m: layout.warps_m,
                            warps_n: layout.warps_n,
                            producer_warps: layout.producer_warps,
                            stages: stage_lo,
                            raster: Raster {
                                order: RasterOrder::GroupedRows,
                                group: family.groups()[0],
                            },
                            split_k: split,
                            cluster_m: 1,
                            cluster_n: 1,
                            persistent: false,
                            mma: layout.mma,
                        };
                        // The launch order only changes DRAM traffic: take the group that moves
                        // the fewest bytes (the smallest among equals), and none when A and B
                        // fit in the L2 anyway.
                        let raster = if order_matters {
                            choose_group(family, p, arch, plain)
                        } else {
                            plain.raster
                        };
                        for &(cluster_m, cluster_n) in family.clusters() {
                            for &persistent in family.persistence() {
                                let base = TileConfig {
                                    raster,
                                    cluster_m,
                                    cluster_n,
                                    persistent,
                                    ..plain
                                };
                                if let Some(best) =
                                    best_stages(pricer, family, p, arch, base, stage_lo, stage_hi)
                                {
                                    out.push(best);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The launch order (of the family's groups) whose main loop moves the fewest DRAM bytes.
fn choose_group(family: &dyn KernelFamily, p: &Problem, arch: &Arch, plain: TileConfig) -> Raster {
    let mut best = (f64::INFINITY, plain.raster);
    for &group in family.groups() {
        let tile = TileConfig {
            raster: Raster {
                group,
                ..plain.raster
            },
            ..plain
        };
        let bytes = launch_order_traffic(p, &tile, family.resources(&tile, p), arch);
        if bytes < best.0 * (1.0 - 1e-9) {
            best = (bytes, tile.raster);
        }
    }
    best.1
}

/// The pipeline depth the model prefers for one structure.
///
/// Legality is checked once at the shallowest depth; deeper pipelines differ only in shared
/// memory, which grows by a fixed amount per stage, so the deepest legal one is arithmetic.
fn best_stages(
    pricer: &Pricer,
    family: &dyn KernelFamily,
    p: &Problem,
    arch: &Arch,
    base: TileConfig,
    lo: u32,
    hi: u32,
) -> Option<Candidate> {
    let shallow = TileConfig { stages: lo, ..base };
    // A cheap numeric fit test first: the full check explains failures in words.
    let fits = |res: crate::target::Resources| {
        res.smem_bytes <= arch.shared_memory.per_block_optin_bytes
            && res.registers_per_thread <= arch.registers.per_thread_max
            && res.registers_per_thread * shallow.threads() <= arch.registers.per_block
            && shallow.threads() <= arch.sm.max_threads_per_block
    };
    if !fits(family.resources(&shallow, p)) {
        return None;
    }
    let res_lo = check_config(family, &shallow, p, arch).ok()?;
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
    let mut best: Option<Candidate> = None;
    // Occupancy only falls as the pipeline deepens, and at equal occupancy a deeper pipeline
    // is never predicted slower: price only the deepest depth of each occupancy level.
    let mut priced_occupancy = 0;
    for stages in (lo..=deepest).rev() {
        let tile = TileConfig { stages, ..base };
        let res = family.resources(&tile, p);
        let occupancy = blocks_per_sm(&tile, res, arch);
        if occupancy <= priced_occupancy {
            continue;
        }
        priced_occupancy = occupancy;
        let Some(prediction) = pricer.predict(&tile, res) else {
            continue;
        };
        // Among depths within 1% of each other, prefer more resident blocks, then the deeper
        // pipeline: stages that cost no occupancy absorb the latency spread the mean hides.
        let better = match &best {
            None => true,
            Some(b) => {
                let (t, bt) = (prediction.time_us, b.prediction.time_us);
                t < bt * 0.99
                    || (t <= bt * 1.01 && prediction.blocks_per_sm >= b.prediction.blocks_per_sm)
            }
        };
        if better {
            best = Some(Candidate { tile, prediction });
        }
    }
    best
}
