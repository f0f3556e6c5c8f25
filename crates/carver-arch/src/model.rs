//! The hardware model: one description of a GPU that the cost model reads.
//!
//! Every figure carries its unit in its name (`_bytes`, `_mhz`, `_bytes_per_s`, `tflops`). The same
//! types are the on-disk TOML schema of `hardware-db/`, so a file and the model cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::calibration::Calibration;
pub use crate::class::ComputeClass;
use crate::field::ArchField;

/// A complete hardware description.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arch {
    pub gpu: GpuIdentity,
    pub sm: Multiprocessor,
    pub registers: RegisterFile,
    pub shared_memory: SharedMemory,
    pub memory: DeviceMemory,
    pub l2: L2Cache,
    /// Tensor-core instruction families and the shapes they accept.
    #[serde(default)]
    pub tensor_instructions: Vec<TensorInstruction>,
    /// Dense peak throughput per compute class.
    pub peak: BTreeMap<ComputeClass, Peak>,
    /// Figures that are estimates rather than published or queried values, written as their
    /// dotted paths (for example `"l2.bandwidth_bytes_per_s"`).
    #[serde(default)]
    pub estimated: BTreeSet<ArchField>,
    /// Where this description came from; filled in by the loader, never read from a file.
    #[serde(skip_deserializing, default)]
    pub origin: Origin,
    /// Ceilings measured on this GPU by `carver arch calibrate`, when present.
    #[serde(skip_deserializing, default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuIdentity {
    /// Short identifier; equals the file stem in `hardware-db/`.
    pub key: String,
    /// Marketing name, as NVML reports it where possible (`"NVIDIA H100 80GB HBM3"`).
    pub name: String,
    /// Other names a user may type (`"h100"`), and other names NVML reports for this part.
    #[serde(default)]
    pub aliases: Vec<String>,
    pub vendor: String,
    /// Microarchitecture family (`"hopper"`).
    pub architecture: String,
    pub compute_capability: ComputeCapability,
    /// Where the figures come from (datasheets, whitepapers, device queries).
    pub sources: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Multiprocessor {
    pub count: u32,
    pub warp_size: u32,
    /// Maximum boost clock.
    pub boost_clock_mhz: f64,
    /// Clock the vendor's tensor-core peaks assume, and what a long GEMM sustains.
    pub sustained_clock_mhz: f64,
    pub max_threads: u32,
    pub max_blocks: u32,
    pub max_threads_per_block: u32,
    /// Tensor cores per SM.
    pub tensor_cores: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterFile {
    /// 32-bit registers per SM.
    pub per_sm: u32,
    pub per_block: u32,
    pub per_thread_max: u32,
    /// Registers are granted per warp in multiples of this many.
    pub allocation_unit: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedMemory {
    pub per_sm_bytes: u64,
    pub per_block_default_bytes: u64,
    /// What a block may use after opting in (`MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub per_block_optin_bytes: u64,
    /// Taken by the system from every resident block.
    pub reserved_per_block_bytes: u64,
    pub banks: u32,
    pub bank_width_bytes: u32,
    /// Bandwidth of one SM's shared memory.
    pub bytes_per_clock_per_sm: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceMemory {
    /// `"HBM3"`, `"GDDR6X"`, ...
    pub kind: String,
    pub capacity_bytes: u64,
    pub bus_width_bits: u32,
    /// Memory clock as NVML and the driver report it; bandwidth = 2 x this x bus width / 8
    /// ([`DeviceMemory::bandwidth_from_clock`]).
    pub memory_clock_mhz: f64,
    /// Vendor figure for DRAM bandwidth.
    pub bandwidth_bytes_per_s: f64,
    /// Smallest unit of a global-memory transaction.
    pub sector_bytes: u32,
    /// Cache-line size; a warp's fully coalesced access.
    pub line_bytes: u32,
    /// How fast DRAM streams row segments of a given width, over the full rate (measured;
    /// absent: every segment of at least a sector streams at the full rate). Ascending widths,
    /// the widest at the full rate ([`DeviceMemory::segment_rate`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segment_efficiency: Vec<SegmentEfficiency>,
}

/// The DRAM streaming rate of row segments `bytes` wide, as a fraction of the full rate: the
/// rows of a tile that neighbouring blocks read side by side.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentEfficiency {
    pub bytes: u32,
    pub efficiency: f64,
}

impl DeviceMemory {
    /// The fraction of the full DRAM rate at which row segments `bytes` wide stream: the figure
    /// of the widest listed width not above `bytes` (the narrowest's below it; 1 where nothing
    /// is listed).
    pub fn segment_rate(&self, bytes: f64) -> f64 {
        let mut rate = match self.segment_efficiency.first() {
            Some(narrowest) => narrowest.efficiency,
            None => return 1.0,
        };
        for s in &self.segment_efficiency {
            if f64::from(s.bytes) <= bytes {
                rate = s.efficiency;
            }
        }
        rate
    }

    /// DRAM bandwidth in B/s implied by a memory clock and a bus width: two transfers per clock.
    pub fn bandwidth_from_clock(memory_clock_mhz: f64, bus_width_bits: u32) -> f64 {
        2.0 * memory_clock_mhz * 1e6 * f64::from(bus_width_bits) / 8.0
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Cache {
    pub size_bytes: u64,
    pub bandwidth_bytes_per_s: f64,
    /// How many requests for one line, from blocks that read it at the same step, the L2 serves
    /// as one (measured; absent: none counted). `bandwidth_bytes_per_s` is what the slices serve
    /// to requests for distinct lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_coalescing: Option<f64>,
}

/// How a tensor-core instruction is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstructionFamily {
    /// Volta/Turing/Ampere/Ada warp-level `mma.sync`.
    MmaSync,
    /// Hopper warpgroup-level asynchronous `wgmma.mma_async` (sm_90a).
    Wgmma,
    /// Blackwell `tcgen05.mma` issued by one thread, accumulating in tensor memory.
    Tcgen05,
}

impl InstructionFamily {
    /// The PTX spelling (`mma.sync`), as `Display` writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::MmaSync => "mma.sync",
            Self::Wgmma => "wgmma",
            Self::Tcgen05 => "tcgen05",
        }
    }
}

impl fmt::Display for InstructionFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An inclusive range of legal values with a step (`n = 8..=256 step 8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRange {
    pub min: u32,
    pub max: u32,
    pub step: u32,
}

impl StepRange {
    pub fn contains(&self, v: u32) -> bool {
        v >= self.min && v <= self.max && self.step != 0 && (v - self.min) % self.step == 0
    }
    pub fn values(&self) -> impl Iterator<Item = u32> + '_ {
        (self.min..=self.max).step_by(self.step.max(1) as usize)
    }
}

/// A dimension of an instruction shape: one value or a stepped range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Extent {
    Fixed(u32),
    Range(StepRange),
}

/// By hand rather than `untagged`: a bad number inside a range is then reported as that number,
/// not as "data did not match any variant".
impl<'de> Deserialize<'de> for Extent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, Unexpected};

        struct ExtentVisitor;
        impl<'de> de::Visitor<'de> for ExtentVisitor {
            type Value = Extent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a whole number below 2^32 (like 16) or a stepped range \
                     (like { min = 8, max = 256, step = 8 })",
                )
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Extent, E> {
                u32::try_from(v)
                    .map(Extent::Fixed)
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Extent, E> {
                u32::try_from(v)
                    .map(Extent::Fixed)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Extent, A::Error> {
                StepRange::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(Extent::Range)
            }
        }
        d.deserialize_any(ExtentVisitor)
    }
}

impl Extent {
    pub fn contains(&self, v: u32) -> bool {
        match self {
            Self::Fixed(x) => *x == v,
            Self::Range(r) => r.contains(v),
        }
    }
    /// The smallest legal value: the granularity a tile must respect.
    pub fn min(&self) -> u32 {
        match self {
            Self::Fixed(x) => *x,
            Self::Range(r) => r.min,
        }
    }
    pub fn max(&self) -> u32 {
        match self {
            Self::Fixed(x) => *x,
            Self::Range(r) => r.max,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorInstruction {
    pub family: InstructionFamily,
    /// Input compute classes this shape applies to.
    pub dtypes: Vec<ComputeClass>,
    pub m: Extent,
    pub n: Extent,
    pub k: u32,
    /// `mma-sync` only: cycles one k-step of a warp's loop takes when it waits for the last
    /// step's accumulators (its operand fragments from shared memory, then the instruction),
    /// measured through a GEMM (absent: not measured, and not priced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_cycles: Option<f64>,
}

/// Dense (non-sparse) peak of one compute class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peak {
    /// Vendor figure, TFLOP/s (TOPS for int8), dense, with fp32 accumulation where that matters.
    pub tflops: f64,
    /// Tensor classes: operations per clock of one tensor core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_per_clock_per_tensor_core: Option<f64>,
    /// SIMT classes: operations per clock of one SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_per_clock_per_sm: Option<f64>,
    /// The clock the vendor figure assumes, when not `sm.sustained_clock_mhz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
}

/// Dense throughput in TFLOP/s of `units` units (SMs, or tensor cores) each doing
/// `ops_per_clock` operations per clock at `clock_mhz`.
pub fn throughput_tflops(units: f64, ops_per_clock: f64, clock_mhz: f64) -> f64 {
    units * ops_per_clock * (clock_mhz * 1e6) / 1e12
}

impl Peak {
    /// The clock this peak is quoted at: its own, else the SMs' sustained clock.
    pub fn quoted_clock_mhz(&self, sm: &Multiprocessor) -> f64 {
        self.clock_mhz.unwrap_or(sm.sustained_clock_mhz)
    }

    /// The peak of `class` that this entry's per-clock rate gives on `sm` at its quoted clock:
    /// SMs x tensor cores x rate per tensor core for a tensor class, SMs x rate per SM for a SIMT
    /// class. `None` when the entry lacks the rate its class needs.
    pub fn derived_tflops(&self, class: ComputeClass, sm: &Multiprocessor) -> Option<f64> {
        let sms = f64::from(sm.count);
        let (units, rate) = if class.is_tensor() {
            (
                sms * f64::from(sm.tensor_cores),
                self.flops_per_clock_per_tensor_core?,
            )
        } else {
            (sms, self.flops_per_clock_per_sm?)
        };
        Some(throughput_tflops(units, rate, self.quoted_clock_mhz(sm)))
    }
}

/// `major.minor`, written `"9.0"` in files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputeCapability {
    pub major: u32,
    pub minor: u32,
}

