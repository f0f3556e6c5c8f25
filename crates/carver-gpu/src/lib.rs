//! carver on a real GPU: live detection (`carver arch detect`) and calibration
//! (`carver arch calibrate`).
//!
//! The CUDA driver, NVML, NVRTC and cuBLAS are loaded at run time, so this crate builds and its
//! pure parts run on machines without CUDA. On such a machine every entry point returns a
//! [`GpuError`] that says how to plan offline (`--arch h100`); none panics.
//!
//! - [`detect_all`] / [`detect`] / [`detect_arch`]: query devices, match them to the hardware
//!   database by name and compute capability, and build a complete [`carver_arch::Arch`] in which
//!   every figure the device reports replaces the stored one ([`merge_live`] is the pure part).
//! - [`calibrate`]: measure DRAM, L2 and shared-memory bandwidth and bf16 / f16 tensor
//!   throughput, giving a [`carver_arch::Calibration`] to store.
//! - [`tune`]: compile, check and time `cuda-sm90` candidates in a worker process.
//!
//! What these produce converts into `carver_schema`'s documents with `From`
//! ([`DetectedGpu`] into `carver_schema::DetectedGpu`, [`MeasuredFigure`], the tuning worker's
//! `CandidateMeasurement` and `RepackInfo`, ...), which is what the CLI prints.

mod calibrate;
mod cuda;
mod detect;
mod driver;
mod error;
pub mod generation;
mod live;
mod query;
mod schema;
pub mod sm90;
mod timing;
pub mod tune;

pub use calibrate::{
    CalibrationOptions, CalibrationOutcome, MeasuredFigure, Step, calibrate,
    compile_calibration_kernels,
};
pub use detect::{DetectedGpu, detect, detect_all, detect_arch, device_count};
pub use driver::driver_present;
pub use error::{GpuError, OFFLINE_HINT};
pub use live::{
    L2_TO_DRAM_ESTIMATE, LIVE_FIELDS, LiveArch, attach_calibration, key_from_name, merge_live,
};
pub use query::{DriverQuery, NvmlQuery, format_cuda_version, format_uuid};
pub use timing::{RateSummary, Timing};
