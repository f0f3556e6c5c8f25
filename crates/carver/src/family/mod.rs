//! Kernel families. A [`Family`] names one (what `--target` takes, and the `target` field of
//! carver's JSON); its [`FamilyRules`] own its legal configuration space, its resource use and
//! its native parameter names. The policy walks the space and the cost model prices each point.

mod config_error;
mod generic;
mod sm90;
mod tilelang;
mod triton;

use std::fmt;
use std::str::FromStr;

use carver_arch::{Arch, ComputeClass, InstructionFamily};
use serde::{Deserialize, Serialize};

use crate::problem::Problem;
use crate::tile::{Raster, RasterOrder, TileConfig};

pub use config_error::{ConfigError, ProblemRejected, UnknownFamily};
pub use generic::GenericRules;
pub use sm90::{
    ROW_MAJOR_B_BOX_COLUMNS, Sm90Params, Sm90Rules, Sm90Violation, TMA_STRIDE_BYTES,
    tma_leading_dim,
};
pub use tilelang::TileLangRules;
pub use triton::TritonRules;

/// A kernel family: which kind of kernel hints are produced for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// `triton.Config` dicts for a tiled Triton matmul with grouped order and split-K.
    Triton,
    /// TileLang autotune dicts (`block_M`, `block_N`, `block_K`, `num_stages`, `thread_num`,
    /// `enable_rasteration`).
    #[serde(rename = "tilelang")]
    TileLang,
    /// carver's own Hopper family (TMA + wgmma, warp-specialized).
    CudaSm90,
    /// Family-neutral hints for any other tuner.
    #[default]
    Generic,
}

impl Family {
    pub const ALL: [Family; 4] = [Self::Triton, Self::TileLang, Self::CudaSm90, Self::Generic];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Triton => "triton",
            Self::TileLang => "tilelang",
            Self::CudaSm90 => "cuda-sm90",
            Self::Generic => "generic",
        }
    }

    /// The family's space, rules, resource use and native format.
    pub fn rules(self) -> &'static dyn FamilyRules {
        match self {
            Self::Triton => &TritonRules,
            Self::TileLang => &TileLangRules,
            Self::CudaSm90 => &Sm90Rules,
            Self::Generic => &GenericRules,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Family {
    type Err = UnknownFamily;
    fn from_str(s: &str) -> Result<Self, UnknownFamily> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownFamily(s.to_string()))
    }
}

/// How a block's warps are arranged and which tensor instruction they issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpLayout {
    pub warps_m: u32,
    pub warps_n: u32,
    pub producer_warps: u32,
    pub mma: InstructionFamily,
    /// A and B trade places in the tensor instruction ([`TileConfig::swap_ab`]).
    pub swap_ab: bool,
}

/// How global memory reaches shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadPath {
    /// Per-thread asynchronous copies (`cp.async`), issued by the compute warps.
    CpAsync,
    /// The Tensor Memory Accelerator, issued by one thread of a producer warp.
    Tma,
    /// Element-wise loads into registers, then stores to shared memory: what a kernel must do
    /// when it cannot prove 16-byte alignment. No asynchronous pipeline: every iteration waits
    /// for its own loads, and every staged element costs registers and issue slots.
    Registers,
}

/// How each operand reaches shared memory: a kernel stages only the operand whose alignment it
/// cannot prove through registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadPaths {
    pub a: LoadPath,
    pub b: LoadPath,
}

impl LoadPaths {
    pub const fn both(path: LoadPath) -> Self {
        Self { a: path, b: path }
    }

    /// `vectors` for each operand whose rows are aligned (as the family proves it), registers
    /// for the other.
    pub fn where_aligned(a_aligned: bool, b_aligned: bool, vectors: LoadPath) -> Self {
        let path = |aligned: bool| {
            if aligned {
                vectors
            } else {
                LoadPath::Registers
            }
        };
        Self {
            a: path(a_aligned),
            b: path(b_aligned),
        }
    }

