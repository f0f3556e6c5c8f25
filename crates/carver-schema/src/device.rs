//! `carver arch detect --format json` and `carver arch calibrate --format json`: this machine's
//! GPUs as queried, and the ceilings measured on one.

use serde::{Deserialize, Serialize};

use crate::arch::{ArchDescription, Calibration};

/// `carver arch detect --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectReport {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// Every GPU of this machine, by CUDA ordinal.
    pub gpus: Vec<DetectedGpu>,
}

/// One GPU of this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectedGpu {
    /// CUDA device ordinal.
    pub index: u64,
    /// Name as the driver reports it.
    pub name: String,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: String,
    /// Kernel-mode driver version from NVML (`580.159.04`).
    pub driver_version: String,
    /// CUDA version the driver supports (`13.0`).
    pub cuda_driver_version: String,
    /// Enforced power limit, when the board reports one.
    pub power_limit_w: Option<f64>,
    /// Database entry the device matched (by name and compute capability), if any.
    pub matched: Option<String>,
    /// The model: the matched entry with every figure the device reported put in (or an
    /// estimate when nothing matched), and the stored calibration when there is one.
    pub arch: ArchDescription,
    /// The CUDA driver's raw answers the model was built from.
    pub driver_query: DriverQuery,
    /// NVML's raw answers.
    pub nvml_query: NvmlQuery,
}

/// Device attributes from the CUDA driver (`cuDeviceGetAttribute` and friends).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriverQuery {
    /// CUDA device ordinal.
    pub index: u64,
    /// Name as the driver reports it.
    pub name: String,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the form NVML uses.
    pub uuid: String,
    /// `major.minor` (`"9.0"`).
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Threads one block may have.
    pub max_threads_per_block: u32,
    /// Shared memory a block may use without opting in.
    pub shared_memory_per_block_default_bytes: u64,
    /// Shared memory a block may use after opting in.
    pub shared_memory_per_block_optin_bytes: u64,
    /// Shared memory of one SM.
    pub shared_memory_per_sm_bytes: u64,
    /// Shared memory the system takes from every resident block.
    pub shared_memory_reserved_per_block_bytes: u64,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use.
    pub registers_per_block: u32,
    /// L2 cache size.
    pub l2_size_bytes: u64,
    /// Peak memory clock as the driver reports it (kHz / 1000).
    pub memory_clock_mhz: f64,
    /// Memory bus width.
    pub memory_bus_width_bits: u32,
    /// Maximum SM clock as the driver reports it (kHz / 1000).
    pub max_sm_clock_mhz: f64,
    /// Device memory.
    pub total_memory_bytes: u64,
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub cuda_driver_version: i32,
}

/// What NVML reports for the same device (found by UUID).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NvmlQuery {
    /// Name as NVML reports it.
    pub name: String,
    /// The device's UUID.
    pub uuid: String,
    /// Kernel-mode driver version (`580.159.04`).
    pub driver_version: String,
    /// Maximum SM clock.
    pub max_sm_clock_mhz: u32,
    /// Maximum memory clock.
    pub max_memory_clock_mhz: u32,
    /// Enforced power limit; `None` where the board does not report one.
    pub power_limit_w: Option<f64>,
}

/// `carver arch calibrate --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrateReport {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// CUDA ordinal of the measured GPU.
    pub device_index: u64,
    /// Its name as the driver reports it.
    pub device_name: String,
    /// Its UUID, the key the calibration is stored under.
    pub uuid: String,
    /// Database entry it matched, if any.
    pub matched: Option<String>,
    /// Where the calibration was stored.
    pub stored_at: String,
    /// Every measured ceiling beside the model's figure for it.
    pub figures: Vec<MeasuredFigure>,
    /// The calibration as stored.
    pub calibration: Calibration,
}

/// One measured ceiling beside the model's figure for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredFigure {
    /// The calibration field it fills (`dram_bandwidth_bytes_per_s`, `peak_tflops.bf16`, ...).
    pub field: String,
    /// Human-readable name of the figure.
    pub label: String,
    /// `B/s` or `TFLOP/s`.
    pub unit: String,
    /// Median over the runs.
    pub measured: f64,
    /// Slowest run.
    pub slowest: f64,
    /// Fastest run.
    pub fastest: f64,
    /// Timed runs.
    pub runs: u64,
    /// The model's figure before calibration (vendor or estimate).
    pub spec: f64,
    /// Whether `spec` is an estimate rather than a published or queried value.
    pub spec_is_estimate: bool,
    /// How it was measured.
    pub method: String,
}