impl ComputeCapability {
    pub fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
    /// `sm_90`-style number (`90`).
    pub fn sm(self) -> u32 {
        self.major * 10 + self.minor
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for ComputeCapability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("compute capability `{s}` is not of the form MAJOR.MINOR (like \"9.0\")");
        let (a, b) = s.split_once('.').ok_or_else(bad)?;
        Ok(Self {
            major: a.trim().parse().map_err(|_| bad())?,
            minor: b.trim().parse().map_err(|_| bad())?,
        })
    }
}

impl Serialize for ComputeCapability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeCapability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Where an [`Arch`] came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    #[default]
    Unknown,
    /// Shipped inside the binary.
    Embedded { file: String },
    /// Read from a user directory (`--hardware-db` / `CARVER_HARDWARE_DB`).
    UserFile { path: String },
    /// Queried from a GPU in this machine, starting from a database entry (`base`) when one matched.
    Live {
        uuid: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base: Option<String>,
    },
}

impl Arch {
    /// Short key (`"h100-sxm"`).
    pub fn key(&self) -> &str {
        &self.gpu.key
    }

    /// Whether `name` is this GPU's key, name or one of its aliases (case and separators ignored).
    pub fn answers_to(&self, name: &str) -> bool {
        let want = normalize_name(name);
        std::iter::once(&self.gpu.key)
            .chain(std::iter::once(&self.gpu.name))
            .chain(self.gpu.aliases.iter())
            .any(|n| normalize_name(n) == want)
    }