    /// Whether some operand is staged through registers: the block then waits for that
    /// operand's loads every iteration.
    pub fn any_staged(self) -> bool {
        self.a == LoadPath::Registers || self.b == LoadPath::Registers
    }

    /// Tile rows staged per element of `block_k`: `block_m` when A is staged, plus `block_n`
    /// when B is.
    pub fn staged_rows(self, block_m: u32, block_n: u32) -> u32 {
        let staged = |path: LoadPath, rows: u32| {
            if path == LoadPath::Registers { rows } else { 0 }
        };
        staged(self.a, block_m) + staged(self.b, block_n)
    }
}

/// The split-K factors the recommender offers a family whose kernel splits K into any number of
/// contiguous runs (where the tiles alone leave SMs idle: `policy`). Not only powers of two: a
/// grid of 40 tiles fills one wave of 132 SMs with 3 splits, and the next power of two leaves
/// most of a second wave idle (`exaone32b.down.m256`; docs/RESULTS.md, "Split-K 3, 6 and 12 for
/// Triton").
pub(crate) const SPLIT_K_FACTORS: [u32; 8] = [1, 2, 3, 4, 6, 8, 12, 16];

/// How partial sums of a split-K launch are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitKReduction {
    /// fp32 atomic adds into a zeroed workspace, then a cast kernel: two extra launches.
    AtomicWorkspace,
    /// Each split writes its own fp32 slice; a second kernel sums the slices.
    SeparateReduce,
}

/// Resource use of one configuration, as the compiler would allocate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resources {
    pub smem_bytes: u64,
    pub registers_per_thread: u32,
}

/// Copy kernels a family runs before its main kernel (see [`FamilyRules::repack`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Repack {
    /// Copy kernels launched.
    pub kernels: u32,
    /// Bytes they read and write in DRAM.
    pub bytes: f64,
}

/// What a kernel family is: its space, its rules, its resource use and its native format.
pub trait FamilyRules: Sync {
    fn id(&self) -> Family;

    /// Rejects problems the family cannot run at all on this arch (dtype, layout, alignment).
    fn check_problem(&self, problem: &Problem, arch: &Arch) -> Result<(), ProblemRejected>;

    /// Candidate block sizes along M, N and K.
    fn block_sizes(&self, problem: &Problem, arch: &Arch) -> [Vec<u32>; 3];

    /// Warp arrangements for a block tile.
    fn warp_layouts(
        &self,
        block_m: u32,
        block_n: u32,
        problem: &Problem,
        arch: &Arch,
    ) -> Vec<WarpLayout>;

    /// Pipeline depths the family can express.
    fn stage_range(&self) -> (u32, u32);

    /// Launch-order group sizes.
    fn groups(&self) -> &'static [u32];

    /// Split-K factors (1 = no split).
    fn split_ks(&self) -> &'static [u32];

