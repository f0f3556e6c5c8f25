//! Hardware descriptions: `carver arch list`, `carver arch show` and the models inside
//! `carver arch detect` / `carver arch calibrate`.
//!
//! [`ArchDescription`] is the full description the cost model reads, field for field; units are
//! in the field names (`_bytes`, `_mhz`, `_bytes_per_s`, `tflops`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tile::InstructionFamily;

/// `carver arch list --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchList {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// Every GPU of the database: the shipped ones, then the user's directory.
    pub gpus: Vec<ArchSummary>,
}

/// One line of `carver arch list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchSummary {
    /// Short key (`h100-sxm`).
    pub key: String,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Microarchitecture family (`hopper`).
    pub architecture: String,
    /// `major.minor` (`9.0`).
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Vendor DRAM bandwidth.
    pub dram_bandwidth_bytes_per_s: f64,
    /// L2 cache size.
    pub l2_size_bytes: u64,
    /// Shared memory one block may use after opting in.
    pub smem_per_block_optin_bytes: u64,
    /// Dense f16 tensor peak, TFLOP/s, when the GPU has one.
    pub f16_tflops: Option<f64>,
    /// `embedded`, `user-file`, `live` or `unknown`: the `kind` of [`Origin`].
    pub origin: String,
}

/// `carver arch show NAME --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchReport {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// The full model, including `calibration` when measured ceilings are stored for it.
    pub arch: ArchDescription,
}

/// A complete hardware description, as the cost model reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchDescription {
    /// Names and provenance.
    pub gpu: GpuIdentity,
    /// One streaming multiprocessor.
    pub sm: Multiprocessor,
    /// The register file.
    pub registers: RegisterFile,
    /// Shared memory.
    pub shared_memory: SharedMemory,
    /// DRAM.
    pub memory: DeviceMemory,
    /// The L2 cache.
    pub l2: L2Cache,
    /// Tensor-core instruction families and the shapes they accept, best first.
    #[serde(default)]
    pub tensor_instructions: Vec<TensorInstruction>,
    /// Dense peak throughput per compute class.
    pub peak: BTreeMap<ComputeClass, Peak>,
    /// Dotted paths of figures that are estimates rather than published or queried values
    /// (for example `"l2.bandwidth_bytes_per_s"`).
    #[serde(default)]
    pub estimated: Vec<String>,
    /// Where this description came from.
    #[serde(default)]
    pub origin: Origin,
    /// Ceilings measured on this GPU by `carver arch calibrate`, when stored; the model uses
    /// them in place of the figures above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// Names and provenance of a GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuIdentity {
    /// Short identifier; the file stem in `hardware-db/`.
    pub key: String,
    /// Marketing name, as NVML reports it where possible (`"NVIDIA H100 80GB HBM3"`).
    pub name: String,
    /// Other names a user may type (`"h100"`), and other names NVML reports for this part.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// `nvidia`.
    pub vendor: String,
    /// Microarchitecture family (`"hopper"`).
    pub architecture: String,
    /// `major.minor` (`"9.0"`).
    pub compute_capability: String,
    /// Where the figures come from (datasheets, whitepapers, device queries).
    pub sources: Vec<String>,
}

/// One streaming multiprocessor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Multiprocessor {
    /// SMs on the GPU.
    pub count: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Maximum boost clock.
    pub boost_clock_mhz: f64,
    /// Clock the vendor's tensor-core peaks assume, and what a long GEMM sustains.
    pub sustained_clock_mhz: f64,
    /// Resident threads per SM.
    pub max_threads: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// Threads one block may have.
    pub max_threads_per_block: u32,
    /// Tensor cores per SM.
    pub tensor_cores: u32,
}

/// The register file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegisterFile {
    /// 32-bit registers per SM.
    pub per_sm: u32,
    /// 32-bit registers one block may use.
    pub per_block: u32,
    /// Registers one thread may use.
    pub per_thread_max: u32,
    /// Registers are granted per warp in multiples of this many.
    pub allocation_unit: u32,
}

/// Shared memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedMemory {
    /// Shared memory of one SM.
    pub per_sm_bytes: u64,
    /// What a block may use without opting in.
    pub per_block_default_bytes: u64,
    /// What a block may use after opting in (`MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub per_block_optin_bytes: u64,
    /// Taken by the system from every resident block.
    pub reserved_per_block_bytes: u64,
    /// Banks.
    pub banks: u32,
    /// Width of one bank.
    pub bank_width_bytes: u32,
    /// Bandwidth of one SM's shared memory.
    pub bytes_per_clock_per_sm: u32,
}

/// DRAM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// `"HBM3"`, `"GDDR6X"`, ...
    pub kind: String,
    /// Capacity.
    pub capacity_bytes: u64,
    /// Bus width.
    pub bus_width_bits: u32,
    /// Memory clock as NVML and the driver report it; bandwidth = 2 x this x bus width / 8.
    pub memory_clock_mhz: f64,
    /// Vendor figure for DRAM bandwidth.
    pub bandwidth_bytes_per_s: f64,
    /// Smallest unit of a global-memory transaction.
    pub sector_bytes: u32,
    /// Cache-line size; a warp's fully coalesced access.
    pub line_bytes: u32,
    /// How fast DRAM streams row segments of a given width, over the full rate (measured; empty
    /// when not measured: every segment of at least a sector streams at the full rate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segment_efficiency: Vec<SegmentEfficiency>,
}

