//! The cost model: predicted time of one configuration on one arch.
//!
//! It works per SM and per main-loop iteration. In one iteration every resident block moves a
//! `block_k` slice of A and B from L2 (some of it from DRAM) into shared memory, reads it back
//! into the tensor cores and multiplies. The SM's time for that is the largest of what each
//! resource needs (tensor cores, shared memory, its share of L2 and DRAM bandwidth) and the
//! memory latency the pipeline's `stages - 1` loads in flight cannot hide. Blocks run in waves
//! of `SMs x blocks_per_sm`; the last, partial wave runs with fewer blocks per SM and a larger
//! share of bandwidth per active SM. DRAM traffic follows from the launch order: how many A and
//! B panels a wave touches, and whether the L2 still holds them when they are needed again.
//!
//! Every constant here is a property of the hardware (latencies in cycles, how much of the L2
//! one working set can use) or of the kernel family (how it reduces split-K), never of a shape.

use carver_arch::{Arch, InstructionFamily};

use crate::dtype::Layout;
use crate::family::{
    FamilyRules, LoadPaths, Resources, SplitKReduction, staged_elements_per_operand,
};
use crate::prediction::{Bound, Breakdown, Prediction};
use crate::problem::Problem;
use crate::tile::TileConfig;

/// Latency of an L2 hit, in SM cycles (public microbenchmarks of Ampere and Hopper: 200-300).
const L2_HIT_LATENCY_CYCLES: f64 = 270.0;
/// Latency of a DRAM access while the GPU streams from DRAM, in SM cycles: about 600-800 idle
/// on HBM parts, roughly twice that once the memory queues are full.
const DRAM_LATENCY_CYCLES: f64 = 2000.0;
/// Cycles of each main-loop iteration no resource overlaps: the block-wide barrier, waiting on
/// the stage's copy and the tensor-core group, and the loop's bookkeeping. Other resident
/// blocks fill the gap.
const ITERATION_SYNC_CYCLES: f64 = 120.0;
/// Share of the L2 a streaming working set can count on: the L2 is split in two partitions
/// and other lines (C, the other operand's stream) compete for it.
const L2_USABLE_FRACTION: f64 = 0.5;
/// Fixed cost of one kernel launch as a tuner measures it (back-to-back launches on a stream).
const LAUNCH_OVERHEAD_US: f64 = 3.0;
/// Extra cost of each dependent kernel a split-K reduction adds (memset, atomics drain, cast).
const EXTRA_KERNEL_US: f64 = 4.0;
/// Fraction of the dense tensor peak `mma.sync` reaches on a GPU whose native instruction is
/// `wgmma` (Hopper runs the legacy warp-level path at about half rate).
const MMA_SYNC_ON_WGMMA_ARCH: f64 = 0.5;
/// Exponent of the norm that combines the per-iteration demands on tensor cores, shared memory,
/// L2 and DRAM (overlap of independent units is good but not perfect).
const OVERLAP_NORM: i32 = 4;
/// Elements one warp instruction converts: two a lane (`cvt.rn.f16x2.e4m3x2`), 32 lanes.
const CONVERTED_ELEMENTS_PER_WARP_INSTRUCTION: f64 = 64.0;
/// Bytes per clock one SM can pull from the L2 (its L1 fill port on Ampere and Hopper).
const SM_L2_PORT_BYTES_PER_CLOCK: f64 = 64.0;
/// Issue cycles one warp spends per element it stages through registers: address and mask
/// arithmetic, a narrow load, a conversion and a shared-memory store, each replayed across the
/// sectors an unaligned row straddles.
const STAGED_ELEMENT_CYCLES: f64 = 24.0;
/// The same for an element of B staged through registers (N not a multiple of 8). Not an
/// instruction count: the compiled loops issue fewer instructions per B element than per A
/// element (2.8-6.9 against 6.2-12.9 in Triton 3.6's sm_90 SASS). Calibrated on the stored
/// B-staged sweeps instead, where 24 cycles ranked tiles with more B elements per thread first
/// and they ran up to 2.1x slower than predicted (`odd.n1217.m1536`: 128x64x64, 4 warps,
/// predicted 57 us, measured 132 us); at 72 the stored sweeps' pooled top-1 rose from 0.945 to
/// 0.950 (in-sample; docs/RESULTS.md, "B-staged elements").
const STAGED_B_ELEMENT_CYCLES: f64 = 72.0;
/// Issue cycles one warp spends per accumulator element when the kernel scales every K step's
/// product before adding it (fp8 with block scales: `acc += dot(a, b) * a_scale * b_scale`): a
/// multiply of the two scales and a fused multiply-add, each one warp instruction per cycle on a
/// sub-partition's 32 FP32 lanes (Hopper and Ampere whitepapers: 128 FP32 lanes per SM).
const RESCALE_ELEMENT_CYCLES: f64 = 2.0;
/// Fraction of L2 bandwidth fp32 atomics (read-modify-write in the L2) achieve.
const ATOMIC_L2_FRACTION: f64 = 0.5;
/// Fraction of each 32-byte sector one store instruction fills when A and B are swapped in the
/// tensor instruction: its accumulator rows are C's columns, so the 8 lanes sharing a row of C
/// write 8 adjacent 16-bit values, 16 bytes (the mma accumulator layout, PTX ISA "wgmma D
/// fragments"). fp32 partials fill whole sectors (8 x 4 bytes).
const SWAPPED_STORE_SECTOR_USE: f64 = 16.0 / 32.0;

/// What one launch of a structure at a given occupancy looks like.
struct Geometry {
    /// Blocks launched.
    grid: u64,
    blocks_per_sm: u32,
}

/// Blocks of this configuration one SM holds at once (0 = does not fit).
pub fn blocks_per_sm(config: &TileConfig, res: Resources, arch: &Arch) -> u32 {
    let smem = arch.shared_memory.per_sm_bytes
        / (res.smem_bytes + arch.shared_memory.reserved_per_block_bytes).max(1);
    let unit = arch.registers.allocation_unit.max(1);
    let regs_per_warp = (res.registers_per_thread * arch.sm.warp_size).div_ceil(unit) * unit;
    let warps = config.threads() / arch.sm.warp_size;
    let regs = arch.registers.per_sm / (regs_per_warp * warps).max(1);
    let threads = arch.sm.max_threads / config.threads().max(1);
    (smem as u32).min(regs).min(threads).min(arch.sm.max_blocks)
}

/// The most registers per thread with which `blocks` blocks of `config` fit on one SM by the
/// register file (0 when not even one register does).
pub fn registers_for_blocks(config: &TileConfig, arch: &Arch, blocks: u32) -> u32 {
    let unit = arch.registers.allocation_unit.max(1);
    let warps = (config.threads() / arch.sm.warp_size).max(1);
    let per_warp = arch.registers.per_sm / (blocks.max(1) * warps) / unit * unit;
    (per_warp / arch.sm.warp_size.max(1)).min(arch.registers.per_thread_max)
}

/// Tiles the grid runs: a cluster spans `cluster_m x cluster_n` tiles, so the grid rounds the
/// tile rows and columns up to whole clusters, and the CTAs past the matrix edge still run their
/// main loop (their loads are zero-filled, their multicast halves are needed by their partners).
fn launched_tiles(c: &TileConfig, tiles_m: u64, tiles_n: u64, batch: u64) -> u64 {
    let whole = |tiles: u64, cluster: u32| {
        let cluster = u64::from(cluster.max(1));
        tiles.div_ceil(cluster) * cluster
    };
    whole(tiles_m, c.cluster_m) * whole(tiles_n, c.cluster_n) * batch
}

fn geometry_of(c: &TileConfig, t: &StructureTerms, arch: &Arch, blocks_per_sm: u32) -> Geometry {
    let units = launch_units(t.tiles, c.split_k);
    let grid = if c.persistent {
        (u64::from(arch.sm.count) * u64::from(blocks_per_sm)).min(units)
    } else {
        units
    };
    Geometry {
        grid,
        blocks_per_sm,
    }
}

/// Whether the launch order can change DRAM traffic at all: not when A and B fit in the L2
/// together (every panel is read from DRAM once whatever the order).
pub fn launch_order_matters(p: &Problem, arch: &Arch) -> bool {
    let e = f64::from(p.in_bytes());
    let inputs = (p.m as f64 * p.k as f64 + p.k as f64 * p.n as f64) * e;
    inputs > arch.l2.size_bytes as f64 * L2_USABLE_FRACTION
}

/// A and B from DRAM in a main loop: the bytes, and what they cost at the DRAM's full rate
/// (narrow rows stream slower: [`row_fetch`]).
#[derive(Clone, Copy, Debug)]
struct DramTraffic {
    bytes: f64,
    streamed: f64,
}