    /// DRAM bandwidth the cost model uses: measured when calibrated, else the vendor figure.
    pub fn dram_bandwidth(&self) -> f64 {
        self.calibration
            .as_ref()
            .and_then(|c| c.dram_bandwidth_bytes_per_s)
            .unwrap_or(self.memory.bandwidth_bytes_per_s)
    }

    /// L2 bandwidth the cost model uses: measured when calibrated, else the database figure.
    pub fn l2_bandwidth(&self) -> f64 {
        self.calibration
            .as_ref()
            .and_then(|c| c.l2_bandwidth_bytes_per_s)
            .unwrap_or(self.l2.bandwidth_bytes_per_s)
    }

    /// Shared-memory bandwidth the cost model uses: measured when calibrated, else
    /// [`Arch::derived_smem_bandwidth`].
    pub fn smem_bandwidth(&self) -> f64 {
        self.calibration
            .as_ref()
            .and_then(|c| c.smem_bandwidth_bytes_per_s)
            .unwrap_or_else(|| self.derived_smem_bandwidth())
    }

    /// Shared-memory bandwidth of the whole GPU in B/s: bytes per clock per SM x SMs x the
    /// sustained clock ([`DERIVED_SMEM_BANDWIDTH_INPUTS`]).
    pub fn derived_smem_bandwidth(&self) -> f64 {
        f64::from(self.shared_memory.bytes_per_clock_per_sm)
            * f64::from(self.sm.count)
            * self.sm.sustained_clock_mhz
            * 1e6
    }

