//! Everything that can go wrong while detecting or calibrating a GPU.

use thiserror::Error;

/// How to work without a GPU, appended to every "no GPU here" error.
pub const OFFLINE_HINT: &str =
    "plan offline instead with `--arch h100` (or any name from `carver arch list`)";

#[derive(Debug, Error)]
pub enum GpuError {
    #[error(
        "no CUDA driver on this machine (libcuda could not be loaded), so no GPU can be queried; {OFFLINE_HINT}"
    )]
    NoDriver,

    #[error("the CUDA driver reports no GPU ({reason}); {OFFLINE_HINT}")]
    NoDevice { reason: String },

    #[error(
        "NVML (libnvidia-ml, part of the NVIDIA driver) is not usable: {reason}; carver needs it for the driver version, clocks and power limit; {OFFLINE_HINT}"
    )]
    NoNvml { reason: String },

    #[error("{library} is not installed (it could not be loaded): {why}")]
    MissingLibrary {
        library: &'static str,
        why: &'static str,
    },

    #[error("GPU {index} does not exist: this machine has {count} GPU(s), numbered from 0")]
    NoSuchDevice { index: usize, count: usize },

    #[error("CUDA driver call {call} failed: {source}")]
    Driver {
        call: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },

    #[error("NVML call {call} failed: {source}")]
    Nvml {
        call: &'static str,
        #[source]
        source: nvml_wrapper::error::NvmlError,
    },

    #[error("NVRTC could not compile carver's {kernel} kernels: {reason}")]
    Compile {
        kernel: &'static str,
        reason: String,
    },

    #[error("cuBLAS call {call} failed: {source}")]
    Cublas {
        call: &'static str,
        #[source]
        source: cudarc::cublas::result::CublasError,
    },

    #[error("cuBLASLt call {call} failed: {source}")]
    CublasLt {
        call: &'static str,
        #[source]
        source: cudarc::cublaslt::result::CublasError,
    },

    #[error(
        "{library} failed inside {call} ({message}); the installed CUDA libraries do not match what carver was built for (CUDA 13 bindings); {OFFLINE_HINT}"
    )]
    LibraryPanicked {
        library: &'static str,
        call: &'static str,
        message: String,
    },

    #[error(
        "not enough free GPU memory for {what}: needs {needed_bytes} B, {free_bytes} B free; close other GPU programs and retry"
    )]
    OutOfMemory {
        what: &'static str,
        needed_bytes: u64,
        free_bytes: u64,
    },

    #[error("the {what} measurement is not plausible: {reason}")]
    Implausible { what: &'static str, reason: String },

    #[error("the device reported something carver cannot use: {0}")]
    BadQuery(String),

    #[error("NVRTC could not compile the cuda-sm90 kernel {kernel}:\n{log}")]
    KernelCompile { kernel: String, log: String },

    #[error("the cuda-sm90 kernel cannot run {config}: {reason}")]
    UnsupportedConfig {
        config: String,
        reason: carver::family::ConfigError,
    },

    #[error("the cuda-sm90 kernel {config} cannot be placed on this GPU: {reason}")]
    NotPlaceable { config: String, reason: String },

    #[error(
        "the cuda-sm90 kernel {config} spills registers ({registers} registers, {store_bytes} B spill stores, {load_bytes} B spill loads); rejected"
    )]
    Spills {
        config: String,
        registers: u32,
        store_bytes: u32,
        load_bytes: u32,
    },

    #[error("{what} is not supported here: {reason}")]
    Unsupported { what: String, reason: String },

    #[error("cannot read or write {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("tuning worker: {0}")]
    Worker(String),

    #[error(transparent)]
    Arch(#[from] carver_arch::ArchError),
}