/// The A and B a main loop pulls from DRAM, given the launch order and the L2.
fn mainloop_dram(
    pricer: &Pricer,
    t: &StructureTerms,
    c: &TileConfig,
    blocks_per_sm: u32,
) -> DramTraffic {
    let (tiles_m, tiles_n) = (t.tiles_m, t.tiles_n);

    // Blocks run in waves of `concurrent` consecutive tiles of the launch order: groups of
    // `group` tile rows, walked column by column. A wave of `b` tiles touches these many
    // distinct A panels (rows) and B panels (columns); panels a wave shares are read once.
    let slots = u64::from(pricer.arch.sm.count) * u64::from(blocks_per_sm.max(1));
    let per_batch = tiles_m * tiles_n;
    let concurrent = slots.min(per_batch).max(1);
    let group = u64::from(c.raster.group).clamp(1, tiles_m);
    let cols = |b: u64| b.div_ceil(group).min(tiles_n);
    let rows = |b: u64| b.min(group).max(b.div_ceil(tiles_n)).min(tiles_m);
    let full_waves = per_batch / concurrent;
    let last = per_batch % concurrent;
    fn waves_sum(full_waves: u64, concurrent: u64, last: u64, f: impl Fn(u64) -> u64) -> f64 {
        (full_waves * f(concurrent) + if last > 0 { f(last) } else { 0 }) as f64
    }

    // Across waves a panel survives only in the L2: all of B (or A) fitting means one read
    // each; an A panel also survives while one wave's B panels stream past it.
    let b_reads = if pricer.b_fits_l2 {
        tiles_n as f64
    } else {
        waves_sum(full_waves, concurrent, last, cols)
    };
    let a_reads = if pricer.a_fits_l2
        || cols(concurrent) as f64 * t.b_panel + rows(concurrent) as f64 * t.a_panel
            <= pricer.l2_usable
    {
        tiles_m as f64
    } else {
        waves_sum(full_waves, concurrent, last, rows)
    };
    let (a, b) = (
        t.a_panel * a_reads / t.a_line,
        t.b_panel * b_reads / t.b_line,
    );
    DramTraffic {
        bytes: pricer.batch * (a + b),
        streamed: pricer.batch * (a / t.a_rate + b / t.b_rate),
    }
}

/// How an A and a B tile row come from DRAM: the useful fraction of what each fetches, and the
/// fraction of the DRAM's full rate at which each streams, as `((a_line, b_line), (a_rate,
/// b_rate))`. Rows run along K for a row-major A and a column-major B, along M and N otherwise.
///
/// The L2 fills 32-byte sectors (`memory.sector_bytes`), not whole lines, so only a row shorter
/// than a sector wastes part of its fetch: on the H200 every config of a decode GEMM read the
/// same 100.8 MB from DRAM, 32-column tiles included (Nsight Compute, docs/RESULTS.md, "At decode
/// the queue never fills"). Yet the same bytes come slower in segments narrower than a line,
/// whose halves neighbouring blocks read at different times: the arch's measured
/// `memory.segment_efficiency` (the H200 streamed 64-byte segments at 0.74 of a line's rate,
/// docs/RESULTS.md, "Narrow rows stream slower from DRAM"). Longer rows never come less
/// efficiently.
fn row_fetch(
    p: &Problem,
    arch: &Arch,
    block_m: u32,
    block_n: u32,
    block_k: u32,
) -> ((f64, f64), (f64, f64)) {
    let e = f64::from(p.in_bytes());
    let sector = f64::from(arch.memory.sector_bytes);
    let a_row = match p.layout_a {
        Layout::Row => block_k,
        Layout::Col => block_m,
    };
    let b_row = match p.layout_b {
        Layout::Row => block_n,
        Layout::Col => block_k,
    };
    let (a_bytes, b_bytes) = (f64::from(a_row) * e, f64::from(b_row) * e);
    let useful = |bytes: f64| (bytes / sector).min(1.0);
    let rate = |bytes: f64| arch.memory.segment_rate(bytes);
    (
        (useful(a_bytes), useful(b_bytes)),
        (rate(a_bytes), rate(b_bytes)),
    )
}

/// Bytes of one A panel (a tile's rows over all of K) and one B panel (its columns).
fn panel_bytes(p: &Problem, block_m: u32, block_n: u32) -> (f64, f64) {
    let e = f64::from(p.in_bytes());
    let k = p.k as f64;
    (
        f64::from(block_m).min(p.m as f64) * k * e,
        f64::from(block_n).min(p.n as f64) * k * e,
    )
}

/// Units of work a launch of `tiles` output tiles runs: one per tile and K split. A grid
/// launches one block per unit, a persistent grid walks them.
fn launch_units(tiles: u64, split_k: u32) -> u64 {
    tiles * u64::from(split_k)
}

/// Fraction of the arch's dense peak a block's tensor instructions reach.
fn mma_efficiency(
    mma: InstructionFamily,
    arch: &Arch,
    resident_warps: u32,
    has_wgmma: bool,
) -> f64 {
    match mma {
        InstructionFamily::MmaSync => {
            let per_sm = arch.sm.tensor_cores.max(1);
            // Each SM sub-partition's tensor core needs a resident warp of its own.
            let used = f64::from(resident_warps.min(per_sm)) / f64::from(per_sm);
            used * if has_wgmma {
                MMA_SYNC_ON_WGMMA_ARCH
            } else {
                1.0
            }
        }
        InstructionFamily::Wgmma | InstructionFamily::Tcgen05 => 1.0,
    }
}

/// Structures the policy bounds together: one block size pair, split-K factor and persistence,
/// with any of the family's warp layouts, `block_k` up to `longest_block_k`, cluster, depth and
/// launch order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileGroup {
    pub block_m: u32,
    pub block_n: u32,
    pub split_k: u32,
    pub persistent: bool,
    /// The fastest tensor instruction family among the group's warp layouts.
    pub mma: InstructionFamily,
    /// The largest `block_k` of the group: its K rows are the longest, the most line-efficient.
    pub longest_block_k: u32,
    /// The smallest share of a block's threads that are compute warps, among its layouts (the
    /// compute warps issue element-wise staging).
    pub least_compute_share: f64,
}

impl TileGroup {
    /// Whether `other` differs from this group at most in persistence, which
    /// [`Pricer::group_lower_bound`] does not read: their bounds are equal.
    pub fn same_but_persistence(&self, other: &TileGroup) -> bool {
        TileGroup {
            persistent: other.persistent,
            ..*self
        } == *other
    }
}

/// The parts of the lower bounds of one block size pair that its groups share
/// ([`Pricer::pair_terms`]).
#[derive(Clone, Copy, Debug)]
pub struct PairTerms {
    block_m: u32,
    block_n: u32,
    longest_block_k: u32,
    tiles_m: u64,
    tiles_n: u64,
    /// Bytes the main loop reads from the L2 ([`Pricer::l2_mainloop_bytes`]).
    l2_mainloop: f64,
    /// The fastest they can arrive, with every SM busy ([`Pricer::l2_floor_rate`]).
    l2_rate: f64,
    /// The least A and B any launch order pulls from DRAM.
    dram_floor: DramTraffic,
}

/// What a lower bound needs of a structure, or the least of each over a group of them.
struct BoundParts {
    /// Seconds the busiest SM's block-iterations need on the tensor cores and shared memory.
    compute: f64,
    smem: f64,
    l2_mainloop: f64,
    /// The fastest those L2 bytes can arrive ([`Pricer::l2_floor_rate`]).
    l2_rate: f64,
    /// A and B pulled from DRAM at the least.
    dram_floor: DramTraffic,
    /// Seconds of one block's own path through the main loop, and its iterations.
    critical_path: f64,
    iterations: f64,
    epilogue: f64,
    split_k_time: f64,
    c_bytes: f64,
}

/// The per-structure terms of the model (see [`Pricer::terms`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StructureTerms {
    tiles_m: u64,
    tiles_n: u64,
    /// Output tiles (all batches).
    tiles: u64,
    /// Main-loop iterations per block.
    iters: u64,
    flops_per_iter: f64,
    smem_per_iter: f64,
    /// Seconds one block's warps spend per iteration issuing element-wise work themselves
    /// (operands staged through registers, operands converted before `mma.sync`), per scheduler.
    element_issue: f64,
    /// Seconds one block spends scaling its accumulator per iteration (block scales only).
    rescale_issue: f64,
    /// One block's own critical path per iteration: its math or its shared-memory traffic,
    /// its staging and scaling, and the unoverlapped sync.
    single: f64,
    l2_mainloop: f64,
    /// Main-loop iterations of all blocks together, and the L2 bytes of each.
    block_iters: f64,
    l2_per_iter: f64,
    /// Bytes of one A and one B panel, and the useful fraction of what their rows fetch from
    /// DRAM.
    a_panel: f64,
    b_panel: f64,
    a_line: f64,
    b_line: f64,
    /// The fraction of the DRAM's full rate at which those rows stream ([`row_fetch`]).
    a_rate: f64,
    b_rate: f64,
    epilogue_bytes_per_block: f64,
    epilogue_rate: f64,
    split_k_time: f64,
    /// Bytes of C the kernel itself writes (none with split-K: the reduction does).
    c_bytes: f64,
    /// Stages of the ring the tensor cores hold beyond the one being read: 1 where a loop's
    /// loads wait behind more wgmma instructions than the tensor pipe queues ([`WgmmaQueue`]).
    stages_held_by_tensor_cores: u32,
}