    /// Dense peak of a compute class in FLOP/s: measured when calibrated, else the vendor figure.
    pub fn peak_flops(&self, class: ComputeClass) -> Option<f64> {
        let measured = self
            .calibration
            .as_ref()
            .and_then(|c| c.peak_tflops.get(&class).copied());
        measured
            .or_else(|| self.peak.get(&class).map(|p| p.tflops))
            .map(|t| t * 1e12)
    }

    /// Whether the GPU has tensor instructions of `family`, for any class.
    pub fn has_tensor_family(&self, family: InstructionFamily) -> bool {
        self.tensor_instructions.iter().any(|i| i.family == family)
    }

    /// The tensor instruction families usable for a compute class, best first.
    pub fn instructions_for(
        &self,
        class: ComputeClass,
    ) -> impl Iterator<Item = &TensorInstruction> {
        self.tensor_instructions
            .iter()
            .filter(move |i| i.dtypes.contains(&class))
    }

    /// Whether the GPU computes this class at all (on tensor cores, or on the SIMT units).
    pub fn supports(&self, class: ComputeClass) -> bool {
        self.peak.contains_key(&class)
            && (!class.is_tensor() || self.instructions_for(class).next().is_some())
    }

    /// Whether the peak of `class` is an estimate: its entry (`peak.<class>`) or its figure
    /// (`peak.<class>.tflops`) is listed in `estimated`.
    pub fn peak_is_estimated(&self, class: ComputeClass) -> bool {
        self.estimated.contains(&ArchField::Peak(class))
            || self.estimated.contains(&ArchField::PeakTflops(class))
    }

    /// Shared memory one block may use (opt-in limit).
    pub fn smem_per_block(&self) -> u64 {
        self.shared_memory.per_block_optin_bytes
    }

    /// DRAM bandwidth in B/s implied by this GPU's memory clock and bus width.
    pub fn derived_dram_bandwidth(&self) -> f64 {
        DeviceMemory::bandwidth_from_clock(self.memory.memory_clock_mhz, self.memory.bus_width_bits)
    }
}

/// The figures [`Arch::derived_smem_bandwidth`] is computed from: it is an estimate when one of
/// them is.
pub const DERIVED_SMEM_BANDWIDTH_INPUTS: [ArchField; 3] = [
    ArchField::SharedMemoryBytesPerClockPerSm,
    ArchField::SmCount,
    ArchField::SmSustainedClock,
];

/// Lower-cases and drops spaces, dashes, underscores and the `nvidia` prefix, so that
/// `"NVIDIA H100 80GB HBM3"` and `"nvidia-h100-80gb-hbm3"` compare equal.
pub fn normalize_name(name: &str) -> String {
    let lower: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    lower.strip_prefix("nvidia").unwrap_or(&lower).to_string()
}