    /// Cluster shapes (m, n) and persistence options.
    fn clusters(&self) -> &'static [(u32, u32)] {
        &[(1, 1)]
    }
    fn persistence(&self) -> &'static [bool] {
        &[false]
    }

    fn load_paths(&self, problem: &Problem, arch: &Arch) -> LoadPaths;
    fn split_k_reduction(&self) -> SplitKReduction;

    /// Operands the family copies into padded, aligned buffers before its kernel runs, because
    /// its loads need aligned rows. None by default.
    fn repack(&self, _problem: &Problem) -> Repack {
        Repack::default()
    }

    /// Shared memory and registers a configuration needs.
    fn resources(&self, config: &TileConfig, problem: &Problem) -> Resources;

    /// How far above the registers that fit one more block per SM the family's register
    /// estimate for `config` can be while its compiler still fits that block: the largest
    /// estimate / threshold ratio at which compiled kernels were seen to fit it. `None` where
    /// the estimate is exact or not measured (the ranking then hedges nothing).
    fn register_estimate_margin(&self, _config: &TileConfig, _problem: &Problem) -> Option<f64> {
        None
    }

    /// The `wgmma` instructions one main-loop iteration can issue on each SM sub-partition
    /// before the issuing warps stall behind the tensor pipe, where the same warps then issue
    /// the next stage's loads (a software-pipelined loop). An iteration of more issues its loads
    /// late, so the tensor cores hold one more stage of the ring. `None` where loads do not
    /// wait behind the product (warp-specialized producers) or where it was not measured.
    fn queued_wgmma_instructions(&self) -> Option<u32> {
        None
    }

    /// The compute class the family's `mma.sync` tiles run a problem of `class` in on `arch`:
    /// `class` itself, or the class its compiler converts both operands to before the
    /// instruction (every warp its own fragments, every K step).
    fn mma_sync_operand_class(&self, class: ComputeClass, _arch: &Arch) -> ComputeClass {
        class
    }

    /// SM cycles that starting one more block on an SM costs the family's kernel beyond its
    /// tiles' work and its first stage's latency (its set-up before the first load, and its
    /// exit): a launch pays it each wave, a persistent grid once. `0.0` where not measured.
    fn block_start_cycles(&self) -> f64 {
        0.0
    }

    /// Family-specific legality beyond the hardware limits checked by [`check_fits`].
    fn check_rules(
        &self,
        config: &TileConfig,
        problem: &Problem,
        arch: &Arch,
    ) -> Result<(), ConfigError>;

    /// The configuration in the family's own parameter names.
    fn native(&self, config: &TileConfig) -> serde_json::Value;

    /// Parses the family's own parameter dict back into a configuration.
    fn parse_native(
        &self,
        value: &serde_json::Value,
        problem: &Problem,
        arch: &Arch,
    ) -> Result<TileConfig, ConfigError>;
}