/// What one evaluation of the model produces, before it is dressed as a [`Prediction`].
struct Evaluation {
    /// Seconds.
    time: f64,
    g: Geometry,
    /// Per-resource sums over all waves (zero unless the full evaluation ran).
    totals: IterationTimes,
    epilogue: f64,
    overhead: f64,
    /// Bytes of A, B and C through DRAM, and their cost at the full rate (narrow rows stream
    /// slower).
    dram_total: f64,
    dram_streamed: f64,
    slots: u64,
}

/// Per-SM times of one main-loop iteration of every resident block.
struct IterationTimes {
    compute: f64,
    smem: f64,
    l2: f64,
    dram: f64,
    /// Memory latency the pipeline's loads in flight leave exposed, per block.
    latency: f64,
    /// One block's own critical path: its resource time plus the unoverlapped sync cycles.
    single: f64,
}

impl IterationTimes {
    /// Resident blocks share throughput; each block's latency and sync overlap the others'.
    fn total(&self) -> f64 {
        // Throughput units and the pipeline's exposed latency overlap imperfectly: near-equal
        // demands on two of them cost more than either alone, which an L^p norm expresses
        // (p -> infinity would be a plain max).
        let p = OVERLAP_NORM;
        let demands = self.compute.powi(p)
            + self.smem.powi(p)
            + self.l2.powi(p)
            + self.dram.powi(p)
            + self.latency.powi(p);
        // The fourth root as two square roots: `powf` dominated the model's run time.
        const _: () = assert!(OVERLAP_NORM == 4);
        demands.sqrt().sqrt().max(self.single)
    }
}

/// How many `wgmma` instructions a software-pipelined loop can issue per iteration before its
/// next loads wait behind them ([`FamilyRules::queued_wgmma_instructions`]).
#[derive(Clone, Copy, Debug)]
struct WgmmaQueue {
    queued: u32,
    /// The instruction's widest n and its k, for the problem's compute class.
    max_n: u32,
    k: u32,
}

impl WgmmaQueue {
    /// Whether one iteration of `c` issues more `wgmma`s per sub-partition than the queue
    /// takes: one per 64 rows, instruction width (a warpgroup's columns, at most `max_n`) and
    /// K step of the block tile.
    fn overflows(&self, c: &TileConfig) -> bool {
        let width = (c.block_n / c.warps_n.max(1)).clamp(1, self.max_n.max(1));
        let issued =
            c.block_m.div_ceil(64) * c.block_n.div_ceil(width) * c.block_k.div_ceil(self.k.max(1));
        issued > self.queued
    }
}

/// Predicts the time of `config` for `problem` on `arch`.
pub fn predict(
    family: &dyn FamilyRules,
    p: &Problem,
    c: &TileConfig,
    res: Resources,
    arch: &Arch,
) -> Option<Prediction> {
    Pricer::new(family, p, arch)?.predict(c, res)
}

/// The cost model bound to one problem on one arch: what does not depend on the configuration
/// is worked out once, so pricing the policy's hundreds of points stays in microseconds.
#[derive(Clone, Copy)]
pub struct Pricer<'a> {
    p: &'a Problem,
    arch: &'a Arch,
    sms: f64,
    batch: f64,
    /// The L2 a streaming working set can count on, and whether all of A (of B) fits in it.
    l2_usable: f64,
    a_fits_l2: bool,
    b_fits_l2: bool,
    clock: f64,
    e: f64,
    eo: f64,
    peak: f64,
    /// The tensor peak the family's `mma.sync` tiles run at: the problem class's, or the class
    /// the family converts its operands to ([`FamilyRules::mma_sync_operand_class`]).
    mma_sync_peak: f64,
    /// Whether those tiles convert their operands to that class first, each warp its own
    /// fragments every iteration.
    mma_sync_converts: bool,
    dram_bw: f64,
    l2_bw: f64,
    smem_bw_sm: f64,
    has_wgmma: bool,
    paths: LoadPaths,
    port: f64,
    /// `l2.request_coalescing` of the arch: 1 where it is not measured, and for a batched launch
    /// (a MoE layer's experts), which shares nothing it can count on: a group of rows past one
    /// batch's tiles reads the next batch's B, and gathered A rows are not whole tiles.
    l2_coalescing: f64,
    split_reduction: SplitKReduction,
    /// Seconds starting one more block on an SM costs the family's kernel
    /// ([`FamilyRules::block_start_cycles`]).
    block_start: f64,
    /// Seconds of the family's operand copies before the kernel (the same for every config).
    repack_time: f64,
    /// Whether every K step's product is scaled before it is accumulated ([`Pricer::with_block_scales`]).
    block_scales: bool,
    /// The `wgmma` instructions per sub-partition the family's loop issues before its next
    /// loads, and the arch's `wgmma` shape (n at most, k) for the problem's class
    /// ([`FamilyRules::queued_wgmma_instructions`]). `None`: no such limit.
    wgmma_queue: Option<WgmmaQueue>,
    /// The arch's `mma.sync` instruction for the problem's class where the arch measured how
    /// long one of a warp's k-steps waits for the last ([`Pricer::k_step_chain`]).
    mma_sync: Option<MmaSyncSteps>,
    /// The instructions a launched block's warps issue outside its main loop, where a round of
    /// blocks is priced no shorter than one block's path ([`Pricer::with_own_path_floor`]).
    out_of_loop: Option<OutOfLoop>,
}

/// What each warp of a launched block issues outside its main loop (indexing before it, the
/// epilogue after it), one instruction waiting for the one before.
#[derive(Clone, Copy, Debug)]
pub struct OutOfLoop {
    pub instructions_per_warp: f64,
    /// Cycles between two of a warp's instructions when nothing else issues on its scheduler.
    pub dependent_issue_cycles: f64,
}

impl OutOfLoop {
    /// Cycles of that path in a round of `resident` blocks of `warps` warps on an SM of
    /// `schedulers`: each warp waits between its instructions, unless the schedulers have more
    /// to issue than those waits leave room for.
    fn cycles(&self, resident: f64, warps: u32, schedulers: u32) -> f64 {
        let warps_per_scheduler = resident * f64::from(warps) / f64::from(schedulers.max(1));
        self.instructions_per_warp * self.dependent_issue_cycles.max(warps_per_scheduler)
    }
}

/// A warp's `mma.sync` k-steps: the instruction's shape, the seconds one SM sub-partition takes
/// to issue one at its share of the peak, and the arch's measured wait of a step
/// (`tensor_instructions[].step_cycles`), in seconds.
#[derive(Clone, Copy, Debug)]
struct MmaSyncSteps {
    m: u32,
    n: u32,
    k: u32,
    issue: f64,
    wait: f64,
}

impl<'a> Pricer<'a> {
    /// `None` when the arch has no peak for the problem's compute class.
    pub fn new(family: &'a dyn FamilyRules, p: &'a Problem, arch: &'a Arch) -> Option<Self> {
        let sms = f64::from(arch.sm.count);
        let clock = arch.sm.sustained_clock_mhz * 1e6;
        let e = f64::from(p.in_bytes());
        let l2_usable = arch.l2.size_bytes as f64 * L2_USABLE_FRACTION;
        let (m, n, k) = (p.m as f64, p.n as f64, p.k as f64);
        let peak = arch.peak_flops(p.class)?;
        let mma_sync_class = family.mma_sync_operand_class(p.class, arch);
        let mma_sync_peak = arch.peak_flops(mma_sync_class).unwrap_or(peak);
        let has_wgmma = arch.has_tensor_family(InstructionFamily::Wgmma);
        Some(Self {
            p,
            arch,
            sms,
            batch: p.batch as f64,
            l2_usable,
            a_fits_l2: m * k * e <= l2_usable,
            b_fits_l2: n * k * e <= l2_usable,
            clock,
            e,
            eo: f64::from(p.c.bytes()),
            peak,
            mma_sync_peak,
            mma_sync_converts: mma_sync_class != p.class,
            dram_bw: arch.dram_bandwidth(),
            l2_bw: arch.l2_bandwidth(),
            smem_bw_sm: arch.smem_bandwidth() / sms,
            has_wgmma,
            paths: family.load_paths(p, arch),
            port: SM_L2_PORT_BYTES_PER_CLOCK * clock,
            l2_coalescing: match p.batch {
                1 => arch.l2.request_coalescing.unwrap_or(1.0),
                _ => 1.0,
            },
            split_reduction: family.split_k_reduction(),
            block_start: family.block_start_cycles() / clock,
            repack_time: {
                let r = family.repack(p);
                f64::from(r.kernels) * EXTRA_KERNEL_US * 1e-6 + r.bytes / arch.dram_bandwidth()
            },
            block_scales: false,
            out_of_loop: None,
            mma_sync: arch
                .instructions_for(mma_sync_class)
                .find(|i| i.family == InstructionFamily::MmaSync)
                .and_then(|i| {
                    let per_sub_partition = mma_sync_peak / sms
                        * mma_efficiency(InstructionFamily::MmaSync, arch, 1, has_wgmma);
                    let (m, n) = (i.m.min(), i.n.min());
                    Some(MmaSyncSteps {
                        m,
                        n,
                        k: i.k,
                        issue: 2.0 * f64::from(m * n * i.k) / per_sub_partition,
                        wait: i.step_cycles? / clock,
                    })
                }),
            wgmma_queue: family.queued_wgmma_instructions().and_then(|queued| {
                arch.instructions_for(p.class)
                    .find(|i| i.family == InstructionFamily::Wgmma)
                    .map(|i| WgmmaQueue {
                        queued,
                        max_n: i.n.max(),
                        k: i.k,
                    })
            }),
        })
    }