/// The DRAM streaming rate of row segments `bytes` wide, as a fraction of the full rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentEfficiency {
    pub bytes: u32,
    pub efficiency: f64,
}

/// A memory's segment rates in words, after its other figures: nothing when none are listed.
pub struct SegmentRates<'a>(pub &'a [SegmentEfficiency]);

impl std::fmt::Display for SegmentRates<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            let lead = if i == 0 {
                "; DRAM streams row segments at"
            } else {
                ","
            };
            write!(f, "{lead} {} B {:.2}", e.bytes, e.efficiency)?;
        }
        Ok(())
    }
}

/// The L2 cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct L2Cache {
    /// Capacity.
    pub size_bytes: u64,
    /// L2-to-SM bandwidth of the whole GPU.
    pub bandwidth_bytes_per_s: f64,
    /// How many requests for one line, from blocks that read it at the same step, the L2 serves
    /// as one (measured; absent when not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_coalescing: Option<f64>,
}

/// A tensor-core instruction family and the shapes it accepts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInstruction {
    /// How the instruction is issued.
    pub family: InstructionFamily,
    /// Input compute classes this shape applies to.
    pub dtypes: Vec<ComputeClass>,
    /// Legal M of one instruction.
    pub m: Extent,
    /// Legal N of one instruction.
    pub n: Extent,
    /// K of one instruction.
    pub k: u32,
    /// `mma-sync` only: measured cycles of one k-step of a warp's loop that waits for the last
    /// step's accumulators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_cycles: Option<f64>,
}

/// A dimension of an instruction shape: one value (`64`) or a stepped range
/// (`{"min": 8, "max": 256, "step": 8}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Extent {
    /// Exactly this value.
    Fixed(u32),
    /// Any value of the range.
    Range(StepRange),
}

/// An inclusive range of legal values with a step (`8..=256 step 8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRange {
    /// Smallest legal value.
    pub min: u32,
    /// Largest legal value.
    pub max: u32,
    /// Distance between legal values.
    pub step: u32,
}

/// Compute classes that have a peak: the tensor-core input types plus SIMT fp32 / fp64.
///
/// Declared in the order the JSON lists them (`peak` and `peak_tflops` are ordered maps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeClass {
    /// fp16 on tensor cores.
    F16,
    /// bf16 on tensor cores.
    Bf16,
    /// tf32 (fp32 inputs) on tensor cores.
    Tf32,
    /// fp8 (e4m3 / e5m2) on tensor cores.
    Fp8,
    /// int8 on tensor cores.
    Int8,
    /// fp32 on the CUDA cores (no tensor cores).
    Fp32,
    /// fp64 on the CUDA cores.
    Fp64,
}

impl ComputeClass {
    /// The name the JSON uses (`f16`, `bf16`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Tf32 => "tf32",
            Self::Fp8 => "fp8",
            Self::Int8 => "int8",
            Self::Fp32 => "fp32",
            Self::Fp64 => "fp64",
        }
    }
}

impl std::fmt::Display for ComputeClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Dense (non-sparse) peak of one compute class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// Where a description came from, tagged by `kind`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    /// Not recorded.
    #[default]
    Unknown,
    /// Shipped inside the binary, from `hardware-db/<file>`.
    Embedded {
        /// File name in `hardware-db/`.
        file: String,
    },
    /// Read from a user directory (`--hardware-db` / `CARVER_HARDWARE_DB`).
    UserFile {
        /// The file that was read.
        path: String,
    },
    /// Queried from a GPU in this machine.
    Live {
        /// The GPU's UUID.
        uuid: String,
        /// The database entry the query started from, when one matched.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base: Option<String>,
    },
}

/// Ceilings measured on one GPU by `carver arch calibrate` (the stored calibration file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Version of the calibration file format.
    pub format: u32,
    /// GPU UUID as NVML / the driver reports it (`GPU-xxxxxxxx-...`).
    pub uuid: String,
    /// The GPU's name as the driver reports it.
    pub device_name: String,
    /// Database key this device matched, if any.
    #[serde(default)]
    pub base_key: Option<String>,
    /// Kernel-mode driver version at the time of measuring.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// Version of the carver that measured.
    pub carver_version: String,
    /// When it was measured, seconds since the Unix epoch.
    pub measured_at_unix_s: u64,
    /// Measured DRAM bandwidth.
    #[serde(default)]
    pub dram_bandwidth_bytes_per_s: Option<f64>,
    /// Measured L2-to-SM bandwidth.
    #[serde(default)]
    pub l2_bandwidth_bytes_per_s: Option<f64>,
    /// Measured shared-memory bandwidth of the whole GPU.
    #[serde(default)]
    pub smem_bandwidth_bytes_per_s: Option<f64>,
    /// Measured dense throughput per compute class, TFLOP/s.
    #[serde(default)]
    pub peak_tflops: BTreeMap<ComputeClass, f64>,
    /// How each figure was measured, by figure name.
    #[serde(default)]
    pub method: BTreeMap<String, String>,
}
