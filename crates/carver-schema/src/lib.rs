//! The machine-readable output of `carver ... --format json`.
//!
//! Every document carries `schema_version`. Adding an optional field keeps the version; removing
//! or renaming a field, or changing its meaning, bumps it. Tools that read carver's output should
//! depend on this crate (it has no GPU or model code) or check the version themselves.

use serde::{Deserialize, Serialize};

pub use carver_arch::Arch;

/// Version of every document below.
pub const SCHEMA_VERSION: u32 = 1;

mod prediction;
mod recommend;
mod tile;
pub use prediction::*;
pub use recommend::*;
pub use tile::*;

mod cache;
pub use cache::*;

/// `carver arch list --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchList {
    pub schema_version: u32,
    pub gpus: Vec<ArchSummary>,
}

/// One line of `carver arch list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchSummary {
    pub key: String,
    pub name: String,
    pub architecture: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub dram_bandwidth_bytes_per_s: f64,
    pub l2_size_bytes: u64,
    pub smem_per_block_optin_bytes: u64,
    /// Dense f16 tensor peak, TFLOP/s, when the GPU has one.
    pub f16_tflops: Option<f64>,
    /// `embedded` or `user-file`.
    pub origin: String,
}

impl ArchSummary {
    pub fn of(arch: &Arch) -> Self {
        Self {
            key: arch.gpu.key.clone(),
            name: arch.gpu.name.clone(),
            architecture: arch.gpu.architecture.clone(),
            compute_capability: arch.gpu.compute_capability.to_string(),
            sm_count: arch.sm.count,
            dram_bandwidth_bytes_per_s: arch.memory.bandwidth_bytes_per_s,
            l2_size_bytes: arch.l2.size_bytes,
            smem_per_block_optin_bytes: arch.shared_memory.per_block_optin_bytes,
            f16_tflops: arch
                .peak
                .get(&carver_arch::ComputeClass::F16)
                .map(|p| p.tflops),
            origin: match &arch.origin {
                carver_arch::Origin::Embedded { .. } => "embedded",
                carver_arch::Origin::UserFile { .. } => "user-file",
                carver_arch::Origin::Live { .. } => "live",
                carver_arch::Origin::Unknown => "unknown",
            }
            .to_string(),
        }
    }
}

/// `carver arch show NAME --format json` and `carver arch detect --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchReport {
    pub schema_version: u32,
    /// The full model, including `calibration` when measured ceilings are stored for it.
    pub arch: Arch,
}