    /// The same pricer for a kernel that scales every K step's product before accumulating it
    /// (fp8 with block scales). The step's tensor-core product must be complete before its
    /// scaling starts, so a block's warps alternate between the two: the scaling adds to the
    /// block's own path every iteration, and other resident blocks overlap it with their math.
    pub fn with_block_scales(mut self) -> Self {
        self.block_scales = true;
        self
    }

    /// Whether the family stages an operand of this problem through registers (its blocks then
    /// wait for those loads every iteration, whatever the pipeline depth).
    pub(crate) fn any_staged(&self) -> bool {
        self.paths.any_staged()
    }

    /// The same pricer for a kernel each of whose blocks makes `loads` dependent round trips to
    /// the L2 (each address read from the one before) before it can address its first stage:
    /// they lengthen the block's start by an L2 hit's latency each.
    pub fn with_dependent_loads_before_start(mut self, loads: u32) -> Self {
        self.block_start += f64::from(loads) * L2_HIT_LATENCY_CYCLES / self.clock;
        self
    }

    /// The same pricer for a kernel whose launched blocks issue `out_of_loop` on their own path
    /// outside the main loop (indexing before it, the epilogue after it). Resident blocks
    /// overlap one another's waits, so a round of them is priced as their shared time, but
    /// never shorter than one block's own path: its start, its fill, its iterations' latency
    /// and those instructions. That floor binds where blocks run few K steps each.
    pub fn with_own_path_floor(mut self, out_of_loop: OutOfLoop) -> Self {
        self.out_of_loop = Some(out_of_loop);
        self
    }

    /// The same pricer with DRAM streaming at `efficiency` (0, 1] of the arch's rate: for a
    /// kernel family whose access pattern is known to stream below the rate this model assumes.
    pub fn with_dram_efficiency(mut self, efficiency: f64) -> Self {
        if efficiency > 0.0 && efficiency < 1.0 {
            self.dram_bw *= efficiency;
        }
        self
    }