/// Every point of `family`'s space for `p`, before any rule or limit is checked, in the order
/// the axes are walked: block M, block N, warp layout, block K, stages, launch-order group,
/// split-K, cluster, persistence. What `carver tune --exhaustive` sweeps (through
/// `rank_every_config`); the policy walks the same axes with Roller's pruning.
pub fn space(family: &dyn FamilyRules, p: &Problem, arch: &Arch) -> Vec<TileConfig> {
    let [bms, bns, bks] = family.block_sizes(p, arch);
    let (lo, hi) = family.stage_range();
    let mut points = Vec::new();
    for &block_m in &bms {
        for &block_n in &bns {
            for layout in family.warp_layouts(block_m, block_n, p, arch) {
                for &block_k in &bks {
                    for stages in lo..=hi {
                        for &group in family.groups() {
                            for &split_k in family.split_ks() {
                                for &(cluster_m, cluster_n) in family.clusters() {
                                    for &persistent in family.persistence() {
                                        points.push(TileConfig {
                                            block_m,
                                            block_n,
                                            block_k,
                                            warps_m: layout.warps_m,
                                            warps_n: layout.warps_n,
                                            producer_warps: layout.producer_warps,
                                            stages,
                                            raster: Raster {
                                                order: RasterOrder::GroupedRows,
                                                group,
                                            },
                                            split_k,
                                            cluster_m,
                                            cluster_n,
                                            persistent,
                                            mma: layout.mma,
                                            swap_ab: layout.swap_ab,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    points
}

/// Whether a configuration is legal: family rules plus the arch's hardware limits.
pub fn check_config(
    family: &dyn FamilyRules,
    config: &TileConfig,
    problem: &Problem,
    arch: &Arch,
) -> Result<Resources, ConfigError> {
    family.check_rules(config, problem, arch)?;
    let res = family.resources(config, problem);
    check_fits(config, res, arch)?;
    Ok(res)
}

/// Hardware limits every family shares: shared memory, registers, threads.
pub fn check_fits(config: &TileConfig, res: Resources, arch: &Arch) -> Result<(), ConfigError> {
    if res.smem_bytes > arch.shared_memory.per_block_optin_bytes {
        return Err(ConfigError::SharedMemory {
            needed: res.smem_bytes,
            allowed: arch.shared_memory.per_block_optin_bytes,
        });
    }
    if res.registers_per_thread > arch.registers.per_thread_max {
        return Err(ConfigError::Registers {
            needed: res.registers_per_thread,
            allowed: arch.registers.per_thread_max,
        });
    }
    let threads = config.threads();
    if threads > arch.sm.max_threads_per_block {
        return Err(ConfigError::Threads {
            threads,
            allowed: arch.sm.max_threads_per_block,
        });
    }
    let regs_block = u64::from(res.registers_per_thread) * u64::from(threads);
    if regs_block > u64::from(arch.registers.per_block) {
        return Err(ConfigError::RegistersPerBlock {
            needed: regs_block,
            allowed: arch.registers.per_block,
        });
    }
    Ok(())
}

/// The tensor instruction family a block uses, given what the arch offers: `wgmma` when the
/// arch has it for this class and the layout allows it, else `mma.sync`.
pub(crate) fn pick_mma(
    arch: &Arch,
    problem: &Problem,
    wgmma_possible: bool,
) -> Option<InstructionFamily> {
    // Called for every tile the policy enumerates: scan the arch's list without collecting it.
    let has = |f: InstructionFamily| arch.instructions_for(problem.class).any(|i| i.family == f);
    if wgmma_possible && has(InstructionFamily::Wgmma) {
        Some(InstructionFamily::Wgmma)
    } else if has(InstructionFamily::MmaSync) {
        Some(InstructionFamily::MmaSync)
    } else {
        arch.instructions_for(problem.class)
            .next()
            .map(|i| i.family)
    }
}

/// Accumulator registers per compute thread.
pub(crate) fn accumulator_registers(config: &TileConfig, problem: &Problem) -> u32 {
    // Two 2-byte accumulators share a 32-bit register.
    let per_register = if problem.acc.bytes() == 2 { 2 } else { 1 };
    let elements = u64::from(config.block_m) * u64::from(config.block_n);
    let threads = u64::from(32 * config.compute_warps()).max(1);
    u32::try_from(elements.div_ceil(threads * per_register)).unwrap_or(u32::MAX)
}

/// Reads an unsigned integer field of a native config dict.
pub(crate) fn field_u32(v: &serde_json::Value, key: &str) -> Result<u32, ConfigError> {
    v.get(key)
        .and_then(serde_json::Value::as_u64)
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| ConfigError::native(key, "is missing or not an integer from 0 to 2^32 - 1"))
}

/// Triton-style warp arrangement for `mma.sync`: double the warps along whichever dimension
/// leaves each warp the larger extent, so warp tiles stay square-ish (more operand reuse).
pub(crate) fn mma_sync_warps(block_m: u32, block_n: u32, warps: u32) -> (u32, u32) {
    let (mut wm, mut wn) = (1u32, 1u32);
    // Saturating: a parsed (untrusted) config may name blocks of billions of rows.
    while wm.saturating_mul(wn) < warps {
        let per_m = block_m / wm;
        let per_n = block_n / wn;
        if per_m >= per_n && per_m >= 32 {
            wm *= 2;
        } else if per_n >= 16 {
            wn *= 2;
        } else if per_m >= 32 {
            wm *= 2;
        } else {
            // Tile too small for more warps: they would duplicate work.
            break;
        }
    }
    (wm, wn)
}

/// `wgmma` arrangement: warpgroups of 4 warps each own 64-row slabs; extra warpgroups split N
/// once M is covered.
pub(crate) fn wgmma_warps(block_m: u32, warps: u32) -> (u32, u32) {
    // At least one group, or the clamp below would have no range.
    let groups = (warps / 4).max(1);
    let groups_m = (block_m / 64).clamp(1, groups);
    (4 * groups_m, groups / groups_m)
}

/// Whether the leading dimension of A, and of B, is a multiple of `multiple_elems` elements (what
/// a family needs to load that operand in vectors; families prove alignment differently).
pub(crate) fn leading_dims_divisible(problem: &Problem, multiple_elems: u64) -> (bool, bool) {
    use crate::dtype::Layout;
    let lda = match problem.layout_a {
        Layout::Row => problem.k,
        Layout::Col => problem.m,
    };
    let ldb = match problem.layout_b {
        Layout::Row => problem.n,
        Layout::Col => problem.k,
    };
    (lda % multiple_elems == 0, ldb % multiple_elems == 0)
}

/// Elements one thread stages through registers per main-loop iteration.
pub(crate) fn staged_elements_per_thread(config: &TileConfig, paths: LoadPaths) -> u32 {
    (paths.staged_rows(config.block_m, config.block_n) * config.block_k).div_ceil(config.threads())
}

/// Elements of A, and of B, one thread stages through registers per main-loop iteration (0 for
/// an operand loaded in vectors).
pub(crate) fn staged_elements_per_operand(config: &TileConfig, paths: LoadPaths) -> (u32, u32) {
    let a = LoadPaths {
        b: LoadPath::CpAsync,
        ..paths
    };
    let b = LoadPaths {
        a: LoadPath::CpAsync,
        ..paths
    };
    (
        staged_elements_per_thread(config, a),
        staged_elements_per_thread(config, b),
    )
}

/// A family's native configuration: a JSON object of `fields`, listed in key order. It is built
/// in one pass: serde_json's map is a B-tree, and inserting field by field (`json!`,
/// `serde_json::to_value`) was a tenth of a `cuda-sm90` recommendation's instructions
/// (callgrind).
pub(crate) fn native_object<const N: usize>(
    fields: [(&'static str, serde_json::Value); N],
) -> serde_json::Value {
    debug_assert!(
        fields.is_sorted_by_key(|(key, _)| *key),
        "fields in key order"
    );
    serde_json::Value::Object(
        fields
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

/// How a family's compiler arranges `warps` over a `block_m` x `block_n` tile on `mma.sync`:
/// `(warps_m, warps_n)`.
pub(crate) type MmaSyncArrangement = fn(block_m: u32, block_n: u32, warps: u32) -> (u32, u32);

/// The arrangement of `warps` compute warps over a block: wgmma warpgroups when the arch has
/// wgmma and `wgmma_ok` (the family can issue it for this tile), else `mma.sync` warps as the
/// family's compiler arranges them (`mma_sync`); `None` when the warps cannot tile the block.
pub(crate) fn compute_layout(
    block_m: u32,
    block_n: u32,
    warps: u32,
    wgmma_ok: bool,
    problem: &Problem,
    arch: &Arch,
    mma_sync: MmaSyncArrangement,
) -> Option<WarpLayout> {
    if warps == 0 {
        return None;
    }
    let mma = pick_mma(arch, problem, wgmma_ok)?;
    let (warps_m, warps_n) = match mma {
        InstructionFamily::Wgmma => wgmma_warps(block_m, warps),
        _ => mma_sync(block_m, block_n, warps),
    };
    (warps_m.checked_mul(warps_n) == Some(warps)).then_some(WarpLayout {
        warps_m,
        warps_n,
        producer_warps: 0,
        mma,
        swap_ab: false,
    })
}

/// Load paths of families that lower their copies to TMA on Hopper and later and to cp.async
/// before, and stage an operand element-wise when its rows are not 16-byte aligned.
pub(crate) fn tma_or_cp_async(problem: &Problem, arch: &Arch) -> LoadPaths {
    let vectors = if arch.gpu.compute_capability.major >= 9 {
        LoadPath::Tma
    } else {
        LoadPath::CpAsync
    };
    LoadPaths::where_aligned(problem.aligned_a, problem.aligned_b, vectors)
}