    /// Predicts the time of one configuration (`None` when no block fits on an SM).
    pub fn predict(&self, c: &TileConfig, res: Resources) -> Option<Prediction> {
        let t = self.terms(c);
        let occupancy = blocks_per_sm(c, res, self.arch);
        let Evaluation {
            time,
            g,
            totals,
            epilogue,
            overhead,
            dram_total,
            dram_streamed,
            slots,
        } = self.evaluate::<true>(&t, c, occupancy)?;
        let (split_k_time, l2_mainloop) = (t.split_k_time, t.l2_mainloop);
        let (p, dram_bw) = (self.p, self.dram_bw);
        let (m, n, k) = (p.m as f64, p.n as f64, p.k as f64);
        let bound = {
            let candidates = [
                (Bound::Compute, totals.compute),
                (Bound::Smem, totals.smem),
                (Bound::L2, totals.l2),
                (Bound::Dram, totals.dram.max(dram_streamed / dram_bw)),
                (Bound::Latency, totals.latency + overhead + split_k_time),
            ];
            candidates
                .into_iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|x| x.0)
                .unwrap_or(Bound::Compute)
        };
        let waves = g.grid as f64 / slots as f64;
        let padded = (t.tiles_m * u64::from(c.block_m)) as f64
            * (t.tiles_n * u64::from(c.block_n)) as f64
            * (t.iters * u64::from(c.split_k) * u64::from(c.block_k)) as f64;
        let us = 1e6;
        Some(Prediction {
            time_us: time * us,
            tflops: p.flops() / time / 1e12,
            bound,
            smem_bytes: res.smem_bytes,
            registers_per_thread: res.registers_per_thread,
            hedged_registers: None,
            threads: c.threads(),
            blocks_per_sm: g.blocks_per_sm,
            grid: g.grid,
            waves,
            breakdown: Breakdown {
                compute_us: totals.compute * us,
                smem_us: totals.smem * us,
                l2_us: totals.l2 * us,
                dram_us: totals.dram.max(dram_streamed / dram_bw) * us,
                latency_us: totals.latency * us,
                epilogue_us: epilogue * us,
                split_k_us: split_k_time * us,
                overhead_us: overhead * us,
                repack_us: self.repack_time * us,
                dram_bytes: dram_total,
                l2_bytes: l2_mainloop,
                wave_efficiency: if waves > 0.0 {
                    waves / waves.ceil()
                } else {
                    1.0
                },
                padding_efficiency: (m * n * k) / padded,
            },
        })
    }

    /// The terms of one tile structure that neither the pipeline depth nor the launch order
    /// changes: worked out once and shared by every depth and group the policy prices.
    pub fn terms(&self, c: &TileConfig) -> StructureTerms {
        let Pricer {
            p,
            arch,
            sms,
            clock,
            e,
            has_wgmma,
            paths,
            ..
        } = *self;
        let (bm, bn, bk) = (
            f64::from(c.block_m),
            f64::from(c.block_n),
            f64::from(c.block_k),
        );
        let tiles_m = p.m.div_ceil(u64::from(c.block_m));
        let tiles_n = p.n.div_ceil(u64::from(c.block_n));
        let iters =
            p.k.div_ceil(u64::from(c.block_k))
                .div_ceil(u64::from(c.split_k));

        // Shared memory: the fill, then every warp row / column re-reads its operand.
        // wgmma works on 64-row slabs: every slab re-reads the B tile, and every warpgroup column
        // re-reads its A slab; with A and B swapped the slabs run along N and each re-reads the
        // A tile. mma.sync warps read their own rows and columns.
        let (a_reads, b_reads) = match c.mma {
            InstructionFamily::Wgmma | InstructionFamily::Tcgen05 if c.swap_ab => {
                ((bn / 64.0).max(1.0), 1.0)
            }
            InstructionFamily::Wgmma | InstructionFamily::Tcgen05 => {
                (f64::from(c.warps_n), (bm / 64.0).max(1.0))
            }
            InstructionFamily::MmaSync => (f64::from(c.warps_n), f64::from(c.warps_m)),
        };
        // Element-wise staging: each warp issues its elements' loads, conversions and stores itself.
        let warps_per_scheduler = c.compute_warps().div_ceil(arch.sm.tensor_cores.max(1));
        let (staged_a, staged_b) = staged_elements_per_operand(c, paths);
        let staged_cycles = f64::from(staged_a) * STAGED_ELEMENT_CYCLES
            + f64::from(staged_b) * STAGED_B_ELEMENT_CYCLES;
        // Converted operands: each warp converts its A rows and B columns of the step, two
        // elements a lane per instruction, before its `mma.sync`s can read them.
        let convert_cycles = if self.mma_sync_converts && c.mma == InstructionFamily::MmaSync {
            let (warp_m, warp_n) = (c.block_m / c.warps_m.max(1), c.block_n / c.warps_n.max(1));
            f64::from((warp_m + warp_n) * c.block_k) / CONVERTED_ELEMENTS_PER_WARP_INSTRUCTION
        } else {
            0.0
        };
        // Staging waits on its own loads, on the block's own path; a warp converts the next
        // step's fragments while its tensor instructions run, so conversions take issue slots
        // (the throughput) and not the block's own path.
        let staged_issue = staged_cycles * f64::from(warps_per_scheduler) / clock;
        let element_issue = staged_issue + convert_cycles * f64::from(warps_per_scheduler) / clock;
        // Block scales: each warp scales its accumulator elements after every K step.
        let rescale_issue = if self.block_scales {
            f64::from(c.block_m * c.block_n / c.threads().max(1) * warps_per_scheduler)
                * RESCALE_ELEMENT_CYCLES
                / clock
        } else {
            0.0
        };
        // Block scales: every K step loads its scales with plain loads, which Triton's pipeliner
        // does not pipeline, and waits for them before scaling.
        let scale_wait = if self.block_scales {
            L2_HIT_LATENCY_CYCLES / clock
        } else {
            0.0
        };

        let (epilogue_bytes_per_block, epilogue_rate) =
            self.epilogue_terms(c.block_m, c.block_n, c.split_k, c.swap_ab);
        let tiles = launched_tiles(c, tiles_m, tiles_n, p.batch);
        let flops_per_iter = 2.0 * bm * bn * bk;
        let smem_per_iter = (bm + bn) * bk * e + (bm * a_reads + bn * b_reads) * bk * e;
        let single_rate =
            self.peak_of(c.mma) / sms * mma_efficiency(c.mma, arch, c.compute_warps(), has_wgmma);
        let l2_mainloop = self.l2_mainloop_bytes(tiles_m, tiles_n);
        let block_iters = (tiles * u64::from(c.split_k) * iters) as f64;
        let (a_panel, b_panel) = panel_bytes(p, c.block_m, c.block_n);
        let ((a_line, b_line), (a_rate, b_rate)) =
            row_fetch(p, arch, c.block_m, c.block_n, c.block_k);
        StructureTerms {
            tiles_m,
            tiles_n,
            tiles,
            iters,
            flops_per_iter,
            smem_per_iter,
            element_issue,
            rescale_issue,
            single: (flops_per_iter / single_rate)
                .max(smem_per_iter / self.smem_bw_sm)
                .max(self.k_step_chain(c))
                + staged_issue
                + rescale_issue
                + scale_wait
                + ITERATION_SYNC_CYCLES / clock,
            l2_mainloop,
            block_iters,
            l2_per_iter: l2_mainloop / block_iters,
            a_panel,
            b_panel,
            a_line,
            b_line,
            a_rate,
            b_rate,
            epilogue_bytes_per_block,
            epilogue_rate,
            split_k_time: self.split_k_time(c.split_k),
            c_bytes: self.c_bytes(c.split_k),
            // A loop whose loads wait behind more wgmma instructions than the tensor pipe
            // queues issues them late.
            stages_held_by_tensor_cores: u32::from(
                c.mma == InstructionFamily::Wgmma
                    && self.wgmma_queue.is_some_and(|q| q.overflows(c)),
            ),
        }
    }

    /// Predicted time of `c` in seconds, its structure's terms already worked out.
    /// `blocks_per_sm` is [`blocks_per_sm`] of `c`; `None` when it is 0.
    pub fn time_with(&self, t: &StructureTerms, c: &TileConfig, blocks_per_sm: u32) -> Option<f64> {
        self.evaluate::<false>(t, c, blocks_per_sm).map(|e| e.time)
    }

    /// The most blocks per SM the launch of `c` can keep busy: a grid that needs `n` blocks per
    /// SM runs the same at every occupancy of `n` or more, so deeper pipelines that keep that
    /// many resident cost nothing.
    pub fn usable_occupancy(&self, t: &StructureTerms, c: &TileConfig) -> u32 {
        let units = launch_units(t.tiles, c.split_k);
        let per_sm = units.div_ceil(u64::from(self.arch.sm.count).max(1));
        u32::try_from(per_sm).unwrap_or(u32::MAX)
    }

    /// Bytes of A and B the main loop of `c` pulls from DRAM: what its launch order decides.
    /// `blocks_per_sm` is [`blocks_per_sm`] of `c`.
    pub fn launch_order_traffic(
        &self,
        t: &StructureTerms,
        c: &TileConfig,
        blocks_per_sm: u32,
    ) -> f64 {
        mainloop_dram(self, t, c, blocks_per_sm).bytes
    }

    /// A time no pipeline depth or launch order of this structure can beat: the model's own
    /// throughput terms summed over all waves (by the triangle inequality the sum of the waves'
    /// norms is at least the norm of the summed terms), at the best tensor rate, with every
    /// panel read from DRAM once; or one block's own critical path through the main loop; plus
    /// the one pipeline fill every launch exposes (at the best hit rate that DRAM floor allows)
    /// and the epilogue's writes. The policy skips structures this already rules out.
    pub fn lower_bound(&self, t: &StructureTerms, c: &TileConfig) -> f64 {
        let units = launch_units(t.tiles, c.split_k);
        // Blocks the busiest SM runs, whatever the occupancy: ceil(units / SMs).
        let busiest = units.div_ceil(u64::from(self.arch.sm.count)) as f64 * t.iters as f64;
        let best_rate = self.best_rate(c.mma);
        self.bound_of(BoundParts {
            compute: busiest * (t.flops_per_iter / best_rate + t.element_issue),
            smem: busiest * t.smem_per_iter / self.smem_bw_sm,
            l2_mainloop: t.l2_mainloop,
            l2_rate: self.l2_floor_rate(c.block_m, c.block_n, (t.tiles_m, t.tiles_n), units),
            dram_floor: self.dram_floor(
                (t.tiles_m, t.tiles_n),
                (t.a_panel, t.b_panel),
                (t.a_line, t.b_line),
                (t.a_rate, t.b_rate),
            ),
            critical_path: t.iters as f64 * t.single,
            iterations: t.iters as f64,
            epilogue: units as f64 * t.epilogue_bytes_per_block / t.epilogue_rate,
            split_k_time: t.split_k_time,
            c_bytes: t.c_bytes,
        })
    }

    /// The parts of every bound of the block size pair `block_m` x `block_n` (with `block_k` up
    /// to `longest_block_k`) that no split, persistence, layout or depth changes.
    pub fn pair_terms(&self, block_m: u32, block_n: u32, longest_block_k: u32) -> PairTerms {
        let p = self.p;
        let tiles_m = p.m.div_ceil(u64::from(block_m));
        let tiles_n = p.n.div_ceil(u64::from(block_n));
        let (a_panel, b_panel) = panel_bytes(p, block_m, block_n);
        // The longest A rows come most efficiently (B's rows are the pair's).
        let (lines, rates) = row_fetch(p, self.arch, block_m, block_n, longest_block_k);
        PairTerms {
            block_m,
            block_n,
            longest_block_k,
            tiles_m,
            tiles_n,
            l2_mainloop: self.l2_mainloop_bytes(tiles_m, tiles_n),
            // (A split multiplies the blocks, and clusters round the launch up: every SM may
            // be busy.)
            l2_rate: self.l2_floor_rate(block_m, block_n, (tiles_m, tiles_n), u64::MAX),
            dram_floor: self.dram_floor((tiles_m, tiles_n), (a_panel, b_panel), lines, rates),
        }
    }

    /// A time no group of the block size pair of `pair` can beat, whatever its split-K factor,
    /// persistence or warp layouts: [`Pricer::group_lower_bound`] with the parts a split
    /// changes at their least over every split (a split divides K as it multiplies the blocks,
    /// so the busiest SM's tensor and shared-memory work is at least its share of all of it, at
    /// the arch's best instruction rate), and none of a block's own path, its epilogue or a
    /// reduction. Cheap enough to order the pairs before their warp layouts and groups are
    /// worked out.
    pub fn pair_lower_bound(&self, pair: &PairTerms) -> f64 {
        let p = self.p;
        let (bm, bn) = (f64::from(pair.block_m), f64::from(pair.block_n));
        let share = (pair.tiles_m * pair.tiles_n * p.batch) as f64 / self.sms;
        let best_rate = [
            InstructionFamily::MmaSync,
            InstructionFamily::Wgmma,
            InstructionFamily::Tcgen05,
        ]
        .into_iter()
        .map(|mma| self.best_rate(mma))
        .fold(0.0, f64::max);
        let k = p.k as f64;
        self.bound_of(BoundParts {
            compute: share * 2.0 * bm * bn * k / best_rate,
            smem: share * 2.0 * (bm + bn) * k * self.e / self.smem_bw_sm,
            l2_mainloop: pair.l2_mainloop,
            l2_rate: pair.l2_rate,
            dram_floor: pair.dram_floor,
            critical_path: 0.0,
            iterations: 0.0,
            epilogue: 0.0,
            split_k_time: 0.0,
            c_bytes: 0.0,
        })
    }

    /// A time no structure of `g` (of the block size pair of `pair`) can beat:
    /// [`Pricer::lower_bound`] with each of its parts at its least over the group. Every block
    /// covers at least `K / split` of K and writes its tile; shared memory is read at least
    /// twice (fill and one read); tiles count before rounding to clusters; the tensor rate is
    /// the best of the group's instructions; DRAM lines are used as well as the longest rows
    /// allow.
    pub fn group_lower_bound(&self, pair: &PairTerms, g: &TileGroup) -> f64 {
        debug_assert!(
            (pair.block_m, pair.block_n, pair.longest_block_k)
                == (g.block_m, g.block_n, g.longest_block_k),
            "the group's pair"
        );
        let p = self.p;
        let (bm, bn) = (f64::from(g.block_m), f64::from(g.block_n));
        let tiles = pair.tiles_m * pair.tiles_n * p.batch;
        let units = launch_units(tiles, g.split_k);
        let busiest_blocks = units.div_ceil(u64::from(self.arch.sm.count)) as f64;
        let k_per_block = p.k as f64 / f64::from(g.split_k);
        let best_rate = self.best_rate(g.mma);
        let flops_per_block = 2.0 * bm * bn * k_per_block;
        let smem_per_block = 2.0 * (bm + bn) * k_per_block * self.e;
        let (epilogue_bytes_per_block, epilogue_rate) =
            self.epilogue_terms(g.block_m, g.block_n, g.split_k, false);
        // Staged element-wise, each scheduler issues its warps' share of the block's elements.
        // `TileConfig::threads` counts 32 per warp.
        let staged_per_block = f64::from(self.paths.staged_rows(g.block_m, g.block_n))
            * k_per_block
            * g.least_compute_share
            / f64::from(32 * self.arch.sm.tensor_cores.max(1))
            * STAGED_ELEMENT_CYCLES
            / self.clock;
        let iterations =
            p.k.div_ceil(u64::from(g.longest_block_k))
                .div_ceil(u64::from(g.split_k)) as f64;
        self.bound_of(BoundParts {
            compute: busiest_blocks * (flops_per_block / best_rate + staged_per_block),
            smem: busiest_blocks * smem_per_block / self.smem_bw_sm,
            l2_mainloop: pair.l2_mainloop,
            l2_rate: pair.l2_rate,
            dram_floor: pair.dram_floor,
            critical_path: (flops_per_block / best_rate).max(smem_per_block / self.smem_bw_sm)
                + staged_per_block,
            iterations,
            epilogue: units as f64 * epilogue_bytes_per_block / epilogue_rate,
            split_k_time: self.split_k_time(g.split_k),
            c_bytes: self.c_bytes(g.split_k),
        })
    }

    /// The bound from its parts; it never falls when a part grows (but `l2_mainloop`, which
    /// callers take exactly).
    fn bound_of(&self, b: BoundParts) -> f64 {
        let l2 = b.l2_mainloop / b.l2_rate;
        let dram = b.dram_floor.streamed / self.dram_bw;
        let throughput = (b.compute.powi(4) + b.smem.powi(4) + l2.powi(4) + dram.powi(4))
            .sqrt()
            .sqrt();
        let fill = self.stage_latency(b.dram_floor.bytes, b.l2_mainloop);
        // Loads staged through registers overlap nothing of their own block: every iteration
        // waits for its stage.
        let exposed = if self.paths.any_staged() {
            b.iterations * fill
        } else {
            0.0
        };
        let main = throughput.max(b.critical_path + exposed);
        // Every launch starts its blocks at least once (a persistent grid only once).
        LAUNCH_OVERHEAD_US * 1e-6
            + self.repack_time
            + b.split_k_time
            + (main + fill + self.block_start + b.epilogue)
                .max((b.dram_floor.streamed + b.c_bytes) / self.dram_bw)
    }

    /// Seconds the L2 takes to deliver `bytes` to `blocks` when its slices serve the `served`
    /// share of them ([`Pricer::l2_served_fraction`]): what the slices save, the SMs' own fill
    /// ports still carry.
    fn l2_seconds(&self, bytes: f64, served: f64, blocks: f64) -> f64 {
        if self.l2_coalescing > 1.0 {
            bytes * (served / self.l2_bw).max(1.0 / (blocks.min(self.sms) * self.port))
        } else {
            bytes / self.l2_bw
        }
    }

    /// The fastest the main loop's L2 bytes can arrive for a `block_m` x `block_n` tile launched
    /// as `units` blocks, in any launch order and at any occupancy: at the least share the
    /// slices serve ([`Pricer::l2_served_fraction`] at one block per SM, sharing whichever
    /// operand saves more), and at most the ports of the SMs those blocks can keep busy.
    fn l2_floor_rate(
        &self,
        block_m: u32,
        block_n: u32,
        (tiles_m, tiles_n): (u64, u64),
        units: u64,
    ) -> f64 {
        if self.l2_coalescing <= 1.0 {
            return self.l2_bw;
        }
        let busy = (units as f64).min(self.sms);
        let served = self
            .served_share(block_m, block_n, tiles_m, tiles_n, 1)
            .min(self.served_share(block_m, block_n, 1, tiles_n, 1));
        (self.l2_bw / served).min(busy * self.port)
    }

    /// The share of the bytes the SMs receive from the L2 that its slices serve: blocks that read
    /// one operand panel at the same K step have their requests for a line served once, up to
    /// the arch's `l2.request_coalescing` (docs/RESULTS.md, "The L2 serves a shared panel's
    /// requests once"). In the grouped launch order the consecutive blocks of a group's column
    /// share its B panel; a launch that walks along N (one tile row, or groups of one row) shares
    /// A instead. Blocks sharing an SM drift apart and coalesce less.
    fn l2_served_fraction(&self, t: &StructureTerms, c: &TileConfig, blocks_per_sm: u32) -> f64 {
        if self.l2_coalescing <= 1.0 {
            return 1.0;
        }
        let rows = u64::from(c.raster.group).min(t.tiles_m);
        self.served_share(c.block_m, c.block_n, rows, t.tiles_n, blocks_per_sm)
    }

    /// [`Pricer::l2_served_fraction`] of a `block_m` x `block_n` tile whose launch walks `rows`
    /// tile rows a group (more than one: consecutive blocks share B) or along N (one: the
    /// `tiles_n` blocks of a row share A), at `blocks_per_sm`.
    fn served_share(
        &self,
        block_m: u32,
        block_n: u32,
        rows: u64,
        tiles_n: u64,
        blocks_per_sm: u32,
    ) -> f64 {
        let rows = rows.max(1);
        let coalesced = |sharers: f64| {
            1.0 + (sharers.min(self.l2_coalescing) - 1.0).max(0.0) / f64::from(blocks_per_sm.max(1))
        };
        let (a_sharers, b_sharers) = if rows > 1 {
            (1.0, rows as f64)
        } else {
            (tiles_n as f64, 1.0)
        };
        let a = f64::from(block_m).min(self.p.m as f64);
        let b = f64::from(block_n).min(self.p.n as f64);
        (a / coalesced(a_sharers) + b / coalesced(b_sharers)) / (a + b)
    }

    /// Bytes the main loop reads from L2: every tile column reads all of A, every tile row all
    /// of B. A cluster's TMA multicast, which reads L2 once for every CTA it fills, is not
    /// counted as saving any: measured cuda-sm90 configs in clusters of two ran 2-5% slower than
    /// their twins without one, and crediting it took top-8 slots from the faster twins
    /// (docs/RESULTS.md, "Swapped tiles past one slab").
    fn l2_mainloop_bytes(&self, tiles_m: u64, tiles_n: u64) -> f64 {
        let (m, n, k) = (self.p.m as f64, self.p.n as f64, self.p.k as f64);
        (tiles_n as f64 * m * k + tiles_m as f64 * k * n) * self.e * self.batch
    }

    /// The least A and B any launch order can pull from DRAM: every (A, B) panel once, at its
    /// rows' fetch efficiency and streaming rate.
    fn dram_floor(
        &self,
        (tiles_m, tiles_n): (u64, u64),
        (a_panel, b_panel): (f64, f64),
        (a_line, b_line): (f64, f64),
        (a_rate, b_rate): (f64, f64),
    ) -> DramTraffic {
        let a = a_panel * tiles_m as f64 / a_line;
        let b = b_panel * tiles_n as f64 / b_line;
        DramTraffic {
            bytes: self.batch * (a + b),
            streamed: self.batch * (a / a_rate + b / b_rate),
        }
    }

    /// The tensor peak `mma` instructions run at for this problem.
    fn peak_of(&self, mma: InstructionFamily) -> f64 {
        match mma {
            InstructionFamily::MmaSync => self.mma_sync_peak,
            InstructionFamily::Wgmma | InstructionFamily::Tcgen05 => self.peak,
        }
    }

    /// The tensor rate per SM of `mma` with every tensor core busy.
    fn best_rate(&self, mma: InstructionFamily) -> f64 {
        let eff = mma_efficiency(mma, self.arch, self.arch.sm.tensor_cores, self.has_wgmma);
        self.peak_of(mma) / self.sms * eff
    }

    /// Bytes each block writes in its epilogue (split-K: fp32 partials) and the rate they go at.
    /// (`swap_ab`: the tile's accumulators are stored transposed; a lower bound passes false.)
    fn epilogue_terms(
        &self,
        block_m: u32,
        block_n: u32,
        split_k: u32,
        swap_ab: bool,
    ) -> (f64, f64) {
        let (m, n) = (self.p.m as f64, self.p.n as f64);
        let split = split_k > 1;
        let bytes = f64::from(block_m).min(m)
            * f64::from(block_n).min(n)
            * if split { 4.0 } else { self.eo };
        let rate = match (split, self.split_reduction) {
            (true, SplitKReduction::AtomicWorkspace) => self.l2_bw * ATOMIC_L2_FRACTION,
            (false, _) if swap_ab => self.dram_bw * SWAPPED_STORE_SECTOR_USE,
            _ => self.dram_bw,
        };
        (bytes, rate)
    }

    /// Seconds of the split-K reduction outside the main kernel.
    fn split_k_time(&self, split_k: u32) -> f64 {
        let mn = self.p.m as f64 * self.p.n as f64 * self.batch;
        let (eo, dram_bw) = (self.eo, self.dram_bw);
        match (split_k > 1, self.split_reduction) {
            (false, _) => 0.0,
            // Zero the workspace, then cast it to the output type.
            (true, SplitKReduction::AtomicWorkspace) => {
                2.0 * EXTRA_KERNEL_US * 1e-6 + (mn * 4.0 + mn * 4.0 + mn * eo) / dram_bw
            }
            // Sum the per-split slices.
            (true, SplitKReduction::SeparateReduce) => {
                EXTRA_KERNEL_US * 1e-6 + (f64::from(split_k) * mn * 4.0 + mn * eo) / dram_bw
            }
        }
    }

    /// Bytes of C the kernel itself writes (none with split-K: the reduction does).
    fn c_bytes(&self, split_k: u32) -> f64 {
        if split_k > 1 {
            0.0
        } else {
            self.p.m as f64 * self.p.n as f64 * self.batch * self.eo
        }
    }

    /// Seconds of one iteration's chain of `mma.sync` k-steps in one warp: every step's
    /// instructions wait for the last step's accumulators, so a step takes the longer of the
    /// arch's measured wait and the warp's own issue of its instructions. Thin warp tiles issue
    /// few instructions a step and wait; wide ones hide the wait behind their issue (0 for other
    /// instruction families, whose loops do not wait step by step, and where the arch measured
    /// no wait).
    fn k_step_chain(&self, c: &TileConfig) -> f64 {
        let Some(mma) = self
            .mma_sync
            .filter(|_| c.mma == InstructionFamily::MmaSync)
        else {
            return 0.0;
        };
        let (warp_m, warp_n) = (c.block_m / c.warps_m.max(1), c.block_n / c.warps_n.max(1));
        let per_step = f64::from(warp_m.div_ceil(mma.m) * warp_n.div_ceil(mma.n));
        let step = mma.wait.max(per_step * mma.issue);
        f64::from(c.block_k.div_ceil(mma.k)) * step
    }

    /// Latency of one stage's loads when `dram_bytes` of the main loop's `l2_bytes` miss the L2.
    fn stage_latency(&self, dram_bytes: f64, l2_bytes: f64) -> f64 {
        let hit = (1.0 - dram_bytes / l2_bytes).clamp(0.0, 1.0);
        (hit * L2_HIT_LATENCY_CYCLES + (1.0 - hit) * DRAM_LATENCY_CYCLES) / self.clock
    }

    /// The model itself. `FULL` also sums the per-resource totals the breakdown reports; the
    /// policy's time-only pricing skips them.
    #[inline(always)]
    fn evaluate<const FULL: bool>(
        &self,
        t: &StructureTerms,
        c: &TileConfig,
        blocks_per_sm: u32,
    ) -> Option<Evaluation> {
        let Pricer {
            arch,
            sms,
            dram_bw,
            l2_bw,
            smem_bw_sm,
            has_wgmma,
            paths,
            port,
            ..
        } = *self;
        if blocks_per_sm == 0 {
            return None;
        }
        let g = geometry_of(c, t, arch, blocks_per_sm);

        // Traffic.
        let traffic = mainloop_dram(self, t, c, blocks_per_sm);
        let dram_mainloop = traffic.bytes;
        let l2_mainloop = t.l2_mainloop;
        let l2_per_iter = t.l2_per_iter;
        // (Time-equivalent bytes: narrow rows stream slower; the latency's hit rate counts bytes.)
        let dram_per_iter = traffic.streamed / t.block_iters;
        let latency = self.stage_latency(dram_mainloop, l2_mainloop);
        let (flops_per_iter, smem_per_iter, element_issue, rescale_issue) = (
            t.flops_per_iter,
            t.smem_per_iter,
            t.element_issue,
            t.rescale_issue,
        );

        // One stage's operands arrive after the memory latency plus their transfer at the SM's share
        // of L2 bandwidth (split among the SMs that are busy, at most the SM's own port);
        // `stages - 1` stages in flight overlap that with the math. The slices serve only the
        // `served` share of the bytes the SMs receive.
        let served = self.l2_served_fraction(t, c, blocks_per_sm);
        let stage_transfer =
            |blocks: f64| l2_per_iter / (l2_bw / (blocks.max(1.0) * served)).min(port);

        // `resident` blocks per SM (per-SM throughput), `blocks` in the whole wave (global bandwidth).
        let iteration = |resident: f64, blocks: f64| -> IterationTimes {
            let warps = (resident as u32) * c.compute_warps();
            let tc_rate = self.peak_of(c.mma) / sms * mma_efficiency(c.mma, arch, warps, has_wgmma);
            // Scaling runs on the FP32 lanes: resident blocks overlap it with their math.
            let compute =
                resident * ((flops_per_iter / tc_rate).max(rescale_issue) + element_issue);
            let smem = resident * smem_per_iter / smem_bw_sm;
            let l2 = self.l2_seconds(blocks * l2_per_iter, served, blocks);
            let dram = blocks * dram_per_iter / dram_bw;
            let single = t.single;
            let arrival = latency + stage_transfer(blocks);
            let latency = match (
                paths.any_staged(),
                c.stages.saturating_sub(t.stages_held_by_tensor_cores),
            ) {
                // Nothing overlaps a block's own staged loads: it waits for them every iteration.
                (true, _) | (_, 0..=1) => arrival + single,
                (false, stages) => arrival / f64::from(stages - 1),
            };
            IterationTimes {
                compute,
                smem,
                l2,
                dram,
                latency,
                single,
            }
        };
        // Launch fill: the first stage's latency, once per block. A launched block also pays
        // its start; a persistent block pays it once.
        let fill = latency;
        let start = self.block_start;

        let (epilogue_bytes_per_block, epilogue_rate) =
            (t.epilogue_bytes_per_block, t.epilogue_rate);
        // Waves: full waves at the configured occupancy, then the tail.
        let slots = u64::from(arch.sm.count) * u64::from(g.blocks_per_sm);
        let (full_waves, tail_blocks) = if c.persistent {
            // A persistent grid walks its units (tiles and K splits) in rounds; the last round
            // is partial.
            let units = launch_units(t.tiles, c.split_k);
            let rounds = units.div_ceil(slots.min(units).max(1));
            let tail = units - (rounds - 1) * slots.min(units);
            (rounds - 1, tail)
        } else {
            (g.grid / slots, g.grid % slots)
        };
        let iters = t.iters as f64;
        let mut totals = IterationTimes {
            compute: 0.0,
            smem: 0.0,
            l2: 0.0,
            dram: 0.0,
            latency: 0.0,
            single: 0.0,
        };
        let mut main = 0.0;
        let mut epilogue = 0.0;
        // Resident blocks of the first wave; the last wave's epilogue, whole and as charged.
        let mut first_resident = None;
        let mut last = (0.0, 0.0);
        let mut add_wave = |resident: f64, blocks: f64, count: f64| {
            let it = iteration(resident, blocks);
            // The wave's tiles leave at the global write rate, and no block finishes before its own
            // tile has gone out through its SM's port.
            let written = blocks * epilogue_bytes_per_block / epilogue_rate;
            let own_store = epilogue_bytes_per_block / port;
            let epi = written.max(own_store);
            // Resident blocks drift apart after the first wave: while one block waits for its
            // pipeline to fill or its tile to leave its SM, the others stream, so a wave exposes
            // a 1/resident share of those waits (the first and last waves: see below). The
            // wave's writes still take the global write rate.
            let charged = written.max(own_store / resident);
            let started = if c.persistent {
                // A persistent block's producer runs on into the next tile's stages as the ring
                // frees them: only the consumers' store of each tile is exposed, not the next
                // tile's fill (measured: `benches/sm90/block_start.py`, docs/RESULTS.md, "A
                // block's start").
                main += count * iters * it.total();
                epilogue += count * epi;
                0.0
            } else {
                let shared = iters * it.total() + (fill + start) / resident;
                // Resident blocks overlap one another's waits, but a round of them lasts at
                // least as long as one block's own path.
                let out_of_loop = self.out_of_loop.map(|o| {
                    o.cycles(resident, c.compute_warps(), arch.sm.tensor_cores) / self.clock
                });
                let own_path = out_of_loop
                    .map(|cycles| start + fill + iters * it.latency.max(it.single) + cycles);
                main += count * own_path.map_or(shared, |path| shared.max(path));
                epilogue += count * charged;
                start + out_of_loop.unwrap_or(0.0)
            };
            first_resident.get_or_insert(resident);
            last = (epi, charged);
            if FULL {
                totals.compute += count * iters * it.compute;
                totals.smem += count * iters * it.smem;
                totals.l2 += count * iters * it.l2;
                totals.dram += count * iters * it.dram;
                totals.latency += count * (iters * it.latency.max(it.single) + fill + started);
            }
        };
        if full_waves > 0 {
            add_wave(f64::from(g.blocks_per_sm), slots as f64, full_waves as f64);
        }
        if tail_blocks > 0 {
            let resident = tail_blocks.div_ceil(u64::from(arch.sm.count)) as f64;
            add_wave(resident, tail_blocks as f64, 1.0);
        }
        // (Every launch has at least one wave.)
        let first_resident = first_resident.unwrap_or(1.0);
        let (last_epilogue, last_charged) = last;
        if c.persistent {
            // Only the first tile's fill and the blocks' one start are exposed.
            main += fill + start;
            if FULL {
                totals.latency += start;
            }
        } else {
            // The first wave's blocks start together: their starts and fills overlap nothing.
            // The last block on each SM stores its tile with nothing left to overlap.
            main += (fill + start) * (1.0 - 1.0 / first_resident);
            epilogue += last_epilogue - last_charged;
        }

        let overhead = LAUNCH_OVERHEAD_US * 1e-6;
        let dram_total = dram_mainloop + t.c_bytes;
        let dram_streamed = traffic.streamed + t.c_bytes;
        let kernel = (main + epilogue).max(dram_streamed / dram_bw);
        let time = overhead + self.repack_time + kernel + t.split_k_time;

        Some(Evaluation {
            time,
            g,
            totals,
            epilogue,
            overhead,
            dram_total,
            dram_streamed,
            slots,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::family::Family;
    use crate::template::MatmulTemplate;
    use crate::tile::{Raster, RasterOrder};
    use carver_arch::HardwareDb;

    fn tile(block_m: u32, block_n: u32, group: u32) -> TileConfig {
        TileConfig {
            block_m,
            block_n,
            block_k: 64,
            warps_m: 1,
            warps_n: 4,
            producer_warps: 0,
            stages: 3,
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group,
            },
            split_k: 1,
            cluster_m: 1,
            cluster_n: 1,
            persistent: false,
            mma: InstructionFamily::Wgmma,
            swap_ab: false,
        }
    }

    /// `check` of the Triton pricer of an M x 8192 x 4096 problem (of `batch`) on `arch_key`.
    fn with_pricer<R>(arch_key: &str, m: u64, batch: u64, check: impl FnOnce(&Pricer) -> R) -> R {
        let db = HardwareDb::embedded().unwrap();
        let arch = db.get(arch_key).unwrap();
        let p = MatmulTemplate::new(m, 8192, 4096)
            .with_dtype(DType::F16)
            .with_batch(batch)
            .with_family(Family::Triton)
            .validate(arch)
            .unwrap();
        check(&Pricer::new(Family::Triton.rules(), &p, arch).unwrap())
    }

    /// The served share of `c` on `arch_key` for an M x 8192 x 4096 problem (of `batch`).
    fn served(arch_key: &str, m: u64, batch: u64, c: &TileConfig, blocks_per_sm: u32) -> f64 {
        with_pricer(arch_key, m, batch, |pricer| {
            pricer.l2_served_fraction(&pricer.terms(c), c, blocks_per_sm)
        })
    }

    #[test]
    fn consecutive_blocks_that_share_a_panel_are_served_once_per_coalesced_request() {
        // Groups of 8 tile rows: the consecutive blocks of a column share its 256-wide B tile.
        let wide = tile(64, 256, 8);
        assert!((served("h200", 4096, 1, &wide, 1) - (64.0 + 256.0 / 2.0) / 320.0).abs() < 1e-12);
        // Groups of one row walk along N: consecutive blocks share the 64-row A tile instead.
        let row_major = tile(64, 256, 1);
        assert!(
            (served("h200", 4096, 1, &row_major, 1) - (64.0 / 2.0 + 256.0) / 320.0).abs() < 1e-12
        );
        // One tile row walks along N whatever the group.
        assert_eq!(
            served("h200", 64, 1, &wide, 1),
            served("h200", 64, 1, &row_major, 1)
        );
        // Two blocks on an SM drift apart: half the saving.
        let drifting = served("h200", 4096, 1, &wide, 2);
        assert!((drifting - (64.0 + 256.0 / 1.5) / 320.0).abs() < 1e-12);
    }

    #[test]
    fn only_a_measured_single_launch_counts_coalescing() {
        let wide = tile(64, 256, 8);
        // No figure in the A100's description: every byte is served.
        assert_eq!(served("a100-sxm4-80gb", 4096, 1, &wide, 1), 1.0);
        // A batched launch (a MoE layer's experts) counts none.
        assert_eq!(served("h200", 4096, 4, &wide, 1), 1.0);
    }

    #[test]
    fn the_fill_ports_carry_what_the_slices_save() {
        with_pricer("h200", 4096, 1, |pricer| {
            let all_sms = pricer.sms;
            let ports = 1.0 / (all_sms * pricer.port);
            // Half served would beat the ports: they bind.
            assert_eq!(pricer.l2_seconds(1.0, 0.5, all_sms), ports);
            assert!(0.5 / pricer.l2_bw < ports);
            // Nothing coalesced: the slices bind.
            assert_eq!(pricer.l2_seconds(1.0, 1.0, all_sms), 1.0 / pricer.l2_bw);
            // The lower bound's rate: a 128 x 128 tile served at best (128 + 128 / 2) / 256 of its
            // bytes, below the ports' limit; a 64 x 256 tile's best share, 192 / 320, would beat
            // the ports, which bind.
            let rate = pricer.l2_floor_rate(128, 128, (32, 64), 2048);
            assert_eq!(rate, pricer.l2_bw / (192.0 / 256.0));
            assert!(rate < all_sms * pricer.port);
            assert_eq!(
                pricer.l2_floor_rate(64, 256, (64, 32), 2048),
                all_sms * pricer.port
            );
            // Eight blocks keep eight SMs' ports busy at the most.
            assert_eq!(pricer.l2_floor_rate(128, 128, (2, 4), 8), 8.0 * pricer.port);
        });
    }

    /// An `mma.sync` tile of `warps_m x warps_n` warps.
    fn mma_sync(block_m: u32, block_n: u32, block_k: u32, warps: (u32, u32)) -> TileConfig {
        TileConfig {
            block_k,
            warps_m: warps.0,
            warps_n: warps.1,
            mma: InstructionFamily::MmaSync,
            ..tile(block_m, block_n, 1)
        }
    }

    /// Triton 3.6 converts fp8 operands to f16 for `mma.sync` where the arch also has `wgmma`
    /// (the PTX of its sm_90 build: `cvt.rn.f16x2.e4m3x2`, then `m16n8k16.f16`), and keeps them
    /// fp8 on an arch whose only tensor path is `mma.sync` (sm_89: `m16n8k32.e4m3`).
    #[test]
    fn triton_runs_fp8_mma_sync_tiles_in_f16_where_the_arch_has_wgmma() {
        let db = HardwareDb::embedded().unwrap();
        let terms = |arch_key: &str, dtype: DType, c: &TileConfig| {
            let arch = db.get(arch_key).unwrap();
            let p = MatmulTemplate::new(16, 8192, 8192)
                .with_dtype(dtype)
                .with_family(Family::Triton)
                .validate(arch)
                .unwrap();
            let pricer = Pricer::new(Family::Triton.rules(), &p, arch).unwrap();
            (pricer.terms(c), pricer.best_rate(c.mma))
        };
        let thin = mma_sync(16, 128, 128, (1, 4));
        // Hopper: the f16 rate, and each warp converts its 16 + 32 rows of the step's 128.
        let (fp8, fp8_rate) = terms("h200", DType::E4m3, &thin);
        let (f16, f16_rate) = terms("h200", DType::F16, &thin);
        assert_eq!(fp8_rate, f16_rate);
        assert!(fp8.element_issue > f16.element_issue);
        // A wgmma tile keeps the fp8 rate.
        let wide = TileConfig {
            mma: InstructionFamily::Wgmma,
            ..tile(64, 128, 1)
        };
        let wgmma_ratio = terms("h200", DType::E4m3, &wide).1 / terms("h200", DType::F16, &wide).1;
        assert!((wgmma_ratio - 2.0).abs() < 0.01, "{wgmma_ratio}");
        // Ada: mma.sync runs fp8 natively, twice the f16 rate, nothing converted.
        let (ada_fp8, ada_fp8_rate) = terms("l40s", DType::E4m3, &thin);
        let (ada_f16, ada_f16_rate) = terms("l40s", DType::F16, &thin);
        assert!(ada_fp8_rate > 1.5 * ada_f16_rate);
        assert_eq!(ada_fp8.element_issue, ada_f16.element_issue);
    }

    #[test]
    fn thin_warp_tiles_wait_on_every_k_step() {
        with_pricer("h200", 32, 1, |pricer| {
            let step = pricer.mma_sync.unwrap().wait;
            // A 16 x 16 warp tile issues two m16n8k16 instructions a step, far fewer cycles than a
            // step's wait: eight steps of BLOCK_K 128, each the wait.
            let thin = mma_sync(16, 32, 128, (1, 2));
            assert!((pricer.k_step_chain(&thin) - 8.0 * step).abs() < 1e-15);
            // Half the steps at BLOCK_K 64; the warps' count does not shorten a warp's chain.
            assert!(
                (pricer.k_step_chain(&mma_sync(16, 32, 64, (1, 2))) - 4.0 * step).abs() < 1e-15
            );
            assert_eq!(
                pricer.k_step_chain(&mma_sync(16, 32, 128, (1, 1))),
                pricer.k_step_chain(&thin)
            );
            // The block's own iteration is at least the chain.
            assert!(pricer.terms(&thin).single >= 8.0 * step);
        });
    }

    #[test]
    fn wide_warp_tiles_hide_the_wait_behind_their_issue() {
        with_pricer("h200", 4096, 1, |pricer| {
            let MmaSyncSteps { issue, wait, .. } = pricer.mma_sync.unwrap();
            // A 64 x 64 warp tile issues 4 x 8 instructions a step: their issue is the step.
            let wide = mma_sync(128, 128, 32, (2, 2));
            assert!(32.0 * issue > wait);
            assert!((pricer.k_step_chain(&wide) - 2.0 * 32.0 * issue).abs() < 1e-15);
            // wgmma loops issue asynchronously and are not priced step by step.
            assert_eq!(pricer.k_step_chain(&tile(128, 128, 1)), 0.0);
        });
    }

    #[test]
    fn no_step_is_priced_where_the_arch_measured_none() {
        // The A100's description lists no `step_cycles`.
        with_pricer("a100-sxm4-80gb", 32, 1, |pricer| {
            assert!(pricer.mma_sync.is_none());
            assert_eq!(pricer.k_step_chain(&mma_sync(16, 32, 128, (1, 2))), 0.0);
        });
    }
}
